/**
 * The NetworkPolicy conformance matrix (netpol-cases.ts) as traffic on the real node: nine pods
 * (a, b, c in namespaces netpol-x, -y, -z, injected with the sidecar) on one shared macvlan
 * network, each serving TCP and UDP on ports 80 and 81 from the project's own image (Node.js), and
 * each probing every other pod's net1 address on all four in parallel. The pods are made once;
 * each case applies its MultiNetworkPolicies, waits until every sidecar's table holds the drop
 * counters the project's resolver and render compute for that pod (the sidecars have synced the
 * policy set), probes, compares the whole table, deletes the policies and waits for the counters
 * to go. SCTP is not probed: this kernel has no SCTP (docs/policy.md).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import type { RealNode } from '../harness/node.js';
import { NODE } from '../harness/node-config.js';
import { createNamespace, net1Addresses, pod as getPod, ROOT } from './cluster.js';
import { SIDECAR_NFT_LIST } from './rules.js';
import { SIDECAR_CONTAINER_NAME, INSTALL_NAMESPACE } from '../../src/keys.js';
import { resolvePodPolicy } from '../../src/policy/resolve.js';
import { renderPolicy } from '../../src/dataplane/nftables/policy.js';
import type { MultiNetworkPolicy } from '../../src/policy/api.js';
import {
  afterCase,
  allowAll,
  casePolicies,
  CASES,
  differingCells,
  expectedTable,
  NAMESPACES,
  NETWORK,
  NETWORK_KEY,
  NS_KEYS,
  PAIRS,
  POD_LABEL,
  PODS,
  CONTAINER_PORTS,
  modelLookup,
  modelPod,
  probeName,
  PROBES,
  type Addresses,
  type ConformanceCase,
  type Labels,
  type UpdateCase,
  type NsKey,
  type PodId,
  type Probe,
  type Table,
  UPDATE_CASES,
} from './netpol-cases.js';

/** The project's image: Node.js serves and probes, so no other image is needed. */
export const NETPOL_IMAGE = 'docker.io/library/multus-proxy:0.1.0';
export const MNP_CRD = 'multi-networkpolicies.k8s.cni.cncf.io';
const MNP = 'multi-networkpolicies.k8s.cni.cncf.io';
/** A denied probe is one that got no answer within this; an allowed one answers in milliseconds. */
export const PROBE_TIMEOUT_MS = 1000;
const SYNC_TIMEOUT_MS = 20_000;

/** The probe agent's port on each matrix pod's eth0 (the primary network, which no policy here polices). */
export const AGENT_PORT = 9080;

/** `probeAll(a)`, a = {targets: [[key, address]], probes: [[protocol, port]], timeoutMs, from?}: {"<protocol>/<port> <key>": answer} (the server's id, or ""), every probe at once. Needs `net` and `dgram`. */
const PROBE_FN = `const probeAll=a=>{const T=a.timeoutMs;
const tcp=(h,p)=>new Promise(r=>{const s=net.connect({host:h,port:p,...(a.from?{localAddress:a.from}:{})});let d='';const t=setTimeout(()=>{s.destroy();r('')},T);
s.on('data',x=>{d+=x}).on('end',()=>{clearTimeout(t);r(d.trim())}).on('error',()=>{clearTimeout(t);r('')})});
const udp=(h,p)=>new Promise(r=>{const s=dgram.createSocket(h.includes(':')?'udp6':'udp4');let done=false;const end=v=>{if(done)return;done=true;clearTimeout(t);try{s.close()}catch{};r(v)};
const t=setTimeout(()=>end(''),T);s.on('message',m=>end(m.toString().trim())).on('error',()=>end(''));
const send=()=>s.send('?',p,h,e=>{if(e)end('')});if(a.from)s.bind({address:a.from},send);else send()});
return Promise.all(a.targets.flatMap(([k,h])=>a.probes.map(async([pr,p])=>[pr+'/'+p+' '+k,await(pr==='TCP'?tcp(h,p):udp(h,p))]))).then(x=>Object.fromEntries(x))};`;

/**
 * Serves TCP (answers its id and closes) and UDP (answers its id; logs any payload but a probe's
 * `?`, with its source) on 80 and 81, both families; and the probe agent: an HTTP POST of a probe
 * round's JSON to AGENT_PORT runs it from this pod and answers its result, so a round costs the
 * runner one request per pod instead of a `kubectl exec` and a Node.js start.
 */
export const SERVER_JS = `const net=require('net'),dgram=require('dgram');const id=process.env.POD_ID||'?';
for(const port of [80,81]){net.createServer(c=>{c.on('error',()=>{});c.end(id+'\\n')}).listen({port,host:'::',ipv6Only:false});
const u=dgram.createSocket({type:'udp6',ipv6Only:false});u.on('message',(m,r)=>{const t=m.toString();if(t!=='?')console.log('udp '+port+' '+r.address+' '+t);u.send(id,r.port,r.address)});u.bind(port,'::');}
${PROBE_FN}
require('http').createServer((q,s)=>{let b='';q.on('data',x=>{b+=x}).on('end',()=>{let a;try{a=JSON.parse(b)}catch{s.statusCode=400;s.end('not JSON');return}
probeAll(a).then(x=>s.end(JSON.stringify(x)),e=>{s.statusCode=500;s.end(String(e))})})}).listen(${AGENT_PORT},'0.0.0.0');
process.on('SIGTERM',()=>process.exit(0));`;

/** argv[1]: a probe round's JSON (PROBE_FN); prints its result. */
export const PROBE_JS = `const net=require('net'),dgram=require('dgram');${PROBE_FN}
probeAll(JSON.parse(process.argv[1])).then(x=>console.log(JSON.stringify(x)));`;

const nsOf = (id: PodId): NsKey => id.split('/')[0] as NsKey;
const nameOf = (id: PodId): string => id.split('/')[1] ?? '';

export function nad(): object {
  const config = { cniVersion: '0.3.1', type: 'macvlan', master: NODE.parent, mode: 'bridge', ipam: { type: 'whereabouts', ipRanges: [{ range: NETWORK.subnet }, { range: NETWORK.subnet6 }] } };
  return { apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name: NETWORK.name, namespace: NETWORK.namespace }, spec: { config: JSON.stringify(config) } };
}

/** A matrix pod: the server in the project's image, on the shared network as net1. */
export function serverPod(id: PodId, extra: { labels?: Record<string, string>; name?: string } = {}): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: extra.name ?? nameOf(id), namespace: NAMESPACES[nsOf(id)], labels: { [POD_LABEL]: nameOf(id), ...extra.labels }, annotations: { 'k8s.v1.cni.cncf.io/networks': NETWORK_KEY } },
    spec: {
      terminationGracePeriodSeconds: 2,
      // The image's user is not root: ports 80 and 81 are opened by this safe, namespaced sysctl.
      securityContext: { sysctls: [{ name: 'net.ipv4.ip_unprivileged_port_start', value: '0' }] },
      containers: [{ name: 'serve', image: NETPOL_IMAGE, command: ['node', '-e', SERVER_JS], env: [{ name: 'POD_ID', value: id }], ports: CONTAINER_PORTS }],
    },
  };
}

export interface Matrix {
  readonly addresses: Addresses;
  /** The IPv6 net1 addresses, not probed before the IPv6 cases (so their first neighbour discovery runs under policy). */
  readonly addresses6: Addresses;
  /** The eth0 addresses, where each pod's probe agent (AGENT_PORT) takes probe rounds. */
  readonly agents: Addresses;
  readonly crdAdded: boolean;
}

const list = (items: object[]): string => JSON.stringify({ apiVersion: 'v1', kind: 'List', items });

/** Namespaces, the NAD and the nine pods; the MultiNetworkPolicy CRD when the cluster lacks it. */
export async function setUpMatrix(node: RealNode, log: (m: string) => void): Promise<Matrix> {
  const t0 = Date.now();
  const crdAdded = (await node.kubectlResult(['get', 'crd', MNP_CRD], { allowFail: true })).code !== 0;
  if (crdAdded) {
    await node.apply(readFileSync(join(ROOT, 'deploy', 'components', 'multi-networkpolicy', 'crd.yaml'), 'utf8'));
    await node.wait(`crd/${MNP_CRD}`, 'condition=Established', { timeoutMs: 60_000 });
  }
  for (const k of NS_KEYS) await createNamespace(node, NAMESPACES[k], true);
  await node.kubectl(['apply', '-f', '-'], { input: list([nad()]) });
  if (crdAdded) log(`MultiNetworkPolicy CRD installed; the controller and the webhook took it up in ${await waitPolicyApiServed(node)} ms`);
  await node.kubectl(['apply', '-f', '-'], { input: list(PODS.map((id) => serverPod(id))) });
  for (const id of PODS) await node.wait(`pod/${nameOf(id)}`, 'condition=Ready', { namespace: NAMESPACES[nsOf(id)], timeoutMs: 240_000 });
  const addresses = {} as Record<PodId, string>;
  const addresses6 = {} as Record<PodId, string>;
  const agents = {} as Record<PodId, string>;
  for (const id of PODS) {
    const p = await getPod(node, NAMESPACES[nsOf(id)], nameOf(id));
    const all = net1Addresses(p);
    const eth0 = net1Addresses(p, 'eth0').find((x) => !x.includes(':'));
    if (!eth0) throw new Error(`${id}: no IPv4 eth0 address in its network-status, for its probe agent`);
    agents[id] = eth0;
    const a = all.find((x) => !x.includes(':'));
    const a6 = all.find((x) => x.includes(':'));
    if (!a || !a6) throw new Error(`${id}: no IPv4 and IPv6 net1 addresses in its network-status: ${all.join(', ')}`);
    addresses[id] = a;
    addresses6[id] = a6;
  }
  log(`matrix pods Ready in ${Date.now() - t0} ms: ${PODS.map((id) => `${id} ${addresses[id]}`).join(', ')}`);
  return { addresses, addresses6, agents, crdAdded };
}

/**
 * The controller and the webhook look for a CRD installed after they started every 30 s: waits
 * until the webhook admits a policy (server-side dry run) and the controller writes the address
 * group of a probe policy, and returns how long that took.
 */
async function waitPolicyApiServed(node: RealNode): Promise<number> {
  const t0 = Date.now();
  const probe = {
    apiVersion: 'k8s.cni.cncf.io/v1beta2',
    kind: 'MultiNetworkPolicy',
    metadata: { name: 'setup-probe', namespace: NETWORK.namespace, annotations: { 'k8s.v1.cni.cncf.io/policy-for': NETWORK_KEY } },
    spec: { podSelector: { matchLabels: { [POD_LABEL]: 'none' } }, policyTypes: ['Ingress'], ingress: [{ from: [{ podSelector: {} }] }] },
  };
  const until = async (what: string, f: () => Promise<boolean>): Promise<void> => {
    for (;;) {
      if (await f()) return;
      if (Date.now() - t0 > 120_000) throw new Error(`timed out after 120 s waiting for ${what}`);
      await delay(1000);
    }
  };
  await until(
    'the webhook to admit a MultiNetworkPolicy',
    async () => (await node.kubectlResult(['create', '--dry-run=server', '-f', '-'], { input: JSON.stringify(probe), allowFail: true })).code === 0,
  );
  await node.kubectl(['apply', '-f', '-'], { input: JSON.stringify(probe) });
  await until(
    'the address group of a probe policy',
    async () => (await node.kubectl(['get', 'endpointslices', '-n', NETWORK.namespace, '-l', 'multus-proxy/policy=setup-probe', '-o', 'name'])).trim() !== '',
  );
  await node.kubectl(['delete', MNP, '-n', NETWORK.namespace, 'setup-probe', '--wait=true']);
  return Date.now() - t0;
}

export async function tearDownMatrix(node: RealNode, m: Matrix | undefined, log: (m: string) => void): Promise<void> {
  // The three at once: their pods terminate side by side.
  const names = NS_KEYS.map((k) => NAMESPACES[k]);
  await node
    .kubectl(['delete', 'namespace', ...names, '--ignore-not-found', '--wait=true', '--timeout=120s'], { timeoutMs: 130_000 })
    .catch((e: Error) => log(`deleting ${names.join(', ')}: ${e.message}`));
  if (!m?.crdAdded) return;
  await node.kubectl(['delete', 'crd', MNP_CRD, '--ignore-not-found']).catch((e: Error) => log(`deleting the CRD: ${e.message}`));
  // Until the apiserver stops serving the group, a sidecar starting now may list policies that are going away.
  for (const end = Date.now() + 30_000; Date.now() < end; await delay(500)) {
    const served = await node.kubectl(['get', '--raw', '/apis/k8s.cni.cncf.io/v1beta1']).then(
      () => true,
      () => false,
    );
    if (!served) return;
  }
  log('the MultiNetworkPolicy API is still served 30 s after its CRD was deleted');
}

/** One probe round from `from` (a pod of the matrix) to targets: answer per "<probe> <key>". */
export async function probeFrom(
  node: RealNode,
  namespace: string,
  pod: string,
  targets: readonly (readonly [string, string])[],
  probes: readonly Probe[],
  opts: { timeoutMs?: number; from?: string; container?: string } = {},
): Promise<Record<string, string>> {
  const arg = JSON.stringify({ targets, probes: probes.map((p) => [p.protocol, p.port]), timeoutMs: opts.timeoutMs ?? PROBE_TIMEOUT_MS, ...(opts.from ? { from: opts.from } : {}) });
  const r = await node.exec(namespace, pod, ['node', '-e', PROBE_JS, arg], { container: opts.container ?? 'serve', timeoutMs: 60_000 });
  if (r.code !== 0) throw new Error(`probe from ${namespace}/${pod} failed (${r.code}): ${r.stderr.slice(0, 500)}`);
  return JSON.parse(r.stdout) as Record<string, string>;
}

/** One probe round from a matrix pod, through its probe agent (one HTTP request from the runner, no `kubectl exec`). */
export async function probeByAgent(agent: string, targets: readonly (readonly [string, string])[], probes: readonly Probe[], timeoutMs = PROBE_TIMEOUT_MS): Promise<Record<string, string>> {
  const body = JSON.stringify({ targets, probes: probes.map((p) => [p.protocol, p.port]), timeoutMs });
  const r = await fetch(`http://${agent}:${AGENT_PORT}/`, { method: 'POST', body, signal: AbortSignal.timeout(timeoutMs + 30_000) });
  const text = await r.text();
  if (!r.ok) throw new Error(`probe agent ${agent}:${AGENT_PORT} answered ${r.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as Record<string, string>;
}

/** The observed table: every pod probes every other pod's address in `a` (IPv4 or IPv6 net1) on every probe, all at once. */
export async function observe(m: Pick<Matrix, 'agents'>, a: Addresses, timeoutMs = PROBE_TIMEOUT_MS): Promise<{ table: Table; odd: string[] }> {
  const table: Table = Object.fromEntries(PROBES.map((p) => [probeName(p), {}]));
  const odd: string[] = [];
  await Promise.all(
    PODS.map(async (f) => {
      const targets = PODS.filter((t) => t !== f).map((t) => [t, a[t]] as const);
      const answers = await probeByAgent(m.agents[f], targets, PROBES, timeoutMs);
      for (const p of PROBES)
        for (const [t] of targets) {
          const got = answers[`${probeName(p)} ${t}`] ?? '';
          if (got !== '' && got !== t) odd.push(`${probeName(p)} ${f} -> ${t} answered by ${got}`);
          (table[probeName(p)] as Record<string, boolean>)[`${f}>${t}`] = got === t;
        }
    }),
  );
  return { table, odd };
}

/** The drop counters the project's resolver and render put in each pod's table for these policies (and labels a change added). */
export function expectedCounters(policies: readonly MultiNetworkPolicy[], a: Addresses, labels: Labels = {}): Record<PodId, string[]> {
  const lookup = modelLookup(a, labels);
  return Object.fromEntries(PODS.map((id) => [id, [...(renderPolicy(resolvePodPolicy(modelPod(id, a, labels), policies, lookup))?.counters ?? [])].sort()])) as Record<PodId, string[]>;
}

/** The named counters in a pod's sidecar table (none when the table is absent). */
export async function sidecarCounters(node: RealNode, namespace: string, pod: string): Promise<string[]> {
  const r = await node.exec(namespace, pod, SIDECAR_NFT_LIST, { container: SIDECAR_CONTAINER_NAME, timeoutMs: 30_000 });
  if (r.code !== 0) return [];
  return [...new Set([...r.stdout.matchAll(/^\s*counter (MPX-PC-[A-Z0-9]+) \{/gm)].map((m) => m[1] ?? ''))].sort();
}

/** Waits until every pod's sidecar holds exactly the expected counters; the pods that did not, when it gave up. */
export async function waitCounters(node: RealNode, want: Record<PodId, string[]>, timeoutMs: number): Promise<{ ms: number; behind: string[] }> {
  const t0 = Date.now();
  for (;;) {
    const have = await Promise.all(PODS.map(async (id) => [id, await sidecarCounters(node, NAMESPACES[nsOf(id)], nameOf(id))] as const));
    const behind = have.filter(([id, c]) => c.join(' ') !== (want[id] ?? []).join(' ')).map(([id, c]) => `${id} has [${c.join(' ')}], wants [${(want[id] ?? []).join(' ')}]`);
    if (behind.length === 0 || Date.now() - t0 > timeoutMs) return { ms: Date.now() - t0, behind };
    await delay(300);
  }
}

export interface CaseResult {
  readonly upstream: string;
  /** The cells that differ on the last probe round. */
  readonly cells: string[];
  /** Probe rounds run (more than one: the first differed and the table converged, or not, later). */
  readonly rounds: number;
  /** Sidecars that never showed the expected counters (the policy set was not synced). */
  readonly unsynced: string[];
  readonly syncMs: number;
  readonly odd: string[];
}

export interface MatrixRun {
  readonly baseline: string[];
  readonly after: string[];
  readonly cases: CaseResult[];
  readonly ms: number;
}

async function deletePolicies(node: RealNode): Promise<void> {
  await Promise.all(NS_KEYS.map((k) => node.kubectl(['delete', MNP, '--all', '-n', NAMESPACES[k], '--wait=true'])));
}

/** Probe rounds until the table is `expected` (at most `rounds`, a second apart; one when `once`): the last round's differing cells. */
async function tableRounds(node: RealNode, m: Matrix, expected: Table, rounds: number, once: boolean): Promise<{ cells: string[]; odd: string[]; rounds: number }> {
  let n = 0;
  for (;;) {
    n++;
    const o = await observe(m, m.addresses);
    const cells = differingCells(expected, o.table);
    if (cells.length === 0 || once || n >= rounds) return { cells, odd: o.odd, rounds: n };
    await delay(1000);
  }
}

/** Runs one case on the set-up pods. Extra probe rounds (up to 3, a second apart) only when the first differs. */
export async function runCase(node: RealNode, m: Matrix, c: ConformanceCase, syncTimeoutMs: number): Promise<CaseResult> {
  const policies = casePolicies(c, m.addresses);
  await node.kubectl(['apply', '-f', '-'], { input: list(policies) });
  const sync = await waitCounters(node, expectedCounters(policies, m.addresses), syncTimeoutMs);
  const t = await tableRounds(node, m, expectedTable(c), 3, sync.behind.length > 0);
  // The next case waits for exactly its own counters, so a deletion not yet applied shows there.
  await deletePolicies(node);
  return { upstream: c.upstream, cells: t.cells, rounds: t.rounds, unsynced: sync.behind, syncMs: sync.ms, odd: t.odd };
}

/** Adds a change's labels to the matrix pods and namespaces, or takes them away again. */
async function setLabels(node: RealNode, labels: Labels | undefined, add: boolean): Promise<void> {
  const args = (l: Readonly<Record<string, string>>): string[] => Object.entries(l).map(([k, v]) => (add ? `${k}=${v}` : `${k}-`));
  for (const [id, l] of Object.entries(labels?.pods ?? {}) as [PodId, Record<string, string>][])
    await node.kubectl(['label', 'pod', '-n', NAMESPACES[nsOf(id)], nameOf(id), '--overwrite', ...args(l)]);
  for (const [k, l] of Object.entries(labels?.namespaces ?? {}) as [NsKey, Record<string, string>][]) await node.kubectl(['label', 'namespace', NAMESPACES[k], '--overwrite', ...args(l)]);
}

/**
 * Runs an update case: the first table whole, the change (policies applied again by name, labels
 * added), the second table whole, then the policies deleted and the labels taken away. A change
 * of peers alone keeps every counter, so the second table gets more rounds (up to 10, a second
 * apart) to show the sidecars' refilled sets.
 */
export async function runUpdateCase(node: RealNode, m: Matrix, u: UpdateCase, syncTimeoutMs: number): Promise<CaseResult> {
  const first = casePolicies(u.before, m.addresses);
  const next = casePolicies(afterCase(u), m.addresses);
  try {
    await node.kubectl(['apply', '-f', '-'], { input: list(first) });
    const s1 = await waitCounters(node, expectedCounters(first, m.addresses), syncTimeoutMs);
    const t1 = await tableRounds(node, m, expectedTable(u.before), 3, s1.behind.length > 0);
    if (u.change.policies) await node.kubectl(['apply', '-f', '-'], { input: list(next) });
    await setLabels(node, u.change.labels, true);
    const s2 = await waitCounters(node, expectedCounters(next, m.addresses, u.change.labels), syncTimeoutMs);
    const t2 = await tableRounds(node, m, expectedTable(afterCase(u)), 10, s2.behind.length > 0);
    const cells = [...t1.cells.map((c) => `before: ${c}`), ...t2.cells.map((c) => `after ${u.change.what}: ${c}`)];
    return { upstream: u.upstream, cells, rounds: t1.rounds + t2.rounds, unsynced: [...s1.behind, ...s2.behind], syncMs: s1.ms + s2.ms, odd: [...t1.odd, ...t2.odd] };
  } finally {
    await deletePolicies(node);
    await setLabels(node, u.change.labels, false);
  }
}

/** The whole matrix: baseline (no policy), every case, every update case, and the baseline again once all are deleted. */
export async function runMatrix(node: RealNode, m: Matrix, log: (m: string) => void, cases: readonly ConformanceCase[] = CASES, updates: readonly UpdateCase[] = UPDATE_CASES): Promise<MatrixRun> {
  const t0 = Date.now();
  const baseline = differingCells(allowAll(), (await observe(m, m.addresses)).table);
  log(`baseline (no policy): ${baseline.length} of ${PAIRS.length * PROBES.length} cells differ`);
  const results: CaseResult[] = [];
  let syncTimeout = SYNC_TIMEOUT_MS;
  for (const c of [...cases, ...updates]) {
    const r = 'change' in c ? await runUpdateCase(node, m, c, syncTimeout) : await runCase(node, m, c, syncTimeout);
    // Sidecars that do not enforce policy never sync: the remaining cases wait briefly instead.
    if (r.unsynced.length > 0) syncTimeout = 3_000;
    results.push(r);
    log(
      `${r.cells.length === 0 ? 'pass' : `FAIL ${r.cells.length} cells`} (sync ${r.syncMs} ms${r.unsynced.length ? `, ${r.unsynced.length} sidecars unsynced` : ''}, ${r.rounds} rounds): ${c.upstream}`,
    );
  }
  await waitCounters(node, expectedCounters([], m.addresses), SYNC_TIMEOUT_MS);
  const after = differingCells(allowAll(), (await observe(m, m.addresses)).table);
  return { baseline, after, cases: results, ms: Date.now() - t0 };
}

/** The sidecars' own words when they did not sync (their last lines), for the failure message. */
export async function sidecarLogs(node: RealNode): Promise<string> {
  const r = await node.kubectlResult(['logs', '-n', NAMESPACES.x, 'a', '-c', SIDECAR_CONTAINER_NAME, '--tail=15'], { allowFail: true });
  const c = await node.kubectlResult(['logs', '-n', INSTALL_NAMESPACE, 'deploy/multus-proxy-controller', '--tail=10'], { allowFail: true });
  return `sidecar of netpol-x/a:\n${r.stdout}${r.stderr}\ncontroller:\n${c.stdout}${c.stderr}`;
}
