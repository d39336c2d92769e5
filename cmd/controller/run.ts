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
import type { KubeClient } from '../../src/kube/client.js';
import { objectKey, type KubeObject, type V1Service } from '../../src/kube/types.js';
import type { Logger } from '../../src/log.js';
import { createRegistry, type Registry } from '../../src/metrics.js';
import { startHealthServer, type HealthServer, type Readiness } from '../../src/health.js';
import { InformerSet } from '../../src/program/informers.js';
import { createEventRecorder, type EventRecorder } from './events.js';
import { fenceWrites, LeaderElector, OPEN_FENCE, type WriteFence } from './leader.js';
import { createControllerMetrics, registerKubeRequests, type ControllerMetrics } from './metrics.js';
import type { ControllerOptions } from './options.js';
import { Reconciler, ZONE_LABEL } from './reconcile.js';
import { WorkQueue } from './queue.js';
import { createRbacController, type RbacController } from './rbac-controller.js';
import { injectedAccounts } from './sidecar-rbac.js';
import { createMigration, type Migration } from './migration.js';
import { createNetServiceController, netServiceApiServed, type NetServiceController } from './netservice-controller.js';
import { nadChanged, nodeAddressList } from './slim.js';
import { NodeCapacity, nodeTopology } from './topology-hints.js';
import { nadSharedWith } from '../../src/annotations/nad-sharing.js';
import { allInformers, createControllerInformers, type ControllerInformers } from './informers.js';
import { startWorkers } from './workers.js';
import { createGroupController, type GroupController } from './group-controller.js';

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

/**
 * Whether a write may go out now: never before workers start or after leadership is lost, and
 * with leader election only while the lease's renew deadline has not run out.
 */
class WriteGate implements WriteFence {
  writing: boolean;
  elector: LeaderElector | undefined;

  constructor(open: boolean) {
    this.writing = open;
  }

  mayWrite(now?: number): boolean {
    return this.writing && (this.elector === undefined || this.elector.mayWrite(now));
  }

  writeSignal(): AbortSignal {
    return this.elector === undefined ? OPEN_FENCE.writeSignal() : this.elector.writeSignal();
  }
}

/** Everything that runs on the informers' events; all of it writes through the fenced client. */
interface Parts {
  readonly informers: ControllerInformers;
  readonly queue: WorkQueue;
  readonly reconciler: Reconciler;
  readonly netServices: NetServiceController | undefined;
  readonly migration: Migration | undefined;
  readonly rbac: RbacController | undefined;
  /** MultiNetworkPolicy address groups (cmd/controller/group-controller.ts). */
  readonly groups: GroupController;
  /** Zone CPU shares for topology-mode Auto, from the Node informer. */
  readonly zoneCapacity: NodeCapacity;
}

interface Context {
  readonly client: KubeClient;
  readonly writer: KubeClient;
  readonly gate: WriteGate;
  readonly opts: ControllerOptions;
  readonly logger: Logger;
  readonly metrics: ControllerMetrics;
}

function enqueuer(queue: WorkQueue, metrics: ControllerMetrics): (key: string) => void {
  return (key) => {
    queue.add(key);
    metrics.queueDepth.set(queue.length());
  };
}

function createReconciler(c: Context, informers: ControllerInformers, queue: WorkQueue, events: EventRecorder, zoneCapacity: NodeCapacity): Reconciler {
  const { nads } = informers;
  return new Reconciler({
    client: c.writer,
    logger: c.logger,
    metrics: c.metrics,
    events,
    getService: (key) => informers.services.get(key),
    enqueue: enqueuer(queue, c.metrics),
    ...(c.opts.urgentPodChanges ? { enqueueUrgent: (key: string) => (queue.addUrgent(key), c.metrics.queueDepth.set(queue.length())) } : {}),
    enqueueAfter: (key, ms) => queue.addAfter(key, ms),
    mayWrite: () => c.gate.mayWrite(),
    maxEndpointsPerSlice: c.opts.maxEndpointsPerSlice,
    eventIntervalMs: c.opts.eventIntervalMs,
    nadSharing: (ref, namespace) => {
      const nad = nads?.get(`${ref.namespace}/${ref.name}`);
      return nadSharedWith(ref, namespace, nad?.metadata?.annotations, nad !== undefined);
    },
    nadIpam: (ref) => nads?.get(`${ref.namespace}/${ref.name}`)?.ipam,
    zoneCapacity: () => zoneCapacity.capacity(),
  });
}

async function createParts(c: Context): Promise<Parts> {
  const { opts, logger, metrics, writer } = c;
  const informers = await createControllerInformers(c.client, opts, logger);
  const queue = new WorkQueue({ baseDelayMs: 100, maxDelayMs: 60_000 });
  const events = createEventRecorder(writer, {
    intervalMs: opts.eventIntervalMs,
    instance: opts.identity,
    logger,
    onError: () => metrics.errors.inc({ stage: 'event' }),
    onDrop: (why) => metrics.eventsDropped.inc({ why }),
  });
  const zoneCapacity = new NodeCapacity();
  const reconciler = createReconciler(c, informers, queue, events, zoneCapacity);
  const mayWrite = (): boolean => c.gate.mayWrite();
  const netServices = await netServicePart(writer, opts, logger, { events, mayWrite, onError: () => metrics.errors.inc({ stage: 'netservice' }) });
  const migration = opts.removeMultusServiceSlices
    ? createMigration({
        client: writer,
        logger,
        events,
        mayWrite,
        getService: (key) => informers.services.get(key),
        ...(opts.namespace !== undefined ? { namespace: opts.namespace } : {}),
        onError: () => metrics.errors.inc({ stage: 'migration' }),
      })
    : undefined;
  // Sidecar RBAC: its own controller and queue (cmd/controller/rbac-controller.ts).
  const { namespaces, pods } = informers;
  const rbac =
    namespaces === undefined || !opts.manageSidecarRbac
      ? undefined
      : createRbacController({ client: writer, namespaces: () => namespaces.list(), accounts: () => injectedAccounts(pods.list()), logger, metrics, events });
  const groups = createGroupController({
    client: writer,
    reader: c.client,
    logger,
    metrics,
    events,
    mayWrite,
    maxEndpointsPerSlice: opts.maxEndpointsPerSlice,
    maxAddressesPerGroup: opts.maxAddressesPerGroup,
    ...(opts.namespace !== undefined ? { namespace: opts.namespace } : {}),
    selectPods: (ns, selector) => reconciler.selectPods(ns, selector),
    addressPolicy: () => reconciler.currentAddressPolicy(),
    nadIpam: (ref) => informers.nads?.get(`${ref.namespace}/${ref.name}`)?.ipam,
  });
  return { informers, queue, reconciler, netServices, migration, rbac, groups, zoneCapacity };
}

/** Each informer's events to the parts that read them. */
function routeEvents(p: Parts): void {
  const { services, pods, slices, groupSlices, nodes, nads, namespaces } = p.informers;
  const { reconciler, rbac, groups } = p;
  nads?.on({ add: () => reconciler.onNadChange(), update: (n, old) => (nadChanged(n, old) ? reconciler.onNadChange() : undefined), delete: () => reconciler.onNadChange() });
  const onService = (s: V1Service): void => {
    p.netServices?.onService(s);
    p.migration?.onService(s);
  };
  services.on({
    add: (s) => (reconciler.onService(s), onService(s)),
    update: (s) => (reconciler.onService(s), onService(s)),
    delete: (s) => (reconciler.onService(s, true), onService(s)),
  });
  pods.on({ add: (pod) => reconciler.onPod(pod, undefined), update: (pod, old) => reconciler.onPod(pod, old), delete: (pod) => reconciler.onPod(undefined, pod) });
  slices.on({ add: (s) => reconciler.onSlice(s, false), update: (s, old) => reconciler.onSliceUpdate(s, old), delete: (s) => reconciler.onSlice(s, true) });
  const onNode = (n: KubeObject, gone: boolean): void => {
    if (p.zoneCapacity.set(objectKey(n), gone ? undefined : nodeTopology(n))) reconciler.onZoneCapacityChange();
    reconciler.onNode(objectKey(n), gone ? undefined : n.metadata?.labels?.[ZONE_LABEL]);
    reconciler.onNodeAddresses(objectKey(n), gone ? [] : nodeAddressList(n));
  };
  nodes?.on({ add: (n) => onNode(n, false), update: (n) => onNode(n, false), delete: (n) => onNode(n, true) });
  namespaces?.on({ add: (n) => rbac?.onNamespace(n, undefined), update: (n, old) => rbac?.onNamespace(n, old), delete: (n) => rbac?.onNamespace(undefined, n) });
  namespaces?.on({ add: (n) => groups.onNamespace(n, undefined), update: (n, old) => groups.onNamespace(n, old), delete: (n) => groups.onNamespace(undefined, n) });
  // After the reconciler's pod handler (registered above), whose pod index the groups read.
  pods.on({ add: (pod) => groups.onPod(pod, undefined), update: (pod, old) => groups.onPod(pod, old), delete: (pod) => groups.onPod(undefined, pod) });
  groupSlices.on({ add: (s) => groups.onSlice(s, false), update: (s) => groups.onSlice(s, false), delete: (s) => groups.onSlice(s, true) });
  if (rbac !== undefined) pods.on({ add: (pod) => rbac.onPod(pod, undefined), update: (pod, old) => rbac.onPod(pod, old), delete: (pod) => rbac.onPod(undefined, pod) });
}

/** The controller's own state: what a replica is doing now, and what it must undo when stopping. */
class ControllerState {
  leading = false;
  ready = false;
  electing: Promise<void> = Promise.resolve();
  readonly timers: NodeJS.Timeout[] = [];
  readonly abort = new AbortController();

  constructor(
    private readonly c: Context,
    readonly parts: Parts,
    readonly informers: InformerSet,
  ) {}

  /** Leadership held (or no election): enqueue every key once, start the workers and the periodic resync. */
  startWorking(): void {
    const { gate, opts, logger, metrics } = this.c;
    const { reconciler, queue, rbac, netServices, migration, informers, groups } = this.parts;
    gate.writing = true;
    const enqueue = enqueuer(queue, metrics);
    for (const k of reconciler.startEnqueueing()) enqueue(k);
    rbac?.start();
    netServices?.startWorking(informers.services.list());
    migration?.startWorking();
    groups.startWorking();
    if (opts.resyncMs > 0) this.timers.push(setInterval(() => (reconciler.allKeys().forEach(enqueue), netServices?.resync(), groups.resync()), opts.resyncMs));
    startWorkers({ queue, reconciler, metrics, logger, writing: () => gate.writing }, opts.workers, opts.urgentPodChanges);
    logger.info({ workers: opts.workers, reserve: opts.urgentPodChanges ? 1 : 0 }, 'reconciling');
  }

  /** Leadership lost: not one more write from here on. */
  stopWorking(): void {
    this.c.gate.writing = false;
    this.leading = false;
    this.c.metrics.leader.set(0);
    this.parts.queue.shutdown();
    this.parts.rbac?.stop();
    this.parts.groups.stop();
  }

  readiness(): Readiness {
    return this.ready ? { ready: true } : { ready: false, reason: `caches syncing: ${this.informers.notSynced()} of ${this.informers.size} not synced` };
  }

  idle(): boolean {
    const { queue, rbac, netServices, migration, groups } = this.parts;
    return queue.pending() === 0 && groups.idle() && (rbac?.idle() ?? true) && (netServices?.idle() ?? true) && (migration?.idle() ?? true);
  }

  async stop(health: HealthServer): Promise<void> {
    this.c.gate.writing = false;
    this.abort.abort();
    for (const t of this.timers) clearInterval(t);
    this.parts.queue.shutdown();
    this.parts.rbac?.stop();
    this.parts.netServices?.stop();
    this.parts.migration?.stop();
    this.parts.groups.stop();
    this.informers.stop();
    await this.electing; // releases the lease when held
    await health.close();
  }
}

function createElector(c: Context, state: ControllerState, hooks: ControllerHooks): LeaderElector {
  const { opts } = c;
  const lease = {
    namespace: opts.leaseNamespace,
    name: opts.leaseName,
    identity: opts.identity,
    leaseDurationMs: opts.leaseDurationMs,
    renewDeadlineMs: opts.renewDeadlineMs,
    retryPeriodMs: opts.retryPeriodMs,
  };
  return new LeaderElector(
    c.client,
    lease,
    {
      onStartedLeading: () => {
        state.leading = true;
        c.metrics.leader.set(1);
        state.startWorking();
      },
      onStoppedLeading: (reason) => {
        state.stopWorking();
        hooks.onLostLeadership?.(reason);
      },
    },
    c.logger,
  );
}

/** Once every cache has synced: ready, then campaign for the lease (or work at once without election). */
function afterSync(c: Context, state: ControllerState): void {
  const synced = state.informers.synced().then(() => {
    if (state.abort.signal.aborted) return;
    state.ready = true;
    c.logger.info({ identity: c.opts.identity }, 'caches synced');
    if (c.gate.elector !== undefined) state.electing = c.gate.elector.run(state.abort.signal);
    else state.startWorking();
  });
  synced.catch((e: unknown) => c.logger.error({ err: String(e) }, 'cache sync failed'));
}

export async function startController(client: KubeClient, opts: ControllerOptions, logger: Logger, hooks: ControllerHooks = {}): Promise<RunningController> {
  const registry = hooks.registry ?? createRegistry('multus_proxy_controller');
  const metrics = createControllerMetrics(registry);
  registerKubeRequests(registry, () => client.requestCount());
  const gate = new WriteGate(!opts.leaderElect);
  const c: Context = { client, writer: fenceWrites(client, gate), gate, opts, logger, metrics };
  const parts = await createParts(c);
  routeEvents(parts);
  const informers = new InformerSet([...allInformers(parts.informers), ...(parts.netServices?.informers ?? []), ...(parts.migration ? [parts.migration.informer] : [])]);
  const state = new ControllerState(c, parts, informers);
  // The fence is only consulted once workers run, after this.
  if (opts.leaderElect) gate.elector = createElector(c, state, hooks);
  const health = await startHealthServer({ live: () => true, ready: () => state.readiness() }, registry, opts.healthPort, opts.healthHost);
  informers.start();
  // The policy API is optional: probed apart, so its absence neither crashes nor holds readiness.
  parts.groups.watch();
  afterSync(c, state);
  return {
    health,
    registry,
    metrics,
    client,
    isLeader: () => (gate.elector === undefined ? true : state.leading),
    isReady: () => state.ready,
    idle: () => state.idle(),
    stop: () => state.stop(health),
  };
}
