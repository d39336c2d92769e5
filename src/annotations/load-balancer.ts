/**
 * A LoadBalancer Service's fields the proxies act on, read and checked where they enter: the
 * ingress IPs of `status.loadBalancer.ingress` (written by the load-balancer implementation, e.g.
 * MetalLB) and `spec.loadBalancerSourceRanges` (the tenant's). Both end up in netfilter rules on
 * nodes and in pods, so nothing reaches a rule unchecked:
 * - an ingress IP must be a plain unicast address (no prefix, no zone; not loopback, link-local,
 *   unspecified, multicast, broadcast or IPv4-mapped) of a family the Service has a cluster IP
 *   of, not one of the reader's own addresses (the
 *   node's or the pod's: a DNAT on it would capture the host's own traffic), at most
 *   MAX_INGRESS_IPS of them; `ipMode: Proxy` entries are not served (kube-proxy's rule: the load
 *   balancer itself forwards to the nodes), hostname-only entries are ignored as kube-proxy does;
 * - a source range must be a CIDR (host bits are masked, as kube-proxy's parser does), at most
 *   MAX_SOURCE_RANGES. A Service that lists ranges keeps them even when some are bad: a bad entry
 *   is dropped, never widened to "every source" (fail closed), and a family with no valid range
 *   admits no source at all (docs/decisions/0034-loadbalancer-serving.md).
 * Pure; every problem names the field, the value and the fix.
 */
import type { V1Service } from '../kube/types.js';
import { inputError, type InputError } from '../result.js';
import { specialAddress } from './address-class.js';
import { bigIntToIp, ipToBigInt, parseIp } from './ip.js';

export type IpFamily = 4 | 6;

export interface IngressAddress {
  /** Normalised. */
  readonly address: string;
  readonly family: IpFamily;
}

export interface SourceRange {
  /** `<network address>/<prefix>`, host bits cleared, normalised. */
  readonly cidr: string;
  readonly family: IpFamily;
  readonly network: bigint;
  readonly prefix: number;
}

export interface LoadBalancerView {
  /** Ingress IPs to serve (`ipMode` VIP or unset), valid, unique, in status order. */
  readonly vips: readonly IngressAddress[];
  /** Valid ingress IPs with `ipMode: Proxy`: not programmed. */
  readonly proxied: readonly string[];
  /** undefined: the Service lists no source ranges (every source). Otherwise its valid ranges (possibly none). */
  readonly sourceRanges: readonly SourceRange[] | undefined;
  readonly problems: readonly InputError[];
}

/** More ingress IPs than this is not a load balancer's status but a flood of rules: the rest are dropped. */
export const MAX_INGRESS_IPS = 32;
/** Each range is a rule per ingress IP and port: a sane bound, far above real firewalls' lists. */
export const MAX_SOURCE_RANGES = 256;

export const INGRESS_KEY = 'status.loadBalancer.ingress';
export const SOURCE_RANGES_KEY = 'spec.loadBalancerSourceRanges';

const NONE: LoadBalancerView = { vips: [], proxied: [], sourceRanges: undefined, problems: [] };

/** Reads one Service; `own` holds the reader's own addresses (normalised), which are never served as ingress IPs. */
export function readLoadBalancer(svc: V1Service, own: ReadonlySet<string> = new Set()): LoadBalancerView {
  if (svc.spec?.type !== 'LoadBalancer') return NONE;
  const problems: InputError[] = [];
  const vips: IngressAddress[] = [];
  const proxied: string[] = [];
  const seen = new Set<string>();
  const ingress = svc.status?.loadBalancer?.ingress ?? [];
  // An ingress IP is served on the Service's cluster IP of its family (its endpoints, its slices):
  // a family the Service does not have is not served (kube-proxy skips it too), and said.
  const families = new Set<IpFamily>();
  for (const text of svc.spec.clusterIPs ?? (svc.spec.clusterIP !== undefined ? [svc.spec.clusterIP] : [])) {
    const p = parseIp(text);
    if (p.ok) families.add(p.value.family);
  }
  ingress.forEach((entry, i) => {
    const key = `${INGRESS_KEY}[${i}].ip`;
    const text = entry.ip;
    if (text === undefined || text === '') return; // a hostname-only entry: nothing to match on
    if (vips.length + proxied.length >= MAX_INGRESS_IPS) {
      problems.push(inputError(key, text, `is past the first ${MAX_INGRESS_IPS} ingress IPs, which are all that is served`, 'have the load balancer give this Service fewer addresses'));
      return;
    }
    const p = parseIp(text);
    const why = !p.ok
      ? p.error
      : p.value.prefix !== undefined
        ? 'has a prefix length; an ingress IP is one address'
        : (specialAddress(p.value.address, p.value.family) ?? (own.has(p.value.address) ? `is a node's or the reading pod's own address ${p.value.address}` : undefined));
    if (why !== undefined || !p.ok) {
      problems.push(
        inputError(key, text, `${why ?? 'is not an IP address'}: it is not served`, 'the load-balancer implementation must assign a unicast address from its pool that no node or pod holds'),
      );
      return;
    }
    if (seen.has(p.value.address)) return;
    seen.add(p.value.address);
    if (families.size > 0 && !families.has(p.value.family)) {
      const has = [...families].map((f) => `IPv${f}`).join(' and ');
      problems.push(
        inputError(
          key,
          text,
          `is an IPv${p.value.family} address but the Service has only ${has} cluster IPs (spec.ipFamilies): it is not served`,
          `make the Service dual-stack (spec.ipFamilyPolicy: PreferDualStack or RequireDualStack), or have the load balancer assign an ${has} address`,
        ),
      );
      return;
    }
    const mode = entry.ipMode ?? 'VIP';
    if (mode === 'Proxy') proxied.push(p.value.address);
    else if (mode === 'VIP') vips.push({ address: p.value.address, family: p.value.family });
    else problems.push(inputError(`${INGRESS_KEY}[${i}].ipMode`, mode, 'is neither VIP nor Proxy: the address is not served', 'the load-balancer implementation writes VIP, Proxy, or nothing'));
  });
  return { vips, proxied, sourceRanges: readSourceRanges(svc.spec.loadBalancerSourceRanges, problems), problems };
}

function readSourceRanges(list: readonly string[] | undefined, problems: InputError[]): SourceRange[] | undefined {
  if (list === undefined || list.length === 0) return undefined;
  const out = new Map<string, SourceRange>();
  list.forEach((raw, i) => {
    const key = `${SOURCE_RANGES_KEY}[${i}]`;
    if (i >= MAX_SOURCE_RANGES) {
      if (i === MAX_SOURCE_RANGES)
        problems.push(
          inputError(key, raw, `is past the first ${MAX_SOURCE_RANGES} source ranges; this and the later ones are ignored (those sources are refused)`, 'merge ranges into fewer, larger CIDRs'),
        );
      return;
    }
    const r = parseSourceRange(raw);
    if (typeof r === 'string')
      problems.push(inputError(key, raw, `${r}; this entry is ignored (its sources are refused, the other ranges still apply)`, 'write a CIDR such as "203.0.113.0/24" or "2001:db8::/48"'));
    else out.set(r.cidr, r);
  });
  return [...out.values()];
}

/** One CIDR (surrounding blanks allowed, as kube-proxy trims them), or why not. */
export function parseSourceRange(raw: string): SourceRange | string {
  const text = raw.trim();
  if (!text.includes('/')) return 'has no prefix length';
  const p = parseIp(text);
  if (!p.ok) return p.error;
  if (p.value.address.includes('%')) return 'has an IPv6 zone';
  const prefix = p.value.prefix ?? 0;
  const bits = p.value.family === 4 ? 32 : 128;
  const mask = ((1n << BigInt(bits)) - 1n) ^ ((1n << BigInt(bits - prefix)) - 1n);
  const network = ipToBigInt(p.value.address, p.value.family) & mask;
  return { cidr: `${bigIntToIp(network, p.value.family)}/${prefix}`, family: p.value.family, network, prefix };
}

/**
 * The ranges of one family as rule text: undefined when the Service lists no ranges (every
 * source); otherwise that family's CIDRs, possibly none (then no source of that family is admitted).
 */
export function rangesOfFamily(view: Pick<LoadBalancerView, 'sourceRanges'>, family: IpFamily): readonly string[] | undefined {
  return view.sourceRanges?.filter((r) => r.family === family).map((r) => r.cidr);
}

/** Whether a source address (normalised) is admitted by the Service's ranges. */
export function sourceAllowed(ranges: readonly SourceRange[] | undefined, address: string, family: IpFamily): boolean {
  if (ranges === undefined) return true;
  const n = ipToBigInt(address, family);
  const bits = family === 4 ? 32 : 128;
  return ranges.some((r) => r.family === family && n >> BigInt(bits - r.prefix) === r.network >> BigInt(bits - r.prefix));
}
