/**
 * Service validation, external IPs (src/external-ips.ts): wraps the Service validation handler.
 * A Service that the handler admits and that is on a secondary network gets, for its
 * `spec.externalIPs`, a warning and a Warning Event when they are not served, or a denial when a
 * new address is outside the CIDRs the cluster admin allows.
 */
import { SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import type { V1Service } from '../../src/kube/types.js';
import { externalIPsVerdict, type ExternalIPPolicy } from '../../src/external-ips.js';
import type { Handler, ServiceEventWriter } from './handlers.js';
import { allowed, denied } from './responses.js';
import { describeService } from './service.js';

/** Event reason on a Service whose external IPs are not served. */
export const REASON_EXTERNAL_IPS_NOT_SERVED = 'ExternalIPsNotServed';

export function withExternalIPs(inner: Handler, policy: ExternalIPPolicy, events?: ServiceEventWriter): Handler {
  return async (req) => {
    const handled = await inner(req);
    const svc = req.object as V1Service | undefined;
    if (!handled.response.allowed || svc === undefined || (svc.spec?.externalIPs ?? []).length === 0) return handled;
    // Only Services on a network, and not one being deleted (never block a finalizer's removal).
    if (svc.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] === undefined) return handled;
    if (svc.metadata.deletionTimestamp !== undefined && svc.metadata.deletionTimestamp !== null) return handled;
    const namespace = req.namespace ?? svc.metadata.namespace ?? '';
    const old = req.operation === 'UPDATE' ? (req.oldObject as V1Service | undefined) : undefined;
    const verdict = externalIPsVerdict(svc, old, policy, describeService(svc, namespace));
    const warnings = handled.response.warnings ?? [];
    if (verdict.deny !== undefined) return { response: denied(req.uid, 403, verdict.deny, warnings), outcome: 'denied', reason: 'external-ip-not-allowed' };
    if (verdict.warning === undefined) return handled;
    if (req.dryRun !== true && events !== undefined) await events(svc, namespace, REASON_EXTERNAL_IPS_NOT_SERVED, verdict.warning);
    return {
      ...handled,
      response: { ...allowed(req.uid, [...warnings, verdict.warning]), ...(handled.response.patch !== undefined ? { patch: handled.response.patch, patchType: handled.response.patchType } : {}) },
      reason: 'with-warnings',
    };
  };
}
