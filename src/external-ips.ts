/**
 * A Service's `spec.externalIPs` on a secondary network, and the cluster admin's list of CIDRs
 * they may come from. Served, an external IP captures every client's connections to that
 * address: whoever may write a Service could take over traffic to any address
 * (CVE-2020-8554). So, as the DenyServiceExternalIPs admission plugin reasons, the admin decides:
 * - no list configured: admitted (kube-proxy semantics are not served) with a warning and an
 *   Event saying they are not served;
 * - a list configured (possibly empty): an address inside one of its CIDRs is allowed; a new
 *   address outside every CIDR is denied with the list and the fix. Addresses the Service already
 *   had stay admitted on update (so an old Service can still be changed or cleaned up), as the
 *   plugin does, but are still not served.
 * Pure; shared by the webhook (admission) and the consumers that serve them (each re-checks).
 * docs/decisions/0163-external-ips-allowed-cidrs.md.
 */
import { parseIp } from './annotations/ip.js';
import { parseSourceRange, sourceAllowed, type SourceRange } from './annotations/load-balancer.js';
import { formatInputError, inputError } from './result.js';
import type { V1Service } from './kube/types.js';

/** The admin's setting: undefined means not configured (warn only). */
export type ExternalIPPolicy = { readonly configured: false } | { readonly configured: true; readonly allowed: readonly SourceRange[] };

export const EXTERNAL_IPS_NOT_CONFIGURED: ExternalIPPolicy = { configured: false };

/** Parses the admin's CIDR list, or says which entry is wrong and how to write it. */
export function parseExternalIPPolicy(cidrs: readonly string[] | undefined, where: string): { ok: true; value: ExternalIPPolicy } | { ok: false; error: string } {
  if (cidrs === undefined) return { ok: true, value: EXTERNAL_IPS_NOT_CONFIGURED };
  const allowed: SourceRange[] = [];
  for (const [i, raw] of cidrs.entries()) {
    const r = parseSourceRange(raw);
    if (typeof r === 'string')
      return {
        ok: false,
        error: formatInputError('external IP policy', inputError(`${where}[${i}]`, raw, r, 'write a CIDR such as "192.0.2.0/24" or "2001:db8::/64"; an empty list denies every external IP')),
      };
    allowed.push(r);
  }
  return { ok: true, value: { configured: true, allowed } };
}

/** Whether one external IP is inside the admin's CIDRs (never, when no list is configured). */
export function externalIPAllowed(policy: ExternalIPPolicy, ip: string): boolean {
  if (!policy.configured) return false;
  const p = parseIp(ip.trim());
  if (!p.ok || p.value.prefix !== undefined) return false;
  return sourceAllowed(policy.allowed, p.value.address, p.value.family);
}

export interface ExternalIPVerdict {
  /** Set when a new address is outside the configured CIDRs. */
  readonly deny?: string;
  /** Said at admission (and as an Event): which addresses are not served. */
  readonly warning?: string;
}

/** What admission says about a Service's external IPs; `old` is the stored Service on update. */
export function externalIPsVerdict(svc: V1Service, old: V1Service | undefined, policy: ExternalIPPolicy, object: string): ExternalIPVerdict {
  const ips = svc.spec?.externalIPs ?? [];
  if (ips.length === 0) return {};
  const before = new Set(old?.spec?.externalIPs ?? []);
  if (!policy.configured) {
    return {
      warning:
        `${object}: spec.externalIPs (${ips.join(', ')}) are not served on the secondary network: serving them would let this Service capture every client's traffic to those addresses (CVE-2020-8554); ` +
        'the cluster admin may allow CIDRs for them (externalIPs.allowedCIDRs), or remove spec.externalIPs',
    };
  }
  const outside = ips.filter((ip) => !externalIPAllowed(policy, ip));
  const newOutside = outside.filter((ip) => !before.has(ip));
  const list = policy.allowed.length === 0 ? 'none (every external IP is denied)' : policy.allowed.map((r) => r.cidr).join(', ');
  if (newOutside.length > 0) {
    return {
      deny: formatInputError(
        object,
        inputError(
          'spec.externalIPs',
          newOutside.join(', '),
          `is outside the CIDRs the cluster admin allows for external IPs on secondary networks (${list}); an external IP captures every client's traffic to that address (CVE-2020-8554)`,
          'use an address inside an allowed CIDR, ask the cluster admin to allow it (externalIPs.allowedCIDRs), or remove it',
        ),
      ),
    };
  }
  if (outside.length > 0) {
    return {
      warning: `${object}: spec.externalIPs ${outside.join(', ')} are outside the allowed CIDRs (${list}) and are not served; they are kept only because the Service already had them: remove them`,
    };
  }
  return {};
}
