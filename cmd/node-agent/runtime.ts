/**
 * The node agent's IO shell: four informers (opted-in Services, our EndpointSlices, the NADs, its
 * own Node) feed caches; a change marks the state dirty; the shared sync loop
 * (src/dataplane/core/scheduler.ts: coalescing with a burst allowance, retries with backoff and a full
 * sync after a failure, a periodic full resync, liveness) plans (state.ts NodePlanner: pure,
 * memoised per Service), brings the host-side interfaces to the plan, applies the rules through
 * the shared apply loop, updates the healthCheckNodePort listeners, and reports problems once
 * each as Warning Events. Ready after the first complete sync. Stopping never touches the rules
 * or the interfaces (a rolling update drops no connection); `--cleanup` is main's job.
 */
import type { ExternalIPPolicy } from '../../src/external-ips.js';
import { randomBytes } from 'node:crypto';
import { parseIp } from '../../src/annotations/ip.js';
import { MANAGED_BY, MANAGED_BY_LABEL, PROXY_NAME, PROXY_NAME_LABEL } from '../../src/keys.js';
import type { Logger } from '../../src/log.js';
import type { KubeClient } from '../../src/kube/client.js';
import { createInformer, type Informer } from '../../src/kube/informer.js';
import { createEventQueue } from '../../src/kube/event-queue.js';
import { apiPath } from '../../src/kube/paths.js';
import { objectKey, type CoreV1Event, type KubeObject, type NetworkAttachmentDefinition, type V1EndpointSlice, type V1Node, type V1Service } from '../../src/kube/types.js';
import type { Dataplane, SyncResult } from '../../src/dataplane/index.js';
import { createSyncLoop, sliceTriggerMs, type ApplyReport, createSyncMetrics } from '../../src/dataplane/index.js';
import { prom, type Registry } from '../../src/metrics.js';
import type { HostInterfaces } from './dataplane.js';
import type { HealthCheckServers } from './health-check.js';
import { NodePlanner, type NodePlan, type NodeProblem } from './state.js';
import type { NodeState } from './rules.js';
import { InformerSet } from '../../src/program/informers.js';
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
  /** The admin's external-IP CIDRs (--external-ips-allowed-cidrs); unset: no external IP is served. */
  readonly externalIPs?: ExternalIPPolicy;
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

/** How many distinct problems the agent remembers having reported. */
const MAX_REPORTED_PROBLEMS = 4096;

/** Each problem once as a Warning Event (and a log line) for as long as the process runs. */
class ProblemEvents {
  private readonly reported = new Set<string>();
  // Every Event of this process goes through one bounded queue (aggregation, spam filter).
  private readonly queue: ReturnType<typeof createEventQueue>;

  constructor(
    client: KubeClient,
    private readonly log: Logger,
    private readonly nodeName: string,
  ) {
    this.queue = createEventQueue({ write: (body) => client.create(apiPath('', 'v1', 'events', body.metadata.namespace), body), onError: (e) => log.warn({ err: e }, 'could not write Event') });
  }

  async report(p: NodeProblem): Promise<void> {
    const key = `${p.kind}/${p.namespace ?? ''}/${p.name}/${p.message}`;
    if (this.reported.has(key)) return;
    // The keys hold tenant text: past the bound, forget them all (a problem then reports once more, through the queue's spam filter).
    if (this.reported.size >= MAX_REPORTED_PROBLEMS) this.reported.clear();
    this.reported.add(key);
    this.log.warn({ object: `${p.kind} ${p.namespace !== undefined ? `${p.namespace}/` : ''}${p.name}`, reason: p.reason }, p.message);
    const namespace = p.namespace ?? 'default';
    const now = new Date().toISOString();
    const body: CoreV1Event = {
      metadata: { name: `${p.name}.${randomBytes(8).toString('hex')}`, namespace },
      involvedObject: {
        kind: p.kind,
        name: p.name,
        ...(p.namespace !== undefined ? { namespace: p.namespace } : {}),
        apiVersion: p.kind === 'NetworkAttachmentDefinition' ? 'k8s.cni.cncf.io/v1' : 'v1',
      },
      reason: p.reason,
      message: p.message.slice(0, 1000),
      type: 'Warning',
      source: { component: EVENT_COMPONENT, host: this.nodeName },
      firstTimestamp: now as unknown as Date,
      lastTimestamp: now as unknown as Date,
      count: 1,
    };
    this.queue.submit(body);
  }
}

/** The node agent's own gauges, besides the shared sync metrics. */
class NodeGauges {
  private readonly nodePorts: prom.Gauge;
  private readonly loadBalancers: prom.Gauge;
  private readonly networksServed: prom.Gauge;
  private readonly unservable: prom.Gauge<'network' | 'type'>;
  readonly refusals: prom.Gauge<'reason'>;
  private readonly refusedServices: prom.Gauge<'reason'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.nodePorts = new prom.Gauge({ name: 'multus_proxy_node_nodeports', help: 'NodePort frontends served on this node', registers });
    this.loadBalancers = new prom.Gauge({ name: 'multus_proxy_node_loadbalancer_frontends', help: 'LoadBalancer ingress IP frontends (ingress IP, port, family) served on this node', registers });
    this.networksServed = new prom.Gauge({ name: 'multus_proxy_node_networks', help: 'Networks this node has its own interface on', registers });
    this.unservable = new prom.Gauge({
      name: 'multus_proxy_node_unservable_networks',
      help: 'Networks used by opted-in Services that the agent cannot serve, by CNI type',
      labelNames: ['network', 'type'],
      registers,
    });
    this.refusals = new prom.Gauge({
      name: 'multus_proxy_node_refused_networks',
      help: "Networks the agent does not serve on this node: ParentRefused (the parent carries the node's own networking), ParentNotConfigured (the admin named no parent)",
      labelNames: ['reason'],
      registers,
    });
    this.refusedServices = new prom.Gauge({
      name: 'multus_proxy_node_services_refused',
      help: "Services the agent does not serve: ServiceOverBudget (over its budget per object), NetworkNotShared (names another namespace's network not shared with it), ServiceCapReached (its namespace is over its share of a network)",
      labelNames: ['reason'],
      registers,
    });
  }

  /** After a sync: what the plan serves and what it cannot. */
  planned(plan: NodePlan): void {
    this.refusals.set({ reason: 'ParentNotConfigured' }, plan.parentNotConfigured.length);
    for (const reason of REFUSAL_REASONS)
      this.refusedServices.set(
        { reason },
        plan.refused.reduce((n, r) => n + (r.reason === reason ? r.services : 0), 0),
      );
    this.unservable.reset();
    // 0 for each network it can serve, so the alert on this gauge has data on a healthy node.
    for (const n of plan.servable) this.unservable.set({ network: n.network, type: n.type }, 0);
    for (const u of plan.unservable) this.unservable.set({ network: u.network, type: u.type }, 1);
    this.nodePorts.set(plan.state.nodePorts.length);
    this.loadBalancers.set(plan.state.loadBalancers?.length ?? 0);
    this.networksServed.set(plan.state.networks.length);
  }
}

const internalIPs = (n: V1Node | undefined): string[] =>
  (n?.status?.addresses ?? [])
    .filter((a) => a.type === 'InternalIP')
    .flatMap((a) => {
      const p = parseIp(a.address);
      return p.ok ? [p.value.address] : [];
    });

/**
 * Applies a plan: the host-side interfaces, the rules, the health-check listeners, the gauges. The
 * interfaces last brought to the plan are remembered: a partial sync with the same plan leaves
 * them (no `ip` run per change); a full sync (start, periodic, after a failure) reads and repairs them.
 */
class PlanApplier {
  private interfacesDone: string | undefined;

  constructor(
    private readonly opts: NodeRuntimeOptions,
    private readonly deps: NodeRuntimeDeps,
    private readonly node: () => V1Node | undefined,
    private readonly events: ProblemEvents,
    private readonly gauges: NodeGauges,
  ) {}

  readonly apply = async (plan: NodePlan, { full }: { full: boolean }): Promise<ApplyReport> => {
    const wanted = JSON.stringify(plan.interfaces);
    if (full || wanted !== this.interfacesDone) await this.bringInterfaces(plan, wanted);
    const result = this.report(await this.deps.dataplane.sync(plan.state, { full }));
    await this.deps.healthChecks.update(plan.healthChecks);
    for (const p of plan.problems) void this.events.report(p);
    this.gauges.planned(plan);
    return result;
  };

  private async bringInterfaces(plan: NodePlan, wanted: string): Promise<void> {
    const { log } = this.deps;
    const nodeName = this.opts.nodeName;
    this.interfacesDone = undefined;
    const ifaces = await this.deps.interfaces.sync(plan.interfaces, internalIPs(this.node()));
    if (ifaces.lines.length > 0) log.info({ created: ifaces.created, deleted: ifaces.deleted, readdressed: ifaces.readdressed }, 'node interfaces changed');
    for (const c of ifaces.conflicts) void this.events.report({ kind: 'Node', name: nodeName, reason: 'InterfaceNameTaken', message: c });
    for (const r of ifaces.refused) void this.events.report({ kind: 'Node', name: nodeName, reason: 'ParentRefused', message: r });
    this.gauges.refusals.set({ reason: 'ParentRefused' }, ifaces.refused.length);
    // A conflict leaves that network unserved: look again at the next sync.
    if (ifaces.conflicts.length === 0) this.interfacesDone = wanted;
  }

  private report(r: SyncResult): ApplyReport {
    if (r.changed) this.deps.log.info({ full: r.full, ms: Math.round(r.durationMs), routesReplaced: r.routesReplaced, conntrackFlushes: r.conntrackFlushes, served: r.served }, 'node rules applied');
    return { rules: r.rules, changed: r.changed };
  }
}

function nodeInformers(
  client: KubeClient,
  log: Logger,
  nodeName: string,
): { services: Informer<V1Service>; slices: Informer<V1EndpointSlice>; nads: Informer<NetworkAttachmentDefinition>; nodes: Informer<V1Node> } {
  const informer = <T extends KubeObject>(name: string, path: string, sel: { labelSelector?: string; fieldSelector?: string; transform?: (o: T) => T } = {}): Informer<T> =>
    createInformer<T>(client, { name, path, logger: log, ...sel });
  return {
    // Tenant objects are slimmed, and refused when over budget, before they are cached (slim.ts).
    services: informer<V1Service>('services', apiPath('', 'v1', 'services'), { labelSelector: `${PROXY_NAME_LABEL}=${PROXY_NAME}`, transform: slimNodeService }),
    slices: informer<V1EndpointSlice>('endpointslices', apiPath('discovery.k8s.io', 'v1', 'endpointslices'), { labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY}` }),
    nads: informer<NetworkAttachmentDefinition>('nads', apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions'), { transform: slimNad }),
    nodes: informer<V1Node>('node', apiPath('', 'v1', 'nodes'), { fieldSelector: `metadata.name=${nodeName}` }),
  };
}

export function createNodeRuntime(opts: NodeRuntimeOptions, deps: NodeRuntimeDeps): NodeRuntime {
  const { client, log } = deps;
  const { services, slices, nads, nodes } = nodeInformers(client, log, opts.nodeName);
  const all = new InformerSet([services, slices, nads, nodes]);
  const startedMs = Date.now();
  const metrics = createSyncMetrics(deps.registry, 'multus_proxy_node', { driftChecks: false });
  const applier = new PlanApplier(opts, deps, () => nodes.list()[0], new ProblemEvents(client, log, opts.nodeName), new NodeGauges(deps.registry));
  // Remembers the last plan's per-Service work: a sync redoes only the Services whose objects changed.
  const planner = new NodePlanner(undefined, opts.externalIPs);
  const loop = createSyncLoop<NodePlan>(
    {
      minSyncIntervalMs: opts.minSyncIntervalMs,
      fullResyncIntervalMs: opts.fullResyncIntervalMs,
      retryMinMs: opts.retryMinMs ?? 1_000,
      retryMaxMs: opts.retryMaxMs ?? 30_000,
      stuckAfterMs: STUCK_AFTER_MS,
    },
    {
      compute: () =>
        planner.update({
          nodeName: opts.nodeName,
          node: nodes.list()[0],
          services: services.list(),
          slices: slices.list(),
          nads: nads.list(),
          masqueradeMark: opts.masqueradeMark,
          parentFromNad: opts.parentFromNad === true,
        }),
      // A failure makes the next sync a full one, which brings the interfaces to the plan again.
      apply: applier.apply,
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
  for (const i of [services, nads, nodes] as const) (i as Informer<KubeObject>).on({ add: markDirty, update: markDirty, delete: markDirty });
  slices.on({ add: onSlice, update: onSlice, delete: onSlice });
  return {
    start() {
      // services, nads, nodes, then slices: the order they always started in.
      for (const i of [services, nads, nodes, slices] as const) i.start();
      void all.synced().then(() => {
        log.info('caches synced; first sync');
        loop.start();
      });
    },
    firstSync: loop.firstSync,
    ready: () => (loop.synced() ? { ready: true } : { ready: false, reason: all.notSynced() === 0 ? 'first sync not done' : 'caches not synced' }),
    live: () => loop.live(),
    async stop() {
      all.stop();
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
