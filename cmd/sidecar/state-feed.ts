/**
 * The sidecar's state stage fed by its informers' events (a one-endpoint change at
 * 10,000 Services must not pass over 10,000 Services). The runtime hands every add, update and
 * delete of the Services and of the current slice informer here; a sync's state is then
 * StateMemo.step of those events (src/dataplane/incremental.ts), which costs the change. The
 * informers' whole lists, with the Service cap over them, are read only when a step cannot say
 * it all:
 * - the first compute, and after the pod's networks changed (the cap, the interfaces and the
 *   slice selector all depend on them);
 * - after the slice informer was replaced (a new selector: its objects are all new);
 * - when a Service changed while a network is or was over the cap (src/service-cap.ts: which
 *   Services are left out may change beyond the events);
 * - when the memo does not hold an event's `before` (an informer that broke its identity rule,
 *   src/kube/informer.ts Change): the lists are the truth.
 * - when a Service gained its first or lost its last slice on another namespace's network (whether
 *   it counts there, src/service-cap.ts).
 * A Service change otherwise costs one cap pass (ServiceCap.apply counts every Service), not a
 * state pass, and the step leaves out the Services the cap leaves out; a slice change costs neither.
 *
 * It also keeps which Services the sidecar refused as over its budget (cmd/sidecar/slim.ts), for
 * the runtime to say.
 */
import type { ExternalIPPolicy } from '../../src/external-ips.js';
import { type Change, StateMemo, type PodInterface, type StateOutput } from '../../src/dataplane/index.js';
import type { NetworkRef } from '../../src/annotations/service-network.js';
import { sliceInfo } from '../../src/dataplane/index.js';
import type { ClientPlace } from '../../src/service-semantics/endpoints.js';
import { clientPlace } from '../../src/service-semantics/client-place.js';
import { objectKey, type KubeObject, type V1EndpointSlice, type V1Service } from '../../src/kube/types.js';
import type { Refusal } from '../../src/cache-budget.js';
import { ServiceCap, serviceName, type CapResult } from '../../src/service-cap.js';
import { refusalOf } from './slim.js';

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
  /** The Services refused as over budget, by name, when that changed since the last compute. */
  readonly refused?: readonly RefusedService[];
}

export interface RefusedService extends Refusal {
  readonly service: string;
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

const crossNamespace = (key: string): boolean => {
  const [service = '', network = ''] = key.split('\n');
  return service.split('/')[0] !== network.split('/')[0];
};

export class StateFeed {
  readonly memo: StateMemo;
  private readonly cap: ServiceCap;
  private services = new Pending<V1Service>();
  private slices = new Pending<V1EndpointSlice>();
  /** The next compute reads the lists (nothing stepped yet, or a reason above). */
  private whole = true;
  private served: readonly NetworkRef[] | undefined;
  /** Some network was over the cap at the last decision. */
  private overAny = false;
  /** The Services the last decision left out (the memo does not hold them). */
  private dropped: ReadonlySet<V1Service> = new Set();
  /** Slices per `<service>\n<network>` of the slice informer in use: where a Service counts. */
  private sliceCount = new Map<string, number>();
  /** A Service gained its first or lost its last slice on another namespace's network. */
  private gateChanged = false;
  /** The slice informer was replaced (or nothing counted yet): count its list at the next compute. */
  private recount = true;
  private refused = new Map<string, RefusedService>();
  private refusedChanged = false;
  private readonly admitted = (svc: V1Service, ref: NetworkRef): boolean => this.sliceCount.has(`${serviceName(svc)}\n${ref.namespace}/${ref.name}`);

  /**
   * `ownNamespace`: the client's, served first in the per-network share. The pod's node (NODE_NAME)
   * and zone (NODE_ZONE): internalTrafficPolicy Local and topology hints; '' for unknown (no endpoint
   * is local, zone hints unused). Without a zone setting the zone is learned from an endpoint of ours
   * on this node and then kept (a node does not change zone); until one appears, each compute looks
   * again (a pass over the slices, on such a pod only). `externalIPs`: the admin's CIDRs for them
   * (src/external-ips.ts); unset: none is served.
   */
  constructor(
    maxServicesPerNetwork: number,
    ownNamespace?: string,
    private readonly nodeName = '',
    private zone = '',
    externalIPs?: ExternalIPPolicy,
  ) {
    this.cap = new ServiceCap(maxServicesPerNetwork, ownNamespace);
    this.memo = new StateMemo(externalIPs);
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
    this.noteRefusal(before, after);
    if (!this.whole) this.services.note(before, after);
  }

  private noteRefusal(before: V1Service | undefined, after: V1Service | undefined): void {
    const was = before !== undefined && this.refused.has(serviceName(before));
    const refusal = after === undefined ? undefined : refusalOf(after);
    if (!was && refusal === undefined) return;
    if (before !== undefined) this.refused.delete(serviceName(before));
    if (after !== undefined && refusal !== undefined) this.refused.set(serviceName(after), { service: serviceName(after), ...refusal });
    this.refusedChanged = true;
  }

  /** An event of the slice informer whose objects are used (not of one still listing). */
  slice(before: V1EndpointSlice | undefined, after: V1EndpointSlice | undefined): void {
    const b = before === undefined ? undefined : this.countKey(before);
    const a = after === undefined ? undefined : this.countKey(after);
    const had = [b, a].map((k) => k !== undefined && this.sliceCount.has(k));
    if (b !== undefined) this.count(b, -1);
    if (a !== undefined) this.count(a, 1);
    // Only another namespace's network needs a slice for its Service to count (src/service-cap.ts).
    [b, a].forEach((k, i) => {
      if (k !== undefined && had[i] !== this.sliceCount.has(k) && crossNamespace(k)) this.gateChanged = true;
    });
    if (!this.whole) this.slices.note(before, after);
  }

  /** `<service>\n<network>` of a slice, if it belongs to one. */
  private countKey(slice: V1EndpointSlice): string | undefined {
    const info = sliceInfo(slice);
    return info.group === undefined || info.net === undefined ? undefined : `${info.group}\n${info.net}`;
  }

  private count(key: string, by: 1 | -1): void {
    const n = (this.sliceCount.get(key) ?? 0) + by;
    if (n > 0) this.sliceCount.set(key, n);
    else this.sliceCount.delete(key);
  }

  /** The slices' informer was replaced (or dropped): the next compute reads the new list. */
  slicesReplaced(): void {
    this.whole = true;
    this.recount = true;
    this.services = new Pending();
    this.slices = new Pending();
  }

  /**
   * Service events as the memo must see them: a left-out Service is absent before and after; one
   * that is left out now and was not (or the other way), unchanged itself (its slices on another
   * namespace's network came or went), is a delete (or an add).
   */
  private leftOut(changes: Change<V1Service>[], now: ReadonlySet<V1Service>): Change<V1Service>[] {
    if (now.size === 0 && this.dropped.size === 0) return changes;
    const out: Change<V1Service>[] = [];
    const seen = new Set<V1Service>();
    for (const c of changes) {
      if (c.before !== undefined) seen.add(c.before);
      if (c.after !== undefined) seen.add(c.after);
      const before = c.before !== undefined && !this.dropped.has(c.before) ? c.before : undefined;
      const after = c.after !== undefined && !now.has(c.after) ? c.after : undefined;
      if (before !== undefined || after !== undefined) out.push({ before, after });
    }
    for (const s of this.dropped) if (!now.has(s) && !seen.has(s)) out.push({ before: undefined, after: s });
    for (const s of now) if (!this.dropped.has(s) && !seen.has(s)) out.push({ before: s, after: undefined });
    return out;
  }

  compute(input: FeedInput): FeedOutput {
    if (input.served !== this.served) this.whole = true;
    let capped: CapResult | undefined;
    if (this.recount) {
      this.sliceCount = new Map();
      for (const s of input.slices()) {
        const k = this.countKey(s);
        if (k !== undefined) this.count(k, 1);
      }
      this.recount = false;
    }
    if (!this.whole && (this.services.size > 0 || this.gateChanged)) {
      capped = this.cap.apply(input.services(), input.served, this.admitted);
      if (capped.over.length > 0 || this.overAny) this.whole = true;
    }
    this.gateChanged = false;
    const place = this.place(input.slices);
    const services = capped === undefined || this.whole ? this.services.take() : this.leftOut(this.services.take(), capped.dropped);
    const slices = this.slices.take();
    let out = this.whole ? undefined : this.memo.step({ interfaces: input.interfaces, services, slices, place });
    const whole = out === undefined;
    if (out === undefined) {
      capped ??= this.cap.apply(input.services(), input.served, this.admitted);
      out = this.memo.update({ interfaces: input.interfaces, services: capped.services, slices: input.slices(), place });
    }
    this.whole = false;
    this.served = input.served;
    if (capped !== undefined) {
      this.overAny = capped.over.length > 0;
      this.dropped = capped.dropped;
    }
    const refused = this.refusedChanged ? [...this.refused.values()].sort((a, b) => (a.service < b.service ? -1 : a.service > b.service ? 1 : 0)) : undefined;
    this.refusedChanged = false;
    return { ...out, whole, ...(capped !== undefined ? { over: capped.over } : {}), ...(refused !== undefined ? { refused } : {}) };
  }
}
