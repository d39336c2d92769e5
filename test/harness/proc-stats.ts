/**
 * What a process costs, read from /proc: RSS, CPU time (its own, and with its waited-for children),
 * smaps_rollup's split of private and shared memory, and sums over a process tree. Used by the
 * benchmarks (bench/lib/proc.ts) and the real-node soak.
 */
import { readFileSync } from 'node:fs';

/** Resident set size of a process in bytes (VmRSS). */
export function rssBytes(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m?.[1]) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) * 1024;
}

/** User + system CPU time of a process in milliseconds (from /proc/<pid>/stat, clock ticks of 10 ms). */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // The command name (field 2) may contain spaces; fields after its closing paren are fixed.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return (utime + stime) * 10;
}

/**
 * User + system CPU time in ms of a process plus its children that have exited and been waited
 * for (cutime + cstime): what a process costs including the short-lived commands it runs.
 */
export function cpuWithChildrenMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat
    .slice(stat.lastIndexOf(')') + 2)
    .split(' ')
    .map(Number);
  return ((f[11] ?? 0) + (f[12] ?? 0) + (f[13] ?? 0) + (f[14] ?? 0)) * 10;
}

/** Memory of a process from /proc/<pid>/smaps_rollup, in bytes. */
export interface Smaps {
  readonly rss: number;
  /** Anonymous pages: private to the process (heap, V8, stacks); what each extra process costs. */
  readonly anonymous: number;
  /** Rss − Anonymous: file-backed pages (the node binary, libraries), shared through the page cache. */
  readonly fileBacked: number;
}

export function smaps(pid: number): Smaps {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
  const kb = (field: string): number => {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(text);
    if (!m?.[1]) throw new Error(`no ${field} in /proc/${pid}/smaps_rollup`);
    return Number(m[1]) * 1024;
  };
  const rss = kb('Rss');
  const anonymous = kb('Anonymous');
  return { rss, anonymous, fileBacked: rss - anonymous };
}

/** The pids of a process and all its descendants (e.g. `ip netns exec` → node). */
export function descendants(pid: number): number[] {
  const out = [pid];
  try {
    const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
    for (const k of kids) out.push(...descendants(k));
  } catch {
    // gone already
  }
  return out;
}

/** Sums `read` (e.g. rssBytes, cpuMs) over a process and its descendants, skipping any that just exited. */
export function treeSum(pid: number, read: (pid: number) => number): number {
  return descendants(pid).reduce((sum, p) => {
    try {
      return sum + read(p);
    } catch {
      return sum;
    }
  }, 0);
}
