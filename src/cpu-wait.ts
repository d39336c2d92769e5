/**
 * Run-queue wait: how long this process's main thread and its child processes were runnable but
 * not running (the kernel's schedstat `run_delay`). A sync that takes 20 ms while doing 2 ms of
 * work waited for a CPU; this says how much of it. The sidecar asks for 10m of CPU (cgroup weight
 * 10 against ~1,000 for the node's own daemons), so on a busy node its tail latency is this wait,
 * not its work (docs/benchmarks.md, B3-real). Parsing and arithmetic are pure; reading /proc is
 * the one IO function.
 */
import { readFileSync } from 'node:fs';

/** Run-queue wait in ns, by pid: the main thread (`self`) and the child processes alive when taken. */
export type WaitSnapshot = ReadonlyMap<string, number>;

/** `/proc/<pid>/schedstat`: "<ns on CPU> <ns waiting on a run queue> <timeslices>", or undefined. */
export function parseSchedstat(text: string): { readonly cpuNs: number; readonly waitNs: number } | undefined {
  const f = text.trim().split(/\s+/);
  if (f.length !== 3) return undefined;
  const cpuNs = Number(f[0]);
  const waitNs = Number(f[1]);
  return Number.isSafeInteger(cpuNs) && cpuNs >= 0 && Number.isSafeInteger(waitNs) && waitNs >= 0 ? { cpuNs, waitNs } : undefined;
}

/** The run-queue wait of a schedstat text, or undefined. */
export const parseRunDelay = (text: string): number | undefined => parseSchedstat(text)?.waitNs;

/** Child pids from `/proc/<pid>/task/<tid>/children` ("12 34 "). */
export function parseChildren(text: string): string[] {
  return text.split(/\s+/).filter((p) => /^\d+$/.test(p));
}

/**
 * Wait accrued from `a` to `b`, in ms to 0.01 ms. A pid only in `b` was born in between (its whole wait
 * counts); one only in `a` exited (its last part is not known, so it is left out: a lower bound).
 */
export function waitBetween(a: WaitSnapshot, b: WaitSnapshot): number {
  let ns = 0;
  for (const [pid, w] of b) ns += Math.max(0, w - (a.get(pid) ?? 0));
  return Math.round(ns / 1e4) / 100;
}

const readOr = (path: string): string | undefined => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
};

/**
 * This process's main thread and its children now. Empty where /proc has no schedstat (not Linux,
 * or a kernel without CONFIG_SCHED_INFO): the waits are then 0 and the caller leaves them out.
 */
export function snapshotWait(proc = '/proc'): WaitSnapshot {
  const out = new Map<string, number>();
  const self = parseRunDelay(readOr(`${proc}/self/schedstat`) ?? '');
  if (self === undefined) return out;
  out.set('self', self);
  // Children are spawned from the main thread, whose tid is the pid.
  for (const pid of parseChildren(readOr(`${proc}/self/task/${process.pid}/children`) ?? '')) {
    const w = parseRunDelay(readOr(`${proc}/${pid}/schedstat`) ?? '');
    if (w !== undefined) out.set(pid, w);
  }
  return out;
}

/**
 * This process's main thread's own CPU in ms (its schedstat; V8's helper threads left out), or
 * undefined where there is none. The kernel brings it up to date when the thread is switched out
 * or at a tick. For benchmarks.
 */
export function mainThreadCpuMs(proc = '/proc'): number | undefined {
  const s = parseSchedstat(readOr(`${proc}/self/task/${process.pid}/schedstat`) ?? '');
  return s === undefined ? undefined : s.cpuNs / 1e6;
}
