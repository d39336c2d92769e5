/**
 * Wiring: informers feed the reconciler's indexes and the work queue; once every cache has synced
 * the replica is ready, and it campaigns for the lease; only the leader runs workers (slice
 * writes, Events, sidecar RBAC). Standby replicas keep warm caches and are ready too: readiness
 * is not leadership.
 *
 * Every write goes through a fenced client: it is refused unless the last successful renew was
 * sent less than a renew deadline ago, and aborted when that runs out (time-based, so a leader
 * cut off from the apiserver stops writing on time even while its renew request hangs). Losing
 * the lease calls `onLostLeadership`; the program exits there so it restarts with clean state.
 */
import { createInformer, type Informer } from '../../src/kube/informer.js';
import { getIfExists, type KubeClient } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import { objectKey, type KubeObject, type V1EndpointSlice, type V1Namespace, type V1Pod, type V1Service } from '../../src/kube/types.js';
import type { Logger } from '../../src/log.js';
import { createRegistry, type Registry } from '../../src/metrics.js';
import { startHealthServer, type HealthServer } from '../../src/health.js';
import { PROXY_NAME, PROXY_NAME_LABEL } from '../../src/keys.js';
import { createEventRecorder, type EventRecorder } from './events.js';
import { fenceWrites, LeaderElector, OPEN_FENCE, type WriteFence } from './leader.js';
import { createControllerMetrics, registerKubeRequests, type ControllerMetrics } from './metrics.js';
import type { ControllerOptions } from './options.js';
import { ourSlicesSelector } from './plan.js';
import { Reconciler, RetryableWriteError, ZONE_LABEL } from './reconcile.js';
import { WorkQueue } from './queue.js';
import { createRbacController } from './rbac-controller.js';
import { injectedAccounts } from './sidecar-rbac.js';
import { createMigration } from './migration.js';
import { createNetServiceController, netServiceApiServed, type NetServiceController } from './netservice-controller.js';
import { nadChanged, nodeAddressList, slimNad, slimNamespace, slimNode, slimPod, slimService, type SlimNad } from './slim.js';
import { nadSharedWith } from '../../src/annotations/nad-sharing.js';
import { NodeCapacity, nodeTopology } from './topology-hints.js';

export interface RunningController {
  readonly health: HealthServer;
  readonly registry: Registry;
  readonly metrics: ControllerMetrics;
  readonly client: KubeClient;
  isLeader(): boolean;
  isReady(): boolean;
  /** No key waiting, running or delayed. */
  idle(): boolean;
  /** Stops informers and workers, releases the lease if held, closes the health server. */
  stop(): Promise<void>;
}

export interface ControllerHooks {
  /** Called once when the lease is lost. Default: nothing (main.ts exits the process). */
  onLostLeadership?(reason: string): void;
  registry?: Registry;
}

function informerPath(resource: string, group: string, version: string, namespace: string | undefined): string {
  return apiPath(group, version, resource, namespace);
}

/** The NetService part when asked for, or (auto) when the API is served; a clear error when asked for and not served. */
async function netServicePart(
  client: KubeClient,
  opts: ControllerOptions,
  logger: Logger,
  d: { events: EventRecorder; mayWrite: () => boolean; onError: () => void },
): Promise<NetServiceController | undefined> {
  if (opts.netServices === 'false') return undefined;
  const served = await netServiceApiServed(client);
  if (!served) {
    if (opts.netServices === 'true') {
      throw new Error('--netservices=true, but the apiserver does not serve svcctl.metaswitch.com/v1alpha1: install the component deploy/components/netservice (its CRD), or set --netservices=auto');
    }
    logger.info('NetService API (svcctl.metaswitch.com/v1alpha1) not installed; NetServices are not served');
    return undefined;
  }
  logger.info('serving NetService objects (svcctl.metaswitch.com/v1alpha1)');
  return createNetServiceController({ client, logger, ...d, workers: 1, ...(opts.namespace !== undefined ? { namespace: opts.namespace } : {}) });
}

export async function startController(client: KubeClient, opts: ControllerOptions, logger: Logger, hooks: ControllerHooks = {}): Promise<RunningController> {
  const registry = hooks.registry ?? createRegistry('multus_proxy_controller');
  const metrics = createControllerMetrics(registry);
  registerKubeRequests(registry, () => client.requestCount());
  const queue = new WorkQueue({ baseDelayMs: 100, maxDelayMs: 60_000 });
  const abort = new AbortController();
  let writing = !opts.leaderElect;
  let leading = false;
  let ready = false;
  const timers: NodeJS.Timeout[] = [];

  // `elector` is assigned below; the fence is only consulted once workers run.
  const fence: WriteFence = {
    mayWrite: (now) => writing && (elector === undefined || elector.mayWrite(now)),
    writeSignal: () => (elector === undefined ? OPEN_FENCE.writeSignal() : elector.writeSignal()),
  };
  const writer = fenceWrites(client, fence);

  const informerOpts = { logger };
  const services = createInformer<V1Service>(client, {
    ...informerOpts,
    name: 'services',
    path: informerPath('services', '', 'v1', opts.namespace),
    labelSelector: `${PROXY_NAME_LABEL}=${PROXY_NAME}`,
    transform: slimService,
  });
  const pods = createInformer<V1Pod>(client, { ...informerOpts, name: 'pods', path: informerPath('pods', '', 'v1', opts.namespace), transform: slimPod });
  const slices = createInformer<V1EndpointSlice>(client, {
    ...informerOpts,
    name: 'endpointslices',
    path: informerPath('endpointslices', 'discovery.k8s.io', 'v1', opts.namespace),
    labelSelector: ourSlicesSelector(),
  });
  const namespaces = opts.manageSidecarRbac
    ? createInformer<V1Namespace>(client, { ...informerOpts, name: 'namespaces', path: apiPath('', 'v1', 'namespaces'), transform: slimNamespace })
    : undefined;
  const nodes = opts.watchNodes ? createInformer<KubeObject>(client, { ...informerOpts, name: 'nodes', path: apiPath('', 'v1', 'nodes'), transform: slimNode }) : undefined;

  // NADs, for whether another namespace's NAD is shared (src/annotations/nad-sharing.ts) and for
  // the range its IPAM hands out (src/annotations/nad-ipam.ts): only those are kept. Without the
  // NAD API, every cross-namespace reference is refused and no range is known.
  const nadApi = (await getIfExists(client, '/apis/k8s.cni.cncf.io/v1')) !== undefined;
  const nads = nadApi
    ? createInformer<SlimNad>(client, { ...informerOpts, name: 'nads', path: apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions'), transform: slimNad })
    : undefined;
  if (!nadApi) logger.warn('the NetworkAttachmentDefinition API (k8s.cni.cncf.io/v1) is not served: Services naming another namespace\'s NAD get no slices');

  const events = createEventRecorder(writer, {
    intervalMs: opts.eventIntervalMs,
    instance: opts.identity,
    logger,
    onError: () => metrics.errors.inc({ stage: 'event' }),
    onDrop: (why) => metrics.eventsDropped.inc({ why }),
  });
  const enqueue = (key: string): void => {
    queue.add(key);
    metrics.queueDepth.set(queue.length());
  };
  // Zone CPU shares for topology-mode Auto, from the same Node informer.
  const zoneCapacity = new NodeCapacity();
  const reconciler = new Reconciler({
    client: writer,
    logger,
    metrics,
    events,
    getService: (key) => services.get(key),
    enqueue,
    ...(opts.urgentPodChanges ? { enqueueUrgent: (key: string) => (queue.addUrgent(key), metrics.queueDepth.set(queue.length())) } : {}),
    enqueueAfter: (key, ms) => queue.addAfter(key, ms),
    mayWrite: () => fence.mayWrite(),
    maxEndpointsPerSlice: opts.maxEndpointsPerSlice,
    eventIntervalMs: opts.eventIntervalMs,
    nadSharing: (ref, namespace) => {
      const nad = nads?.get(`${ref.namespace}/${ref.name}`);
      return nadSharedWith(ref, namespace, nad?.metadata?.annotations, nad !== undefined);
    },
    nadIpam: (ref) => nads?.get(`${ref.namespace}/${ref.name}`)?.ipam,
    zoneCapacity: () => zoneCapacity.capacity(),
  });
  nads?.on({ add: () => reconciler.onNadChange(), update: (n, old) => (nadChanged(n, old) ? reconciler.onNadChange() : undefined), delete: () => reconciler.onNadChange() });

  // Both write through the fenced client, like the reconciler.
  const netServices = await netServicePart(writer, opts, logger, { events, mayWrite: () => fence.mayWrite(), onError: () => metrics.errors.inc({ stage: 'netservice' }) });
  const migration = opts.removeMultusServiceSlices
    ? createMigration({
        client: writer,
        logger,
        events,
        mayWrite: () => fence.mayWrite(),
        getService: (key) => services.get(key),
        ...(opts.namespace !== undefined ? { namespace: opts.namespace } : {}),
        onError: () => metrics.errors.inc({ stage: 'migration' }),
      })
    : undefined;
  const onService = (s: V1Service): void => {
    netServices?.onService(s);
    migration?.onService(s);
  };
  services.on({
    add: (s) => (reconciler.onService(s), onService(s)),
    update: (s) => (reconciler.onService(s), onService(s)),
    delete: (s) => (reconciler.onService(s, true), onService(s)),
  });
  pods.on({ add: (p) => reconciler.onPod(p, undefined), update: (p, old) => reconciler.onPod(p, old), delete: (p) => reconciler.onPod(undefined, p) });
  slices.on({ add: (s) => reconciler.onSlice(s, false), update: (s, old) => reconciler.onSliceUpdate(s, old), delete: (s) => reconciler.onSlice(s, true) });
  const onNode = (n: KubeObject, gone: boolean): void => {
    if (zoneCapacity.set(objectKey(n), gone ? undefined : nodeTopology(n))) reconciler.onZoneCapacityChange();
    reconciler.onNode(objectKey(n), gone ? undefined : n.metadata?.labels?.[ZONE_LABEL]);
    reconciler.onNodeAddresses(objectKey(n), gone ? [] : nodeAddressList(n));
  };
  nodes?.on({
    add: (n) => onNode(n, false),
    update: (n) => onNode(n, false),
    delete: (n) => onNode(n, true),
  });
  // Sidecar RBAC: its own controller and queue (cmd/controller/rbac-controller.ts).
  const rbac = namespaces === undefined ? undefined : createRbacController({ client: writer, namespaces: () => namespaces.list(), accounts: () => injectedAccounts(pods.list()), logger, metrics, events });
  namespaces?.on({
    add: (n) => rbac?.onNamespace(n, undefined),
    update: (n, old) => rbac?.onNamespace(n, old),
    delete: (n) => rbac?.onNamespace(undefined, n),
  });
  if (rbac !== undefined) pods.on({ add: (p) => rbac.onPod(p, undefined), update: (p, old) => rbac.onPod(p, old), delete: (p) => rbac.onPod(undefined, p) });

  const process = async (key: string): Promise<void> => {
    const t0 = performance.now();
    const result = await reconciler.reconcile(key);
    metrics.reconcileDuration.observe((performance.now() - t0) / 1000);
    metrics.reconciles.inc({ result });
  };

  const worker = async (take: () => Promise<string | undefined>): Promise<void> => {
    for (;;) {
      const key = await take();
      if (key === undefined) return;
      try {
        if (writing) await process(key);
        queue.forget(key);
      } catch (e) {
        const retryable = e instanceof RetryableWriteError;
        metrics.errors.inc({ stage: 'reconcile' });
        metrics.reconciles.inc({ result: 'error' });
        const delay = writing ? queue.addRateLimited(key) : 0;
        logger[retryable ? 'info' : 'warn']({ key, err: e instanceof Error ? e.message : String(e), retryInMs: delay }, 'reconcile failed; retrying');
      } finally {
        queue.done(key);
        metrics.queueDepth.set(queue.length());
      }
    }
  };

  const startWorking = (): void => {
    writing = true;
    for (const k of reconciler.startEnqueueing()) enqueue(k);
    rbac?.start();
    netServices?.startWorking(services.list());
    migration?.startWorking();
    if (opts.resyncMs > 0) timers.push(setInterval(() => (reconciler.allKeys().forEach(enqueue), netServices?.resync()), opts.resyncMs));
    for (let i = 0; i < opts.workers; i++) void worker(() => queue.get());
    // The reserve worker takes only a pod's deletion or Ready flip: it starts at once even while
    // every other worker waits for a write of another Service (docs/decisions/0036-urgent-queue.md).
    if (opts.urgentPodChanges) void worker(() => queue.getUrgent());
    logger.info({ workers: opts.workers, reserve: opts.urgentPodChanges ? 1 : 0 }, 'reconciling');
  };

  const elector = opts.leaderElect
    ? new LeaderElector(
        client,
        {
          namespace: opts.leaseNamespace,
          name: opts.leaseName,
          identity: opts.identity,
          leaseDurationMs: opts.leaseDurationMs,
          renewDeadlineMs: opts.renewDeadlineMs,
          retryPeriodMs: opts.retryPeriodMs,
        },
        {
          onStartedLeading: () => {
            leading = true;
            metrics.leader.set(1);
            startWorking();
          },
          onStoppedLeading: (reason) => {
            // Not one more write from here on.
            writing = false;
            leading = false;
            metrics.leader.set(0);
            queue.shutdown();
            rbac?.stop();
            hooks.onLostLeadership?.(reason);
          },
        },
        logger,
      )
    : undefined;

  const informers: Informer<KubeObject>[] = [services, pods, slices, ...(namespaces ? [namespaces] : []), ...(nodes ? [nodes] : []), ...(nads ? [nads] : []), ...(netServices?.informers ?? []), ...(migration ? [migration.informer] : [])] as Informer<KubeObject>[];
  const health = await startHealthServer(
    {
      live: () => true,
      ready: () => (ready ? { ready: true } : { ready: false, reason: `caches syncing: ${informers.filter((i) => !i.hasSynced()).length} of ${informers.length} not synced` }),
    },
    registry,
    opts.healthPort,
    opts.healthHost,
  );
  for (const i of informers) i.start();
  let electing: Promise<void> = Promise.resolve();
  const synced = Promise.all(informers.map((i) => i.synced)).then(() => {
    if (abort.signal.aborted) return;
    ready = true;
    logger.info({ identity: opts.identity }, 'caches synced');
    if (elector !== undefined) electing = elector.run(abort.signal);
    else startWorking();
  });
  synced.catch((e: unknown) => logger.error({ err: String(e) }, 'cache sync failed'));

  return {
    health,
    registry,
    metrics,
    client,
    isLeader: () => (elector === undefined ? true : leading),
    isReady: () => ready,
    idle: () => queue.pending() === 0 && (rbac?.idle() ?? true) && (netServices?.idle() ?? true) && (migration?.idle() ?? true),
    stop: async () => {
      writing = false;
      abort.abort();
      for (const t of timers) clearInterval(t);
      queue.shutdown();
      rbac?.stop();
      netServices?.stop();
      migration?.stop();
      for (const i of informers) i.stop();
      await electing; // releases the lease when held
      await health.close();
    },
  };
}
