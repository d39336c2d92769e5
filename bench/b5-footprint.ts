/**
 * B5: the sidecar's footprint. RSS and CPU of the running sidecar, idle (its pod serves a network
 * with no Services yet) and with N Services × 10 endpoints watched and programmed, against a bare
 * `node` process sampled over the same windows (started together, so both see the same machine).
 */
import { performance } from 'node:perf_hooks';
import path from 'node:path';
import { createServices, createSlices } from './lib/cluster.js';
import { sidecarCommand, startSidecar, startSidecarEnv, type SidecarCommand, type SidecarEnv } from './lib/sidecar-env.js';
import { cpuMs, rssBytes, run, sleep, treeSum, startProcess, stopProcess, type Cleanup } from './lib/proc.js';
import { fmt, fmtRatio, summarize, type Summary } from './lib/stats.js';
import type { RunContext, TargetCheck } from './lib/report.js';
import { ROOT } from './lib/report.js';
import { defineBenchmark } from './lib/define.js';
import { isMain, runStandalone } from './lib/runner.js';

const ENDPOINTS = 10;
/** Services when loaded, runs per phase, seconds to settle after the first sync, seconds measured. */
const SIZES = { quick: { services: 1000, runs: 2, settle: 5, window: 5 }, full: { services: 1000, runs: 3, settle: 10, window: 20 } };
/** What counts as "≈ 0" idle CPU: half a percent of one core (the sampling resolution is 10 ms of CPU). */
const IDLE_CPU_MAX_PERCENT = 0.5;

const BARE = ['-e', 'setInterval(() => {}, 1 << 30)'];
/** The same idle program under tsx, the floor of a process started the way the sidecar is when no bundle exists. */
const BARE_TSX = ['--import', 'tsx', path.join(ROOT, 'bench', 'servers', 'idle.ts')];

interface Footprint {
  readonly rssMiB: number;
  readonly cpuPercent: number;
}

/** Over a process and its children (tsx runs esbuild as a child). */
const treeRss = (pid: number): number => treeSum(pid, rssBytes);
const treeCpu = (pid: number): number => treeSum(pid, cpuMs);

/** Samples every pid once a second for `seconds`: median RSS, CPU as % of one core over the window. */
async function sample(pids: readonly number[], seconds: number): Promise<Footprint[]> {
  const rss: number[][] = pids.map(() => []);
  const c0 = pids.map(treeCpu);
  const t0 = performance.now();
  for (let s = 0; s < seconds; s++) {
    await sleep(1000);
    pids.forEach((p, i) => rss[i]?.push(treeRss(p)));
  }
  const elapsed = performance.now() - t0;
  return pids.map((p, i) => ({ rssMiB: summarize(rss[i] ?? []).median / 2 ** 20, cpuPercent: ((treeCpu(p) - (c0[i] ?? 0)) / elapsed) * 100 }));
}

/** The sidecar's V8 heap, in use and reserved (MiB), from its /metrics inside the pod's namespace. */
async function heapMiB(env: SidecarEnv): Promise<{ used: number; total: number }> {
  const text = (await run('curl', ['-sf', 'http://127.0.0.1:9180/metrics'], { netns: env.pod.ns })).stdout;
  const read = (name: string): number => {
    const m = new RegExp(`^multus_proxy_sidecar_nodejs_${name} (\\S+)$`, 'm').exec(text);
    return m?.[1] ? Number(m[1]) / 2 ** 20 : NaN;
  };
  return { used: read('heap_size_used_bytes'), total: read('heap_size_total_bytes') };
}

interface Phase {
  readonly heap: { used: number; total: number }[];
  readonly sidecar: Footprint[];
  readonly bare: Footprint[];
  readonly bareTsx: Footprint[];
}

async function phase(ctx: RunContext, env: SidecarEnv, cleanup: Cleanup, cmd: SidecarCommand, runs: number, settle: number, window: number, label: string): Promise<Phase> {
  const out: Phase = { heap: [], sidecar: [], bare: [], bareTsx: [] };
  for (let r = 0; r < runs; r++) {
    const bare = startProcess('node', BARE, { netns: env.pod.ns });
    const bareTsx = startProcess('node', BARE_TSX, { netns: env.pod.ns, cwd: ROOT });
    cleanup.add('bare node', () => stopProcess(bare));
    cleanup.add('bare node (tsx)', () => stopProcess(bareTsx));
    const sidecar = startSidecar(env, cleanup, 'info', cmd);
    await sidecar.waitFor((l) => l.msg === 'first sync done; ready', 120_000, 'first sync');
    await sleep(settle * 1000);
    const [s, b, bt] = await sample([sidecar.child.pid ?? 0, bare.pid ?? 0, bareTsx.pid ?? 0], window);
    if (!s || !b || !bt) throw new Error('sampling failed');
    out.sidecar.push(s);
    out.bare.push(b);
    out.bareTsx.push(bt);
    out.heap.push(await heapMiB(env));
    ctx.log(`${label} run ${r + 1}: sidecar ${fmt(s.rssMiB)} MiB ${fmt(s.cpuPercent)}% CPU; bare node ${fmt(b.rssMiB)} MiB ${fmt(b.cpuPercent)}%; node+tsx ${fmt(bt.rssMiB)} MiB`);
    await Promise.all([sidecar.stop(), stopProcess(bare), stopProcess(bareTsx)]);
  }
  return out;
}

const mib = (s: Summary): string => `${fmt(s.median)} MiB (${fmt(s.min)}–${fmt(s.max)})`;
const pct = (s: Summary): string => `${fmt(s.median)}% (${fmt(s.min)}–${fmt(s.max)})`;

export const benchmark = defineBenchmark('b5', 'sidecar footprint: RSS and CPU, idle and with 1,000 Services, vs bare node', SIZES, async (ctx, { services, runs, settle, window }, cleanup) => {
  const env = await startSidecarEnv(cleanup);
  const cmd = await sidecarCommand(cleanup);
  const how = cmd.how;
  const idle = await phase(ctx, env, cleanup, cmd, runs, settle, window, 'idle');
  await createServices(env.cp.client, services);
  await createSlices(env.cp.client, services, ENDPOINTS);
  const loaded = await phase(ctx, env, cleanup, cmd, runs, settle, window, `${services} Services`);

  const rows: string[][] = [];
  const sum = (f: Footprint[], k: keyof Footprint): Summary => summarize(f.map((x) => x[k]));
  for (const [name, p] of [
    ['idle (no Services)', idle],
    [`${services.toLocaleString('en')} Services × ${ENDPOINTS} endpoints`, loaded],
  ] as const) {
    rows.push([name, 'sidecar', mib(sum(p.sidecar, 'rssMiB')), `${mib(summarize(p.heap.map((h) => h.used)))} of ${fmt(summarize(p.heap.map((h) => h.total)).median)}`, pct(sum(p.sidecar, 'cpuPercent'))]);
    rows.push(['', 'bare node', mib(sum(p.bare, 'rssMiB')), '', pct(sum(p.bare, 'cpuPercent'))]);
    rows.push(['', 'node --import tsx, idle script', mib(sum(p.bareTsx, 'rssMiB')), '', pct(sum(p.bareTsx, 'cpuPercent'))]);
  }
  const rssRatio = sum(loaded.sidecar, 'rssMiB').median / sum(loaded.bare, 'rssMiB').median;
  const tsxRatio = sum(loaded.sidecar, 'rssMiB').median / sum(loaded.bareTsx, 'rssMiB').median;
  const idleCpu = sum(idle.sidecar, 'cpuPercent').median;
  const loadedCpu = sum(loaded.sidecar, 'cpuPercent').median;
  const targets: TargetCheck[] = [
    { target: `RSS ≤ 1.6× bare node at ${services.toLocaleString('en')} Services`, measured: `${fmtRatio(rssRatio)} (vs node+tsx: ${fmtRatio(tsxRatio)})`, met: rssRatio <= 1.6 },
    { target: `idle CPU ≈ 0 (≤ ${IDLE_CPU_MAX_PERCENT}% of a core)`, measured: `${fmt(idleCpu)}% idle, ${fmt(loadedCpu)}% with ${services.toLocaleString('en')} Services after the first sync`, met: idleCpu <= IDLE_CPU_MAX_PERCENT && loadedCpu <= IDLE_CPU_MAX_PERCENT },
  ];
  return {
    tables: [
      {
        caption: `Median RSS over a ${window} s window and CPU over it (% of one core), starting ${settle} s after the sidecar's first sync; median (min–max) over ${runs} runs per phase:`,
        columns: ['cluster', 'process', 'RSS', 'of which V8 heap: used of reserved', 'CPU'],
        rows,
      },
    ],
    targets,
    notes: [
      `Method: the sidecar runs as ${how} in a client pod's network namespace (test harness topology, apiserver through the harness's relay), against a private kube-apiserver, with its default settings and LOG_LEVEL=info. ` +
        'Each run starts a fresh sidecar together with a bare `node -e "setInterval(() => {}, 1 << 30)"` and the same idle program under `node --import tsx`, and samples all three over the same window, ' +
        'so the baselines see the same machine. RSS is VmRSS of the process and its children (tsx keeps an esbuild service process; it is counted), CPU is utime+stime from /proc. ' +
        'The loaded phase has the sidecar watching and programming every Service (its pod is on their network), i.e. the largest working set it can have at that size.',
    ],
  };
});

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
