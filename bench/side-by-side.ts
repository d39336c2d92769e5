/**
 * B2, B3, B5, B8 and B10 for two (or more) source trees in one run, alternated (A B, B A, A B, …) so they see the
 * same machine moments; for a loaded, shared machine, where runs far apart in time say nothing.
 * Each tree is measured by its own code:
 *   b2  the tree's B2 worker (bench/lib/rule-sync-worker.ts) in a fresh namespace, the tree's
 *       SYNC_SUBJECTS of bench/b2-rule-sync.ts: full sync of 1,000 Services × 10 endpoints, then
 *       20 one-endpoint changes, nftables and iptables
 *   b3  the tree's bench/b3-programming-latency.ts at its quick sizes (iptables back end, the one
 *       whose chains B3 reads), in a child process
 *   b5  the tree's sidecar bundle at 1,000 Services (bench/b5-ab.ts), nftables, one apiserver for both
 *   b8  the tree's bench/b8-node-agent.ts at its quick sizes, in a child process
 *   b10 the tree's bench/b10-first-packet.ts at its quick sizes (1,000, 10,000 and 30,000 Services,
 *       nftables and iptables), in a child process: new connections/s through the cluster IP and
 *       its ratio to the direct rate of the same pairs
 *   policy-change  the tree's dataplane replacing one peer of an egress rule of 10,000 (bench/lib/policy-change-child.ts)
 *   policy-memory  the tree's bench/policy.ts memory part at its full sizes (POLICY_ONLY=memory), in a
 *       child process: per policy load, the cgroup peak, the nft child's peak and the kernel
 *       memory the rules keep
 * Reports per figure each tree's median and min–max over the repeats, its ratio to the first tree,
 * and the noise (each tree's (max - min) / median over its own repeats). A figure is outside its
 * noise when a tree's min–max range does not overlap the first tree's. More than two trees (say,
 * commits between the two) take turns the same way. Not a numbered benchmark: figures go in
 * docs/benchmarks.md by hand.
 *
 *   node --import tsx bench/side-by-side.ts <tree A> <tree B> [tree …] [repeats=3] [b2 b3 b5 b8 b10 policy-change policy-memory]
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { SYNC_SUBJECTS } from './b2-rule-sync.js';
import { loadB5, sidecarPrivateMiB } from './b5-ab.js';
import { REPORT, type OursReport } from './lib/rule-sync-inside.js';
import { deleteNetns } from './lib/netns.js';
import { run, withCleanup, type Cleanup } from './lib/proc.js';
import { startSidecarEnv, treeSidecarCommand, type SidecarCommand } from './lib/sidecar-env.js';
import type { BenchResult } from './lib/report.js';
import { b10Figures, num, row, type Figures } from './lib/side-by-side-figures.js';
import { fmt, summarize } from '../test/harness/stats.js';

/** A benchmark's setup (once for both trees); it returns the measurement of one tree. */
type Bench = (cleanup: Cleanup, trees: readonly string[]) => Promise<(tree: string) => Promise<Figures>>;

const B2_SERVICES = 1000;
const B2_CHANGES = 20;
const B5_SERVICES = 1000;
const log = (m: string): void => void process.stderr.write(`[side-by-side ${new Date().toISOString().slice(11, 19)}] ${m}\n`);

/** Runs `node --import tsx <args>` (in `netns` when given); the parsed `RESULT {json}` line of its stdout. */
async function child<R>(args: readonly string[], netns?: string, env?: NodeJS.ProcessEnv): Promise<R> {
  const r = netns !== undefined ? await run(process.execPath, ['--import', 'tsx', ...args], { netns, check: false }) : await streamed(args, env);
  const line = r.stdout.split('\n').find((l) => l.startsWith(REPORT));
  if (r.code !== 0 || line === undefined) throw new Error(`side-by-side: ${args.join(' ')} failed (exit ${r.code}): ${r.stderr.slice(-2000)}`);
  return JSON.parse(line.slice(REPORT.length)) as R;
}

/** A child whose progress (stderr) shows as it runs. */
function streamed(args: readonly string[], env?: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, ['--import', 'tsx', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    const out: Buffer[] = [];
    let tail = '';
    c.stdout.on('data', (b: Buffer) => out.push(b));
    c.stderr.on('data', (b: Buffer) => {
      process.stderr.write(b);
      tail = (tail + b.toString()).slice(-4000);
    });
    c.on('error', reject);
    c.on('close', (code) => resolve({ code, stdout: Buffer.concat(out).toString(), stderr: tail }));
  });
}

const script = (tree: string, name: string): string => path.join(tree, 'bench', name);
const WORKER = (tree: string): string => script(tree, 'lib/rule-sync-worker.ts');
const CHILD = path.join(import.meta.dirname, 'lib', 'side-by-side-child.ts');

const b2: Bench = async () => async (tree) => {
  const got: Figures = {};
  for (const key of ['nftables', 'iptables'] as const) {
    await withCleanup(log, async (cleanup) => {
      const ns = await SYNC_SUBJECTS[key].freshNetns(cleanup);
      const task = { module: pathToFileURL(script(tree, 'b2-rule-sync.ts')).href, key, mode: 'ours', services: B2_SERVICES, changes: B2_CHANGES };
      const r = await child<OursReport>([WORKER(tree), JSON.stringify(task)], ns);
      await deleteNetns(ns);
      got[`${key}: full sync, ms`] = r.ours;
      if (r.partial === undefined) throw new Error('side-by-side: the B2 worker timed no change');
      got[`${key}: one-endpoint change p50, ms`] = r.partial.ours.median;
    });
  }
  return got;
};

const b3: Bench = async () => async (tree) => {
  // B3 reads the Service's iptables chain; the sidecar's default (auto) is nftables where it loads.
  const r = await child<BenchResult>([CHILD, script(tree, 'b3-programming-latency.ts')], undefined, { DATAPLANE_BACKEND: 'iptables' });
  const ours = row(r, '', 'ours: write');
  return { 'iptables: write → rules p50, ms': num(ours[1]), 'iptables: write → rules p99, ms': num(ours[3]), 'iptables: sidecar sync p50, ms': num(row(r, '', 'of ours: the sidecar sync')[1]) };
};

const b5: Bench = async (cleanup, trees) => {
  const cmds = new Map<string, SidecarCommand>();
  for (const t of trees) cmds.set(t, await treeSidecarCommand(cleanup, t, 'nftables'));
  const env = await startSidecarEnv(cleanup);
  await loadB5(env, B5_SERVICES);
  return async (tree) => {
    const cmd = cmds.get(tree);
    if (cmd === undefined) throw new Error(`side-by-side: no sidecar command for ${tree}`);
    return { 'nftables: private memory at 1,000 Services, MiB': summarize((await sidecarPrivateMiB(env, cleanup, cmd, 'nftables')).samples).median };
  };
};

const b8: Bench = async () => async (tree) => {
  const r = await child<BenchResult>([CHILD, script(tree, 'b8-node-agent.ts')]);
  const got: Figures = {};
  for (const k of ['nftables', 'iptables']) {
    got[`${k}: full node sync, ms`] = num(row(r, 'Node rules, full sync', `${k}:`)[1]);
    // The partial table's rows: back end, the change, then ours.
    got[`${k}: one-endpoint change p50, ms`] = num(row(r, 'One endpoint of one Service', k)[2]);
    const lat = row(r, `${k}: `, 'write → rule on the node');
    got[`${k}: write → rule p50, ms`] = num(lat[1]);
    got[`${k}: write → rule p99, ms`] = num(lat[3]);
  }
  return got;
};

const b10: Bench = async () => async (tree) => b10Figures(await child<BenchResult>([CHILD, script(tree, 'b10-first-packet.ts')], undefined, { B10_ONLY: '' }));

const POLICY_PEERS = 10000;
const POLICY_CHANGES = 7;
const POLICY_CHILD = path.join(import.meta.dirname, 'lib', 'policy-change-child.ts');

const policyChange: Bench = async () => async (tree) => {
  const r = await child<{ syncMs: number; nftMs: number; textBytes: number }>([POLICY_CHILD, tree, String(POLICY_PEERS), String(POLICY_CHANGES)]);
  return { 'nftables: one peer replaced at 10,000 peers, partial sync p50, ms': r.syncMs, 'of which nft -f, ms': r.nftMs, 'transaction text, bytes': r.textBytes };
};

const policyMemory: Bench = async () => async (tree) => {
  const r = await child<BenchResult>([CHILD, script(tree, 'policy.ts')], undefined, { POLICY_ONLY: 'memory', SIDE_BY_SIDE_FULL: '1' });
  const t = r.tables.find((x) => x.caption?.startsWith('One full sync'));
  const got: Figures = {};
  for (const cells of t?.rows ?? []) {
    got[`${cells[0]}: cgroup peak, MiB`] = num(cells[2]);
    got[`${cells[0]}: nft child peak, MiB`] = num(cells[3]);
    got[`${cells[0]}: kernel, MiB`] = num(cells[4]);
  }
  return got;
};

const BENCHES: Record<string, Bench> = { b2, b3, b5, b8, b10, 'policy-change': policyChange, 'policy-memory': policyMemory };

// Trees are the arguments that name folders (they hold a /), the number is the repeats, the rest benchmark names.
const args = process.argv.slice(2);
const trees = args.filter((x) => x.includes('/')).map((x) => path.resolve(x));
if (trees.length < 2)
  throw new Error('side-by-side: give two or more source trees: node --import tsx bench/side-by-side.ts <tree A> <tree B> [tree …] [repeats] [b2 b3 b5 b8 b10 policy-change policy-memory]');
const repeats = Number(args.find((x) => /^\d+$/.test(x)) ?? 3);
const named = args.filter((x) => !x.includes('/') && !/^\d+$/.test(x));
const names = named.length > 0 ? named : Object.keys(BENCHES);
const first = trees[0] as string;
const lines: string[] = [`| figure | tree | median (min–max) | noise | / ${first} | outside its range |`, '|---|---|---|---|---|---|'];
for (const name of names) {
  const bench = BENCHES[name];
  if (bench === undefined) throw new Error(`side-by-side: unknown benchmark ${name}; use ${Object.keys(BENCHES).join(', ')}`);
  const got = new Map<string, Map<string, number[]>>(trees.map((t) => [t, new Map()]));
  await withCleanup(log, async (cleanup) => {
    const measure = await bench(cleanup, trees);
    for (let r = 0; r < repeats; r++) {
      // Each repeat starts one tree later (two trees: A B, B A, A B, …), so no tree always goes first.
      for (const tree of trees.map((_, i) => trees[(i + r) % trees.length] as string)) {
        log(`${name} repeat ${r + 1}: ${tree}`);
        const figures = await measure(tree);
        log(`${name} repeat ${r + 1}: ${tree}: ${JSON.stringify(figures)}`);
        for (const [k, v] of Object.entries(figures)) got.get(tree)?.set(k, [...(got.get(tree)?.get(k) ?? []), v]);
      }
    }
  });
  for (const k of got.get(first)?.keys() ?? []) {
    const base = summarize(got.get(first)?.get(k) ?? []);
    for (const t of trees) {
      const s = summarize(got.get(t)?.get(k) ?? []);
      const outside = t !== first && (base.max < s.min || s.max < base.min);
      lines.push(
        `| ${name} ${k} | ${t} | ${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)}) | ${fmt((100 * (s.max - s.min)) / s.median)} % | ${(s.median / base.median).toFixed(2)} | ${t === first ? '' : outside ? 'yes' : 'no'} |`,
      );
    }
  }
  process.stdout.write(`${name} done (${repeats} repeats per tree, alternated)\n`);
}
process.stdout.write(`${lines.join('\n')}\n`);
process.stdout.write(
  `node ${process.version}, ${os.cpus().length} CPUs, load average ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}\n`,
);
