/**
 * The soak on the real node: the blog scenario under churn for minutes or hours, the
 * multus-proxy Service and an ordinary Service with the same selector (kube-proxy, primary
 * network) loaded side by side from the one client. `npm run bench -- soak` (bench/soak.ts) and the
 * real-node suite's quick soak both run this module.
 *
 * In namespace `soak` (injection enabled, so the backends get the sidecar too, as in the blog):
 * the blog's NAD, Service, ConfigMap + Deployment and client pod unchanged, plus Service
 * `plain-nginx` over the same pods. Churn: every `scaleEveryMs` the Deployment alternates 4 and 2
 * replicas; every `disruptEveryMs` one of a rollout restart, the controller leader's pod deleted, a
 * webhook pod deleted, the client's sidecar stopped (`crictl stop`), in turn. Phase 1 runs the
 * blog's nginx as it is (no preStop); phase 2 adds the README's `preStop: sleep` (itself a
 * rollout). Two curl loops in the client, one per Service, by name.
 *
 * Recorded: every failed request (curl's exit code, time) with the churn event it followed;
 * requests per phase; per component (client's sidecar, the witness's sidecar when `witness`: a
 * second client pod nothing disrupts, controller leader, webhook pods, node agent) the container's
 * private memory (smaps_rollup Anonymous over its process tree, as B5) every `sampleEveryMs`,
 * judged by test/node/soak-memory.ts; pod deletion seen → endpoint terminating seen in our slice and in kube's
 * (the watcher process of B9), ours split at the controller's boundaries; every Event on a container of the project (probe failures above all).
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import { dump, load, loadAll } from 'js-yaml';
import type { RealNode } from '../harness/node.js';
import { apiPath } from '../../src/kube/paths.js';
import { createInformer } from '../../src/kube/informer.js';
import type { CoreV1Event, V1Lease, V1Pod } from '../../src/kube/types.js';
import { INSTALL_NAMESPACE, MANAGED_BY, SIDECAR_CONTAINER_NAME } from '../../src/keys.js';
import { createLogger } from '../../src/log.js';
import { smaps, treeSum } from '../harness/proc-stats.js';
import { watchDeletions, type DeletionLatencies, type DeletionWatch } from '../controller/deletion-watch.js';
import { breakdown, writeLines, type Breakdown, type WriteLine } from '../controller/deletion-breakdown.js';
import { blogFile, CLIENT, createNamespace, pods, SERVICE } from './cluster.js';
import { AGENT_NAMESPACE, AGENT_SELECTOR, uninstallAgent } from './nodeport.js';
import { installAgent } from './tenant.js';
import { watchSidecarStarts, type SidecarStart } from './sidecar-starts.js';
import { judgeMemory, MEMORY_LIMITS_MIB, MEMORY_RULE, slopes, type ComponentMemory, type InstanceSlope, type MemorySample } from './soak-memory.js';

export type { InstanceSlope, MemorySample };
import { attribute, parseLoop, probeFailure, requestsBetween, type Attributed, type ChurnEvent, type ChurnKind, type LoopOutput } from './soak-analysis.js';

export const SOAK_NS = 'soak';
export const PLAIN_SERVICE = 'plain-nginx';
const KUBE_MANAGER = 'endpointslice-controller.k8s.io';
const CONTROLLER_LEASE = 'multus-proxy-controller';
const MIB = 2 ** 20;

export interface SoakOptions {
  /** Churn time in all, both phases. */
  readonly minutes: number;
  /** The first phase, without preStop (0: none). */
  readonly noPreStopMinutes: number;
  /** The README's preStop sleep on nginx in the second phase. */
  readonly preStopSeconds: number;
  readonly scaleEveryMs: number;
  readonly disruptEveryMs: number;
  readonly sampleEveryMs: number;
  /** Memory samples before this are the warm-up (left out of the slope). */
  readonly warmupMinutes: number;
  /** Install the node agent (for its memory) on the soak's network. */
  readonly agent: boolean;
  /** Pause between requests in each loop (s). */
  readonly pauseS: number;
  /**
   * A second client pod (`${CLIENT}-witness`) that nothing disrupts, so one sidecar is followed
   * for the whole run (the client's own is stopped every 20 min). Off in the quick soak: 3 minutes
   * judge no slope, and the real-node suite's soak stays as it was.
   */
  readonly witness?: boolean;
}

export const SOAK_FULL: SoakOptions = {
  minutes: 120,
  noPreStopMinutes: 15,
  preStopSeconds: 5,
  scaleEveryMs: 10_000,
  disruptEveryMs: 300_000,
  sampleEveryMs: 60_000,
  warmupMinutes: 15,
  agent: true,
  pauseS: 0.1,
  witness: true,
};
// Long enough for every disruption kind once (four, every 35 s) and a preStop phase of two minutes;
// how memory and latency drift over hours is the full soak's (bench/soak.ts), not a test's.
export const SOAK_QUICK: SoakOptions = {
  minutes: 3,
  noPreStopMinutes: 1,
  preStopSeconds: 5,
  scaleEveryMs: 10_000,
  disruptEveryMs: 35_000,
  sampleEveryMs: 20_000,
  warmupMinutes: 0.5,
  agent: false,
  pauseS: 0.1,
};

/**
 * The real-node suite's soak: the quick soak's churn with the README's preStop from the start
 * (the Deployment made with it), so all of its 2 minutes are under preStop: 5 scale-downs and one
 * disruption of each kind, where the quick soak's 3 minutes had about 4 scale-downs after its
 * minute without the hook and the rollout that adds it. That minute is the bench's contrast (its
 * failures are logged, never asserted); the full soak is the long proof.
 */
export const SOAK_SUITE: SoakOptions = { ...SOAK_QUICK, minutes: 2, noPreStopMinutes: 0, disruptEveryMs: 25_000 };

export type Path = 'multus-proxy' | 'kube-proxy';
export const PATHS: Record<Path, string> = { 'multus-proxy': `${SERVICE}.${SOAK_NS}.svc.cluster.local`, 'kube-proxy': `${PLAIN_SERVICE}.${SOAK_NS}.svc.cluster.local` };

export interface Phase {
  readonly name: string;
  readonly preStop: boolean;
  readonly from: number;
  readonly to: number;
}

export interface ProjectEvent {
  readonly namespace: string;
  readonly pod: string;
  readonly container: string;
  readonly type: string;
  readonly reason: string;
  readonly message: string;
  /** Occurrences during the soak (the count's growth since it started). */
  readonly count: number;
  readonly first: string;
  readonly last: string;
  readonly probe?: string;
  readonly cause?: string;
  /** Where the pod was when the event was last seen: starting (before Ready), running, terminating. */
  readonly podState?: 'starting' | 'running' | 'terminating' | 'unknown';
}

export interface PathResult {
  readonly path: Path;
  readonly phase: string;
  readonly requests: number;
  readonly failed: number;
}

export interface SoakRecord {
  readonly options: SoakOptions;
  readonly startedAt: string;
  readonly endedAt: string;
  readonly phases: Phase[];
  readonly churn: ChurnEvent[];
  readonly requests: PathResult[];
  readonly totals: Record<Path, { ok: number; failed: number }>;
  readonly failures: (Attributed & { phase: string })[];
  readonly memory: MemorySample[];
  readonly slopes: InstanceSlope[];
  /** Per component: flat, settles at a ceiling, grows, or not judged (test/node/soak-memory.ts). */
  readonly memoryVerdicts?: ComponentMemory[];
  /** Pod deletion seen → endpoint terminating seen, ms, per slice manager. */
  readonly deletion: Record<Path, DeletionLatencies>;
  /** Ours split at the controller's boundaries, for the victims its pods' logs at the end could be joined to (deletion-breakdown.ts). */
  readonly deletionStages: Breakdown[];
  readonly events: ProjectEvent[];
  readonly loadAverages: { at: number; load: number[] }[];
  /** The controller leader's latency histograms at the end (change seen → slice write, reconcile), its /metrics lines. */
  readonly controllerMetrics: string[];
  /** Each injected sidecar started during the soak: to listening, to its first sync, to its app's start. */
  readonly sidecarStarts: SidecarStart[];
  /** The kubelet's log lines about the project's sidecar containers (probe failures, kills), for the why behind the Events. */
  readonly kubeletLines: string[];
  readonly errors: string[];
}

type Log = (m: string) => void;

/** nginx's part of the Deployment that the README's preStop changes. */
const preStopHook = (seconds: number): { name: string; lifecycle: { preStop: { sleep: { seconds: number } } } } => ({ name: 'web', lifecycle: { preStop: { sleep: { seconds } } } });

/** The blog's Deployment; with `preStopSeconds`, nginx has the README's preStop from its first pod (no rollout to add it). */
function deployment(preStopSeconds?: number): string {
  const text = blogFile('deployment.yml');
  if (preStopSeconds === undefined) return text;
  type Doc = { kind?: string; spec?: { template: { spec: { containers: { name: string; lifecycle?: unknown }[] } } } } | null;
  const docs = (loadAll(text) as Doc[]).filter((d) => d !== null);
  const web = docs.find((d) => d.kind === 'Deployment')?.spec?.template.spec.containers.find((c) => c.name === 'web');
  if (!web) throw new Error('soak: the blog\'s deployment.yml has no container "web"');
  web.lifecycle = preStopHook(preStopSeconds).lifecycle;
  return docs.map((d) => dump(d)).join('---\n');
}

function plainService(): string {
  return dump({ apiVersion: 'v1', kind: 'Service', metadata: { name: PLAIN_SERVICE }, spec: { selector: { app: SERVICE }, ports: [{ protocol: 'TCP', port: 80 }] } });
}

/** The request loop run in the client container: one curl per request by name, a line per failure and a running count every 20 requests. */
function loopScript(url: string, pauseS: number): string {
  return [
    'n=0; f=0',
    'while [ ! -e /tmp/soak-stop ]; do',
    '  t=$(date +%s.%N)',
    `  if curl -sf -m 2 -o /dev/null http://${url}/; then n=$((n+1)); else echo "fail $? $t"; f=$((f+1)); fi`,
    '  if [ $(( (n + f) % 20 )) -eq 0 ]; then echo "count $(date +%s.%N) $n $f"; fi',
    `  sleep ${pauseS}`,
    'done',
    'echo "total $n $f"',
  ].join('\n');
}

const containerId = (id: string | undefined): string => (id ?? '').replace(/^containerd:\/\//, '');

async function containerPid(node: RealNode, id: string): Promise<number> {
  const info = JSON.parse(await node.crictl(['inspect', id])) as { info?: { pid?: number } };
  const pid = info.info?.pid;
  if (pid === undefined || pid <= 0) throw new Error(`crictl inspect ${id}: no pid`);
  return pid;
}

interface Target {
  readonly component: MemorySample['component'];
  readonly pod: string;
  readonly id: string;
}

export const WITNESS = `${CLIENT}-witness`;

/** The blog's client pod under the witness's name. */
function witnessPod(): string {
  const pod = load(blogFile('pod.yml')) as V1Pod;
  return dump({ ...pod, metadata: { ...pod.metadata, name: WITNESS } });
}

/** The containers whose memory the soak follows, as they are now (a restart or a new leader gives a new id). */
async function targets(node: RealNode, o: Pick<SoakOptions, 'agent' | 'witness'>): Promise<Target[]> {
  const out: Target[] = [];
  const clients: [MemorySample['component'], string][] = [['sidecar (client)', CLIENT], ...(o.witness ? [['sidecar (witness)', WITNESS] as [MemorySample['component'], string]] : [])];
  for (const [component, name] of clients) {
    const pod = await node.client.get<V1Pod>(apiPath('', 'v1', 'pods', SOAK_NS, name));
    const sc = (pod.status?.initContainerStatuses ?? []).find((c) => c.name === SIDECAR_CONTAINER_NAME);
    if (sc?.state?.running) out.push({ component, pod: name, id: containerId(sc.containerID) });
  }
  const lease = await node.client.get<V1Lease>(apiPath('coordination.k8s.io', 'v1', 'leases', INSTALL_NAMESPACE, CONTROLLER_LEASE)).catch(() => undefined);
  const holder = lease?.spec?.holderIdentity;
  const first = (p: V1Pod): string => containerId((p.status?.containerStatuses ?? []).find((c) => c.state?.running)?.containerID);
  for (const p of await pods(node, INSTALL_NAMESPACE, 'app.kubernetes.io/component in (controller,webhook)')) {
    const name = p.metadata?.name ?? '';
    const component = p.metadata?.labels?.['app.kubernetes.io/component'];
    if (first(p) === '' || p.metadata?.deletionTimestamp) continue;
    if (component === 'controller' && name === holder) out.push({ component: 'controller leader', pod: name, id: first(p) });
    if (component === 'webhook') out.push({ component: 'webhook', pod: name, id: first(p) });
  }
  if (o.agent) for (const p of await pods(node, AGENT_NAMESPACE, AGENT_SELECTOR)) if (first(p) !== '') out.push({ component: 'node agent', pod: p.metadata?.name ?? '', id: first(p) });
  return out;
}

/** Private memory (B5's measure: smaps_rollup Anonymous over the process tree) of each target. */
async function sampleMemory(node: RealNode, o: Pick<SoakOptions, 'agent' | 'witness'>, t0: number): Promise<MemorySample[]> {
  const at = Date.now();
  const load1 = os.loadavg()[0] ?? 0;
  const out: MemorySample[] = [];
  for (const t of await targets(node, o)) {
    // A container that stopped since the list (a disruption) is skipped this round.
    const pid = await containerPid(node, t.id).catch(() => undefined);
    if (pid === undefined) continue;
    out.push({
      at,
      minute: (at - t0) / 60_000,
      load1,
      component: t.component,
      pod: t.pod,
      instance: t.id.slice(0, 12),
      privateMiB: treeSum(pid, (q) => smaps(q).anonymous) / MIB,
      rssMiB: treeSum(pid, (q) => smaps(q).rss) / MIB,
    });
  }
  return out;
}

/** Every Event whose object is a container of the project: the sidecar in any pod, the install's and the agent's pods. */
function projectContainer(e: CoreV1Event): string | undefined {
  const o = e.involvedObject;
  if (o.kind !== 'Pod') return undefined;
  const c = /\{([^}]+)\}$/.exec(o.fieldPath ?? '')?.[1];
  if (c === SIDECAR_CONTAINER_NAME) return c;
  if (o.namespace === INSTALL_NAMESPACE || o.namespace === AGENT_NAMESPACE) return c ?? '(pod)';
  return undefined;
}

export interface EventWatch {
  /** Counts as they are now, as the baseline the soak's counts grow from. */
  baseline(): void;
  events(state: (pod: string, at: number) => ProjectEvent['podState']): ProjectEvent[];
  stop(): void;
}

export async function watchEvents(node: RealNode): Promise<EventWatch> {
  const latest = new Map<string, CoreV1Event>();
  const base = new Map<string, number>();
  const count = (e: CoreV1Event): number => e.series?.count ?? e.count ?? 1;
  const inf = createInformer<CoreV1Event>(node.client, { logger: createLogger('soak-events', 'error'), name: 'events', path: apiPath('', 'v1', 'events') });
  const keep = (e: CoreV1Event): void => {
    if (projectContainer(e) !== undefined) latest.set(e.metadata?.uid ?? '', e);
  };
  inf.on({ add: keep, update: keep, delete: () => undefined });
  inf.start();
  await inf.synced;
  return {
    baseline() {
      for (const [uid, e] of latest) base.set(uid, count(e));
    },
    events(state) {
      return [...latest.entries()]
        .map(([uid, e]): ProjectEvent => {
          const p = probeFailure(e.message ?? '');
          const last = String(e.series?.lastObservedTime ?? e.lastTimestamp ?? e.eventTime ?? '');
          const pod = e.involvedObject.name ?? '';
          return {
            namespace: e.involvedObject.namespace ?? '',
            pod,
            container: projectContainer(e) ?? '',
            type: e.type ?? '',
            reason: e.reason ?? '',
            message: e.message ?? '',
            count: count(e) - (base.get(uid) ?? 0),
            first: String(e.firstTimestamp ?? e.eventTime ?? ''),
            last,
            ...(p ? { probe: p.probe, cause: p.cause } : {}),
            podState: state(pod, Date.parse(last)),
          };
        })
        .filter((e) => e.count > 0);
    },
    stop: () => inf.stop(),
  };
}

/** Sets up the scenario; resolves when the Deployment, the client and both Services serve. */
async function setUp(node: RealNode, o: SoakOptions, log: Log): Promise<void> {
  await createNamespace(node, SOAK_NS, true);
  await node.apply(blogFile('net-attach.yml'), SOAK_NS);
  await node.apply(blogFile('service.yml'), SOAK_NS);
  await node.apply(plainService(), SOAK_NS);
  await node.apply(deployment(o.noPreStopMinutes <= 0 ? o.preStopSeconds : undefined), SOAK_NS);
  await node.apply(blogFile('pod.yml'), SOAK_NS);
  if (o.witness) await node.apply(witnessPod(), SOAK_NS);
  await node.wait(`deployment/${SERVICE}`, 'condition=Available', { namespace: SOAK_NS, timeoutMs: 180_000 });
  await node.wait(`pod/${CLIENT}`, 'condition=Ready', { namespace: SOAK_NS, timeoutMs: 180_000 });
  if (o.witness) await node.wait(`pod/${WITNESS}`, 'condition=Ready', { namespace: SOAK_NS, timeoutMs: 180_000 });
  if (o.agent) log(`node agent on ${await installAgent(node, `${SOAK_NS}/macvlan1`)}`);
  // Both paths answer before the churn starts.
  for (const [path, url] of Object.entries(PATHS)) {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const r = await node.exec(SOAK_NS, CLIENT, ['curl', '-sf', '-m', '2', '-o', '/dev/null', `http://${url}/`], { container: CLIENT });
      if (r.code === 0) break;
      if (Date.now() > deadline) throw new Error(`soak: ${path} (${url}) does not answer from ${SOAK_NS}/${CLIENT} within 60 s: curl exit ${r.code} ${r.stderr}`);
      await delay(500);
    }
  }
}

export async function tearDown(node: RealNode, o: Pick<SoakOptions, 'agent'>, log: Log): Promise<void> {
  await node.kubectl(['delete', 'namespace', SOAK_NS, '--ignore-not-found', '--wait=true', '--timeout=240s'], { timeoutMs: 250_000 });
  if (o.agent) await uninstallAgent(node, log);
}

const DISRUPTIONS: readonly ChurnKind[] = ['rollout restart', 'controller leader deleted', 'webhook pod deleted', "client's sidecar stopped"];

/** One disruption; resolves with what it did (the name of what it deleted or stopped). */
async function disrupt(node: RealNode, kind: ChurnKind): Promise<string> {
  switch (kind) {
    case 'rollout restart':
      await node.kubectl(['rollout', 'restart', '-n', SOAK_NS, `deployment/${SERVICE}`]);
      return `deployment/${SERVICE}`;
    case 'controller leader deleted': {
      const holder = (await node.client.get<V1Lease>(apiPath('coordination.k8s.io', 'v1', 'leases', INSTALL_NAMESPACE, CONTROLLER_LEASE))).spec?.holderIdentity ?? '';
      await node.kubectl(['delete', 'pod', '-n', INSTALL_NAMESPACE, holder, '--wait=false']);
      return holder;
    }
    case 'webhook pod deleted': {
      const p =
        (await pods(node, INSTALL_NAMESPACE, 'app.kubernetes.io/component=webhook'))
          .filter((x) => !x.metadata?.deletionTimestamp)
          .map((x) => x.metadata?.name ?? '')
          .sort()[0] ?? '';
      await node.kubectl(['delete', 'pod', '-n', INSTALL_NAMESPACE, p, '--wait=false']);
      return p;
    }
    case "client's sidecar stopped": {
      const client = await node.client.get<V1Pod>(apiPath('', 'v1', 'pods', SOAK_NS, CLIENT));
      const id = containerId((client.status?.initContainerStatuses ?? []).find((c) => c.name === SIDECAR_CONTAINER_NAME)?.containerID);
      await node.crictl(['stop', '--timeout', '10', id], { timeoutMs: 30_000 });
      return id.slice(0, 12);
    }
    default:
      throw new Error(`soak: not a disruption: ${kind}`);
  }
}

/** The leader's own view of its latency: the pod's /metrics from the host (the pod network is the host's bridge). */
async function leaderMetrics(node: RealNode): Promise<string[]> {
  const holder = (await node.client.get<V1Lease>(apiPath('coordination.k8s.io', 'v1', 'leases', INSTALL_NAMESPACE, CONTROLLER_LEASE))).spec?.holderIdentity ?? '';
  const ip = (await node.client.get<V1Pod>(apiPath('', 'v1', 'pods', INSTALL_NAMESPACE, holder))).status?.podIP ?? '';
  const text = await (await fetch(`http://${ip}:8080/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  return [`# leader ${holder}`, ...text.split('\n').filter((l) => /change_to_slice_write_seconds|reconcile_duration_seconds|slice_writes_total/.test(l) && !l.startsWith('#'))];
}

/** The "EndpointSlices written" lines of every controller pod still there (a deleted leader's log is gone with it). */
async function controllerWrites(node: RealNode): Promise<WriteLine[]> {
  const out: WriteLine[] = [];
  for (const p of await pods(node, INSTALL_NAMESPACE, 'app.kubernetes.io/component=controller')) {
    const text = await node.kubectl(['logs', '-n', INSTALL_NAMESPACE, p.metadata?.name ?? '', '--all-containers'], { timeoutMs: 60_000 });
    out.push(...writeLines(text.split('\n')));
  }
  return out;
}

const KUBELET_LINES_MAX = 3000;
function kubeletLines(node: RealNode): string[] {
  let text: string;
  try {
    text = readFileSync(node.logPath('kubelet'), 'utf8');
  } catch {
    return [];
  }
  return text
    .split('\n')
    .filter((l) => l.includes(`containerName="${SIDECAR_CONTAINER_NAME}"`) || (l.includes('Probe') && l.includes(`pod="${SOAK_NS}/`)))
    .slice(-KUBELET_LINES_MAX);
}

/** The pod's state at `at` (ms since the epoch) from the deletion watch's receipt times. */
function podStateFrom(watch: DeletionWatch): (pod: string, at: number) => ProjectEvent['podState'] {
  return (pod, at) => {
    const t = watch.times(pod);
    if (!Number.isFinite(at) || (t.readyAt === undefined && t.deletingAt === undefined)) return 'unknown';
    // Event times have 1 s precision: within a second counts as the later state.
    if (t.deletingAt !== undefined && at >= t.deletingAt - 1000) return 'terminating';
    if (t.readyAt === undefined || at < t.readyAt - 1000) return 'starting';
    return 'running';
  };
}

export async function runSoak(node: RealNode, o: SoakOptions, log: Log): Promise<SoakRecord> {
  const errors: string[] = [];
  const eventWatch = await watchEvents(node);
  log(`setting up ${SOAK_NS}: the blog's files, Service ${PLAIN_SERVICE}${o.agent ? ', the node agent' : ''}`);
  await setUp(node, o, log);
  const deletions = watchDeletions(node.kubeconfigPath, SOAK_NS);
  await deletions.synced;
  const starts = watchSidecarStarts(node, SOAK_NS);
  eventWatch.baseline();

  const churn: ChurnEvent[] = [];
  const note = (kind: ChurnKind, detail: string, at = Date.now()): void => {
    churn.push({ at, kind, detail });
  };
  const memory: MemorySample[] = [];
  const loadAverages: SoakRecord['loadAverages'] = [];
  const t0 = Date.now();
  const startedAt = new Date(t0).toISOString();
  const end = t0 + o.minutes * 60_000;
  const switchAt = t0 + o.noPreStopMinutes * 60_000;
  /** When the preStop patch was sent, and when the last pod without it was gone (without a first phase every pod had the hook from the start: setUp). */
  const preStop = { patchedAt: t0, everyPodAt: t0 };
  const addPreStop = async (): Promise<void> => {
    preStop.patchedAt = Date.now();
    note('preStop added (a rollout)', `preStop sleep ${o.preStopSeconds} s`, preStop.patchedAt);
    const patch = { spec: { template: { spec: { containers: [preStopHook(o.preStopSeconds)] } } } };
    await node.kubectl(['patch', 'deployment', '-n', SOAK_NS, SERVICE, '--type', 'strategic', '-p', JSON.stringify(patch)]);
    // The phase with the hook starts once no pod without it is left (terminating ones included).
    const deadline = Date.now() + 300_000;
    for (;;) {
      const ps = await pods(node, SOAK_NS, `app=${SERVICE}`);
      if (ps.length > 0 && ps.every((p) => p.spec?.containers.some((c) => c.lifecycle?.preStop !== undefined))) break;
      if (Date.now() > deadline) throw new Error(`soak: pods without the preStop hook still there 300 s after the patch: ${ps.map((p) => p.metadata?.name ?? '').join(', ')}`);
      await delay(250);
    }
    preStop.everyPodAt = Date.now();
  };

  await node.exec(SOAK_NS, CLIENT, ['rm', '-f', '/tmp/soak-stop'], { container: CLIENT });
  const loops = Object.fromEntries(
    (Object.entries(PATHS) as [Path, string][]).map(([path, url]) => [
      path,
      node.exec(SOAK_NS, CLIENT, ['sh', '-c', loopScript(url, o.pauseS)], { container: CLIENT, timeoutMs: o.minutes * 60_000 + 600_000 }),
    ]),
  ) as Record<Path, ReturnType<RealNode['exec']>>;

  const guard = (what: string, p: Promise<unknown>): Promise<void> =>
    p.then(
      () => undefined,
      (e: unknown) => {
        errors.push(`${what}: ${(e as Error).message}`);
        log(`${what} failed: ${(e as Error).message}`);
      },
    );
  const scaling = (async (): Promise<void> => {
    let high = true;
    for (let next = t0 + o.scaleEveryMs; next < end; next += o.scaleEveryMs) {
      await delay(Math.max(0, next - Date.now()));
      const replicas = high ? 4 : 2;
      note(high ? 'scale-up' : 'scale-down', `${replicas} replicas`);
      await guard('scale', node.client.patch(`${apiPath('apps', 'v1', 'deployments', SOAK_NS, SERVICE)}/scale`, { spec: { replicas } }, 'merge'));
      high = !high;
    }
  })();
  const disrupting = (async (): Promise<void> => {
    let preStopAdded = o.noPreStopMinutes <= 0;
    let i = 0;
    // Disruptions fall between scale steps (offset by half a step), so each failure follows one clearly.
    for (let next = t0 + o.disruptEveryMs + o.scaleEveryMs / 2; ; next += o.disruptEveryMs) {
      if (!preStopAdded && switchAt <= next) {
        await delay(Math.max(0, switchAt + o.scaleEveryMs / 2 - Date.now()));
        await guard('preStop', addPreStop());
        preStopAdded = true;
      }
      if (next >= end) break;
      await delay(Math.max(0, next - Date.now()));
      const kind = DISRUPTIONS[i++ % DISRUPTIONS.length] ?? 'rollout restart';
      const at = Date.now();
      await guard(
        kind,
        disrupt(node, kind).then((what) => note(kind, what, at)),
      );
      log(`${kind} at minute ${((at - t0) / 60_000).toFixed(1)}`);
    }
  })();
  const sampling = (async (): Promise<void> => {
    for (let next = t0; next < end; next += o.sampleEveryMs) {
      await delay(Math.max(0, next - Date.now()));
      loadAverages.push({ at: Date.now(), load: os.loadavg() });
      await guard(
        'memory sample',
        sampleMemory(node, o, t0).then((s) => memory.push(...s)),
      );
      const line = memory
        .filter((s) => s.at >= Date.now() - o.sampleEveryMs)
        .map((s) => `${s.component} ${s.privateMiB.toFixed(1)}`)
        .join(', ');
      log(`minute ${((Date.now() - t0) / 60_000).toFixed(1)}: load ${(os.loadavg()[0] ?? 0).toFixed(2)}; private MiB ${line}`);
    }
  })();
  await Promise.all([scaling, disrupting, sampling]);
  await delay(Math.max(0, end - Date.now()));
  await node.exec(SOAK_NS, CLIENT, ['touch', '/tmp/soak-stop'], { container: CLIENT });
  const outputs = {} as Record<Path, LoopOutput>;
  for (const path of Object.keys(PATHS) as Path[]) {
    const r = await loops[path];
    const out = parseLoop(r.stdout);
    if (!out.total) throw new Error(`soak: the ${path} request loop in ${SOAK_NS}/${CLIENT} ended without its total (exit ${r.code}): ${r.stderr.slice(-500)}`);
    outputs[path] = out;
  }
  const endedAt = new Date().toISOString();
  const phases: Phase[] = [];
  if (o.noPreStopMinutes > 0) {
    phases.push({ name: 'no preStop (the blog as it is)', preStop: false, from: t0, to: preStop.patchedAt });
    phases.push({ name: 'switching: the rollout that adds preStop', preStop: false, from: preStop.patchedAt, to: preStop.everyPodAt });
  }
  phases.push({ name: `preStop sleep ${o.preStopSeconds} s (README)`, preStop: true, from: preStop.everyPodAt, to: Infinity });
  // The last deletions' slice writes land after the churn stops.
  await delay(3_000);

  const victims = deletions.deleted().filter((n) => n.startsWith(`${SERVICE}-`));
  const deletion = {
    'multus-proxy': deletions.deletionToTerminating(victims, MANAGED_BY),
    'kube-proxy': deletions.deletionToTerminating(victims, KUBE_MANAGER),
  };
  const controllerMetrics = await leaderMetrics(node).catch((e: unknown) => [`# not read: ${(e as Error).message}`]);
  const writes = await controllerWrites(node).catch((e: unknown) => (errors.push(`controller logs: ${(e as Error).message}`), []));
  const deletionStages = breakdown(
    victims.map((pod) => ({ pod, ...deletions.times(pod, MANAGED_BY) })),
    writes,
    `${SOAK_NS}/${SERVICE}`,
  );
  const events = eventWatch.events(podStateFrom(deletions));
  await starts.stop();
  await deletions.stop();
  eventWatch.stop();

  const phaseOf = (at: number): string => phases.find((p) => at >= p.from && at < p.to)?.name ?? phases[phases.length - 1]?.name ?? '';
  const failures = (Object.keys(PATHS) as Path[]).flatMap((path) =>
    attribute(
      outputs[path].failures.map((f) => ({ path, ...f })),
      churn,
    ).map((f) => ({ ...f, phase: phaseOf(f.at) })),
  );
  const requests: PathResult[] = (Object.keys(PATHS) as Path[]).flatMap((path) =>
    phases.map((p) => ({ path, phase: p.name, requests: requestsBetween(outputs[path].counts, p.from, p.to), failed: failures.filter((f) => f.path === path && f.phase === p.name).length })),
  );
  return {
    options: o,
    startedAt,
    endedAt,
    phases,
    churn,
    requests,
    totals: { 'multus-proxy': outputs['multus-proxy'].total ?? { ok: 0, failed: 0 }, 'kube-proxy': outputs['kube-proxy'].total ?? { ok: 0, failed: 0 } },
    failures,
    memory,
    slopes: slopes(memory, o.warmupMinutes),
    memoryVerdicts: judgeMemory(memory, MEMORY_LIMITS_MIB, { ...MEMORY_RULE, warmupMinutes: o.warmupMinutes }),
    deletion,
    deletionStages,
    events,
    loadAverages,
    sidecarStarts: starts.starts(),
    controllerMetrics,
    kubeletLines: kubeletLines(node),
    errors,
  };
}
