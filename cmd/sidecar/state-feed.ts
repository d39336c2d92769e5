/**
 * The sidecar's state stage fed by its informers' events (issue 24: a one-endpoint change at
 * 10,000 Services must not pass over 10,000 Services). The runtime hands every add, update and
 * delete of the Services and of the current slice informer here; a sync's state is then
 * StateMemo.step of those events (src/dataplane/incremental.ts), which costs the change. The
 * informers' whole lists, with the Service cap over them, are read only when a step cannot say
 * it all:
 * - the first compute, and after the pod's networks changed (the cap, the interfaces and the
 *   slice selector all depend on them);
 * - after the slice informer was replaced (a new selector: its objects are all new);
 * - when a Service changed while a network is or was over the cap (cmd/sidecar/service-cap.ts: which
 *   Services are left out may change beyond the events);
 * - when the memo does not hold an event's `before` (an informer that broke its identity rule,
 *   src/kube/informer.ts Change): the lists are the truth.
 * A Service change otherwise costs one cap pass (ServiceCap.apply counts every Service), not a
 * state pass; a slice change costs neither.
 */
import { type Change, StateMemo, type PodInterface, type StateOutput } from '../../src/dataplane/index.js';
import type { NetworkRef } from '../../src/annotations/service-network.js';
import type { ClientPlace } from '../../src/service-semantics/endpoints.js';
import { clientPlace } from '../../src/service-semantics/client-place.js';
import { objectKey, type KubeObject, type V1EndpointSlice, type V1Service } from '../../src/kube/types.js';
import { ServiceCap, type CapResult } from './service-cap.js';

export interface FeedInput {
  /** The pod's served networks; a new array means they changed (the runtime replaces it only then). */
  readonly served: readonly NetworkRef[];
  readonly interfaces: readonly PodInterface[];
  /** The informers' whole lists, read only when the feed cannot step (above). */
  readonly services: () => readonly V1Service[];
  readonly slices: () => readonly V1EndpointSlice[];
}

export interface FeedOutput extends StateOutput {
  /** The cap's verdict when this compute decided it again; undefined: the same as last time. */
  readonly over?: CapResult['over'];
  /** Whether this compute passed over the lists (tests and probes). */
  readonly whole: boolean;
}

/** One kind's events since the last compute, one per object key: the first `before` and the last `after`. */
class Pending<T extends KubeObject> {
  private byKey = new Map<string, { before: T | undefined; after: T | undefined }>();
  note(before: T | undefined, after: T | undefined): void {
    const obj = after ?? before;
    if (obj === undefined) return;
    const key = objectKey(obj);
    const c = this.byKey.get(key);
    if (c === undefined) this.byKey.set(key, { before, after });
    else c.after = after;
  }
  get size(): number {
    return this.byKey.size;
  }
  take(): Change<T>[] {
    const out = [...this.byKey.values()];
    this.byKey = new Map();
    return out;
  }
}

export class StateFeed {
  readonly memo = new StateMemo();
  private readonly cap: ServiceCap;
  private services = new Pending<V1Service>();
  private slices = new Pending<V1EndpointSlice>();
  /** The next compute reads the lists (nothing stepped yet, or a reason above). */
  private whole = true;
  private served: readonly NetworkRef[] | undefined;
  /** Some network was over the cap at the last decision. */
  private overAny = false;

  /**
   * The pod's node (NODE_NAME) and zone (NODE_ZONE): internalTrafficPolicy Local and topology
   * hints; '' for unknown (no endpoint is local, zone hints unused). Without a zone setting the
   * zone is learned from an endpoint of ours on this node and then kept (a node does not change
   * zone); until one appears, each compute looks again (a pass over the slices, on such a pod only).
   */
  constructor(
    maxServicesPerNetwork: number,
    private readonly nodeName = '',
    private zone = '',
  ) {
    this.cap = new ServiceCap(maxServicesPerNetwork);
  }

  private place(slices: () => Iterable<V1EndpointSlice>): ClientPlace {
    if (this.zone === '' && this.nodeName !== '') this.zone = clientPlace(this.nodeName, '', slices()).zone;
    return { nodeName: this.nodeName, zone: this.zone };
  }

  get maxServicesPerNetwork(): number {
    return this.cap.cap;
  }

  /** A Service event: added (before undefined), updated, or deleted (after undefined). */
  service(before: V1Service | undefined, after: V1Service | undefined): void {
    if (!this.whole) this.services.note(before, after);
  }

  /** An event of the slice informer whose objects are used (not of one still listing). */
  slice(before: V1EndpointSlice | undefined, after: V1EndpointSlice | undefined): void {
    if (!this.whole) this.slices.note(before, after);
  }

  /** The slices' informer was replaced (or dropped): the next compute reads the new list. */
  slicesReplaced(): void {
    this.whole = true;
    this.services = new Pending();
    this.slices = new Pending();
  }

  compute(input: FeedInput): FeedOutput {
    if (input.served !== this.served) this.whole = true;
    let capped: CapResult | undefined;
    if (!this.whole && this.services.size > 0) {
      capped = this.cap.apply(input.services(), input.served);
      if (capped.over.length > 0 || this.overAny) this.whole = true;
    }
    const place = this.place(input.slices);
    const services = this.services.take();
    const slices = this.slices.take();
    let out = this.whole ? undefined : this.memo.step({ interfaces: input.interfaces, services, slices, place });
    const whole = out === undefined;
    if (out === undefined) {
      capped ??= this.cap.apply(input.services(), input.served);
      out = this.memo.update({ interfaces: input.interfaces, services: capped.services, slices: input.slices(), place });
    }
    this.whole = false;
    this.served = input.served;
    if (capped !== undefined) this.overAny = capped.over.length > 0;
    return { ...out, whole, ...(capped !== undefined ? { over: capped.over } : {}) };
  }
}
