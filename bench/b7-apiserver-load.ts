/**
 * B7: the apiserver's load from many sidecars. N watchers (each built as the sidecar builds its
 * informers: own client, pod + Service + EndpointSlice informers with the sidecar's transforms),
 * 100 per process, on one private kube-apiserver (watch cache on, as in any cluster). For each N,
 * ours (lists from the watch cache, jittered relists, full-jitter reconnects: the informer's
 * defaults) and the old list behaviour (every list a quorum read from etcd, immediate relist
 * after 410: `listFrom: 'quorum'`) and ours over one HTTP/2 connection per watcher (the client's
 * opt-in `http2`) run in the same run, alternating the order, each on a freshly started apiserver. Measured for each:
 * - one slice change reaching all N watchers: p50 and p99 over 5 changes;
 * - the apiserver's CPU (during the initial sync, and idle afterwards) and private (anonymous)
 *   memory, per watcher;
 * - after an apiserver restart: TLS handshakes and lists per second, the restarted apiserver's
 *   CPU, and when each watcher has a change written at readiness.
 */
import { copyFileSync, readdirSync, readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import path from 'node:path';
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import type { V1EndpointSlice } from '../src/kube/types.js';
import type { ControlPlane } from '../test/harness/controlplane.js';
import { benchControlPlane, createServices, createSlices, SLICES_PATH } from './lib/cluster.js';
import { endpointSlice } from './lib/services.js';
import { cpuMs, sleep, type Cleanup } from './lib/proc.js';
import { fmt, summarize } from '../test/harness/stats.js';
import { ROOT, type RunContext, type TargetCheck } from './lib/report.js';
import { defineBenchmark } from './lib/define.js';
import { isMain, runStandalone } from './lib/runner.js';
import { PROBE_SLICE, ZERO_COUNTS as ZERO, type WatcherCounts } from './lib/watchers-ipc.js';

/** Watchers per child process (env B7_PER_PROCESS for experiments). */
const PER_PROCESS = Number(process.env['B7_PER_PROCESS'] ?? 100);
const PROBES = 5;
/** Seconds counted after the restarted apiserver is ready. */
const RESTART_WINDOW_S = 20;
const RECOVERY_TIMEOUT_MS = 90_000;
/** Apiserver starts tried per restart before the run fails. */
const MAX_STARTS = 3;
const SETTLE_MS = 5_000;
/** Experiments: log the watchers' counts every second of a restart and keep the apiserver's log in /tmp. */
const TRACE = process.env['B7_TRACE'] === '1';
/**
 * Experiments: B7_NICE=10 renices each restarted apiserver (and etcd) as soon as it exists, to
 * reproduce on a quiet machine an apiserver starved of CPU by other work, as on a loaded one.
 */
const NICE = process.env['B7_NICE'];

/** Renices every thread of the control plane's processes until `until` settles (experiments only; Linux nice is per thread). */
function reniceWhile(cp: ControlPlane, until: Promise<unknown>): void {
  if (!NICE) return;
  const done = new Set<number>();
  let settled = false;
  void until.finally(() => (settled = true));
  const tick = (): void => {
    for (const pid of cp.pids()) {
      let tids: string[];
      try {
        tids = readdirSync(`/proc/${pid}/task`);
      } catch {
        continue; // not started yet, or gone
      }
      for (const tid of tids.map(Number).filter((t) => !done.has(t))) {
        try {
          execFileSync('renice', ['-n', NICE, '-p', String(tid)], { stdio: 'ignore' });
          done.add(tid);
        } catch {
          /* the thread ended */
        }
      }
    }
    if (!settled) setTimeout(tick, 50);
  };
  tick();
}
const MEM_SAMPLES = 5;
type Mode = 'cache' | 'quorum' | 'h2';

interface Sizes {
  readonly watchers: readonly number[];
  readonly services: number;
}

interface RestartResult {
  /** From the kill to /readyz answering ok. */
  readyAfterMs: number;
  /** Apiserver starts it took (more than 1: a restarted apiserver died under the load). */
  starts: number;
  listsBeforeReady: number;
  listsAfterReady: number;
  /** Lists per second, from the kill to the end of the window. */
  listsPerSecond: number[];
  /** CPU of the restarted apiserver from its start to the end of the window. */
  apiserverCpuMs: number;
  /** Completed TLS handshakes per second from the kill to the end of the window. */
  tlsPerSecond: number[];
  /** Everything from the kill to the end of the window. */
  total: WatcherCounts;
  /** Per watcher that got it: from readiness to receiving a change written at readiness. */
  recoveredMs: number[];
}

interface ModeResult {
  mode: Mode;
  n: number;
  syncMs: number;
  latencies: number[];
  syncCpuMsPerWatcher: number;
  idleCpuPctPerWatcher: number;
  anonKiBPerWatcher: number;
  restart: RestartResult;
}

/** Private (anonymous) memory of a process, from smaps_rollup. */
function anonBytes(pid: number): number {
  const m = /^Anonymous:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
  return Number(m?.[1] ?? NaN) * 1024;
}

function apiserverPid(pids: readonly number[]): number {
  const pid = pids.find((p) => readFileSync(`/proc/${p}/comm`, 'utf8').trim() === 'kube-apiserver');
  if (pid === undefined) throw new Error('kube-apiserver pid not found');
  return pid;
}

interface Fleet {
  children: ChildProcess[];
  synced: Promise<void>;
  /** Per probe resourceVersion: receive times by watcher. */
  seen: Map<string, Map<number, number>>;
  /** Latest cumulative counts per child. */
  counts: WatcherCounts[];
}

function startFleet(n: number, mode: Mode, conn: unknown, cleanup: Cleanup): Fleet {
  const procs = Math.ceil(n / PER_PROCESS);
  const children: ChildProcess[] = [];
  const seen = new Map<string, Map<number, number>>();
  const counts = Array.from({ length: procs }, () => ({ ...ZERO }));
  const synced: Promise<void>[] = [];
  for (let p = 0; p < procs; p++) {
    const count = Math.min(PER_PROCESS, n - p * PER_PROCESS);
    const child = fork(path.join(ROOT, 'bench', 'servers', 'watchers.ts'), [String(count), mode], {
      execArgv: ['--import', 'tsx'],
      env: { ...process.env, LOG_LEVEL: 'error', MULTUS_PROXY_BENCH_CONN: JSON.stringify(conn) },
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    });
    cleanup.add(`b7 watchers ${p}`, () => void child.kill('SIGKILL'));
    children.push(child);
    synced.push(
      new Promise<void>((resolve, reject) => {
        child.once('exit', (code) => reject(new Error(`watcher process ${p} exited (${code}) before syncing`)));
        child.on('message', (m: { type: string; watcher?: number; at?: number; rv?: string; counts?: WatcherCounts }) => {
          if (m.type === 'synced') resolve();
          else if (m.type === 'counts' && m.counts) counts[p] = m.counts;
          else if (m.type === 'seen' && m.rv !== undefined) {
            let by = seen.get(m.rv);
            if (!by) seen.set(m.rv, (by = new Map<number, number>()));
            by.set(p * PER_PROCESS + (m.watcher ?? 0), m.at ?? NaN);
          }
        });
      }),
    );
  }
  return { children, synced: Promise.all(synced).then(() => undefined), seen, counts };
}

function diff(a: WatcherCounts, b: WatcherCounts): WatcherCounts {
  const d = { ...ZERO };
  for (const k of Object.keys(d) as (keyof WatcherCounts)[]) d[k] = a[k] - b[k];
  return d;
}

/** A write right after a restart may meet a still-busy apiserver: a few tries. */
async function retry<T>(fn: () => Promise<T>, tries = 5): Promise<T> {
  for (let i = 1; ; i++) {
    try {
      return await fn();
    } catch (e) {
      if (i >= tries) throw e;
      await sleep(1000);
    }
  }
}

function total(fleet: Fleet): WatcherCounts {
  const t = { ...ZERO };
  for (const c of fleet.counts) for (const k of Object.keys(t) as (keyof WatcherCounts)[]) t[k] += c[k];
  return t;
}

/** Median of `samples` readings `everyMs` apart. */
async function medianOf(samples: number, everyMs: number, read: () => number): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < samples; i++) {
    if (i > 0) await sleep(everyMs);
    xs.push(read());
  }
  return summarize(xs).median;
}

/** Replaces the probe slice; returns the new resourceVersion and when the write was sent. */
async function writeProbe(cp: ControlPlane, generation: { g: number }): Promise<{ rv: string; sent: number }> {
  generation.g++;
  const current = await cp.client.get<V1EndpointSlice>(`${SLICES_PATH}/${PROBE_SLICE}`);
  const next = { ...endpointSlice(0, 3, generation.g), metadata: { ...current.metadata } };
  const sent = Date.now();
  const out = await cp.client.replace<V1EndpointSlice>(`${SLICES_PATH}/${PROBE_SLICE}`, next);
  return { rv: out.metadata?.resourceVersion ?? '', sent };
}

/** Waits until `n` watchers saw rv (or the deadline); their receive times. */
async function seenBy(fleet: Fleet, rv: string, n: number, timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  while ((fleet.seen.get(rv)?.size ?? 0) < n && Date.now() < deadline) await sleep(20);
  return [...(fleet.seen.get(rv)?.values() ?? [])];
}

/** Restarts the apiserver (one more try if the restarted one dies under the load); when it was ready, and how many starts it took. */
async function restartApiserver(ctx: RunContext, cp: ControlPlane, what: string): Promise<{ readyAt: number; starts: number }> {
  for (let starts = 1; ; starts++) {
    try {
      await cp.restartApiserver();
      return { readyAt: Date.now(), starts };
    } catch (e) {
      if (TRACE) copyFileSync(cp.apiserverLog, `/tmp/b7-apiserver-failed-${Date.now()}.log`);
      ctx.log(`B7 ${what}: apiserver restart ${starts} failed (${(e as Error).message.split('\n')[0] ?? ''})`);
      if (starts >= MAX_STARTS) throw new Error(`B7 ${what}: the apiserver did not come back after ${starts} starts; last: ${(e as Error).message}`, { cause: e });
    }
  }
}

async function measure(ctx: RunContext, cp: ControlPlane, n: number, mode: Mode, cleanup: Cleanup, generation: { g: number }): Promise<ModeResult> {
  const what = `${mode} N=${n}`;
  // Every mode starts on a freshly started apiserver, so neither inherits the other's garbage
  // (Go returns freed heap to the OS lazily) and the memory baseline is the same for both.
  await restartApiserver(ctx, cp, `${what} (fresh start)`);
  const conn = { ...cp.connection, ca: cp.caPem };
  const pid = apiserverPid(cp.pids());
  await sleep(SETTLE_MS);
  const anon0 = await medianOf(MEM_SAMPLES, 1000, () => anonBytes(pid));
  const cpu0 = cpuMs(pid);
  const t0 = Date.now();
  const fleet = startFleet(n, mode, conn, cleanup);
  await fleet.synced;
  const syncMs = Date.now() - t0;
  const cpu1 = cpuMs(pid);
  await sleep(SETTLE_MS);
  const cpu2 = cpuMs(pid);
  const t2 = Date.now();
  const anon1 = await medianOf(MEM_SAMPLES, 1000, () => anonBytes(pid));
  const cpu3 = cpuMs(pid);
  const idleMs = Date.now() - t2;
  ctx.log(`B7 ${what}: synced in ${syncMs} ms`);

  const latencies: number[] = [];
  for (let k = 0; k < PROBES; k++) {
    const { rv, sent } = await writeProbe(cp, generation);
    const at = await seenBy(fleet, rv, n, 30_000);
    if (at.length < n) throw new Error(`B7 ${what}: only ${at.length} of ${n} watchers saw change ${k + 1} within 30 s`);
    for (const t of at) latencies.push(t - sent);
    await sleep(300);
  }

  // Restart the apiserver; count what all watchers do per second, from the kill until
  // RESTART_WINDOW_S after the restarted apiserver is ready (/readyz).
  const samples: { at: number; c: WatcherCounts }[] = [{ at: Date.now(), c: total(fleet) }];
  const killedAt = Date.now();
  let ready: { readyAt: number; starts: number } | undefined;
  let failed: Error | undefined;
  let recovery: Promise<number[]> = Promise.resolve([]);
  const restarting = restartApiserver(ctx, cp, what);
  reniceWhile(cp, restarting);
  const restart = restarting.then(
    (r) => {
      ready = r;
      // A change written as soon as the apiserver is ready: when has every watcher got it?
      recovery = retry(() => writeProbe(cp, generation)).then(({ rv }) => seenBy(fleet, rv, n, RECOVERY_TIMEOUT_MS));
    },
    (e: unknown) => (failed = e instanceof Error ? e : new Error(String(e))),
  );
  while (failed === undefined && (ready === undefined || Date.now() < ready.readyAt + RESTART_WINDOW_S * 1000)) {
    await sleep(1000 - ((Date.now() - killedAt) % 1000));
    samples.push({ at: Date.now(), c: total(fleet) });
    if (TRACE) {
      const d = diff(samples[samples.length - 1]!.c, samples[samples.length - 2]!.c);
      ctx.log(`B7 ${what} +${((Date.now() - killedAt) / 1000).toFixed(0)} s${ready ? ' (ready)' : ''}: ${JSON.stringify(d)} load ${loadavg()[0]?.toFixed(1)}`);
    }
  }
  await restart;
  const apiserverCpu = failed === undefined ? cpuMs(apiserverPid(cp.pids())) : NaN;
  if (TRACE) copyFileSync(cp.apiserverLog, `/tmp/b7-apiserver-${what.replace(/\W+/g, '-')}-${killedAt}.log`);
  if (failed !== undefined) throw failed;
  const recovered = (await recovery) ?? [];
  for (const c of fleet.children) c.kill('SIGKILL');
  await sleep(1000);
  const readyAt = ready?.readyAt ?? NaN;
  const first = samples[0]!.c;
  const last = samples[samples.length - 1]!.c;
  const deltas = samples.slice(1).map((s, i) => ({ at: s.at, d: diff(s.c, samples[i]!.c) }));
  const perSecond = (k: keyof WatcherCounts, from: number): number[] => deltas.filter((x) => x.at > from).map((x) => x.d[k]);
  const atReady = [...samples].reverse().find((x) => x.at <= readyAt)?.c ?? first;
  return {
    mode,
    n,
    syncMs,
    latencies,
    syncCpuMsPerWatcher: (cpu1 - cpu0) / n,
    idleCpuPctPerWatcher: ((cpu3 - cpu2) / idleMs / n) * 100,
    anonKiBPerWatcher: (anon1 - anon0) / 1024 / n,
    restart: {
      readyAfterMs: readyAt - killedAt,
      starts: ready?.starts ?? NaN,
      listsBeforeReady: atReady.lists - first.lists,
      listsAfterReady: last.lists - atReady.lists,
      listsPerSecond: perSecond('lists', killedAt),
      apiserverCpuMs: apiserverCpu,
      tlsPerSecond: perSecond('tlsDone', killedAt),
      total: diff(last, first),
      recoveredMs: recovered.map((t) => t - readyAt),
    },
  };
}

/** Experiments only: B7_N=1000 and B7_MODES=cache run one size or one mode (not for recorded runs). */
function override(size: Sizes): { size: Sizes; modes: readonly Mode[] } {
  const n = process.env['B7_N'];
  const modes = (process.env['B7_MODES'] ?? 'cache,quorum,h2').split(',').filter((m): m is Mode => m === 'cache' || m === 'quorum' || m === 'h2');
  return { size: n ? { ...size, watchers: n.split(',').map(Number) } : size, modes };
}

const label = (m: Mode): string => (m === 'cache' ? 'ours' : m === 'h2' ? 'ours over HTTP/2 (one connection per watcher)' : 'old: quorum lists, immediate relist');
const peakOf = (xs: readonly number[]): number => (xs.length > 0 ? Math.max(...xs) : NaN);
const secondsOf = (ms: number): string => `${fmt(ms / 1000)} s`;

export const benchmark = defineBenchmark<Sizes>(
  'b7',
  'apiserver load from N sidecar-like watchers: watch-cache lists and spread reconnects vs quorum lists',
  { quick: { watchers: [50, 100], services: 20 }, full: { watchers: [100, 500, 1000], services: 100 } },
  async (ctx, wanted, cleanup) => {
    const { size, modes } = override(wanted);
    const cp = await benchControlPlane(cleanup);
    await createServices(cp.client, size.services);
    await createSlices(cp.client, size.services, 3);
    await cp.client.create(SLICES_PATH, { ...endpointSlice(0, 3, 0), metadata: { ...endpointSlice(0, 3, 0).metadata, name: PROBE_SLICE } });
    const results: ModeResult[] = [];
    const generation = { g: 0 };
    for (const [i, n] of size.watchers.entries()) {
      const order = i % 2 === 0 ? modes : [...modes].reverse();
      for (const mode of order) results.push(await measure(ctx, cp, n, mode, cleanup, generation));
    }
    const steady = (r: ModeResult): string[] => {
      const l = summarize(r.latencies);
      return [
        r.n.toLocaleString('en'),
        label(r.mode),
        `${fmt(l.median)} / ${fmt(l.p99)} ms`,
        `${fmt(r.syncMs)} ms`,
        `${fmt(r.syncCpuMsPerWatcher)} ms`,
        `${r.idleCpuPctPerWatcher.toFixed(3)} %`,
        `${fmt(r.anonKiBPerWatcher)} KiB`,
      ];
    };
    const restart = (r: ModeResult): string[] => {
      const x = r.restart;
      const rec = summarize(x.recoveredMs);
      return [
        r.n.toLocaleString('en'),
        label(r.mode),
        `${secondsOf(x.readyAfterMs)}${x.starts > 1 ? ` (${x.starts} starts)` : ''}`,
        `${x.total.tlsDone} (${x.total.tlsFailed} failed; peak ${peakOf(x.tlsPerSecond)}/s)`,
        `${x.total.failed}`,
        `${x.listsBeforeReady} + ${x.listsAfterReady}`,
        `${peakOf(x.listsPerSecond)} (${x.listsPerSecond.filter((v) => v > 0).length} s with lists)`,
        `${fmt(x.apiserverCpuMs / 1000)} s`,
        x.recoveredMs.length < r.n ? `only ${x.recoveredMs.length} of ${r.n} within ${RECOVERY_TIMEOUT_MS / 1000} s` : `${secondsOf(rec.median)} / ${secondsOf(rec.max)}`,
      ];
    };
    const largest = Math.max(...size.watchers);
    const ours = results.find((r) => r.n === largest && r.mode === 'cache');
    const old = results.find((r) => r.n === largest && r.mode === 'quorum');
    const peak = (r: ModeResult | undefined): number => (r ? peakOf(r.restart.listsPerSecond) : NaN);
    const targets: TargetCheck[] = [
      {
        target: `after an apiserver restart, ${largest} watchers do not all list in the same second (peak lists/s < ${largest * 3} informers)`,
        measured: `peak ${peak(ours)} lists/s (old: ${peak(old)})`,
        met: ours ? peak(ours) < largest * 3 : undefined,
      },
      {
        target: `after an apiserver restart, the apiserver comes back once (no second start) and all ${largest} watchers get a change within 60 s of readiness`,
        measured: ours ? `${ours.restart.starts} start(s); ${ours.restart.recoveredMs.length} of ${largest}, last after ${secondsOf(summarize(ours.restart.recoveredMs).max)}` : 'n/a',
        met: ours ? ours.restart.starts === 1 && ours.restart.recoveredMs.length === largest && summarize(ours.restart.recoveredMs).max <= 60_000 : undefined,
      },
      {
        target: `one slice change reaches all ${largest} watchers: p99 ≤ 1 s`,
        measured: ours ? `${fmt(summarize(ours.latencies).p99)} ms` : 'n/a',
        met: ours ? summarize(ours.latencies).p99 <= 1000 : undefined,
      },
    ];
    return {
      tables: [
        {
          caption: `N watchers (${PER_PROCESS} per process; each: own client, pod + Service + EndpointSlice informers as the sidecar builds them) on one kube-apiserver v1.34.4 with ${size.services} Services and slices; each mode on a freshly started apiserver; the modes alternate per N:`,
          columns: [
            'N',
            'watchers',
            'slice change to all N: p50 / p99',
            'initial sync of all N',
            'apiserver CPU per watcher (sync)',
            'apiserver CPU per watcher (idle)',
            'apiserver private memory per watcher',
          ],
          rows: results.map(steady),
        },
        {
          caption: `The apiserver killed (SIGTERM) and started again with the watchers connected; counted from the kill to ${RESTART_WINDOW_S} s after the restarted apiserver answers /readyz:`,
          columns: [
            'N',
            'watchers',
            'kill to ready',
            'TLS handshakes by the watchers',
            'failed lists/watches',
            'lists before + after ready',
            'peak lists/s',
            'restarted apiserver CPU',
            'a change written at ready reaches the watchers: p50 / last',
          ],
          rows: results.map(restart),
        },
      ],
      targets,
      notes: [
        `Method: a private kube-apiserver + etcd (watch cache on). Watchers run in child processes (bench/servers/watchers.ts, ${PER_PROCESS} each) and report over IPC. ` +
          `Latency: the bench replaces one probe slice ${PROBES} times; each watcher reports when its slice informer delivers the update; p50/p99 over all N × ${PROBES}. ` +
          `Each mode begins with an apiserver restart, so every mode starts from the same fresh apiserver. CPU: the apiserver's utime+stime during the initial sync of all watchers, divided by N; idle: over the ${MEM_SAMPLES} s of memory samples that follow a ${SETTLE_MS / 1000} s pause. ` +
          `Memory: the median of ${MEM_SAMPLES} readings of the apiserver's Anonymous (smaps_rollup) 1 s apart, ${SETTLE_MS / 1000} s after the sync, minus the median of ${MEM_SAMPLES} readings of the fresh apiserver before the watchers started, divided by N. ` +
          `Restart: the apiserver is stopped (SIGTERM; the harness sends SIGKILL after 10 s, and the watches break then) and started again; everything is counted from the kill until ${RESTART_WINDOW_S} s after /readyz answers ok (the window starts at readiness, so a slow start-up cannot push one mode's lists out of it); the watchers' requests per second are summed over all processes; TLS handshakes are counted in the watcher processes (tls.connect wrapped), failed ones are connections closed before their handshake completed; "failed" counts list and watch requests that were rejected (a watch ended by 410 included); the restarted apiserver's CPU is its utime+stime at the end of the window. ` +
          `Recovery: one change to the probe slice written as soon as the apiserver is ready; the time until each watcher's slice informer delivers it (by its watch or by its relist). ` +
          "Old behaviour: the same informers with `listFrom: 'quorum', relistJitterMs: 0` (every list a quorum read from etcd, relist at once after 410). " +
          'HTTP/2: ours with `createKubeClient(conn, { http2: true })`, one HTTP/2 connection per watcher for its three lists and watches (the default is one HTTP/1.1 connection per watch).',
      ],
    };
  },
);

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
