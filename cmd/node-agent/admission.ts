/**
 * Which opted-in Services the node agent serves, re-checked here because Services also arrive
 * without the webhook (being deleted, label only, written while it was down). Pure.
 *
 * - over its budget per object (slim.ts): not served;
 * - a network of another namespace that the NAD's owner has not shared with the Service's
 *   namespace (src/annotations/nad-sharing.ts, from the agent's own NAD cache) is not served for
 *   it: not among its networks here, and slices on it in that namespace are dropped (the
 *   controller writes none; a stale one is not trusted). A Service with no network left is not
 *   served at all;
 * - past the per-network cap, in targets, shared max-min between namespaces (src/service-cap.ts,
 *   the sidecars' budget; the agent has no namespace of its own): a namespace over its share loses
 *   its own Services only.
 * Each is a problem on the Service (a Warning Event in its own namespace) and counted by reason.
 */
import { nadSharedWith } from '../../src/annotations/nad-sharing.js';
import { networkKey, type NetworkRef } from '../../src/annotations/service-network.js';
import { sliceInfo } from '../../src/dataplane/index.js';
import type { NetworkAttachmentDefinition, V1EndpointSlice, V1Service } from '../../src/kube/types.js';
import { ServiceCap, serviceName } from '../../src/service-cap.js';
import { refusalOf } from './slim.js';

export type RefusalReason = 'ServiceOverBudget' | 'NetworkNotShared' | 'ServiceCapReached';
export const REFUSAL_REASONS: readonly RefusalReason[] = ['ServiceOverBudget', 'NetworkNotShared', 'ServiceCapReached'];

export interface ServiceRefusal {
  readonly kind: 'Service';
  readonly namespace: string;
  readonly name: string;
  readonly reason: RefusalReason;
  readonly message: string;
  /** How many Services it stands for: one, or all that a namespace over its share loses (one Event says it). */
  readonly services: number;
}

export interface Admission {
  /** The Services to serve, in input order (the same objects). */
  readonly services: readonly V1Service[];
  /** Each served Service's networks that it may use. */
  readonly networksOf: ReadonlyMap<V1Service, readonly NetworkRef[]>;
  /** The slices minus those on a network not shared with their namespace (the same objects). */
  readonly slices: readonly V1EndpointSlice[];
  readonly refused: readonly ServiceRefusal[];
}

/** A slice's namespace and network key, parsed once per object. */
const sliceNets = new WeakMap<V1EndpointSlice, { ns: string; net: string | undefined }>();
function sliceNet(slice: V1EndpointSlice): { ns: string; net: string | undefined } {
  let v = sliceNets.get(slice);
  if (v === undefined) {
    v = { ns: slice.metadata?.namespace ?? '', net: sliceInfo(slice).net };
    sliceNets.set(slice, v);
  }
  return v;
}

export function admitServices(
  services: readonly V1Service[],
  slices: readonly V1EndpointSlice[],
  nads: readonly NetworkAttachmentDefinition[],
  networksOf: (s: V1Service) => readonly NetworkRef[],
  cap: ServiceCap,
): Admission {
  const nadByKey = new Map(nads.map((n) => [`${n.metadata?.namespace ?? ''}/${n.metadata?.name ?? ''}`, n]));
  const refused: ServiceRefusal[] = [];
  const refuse = (svc: V1Service, reason: RefusalReason, message: string, services = 1): void => {
    refused.push({ kind: 'Service', namespace: svc.metadata?.namespace ?? '', name: svc.metadata?.name ?? '', reason, message, services });
  };
  const shared: V1Service[] = [];
  const networksOfShared = new Map<V1Service, readonly NetworkRef[]>();
  const nets = new Map<string, NetworkRef>();
  /** `<namespace>\n<network>` → whether the network is shared with the namespace. */
  const sharing = new Map<string, string | undefined>();
  const denial = (ref: NetworkRef, ns: string): string | undefined => {
    if (ref.namespace === ns) return undefined;
    const key = `${ns}\n${networkKey(ref)}`;
    if (!sharing.has(key)) {
      const nad = nadByKey.get(networkKey(ref));
      const s = nadSharedWith(ref, ns, nad?.metadata?.annotations, nad !== undefined);
      sharing.set(key, s.allowed ? undefined : s.message);
    }
    return sharing.get(key);
  };
  for (const svc of services) {
    const over = refusalOf(svc);
    if (over !== undefined) {
      refuse(svc, 'ServiceOverBudget', over.message);
      continue;
    }
    const ns = svc.metadata?.namespace ?? '';
    const refs = networksOf(svc);
    const usable = refs.filter((ref) => denial(ref, ns) === undefined);
    if (usable.length < refs.length) {
      const why = refs.map((ref) => denial(ref, ns)).find((m) => m !== undefined) ?? '';
      refuse(svc, 'NetworkNotShared', `Service ${serviceName(svc)}: ${why}. The node agent serves ${usable.length === 0 ? 'none of this Service' : 'it only on its other networks'} until then`);
      if (usable.length === 0) continue;
    }
    shared.push(svc);
    networksOfShared.set(svc, usable.length === refs.length ? refs : usable);
    for (const ref of usable) nets.set(networkKey(ref), ref);
  }
  const keptSlices =
    sharing.size === 0
      ? slices
      : slices.filter((sl) => {
          const { ns, net } = sliceNet(sl);
          if (net === undefined) return true;
          const [nadNs = '', nadName = ''] = net.split('/');
          return denial({ namespace: nadNs, name: nadName }, ns) === undefined;
        });
  const capped = cap.apply(shared, [...nets.values()], (svc, ref) => denial(ref, svc.metadata?.namespace ?? '') === undefined);
  for (const o of capped.over)
    for (const n of o.namespaces) {
      const first = shared.find((s) => serviceName(s) === n.dropped[0]);
      if (first === undefined) continue;
      refuse(
        first,
        'ServiceCapReached',
        `network ${o.network} has ${o.total} Service ports (targets), more than the node agent serves (${cap.cap}); namespace ${n.namespace} asks for ${n.demand}, over its fair share of ${n.share}, so ${n.dropped.length} of its Services are not served on this node: ${n.dropped.slice(0, 5).join(', ')}${n.dropped.length > 5 ? ', ...' : ''}; other namespaces keep theirs`,
        n.dropped.length,
      );
    }
  return { services: capped.services, networksOf: networksOfShared, slices: keptSlices, refused };
}
