/**
 * The networks a client pod's sidecar serves (docs/design.md, "Pod"): the pod's service-network
 * annotation when it has one (it narrows), else every network its Multus `networks` annotation
 * attaches, in either form (short or JSON, with a namespace or an interface name), each once.
 * Shared by the webhook (which decides whether there is anything to serve) and the sidecar (which
 * reads its own pod), so the two can never disagree.
 */
import { NETWORKS_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../keys.js';
import { ok, type InputError, type Result } from '../result.js';
import { parseNetworks } from './networks.js';
import { networkKey, parseServiceNetwork, type NetworkRef } from './service-network.js';

export interface ServedNetworks {
  /** Which annotation the list came from. */
  readonly source: typeof SERVICE_NETWORK_ANNOTATION | typeof NETWORKS_ANNOTATION;
  readonly networks: NetworkRef[];
}

/** `namespace/name` of each attached network, first occurrence kept (one NAD may be attached twice). */
export function uniqueNetworks(refs: readonly NetworkRef[]): NetworkRef[] {
  const seen = new Set<string>();
  const out: NetworkRef[] = [];
  for (const r of refs) {
    const key = networkKey(r);
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ namespace: r.namespace, name: r.name });
  }
  return out;
}

export function servedNetworks(annotations: Readonly<Record<string, string>> | undefined, namespace: string): Result<ServedNetworks, InputError> {
  const narrowed = annotations?.[SERVICE_NETWORK_ANNOTATION];
  if (narrowed !== undefined) {
    const refs = parseServiceNetwork(narrowed, namespace);
    return refs.ok ? ok({ source: SERVICE_NETWORK_ANNOTATION, networks: refs.value }) : refs;
  }
  const attached = parseNetworks(annotations?.[NETWORKS_ANNOTATION] ?? '', namespace);
  return attached.ok ? ok({ source: NETWORKS_ANNOTATION, networks: uniqueNetworks(attached.value) }) : attached;
}
