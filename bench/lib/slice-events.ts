/**
 * Which endpoint addresses of a Service became ready, or stopped being ready, with each
 * EndpointSlice watch event: the "slice event that carries the change" a proxy acts on. Pure; the
 * caller timestamps events on receipt.
 */
import type { V1EndpointSlice } from '../../src/kube/types.js';

export interface SliceChange {
  readonly service: string;
  /** The slice's manager (`endpointslice.kubernetes.io/managed-by`). */
  readonly manager: string;
  readonly added: readonly string[];
  readonly removed: readonly string[];
}

const SERVICE_LABEL = 'kubernetes.io/service-name';
const MANAGED_BY_LABEL = 'endpointslice.kubernetes.io/managed-by';

/** Addresses of endpoints a proxy sends new connections to: ready (an absent condition counts as ready, as the API says). */
export function readyAddresses(slice: V1EndpointSlice): string[] {
  return (slice.endpoints ?? []).filter((e) => e.conditions?.ready !== false).flatMap((e) => e.addresses);
}

/** Keeps each slice's ready addresses and reports, per event, what changed for its Service and manager. */
export class SliceTracker {
  private readonly slices = new Map<string, { service: string; manager: string; ready: readonly string[] }>();

  private union(service: string, manager: string): Set<string> {
    const out = new Set<string>();
    for (const s of this.slices.values()) if (s.service === service && s.manager === manager) for (const a of s.ready) out.add(a);
    return out;
  }

  /** One watch event (ADDED, MODIFIED, DELETED; BOOKMARK is ignored). */
  event(type: string, slice: V1EndpointSlice): SliceChange | undefined {
    const name = `${slice.metadata?.namespace ?? ''}/${slice.metadata?.name ?? ''}`;
    const labels = slice.metadata?.labels ?? {};
    const service = labels[SERVICE_LABEL];
    const manager = labels[MANAGED_BY_LABEL] ?? '';
    if (service === undefined || type === 'BOOKMARK') return undefined;
    const before = this.union(service, manager);
    if (type === 'DELETED') this.slices.delete(name);
    else this.slices.set(name, { service, manager, ready: readyAddresses(slice) });
    const after = this.union(service, manager);
    const added = [...after].filter((a) => !before.has(a));
    const removed = [...before].filter((a) => !after.has(a));
    return added.length + removed.length > 0 ? { service, manager, added, removed } : undefined;
  }

  ready(service: string, manager: string): string[] {
    return [...this.union(service, manager)].sort();
  }
}
