/**
 * Our own slice writes, from the request until the informer shows them: the one place that tells
 * "the cache is behind us" and "this event is only our own write coming back" from real changes.
 * Three questions, one record per slice:
 *  - isCurrent: does the cache reflect every write we made? Without it a reconcile that runs right
 *    after a create (triggered, say, by a second pod event) would still see the old cache, plan
 *    the same create again and publish a duplicate slice. The built-in controller has the same
 *    guard (its "endpointSliceTracker").
 *  - observed: is a slice event the echo of our own create or update (exactly the
 *    resourceVersion the server gave us)? That event needs no reconcile; on a cold start it would
 *    be one more, useless, per Service.
 *  - beginWrites/endWrites: the watch can deliver our own write before its answer, so events that
 *    arrive while a Service's writes are in flight are held and judged once they are done.
 *
 * resourceVersions are opaque strings in the API, but in practice etcd revisions: digits that
 * grow. They are compared as numbers when both are digits; otherwise only equality counts.
 * Expectations expire, so a watch event we never get cannot block a Service forever.
 */
import type { V1EndpointSlice } from '../../src/kube/types.js';

const DELETED = Symbol('deleted');
/** A write or delete of ours not yet in the cache; `answer`: the server's answer to the write. */
type Expectation = { readonly rv: string | typeof DELETED; readonly at: number; readonly answer?: V1EndpointSlice };

function rvAtLeast(have: string | undefined, want: string): boolean {
  if (have === undefined) return false;
  if (/^\d+$/.test(have) && /^\d+$/.test(want)) return BigInt(have) >= BigInt(want);
  return have === want;
}

/** What a slice event is, for the reconciler: our own write's echo, held during writes, or news. */
export type Observation = 'own' | 'held' | 'foreign';

const echoKey = (svcKey: string, name: string): string => `${svcKey}\u0000${name}`;

export class SliceTracker {
  private readonly expected = new Map<string, Map<string, Expectation>>();
  /** resourceVersion our last create or update of each slice got (`<svcKey>\u0000<name>`), until its event. */
  private readonly echoes = new Map<string, string>();
  /** Per Service with writes in flight: the events (name, resourceVersion) that arrived meanwhile. */
  private readonly inFlight = new Map<string, { name: string; rv: string | undefined }[]>();

  constructor(private readonly ttlMs = 30_000) {}

  private forService(svcKey: string): Map<string, Expectation> {
    let m = this.expected.get(svcKey);
    if (m === undefined) {
      m = new Map();
      this.expected.set(svcKey, m);
    }
    return m;
  }

  /** We wrote (created or updated) `name` and the server answered with `rv` (and `answer`, the object). */
  written(svcKey: string, name: string, rv: string | undefined, now = Date.now(), answer?: V1EndpointSlice): void {
    if (rv === undefined) return;
    this.forService(svcKey).set(name, { rv, at: now, ...(answer !== undefined ? { answer } : {}) });
    this.echoes.set(echoKey(svcKey, name), rv);
  }

  deleted(svcKey: string, name: string, now = Date.now()): void {
    this.forService(svcKey).set(name, { rv: DELETED, at: now });
  }

  /** The informer saw `name` deleted: an expectation that it exists can never be met any more. */
  observedDelete(svcKey: string, name: string): void {
    this.echoes.delete(echoKey(svcKey, name));
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

  /**
   * The Service's slices as the cache will show them once the echoes of our writes arrive: each
   * slice we wrote that the cache does not show yet is the server's answer, each we deleted is
   * gone. That answer is what the echo will carry (a write by anyone else since would make our
   * next update conflict, 409, and retry). Undefined when a write is known only by its
   * resourceVersion. For the fast path of a deletion or Ready flip, which must not wait for an echo.
   */
  overlay(svcKey: string, cached: readonly V1EndpointSlice[], now = Date.now()): V1EndpointSlice[] | undefined {
    if (this.isCurrent(svcKey, cached, now)) return [...cached];
    const byName = new Map(cached.map((s) => [s.metadata?.name ?? '', s]));
    for (const [name, e] of this.expected.get(svcKey) ?? []) {
      if (e.rv === DELETED) byName.delete(name);
      else if (e.answer !== undefined) byName.set(name, e.answer);
      else return undefined;
    }
    return [...byName.values()];
  }

  /**
   * A slice add or update event. 'held' while the Service's writes are in flight (endWrites judges
   * it); 'own' (once) when it carries the resourceVersion our own write got; else 'foreign'.
   */
  observed(svcKey: string, name: string, rv: string | undefined): Observation {
    const held = this.inFlight.get(svcKey);
    if (held !== undefined) {
      held.push({ name, rv });
      return 'held';
    }
    return this.consumeEcho(svcKey, name, rv) ? 'own' : 'foreign';
  }

  /** The Service's writes start: its slice events are held until endWrites. */
  beginWrites(svcKey: string): void {
    this.inFlight.set(svcKey, []);
  }

  /** The writes are done (or failed): true when an event held meanwhile was not our own echo. */
  endWrites(svcKey: string): boolean {
    const held = this.inFlight.get(svcKey) ?? [];
    this.inFlight.delete(svcKey);
    let foreign = false;
    for (const e of held) if (!this.consumeEcho(svcKey, e.name, e.rv)) foreign = true;
    return foreign;
  }

  private consumeEcho(svcKey: string, name: string, rv: string | undefined): boolean {
    const k = echoKey(svcKey, name);
    const mine = this.echoes.get(k);
    if (mine === undefined || mine !== rv) return false;
    this.echoes.delete(k);
    return true;
  }

  /** Services with writes not yet seen, for tests and debugging. */
  size(): number {
    return this.expected.size;
  }
}
