/**
 * The node agent's IO shell: four informers (opted-in Services, our EndpointSlices, the NADs, its
 * own Node) feed caches; a change marks the state dirty; a coalesced sync plans (state.ts: pure),
 * brings the host-side interfaces to the plan, applies the rules through the shared apply loop,
 * updates the healthCheckNodePort listeners, and reports problems once each as Warning Events.
 * Ready after the first complete sync. Stopping never touches the rules or the interfaces (a
 * rolling update drops no connection); `--cleanup` is main's job.
 */
import { randomBytes } from 'node:crypto';
import { MANAGED_BY, MANAGED_BY_LABEL, PROXY_NAME, PROXY_NAME_LABEL } from '../keys.js';
import type { Logger } from '../log.js';
import type { KubeClient } from '../kube/client.js';
import { createInformer, type Informer } from '../kube/informer.js';
import { apiPath } from '../kube/paths.js';
import type { CoreV1Event, KubeObject, NetworkAttachmentDefinition, V1EndpointSlice, V1Node, V1Service } from '../kube/types.js';
import type { Dataplane, SyncResult } from '../dataplane/apply.js';
import { prom, type Registry } from '../metrics.js';
import type { HostInterfaces } from './dataplane.js';
import type { HealthCheckServers } from './health-check.js';
import { NodePlanner, type NodeProblem } from './state.js';
import type { NodeState } from './rules.js';

export interface NodeRuntimeOptions {
  readonly nodeName: string;
  readonly masqueradeMark: number;
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
  const informer = <T extends KubeObject>(name: string, path: string, sel: { labelSelector?: string; fieldSelector?: string } = {}): Informer<T> =>
    createInformer<T>(client, { name, path, logger: log, ...sel });
  const services = informer<V1Service>('services', apiPath('', 'v1', 'services'), { labelSelector: `${PROXY_NAME_LABEL}=${PROXY_NAME}` });
  const slices = informer<V1EndpointSlice>('endpointslices', apiPath('discovery.k8s.io', 'v1', 'endpointslices'), { labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY}` });
  const nads = informer<NetworkAttachmentDefinition>('nads', apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions'));
  const nodes = informer<V1Node>('node', apiPath('', 'v1', 'nodes'), { fieldSelector: `metadata.name=${opts.nodeName}` });
  const all = [services, slices, nads, nodes] as const;

  const syncs = new prom.Counter({ name: 'multus_proxy_node_syncs_total', help: 'Syncs by kind and result', labelNames: ['kind', 'result'], registers: [deps.registry] });
  const duration = new prom.Histogram({ name: 'multus_proxy_node_sync_duration_seconds', help: 'Duration of a sync (plan, interfaces, rules)', buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers: [deps.registry] });
  const nodePorts = new prom.Gauge({ name: 'multus_proxy_node_nodeports', help: 'NodePort frontends served on this node', registers: [deps.registry] });
  const networksServed = new prom.Gauge({ name: 'multus_proxy_node_networks', help: 'Networks this node has its own interface on', registers: [deps.registry] });
  const unservable = new prom.Gauge({ name: 'multus_proxy_node_unservable_networks', help: 'Networks used by opted-in Services that the agent cannot serve, by CNI type', labelNames: ['network', 'type'], registers: [deps.registry] });
  const rules = new prom.Gauge({ name: 'multus_proxy_node_rules', help: 'iptables rules of ours (both families)', registers: [deps.registry] });

  let dirty = true;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  let ready = false;
  let lastFull = 0;
  let failures = 0;
  let syncStartedMs: number | undefined;
  let lastStartMs = 0;
  let resolveFirst: () => void = () => undefined;
  const firstSync = new Promise<void>((r) => (resolveFirst = r));
  const reported = new Set<string>();
  // Remembers the last plan's per-Service work: a sync redoes only the Services whose objects changed.
  const planner = new NodePlanner();

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

  function report(r: SyncResult): void {
    if (r.changed) log.info({ full: r.full, ms: Math.round(r.durationMs), routesReplaced: r.routesReplaced, conntrackFlushes: r.conntrackFlushes, served: r.served }, 'node rules applied');
    rules.set(r.rules);
  }

  async function syncOnce(): Promise<void> {
    const t0 = Date.now();
    const full = t0 - lastFull >= opts.fullResyncIntervalMs || failures > 0;
    syncStartedMs = t0;
    lastStartMs = t0;
    try {
      const plan = planner.update({ nodeName: opts.nodeName, node: nodes.list()[0], services: services.list(), slices: slices.list(), nads: nads.list(), masqueradeMark: opts.masqueradeMark });
      const ifaces = await deps.interfaces.sync(plan.interfaces);
      if (ifaces.lines.length > 0) log.info({ created: ifaces.created, deleted: ifaces.deleted, readdressed: ifaces.readdressed }, 'node interfaces changed');
      for (const c of ifaces.conflicts) void event({ kind: 'Node', name: opts.nodeName, reason: 'InterfaceNameTaken', message: c });
      const r = await deps.dataplane.sync(plan.state, { full });
      report(r);
      await deps.healthChecks.update(plan.healthChecks);
      for (const p of plan.problems) void event(p);
      unservable.reset();
      for (const u of plan.unservable) unservable.set({ network: u.network, type: u.type }, 1);
      nodePorts.set(plan.state.nodePorts.length);
      networksServed.set(plan.state.networks.length);
      if (full) lastFull = t0;
      failures = 0;
      syncs.inc({ kind: full ? 'full' : 'partial', result: 'ok' });
      if (!ready) {
        ready = true;
        resolveFirst();
      }
    } catch (e) {
      failures += 1;
      syncs.inc({ kind: full ? 'full' : 'partial', result: 'error' });
      log.error({ err: e }, 'node sync failed; retrying with a full sync');
      dirty = true;
    } finally {
      duration.observe((Date.now() - t0) / 1000);
      syncStartedMs = undefined;
    }
  }

  function schedule(delayMs: number): void {
    if (stopped || timer !== undefined) return;
    timer = setTimeout(() => {
      timer = undefined;
      if (running !== undefined) return schedule(opts.minSyncIntervalMs);
      if (!dirty && Date.now() - lastFull < opts.fullResyncIntervalMs) return schedule(opts.fullResyncIntervalMs - (Date.now() - lastFull));
      dirty = false;
      running = syncOnce().finally(() => {
        running = undefined;
        const backoff = Math.min(opts.retryMaxMs ?? 30_000, (opts.retryMinMs ?? 1_000) * 2 ** Math.max(0, failures - 1));
        schedule(failures > 0 ? backoff : dirty ? opts.minSyncIntervalMs : opts.fullResyncIntervalMs);
      });
    }, Math.max(0, delayMs));
  }

  const markDirty = (): void => {
    dirty = true;
    if (!all.every((i) => i.hasSynced())) return;
    if (timer !== undefined && running === undefined) {
      clearTimeout(timer);
      timer = undefined;
    }
    // Syncs start at most every minSyncIntervalMs: a change after a quiet spell syncs at once
    // (as the sidecar's sync loop does); changes in a burst wait for the interval and coalesce.
    schedule(failures > 0 ? opts.minSyncIntervalMs : lastStartMs + opts.minSyncIntervalMs - Date.now());
  };

  return {
    start() {
      for (const i of all) {
        (i as Informer<KubeObject>).on({ add: markDirty, update: markDirty, delete: markDirty });
        i.start();
      }
      void Promise.all(all.map((i) => i.synced)).then(() => {
        log.info('caches synced; first sync');
        markDirty();
      });
    },
    firstSync,
    ready: () => (ready ? { ready: true } : { ready: false, reason: all.every((i) => i.hasSynced()) ? 'first sync not done' : 'caches not synced' }),
    live: () => syncStartedMs === undefined || Date.now() - syncStartedMs < 120_000,
    async stop() {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      for (const i of all) i.stop();
      await running;
    },
  };
}
