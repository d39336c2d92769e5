/**
 * The cross-node proofs on two real nodes (startNode({ nodes: 2 }), test/harness/node2.ts), for
 * test/node/twonode.test.ts and `npm run demo:node -- --nodes 2`:
 * - the blog with one nginx replica per node and a client on each node;
 * - NodePort through the node agent on both nodes from a client namespace on the shared segment
 *   (each node's address, equal shares, Local on the node with and without a local endpoint), and
 *   the agent's DaemonSet rolled under load;
 * - a node going away, with kube-proxy on the same pods beside.
 */
import { execFile, spawn } from 'node:child_process';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { dump, load, loadAll } from 'js-yaml';
import type { RealNode } from '../harness/node.js';
import { NODE, NODE2, SEGMENT } from '../harness/node-config.js';
import { arrivals, blogFile, burstArrivals, CLIENT, curlBurst, net1Addresses, pod, pods, SERVICE, sliceAddresses, type Burst } from './cluster.js';
import { NODE_AGENT_RULES_SH } from './rules.js';
import { agentOnHost, agentOverlay, AGENT_NAMESPACE, AGENT_SELECTOR, uninstallAgent } from './nodeport.js';
import { buildOverlay } from './netservice.js';
import { URL, waitFor, type Reporter } from './blog.js';
import { INJECTION_ENABLED, INJECTION_LABEL, NODE_ADDRESSES_ANNOTATION, NODE_PARENTS_ANNOTATION } from '../../src/keys.js';
import type { V1EndpointSlice } from '../../src/kube/types.js';
import { apiPath } from '../../src/kube/paths.js';
import { chiSquareUniform, type UniformTest } from '../harness/chi-square.js';
import { readFileSync } from 'node:fs';

const run = promisify(execFile);
const NS = 'default';

/** The client pod of the blog on each node (the blog's pod.yml, renamed and pinned). */
export const CLIENTS: Record<string, string> = { [NODE.name]: CLIENT, [NODE2.name]: `${CLIENT}-2` };

const ready = (p: { status?: { conditions?: { type: string; status: string }[] } }): boolean => p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;

async function host(args: string[], input?: string): Promise<string> {
  const [cmd = '', ...rest] = args;
  const p = run(cmd, rest, { encoding: 'utf8' });
  if (input !== undefined) p.child.stdin?.end(input);
  return (await p).stdout;
}

/** The blog's Deployment with one addition: one replica per node (hostname spread, DoNotSchedule). */
export function spreadDeployment(): string {
  const docs = (loadAll(blogFile('deployment.yml')) as ({ kind?: string; spec?: { template: { spec: Record<string, unknown> } } } | null)[]).filter((o) => o !== null);
  for (const o of docs) {
    if (o.kind === 'Deployment' && o.spec) {
      o.spec.template.spec['topologySpreadConstraints'] = [{ maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'DoNotSchedule', labelSelector: { matchLabels: { app: SERVICE } } }];
    }
  }
  return docs.map((o) => dump(o)).join('---\n');
}

/** The blog's client pod, renamed and pinned to a node (nodeName; the only changes). */
export function pinnedClient(name: string, nodeName: string): string {
  const o = load(blogFile('pod.yml')) as { metadata: { name: string }; spec: Record<string, unknown> };
  o.metadata.name = name;
  o.spec['nodeName'] = nodeName;
  return dump(o);
}

export interface ClientRun {
  pod: string;
  node: string;
  net1: string;
  curls: string[];
  /** Requests from the client's net1 address per backend pod. */
  answeredBy: Record<string, number>;
  otherSources: string[];
}

export interface TwoNodeBlog {
  /** nginx pod -> its node and net1 address. */
  backends: Record<string, { node: string; net1: string }>;
  slice: string[];
  clients: ClientRun[];
  /** Sidecar container present in each client (native sidecar). */
  sidecars: Record<string, boolean>;
}

export async function runTwoNodeBlog(node: RealNode, r: Reporter): Promise<TwoNodeBlog> {
  r.step(`label namespace ${NS} ${INJECTION_LABEL}=${INJECTION_ENABLED}; the blog's files, the Deployment spread one replica per node, a client pinned to each node`);
  await node.kubectl(['label', 'namespace', NS, `${INJECTION_LABEL}=${INJECTION_ENABLED}`, '--overwrite']);
  const info = (out: string): void =>
    out
      .trim()
      .split('\n')
      .forEach((l) => r.info(l));
  info(await node.apply(blogFile('net-attach.yml'), NS));
  info(await node.apply(blogFile('service.yml'), NS));
  info(await node.apply(spreadDeployment(), NS));
  for (const [n, p] of Object.entries(CLIENTS)) info(await node.apply(pinnedClient(p, n), NS));
  await node.wait(`deployment/${SERVICE}`, 'condition=Available', { namespace: NS, timeoutMs: 180_000 });
  for (const p of Object.values(CLIENTS)) await node.wait(`pod/${p}`, 'condition=Ready', { namespace: NS, timeoutMs: 180_000 });

  const backends: TwoNodeBlog['backends'] = {};
  for (const p of await pods(node, NS, `app=${SERVICE}`)) backends[p.metadata?.name ?? ''] = { node: p.spec?.nodeName ?? '', net1: net1Addresses(p)[0] ?? '' };
  r.step('pods, their nodes and net1 addresses');
  for (const [n, b] of Object.entries(backends)) r.info(`${n.padEnd(44)} ${b.node.padEnd(10)} net1 ${b.net1}`);
  const want = JSON.stringify(
    Object.values(backends)
      .map((b) => b.net1)
      .sort(),
  );
  const slice = await waitFor('the slice to list both replicas', 30_000, async () => {
    const a = await sliceAddresses(node, NS, SERVICE);
    return JSON.stringify(a) === want ? a : undefined;
  }).catch(() => sliceAddresses(node, NS, SERVICE));
  r.info(`slice ready addresses: ${slice.join(', ')}`);

  const names = Object.keys(backends);
  const clients: ClientRun[] = [];
  const sidecars: Record<string, boolean> = {};
  for (const [n, p] of Object.entries(CLIENTS)) {
    const c = await pod(node, NS, p);
    const net1 = net1Addresses(c)[0] ?? '';
    sidecars[p] = (c.spec?.initContainers ?? []).some((x) => x.restartPolicy === 'Always');
    r.step(`20 × curl ${URL} from ${p} on ${n} (net1 ${net1})`);
    const before: Record<string, number> = {};
    for (const b of names) before[b] = (await arrivals(node, NS, b)).length;
    const curls = await curlBurst(node, NS, p, URL, 20);
    const answeredBy: Record<string, number> = {};
    const otherSources: string[] = [];
    for (const b of names) {
      const got = (await arrivals(node, NS, b)).slice(before[b] ?? 0);
      answeredBy[b] = got.filter((a) => a.from === net1).length;
      otherSources.push(...got.filter((a) => a.from !== net1).map((a) => `${b} <- ${a.from}`));
    }
    r.info(`${curls.filter((x) => x === 'ok').length}/20 ok; answered by ${names.map((b) => `${b} on ${backends[b]?.node} (${backends[b]?.net1}): ${answeredBy[b]}`).join(', ')}`);
    clients.push({ pod: p, node: c.spec?.nodeName ?? '', net1, curls, answeredBy, otherSources });
  }
  return { backends, slice, clients, sidecars };
}

// --- NodePort through the node agent on both nodes --------------------------------------------

/** Each node's address on the blog's network (whereabouts hands out the low end of 10.1.1.0/24). */
export const NODE_ADDRESSES: Record<string, string> = { [NODE.name]: '10.1.1.250', [NODE2.name]: '10.1.1.251' };
export const CLIENT_NS = 'mpxtest-2n-client';
export const CLIENT_LINK = 'c2n0';
const CLIENT_SEG_PORT = 'seg-c2n0';
export const EXTERNAL_CLIENT = '198.51.100.10';
const CLIENT_SUBNET = '198.51.100.0/24';
const LOCAL_LABEL = 'twonode-local';

export interface TwoNodePort {
  readyMs: number;
  agentPods: Record<string, string>;
  agentInterfaces: Record<string, string>;
  nodePorts: { cluster: number; local: number };
  /** Cluster policy, per node address. */
  cluster: Record<string, Burst>;
  /** Pearson χ² of the backend shares per node address (α = 0.001). */
  chi2: Record<string, UniformTest>;
  /** Local policy over the first node's replica only, per node address. */
  local: Record<string, Burst>;
  localBackend: string;
  rollout: RolloutUnderLoad;
  leftAfterCleanup: string[];
}

export interface RolloutUnderLoad {
  sent: number;
  failed: number;
  /** "<http code> <node address>" -> count. */
  byResult: Record<string, number>;
  rolloutMs: number;
  /** Agent pod names before and after (all replaced). */
  before: string[];
  after: string[];
}

function nodePortService(name: string, policy: 'Cluster' | 'Local', selector: Record<string, string>): unknown {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: NS, labels: { 'service.kubernetes.io/service-proxy-name': 'multus-proxy' }, annotations: { 'k8s.v1.cni.cncf.io/service-network': 'macvlan1' } },
    spec: { type: 'NodePort', externalTrafficPolicy: policy, selector, ports: [{ protocol: 'TCP', port: 80 }] },
  };
}

async function clientCurls(url: string, n: number): Promise<string[]> {
  const body = `/tmp/${CLIENT_NS}.body`;
  const script = `for i in $(seq ${n}); do if curl -s -m 2 -o ${body} ${url} && grep -q 'multus-nginx-macvlan' ${body}; then echo ok; else echo "fail:$?"; fi; done; rm -f ${body}`;
  return (await host(['ip', 'netns', 'exec', CLIENT_NS, 'sh', '-c', script])).trim().split('\n');
}

const burst = (node: RealNode, names: string[], url: string, n: number): Promise<Burst> => burstArrivals(node, NS, names, () => clientCurls(url, n));

/** The agent's interface holding `address` on a node (node 1: the host; node 2: its namespace). */
async function agentInterface(node: RealNode, nodeName: string, address: string): Promise<string | undefined> {
  const cmd = ['ip', '-o', '-4', 'addr', 'show', 'to', `${address}/32`];
  const out = nodeName === NODE.name ? await host(cmd) : ((await node.second?.inNetns(cmd)) ?? '');
  return /^\d+: (mpxh[^\s@]*)/.exec(out)?.[1];
}

/** A client namespace with a veth port on the segment bridge, routed to both node addresses. */
export async function attachClient(node: RealNode, ifs: Record<string, string>): Promise<void> {
  await host(['ip', 'netns', 'add', CLIENT_NS]);
  await host(['ip', 'link', 'add', CLIENT_LINK, 'netns', CLIENT_NS, 'type', 'veth', 'peer', 'name', CLIENT_SEG_PORT, 'netns', SEGMENT.netns]);
  await host(['ip', '-n', SEGMENT.netns, 'link', 'set', CLIENT_SEG_PORT, 'master', SEGMENT.bridge, 'up']);
  await host(
    ['ip', '-n', CLIENT_NS, '-batch', '-'],
    ['link set lo up', `addr add ${EXTERNAL_CLIENT}/24 dev ${CLIENT_LINK}`, `link set ${CLIENT_LINK} up`, ...Object.values(NODE_ADDRESSES).map((a) => `route add ${a}/32 dev ${CLIENT_LINK}`), ''].join(
      '\n',
    ),
  );
  // Each node reaches the client's off-link subnet through its own agent interface.
  await host(['ip', 'route', 'add', CLIENT_SUBNET, 'dev', ifs[NODE.name] ?? '']);
  await node.second?.inNetns(['ip', 'route', 'add', CLIENT_SUBNET, 'dev', ifs[NODE2.name] ?? '']);
}

export async function detachClient(node: RealNode): Promise<void> {
  await host(['ip', 'netns', 'del', CLIENT_NS]).catch(() => '');
  await host(['ip', 'route', 'del', CLIENT_SUBNET]).catch(() => '');
  await node.second?.inNetns(['ip', 'route', 'del', CLIENT_SUBNET]).catch(() => '');
}

/** One request of the load: when it started (ms since the epoch), its HTTP code ("000": curl failed), its URL. */
export interface LoadLine {
  t: number;
  code: string;
  url: string;
}

/**
 * 10 requests a second from the external client, round robin over `urls`, until `stop` resolves;
 * each a new connection with a 3 s timeout.
 */
export async function loadLines(urls: string[], stop: Promise<unknown>): Promise<LoadLine[]> {
  const out = `/tmp/${CLIENT_NS}.load`;
  const stopFile = `/tmp/${CLIENT_NS}.stop`;
  await host(['rm', '-f', out, stopFile]);
  const script = `i=0; while [ ! -e ${stopFile} ]; do i=$((i+1)); case $((i % ${urls.length})) in ${urls.map((u, k) => `${k}) u=${u} ;;`).join(' ')} esac; (t=$(date +%s%3N); c=$(curl -s -m 3 -o /dev/null -w '%{http_code}' $u); echo "$t $c $u" >> ${out}) & sleep 0.1; done; wait`;
  const child = spawn('ip', ['netns', 'exec', CLIENT_NS, 'sh', '-c', script], { stdio: 'ignore' });
  const exited = new Promise<void>((res) => child.on('exit', () => res()));
  try {
    await stop;
  } finally {
    await host(['touch', stopFile]);
    await exited;
  }
  const lines = readFileSync(out, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => {
      const [t = '', code = '', url = ''] = l.split(' ');
      return { t: Number(t), code, url };
    })
    .sort((a, b) => a.t - b.t);
  await host(['rm', '-f', out, stopFile]);
  return lines;
}

/** loadLines counted as "<http code> <host of the URL>" -> requests. */
async function loadWhile(urls: string[], stop: Promise<unknown>): Promise<Record<string, number>> {
  const byResult: Record<string, number> = {};
  for (const l of await loadLines(urls, stop)) {
    const k = `${l.code} ${new globalThis.URL(l.url).hostname}`;
    byResult[k] = (byResult[k] ?? 0) + 1;
  }
  return byResult;
}

async function agentPodNames(node: RealNode): Promise<string[]> {
  return (await node.kubectl(['get', 'pods', '-n', AGENT_NAMESPACE, '-l', AGENT_SELECTOR, '-o', 'jsonpath={.items[*].metadata.name}'])).trim().split(/\s+/).filter(Boolean).sort();
}

export async function runTwoNodePort(node: RealNode, log: (m: string) => void, n = 60): Promise<TwoNodePort> {
  let measured: Omit<TwoNodePort, 'leftAfterCleanup'>;
  try {
    measured = await measure(node, log, n);
  } catch (e) {
    await uninstallTwoNodeAgent(node, log).catch((u: Error) => log(`uninstall after the failure failed too: ${u.message}`));
    throw e;
  }
  await uninstallTwoNodeAgent(node, log);
  // What of the agent is left: on the host (node 1) and in node 2's namespace.
  const left = await agentOnHost();
  const n2 = (await node.second?.inNetns(['sh', '-c', `ip -o link show | grep -o "mpx[hb][^:@]*" ; ${NODE_AGENT_RULES_SH}; ip route show table all proto 242; true`])) ?? '';
  left.push(
    ...n2
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => `${NODE2.name}: ${l.trim()}`),
  );
  return { ...measured, leftAfterCleanup: left };
}

export async function uninstallTwoNodeAgent(node: RealNode, log: (m: string) => void): Promise<void> {
  await node.kubectl(['delete', 'service', '-n', NS, '--ignore-not-found', 'nginx-nodeport-local2', '--wait=true']);
  await node.kubectl(['label', 'pod', '-n', NS, '--all', `${LOCAL_LABEL}-`]);
  await node.kubectl(['annotate', 'node', NODE2.name, `${NODE_ADDRESSES_ANNOTATION}-`, `${NODE_PARENTS_ANNOTATION}-`]);
  await uninstallAgent(node, log);
}

export interface TwoNodeAgent {
  /** ms from the apply to every agent pod Ready. */
  readyMs: number;
  /** Node -> its agent pod. */
  agentPods: Record<string, string>;
  /** Node -> the agent's interface holding the node's address on the blog's network. */
  agentInterfaces: Record<string, string>;
}

/** The node agent as docs/node-agent.md installs it, each node given its address (NODE_ADDRESSES) and parent. */
export async function installTwoNodeAgent(node: RealNode, log: (m: string) => void): Promise<TwoNodeAgent> {
  const t0 = Date.now();
  await node.sh(`${buildOverlay(agentOverlay(node, true))} | kubectl apply -f -`);
  for (const [name, address] of Object.entries(NODE_ADDRESSES)) {
    await node.kubectl(['annotate', 'node', name, '--overwrite', `${NODE_ADDRESSES_ANNOTATION}=default/macvlan1=${address}/24`, `${NODE_PARENTS_ANNOTATION}=default/macvlan1=${NODE.parent}`]);
  }
  await node.kubectl(['rollout', 'status', '-n', AGENT_NAMESPACE, 'daemonset/multus-proxy-node', '--timeout=180s'], { timeoutMs: 190_000 });
  const agents = JSON.parse(await node.kubectl(['get', 'pods', '-n', AGENT_NAMESPACE, '-l', AGENT_SELECTOR, '-o', 'json'])) as { items: { metadata: { name: string }; spec: { nodeName: string } }[] };
  const agentPods: Record<string, string> = {};
  for (const p of agents.items) agentPods[p.spec.nodeName] = p.metadata.name;
  await node.kubectl(['wait', '-n', AGENT_NAMESPACE, '--for=condition=Ready', 'pod', '-l', AGENT_SELECTOR, '--timeout=120s'], { timeoutMs: 130_000 });
  const readyMs = Date.now() - t0;
  log(`node agents Ready on ${Object.keys(agentPods).join(', ')} ${readyMs} ms after apply`);
  const agentInterfaces: Record<string, string> = {};
  for (const [name, address] of Object.entries(NODE_ADDRESSES)) {
    agentInterfaces[name] = await waitFor(`the agent interface with ${address} on ${name}`, 30_000, () => agentInterface(node, name, address));
  }
  return { readyMs, agentPods, agentInterfaces };
}

async function measure(node: RealNode, log: (m: string) => void, n: number): Promise<Omit<TwoNodePort, 'leftAfterCleanup'>> {
  const { readyMs, agentPods, agentInterfaces } = await installTwoNodeAgent(node, log);

  const backendPods = (await pods(node, NS, `app=${SERVICE}`)).filter((p) => !p.metadata?.deletionTimestamp);
  const names = backendPods.map((p) => p.metadata?.name ?? '');
  const localBackend = backendPods.find((p) => p.spec?.nodeName === NODE.name)?.metadata?.name ?? '';
  await node.kubectl(['label', 'pod', '-n', NS, localBackend, `${LOCAL_LABEL}=yes`, '--overwrite']);
  await node.apply(
    [nodePortService('nginx-nodeport', 'Cluster', { app: SERVICE }), nodePortService('nginx-nodeport-local2', 'Local', { app: SERVICE, [LOCAL_LABEL]: 'yes' })].map((o) => dump(o)).join('---\n'),
  );
  const nodePort = async (svc: string): Promise<number> => Number(await node.kubectl(['get', 'service', '-n', NS, svc, '-o', 'jsonpath={.spec.ports[0].nodePort}']));
  const nodePorts = { cluster: await nodePort('nginx-nodeport'), local: await nodePort('nginx-nodeport-local2') };
  await waitFor('the Cluster slice', 30_000, async () => ((await sliceAddresses(node, NS, 'nginx-nodeport')).length === names.length ? true : undefined));
  await waitFor('the Local slice', 30_000, async () => ((await sliceAddresses(node, NS, 'nginx-nodeport-local2')).length === 1 ? true : undefined));
  log(`agent interfaces ${JSON.stringify(agentInterfaces)}; node ports Cluster ${nodePorts.cluster}, Local ${nodePorts.local}`);

  const cluster: Record<string, Burst> = {};
  const chi2: Record<string, UniformTest> = {};
  const local: Record<string, Burst> = {};
  let rollout: RolloutUnderLoad;
  try {
    await attachClient(node, agentInterfaces);
    for (const [name, address] of Object.entries(NODE_ADDRESSES)) {
      const url = `http://${address}:${nodePorts.cluster}/`;
      await waitFor(`a first answer through ${name}'s node port`, 30_000, async () => ((await clientCurls(url, 1))[0] === 'ok' ? true : undefined));
      const b = await burst(node, names, url, n);
      cluster[name] = b;
      const t = chiSquareUniform(names.map((p) => b.answeredBy[p] ?? 0));
      chi2[name] = t;
      log(
        `Cluster via ${name} (${address}): ${b.curls.filter((c) => c === 'ok').length}/${n} ok, by ${JSON.stringify(b.answeredBy)}, χ² ${t.statistic.toFixed(2)} (≤ ${t.critical}?), sources ${b.sources.join(', ')}`,
      );
    }
    // Local: the node with the endpoint first (its rules are in place once it answers), then the other.
    const localUrl = (name: string): string => `http://${NODE_ADDRESSES[name]}:${nodePorts.local}/`;
    await waitFor("a first answer through the first node's Local port", 30_000, async () => ((await clientCurls(localUrl(NODE.name), 1))[0] === 'ok' ? true : undefined));
    for (const name of [NODE.name, NODE2.name]) {
      const b = await burst(node, names, localUrl(name), 10);
      local[name] = b;
      log(`Local via ${name}: ${b.curls.filter((c) => c === 'ok').length}/10 ok (${[...new Set(b.curls)].join(',')}), by ${JSON.stringify(b.answeredBy)}, sources ${b.sources.join(', ') || '-'}`);
    }

    // The DaemonSet rolled (kubectl rollout restart) under 10 req/s to both node addresses.
    const before = await agentPodNames(node);
    const t1 = Date.now();
    let rolloutMs = 0;
    const rolled = (async (): Promise<void> => {
      await delay(2_000);
      await node.kubectl(['rollout', 'restart', '-n', AGENT_NAMESPACE, 'daemonset/multus-proxy-node']);
      await node.kubectl(['rollout', 'status', '-n', AGENT_NAMESPACE, 'daemonset/multus-proxy-node', '--timeout=300s'], { timeoutMs: 310_000 });
      rolloutMs = Date.now() - t1 - 2_000;
      await delay(3_000);
    })();
    const byResult = await loadWhile(
      Object.values(NODE_ADDRESSES).map((a) => `http://${a}:${nodePorts.cluster}/`),
      rolled,
    );
    const after = await agentPodNames(node);
    const sent = Object.values(byResult).reduce((a, b) => a + b, 0);
    const failed = Object.entries(byResult)
      .filter(([k]) => !k.startsWith('200 '))
      .reduce((a, [, v]) => a + v, 0);
    rollout = { sent, failed, byResult, rolloutMs, before, after };
    log(`rollout restart under load: ${sent} requests, ${failed} failed (${JSON.stringify(byResult)}), rollout ${rolloutMs} ms, agents ${before.join(',')} -> ${after.join(',')}`);
  } finally {
    await detachClient(node);
  }
  return { readyMs, agentPods, agentInterfaces, nodePorts, cluster, chi2, local, localBackend, rollout };
}

// --- a node going away ------------------------------------------------------------------------

export const KUBE_PROXY_SERVICE = 'nginx-kube-proxy';

export interface NodeLoss {
  /** The backend on the second node: pod, net1 and eth0 addresses. */
  lost: { pod: string; net1: string; eth0: string };
  /** ms from the cut until: the Node NotReady, the pod not Ready, the address out of each slice. */
  nodeNotReadyMs: number;
  podNotReadyMs: number;
  multusLeftMs: number;
  kubeProxyLeftMs: number;
  /** Whether the Node, read right after each slice was first seen without the address, was NotReady. */
  notReadyWhenLeft: { multus: boolean; kubeProxy: boolean };
  /** Requests from the first node's client during the loss window, per Service. */
  multus: { sent: number; failed: number; failedAfterLeft: number };
  kubeProxy: { sent: number; failed: number; failedAfterLeft: number };
  /** Requests that failed before the cut ("<ms> <service> <code>"): none when the setup is sound. */
  failedBeforeCut: string[];
  /** ms from bringing the node back until its pod was in both slices again. */
  backMs: number;
}

/** Ready addresses of kube-proxy's slices (the EndpointSlice controller's) of a Service. */
async function kubeProxySlice(node: RealNode, service: string): Promise<string[]> {
  const s = await node.client.list<V1EndpointSlice>(apiPath('discovery.k8s.io', 'v1', 'endpointslices', NS), {
    labelSelector: `kubernetes.io/service-name=${service},endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io`,
  });
  return s.items
    .flatMap((x) => x.endpoints ?? [])
    .filter((e) => e.conditions?.ready !== false)
    .flatMap((e) => e.addresses)
    .sort();
}

/**
 * Cuts the second node off (kubelet SIGKILLed; its ens4 and its link to the host down, so its pods
 * neither answer on net1 nor on eth0) while the blog's client on the first node sends 5 req/s,
 * alternating the blog Service (the sidecar) and a plain ClusterIP Service over the same pods
 * (kube-proxy). Then brings it back.
 */
export async function runNodeLoss(node: RealNode, log: (m: string) => void): Promise<NodeLoss> {
  const second = node.second;
  if (!second) throw new Error('runNodeLoss needs startNode({ nodes: 2 })');
  await node.apply(dump({ apiVersion: 'v1', kind: 'Service', metadata: { name: KUBE_PROXY_SERVICE, namespace: NS }, spec: { selector: { app: SERVICE }, ports: [{ protocol: 'TCP', port: 80 }] } }));
  const lostPod = (await pods(node, NS, `app=${SERVICE}`)).find((p) => p.spec?.nodeName === NODE2.name && !p.metadata?.deletionTimestamp);
  if (!lostPod) throw new Error(`no blog replica on ${NODE2.name}`);
  const lost = { pod: lostPod.metadata?.name ?? '', net1: net1Addresses(lostPod)[0] ?? '', eth0: lostPod.status?.podIP ?? '' };
  await waitFor("kube-proxy's slice with both replicas", 30_000, async () => ((await kubeProxySlice(node, KUBE_PROXY_SERVICE)).length === 2 ? true : undefined));
  const clientPod = CLIENTS[NODE.name] ?? CLIENT;
  // Resolved once: a lookup must not be what fails (CoreDNS is on the first node anyway).
  const ips = JSON.parse(await node.kubectl(['get', 'service', '-n', NS, SERVICE, KUBE_PROXY_SERVICE, '-o', 'json'])) as { items: { metadata: { name: string }; spec: { clusterIP: string } }[] };
  const ipOf = (n: string): string => ips.items.find((s) => s.metadata.name === n)?.spec.clusterIP ?? '';
  // Both proxies have their rules before the load starts: each Service answers 6 times in a row.
  for (const svc of [SERVICE, KUBE_PROXY_SERVICE]) {
    await waitFor(`${svc} answering from ${clientPod}`, 30_000, async () => {
      const r = await node.exec(NS, clientPod, ['sh', '-c', `for i in 1 2 3 4 5 6; do curl -s -m 1 -o /dev/null http://${ipOf(svc)}/ || exit 1; done`], { container: CLIENT });
      return r.code === 0 ? true : undefined;
    });
  }
  const script = `rm -f /tmp/stop /tmp/load; i=0; while [ ! -e /tmp/stop ]; do i=$((i+1)); if [ $((i % 2)) = 0 ]; then s=multus; a=${ipOf(SERVICE)}; else s=kube-proxy; a=${ipOf(KUBE_PROXY_SERVICE)}; fi; (t=$(date +%s%3N); c=$(curl -s -m 1 -o /dev/null -w '%{http_code}' http://$a/); echo "$t $s $c" >> /tmp/load) & sleep 0.2; done; wait; cat /tmp/load`;
  const load = node.exec(NS, clientPod, ['sh', '-c', script], { container: CLIENT, timeoutMs: 600_000 });
  await delay(3_000);

  let cut = 0;
  const marks = { nodeNotReadyMs: -1, podNotReadyMs: -1, multusLeftMs: -1, kubeProxyLeftMs: -1 };
  const notReadyWhenLeft = { multus: false, kubeProxy: false };
  let backMs: number;
  try {
    cut = Date.now();
    second.stopKubelet();
    await second.inNetns(['ip', 'link', 'set', NODE.parent, 'down']);
    await host(['ip', 'link', 'set', NODE2.uplink, 'down']);
    log(`${NODE2.name} cut at ${new Date(cut).toISOString()} (kubelet killed, ens4 and ${NODE2.uplink} down)`);
    await waitFor('the lost replica out of both slices', 240_000, async () => {
      // Slices first, then the Node: a slice seen without the address is checked against a Node
      // read after it, so "the node was NotReady when the address left" holds without racing the
      // poll (a Node read before the slices could be Ready and turn NotReady in the same round).
      const multusLeft = marks.multusLeftMs < 0 && !(await sliceAddresses(node, NS, SERVICE)).includes(lost.net1) ? Date.now() - cut : -1;
      const kubeProxyLeft = marks.kubeProxyLeftMs < 0 && !(await kubeProxySlice(node, KUBE_PROXY_SERVICE)).includes(lost.eth0) ? Date.now() - cut : -1;
      const n2 = await node.client.get<{ status?: { conditions?: { type: string; status: string }[] } }>(apiPath('', 'v1', 'nodes', undefined, NODE2.name));
      const notReady = !ready(n2);
      if (marks.nodeNotReadyMs < 0 && notReady) marks.nodeNotReadyMs = Date.now() - cut;
      if (marks.podNotReadyMs < 0 && !ready(await pod(node, NS, lost.pod))) marks.podNotReadyMs = Date.now() - cut;
      if (multusLeft >= 0) [marks.multusLeftMs, notReadyWhenLeft.multus] = [multusLeft, notReady];
      if (kubeProxyLeft >= 0) [marks.kubeProxyLeftMs, notReadyWhenLeft.kubeProxy] = [kubeProxyLeft, notReady];
      return marks.multusLeftMs >= 0 && marks.kubeProxyLeftMs >= 0 ? true : undefined;
    });
    log(
      `Node NotReady after ${marks.nodeNotReadyMs} ms, pod not Ready ${marks.podNotReadyMs} ms, out of the multus-proxy slice ${marks.multusLeftMs} ms, out of kube-proxy's ${marks.kubeProxyLeftMs} ms`,
    );
    // Both proxies follow their slices within a second or two; a few seconds of load after that.
    await delay(5_000);
  } finally {
    await node.exec(NS, clientPod, ['touch', '/tmp/stop'], { container: CLIENT });
    // Back: links up, kubelet started; the same pod (its containers kept running) is Ready again.
    const back = Date.now();
    await host(['ip', 'link', 'set', NODE2.uplink, 'up']);
    await second.inNetns(['ip', 'link', 'set', NODE.parent, 'up']);
    second.startKubelet();
    await waitFor('the node and its replica back in both slices', 240_000, async () =>
      (await sliceAddresses(node, NS, SERVICE)).includes(lost.net1) && (await kubeProxySlice(node, KUBE_PROXY_SERVICE)).includes(lost.eth0) ? true : undefined,
    );
    backMs = Date.now() - back;
    log(`${NODE2.name} back: its replica in both slices ${backMs} ms after the links came up and the kubelet restarted`);
  }
  const lines = (await load).stdout
    .trim()
    .split('\n')
    .map((l) => l.split(' '));
  const tally = (svc: string, leftMs: number): NodeLoss['multus'] => {
    const mine = lines.filter(([t, s]) => s === svc && Number(t) >= cut);
    const bad = mine.filter(([, , c]) => c !== '200');
    // Requests sent 5 s after the endpoint left, so that the proxy has seen and applied the slice:
    // at 2 s one request in 149 still failed once in three runs on a loaded 2-core node (the node
    // controller's NotReady burst); how fast each proxy follows is B11's to measure, not this test's.
    return { sent: mine.length, failed: bad.length, failedAfterLeft: bad.filter(([t]) => Number(t) >= cut + leftMs + 5_000).length };
  };
  const beforeCut = lines.filter(([t, , c]) => Number(t) < cut && c !== '200');
  const multus = tally('multus', marks.multusLeftMs);
  const kubeProxy = tally('kube-proxy', marks.kubeProxyLeftMs);
  log(
    `during the loss: multus-proxy ${multus.failed}/${multus.sent} failed (${multus.failedAfterLeft} after it left); kube-proxy ${kubeProxy.failed}/${kubeProxy.sent} failed (${kubeProxy.failedAfterLeft} after it left); before the cut ${beforeCut.length} failed`,
  );
  await node.kubectl(['delete', 'service', '-n', NS, KUBE_PROXY_SERVICE, '--wait=true']);
  return { lost, ...marks, notReadyWhenLeft, multus, kubeProxy, failedBeforeCut: beforeCut.map((l) => l.join(' ')), backMs };
}
