/**
 * The sidecar's IO shell: three informers (its own pod, the opted-in Services, the slices of its
 * networks) feed caches; every change only marks the state dirty, and the sync loop turns the
 * informers' events into a DesiredState (cmd/sidecar/state-feed.ts: the events since the last sync
 * stepped through src/dataplane/incremental.ts StateMemo, so a sync costs what changed, not the
 * number of Services) and hands it to the dataplane.
 *
 * What it watches, always with server-side selectors, so a sidecar receives only what concerns it:
 * - its pod's annotations (service-network and network-status may change while it runs: dynamic
 *   attachments): from the downwardAPI file the webhook mounts (`annotationsFile`, cmd/sidecar/pod-file.ts),
 *   so its ServiceAccount needs no right to read pods; without that option (a sidecar run by hand),
 *   a watch on `metadata.name=<POD_NAME>` in its namespace;
 * - Services labelled `service.kubernetes.io/service-proxy-name=multus-proxy`, all namespaces (a
 *   NAD may be used across namespaces);
 * - EndpointSlices managed by `multus-proxy-controller` whose `multus-proxy/network` is one of the
 *   pod's networks. It never lists the cluster's slices. When the pod's networks change, a new slice
 *   informer with the new selector is started, and the old one is stopped only once the new one has
 *   synced, so no rules are lost in between.
 */
import { MANAGED_BY, MANAGED_BY_LABEL, NETWORK_LABEL, PROXY_NAME, PROXY_NAME_LABEL } from '../../src/keys.js';
import type { Logger } from '../../src/log.js';
import type { KubeClient } from '../../src/kube/client.js';
import { createInformer, type Informer, type InformerOptions } from '../../src/kube/informer.js';
import { apiPath } from '../../src/kube/paths.js';
import { objectKey, type V1EndpointSlice, type V1Pod, type V1Service } from '../../src/kube/types.js';
import type { NetworkRef } from '../../src/annotations/service-network.js';
import type { NetworkStatusEntry } from '../../src/annotations/network-status.js';
import type { Dataplane, SyncResult } from '../../src/dataplane/index.js';
import type { SidecarMetrics } from './metrics.js';
import { networkLabelValues, podInterfaces, readNetworkStatus, readServedNetworks, createSyncLoop, sliceTriggerMs, type ApplyReport, type SyncLoopOptions, sameState, stateSize } from '../../src/dataplane/index.js';
import { LAST_CHANGE_TRIGGER_TIME_ANNOTATION, slimEndpointSlice, slimPod, slimService } from './slim.js';
import { ProblemState, type InputKey, type Say } from './problems.js';
import { watchAnnotationsFile } from './pod-file.js';
import type { CapResult } from './service-cap.js';
import { StateFeed } from './state-feed.js';
import { snapshotWait, waitBetween } from '../../src/cpu-wait.js';
import { DEFAULT_MAX_SERVICES_PER_NETWORK, REASON_SERVICE_CAP_REACHED } from '../../src/sidecar-contract.js';

/** A sync that keeps failing is told again at most this often (the first failure at once). */
const PROBLEM_REPEAT_MS = 5 * 60_000;

// Defined next to the slice transform that must keep it; re-exported where it always was.
export { LAST_CHANGE_TRIGGER_TIME_ANNOTATION };

/** The part of the dataplane the runtime drives (cleanup is main's job, after stop()). */
export type DataplaneSync = Pick<Dataplane, 'sync' | 'checkDrift'>;

export interface RuntimeOptions extends SyncLoopOptions {
  readonly podName: string;
  readonly podNamespace: string;
  /** The downwardAPI file of the pod's annotations; unset: the pod is watched through the API. */
  readonly annotationsFile?: string | undefined;
  /** Re-read that file this often besides watching it (tests shorten it). */
  readonly annotationsPollMs?: number;
  /** Services served per network at most (cmd/sidecar/service-cap.ts); unset: the default. */
  readonly maxServicesPerNetwork?: number;
  /** Passed to every informer (tests shorten backoffs). */
  readonly informer?: Pick<InformerOptions, 'watchdogMs' | 'minBackoffMs' | 'maxBackoffMs'>;
  /** This pod's node (NODE_NAME) and zone (NODE_ZONE): internalTrafficPolicy Local and topology hints. Unset: no endpoint is local, no zone. */
  readonly nodeName?: string;
  readonly nodeZone?: string;
}

export interface RuntimeDeps {
  readonly client: KubeClient;
  readonly dataplane: DataplaneSync;
  readonly log: Logger;
  readonly metrics: SidecarMetrics;
  /** Writes an Event on the pod (cmd/sidecar/problems.ts); unset: problems are only logged and counted. */
  readonly event?: (s: Say) => void;
}

export interface SidecarRuntime {
  /** Starts the informers; the sync loop starts once all of them have synced. */
  start(): void;
  /** Resolves after the first successful sync that followed the informers' sync. */
  readonly firstSync: Promise<void>;
  ready(): { ready: boolean; reason?: string };
  live(): boolean;
  /** Stops informers and the loop (waits for a running sync); does not touch the rules. */
  stop(): Promise<void>;
}

/** The slice selector for a set of networks (label values already sorted and unique). */
export function sliceSelector(labelValues: readonly string[]): string {
  return `${MANAGED_BY_LABEL}=${MANAGED_BY},${NETWORK_LABEL} in (${labelValues.join(',')})`;
}

const sameRefs = (a: readonly NetworkRef[], b: readonly NetworkRef[]): boolean => JSON.stringify(a) === JSON.stringify(b);

/**
 * Logs each message of a group once while it lasts, not on every sync: a bad Service stays bad
 * until someone fixes it, and one line per sync would bury everything else.
 */
function onceLogger(log: Logger): (group: string, messages: readonly { level: 'info' | 'warn'; msg: string }[]) => void {
  const seen = new Map<string, Set<string>>();
  return (group, messages) => {
    const before = seen.get(group) ?? new Set<string>();
    const now = new Set<string>();
    for (const m of messages) {
      now.add(m.msg);
      if (!before.has(m.msg)) log[m.level]({ problem: m.msg }, m.msg);
    }
    seen.set(group, now);
  };
}

export function createSidecarRuntime(options: RuntimeOptions, deps: RuntimeDeps): SidecarRuntime {
  const { client, log } = deps;
  const startedMs = Date.now();
  const informerOpts = (name: string): Partial<InformerOptions> => ({ ...options.informer, logger: log, name });

  /** Where the pod's annotations come from: the file, or a watch on the pod. */
  interface PodSource {
    start(): void;
    readonly synced: Promise<void>;
    found(): boolean;
    stop(): void;
  }
  let pods: PodSource;
  const file = options.annotationsFile;
  if (file !== undefined) {
    pods = watchAnnotationsFile({
      file,
      log,
      ...(options.annotationsPollMs !== undefined ? { pollMs: options.annotationsPollMs } : {}),
      onChange: (annotations) => onPod({ metadata: { name: options.podName, namespace: options.podNamespace, annotations } }),
    });
  } else {
    const informer = createInformer<V1Pod>(client, {
      ...informerOpts('pod'),
      path: apiPath('', 'v1', 'pods', options.podNamespace),
      fieldSelector: `metadata.name=${options.podName}`,
      transform: slimPod,
    });
    informer.on({
      add: (p) => onPod(p),
      update: (p) => onPod(p),
      // The pod is going away; keep serving until SIGTERM so its last connections still work.
      delete: () => log.info('own pod deleted; keeping rules until terminated'),
    });
    pods = { start: () => informer.start(), synced: informer.synced, found: () => informer.list().length > 0, stop: () => informer.stop() };
  }
  const services = createInformer<V1Service>(client, {
    ...informerOpts('services'),
    path: apiPath('', 'v1', 'services'),
    labelSelector: `${PROXY_NAME_LABEL}=${PROXY_NAME}`,
    transform: slimService,
  });

  // Last good value of each pod annotation: a malformed update is logged and ignored.
  let served: NetworkRef[] = [];
  let status: NetworkStatusEntry[] = [];
  const lastLogged = { served: '', status: '' };
  /** The slice informer whose contents are used, and one being brought up for a new selector. */
  let slices: Informer<V1EndpointSlice> | undefined;
  let pendingSlices: Informer<V1EndpointSlice> | undefined;
  let sliceKey = '';
  let stopped = false;
  /** Wakes slicesSettled() when pendingSlices is replaced or dropped (a stopped informer never syncs). */
  let pendingReplaced: () => void = () => {};
  const logOnce = onceLogger(log);
  // What the pod's owner is told while the input is bad or a sync fails (cmd/sidecar/problems.ts).
  const problems = new ProblemState(PROBLEM_REPEAT_MS);
  const say = (list: Say[]): void => {
    for (const s of list) deps.event?.(s);
  };
  const inputRead = (key: InputKey, error: string | undefined): void => {
    say(problems.input(key, error));
    deps.metrics.invalidAnnotation(key, problems.invalid(key));
  };
  let informersSynced = false;

  /** Run-queue wait taken at the end of the last sync (src/cpu-wait.ts). */
  let lastWait = snapshotWait();
  /** The sync with the run-queue wait before it (since the last sync ended) and during it, logged with it. */
  async function syncAndWait(state: Parameters<Dataplane['sync']>[0], opts: { full: boolean }): Promise<ApplyReport> {
    const start = snapshotWait();
    const r = await deps.dataplane.sync(state, opts);
    const end = snapshotWait();
    const waits = start.size > 0 ? { cpuWaitBeforeMs: waitBetween(lastWait, start), cpuWaitMs: waitBetween(start, end) } : {};
    lastWait = end;
    return report(r, waits);
  }

  function report(r: SyncResult, waits: { cpuWaitBeforeMs?: number; cpuWaitMs?: number } = {}): ApplyReport {
    logOnce('skipped', r.skipped.map((t) => ({ level: t.level, msg: `${t.target}: ${t.reason}` })));
    logOnce('warnings', r.warnings.map((w) => ({ level: 'warn', msg: w })));
    if (r.changed) {
      const restored = r.families.filter((f) => f.text !== '');
      log.info(
        { full: r.full, backend: r.backend, ms: Math.round(r.durationMs), chains: restored.flatMap((f) => f.changedChains).length, routesReplaced: r.routesReplaced, routesRemoved: r.routesRemoved, conntrackFlushes: r.conntrackFlushes, served: r.served, ...waits },
        'rules applied',
      );
    }
    return { rules: r.families.reduce((n, f) => n + f.rules, 0), changed: r.changed };
  }

  // The informers' events since the last sync: a sync redoes only the Services whose objects changed.
  const feed = new StateFeed(options.maxServicesPerNetwork ?? DEFAULT_MAX_SERVICES_PER_NETWORK, options.nodeName ?? '', options.nodeZone ?? '');
  let overText = '';
  let overNets: string[] = [];
  /** Says once per change which Services the cap leaves out (logged by name, an Event, the metric). */
  function noteCap(over: CapResult['over']): void {
    const text = JSON.stringify(over);
    if (text === overText) return;
    overText = text;
    for (const net of overNets) if (!over.some((o) => o.network === net)) {
      deps.metrics.servicesDropped(net, 0);
      log.info({ network: net, cap: feed.maxServicesPerNetwork }, 'Services on the network are within the cap again; all are served');
    }
    overNets = over.map((o) => o.network);
    for (const o of over) {
      deps.metrics.servicesDropped(o.network, o.dropped.length);
      log.warn({ network: o.network, cap: feed.maxServicesPerNetwork, total: o.total, dropped: o.dropped }, 'more Services than the cap on this network; the last in namespace/name order are not served');
      const first = o.dropped.slice(0, 5).join(', ');
      say([
        {
          type: 'Warning',
          reason: REASON_SERVICE_CAP_REACHED,
          message: `network ${o.network} has ${o.total} Services, more than this sidecar serves (${feed.maxServicesPerNetwork}, MAX_SERVICES_PER_NETWORK); ${o.dropped.length} not served, the last in namespace/name order: ${first}${o.dropped.length > 5 ? ', ...' : ''}; raise sidecar.maxServicesPerNetwork in the webhook's config, or remove Services from the network`,
        },
      ]);
    }
  }
  const loop = createSyncLoop(options, {
    compute: () => {
      const out = feed.compute({ served, interfaces: podInterfaces(served, status), services: () => services.list(), slices: () => slices?.list() ?? [] });
      if (out.over !== undefined) noteCap(out.over);
      logOnce('state', out.problems.map((p) => ({ level: 'warn', msg: p })));
      return out.state;
    },
    apply: syncAndWait,
    same: sameState,
    size: stateSize,
    checkDrift: (o) => deps.dataplane.checkDrift(o),
    metrics: deps.metrics,
    log,
    onOutcome: (error, failures) => say(problems.sync(error, failures, Date.now())),
  });

  function onSliceChange(informer: Informer<V1EndpointSlice>, slice: V1EndpointSlice, before: V1EndpointSlice | undefined, after: V1EndpointSlice | undefined): void {
    if (informer !== slices && informer !== pendingSlices) return;
    // A pending informer's objects reach the state as its list, once it replaces the current one.
    if (informer === slices) feed.slice(before, after);
    // Only changes after start-up measure programming latency; the initial list measures start-up.
    if (informersSynced || informer.hasSynced()) {
      const trigger = sliceTriggerMs(slice);
      loop.noteSliceChange(objectKey(slice), Date.now(), trigger !== undefined && trigger >= startedMs ? trigger : undefined);
    }
    loop.markDirty();
  }

  function followNetworks(): void {
    const values = networkLabelValues(served);
    const key = values.join(',');
    if (key === sliceKey || stopped) return;
    sliceKey = key;
    pendingSlices?.stop();
    pendingSlices = undefined;
    pendingReplaced();
    if (values.length === 0) {
      slices?.stop();
      slices = undefined;
      feed.slicesReplaced();
      log.info('pod serves no networks; not watching EndpointSlices');
      loop.markDirty();
      return;
    }
    const labelSelector = sliceSelector(values);
    const next = createInformer<V1EndpointSlice>(client, { ...informerOpts('endpointslices'), path: apiPath('discovery.k8s.io', 'v1', 'endpointslices'), labelSelector, transform: slimEndpointSlice });
    pendingSlices = next;
    next.on({
      add: (s) => onSliceChange(next, s, undefined, s),
      update: (s, old) => onSliceChange(next, s, old, s),
      delete: (s, stored) => onSliceChange(next, s, stored, undefined),
    });
    log.info({ labelSelector }, 'watching EndpointSlices');
    next.start();
    void next.synced.then(() => {
      if (pendingSlices !== next) return;
      const old = slices;
      slices = next;
      pendingSlices = undefined;
      feed.slicesReplaced();
      old?.stop();
      loop.markDirty();
    });
  }

  function onPod(pod: V1Pod): void {
    const s = readServedNetworks(pod);
    inputRead('service-network', s.ok ? undefined : s.error);
    if (s.ok) {
      lastLogged.served = '';
      if (!sameRefs(s.value, served)) {
        log.info({ networks: s.value.map((r) => `${r.namespace}/${r.name}`) }, 'pod service networks');
        served = s.value;
      }
    } else if (s.error !== lastLogged.served) {
      lastLogged.served = s.error;
      log.error({ problem: s.error }, `${s.error} (keeping the last good networks)`);
    }
    const st = readNetworkStatus(pod);
    inputRead('network-status', st.ok ? undefined : st.error);
    if (st.ok) {
      lastLogged.status = '';
      status = st.value;
    } else if (st.error !== lastLogged.status) {
      lastLogged.status = st.error;
      log.error({ problem: st.error }, `${st.error} (keeping the last good network status)`);
    }
    followNetworks();
    loop.markDirty();
  }

  const serviceChange = (before: V1Service | undefined, after: V1Service | undefined): void => {
    feed.service(before, after);
    loop.markDirty();
  };
  services.on({ add: (s) => serviceChange(undefined, s), update: (s, old) => serviceChange(old, s), delete: (_s, stored) => serviceChange(stored, undefined) });

  /**
   * Waits until the current slice informer has synced. The one awaited may be replaced while it
   * lists (the pod's networks changed) and then, stopped, never syncs: so each wait also ends when
   * it is replaced, and the loop waits on whichever is current.
   */
  async function slicesSettled(): Promise<void> {
    while (!stopped && pendingSlices !== undefined) {
      const p = pendingSlices;
      const replaced = new Promise<void>((resolve) => (pendingReplaced = resolve));
      // On sync its then() in followNetworks ran first (registered first) and promoted it.
      await Promise.race([p.synced, replaced]);
    }
    pendingReplaced = () => {};
  }

  return {
    start() {
      pods.start();
      services.start();
      void (async () => {
        await Promise.all([pods.synced, services.synced]);
        if (!pods.found()) log.warn({ pod: `${options.podNamespace}/${options.podName}`, ...(file !== undefined ? { file } : {}) }, 'own pod not found; serving nothing until it appears');
        await slicesSettled();
        if (stopped) return;
        informersSynced = true;
        log.info('caches synced; starting rule sync');
        loop.start();
      })();
    },
    firstSync: loop.firstSync,
    ready() {
      if (!informersSynced) return { ready: false, reason: 'waiting for the Kubernetes caches to sync' };
      if (!loop.synced()) return { ready: false, reason: 'waiting for the first rule sync' };
      return { ready: true };
    },
    live: () => loop.live(),
    async stop() {
      stopped = true;
      pendingReplaced();
      pods.stop();
      services.stop();
      slices?.stop();
      pendingSlices?.stop();
      await loop.stop();
    },
  };
}
