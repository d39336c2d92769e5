/**
 * Which timed windows a garbage collection pause overlapped: B2's partial syncs at 10,000
 * Services have a tail of a few changes 3-10x the median, and this says whether V8's pauses
 * (seen by a PerformanceObserver on 'gc' entries in the process that times them) fall inside
 * them. `watchGc` is the IO; `gcOverlap` the pure matching.
 */
import { constants, PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';

/** One GC pause as the observer reported it (times on performance.now()'s clock). */
export interface GcPause {
  readonly start: number;
  readonly ms: number;
  readonly kind: GcKind;
}

export type GcKind = 'major' | 'minor' | 'incremental' | 'weakcb' | 'other';

/** One timed window (a change), with its own duration. */
export interface Window {
  readonly start: number;
  readonly end: number;
}

/** A window's overlapped pause time, by kind (ms of each pause that fell inside the window). */
export interface WindowGc {
  readonly major: number;
  readonly minor: number;
  readonly other: number;
}

/** What the pauses did to a list of windows, for the report. */
export interface GcOverlapSummary {
  /** Windows over `slowMs`, and how many of them overlapped a major (mark-compact) pause. */
  readonly slow: { readonly threshold: number; readonly count: number; readonly withMajor: number };
  /** The slowest 1 % of windows (at least one), and how many overlapped a major pause. */
  readonly slowest1pct: { readonly count: number; readonly withMajor: number; readonly withMinorOnly: number };
  /** Every window that overlapped a major pause. */
  readonly windowsWithMajor: number;
  /** All pauses seen while the windows ran (first window's start to last's end), by kind: count, total ms, max ms. */
  readonly pauses: Readonly<Record<GcKind, { readonly count: number; readonly totalMs: number; readonly maxMs: number }>>;
}

const KINDS: ReadonlyMap<number, GcKind> = new Map([
  [constants.NODE_PERFORMANCE_GC_MAJOR, 'major'],
  [constants.NODE_PERFORMANCE_GC_MINOR, 'minor'],
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL, 'incremental'],
  [constants.NODE_PERFORMANCE_GC_WEAKCB, 'weakcb'],
]);

/**
 * Starts collecting this process's GC pauses; `stop()` returns them (all that came since). Node
 * makes a pause's entry in a later turn of the event loop (its start time is the pause's own), so
 * stop() lets the loop turn first.
 */
export function watchGc(): { stop(): Promise<GcPause[]> } {
  const pauses: GcPause[] = [];
  const add = (es: readonly PerformanceEntry[]): void => {
    for (const e of es) pauses.push({ start: e.startTime, ms: e.duration, kind: KINDS.get((e as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? -1) ?? 'other' });
  };
  const obs = new PerformanceObserver((list) => add(list.getEntries()));
  obs.observe({ entryTypes: ['gc'] });
  return {
    stop: async () => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      add(obs.takeRecords());
      obs.disconnect();
      return pauses.sort((a, b) => a.start - b.start);
    },
  };
}

/** Pause time of each kind inside each window. Pure. */
export function windowGc(windows: readonly Window[], pauses: readonly GcPause[]): WindowGc[] {
  return windows.map((w) => {
    const out = { major: 0, minor: 0, other: 0 };
    for (const p of pauses) {
      const inside = Math.min(w.end, p.start + p.ms) - Math.max(w.start, p.start);
      if (inside <= 0) continue;
      if (p.kind === 'major') out.major += inside;
      else if (p.kind === 'minor') out.minor += inside;
      else out.other += inside;
    }
    return out;
  });
}

/** The summary over windows and their overlaps (the same order). Pure. */
export function gcOverlap(windows: readonly Window[], pauses: readonly GcPause[], slowMs: number): GcOverlapSummary {
  const gc = windowGc(windows, pauses);
  const ms = windows.map((w) => w.end - w.start);
  const order = ms.map((_, i) => i).sort((a, b) => (ms[b] ?? 0) - (ms[a] ?? 0));
  const top = order.slice(0, Math.max(1, Math.ceil(windows.length / 100)));
  const major = (i: number): boolean => (gc[i]?.major ?? 0) > 0;
  const slow = order.filter((i) => (ms[i] ?? 0) > slowMs);
  const from = windows[0]?.start ?? 0;
  const to = windows[windows.length - 1]?.end ?? 0;
  const pausesBy = Object.fromEntries(
    (['major', 'minor', 'incremental', 'weakcb', 'other'] as const).map((k) => {
      const of = pauses.filter((p) => p.kind === k && p.start + p.ms > from && p.start < to);
      return [k, { count: of.length, totalMs: of.reduce((s, p) => s + p.ms, 0), maxMs: of.reduce((m, p) => Math.max(m, p.ms), 0) }];
    }),
  ) as GcOverlapSummary['pauses'];
  return {
    slow: { threshold: slowMs, count: slow.length, withMajor: slow.filter(major).length },
    slowest1pct: { count: top.length, withMajor: top.filter(major).length, withMinorOnly: top.filter((i) => !major(i) && (gc[i]?.minor ?? 0) > 0).length },
    windowsWithMajor: gc.filter((g) => g.major > 0).length,
    pauses: pausesBy,
  };
}
