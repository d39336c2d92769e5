/**
 * The node agent's IO shell: four informers (opted-in Services, our EndpointSlices, the NADs, its
 * own Node) feed caches; a change marks the state dirty; the shared sync loop
 * (src/dataplane/sync-loop.ts: coalescing with a burst allowance, retries with backoff and a full
 * sync after a failure, a periodic full resync, liveness) plans (state.ts NodePlanner: pure,
 * memoised per Service), brings the host-side interfaces to the plan, applies the rules through
 * the shared apply loop, updates the healthCheckNodePort listeners, and reports problems once
 * each as Warning Events. Ready after the first complete sync. Stopping never touches the rules
 * or the interfaces (a rolling update drops no connection); `--cleanup` is main's job.
 */
import { randomBytes } from 'node:crypto';
import { parseIp } from '../../src/annotations/ip.js';
import { MANAGED_BY, MANAGED_BY_LABEL, PROXY_NAME, PROXY_NAME_LABEL } from '../../src/keys.js';
import type { Logger } from '../../src/log.js';
import type { KubeClient } from '../../src/kube/client.js';
import { createInformer, type Informer } from '../../src/kube/informer.js';
import { apiPath } from '../../src/kube/paths.js';
import { objectKey, type CoreV1Event, type KubeObject, type NetworkAttachmentDefinition, type V1EndpointSlice, type V1Node, type V1Service } from '../../src/kube/types.js';
import type { Dataplane, SyncResult } from '../../src/dataplane/apply.js';
import { createSyncLoop, sliceTriggerMs, type ApplyReport } from '../../src/dataplane/sync-loop.js';
import { createSyncMetrics } from '../../src/dataplane/sync-metrics.js';
import { prom, type Registry } from '../../src/metrics.js';
import type { HostInterfaces } from './dataplane.js';
import type { HealthCheckServers } from './health-check.js';
import { NodePlanner, type NodePlan, type NodeProblem } from './state.js';
import type { NodeState } from './rules.js';
import { slimNad, slimNodeService } from './slim.js';
import { REFUSAL_REASONS } from './admission.js';

export interface NodeRuntimeOptions {
  readonly nodeName: string;
  readonly masqueradeMark: number;
  /** `--parent-from-nad`: where the Node names no parent, the NAD's (upgrades; state.ts). */
  readonly parentFromNad?: boolean;
  readonly minSyncIntervalMs: number;
  readonly fullResyncIntervalMs: number;
  readonly retryMinMs?: number;
  readonly retryMaxMs?: number;
}

export interface NodeRuntimeDeps {
  readonly client: KubeClient;
  readonly dataplane: Pick<Dataplane<NodeState>, 'sync'>;
  readonly interfaces: Pick<HostInterfaces, 'sync'>;
  readonly healthChecks: HealthCheckServers;
  readonly log: Logger;
  readonly registry: Registry;
}

export interface NodeRuntime {
  start(): void;
  readonly firstSync: Promise<void>;
  ready(): { ready: boolean; reason?: string };
  live(): boolean;
  /** Stops informers and timers; waits for a running sync. Rules and interfaces stay. */
  stop(): Promise<void>;
}

export const EVENT_COMPONENT = 'multus-proxy-node';

export function createNodeRuntime(opts: NodeRuntimeOptions, deps: NodeRuntimeDeps): NodeRuntime {
  const { client, log } = deps;
  const informer = <T extends KubeObject>(name: string, path: string, sel: { labelSelector?: string; fieldSelector?: string; transform?: (o: T) => T } = {}): Informer<T> =>
    createInformer<T>(client, { name, path, logger: log, ...sel });
  // Tenant objects are slimmed, and refused when over budget, before they are cached (slim.ts).
  const services = informer<V1Service>('services', apiPath('', 'v1', 'services'), { labelSelector: `${PROXY_NAME_LABEL}=${PROXY_NAME}`, transform: slimNodeService });
  const slices = informer<V1EndpointSlice>('endpointslices', apiPath('discovery.k8s.io', 'v1', 'endpointslices'), { labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY}` });
  const nads = informer<NetworkAttachmentDefinition>('nads', apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions'), { transform: slimNad });
  const nodes = informer<V1Node>('node', apiPath('', 'v1', 'nodes'), { fieldSelector: `metadata.name=${opts.nodeName}` });
  const all = [services, slices, nads, nodes] as const;

  const startedMs = Date.now();
  const metrics = createSyncMetrics(deps.registry, 'multus_proxy_node', { driftChecks: false });
  const nodePorts = new prom.Gauge({ name: 'multus_proxy_node_nodeports', help: 'NodePort frontends served on this node', registers: [deps.registry] });
  const loadBalancers = new prom.Gauge({ name: 'multus_proxy_node_loadbalancer_frontends', help: 'LoadBalancer ingress IP frontends (ingress IP, port, family) served on this node', registers: [deps.registry] });
  const networksServed = new prom.Gauge({ name: 'multus_proxy_node_networks', help: 'Networks this node has its own interface on', registers: [deps.registry] });
  const unservable = new prom.Gauge({ name: 'multus_proxy_node_unservable_networks', help: 'Networks used by opted-in Services that the agent cannot serve, by CNI type', labelNames: ['network', 'type'], registers: [deps.registry] });

  const refusals = new prom.Gauge({ name: 'multus_proxy_node_refused_networks', help: 'Networks the agent does not serve on this node: ParentRefused (the parent carries the node\'s own networking), ParentNotConfigured (the admin named no parent)', labelNames: ['reason'], registers: [deps.registry] });
  const refusedServices = new prom.Gauge({ name: 'multus_proxy_node_services_refused', help: 'Services the agent does not serve: ServiceOverBudget (over its budget per object), NetworkNotShared (names another namespace\'s network not shared with it), ServiceCapReached (its namespace is over its share of a network)', labelNames: ['reason'], registers: [deps.registry] });
  const internalIPs = (n: V1Node | undefined): string[] =>
    (n?.status?.addresses ?? []).filter((a) => a.type === 'InternalIP').flatMap((a) => {
      const p = parseIp(a.address);
      return p.ok ? [p.value.address] : [];
    });

  const reported = new Set<string>();
  // Remembers the last plan's per-Service work: a sync redoes only the Services whose objects changed.
  const planner = new NodePlanner();
  // The interfaces last brought to the plan: a partial sync with the same plan leaves them (no
  // `ip` run per change); a full sync (start, periodic, after a failure) reads and repairs them.
  let interfacesDone: string | undefined;

  async function event(p: NodeProblem): Promise<void> {
    const key = `${p.kind}/${p.namespace ?? ''}/${p.name}/${p.message}`;
    if (reported.has(key)) return;
    reported.add(key);
    log.warn({ object: `${p.kind} ${p.namespace !== undefined ? `${p.namespace}/` : ''}${p.name}`, reason: p.reason }, p.message);
    const namespace = p.namespace ?? 'default';
    const now = new Date().toISOString();
    const body: CoreV1Event = {
      metadata: { name: `${p.name}.${randomBytes(8).toString('hex')}`, namespace },
      involvedObject: { kind: p.kind, name: p.name, ...(p.namespace !== undefined ? { namespace: p.namespace } : {}), apiVersion: p.kind === 'NetworkAttachmentDefinition' ? 'k8s.cni.cncf.io/v1' : 'v1' },
      reason: p.reason,
      message: p.message.slice(0, 1000),
      type: 'Warning',
      source: { component: EVENT_COMPONENT, host: opts.nodeName },
      firstTimestamp: now as unknown as Date,
      lastTimestamp: now as unknown as Date,
      count: 1,
    };
    try {
      await client.create(apiPath('', 'v1', 'events', namespace), body);
    } catch (e) {
      log.warn({ err: e }, 'could not write Event');
    }
  }

  function report(r: SyncResult): ApplyReport {
    if (r.changed) log.info({ full: r.full, ms: Math.round(r.durationMs), routesReplaced: r.routesReplaced, conntrackFlushes: r.conntrackFlushes, served: r.served }, 'node rules applied');
    return { rules: r.rules, changed: r.changed };
  }

  async function apply(plan: NodePlan, { full }: { full: boolean }): Promise<ApplyReport> {
    const wanted = JSON.stringify(plan.interfaces);
    if (full || wanted !== interfacesDone) {
      interfacesDone = undefined;
      const ifaces = await deps.interfaces.sync(plan.interfaces, internalIPs(nodes.list()[0]));
      if (ifaces.lines.length > 0) log.info({ created: ifaces.created, deleted: ifaces.deleted, readdressed: ifaces.readdressed }, 'node interfaces changed');
      for (const c of ifaces.conflicts) void event({ kind: 'Node', name: opts.nodeName, reason: 'InterfaceNameTaken', message: c });
      for (const r of ifaces.refused) void event({ kind: 'Node', name: opts.nodeName, reason: 'ParentRefused', message: r });
      refusals.set({ reason: 'ParentRefused' }, ifaces.refused.length);
      // A conflict leaves that network unserved: look again at the next sync.
      if (ifaces.conflicts.length === 0) interfacesDone = wanted;
    }
    const result = report(await deps.dataplane.sync(plan.state, { full }));
    await deps.healthChecks.update(plan.healthChecks);
    for (const p of plan.problems) void event(p);
    for (const reason of REFUSAL_REASONS) refusedServices.set({ reason }, plan.refused.reduce((n, r) => n + (r.reason === reason ? r.services : 0), 0));
    refusals.set({ reason: 'ParentNotConfigured' }, plan.parentNotConfigured.length);
    unservable.reset();
    for (const u of plan.unservable) unservable.set({ network: u.network, type: u.type }, 1);
    nodePorts.set(plan.state.nodePorts.length);
    loadBalancers.set(plan.state.loadBalancers?.length ?? 0);
    networksServed.set(plan.state.networks.length);
    return result;
  }

  const loop = createSyncLoop<NodePlan>(
    {
      minSyncIntervalMs: opts.minSyncIntervalMs,
      fullResyncIntervalMs: opts.fullResyncIntervalMs,
      retryMinMs: opts.retryMinMs ?? 1_000,
      retryMaxMs: opts.retryMaxMs ?? 30_000,
      stuckAfterMs: STUCK_AFTER_MS,
    },
    {
      compute: () => planner.update({ nodeName: opts.nodeName, node: nodes.list()[0], services: services.list(), slices: slices.list(), nads: nads.list(), masqueradeMark: opts.masqueradeMark, parentFromNad: opts.parentFromNad === true }),
      // A failure makes the next sync a full one, which brings the interfaces to the plan again.
      apply,
      size: (plan) => nodeStateSize(plan.state),
      metrics,
      log,
    },
  );

  const markDirty = (): void => loop.markDirty();
  const onSlice = (slice: V1EndpointSlice): void => {
    // Changes after start-up measure programming latency; the initial list measures start-up.
    if (slices.hasSynced()) {
      const trigger = sliceTriggerMs(slice);
      loop.noteSliceChange(objectKey(slice), Date.now(), trigger !== undefined && trigger >= startedMs ? trigger : undefined);
    }
    loop.markDirty();
  };

  return {
    start() {
      for (const i of [services, nads, nodes] as const) {
        (i as Informer<KubeObject>).on({ add: markDirty, update: markDirty, delete: markDirty });
        i.start();
      }
      slices.on({ add: onSlice, update: onSlice, delete: onSlice });
      slices.start();
      void Promise.all(all.map((i) => i.synced)).then(() => {
        log.info('caches synced; first sync');
        loop.start();
      });
    },
    firstSync: loop.firstSync,
    ready: () => (loop.synced() ? { ready: true } : { ready: false, reason: all.every((i) => i.hasSynced()) ? 'first sync not done' : 'caches not synced' }),
    live: () => loop.live(),
    async stop() {
      for (const i of all) i.stop();
      await loop.stop();
    },
  };
}

/** A hung restore or `ip` run turns liveness false after this long (the kubelet then restarts the agent). */
const STUCK_AFTER_MS = 120_000;

function nodeStateSize(state: NodeState): { targets: number; endpoints: number } {
  let endpoints = 0;
  for (const t of state.clusterTargets) endpoints += t.endpoints.length;
  const frontends = [...state.nodePorts, ...(state.loadBalancers ?? [])];
  for (const t of frontends) endpoints += (t.policy === 'Local' ? t.localEndpoints : t.base.endpoints).length;
  return { targets: state.clusterTargets.length + frontends.length, endpoints };
}
