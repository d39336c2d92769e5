/**
 * The IO side of one Service: keeps the indexes the planner needs (pods by namespace, our slices
 * by Service, node zones) from informer events, turns events into Service keys for the queue, and
 * reconciles one key by running the pure planner and writing only its diff.
 *
 * Event → key mapping, the one place where scale matters:
 * - a pod event enqueues only the Services of its namespace whose selector matches its old or
 *   new labels, and only when something the slices depend on changed (not on every status write);
 *   both directions of that match are index lookups (pod-index.ts), never a scan of all pairs;
 * - Service and slice events enqueue that Service, except the watch event that merely shows the
 *   cache our own create or update (its reconcile planned that very state already);
 * - a node event enqueues only when its zone label changed.
 * The reconcile itself is level-based: it reads the caches, never the event.
 */
import { isConflict, isInvalid, isNotFound, type KubeClient } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import { objectKey, type V1EndpointSlice, type V1Pod, type V1Service } from '../../src/kube/types.js';
import type { Logger } from '../../src/log.js';
import { NETWORK_STATUS_ANNOTATION, SERVICE_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import type { EventRecorder } from './events.js';
import { RateLimiter } from './events.js';
import type { ControllerMetrics } from './metrics.js';
import { isPodReady, isPodTerminating, type PodSkip } from './pod-endpoints.js';
import { OPEN_POLICY, type AddressPolicy } from './address-policy.js';
import { nadSharedWith, type Sharing } from '../../src/annotations/nad-sharing.js';
import type { NadIpam, ReadableIpam } from '../../src/annotations/nad-ipam.js';
import { formatInputError, type InputError, type Result } from '../../src/result.js';
import { networkKey, type NetworkRef } from '../../src/annotations/service-network.js';
import { PodIndex, SelectorIndex } from './pod-index.js';
import type { LabelSelector } from '../../src/annotations/label-selector.js';
import { isEmptyDiff, planDeleteAll, planSlices, type SliceDiff } from './plan.js';
import { readServiceSpec, serviceName, type ServiceSpec } from './service-spec.js';
import { SliceTracker } from './tracker.js';
import { hintMode, reportHints, type ZoneCapacity } from './topology-hints.js';
import { describeSlice, isolateEndpoints, namedEndpoints, refusalMessage, type RefusalOutcome } from './slice-refusal.js';

export const ZONE_LABEL = 'topology.kubernetes.io/zone';

/** The result of one reconcile, for metrics and tests. */
export type ReconcileResult = 'unchanged' | 'written' | 'invalid' | 'stale';

/** A write lost a race (409) or hit a vanished object (404): retry the key with backoff. */
export class RetryableWriteError extends Error {}

/** True when a pod change can change any slice: everything the planner reads from a pod. */
export function podChangeMatters(old: V1Pod, pod: V1Pod): boolean {
  const view = (p: V1Pod): string =>
    JSON.stringify([
      p.metadata?.uid,
      p.metadata?.labels ?? {},
      p.metadata?.annotations?.[NETWORK_STATUS_ANNOTATION],
      p.metadata?.deletionTimestamp !== undefined && p.metadata.deletionTimestamp !== null,
      p.status?.phase,
      isPodReady(p),
      p.spec?.nodeName,
      p.spec?.hostname,
      p.spec?.subdomain,
      (p.spec?.containers ?? []).map((c) => c.ports ?? []),
      (p.spec?.initContainers ?? []).map((c) => [c.restartPolicy, c.ports ?? []]),
    ]);
  return view(old) !== view(pod);
}

/**
 * True when a pod change is one a client sees the delay of: its deletion has just begun (its
 * endpoint must turn terminating before the pod stops) or its Ready condition flipped. Such
 * changes take the queue's urgent lane; everything else waits its turn.
 */
export function podChangeUrgent(old: V1Pod, pod: V1Pod): boolean {
  return isPodTerminating(pod) !== isPodTerminating(old) || isPodReady(pod) !== isPodReady(old);
}

export interface ReconcilerDeps {
  readonly client: KubeClient;
  readonly logger: Logger;
  readonly metrics: ControllerMetrics;
  readonly events: EventRecorder;
  readonly getService: (key: string) => V1Service | undefined;
  readonly enqueue: (key: string) => void;
  /** Enqueue at the front (a pod's deletion or Ready flip); absent: as `enqueue`. */
  readonly enqueueUrgent?: (key: string) => void;
  /** Re-enqueue after a delay (stale cache). */
  readonly enqueueAfter: (key: string, ms: number) => void;
  /** False once leadership is lost: not one more write. */
  readonly mayWrite: () => boolean;
  readonly maxEndpointsPerSlice: number;
  readonly eventIntervalMs: number;
  /**
   * Whether a Service of `namespace` may name NAD `ref` (src/annotations/nad-sharing.ts); absent:
   * only NADs of the Service's own namespace (as when the NAD API cannot be read).
   */
  readonly nadSharing?: (ref: NetworkRef, namespace: string) => Sharing;
  /** The NAD's parsed IPAM range (src/annotations/nad-ipam.ts); undefined when the NAD is not known. */
  readonly nadIpam?: (ref: NetworkRef) => Result<NadIpam, InputError> | undefined;
  /** Zone CPU shares for topology-mode Auto (topology-hints.ts); absent: Auto writes no hints. */
  readonly zoneCapacity?: () => ZoneCapacity;
}

export class Reconciler {
  /** Pods by namespace and label: a Service's pods are a lookup. */
  private readonly pods = new PodIndex();
  /** Our Services by namespace (every key, for resyncs and node events). */
  private readonly servicesByNs = new Map<string, Map<string, V1Service>>();
  /** The selectors of the Services that serve, by Service key: a pod's Services are a lookup. */
  private readonly selectors = new SelectorIndex();
  private readonly slicesBySvc = new Map<string, Map<string, V1EndpointSlice>>();
  private readonly zones = new Map<string, string>();
  private readonly nodeAddresses = new Map<string, string[]>();
  private addressPolicy: AddressPolicy = OPEN_POLICY;
  private readonly specs = new WeakMap<V1Service, ServiceSpec>();
  /** Earliest not yet reconciled change per Service key (informer event time), for the latency metric. */
  private readonly changedAt = new Map<string, number>();
  /** Our own slice writes until the cache shows them: staleness, own echoes, events during writes. */
  private readonly tracker = new SliceTracker();
  /** Keys whose last reconcile found our writes missing from the cache (since when): their echo must enqueue them. */
  private readonly waitingForCache = new Map<string, number>();
  /**
   * Keys with an urgent change not yet planned: a reconcile refused as stale keeps the key here,
   * so the echo that releases it queues it at the front again, not behind the keys queued meanwhile.
   */
  private readonly urgentKeys = new Map<string, number>();
  /** Rate limit for counting expected skips, which get no Event. */
  private readonly quietSkips: RateLimiter;

  constructor(private readonly d: ReconcilerDeps) {
    this.quietSkips = new RateLimiter(d.eventIntervalMs);
  }

  specOf(svc: V1Service): ServiceSpec {
    let s = this.specs.get(svc);
    if (s === undefined) {
      s = readServiceSpec(svc);
      this.specs.set(svc, s);
    }
    return s;
  }

  /**
   * False until the workers start. Until then events only fill the caches: `startEnqueueing`
   * enqueues every key at once, so mapping each object of the initial lists to keys would be wasted
   * (on a cold start, 12 adds per Service that the queue's dedup absorbs), and a cold start is no
   * "change" for the change-to-write latency metric either.
   */
  private enqueueing = false;

  /** From now on events enqueue keys. Returns every key that may need work now. */
  startEnqueueing(): string[] {
    this.enqueueing = true;
    return this.allKeys();
  }

  private mark(key: string, urgent = false): void {
    if (!this.enqueueing) return;
    if (!this.changedAt.has(key)) this.changedAt.set(key, Date.now());
    if (urgent && this.d.enqueueUrgent !== undefined && !this.urgentKeys.has(key)) this.urgentKeys.set(key, Date.now());
    this.requeue(key);
  }

  /** Enqueues the key, at the front while an urgent change of it waits to be planned. */
  private requeue(key: string): void {
    (this.urgentKeys.has(key) ? (this.d.enqueueUrgent ?? this.d.enqueue) : this.d.enqueue)(key);
  }

  // ---- informer events ----------------------------------------------------------------------

  onService(svc: V1Service, deleted = false): void {
    const ns = svc.metadata?.namespace ?? '';
    const name = svc.metadata?.name ?? '';
    let m = this.servicesByNs.get(ns);
    if (deleted) {
      m?.delete(name);
      if (m?.size === 0) this.servicesByNs.delete(ns);
    } else {
      if (m === undefined) {
        m = new Map();
        this.servicesByNs.set(ns, m);
      }
      m.set(name, svc);
    }
    const key = objectKey(svc);
    const spec = deleted ? undefined : this.specOf(svc);
    this.selectors.set(ns, key, spec?.kind === 'serve' ? spec.selector : undefined);
    this.mark(key);
  }

  private servicesIn(ns: string): V1Service[] {
    return [...(this.servicesByNs.get(ns)?.values() ?? [])];
  }

  onPod(pod: V1Pod | undefined, old: V1Pod | undefined): void {
    const ref = pod ?? old;
    if (ref === undefined) return;
    const ns = ref.metadata?.namespace ?? '';
    const name = ref.metadata?.name ?? '';
    if (pod === undefined) this.pods.delete(ns, name);
    else this.pods.set(pod);
    if (!this.enqueueing || (pod !== undefined && old !== undefined && !podChangeMatters(old, pod))) return;
    // Old labels too: a pod that stops matching must leave the Service's slices.
    const keys = new Set(pod === undefined ? [] : this.selectors.matching(ns, pod.metadata?.labels));
    if (old !== undefined) for (const k of this.selectors.matching(ns, old.metadata?.labels)) keys.add(k);
    const urgent = pod !== undefined && old !== undefined && podChangeUrgent(old, pod);
    for (const k of keys) this.mark(k, urgent);
  }

  onSlice(slice: V1EndpointSlice, deleted: boolean): void {
    const svcName = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
    if (svcName === undefined) return;
    const key = `${slice.metadata?.namespace ?? ''}/${svcName}`;
    const name = slice.metadata?.name ?? '';
    let m = this.slicesBySvc.get(key);
    if (deleted) {
      m?.delete(name);
      if (m?.size === 0) this.slicesBySvc.delete(key);
      this.tracker.observedDelete(key, name);
    } else {
      if (m === undefined) {
        m = new Map();
        this.slicesBySvc.set(key, m);
      }
      m.set(name, slice);
    }
    if (!deleted) {
      const seen = this.tracker.observed(key, name, slice.metadata?.resourceVersion);
      if (seen === 'held') return;
      if (seen === 'own' && !this.waitingForCache.has(key)) return;
    }
    if (this.enqueueing) this.requeue(key);
  }

  /** A slice whose service-name label changed moves between keys; drop it from the old one. */
  onSliceUpdate(slice: V1EndpointSlice, old: V1EndpointSlice): void {
    if (old.metadata?.labels?.[SERVICE_NAME_LABEL] !== slice.metadata?.labels?.[SERVICE_NAME_LABEL]) this.onSlice(old, true);
    this.onSlice(slice, false);
  }

  /**
   * A Node's own addresses (status.addresses, normalised); a pod claiming one is refused. Rare
   * (nodes keep their addresses), so a change re-plans every Service.
   */
  onNodeAddresses(name: string, addresses: readonly string[]): void {
    const before = this.nodeAddresses.get(name) ?? [];
    if (before.length === addresses.length && before.every((a, i) => a === addresses[i])) return;
    if (addresses.length === 0) this.nodeAddresses.delete(name);
    else this.nodeAddresses.set(name, [...addresses]);
    this.addressPolicy = { nodeAddresses: new Set([...this.nodeAddresses.values()].flat()) };
    if (!this.enqueueing) return;
    for (const key of this.allKeys()) this.mark(key);
  }

  /** The cached pods of `namespace` that `selector` matches (the one pod index of the process; address groups read it too). */
  selectPods(namespace: string, selector: LabelSelector): V1Pod[] {
    return this.pods.select(namespace, selector);
  }

  /** What may be published now (the nodes' own addresses refused): address groups apply the same checks. */
  currentAddressPolicy(): AddressPolicy {
    return this.addressPolicy;
  }

  /** A NAD's sharing or IPAM range changed (rare): every Service is planned again. */
  onNadChange(): void {
    if (!this.enqueueing) return;
    for (const key of this.allKeys()) this.mark(key);
  }

  onNode(name: string, zone: string | undefined): void {
    if (this.zones.get(name) === zone) return;
    if (zone === undefined) this.zones.delete(name);
    else this.zones.set(name, zone);
    // Not while the caches fill: a scan of every pod per node of the initial list, for nothing.
    if (!this.enqueueing) return;
    // Rare (zones do not move); enqueue the Services that have a pod on that node.
    for (const ns of this.pods.namespaceNames()) {
      if (!this.pods.inNamespace(ns).some((p) => p.spec?.nodeName === name)) continue;
      for (const svc of this.servicesIn(ns)) this.mark(objectKey(svc));
    }
  }

  /** The zones' CPU shares changed (rare): the Services with topology-mode Auto are planned again. */
  onZoneCapacityChange(): void {
    if (!this.enqueueing) return;
    for (const key of this.allKeys()) {
      const svc = this.d.getService(key);
      if (svc !== undefined && hintMode(svc).kind === 'auto') this.mark(key);
    }
  }

  /** Every key that may need work: all our Services and the owners of all our slices (orphans included). */
  allKeys(): string[] {
    const keys = new Set([...this.servicesByNs.values()].flatMap((m) => [...m.values()].map((s) => objectKey(s))));
    for (const k of this.slicesBySvc.keys()) keys.add(k);
    return [...keys];
  }

  // ---- reconcile ----------------------------------------------------------------------------

  async reconcile(key: string): Promise<ReconcileResult> {
    const started = Date.now();
    const cached = [...(this.slicesBySvc.get(key)?.values() ?? [])];
    // Our last writes may not be in the cache yet. A deletion or Ready flip is planned from their
    // answers (the fast path: no wait for the echo); anything else waits for the echo, whose watch
    // event enqueues the key again.
    const existing = this.tracker.isCurrent(key, cached) ? cached : this.urgentKeys.has(key) ? this.tracker.overlay(key, cached) : undefined;
    if (existing === undefined) {
      if (!this.waitingForCache.has(key)) this.waitingForCache.set(key, started);
      this.d.enqueueAfter(key, 1000);
      return 'stale';
    }
    const staleSince = this.waitingForCache.get(key);
    this.waitingForCache.delete(key);
    // Planned from here on: the urgent change is in this plan (a failure retries with backoff).
    const urgentAt = this.urgentKeys.get(key);
    this.urgentKeys.delete(key);
    const since = this.changedAt.get(key);
    this.changedAt.delete(key);
    try {
      const diff = this.plan(key, existing);
      if (diff === 'invalid') return 'invalid';
      if (isEmptyDiff(diff)) return 'unchanged';
      const sending = Date.now();
      await this.apply(key, diff);
      const done = Date.now();
      if (since !== undefined) this.d.metrics.changeToWrite.observe((done - since) / 1000);
      // Where a change's time went, for an operator (and B9's breakdown): from the change seen
      // (the earliest unplanned one; the urgent one's own, when there is one) to the reconcile's
      // start, the part of it spent waiting for our previous write's echo, planning, the apiserver.
      this.d.logger.info(
        {
          service: key,
          created: diff.create.length,
          updated: diff.update.length,
          deleted: diff.delete.length,
          ...(since !== undefined ? { changeMs: done - since } : {}),
          ...(urgentAt !== undefined ? { urgentMs: done - urgentAt } : {}),
          ...(staleSince !== undefined ? { echoWaitMs: started - staleSince } : {}),
          planMs: sending - started,
          writeMs: done - sending,
        },
        'EndpointSlices written',
      );
      return 'written';
    } catch (e) {
      if (since !== undefined && !this.changedAt.has(key)) this.changedAt.set(key, since);
      throw e;
    }
  }

  private plan(key: string, existing: V1EndpointSlice[]): SliceDiff | 'invalid' {
    const svc = this.d.getService(key);
    if (svc === undefined) return planDeleteAll(existing);
    const spec = this.specOf(svc);
    if (spec.kind === 'withdraw') return planDeleteAll(existing);
    const ns = svc.metadata?.namespace ?? '';
    if (spec.kind === 'refuse') {
      // Over a per-object budget: not served at all, never half.
      if (this.d.events.warn(svc, `budget|${spec.budget}`, 'OverBudget', `${spec.message}. No EndpointSlices are written for it until then.`))
        this.d.metrics.objectsRefused.inc({ budget: spec.budget });
      return planDeleteAll(existing);
    }
    if (spec.kind === 'invalid') {
      // Keep what is published: a typo must not take a working Service down. But not on a network
      // that is no longer shared with the namespace: sharing is the NAD owner's, not the Service's.
      this.d.events.warn(svc, spec.message, 'InvalidServiceAnnotation', `${spec.message}. Existing EndpointSlices are kept unchanged until this is fixed.`);
      const unshared = existing.filter((s) => !this.sliceNetworkShared(s, ns));
      return unshared.length === 0 ? 'invalid' : { create: [], update: [], delete: unshared };
    }
    // Another namespace's NAD only where its owner shared it: no slice on it otherwise (and the
    // sidecars serve a cross-namespace network only where a slice of ours exists).
    const networks = spec.networks.filter((ref) => {
      const sharing = this.d.nadSharing?.(ref, ns) ?? nadSharedWith(ref, ns, undefined, false);
      if (!sharing.allowed)
        this.d.events.warn(svc, `not-shared|${networkKey(ref)}`, 'NetworkNotShared', `${serviceName(svc)}: ${sharing.message}. No EndpointSlices are written on that network until then.`);
      return sharing.allowed;
    });
    const pods = this.pods.select(ns, spec.selector);
    const plan = planSlices({
      service: svc,
      networks,
      pods,
      existing,
      zoneOf: (node) => this.zones.get(node),
      addressPolicy: { ...this.addressPolicy, ipam: this.ipamRanges(svc, networks) },
      maxPerSlice: this.d.maxEndpointsPerSlice,
      ...(this.d.zoneCapacity !== undefined ? { zoneCapacity: this.d.zoneCapacity() } : {}),
    });
    this.report(svc, plan.skips);
    reportHints(this.d.events, svc, plan.hintEvents, !isEmptyDiff(plan.diff));
    return plan.diff;
  }

  /** Whether the network a slice of ours is on (its service-network annotation) may be used by `ns`. */
  private sliceNetworkShared(slice: V1EndpointSlice, ns: string): boolean {
    const value = slice.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] ?? '';
    const slash = value.indexOf('/');
    if (slash < 0) return false;
    const ref = { namespace: value.slice(0, slash), name: value.slice(slash + 1) };
    return (this.d.nadSharing?.(ref, ns) ?? nadSharedWith(ref, ns, undefined, false)).allowed;
  }

  /**
   * The readable IPAM ranges of the Service's networks. A NAD whose IPAM config is malformed gets
   * a Warning on the Service, and its network is published without the range check (as one whose
   * range cannot be read, e.g. dhcp): refusing every pod would let a NAD typo take the Service down.
   */
  private ipamRanges(svc: V1Service, networks: readonly NetworkRef[]): Map<string, ReadableIpam> {
    const out = new Map<string, ReadableIpam>();
    for (const ref of networks) {
      const ipam = this.d.nadIpam?.(ref);
      if (ipam === undefined) continue;
      const key = networkKey(ref);
      if (ipam.ok) {
        if (ipam.value.readable) out.set(key, ipam.value);
        continue;
      }
      const message = formatInputError(`NetworkAttachmentDefinition ${key}`, ipam.error);
      this.d.events.warn(svc, `ipam|${key}`, 'NadIpamInvalid', `${message}. ${serviceName(svc)}: addresses on network ${key} are published without the IPAM range check until this is fixed.`);
    }
    return out;
  }

  private report(svc: V1Service, skips: readonly PodSkip[]): void {
    const svcKey = objectKey(svc);
    for (const s of skips) {
      const text = `${s.message}; left out of ${serviceName(svc)} endpoints on network ${s.network}`;
      const counted = s.expected ? this.quietSkips.allow(`${svcKey}|${s.pod}|${s.reason}`, Date.now()) : this.d.events.warn(svc, `${s.pod}|${s.network}`, s.reason, text);
      if (counted) this.d.metrics.podsSkipped.inc({ reason: s.reason });
    }
  }

  private wrote(key: string, out: V1EndpointSlice): void {
    this.tracker.written(key, out.metadata?.name ?? '', out.metadata?.resourceVersion, Date.now(), out);
  }

  private async apply(key: string, diff: SliceDiff): Promise<void> {
    this.tracker.beginWrites(key);
    try {
      await this.write(key, diff);
    } finally {
      // Still being processed: the queue runs the key once more after this reconcile.
      if (this.tracker.endWrites(key)) this.requeue(key);
    }
  }

  private async write(key: string, diff: SliceDiff): Promise<void> {
    const ns = key.slice(0, key.indexOf('/'));
    const collection = apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns);
    const path = (s: V1EndpointSlice): string => apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns, s.metadata?.name ?? '');
    const guard = (): void => {
      if (!this.d.mayWrite()) throw new Error('not the leader any more: write refused');
    };
    // Updates and creates before deletes: endpoints moving between slices never vanish in between.
    const results: SliceWrite[] = [];
    for (const s of diff.update) {
      guard();
      results.push(
        await this.writeSlice(key, 'update', s, async (body) => {
          try {
            return await this.d.client.replace<V1EndpointSlice>(path(body), body);
          } catch (e) {
            if (isConflict(e) || isNotFound(e)) throw new RetryableWriteError(`update of EndpointSlice ${ns}/${body.metadata?.name ?? ''}: ${(e as Error).message}`);
            throw e;
          }
        }),
      );
    }
    for (const s of diff.create) {
      guard();
      results.push(await this.writeSlice(key, 'create', s, (body) => this.d.client.create<V1EndpointSlice>(collection, body)));
    }
    // A slice left unwritten may be where endpoints of a slice to delete were moving: keep those
    // until the retry, so no endpoint vanishes because another one was refused.
    const unwritten = results.filter((r) => r === 'refused').length;
    if (unwritten === 0) {
      for (const s of diff.delete) {
        guard();
        await this.d.client.delete(path(s));
        this.tracker.deleted(key, s.metadata?.name ?? '');
        this.d.metrics.sliceWrites.inc({ verb: 'delete' });
      }
    }
    const refused = results.filter((r) => r !== 'written').length;
    if (refused > 0) {
      throw new RetryableWriteError(`${refused} EndpointSlice write(s) of ${key} refused as invalid (${unwritten} left unwritten, deletes ${unwritten > 0 ? 'held' : 'done'}); retrying with backoff`);
    }
  }

  /**
   * One create or update. A 422 is answered by writing the slice again without the endpoints the
   * apiserver names (cmd/controller/slice-refusal.ts), with a Warning `SliceRefused` on the
   * Service and the refused-writes metric; any other error is thrown as before.
   */
  private async writeSlice(key: string, verb: 'create' | 'update', s: V1EndpointSlice, send: (body: V1EndpointSlice) => Promise<V1EndpointSlice>): Promise<SliceWrite> {
    const sent = async (body: V1EndpointSlice): Promise<void> => {
      this.wrote(key, await send(body));
      this.d.metrics.sliceWrites.inc({ verb });
    };
    try {
      await sent(s);
      return 'written';
    } catch (e) {
      if (!isInvalid(e)) throw e;
      this.d.metrics.sliceWritesRefused.inc({ verb });
      const isolated = isolateEndpoints(s, namedEndpoints(e.details, e.apiMessage, s.endpoints?.length ?? 0));
      let outcome: RefusalOutcome = { written: false };
      if (isolated !== undefined) {
        try {
          await sent(isolated.slice);
          outcome = { written: true, dropped: isolated.dropped };
        } catch (e2) {
          if (!isInvalid(e2)) throw e2;
          this.d.metrics.sliceWritesRefused.inc({ verb });
        }
      }
      const slice = describeSlice(s, s.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] ?? '');
      const message = refusalMessage(key, slice, verb, e.apiMessage, outcome);
      const svc = this.d.getService(key);
      if (svc !== undefined) this.d.events.warn(svc, `refused|${slice}`, 'SliceRefused', message);
      else this.d.logger.warn({ service: key }, message);
      return outcome.written ? 'isolated' : 'refused';
    }
  }
}

/** How one create or update ended: as planned, without the endpoints the apiserver refused, or not at all. */
type SliceWrite = 'written' | 'isolated' | 'refused';
