/**
 * Remembers our own slice writes until the informer cache shows them. Without it a reconcile
 * that runs right after a create (triggered, say, by a second pod event) would still see the old
 * cache, plan the same create again and publish a duplicate slice. The built-in controller has the
 * same guard (its "endpointSliceTracker").
 *
 * resourceVersions are opaque strings in the API, but in practice etcd revisions: digits that
 * grow. They are compared as numbers when both are digits; otherwise only equality counts.
 * Expectations expire, so a watch event we never get cannot block a Service forever.
 */
import type { V1EndpointSlice } from '../kube/types.js';

const DELETED = Symbol('deleted');
type Expectation = { readonly rv: string | typeof DELETED; readonly at: number };

function rvAtLeast(have: string | undefined, want: string): boolean {
  if (have === undefined) return false;
  if (/^\d+$/.test(have) && /^\d+$/.test(want)) return BigInt(have) >= BigInt(want);
  return have === want;
}

export class SliceTracker {
  private readonly expected = new Map<string, Map<string, Expectation>>();

  constructor(private readonly ttlMs = 30_000) {}

  private forService(svcKey: string): Map<string, Expectation> {
    let m = this.expected.get(svcKey);
    if (m === undefined) {
      m = new Map();
      this.expected.set(svcKey, m);
    }
    return m;
  }

  /** We wrote (created or updated) `name` and the server answered with `rv`. */
  written(svcKey: string, name: string, rv: string | undefined, now = Date.now()): void {
    if (rv === undefined) return;
    this.forService(svcKey).set(name, { rv, at: now });
  }

  deleted(svcKey: string, name: string, now = Date.now()): void {
    this.forService(svcKey).set(name, { rv: DELETED, at: now });
  }

  /** The informer saw `name` deleted: an expectation that it exists can never be met any more. */
  observedDelete(svcKey: string, name: string): void {
    const m = this.expected.get(svcKey);
    if (m === undefined) return;
    m.delete(name);
    if (m.size === 0) this.expected.delete(svcKey);
  }

  /**
   * True when `cached` (the informer's slices of the Service) reflects every write we made.
   * Expectations that are met or expired are dropped on the way.
   */
  isCurrent(svcKey: string, cached: readonly V1EndpointSlice[], now = Date.now()): boolean {
    const m = this.expected.get(svcKey);
    if (m === undefined) return true;
    const byName = new Map(cached.map((s) => [s.metadata?.name ?? '', s]));
    for (const [name, e] of m) {
      const have = byName.get(name);
      const met = e.rv === DELETED ? have === undefined : rvAtLeast(have?.metadata?.resourceVersion, e.rv);
      if (met || now - e.at > this.ttlMs) m.delete(name);
    }
    if (m.size === 0) this.expected.delete(svcKey);
    return m.size === 0;
  }

  /** Services with writes not yet seen, for tests and debugging. */
  size(): number {
    return this.expected.size;
  }
}
