/**
 * LoadBalancer on two real nodes: MetalLB (test/node/metallb.ts)
 * announcing on each node's ens4, the node agent on both nodes and the external client namespace on
 * the shared segment (test/node/twonode.ts), the blog's two replicas (one per node) as backends.
 *
 * - Local is announced only from the node with a local endpoint, and follows the backend when it
 *   moves to the other node; and which EndpointSlices MetalLB's speaker counts: ours only, or also
 *   Kubernetes' primary-network ones (a Service whose spec.selector matches a pod without net1).
 * - The announcing node's speaker, then its node agent, stopped (SIGSTOP: no goodbye, as a hung or
 *   dead process) under 10 req/s from the external client: who announces, which MAC the client uses,
 *   failed requests and the time to recover.
 */
import { execFile } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { dump, loadAll } from 'js-yaml';
import type { RealNode } from '../harness/node.js';
import { NODE, NODE2 } from '../harness/node-config.js';
import { blogFile, burstArrivals, net1Addresses, pods, SERVICE, type Burst } from './cluster.js';
import { besideMetalLB, hostMac, ingressIps, l2Announcers, METALLB_NAMESPACE, SegmentProbe, uninstallMetalLB, type MetalLBInstall } from './metallb.js';
import { lbService } from './loadbalancer.js';
import { AGENT_NAMESPACE, AGENT_SELECTOR } from './nodeport.js';
import { until } from './tenant.js';
import { attachClient, CLIENT_LINK, CLIENT_NS, detachClient, EXTERNAL_CLIENT, installTwoNodeAgent, loadLines, uninstallTwoNodeAgent, type LoadLine, type TwoNodeAgent } from './twonode.js';
import { MANAGED_BY_LABEL, SERVICE_SELECTOR_ANNOTATION } from '../../src/keys.js';
import type { V1EndpointSlice } from '../../src/kube/types.js';
import { apiPath } from '../../src/kube/paths.js';

const NS = 'default';
export const LB2_SERVICES = { local: 'nginx-lb2-local', primary: 'nginx-lb2-primary', cluster: 'nginx-lb2' } as const;
/** Label choosing the Local Service's one backend (moved from one replica to the other). */
const LOCAL_LABEL = 'lb2-local';
/** Label of the pod without net1 that the primary-only Service's spec.selector matches. */
const PRIMARY_LABEL = 'lb2-primary';
const PRIMARY_POD = 'lb2-primary-only';

// --- pure: what the load saw around a disruption ------------------------------------------------

export interface Outage {
  sent: number;
  failed: number;
  /** ms from `from` to the start of the first and the last failed request (-1: none failed). */
  firstFailMs: number;
  lastFailMs: number;
  /** ms from `from` to the start of the first request of the unbroken run of successes after the last failure (0: none failed; -1: never recovered in the window). */
  recoveredMs: number;
}

/** The requests started in [from, to): how many failed (any code but 200) and when the failures ended. */
export function outage(lines: readonly LoadLine[], from: number, to: number): Outage {
  const mine = lines.filter((l) => l.t >= from && l.t < to).sort((a, b) => a.t - b.t);
  const bad = mine.filter((l) => l.code !== '200');
  const last = bad.at(-1);
  if (!last) return { sent: mine.length, failed: 0, firstFailMs: -1, lastFailMs: -1, recoveredMs: 0 };
  const next = mine.find((l) => l.t > last.t);
  return { sent: mine.length, failed: bad.length, firstFailMs: (bad[0]?.t ?? from) - from, lastFailMs: last.t - from, recoveredMs: next ? next.t - from : -1 };
}

// --- set-up ------------------------------------------------------------------------------------

export interface TwoNodeLb {
  agent: TwoNodeAgent;
  metallb: MetalLBInstall;
  /** The external client namespace seen as a segment probe (ARP, curls). */
  probe: SegmentProbe;
  /** Node -> its ens4 MAC (what MetalLB answers ARP with there). */
  macs: Record<string, string>;
  /** Node -> the blog replica on it. */
  backends: Record<string, { pod: string; net1: string }>;
}

/** Agent on both nodes, MetalLB, the client namespace on the segment. Undone by teardownTwoNodeLb. */
export async function setupTwoNodeLb(node: RealNode, log: (m: string) => void): Promise<TwoNodeLb> {
  const second = node.second;
  if (!second) throw new Error('the two-node LoadBalancer checks need startNode({ nodes: 2 })');
  // Independent of each other: installed side by side.
  const [agent, metallb] = await besideMetalLB(node, log, installTwoNodeAgent(node, log));
  await attachClient(node, agent.agentInterfaces);
  const mac2 = /link\/ether (\S+)/.exec(await second.inNetns(['ip', '-o', 'link', 'show', NODE.parent]))?.[1] ?? '';
  const macs = { [NODE.name]: hostMac(NODE.parent), [NODE2.name]: mac2 };
  const backends: TwoNodeLb['backends'] = {};
  for (const p of (await pods(node, NS, `app=${SERVICE}`)).filter((x) => !x.metadata?.deletionTimestamp)) {
    backends[p.spec?.nodeName ?? ''] = { pod: p.metadata?.name ?? '', net1: net1Addresses(p)[0] ?? '' };
  }
  if (!backends[NODE.name] || !backends[NODE2.name]) throw new Error(`the blog needs one replica per node: ${JSON.stringify(backends)}`);
  log(`LoadBalancer set-up: ens4 MACs ${JSON.stringify(macs)}, backends ${JSON.stringify(backends)}`);
  return { agent, metallb, probe: new SegmentProbe(CLIENT_NS, CLIENT_LINK, `${EXTERNAL_CLIENT}/24`), macs, backends };
}

export async function teardownTwoNodeLb(node: RealNode, log: (m: string) => void): Promise<void> {
  const step = async (what: string, f: () => Promise<unknown>): Promise<void> => {
    await f().catch((e: Error) => log(`${what} failed: ${e.message}`));
  };
  await step('deleting the Services', () => node.kubectl(['delete', 'service', '-n', NS, '--ignore-not-found', '--wait=true', ...Object.values(LB2_SERVICES)]));
  await step('deleting the primary-only pod', () => node.kubectl(['delete', 'pod', '-n', NS, '--ignore-not-found', '--grace-period=1', PRIMARY_POD]));
  await step('unlabelling', () => node.kubectl(['label', 'pod', '-n', NS, '--all', `${LOCAL_LABEL}-`]));
  await step('detaching the client', () => detachClient(node));
  await Promise.all([step('uninstalling MetalLB', () => uninstallMetalLB(node)), uninstallTwoNodeAgent(node, log)]);
}

// --- observations ------------------------------------------------------------------------------

/** One EndpointSlice of a Service: who manages it, its endpoints and their nodes. */
export interface SliceView {
  name: string;
  managedBy: string;
  endpoints: { address: string; node: string; ready: boolean }[];
}

async function slicesOf(node: RealNode, service: string): Promise<SliceView[]> {
  const s = await node.client.list<V1EndpointSlice>(apiPath('discovery.k8s.io', 'v1', 'endpointslices', NS), { labelSelector: `kubernetes.io/service-name=${service}` });
  return s.items.map((x) => ({
    name: x.metadata?.name ?? '',
    managedBy: x.metadata?.labels?.[MANAGED_BY_LABEL] ?? '',
    endpoints: (x.endpoints ?? []).map((e) => ({ address: e.addresses[0] ?? '', node: e.nodeName ?? '', ready: e.conditions?.ready !== false })),
  }));
}

export interface Announcement {
  /** Nodes of MetalLB's ServiceL2Status objects for the Service. */
  announcers: string[];
  /** The node whose ens4 MAC answered ARP for the address from the client namespace. */
  arpNode: string | undefined;
}

const nodeOfMac = (lb: TwoNodeLb, mac: string | undefined): string | undefined => (mac === undefined ? undefined : (Object.entries(lb.macs).find(([, m]) => m === mac)?.[0] ?? `unknown MAC ${mac}`));

async function announcement(node: RealNode, lb: TwoNodeLb, service: string, vip: string): Promise<Announcement> {
  const announcers = (await l2Announcers(node, NS, service)).map((a) => a.node).sort();
  return { announcers, arpNode: nodeOfMac(lb, await lb.probe.arpOwner(vip)) };
}

/** Polls until only `target` announces (status and ARP); the last state seen, and ms until it held (-1: never). */
async function waitAnnounced(node: RealNode, lb: TwoNodeLb, service: string, vip: string, target: string, timeoutMs: number): Promise<Announcement & { ms: number }> {
  const t0 = Date.now();
  let last: Announcement = { announcers: [], arpNode: undefined };
  const ok = await until(`${service} announced from ${target} only`, timeoutMs, async () => {
    last = await announcement(node, lb, service, vip);
    return last.arpNode === target && last.announcers.length === 1 && last.announcers[0] === target ? true : undefined;
  }).catch(() => false);
  return { ...last, ms: ok ? Date.now() - t0 : -1 };
}

/** Polls until no speaker reports the Service (no ServiceL2Status); ms until then, -1: never. */
async function waitWithdrawn(node: RealNode, service: string, timeoutMs: number): Promise<number> {
  const t0 = Date.now();
  const ok = await until(`${service} withdrawn by every speaker`, timeoutMs, async () => ((await l2Announcers(node, NS, service)).length === 0 ? true : undefined)).catch(() => false);
  return ok ? Date.now() - t0 : -1;
}

/** MetalLB's Events on a Service ("<reason>: <message>"), oldest first. */
async function serviceEvents(node: RealNode, service: string): Promise<string[]> {
  const out = await node.kubectl([
    'get',
    'events',
    '-n',
    NS,
    '--field-selector',
    `involvedObject.kind=Service,involvedObject.name=${service}`,
    '--sort-by=.lastTimestamp',
    '-o',
    'jsonpath={range .items[*]}{.reason}: {.message}{"\\n"}{end}',
  ]);
  return out.split('\n').filter(Boolean);
}

async function vipOf(node: RealNode, service: string): Promise<string> {
  return until(`MetalLB's address for ${service}`, 60_000, async () => (await ingressIps(node, NS, service))[0]);
}

// --- Local follows the endpoint ------------------------------------------------------------------

export interface LocalStep {
  /** The node of the one selected backend. */
  node: string;
  backend: string;
  /** ms from the label change to the announcement from that node only (ServiceL2Status and ARP); -1: never in 60 s. */
  ms: number;
  announcement: Announcement;
  slices: SliceView[];
  /** 10 requests through the address from the external client. */
  burst: Burst;
}

export interface LocalAnnounce {
  vip: string;
  steps: LocalStep[];
  /** A Local Service whose spec.selector matches only a Ready pod without net1 on the second node. */
  primaryOnly: { vip: string; slices: SliceView[]; announcement: Announcement; curls: string[] };
  events: string[];
  /** ms from deselecting the first node's backend to no ServiceL2Status left; -1: never in 60 s. */
  withdrawn: number[];
}

/** The blog's image, for a plain pod without the NAD annotation. */
function blogImage(): string {
  const d = (loadAll(blogFile('deployment.yml')) as ({ kind?: string; spec?: { template: { spec: { containers: { image: string }[] } } } } | null)[]).find((o) => o?.kind === 'Deployment');
  return d?.spec?.template.spec.containers[0]?.image ?? '';
}

export async function runLocalAnnounce(node: RealNode, lb: TwoNodeLb, log: (m: string) => void): Promise<LocalAnnounce> {
  const pool = lb.metallb.pool.name;
  const svc = LB2_SERVICES.local;
  await node.kubectl(['label', 'pod', '-n', NS, lb.backends[NODE.name]?.pod ?? '', `${LOCAL_LABEL}=yes`, '--overwrite']);
  await node.apply(dump(lbService(svc, { policy: 'Local', selector: `app=${SERVICE},${LOCAL_LABEL}=yes` }, pool)));
  const vip = await vipOf(node, svc);
  await lb.probe.onLink(vip);
  const steps: LocalStep[] = [];
  const withdrawn: number[] = [];
  for (const [i, target] of [NODE.name, NODE2.name].entries()) {
    const backend = lb.backends[target] ?? { pod: '', net1: '' };
    if (i > 0) {
      // Move the one backend: this one deselected and its node's announcement withdrawn first,
      // then the other replica selected. With both selected at once, two speakers announce and
      // MetalLB v0.15.2's status reconciler lets the second adopt the first's ServiceL2Status; the
      // first can then write it back after it withdraws, and it stays there
      // (docs/decisions/0040-test-harness.md).
      await node.kubectl(['label', 'pod', '-n', NS, lb.backends[NODE.name]?.pod ?? '', `${LOCAL_LABEL}-`]);
      withdrawn.push(await waitWithdrawn(node, svc, 60_000));
      log(`Local ${svc}: its backend deselected on ${NODE.name}, no ServiceL2Status left after ${withdrawn.at(-1)} ms`);
    }
    const t0 = Date.now();
    if (i > 0) await node.kubectl(['label', 'pod', '-n', NS, backend.pod, `${LOCAL_LABEL}=yes`, '--overwrite']);
    const a = await waitAnnounced(node, lb, svc, vip, target, 60_000);
    const ms = a.ms < 0 ? -1 : Date.now() - t0;
    const slices = await slicesOf(node, svc);
    const names = Object.values(lb.backends).map((b) => b.pod);
    await until(`${svc} answering through ${target}`, 30_000, async () => ((await lb.probe.curls(`http://${vip}/`, 1, { expect: SERVICE }))[0] === 'ok' ? true : undefined)).catch(() => undefined);
    const burst = await burstArrivals(node, NS, names, () => lb.probe.curls(`http://${vip}/`, 10, { expect: SERVICE }));
    steps.push({ node: target, backend: backend.pod, ms, announcement: { announcers: a.announcers, arpNode: a.arpNode }, slices, burst });
    log(
      `Local ${svc} (${vip}) with its backend ${backend.pod} on ${target}: announced by ${JSON.stringify(a.announcers)}, ARP answered by ${a.arpNode}, ${ms} ms after the label change; slices ${JSON.stringify(slices)}; ${burst.curls.filter((c) => c === 'ok').length}/10 ok, by ${JSON.stringify(burst.answeredBy)}, sources ${burst.sources.join(',')}`,
    );
  }

  // Which slices the speaker counts: Kubernetes' own (primary addresses) for a spec.selector that
  // matches a Ready pod with no net1, so that ours has no endpoint at all.
  const image = blogImage();
  await node.apply(
    dump({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: PRIMARY_POD, namespace: NS, labels: { [PRIMARY_LABEL]: 'yes' } },
      spec: { nodeName: NODE2.name, containers: [{ name: 'web', image, ports: [{ containerPort: 80 }] }] },
    }),
  );
  await node.wait(`pod/${PRIMARY_POD}`, 'condition=Ready', { namespace: NS, timeoutMs: 120_000 });
  const primary = lbService(LB2_SERVICES.primary, { policy: 'Local' }, pool) as { metadata: { annotations: Record<string, string> }; spec: Record<string, unknown> };
  delete primary.metadata.annotations[SERVICE_SELECTOR_ANNOTATION];
  primary.spec['selector'] = { [PRIMARY_LABEL]: 'yes' };
  await node.apply(dump(primary));
  const pvip = await vipOf(node, LB2_SERVICES.primary);
  await lb.probe.onLink(pvip);
  await until(`Kubernetes' slice of ${LB2_SERVICES.primary}`, 60_000, async () =>
    (await slicesOf(node, LB2_SERVICES.primary)).some((s) => s.managedBy !== '' && s.endpoints.some((e) => e.ready && e.node === NODE2.name)) ? true : undefined,
  );
  const pa = await waitAnnounced(node, lb, LB2_SERVICES.primary, pvip, NODE2.name, 30_000);
  const primaryOnly = {
    vip: pvip,
    slices: await slicesOf(node, LB2_SERVICES.primary),
    announcement: { announcers: pa.announcers, arpNode: pa.arpNode },
    curls: await lb.probe.curls(`http://${pvip}/`, 5, { expect: SERVICE, timeoutS: 1 }),
  };
  log(
    `Local ${LB2_SERVICES.primary} (${pvip}), spec.selector matching only ${PRIMARY_POD} (no net1) on ${NODE2.name}: slices ${JSON.stringify(primaryOnly.slices)}; announced by ${JSON.stringify(pa.announcers)}, ARP answered by ${pa.arpNode}; through it: ${primaryOnly.curls.join(',')}`,
  );
  const events = await serviceEvents(node, svc);
  log(`MetalLB's Events on ${svc}: ${events.join(' | ')}`);
  await node.kubectl(['delete', 'service', '-n', NS, LB2_SERVICES.primary, LB2_SERVICES.local, '--wait=true']);
  await node.kubectl(['delete', 'pod', '-n', NS, PRIMARY_POD, '--grace-period=1', '--wait=false']);
  return { vip, steps, withdrawn, primaryOnly, events };
}

// --- the announcing node's speaker or agent stopped under load ------------------------------------

export interface Disruption {
  /** speaker, agent: SIGSTOP then SIGCONT; speaker-deleted: its pod deleted (the DaemonSet starts another). */
  what: 'speaker' | 'speaker-deleted' | 'agent';
  /** The node whose MAC answered ARP for the address when the process was stopped, and the other one. */
  node: string;
  other: string;
  /** ms the process stayed stopped (SIGSTOP to SIGCONT; for a deleted pod, the "while stopped" window). */
  stoppedMs: number;
  /** ms from the stop until the client's neighbour entry for the address held the other node's MAC (-1: not while stopped). */
  clientMovedMs: number;
  /** After SIGCONT: ms until the client used the first node's MAC again (-1: not in the window). */
  clientBackMs: number;
  /** Requests started while the process was stopped, and after it resumed. */
  during: Outage;
  after: Outage;
  /** Requests before the stop that failed (none when the set-up is sound). */
  failedBefore: number;
  /** MetalLB's ServiceL2Status nodes as they changed ("<ms from the stop> [nodes]"), a record only. */
  statusLog: string[];
  /** MetalLB's nodeAssigned Events on the Service after the run ("<last seen> x<count> <message>"). */
  events: string[];
}

export interface Failover {
  vip: string;
  disruptions: Disruption[];
}

interface Target {
  namespace: string;
  selector: string;
  container: string;
}

/** The live pod of a DaemonSet on a node. */
async function podOn(node: RealNode, nodeName: string, t: Target): Promise<string> {
  const p = (await pods(node, t.namespace, t.selector)).find((x) => x.spec?.nodeName === nodeName && !x.metadata?.deletionTimestamp);
  if (!p?.metadata?.name) throw new Error(`no pod ${t.selector} in ${t.namespace} on ${nodeName}`);
  return p.metadata.name;
}

/** The pid (on the host: node 2 shares its pid namespace) of a pod's container on a node. */
async function containerPid(node: RealNode, nodeName: string, pod: string, container: string): Promise<number> {
  const crictl = nodeName === NODE.name ? (a: string[]): Promise<string> => node.crictl(a) : (a: string[]): Promise<string> => node.second?.crictl(a) ?? Promise.resolve('');
  const id = (await crictl(['ps', '--name', container, '--label', `io.kubernetes.pod.name=${pod}`, '-q'])).trim().split('\n')[0] ?? '';
  const pid = (JSON.parse(await crictl(['inspect', id])) as { info: { pid: number } }).info.pid;
  if (!(pid > 1)) throw new Error(`no pid for ${container} of ${pod} on ${nodeName}`);
  return pid;
}

/** The MAC the client namespace's neighbour table holds for an address, read without disturbing it. */
async function clientNeighbour(vip: string): Promise<string | undefined> {
  const out = (await promisify(execFile)('ip', ['-n', CLIENT_NS, 'neigh', 'show', vip, 'dev', CLIENT_LINK], { encoding: 'utf8' })).stdout;
  return /lladdr (\S+)/.exec(out)?.[1];
}

/** MetalLB's nodeAssigned Events on a Service: "<last seen> x<count> <message>". */
async function assignedEvents(node: RealNode, service: string): Promise<string[]> {
  const out = await node.kubectl(['get', 'events', '-n', NS, '--field-selector', `involvedObject.kind=Service,involvedObject.name=${service},reason=nodeAssigned`, '-o', 'json']);
  const items = (JSON.parse(out) as { items: { lastTimestamp?: string; eventTime?: string; count?: number; message?: string }[] }).items;
  return items.map((e) => `${e.lastTimestamp ?? e.eventTime ?? '?'} x${e.count ?? 1} ${e.message ?? ''}`).sort();
}

const SPEAKER: Target = { namespace: METALLB_NAMESPACE, selector: 'component=speaker', container: 'speaker' };
const AGENT: Target = { namespace: AGENT_NAMESPACE, selector: AGENT_SELECTOR, container: 'node-agent' };

/**
 * Stops `what` on the node that answers ARP for the address (SIGSTOP, or the speaker's pod deleted)
 * while the client sends 10 req/s to it, for `holdMs` (the speaker: until 3 s after the client
 * moved to the other node, at most holdMs), resumes it (SIGCONT; a deleted pod is replaced by the
 * DaemonSet meanwhile) and watches `afterMs` more. Who announces is read from the
 * client's own neighbour entry, passively: MetalLB's ServiceL2Status did not follow a stopped
 * speaker (docs/loadbalancer.md), so it is only logged.
 */
async function disrupt(node: RealNode, lb: TwoNodeLb, svc: string, vip: string, what: Disruption['what'], holdMs: number, afterMs: number, log: (m: string) => void): Promise<Disruption> {
  const x = await until(`the node answering ARP for ${vip}`, 30_000, async () => nodeOfMac(lb, await lb.probe.arpOwner(vip)));
  if (!Object.keys(lb.macs).includes(x)) throw new Error(`${vip} answered by ${x} before the ${what} stop`);
  const y = x === NODE.name ? NODE2.name : NODE.name;
  const target = what === 'agent' ? AGENT : SPEAKER;
  const pod = await podOn(node, x, target);
  const pid = what === 'speaker-deleted' ? 0 : await containerPid(node, x, pod, target.container);
  const stop = async (): Promise<void> => {
    if (pid) process.kill(pid, 'SIGSTOP');
    else await node.kubectl(['delete', 'pod', '-n', target.namespace, pod, '--wait=false']);
  };
  const resume = (): void => {
    if (pid) process.kill(pid, 'SIGCONT');
  };
  const m = { stoppedAt: 0, resumedAt: 0, clientMovedMs: -1, clientBackMs: -1 };
  const statusLog: string[] = [];
  let lastStatus = '';
  const recordStatus = async (): Promise<void> => {
    const now = JSON.stringify((await l2Announcers(node, NS, svc)).map((a) => a.node).sort());
    if (now !== lastStatus) statusLog.push(`${m.stoppedAt ? `${Date.now() - m.stoppedAt} ms` : 'before'} ${now}`);
    lastStatus = now;
  };
  const watch = async (): Promise<void> => {
    await delay(3_000);
    await recordStatus();
    m.stoppedAt = Date.now();
    await stop();
    try {
      while (Date.now() - m.stoppedAt < holdMs) {
        if (m.clientMovedMs < 0 && (await clientNeighbour(vip)) === lb.macs[y]) m.clientMovedMs = Date.now() - m.stoppedAt;
        await recordStatus();
        if (what !== 'agent' && m.clientMovedMs >= 0 && Date.now() - m.stoppedAt > m.clientMovedMs + 3_000) break;
        await delay(200);
      }
    } finally {
      resume();
      m.resumedAt = Date.now();
    }
    while (Date.now() - m.resumedAt < afterMs) {
      if (m.clientBackMs < 0 && (await clientNeighbour(vip)) === lb.macs[x]) m.clientBackMs = Date.now() - m.resumedAt;
      await recordStatus();
      await delay(200);
    }
  };
  const lines = await loadLines([`http://${vip}/`], watch());
  const end = (lines.at(-1)?.t ?? Date.now()) + 1;
  const d: Disruption = {
    what,
    node: x,
    other: y,
    stoppedMs: m.resumedAt - m.stoppedAt,
    clientMovedMs: m.clientMovedMs,
    clientBackMs: m.clientBackMs,
    during: outage(lines, m.stoppedAt, m.resumedAt),
    after: outage(lines, m.resumedAt, end),
    failedBefore: outage(lines, 0, m.stoppedAt).failed,
    statusLog,
    events: await assignedEvents(node, svc),
  };
  log(
    `${what} on ${x} stopped ${d.stoppedMs} ms under 10 req/s to ${vip} (stopped at ${new Date(m.stoppedAt).toISOString()}): the client used ${y}'s MAC after ${d.clientMovedMs} ms; ${d.during.failed}/${d.during.sent} failed while stopped (first ${d.during.firstFailMs} ms, last ${d.during.lastFailMs} ms, recovered ${d.during.recoveredMs} ms); resumed: the client used ${x}'s MAC again after ${d.clientBackMs} ms, ${d.after.failed}/${d.after.sent} failed (recovered ${d.after.recoveredMs} ms); ${d.failedBefore} failed before the stop; ServiceL2Status ${statusLog.join(' -> ')}; Events ${d.events.join(' | ')}`,
  );
  return d;
}

/** A Cluster Service over both replicas; its announcing node's speaker stopped, then its agent. */
export async function runFailover(node: RealNode, lb: TwoNodeLb, log: (m: string) => void): Promise<Failover> {
  const svc = LB2_SERVICES.cluster;
  await node.apply(dump(lbService(svc, { policy: 'Cluster' }, lb.metallb.pool.name)));
  const vip = await vipOf(node, svc);
  await lb.probe.onLink(vip);
  await until(`${svc} answering 5 in a row`, 60_000, async () => ((await lb.probe.curls(`http://${vip}/`, 5, { expect: SERVICE, timeoutS: 1 })).every((c) => c === 'ok') ? true : undefined));
  const disruptions = [await disrupt(node, lb, svc, vip, 'speaker', 20_000, 15_000, log)];
  disruptions.push(await disrupt(node, lb, svc, vip, 'speaker-deleted', 20_000, 20_000, log));
  disruptions.push(await disrupt(node, lb, svc, vip, 'agent', 15_000, 5_000, log));
  return { vip, disruptions };
}
