/**
 * The real-node policy cases beside the conformance matrix, on the matrix's pods (netpol.ts):
 * - changes under load: with x/a isolated to "from y/a only", another policy is added and removed
 *   while y/a (allowed) and x/b, z/c (forbidden) keep opening connections to x/a; no forbidden one
 *   may succeed at any moment;
 * - a sidecar restart: x/a's sidecar container is killed (SIGKILL) under the same load; the rules
 *   stay in the pod's namespace, so no forbidden connection may pass while it is gone or starting;
 * - IPv6: cases of the matrix on the pods' IPv6 addresses, probed for the first time under policy
 *   so the pods' neighbour discovery runs through the isolated chains.
 */
import { setTimeout as delay } from 'node:timers/promises';
import type { RealNode } from '../harness/node.js';
import { SIDECAR_CONTAINER_NAME } from '../../src/keys.js';
import { casePolicies, CASES, differingCells, expectedTable, NAMESPACES, Reachability, type ConformanceCase, type PodId } from './netpol-cases.js';
import { expectedCounters, observe, waitCounters, type Matrix } from './netpol.js';

const MNP = 'multi-networkpolicies.k8s.cni.cncf.io';
const list = (items: object[]): string => JSON.stringify({ apiVersion: 'v1', kind: 'List', items });
const where = (id: PodId): [string, string] => [NAMESPACES[id.split('/')[0] as 'x'], id.split('/')[1] ?? ''];

/**
 * A load loop: a new connection (TCP) or datagram (UDP) to host:port every `everyMs`, each given
 * `timeoutMs`, until /tmp/stop-<tag> exists; prints {ok, fail, okAt: epoch ms of the first 50 successes}.
 */
export const LOAD_JS = `const net=require('net'),dgram=require('dgram'),fs=require('fs');const a=JSON.parse(process.argv[1]);const stop='/tmp/stop-'+a.tag;
try{fs.unlinkSync(stop)}catch{};let ok=0,fail=0,okAt=[],open=0;const done=v=>{open--;if(v){ok++;if(okAt.length<50)okAt.push(Date.now())}else fail++};
const one=()=>{open++;if(a.protocol==='TCP'){const s=net.connect({host:a.host,port:a.port});let d='';const t=setTimeout(()=>{s.destroy();done(false)},a.timeoutMs);
s.on('data',x=>{d+=x}).on('end',()=>{clearTimeout(t);done(d.trim()===a.expect)}).on('error',()=>{clearTimeout(t);done(false)})}else{const s=dgram.createSocket(a.host.includes(':')?'udp6':'udp4');let f=false;
const end=v=>{if(f)return;f=true;clearTimeout(t);try{s.close()}catch{};done(v)};const t=setTimeout(()=>end(false),a.timeoutMs);s.on('message',m=>end(m.toString().trim()===a.expect)).on('error',()=>end(false));s.send('?',a.port,a.host)}};
const iv=setInterval(()=>{if(fs.existsSync(stop)){clearInterval(iv);const w=setInterval(()=>{if(open===0){clearInterval(w);console.log(JSON.stringify({ok,fail,okAt}))}},50);return}if(open<200)one()},a.everyMs);`;

export interface LoadSpec {
  readonly from: PodId;
  readonly to: PodId;
  readonly protocol: 'TCP' | 'UDP';
  readonly port: number;
  readonly allowed: boolean;
}
export interface LoadResult extends LoadSpec {
  readonly ok: number;
  readonly fail: number;
  readonly okAt: number[];
}

/** Starts the loops; the returned function stops them and gives each loop's counts. */
export function startLoads(node: RealNode, m: Matrix, specs: readonly LoadSpec[]): () => Promise<LoadResult[]> {
  const runs = specs.map((s, i) => {
    const [ns, name] = where(s.from);
    const arg = JSON.stringify({ tag: `load${i}`, host: m.addresses[s.to], port: s.port, protocol: s.protocol, expect: s.to, everyMs: 20, timeoutMs: 1000 });
    return node.exec(ns, name, ['node', '-e', LOAD_JS, arg], { container: 'serve', timeoutMs: 900_000 });
  });
  return async () => {
    await Promise.all(specs.map((s, i) => node.exec(...where(s.from), ['touch', `/tmp/stop-load${i}`], { container: 'serve' })));
    const out = await Promise.all(runs);
    return out.map((r, i) => {
      if (r.code !== 0) throw new Error(`load loop ${i} from ${specs[i]?.from} failed: ${r.stderr.slice(0, 300)}`);
      return { ...(specs[i] as LoadSpec), ...(JSON.parse(r.stdout) as { ok: number; fail: number; okAt: number[] }) };
    });
  };
}

/** x/a isolated: ingress from y/a only. */
export const BASE_CASE: ConformanceCase = {
  upstream: 'x/a accepts y/a only',
  policies: () => [
    {
      ns: 'x',
      name: 'xa-from-ya',
      spec: {
        podSelector: { matchLabels: { pod: 'a' } },
        policyTypes: ['Ingress'],
        ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': NAMESPACES.y } }, podSelector: { matchLabels: { pod: 'a' } } }] }],
      },
    },
  ],
  expect: () => new Reachability().expectAllIngress('x/a', false).expect('y/a', 'x/a', true),
};
/** The extra policy the churn adds and removes: x/a also from y/b. */
const EXTRA = {
  ns: 'x' as const,
  name: 'xa-from-yb',
  spec: {
    podSelector: { matchLabels: { pod: 'a' } },
    policyTypes: ['Ingress' as const],
    ingress: [{ from: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': NAMESPACES.y } }, podSelector: { matchLabels: { pod: 'b' } } }] }],
  },
};

export const LOADS: readonly LoadSpec[] = [
  { from: 'y/a', to: 'x/a', protocol: 'TCP', port: 80, allowed: true },
  { from: 'y/a', to: 'x/a', protocol: 'UDP', port: 81, allowed: true },
  { from: 'x/b', to: 'x/a', protocol: 'TCP', port: 80, allowed: false },
  { from: 'z/c', to: 'x/a', protocol: 'UDP', port: 81, allowed: false },
];

const policiesOf = (m: Matrix, c: ConformanceCase) => casePolicies(c, m.addresses);
const withExtra: ConformanceCase = { ...BASE_CASE, upstream: 'x/a accepts y/a and y/b', policies: (a) => [...BASE_CASE.policies(a), EXTRA] };

/** Applies the base policy and waits for every sidecar to hold it. */
export async function applyBase(node: RealNode, m: Matrix): Promise<{ syncMs: number; behind: string[] }> {
  const ps = policiesOf(m, BASE_CASE);
  await node.kubectl(['apply', '-f', '-'], { input: list(ps) });
  const r = await waitCounters(node, expectedCounters(ps, m.addresses), 20_000);
  return { syncMs: r.ms, behind: r.behind };
}

export async function removeAll(node: RealNode, m: Matrix): Promise<void> {
  await Promise.all(Object.values(NAMESPACES).map((ns) => node.kubectl(['delete', MNP, '--all', '-n', ns, '--wait=true'])));
  await waitCounters(node, expectedCounters([], m.addresses), 20_000);
}

export interface ChurnRun {
  readonly base: { syncMs: number; behind: string[] };
  readonly changes: { what: string; at: number; syncMs: number; behind: string[] }[];
  readonly loads: LoadResult[];
}

/** The extra policy added and removed `times` times under load, each change awaited on every sidecar. */
export async function runChurn(node: RealNode, m: Matrix, log: (m: string) => void, times = 3): Promise<ChurnRun> {
  const base = await applyBase(node, m);
  const stop = startLoads(node, m, LOADS);
  const changes: ChurnRun['changes'] = [];
  let loads: LoadResult[];
  try {
    await delay(1500);
    const extra = policiesOf(m, withExtra);
    const only = policiesOf(m, BASE_CASE);
    for (let i = 0; i < times; i++) {
      const at = Date.now();
      await node.kubectl(['apply', '-f', '-'], { input: list(extra) });
      const up = await waitCounters(node, expectedCounters(extra, m.addresses), 20_000);
      changes.push({ what: `added ${EXTRA.name}`, at, syncMs: up.ms, behind: up.behind });
      await delay(700);
      const at2 = Date.now();
      await node.kubectl(['delete', MNP, '-n', NAMESPACES.x, EXTRA.name, '--wait=true']);
      const down = await waitCounters(node, expectedCounters(only, m.addresses), 20_000);
      changes.push({ what: `removed ${EXTRA.name}`, at: at2, syncMs: down.ms, behind: down.behind });
      await delay(700);
    }
  } finally {
    loads = await stop();
    log(`churn: ${changes.map((c) => `${c.what} synced in ${c.syncMs} ms`).join(', ')}; loads ${loads.map(describeLoad).join('; ')}`);
  }
  return { base, changes, loads };
}

export const describeLoad = (l: LoadResult): string => `${l.from} -> ${l.to} ${l.protocol}/${l.port} (${l.allowed ? 'allowed' : 'forbidden'}): ${l.ok} ok, ${l.fail} failed`;

interface Status {
  status?: { initContainerStatuses?: { name: string; restartCount: number; started?: boolean; ready?: boolean; containerID?: string }[] };
}

export interface RestartRun {
  readonly restarts: number;
  readonly readyAfterMs: number;
  readonly loads: LoadResult[];
  readonly countersAfter: string[];
}

/** Kills x/a's sidecar container (crictl stop --timeout 0) under load; waits until the kubelet has it ready again, then 3 s more. */
export async function runSidecarKill(node: RealNode, m: Matrix, log: (m: string) => void): Promise<RestartRun> {
  const [ns, name] = where('x/a');
  const sidecar = async () => (JSON.parse(await node.kubectl(['get', 'pod', '-n', ns, name, '-o', 'json'])) as Status).status?.initContainerStatuses?.find((c) => c.name === SIDECAR_CONTAINER_NAME);
  const before = await sidecar();
  const id = (before?.containerID ?? '').replace(/^containerd:\/\//, '');
  if (!id) throw new Error(`no running sidecar in ${ns}/${name}`);
  const stop = startLoads(node, m, LOADS);
  let restarts: number;
  let readyAfterMs = -1;
  let loads: LoadResult[];
  try {
    await delay(1500);
    const t0 = Date.now();
    await node.crictl(['stop', '--timeout', '0', id], { timeoutMs: 30_000 });
    for (;;) {
      const s = await sidecar();
      if ((s?.restartCount ?? 0) > (before?.restartCount ?? 0) && s?.ready) {
        restarts = s.restartCount - (before?.restartCount ?? 0);
        readyAfterMs = Date.now() - t0;
        break;
      }
      if (Date.now() - t0 > 180_000) throw new Error(`the sidecar of ${ns}/${name} was not ready again within 180 s: ${JSON.stringify(s)}`);
      await delay(300);
    }
    await delay(3000);
  } finally {
    loads = await stop();
    log(`sidecar kill: ready again after ${readyAfterMs} ms; loads ${loads.map(describeLoad).join('; ')}`);
  }
  const after = await waitCounters(node, expectedCounters(policiesOf(m, BASE_CASE), m.addresses), 20_000);
  return { restarts, readyAfterMs, loads, countersAfter: after.behind };
}

/** Matrix cases (selectors only: the ipBlock cases name IPv4 blocks) on the IPv6 addresses. */
export const IPV6_CASES: readonly ConformanceCase[] = CASES.filter((c) =>
  [
    "should support a 'default-deny-all' policy",
    'should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector',
    'should support denying of egress traffic on the client side (even if the server explicitly allows this traffic)',
    'should allow ingress access on one named port',
  ].includes(c.upstream),
);

export interface Ipv6Result {
  readonly upstream: string;
  readonly cells: string[];
  readonly behind: string[];
}

/** Each IPv6 case: applied, synced, the whole IPv6 table probed (first IPv6 traffic between the pods runs under the first case). */
export async function runIpv6(node: RealNode, m: Matrix, log: (m: string) => void): Promise<Ipv6Result[]> {
  const out: Ipv6Result[] = [];
  for (const c of IPV6_CASES) {
    const ps = casePolicies(c, m.addresses);
    await node.kubectl(['apply', '-f', '-'], { input: list(ps) });
    const sync = await waitCounters(node, expectedCounters(ps, m.addresses), 20_000);
    const cells = differingCells(expectedTable(c), (await observe(m, m.addresses6)).table);
    log(`IPv6 ${cells.length === 0 ? 'pass' : `FAIL ${cells.length} cells`}: ${c.upstream}`);
    out.push({ upstream: c.upstream, cells, behind: sync.behind });
    await removeAll(node, m);
  }
  return out;
}
