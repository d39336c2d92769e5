/**
 * Policy: what a MultiNetworkPolicy costs the sidecar's pod, on the nftables back end, in network
 * namespaces the benchmark makes (docs/decisions/0230-policy-nftables-layout.md).
 *
 * - First packet: time per `sendto` of new UDP flows from one socket (each a new conntrack flow,
 *   so the output hook runs the pod's egress policy chain on every one), the pod's egress isolated
 *   by one rule of N peer addresses written by the sidecar's dataplane (`withPodPolicy`, a full
 *   sync), against the same namespace pair with no policy and with the same peers as one rule each
 *   (the naive layout, a table of its own), all cells measured round-robin.
 * - Change: a policy change at N peers, one peer replaced (an element deleted and one added) against a rule inserted
 *   in front (the chain rewritten and the peer set written under its new position's name), as the
 *   pure render and diff and as a partial sync through nft.
 * - Memory: one full sync of a policy in a process of its own inside a memory cgroup (v1): the
 *   cgroup's peak, the nft child's peak, and the kernel memory the rules keep after the process
 *   exited, beside the same process writing no policy.
 *
 * POLICY_ONLY=first-packet,change,memory (with --no-write) runs some of the parts;
 * POLICY_MEMORY_AS=shipped runs the memory child as the image runs the sidecar (a bundle, its node
 * flags and malloc settings) instead of the sources through tsx.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { createDataplane, withPodPolicy, type SyncResult } from '../src/dataplane/index.js';
import { policyChange, renderPolicy } from '../src/dataplane/nftables/policy.js';
import type { PodPolicy } from '../src/policy/model.js';
import { MALLOC_ENV, NODE_MEMORY_FLAGS } from '../src/memory-settings.js';
import { fmt, summarize } from '../test/harness/stats.js';
import { createNetns } from './lib/netns.js';
import { descendants, requireTool, run, smaps, sleep, type Cleanup } from './lib/proc.js';
import { CLIENT_IP, FLOW_PORTS, IFACE, PREFIX_LEN, SERVER_IP, baseState, budgetPolicy, egressPolicy, fillerAddress, naiveEgressTable, peerAddresses } from './lib/policy-load.js';
import type { MemoryPolicy } from './lib/policy-memory-child.js';
import { CLIENT_ADDRESS, ENDPOINT_PREFIX_LEN } from './lib/services.js';
import type { Table, TargetCheck } from './lib/report.js';
import { defineBenchmark } from './lib/define.js';
import { isMain, runStandalone } from './lib/runner.js';

interface Sizes {
  readonly peers: readonly number[];
  /** The naive layout only up to this many peers (its rules load slowly, and each flow walks them). */
  readonly naiveMax: number;
  readonly flows: number;
  readonly runs: number;
  readonly changes: number;
  /** `capped`: the load passes the sidecar's cap, so the render's warnings (the rules left out) are expected. */
  readonly memory: readonly { readonly name: string; readonly policy: MemoryPolicy; readonly capped?: boolean; readonly services?: number }[];
}

const NONE = { name: 'no policy', policy: 'none' } as const;
const SIZES: { quick: Sizes; full: Sizes } = {
  quick: { peers: [10, 1000], naiveMax: 1000, flows: 5000, runs: 3, changes: 3, memory: [NONE, { name: '1 egress rule, 1,000 peers', policy: { peers: 1000 } }] },
  full: {
    peers: [10, 100, 1000, 10000],
    naiveMax: 10000,
    flows: 30000,
    runs: 5,
    changes: 7,
    memory: [
      NONE,
      { name: '1 egress rule, 10,000 peers', policy: { peers: 10000 } },
      { name: '64 + 64 rules at the budgets, 10,000 peers over them', policy: { rules: 64, perRule: 157, addresses: 10000 } },
      { name: '64 + 64 rules at the budgets, the same 1,000 peers in each', policy: { rules: 64, perRule: 1000, addresses: 1000 } },
      // Every rule's peers its own: past the sidecar's cap on policy set elements, the rules over it allow nothing (policy-sets.ts).
      { name: '64 + 64 rules at the budgets, 1,000 peers of their own in each (past the cap)', policy: { rules: 64, perRule: 1000, addresses: 64000 }, capped: true },
      // The Service budget's load (2,000 targets of 10 endpoints: test/sidecar/runtime-budget-memory.test.ts), alone and with the policy past the cap.
      { name: 'Services at their budget, no policy', policy: 'none', services: 2000 },
      { name: 'Services at their budget and the policy past the cap', policy: { rules: 64, perRule: 1000, addresses: 64000 }, capped: true, services: 2000 },
    ],
  },
};
const SENDER = fileURLToPath(new URL('./lib/udp-flows.py', import.meta.url));
const MEMORY_CHILD = fileURLToPath(new URL('./lib/policy-memory-child.ts', import.meta.url));
const CGROUP_ROOT = '/sys/fs/cgroup/memory';
/** An address on the client's segment that no policy names: a datagram to it must be refused. */
const NOT_A_PEER = '10.77.0.3';
const MiB = (b: number): string => (b / 1024 / 1024).toFixed(1);
const range = (xs: readonly number[], digits = 1): string => {
  const s = summarize(xs);
  return `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;
};

/** A client and a server namespace on a veth pair; the server drops the flows at prerouting (it only has to receive them). */
async function namespacePair(tag: string, cleanup: Cleanup): Promise<string> {
  const client = await createNetns(`${tag}c`, cleanup);
  const server = await createNetns(`${tag}s`, cleanup);
  await run('ip', ['-n', client, 'link', 'add', IFACE, 'type', 'veth', 'peer', 'name', IFACE, 'netns', server]);
  await run('ip', ['-n', client, 'addr', 'add', `${CLIENT_IP}/${PREFIX_LEN}`, 'dev', IFACE]);
  await run('ip', ['-n', server, 'addr', 'add', `${SERVER_IP}/${PREFIX_LEN}`, 'dev', IFACE]);
  for (const ns of [client, server]) await run('ip', ['-n', ns, 'link', 'set', IFACE, 'up']);
  await run('nft', ['-f', '-'], {
    netns: server,
    input: `table inet sink {\n\tchain pre {\n\t\ttype filter hook prerouting priority -300; policy accept;\n\t\tudp dport ${FLOW_PORTS.from}-${FLOW_PORTS.to} drop\n\t}\n}\n`,
  });
  return client;
}

interface Flows {
  readonly n: number;
  readonly errors: number;
  readonly refused: boolean | null;
  readonly median: number;
  readonly p90: number;
  readonly p99: number;
  readonly mean: number;
}

async function sendFlows(client: string, count: number, checkRefused: boolean): Promise<Flows> {
  await run('conntrack', ['-F'], { netns: client, check: false });
  const r = await run('python3', [SENDER, SERVER_IP, String(FLOW_PORTS.from), String(count), ...(checkRefused ? [NOT_A_PEER] : [])], { netns: client });
  return JSON.parse(r.stdout) as Flows;
}

// ---------------------------------------------------------------------------------------------
// First packet

interface FlowCell {
  readonly layout: 'no policy' | 'peer set' | 'one rule per peer';
  readonly peers: number;
  readonly client: string;
  readonly writeMs: number;
  readonly runs: Flows[];
}

async function firstPacket(ctx: { log: (m: string) => void }, size: Sizes, cleanup: Cleanup): Promise<{ tables: Table[]; targets: TargetCheck[] }> {
  const cells: FlowCell[] = [];
  const plan: { layout: FlowCell['layout']; peers: number }[] = [
    { layout: 'no policy', peers: 0 },
    ...size.peers.map((peers) => ({ layout: 'peer set' as const, peers })),
    ...size.peers.filter((p) => p <= size.naiveMax).map((peers) => ({ layout: 'one rule per peer' as const, peers })),
  ];
  for (const { layout, peers } of plan) {
    const client = await namespacePair(`pol${layout[0] ?? ''}${peers}`, cleanup);
    const dp = createDataplane({ netns: client, backendKind: 'nftables' });
    const sync = await dp.sync(withPodPolicy(baseState(), layout === 'peer set' ? egressPolicy(peerAddresses(peers)) : undefined), { full: true });
    dp.close();
    let writeMs = sync.durationMs;
    if (layout === 'one rule per peer') writeMs = (await run('nft', ['-f', '-'], { netns: client, input: naiveEgressTable('mpb_naive', peerAddresses(peers)) })).ms;
    // Each layout must enforce: a datagram to an address it does not name is refused, and none to the server is.
    const check = await sendFlows(client, 100, true);
    if (check.errors > 0 || check.refused !== (layout !== 'no policy'))
      throw new Error(`${layout}, ${peers} peers: ${JSON.stringify(check)} (expected no errors to the peer, and the non-peer ${layout === 'no policy' ? 'sent' : 'refused'})`);
    ctx.log(`${layout}, ${peers} peers: written in ${fmt(writeMs)} ms`);
    cells.push({ layout, peers, client, writeMs, runs: [] });
  }
  for (const c of cells) await sendFlows(c.client, Math.min(size.flows, 5000), false); // warm-up: ARP, caches
  for (let i = 0; i < size.runs; i++) {
    // Every cell once per round, the starting cell rotating: the same machine moments for all.
    for (let k = 0; k < cells.length; k++) {
      const c = cells[(k + i) % cells.length] as FlowCell;
      const r = await sendFlows(c.client, size.flows, false);
      if (r.errors > 0) throw new Error(`${c.layout}, ${c.peers} peers: ${r.errors} of ${r.n} datagrams refused`);
      c.runs.push(r);
    }
    ctx.log(`round ${i + 1}: ${cells.map((c) => `${c.layout === 'no policy' ? 'none' : `${c.layout === 'peer set' ? 'set' : 'rules'} ${c.peers}`} ${fmt(c.runs[i]?.median ?? NaN)}`).join(', ')} µs`);
  }
  const med = (c: FlowCell): number => summarize(c.runs.map((r) => r.median)).median;
  const none = cells.find((c) => c.layout === 'no policy');
  const base = none === undefined ? NaN : med(none);
  const rows = cells.map((c) => [
    c.layout,
    c.layout === 'no policy' ? '' : c.peers.toLocaleString('en'),
    range(
      c.runs.map((r) => r.median),
      2,
    ),
    c.layout === 'no policy' ? '' : (med(c) - base).toFixed(2),
  ]);

  const set = (n: number | undefined): FlowCell | undefined => cells.find((c) => c.layout === 'peer set' && c.peers === n);
  const naive = (n: number | undefined): FlowCell | undefined => cells.find((c) => c.layout === 'one rule per peer' && c.peers === n);
  const [small, large] = [size.peers[0], size.peers[size.peers.length - 1]];
  const targets: TargetCheck[] = [];
  const s0 = set(small);
  const s1 = set(large);
  const n1 = naive(large);
  targets.push({
    target: `peer set: per new flow at ${large?.toLocaleString('en')} peers ≤ 1.1 × at ${small}`,
    measured:
      s0 && s1
        ? `${(med(s1) / med(s0)).toFixed(3)} (${fmt(med(s1))} / ${fmt(med(s0))} µs; no policy ${fmt(base)})${n1 ? `; one rule per peer ${(med(n1) / med(naive(small) ?? n1)).toFixed(1)}× (${fmt(med(n1))} µs)` : ''}`
        : 'not measured',
    met: s0 && s1 ? med(s1) / med(s0) <= 1.1 : undefined,
  });
  return {
    tables: [
      {
        caption: `Per sendto of ${size.flows.toLocaleString('en')} new UDP flows from one socket, egress isolated by one rule; ${size.runs} rounds, round-robin; median of rounds (min–max):`,
        columns: ['layout', 'peer addresses', 'per new flow, µs', 'added to no policy, µs'],
        rows,
      },
    ],
    targets,
  };
}

// ---------------------------------------------------------------------------------------------
// Change: a peer set refill against a chain rewrite

/** The rule of N peers with a one-peer rule inserted in front of it (positions shift: a chain rewrite). */
function withRuleInFront(p: PodPolicy): PodPolicy {
  const [net] = p.networks;
  if (net === undefined) return p;
  const front = { policy: 'bench/front', index: 0, peers: { addresses: [SERVER_IP], blocks: [] }, ports: [{ protocol: 'TCP' as const, from: 80, to: 80 }] };
  return { networks: [{ ...net, egress: { ...net.egress, rules: [front, ...net.egress.rules] } }] };
}

async function changes(ctx: { log: (m: string) => void }, size: Sizes, cleanup: Cleanup): Promise<{ tables: Table[]; targets: TargetCheck[] }> {
  const rows: string[][] = [];
  const targets: TargetCheck[] = [];
  for (const n of size.peers) {
    const client = await namespacePair(`polchg${n}`, cleanup);
    const dp = createDataplane({ netns: client, backendKind: 'nftables' });
    let current = egressPolicy(peerAddresses(n));
    await dp.sync(withPodPolicy(baseState(), current), { full: true });
    const refill: SyncResult[] = [];
    const rewrite: SyncResult[] = [];
    const pureRefill: number[] = [];
    const pureRewrite: number[] = [];
    for (let i = 0; i < size.changes; i++) {
      // One peer replaced (a pod left the selector, another joined): one element deleted, one added.
      const replaced = egressPolicy([fillerAddress(n + i), ...peerAddresses(n).slice(1)]);
      pureRefill.push(...timePure(current, replaced));
      const a = await dp.sync(withPodPolicy(baseState(), replaced), { full: false });
      if (a.families.some((f) => f.changedChains.length > 0 || f.text.includes('flush set')) || !a.families.some((f) => f.text.includes('add element')))
        throw new Error(`${n} peers: one peer replaced rewrote chains, refilled a set or added no element: ${JSON.stringify(a.families.map((f) => f.changedChains))}`);
      refill.push(a);
      current = replaced;
      // A rule in front, then taken away again: the chain rewritten both ways, the peer set renamed.
      for (const next of [withRuleInFront(current), current]) {
        const prev = next === current ? withRuleInFront(current) : current;
        pureRewrite.push(...timePure(prev, next));
        const b = await dp.sync(withPodPolicy(baseState(), next), { full: false });
        if (!b.families.some((f) => f.changedChains.length > 0)) throw new Error(`${n} peers: a rule inserted rewrote no chain`);
        rewrite.push(b);
      }
    }
    dp.close();
    const ms = (rs: readonly SyncResult[]): string => range(rs.map((r) => r.durationMs));
    const nft = (rs: readonly SyncResult[]): string => range(rs.map((r) => r.phases.restoreMs));
    const bytes = (r: SyncResult | undefined): string => `${(r?.families.reduce((k, f) => k + f.text.length, 0) ?? 0).toLocaleString('en')} B`;
    rows.push([n.toLocaleString('en'), 'one peer replaced (element delete + add)', range(pureRefill, 2), ms(refill), nft(refill), bytes(refill[0])]);
    rows.push([n.toLocaleString('en'), 'a rule inserted or removed in front (chain rewrite)', range(pureRewrite, 2), ms(rewrite), nft(rewrite), bytes(rewrite[0])]);
    ctx.log(`${n} peers: refill ${ms(refill)} ms, rewrite ${ms(rewrite)} ms`);
    if (n === size.peers[size.peers.length - 1]) {
      const p50 = summarize(refill.map((r) => r.durationMs)).median;
      targets.push({
        target: `one peer replaced at ${n.toLocaleString('en')} peers: partial sync ≤ 50 ms (half of the 100 ms join budget)`,
        measured: `${fmt(p50)} ms (median of ${refill.length}; nft -f ${fmt(summarize(refill.map((r) => r.phases.restoreMs)).median)} ms)`,
        met: p50 <= 50,
      });
    }
  }
  return {
    tables: [
      {
        caption: `A policy change at N peers (one egress rule, as above), ${size.changes} of each kind, median (min–max): pure = the next render and the diff to nft text (src/dataplane/nftables/policy.ts) in this process; partial sync = the dataplane's sync into the namespace (of which nft -f: the write itself):`,
        columns: ['peers', 'change', 'pure render + diff, ms', 'partial sync, ms', 'of which nft -f, ms', 'transaction text'],
        rows,
      },
    ],
    targets,
  };
}

/** The pure cost of the change prev → next: the next render and the diff (the previous render is the sidecar's, kept), ms per repeat. */
function timePure(prev: PodPolicy, next: PodPolicy, repeats = 5): number[] {
  const a = renderPolicy(prev);
  const out: number[] = [];
  for (let i = 0; i < repeats; i++) {
    const t0 = performance.now();
    const b = renderPolicy(next);
    policyChange('inet multus_proxy', a, b, { changed: [], deleted: [], removes: [] });
    out.push(performance.now() - t0);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Memory

interface MemoryCell {
  readonly name: string;
  readonly elements: number;
  readonly syncMs: number;
  readonly programPrivate: number;
  readonly childPeak: number;
  readonly cgroupPeak: number;
  readonly kmemPeak: number;
  readonly kmemLeft: number;
}

const elementsOf = (p: MemoryPolicy): number => {
  if (p === 'none') return 0;
  const part = renderPolicy('peers' in p ? egressPolicy(peerAddresses(p.peers)) : budgetPolicy(p));
  return [...(part?.sets.values() ?? [])].reduce((n, s) => n + s.elements.length, 0);
};

/** How the memory child runs: its node arguments and extra environment. */
interface ChildCommand {
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}

/**
 * The memory child as the benchmark runs it by default (the sources through tsx), or with
 * POLICY_MEMORY_AS=shipped as the sidecar image runs its program: one esbuild bundle, with the
 * sidecar's node flags and malloc settings (src/memory-settings.ts), so its figures compare with
 * the sidecar's own at its Service budget (test/sidecar/runtime-budget-memory.test.ts).
 */
async function childCommand(cleanup: Cleanup): Promise<ChildCommand> {
  if (process.env['POLICY_MEMORY_AS'] !== 'shipped') return { args: ['--import', 'tsx', MEMORY_CHILD], env: {} };
  const dir = mkdtempSync(join(tmpdir(), 'mpb-policy-child-'));
  cleanup.add(`bundle ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  const bundle = join(dir, 'policy-memory-child.mjs');
  // As scripts/build.mjs bundles the programs: ESM, with `require` for the CommonJS dependencies.
  const banner = "import { createRequire as __mpx_createRequire } from 'node:module';\nconst require = __mpx_createRequire(import.meta.url);";
  await build({
    entryPoints: [MEMORY_CHILD],
    outfile: bundle,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    minify: true,
    banner: { js: banner },
    external: ['pino-pretty'],
    logLevel: 'error',
  });
  return { args: [...NODE_MEMORY_FLAGS, bundle], env: MALLOC_ENV };
}

async function memoryCell(
  name: string,
  policy: MemoryPolicy,
  i: number,
  cleanup: Cleanup,
  capped = false,
  services: number | undefined = undefined,
  command: ChildCommand = { args: ['--import', 'tsx', MEMORY_CHILD], env: {} },
): Promise<MemoryCell> {
  const netns = await createNetns(`polmem${i}`, cleanup);
  await run('ip', ['-n', netns, 'link', 'add', IFACE, 'type', 'veth', 'peer', 'name', `${IFACE}p`]);
  await run('ip', ['-n', netns, 'addr', 'add', `${CLIENT_IP}/${PREFIX_LEN}`, 'dev', IFACE]);
  if (services !== undefined) {
    // The Services' routes go out of net1 from the client's address (bench/lib/services.ts).
    await run('ip', ['-n', netns, 'addr', 'add', `${CLIENT_ADDRESS}/${ENDPOINT_PREFIX_LEN}`, 'dev', IFACE]);
    for (const dev of [IFACE, `${IFACE}p`]) await run('ip', ['-n', netns, 'link', 'set', dev, 'up']);
  }
  const cg = `${CGROUP_ROOT}/mpb-policy-${process.pid}-${i}`;
  mkdirSync(cg);
  cleanup.add(`cgroup ${cg}`, () => rmdirSync(cg));
  const read = (f: string): number => Number(readFileSync(`${cg}/${f}`, 'utf8'));
  // The child joins the cgroup before node starts, so everything it and its nft children allocate is charged there.
  const child = spawn('sh', ['-c', `echo $$ > ${cg}/cgroup.procs && exec "$0" "$@"`, process.execPath, ...command.args], {
    env: { ...process.env, ...command.env, POLICY_MEMORY_CELL: JSON.stringify({ netns, policy, ...(services !== undefined ? { services } : {}) }) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  let childPeak = 0;
  const pid = child.pid ?? 0;
  const sample = setInterval(() => {
    for (const p of descendants(pid).slice(1))
      try {
        childPeak = Math.max(childPeak, smaps(p).anonymous);
      } catch {
        // exited between the listing and the read
      }
  }, 5);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearInterval(sample);
  if (code !== 0) throw new Error(`${name}: the memory child exited ${code}: ${err.slice(-2000)}`);
  const r = JSON.parse(out.trim().split('\n').pop() ?? '{}') as { syncMs: number; privateBytes: number; warnings: number };
  if (r.warnings > 0 !== capped) throw new Error(`${name}: the render warned ${r.warnings} times, expected ${capped ? 'some (rules past the cap)' : 'none'}; the policy is not the one meant`);
  await sleep(200);
  return {
    name,
    elements: elementsOf(policy),
    syncMs: r.syncMs,
    programPrivate: r.privateBytes,
    childPeak,
    cgroupPeak: read('memory.max_usage_in_bytes'),
    kmemPeak: read('memory.kmem.max_usage_in_bytes'),
    kmemLeft: read('memory.kmem.usage_in_bytes'),
  };
}

/** The bound a sidecar has at its Service budget, and the same sidecar with the policy past the cap beside it (the cells with Services). */
function serviceBound(cells: readonly MemoryCell[], size: Sizes): TargetCheck[] {
  const named = (f: (m: Sizes['memory'][number]) => boolean): MemoryCell | undefined => cells.find((c) => size.memory.some((m) => m.name === c.name && f(m)));
  const alone = named((m) => m.services !== undefined && m.policy === 'none');
  const both = named((m) => m.services !== undefined && m.policy !== 'none');
  if (alone === undefined || both === undefined) return [];
  return [
    {
      target: 'Services at their budget and the policy past its cap: cgroup peak < 128 MiB, the bound Services alone are held to',
      measured: `${MiB(both.cgroupPeak)} MiB, ${(both.cgroupPeak / alone.cgroupPeak).toFixed(2)}× the Services alone (${MiB(alone.cgroupPeak)} MiB)`,
      met: both.cgroupPeak < 128 * 1024 * 1024,
    },
  ];
}

async function memory(ctx: { log: (m: string) => void }, size: Sizes, cleanup: Cleanup): Promise<{ tables: Table[]; targets: TargetCheck[] }> {
  const target = 'the largest policy: cgroup peak < 128 MiB (the sidecar container limit)';
  // The other parts still count on a machine without it; this one says why it has no figure.
  if (!existsSync(`${CGROUP_ROOT}/memory.kmem.usage_in_bytes`))
    return { tables: [], targets: [{ target, measured: `not measured: no cgroup v1 memory controller with kernel accounting at ${CGROUP_ROOT}`, met: undefined }] };
  const cells: MemoryCell[] = [];
  const command = await childCommand(cleanup);
  for (const [i, m] of size.memory.entries()) {
    const c = await memoryCell(m.name, m.policy, i, cleanup, m.capped, m.services, command);
    ctx.log(`${m.name}: ${c.elements} elements, cgroup peak ${MiB(c.cgroupPeak)} MiB, nft peak ${MiB(c.childPeak)} MiB, kernel left ${MiB(c.kmemLeft)} MiB, sync ${fmt(c.syncMs)} ms`);
    cells.push(c);
  }
  const none = cells[0];
  const over = (c: MemoryCell, f: (x: MemoryCell) => number): string => (c === none || none === undefined ? MiB(f(c)) : `${MiB(f(c))} (${f(c) >= f(none) ? '+' : ''}${MiB(f(c) - f(none))})`);
  const rows = cells.map((c) => [
    c.name,
    c.elements.toLocaleString('en'),
    over(c, (x) => x.cgroupPeak),
    over(c, (x) => x.childPeak),
    over(c, (x) => x.kmemLeft),
    over(c, (x) => x.programPrivate),
    `${fmt(c.syncMs)} ms`,
  ]);
  // The policy with the most set elements (not the highest peak: at small sizes the process's own noise is larger than the policy).
  const worst = cells.reduce((a, b) => (b.elements > a.elements ? b : a), cells[0] as MemoryCell);
  return {
    tables: [
      {
        caption: `One full sync of the pod's rules (one secondary interface; no Services unless named) by the sidecar's dataplane in a process of its own (${command.args[0] === '--import' ? 'node + tsx' : `a bundle, node ${NODE_MEMORY_FLAGS.join(' ')} and the sidecar's malloc settings`}) in a cgroup v1 memory group; MiB, in brackets the difference to no policy. nft peak: the largest nft child's private memory (sampled every 5 ms); kernel, left: the group's kernel memory after the process exited (the rules it loaded):`,
        columns: ['policy', 'set elements', 'cgroup peak', 'nft child peak', 'kernel, left', 'program private after', 'full sync'],
        rows,
      },
    ],
    targets: [
      {
        target,
        measured: `${MiB(worst.cgroupPeak)} MiB (${worst.name}; no policy ${MiB(none?.cgroupPeak ?? NaN)})`,
        met: worst.cgroupPeak < 128 * 1024 * 1024,
      },
      ...serviceBound(cells, size),
    ],
  };
}

// ---------------------------------------------------------------------------------------------

const PARTS = ['first-packet', 'change', 'memory'] as const;

export const benchmark = defineBenchmark(
  'policy',
  'MultiNetworkPolicy on nftables: first-packet cost against 10 … 10,000 peer addresses (set vs one rule per peer), change time, memory',
  SIZES,
  async (ctx, size, cleanup) => {
    await requireTool('nft', ['--version'], 'install nftables (apt-get install nftables)');
    await requireTool('conntrack', ['--version'], 'install conntrack (apt-get install conntrack)');
    await requireTool('python3', ['--version'], 'install python3 (the flow sender, bench/lib/udp-flows.py)');
    const only = (process.env['POLICY_ONLY'] ?? PARTS.join(',')).split(',');
    const unknown = only.filter((p) => !(PARTS as readonly string[]).includes(p));
    if (unknown.length > 0) throw new Error(`POLICY_ONLY=${unknown.join(',')}: use some of ${PARTS.join(',')}`);
    const tables: Table[] = [];
    const targets: TargetCheck[] = [];
    for (const [part, fn] of [
      ['first-packet', firstPacket],
      ['change', changes],
      ['memory', memory],
    ] as const) {
      if (!only.includes(part)) continue;
      const r = await fn(ctx, size, cleanup);
      tables.push(...r.tables);
      targets.push(...r.targets);
    }
    return {
      tables,
      targets,
      notes: [
        `Method: network namespaces made by the benchmark, a client (the pod, ${IFACE} ${CLIENT_IP}/${PREFIX_LEN}) and a server on a veth pair; the pod's rules come from the sidecar's own dataplane (createDataplane with the nftables back end, withPodPolicy), one pair per cell, all written first and then measured round-robin. ` +
          `Peer addresses are single hosts no two of which are adjacent (one set element per address, also in an interval set), the server's among them; the naive layout lists the server last (its worst case). The sender (bench/lib/udp-flows.py) first checks that the policy refuses a datagram to an address it does not name (EPERM), then times each sendto; conntrack is flushed before every run. ` +
          'The time per sendto includes the syscall, the output hook and the veth transmit; the server drops the flows at prerouting. The machine is 2 shared cores: compare cells of one run.',
      ],
    };
  },
);

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
