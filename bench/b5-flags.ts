/**
 * B5's flag series: the sidecar as the image runs it (its Node.js 24 and bundle,
 * the injected command and environment) with node flags or environment added, side by side in one
 * run, `ROUNDS` rounds with the order reversed every other round, at `N` Services × 10 endpoints
 * (0: idle). Per run: private memory (median and max over `WINDOW_S` (15) s, from `SETTLE_MS` after the first sync),
 * the V8 heap, the resident peak (VmHWM, the first sync's), CPU while idle, then `CHANGES`
 * one-endpoint changes one at a time: the sync time the sidecar logs ("rules applied" ms), the
 * write → rules latency, and the CPU they cost; then private memory again `AFTER_WAIT_MS` later.
 * Every variant runs with `--trace-gc` added: the GC pauses it prints are summed over the idle
 * window and over the changes (GC time, the CPU price of a memory setting).
 * What chose SIDECAR_NODE_FLAGS for Node 24 (docs/decisions/0030-memory-settings.md); B5 itself runs one of each.
 *
 *   VARIANTS='[{"label":"lite","flags":["--lite-mode"]},{"label":"uv1","flags":[],"env":{"UV_THREADPOOL_SIZE":"1"}},{"label":"no ofs","flags":[],"without":["--optimize-for-size"]}]' \
 *   N=1000 ROUNDS=2 node --import tsx bench/b5-flags.ts
 *
 * The injected command itself is always the first variant. One JSON line per run on stdout.
 */
import { performance } from 'node:perf_hooks';
import { readFileSync } from 'node:fs';
import { createServices, createSlices, replaceSlice } from './lib/cluster.js';
import { startSidecar, startSidecarEnv, type LogLine, type SidecarCommand } from './lib/sidecar-env.js';
import { imageSidecarCommand } from './lib/image-runtime.js';
import { endpointSlice } from './lib/services.js';
import { cpuWithChildrenMs, run, sleep, smaps, treeSum, withCleanup } from './lib/proc.js';
import { summarize } from '../test/harness/stats.js';
import { gcPauseMs, parseHeapMetrics } from './lib/v8-heap.js';
import type { V1EndpointSlice } from '../src/kube/types.js';

interface Variant {
  readonly label: string;
  readonly flags: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  /** Injected flags taken out (to compare with a flag the command already has). */
  readonly without?: readonly string[];
}

const ENDPOINTS = 10;
const MIB = 2 ** 20;
const num = (name: string, def: number): number => Number(process.env[name] ?? def);
const N = num('N', 1000);
const ROUNDS = num('ROUNDS', 2);
const CHANGES = num('CHANGES', 8);
const AFTER_WAIT_MS = num('AFTER_WAIT_MS', 20_000);
/** From the first sync to the 15 s sample window (idle CPU right after start includes start-up GCs). */
const SETTLE_MS = num('SETTLE_MS', 5_000);
/** Seconds sampled (memory each second, CPU over the whole window). */
const WINDOW_S = num('WINDOW_S', 15);
const variants: Variant[] = [{ label: 'injected', flags: [] }, ...(JSON.parse(process.env['VARIANTS'] ?? '[]') as Variant[])];

/** Peak resident memory (MiB). */
const hwm = (pid: number): number => Number(/^VmHWM:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) / 1024;
const median = (xs: readonly number[]): number => summarize(xs).median;
const round1 = (x: number): number => Math.round(x * 10) / 10;

await withCleanup(
  (m) => process.stderr.write(`${m}\n`),
  async (cleanup) => {
    const image = await imageSidecarCommand();
    const env = await startSidecarEnv(cleanup);
    const slices = N > 0 ? (await createServices(env.cp.client, N), await createSlices(env.cp.client, N, ENDPOINTS)) : [];
    const current = new Map<number, V1EndpointSlice>(slices.map((s, i) => [i, s]));
    let generation = 1;
    process.stderr.write(`${image.how}; N=${N}\n`);
    for (let r = 0; r < ROUNDS; r++) {
      for (const v of r % 2 === 0 ? variants : [...variants].reverse()) {
        const cmd: SidecarCommand = {
          binary: image.binary ?? 'node',
          argv: ['--trace-gc', ...v.flags, ...image.argv.filter((a) => !(v.without ?? []).includes(a))],
          env: { ...image.env, ...v.env },
          how: v.label,
        };
        const t0 = performance.now();
        const sidecar = startSidecar(env, cleanup, 'info', cmd);
        let gcMs = 0;
        let gcs = 0;
        let rest = '';
        sidecar.child.stdout?.on('data', (c: Buffer) => {
          const lines = (rest + c.toString()).split('\n');
          rest = lines.pop() ?? '';
          for (const l of lines) {
            const ms = gcPauseMs(l);
            if (ms === undefined) continue;
            gcMs += ms;
            gcs++;
          }
        });
        const applied: LogLine[] = [];
        sidecar.onLine((l) => (l.msg === 'rules applied' ? applied.push(l) : undefined));
        await sidecar.waitFor((l) => l.msg === 'first sync done; ready', 300_000, 'first sync');
        const firstSyncMs = performance.now() - t0;
        const gcTillFirst = gcMs;
        const pid = sidecar.child.pid ?? 0;
        await sleep(SETTLE_MS);
        const priv: number[] = [];
        const c0 = treeSum(pid, cpuWithChildrenMs);
        const gcIdle0 = gcMs;
        for (let s = 0; s < WINDOW_S; s++) {
          await sleep(1000);
          priv.push(smaps(pid).anonymous / MIB);
        }
        const idleCpuPercent = (treeSum(pid, cpuWithChildrenMs) - c0) / (WINDOW_S * 10);
        const idleGcMs = gcMs - gcIdle0;
        const heap = parseHeapMetrics((await run('curl', ['-sf', 'http://127.0.0.1:9180/metrics'], { netns: env.pod.ns })).stdout, 'multus_proxy_sidecar');
        const syncMs: number[] = [];
        const latencyMs: number[] = [];
        const c1 = treeSum(pid, cpuWithChildrenMs);
        const [gc1, gcn1] = [gcMs, gcs];
        for (let k = 0; k < (N > 0 ? CHANGES : 0); k++) {
          const i = (generation * 7919) % N;
          const before = applied.length;
          const start = Date.now();
          await replaceSlice(env.cp.client, current, i, endpointSlice(i, ENDPOINTS, generation++));
          await sidecar.waitFor((l) => l.msg === 'rules applied', 30_000, 'a sync after the change').catch(() => undefined);
          const line = applied.at(-1);
          if (applied.length > before && line !== undefined) {
            syncMs.push(Number(line['ms']));
            latencyMs.push(line.time - start);
          }
          await sleep(300);
        }
        const changeCpuMs = treeSum(pid, cpuWithChildrenMs) - c1;
        const [changeGcMs, changeGcs] = [gcMs - gc1, gcs - gcn1];
        await sleep(AFTER_WAIT_MS);
        const after: number[] = [];
        for (let s = 0; s < 5; s++) {
          await sleep(1000);
          after.push(smaps(pid).anonymous / MIB);
        }
        const out = {
          round: r,
          label: v.label,
          firstSyncMs: Math.round(firstSyncMs),
          privateMiB: round1(median(priv)),
          privateMaxMiB: round1(Math.max(...priv)),
          privateAfterChangesMiB: round1(median(after)),
          peakRssMiB: round1(hwm(pid)),
          heapUsedMiB: round1(heap.used),
          heapTotalMiB: round1(heap.total),
          idleCpuPercent: Math.round(idleCpuPercent * 100) / 100,
          syncMsMedian: syncMs.length > 0 ? median(syncMs) : null,
          syncMsMax: syncMs.length > 0 ? Math.max(...syncMs) : null,
          latencyMsMedian: latencyMs.length > 0 ? median(latencyMs) : null,
          changeCpuMs,
          idleGcMs: round1(idleGcMs),
          changeGcMs: round1(changeGcMs),
          changeGcs,
          firstSyncGcMs: round1(gcTillFirst),
        };
        process.stdout.write(`${JSON.stringify(out)}\n`);
        await sidecar.stop();
      }
    }
  },
);
