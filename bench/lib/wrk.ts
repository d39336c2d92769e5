/**
 * wrk (C) as the HTTP load generator of the dataplane benchmarks (B4, B11): one run inside a
 * network namespace, and the comparison both make: ours against a baseline URL in interleaved
 * pairs, alternating which goes first, the ratio taken per pair (each pair saw the same machine load).
 */
import { fileURLToPath } from 'node:url';
import { run } from './proc.js';
import { fmt, fmtRatio, summarize, type Summary } from '../../test/harness/stats.js';
import type { Table, TargetCheck } from './report.js';

export interface WrkResult {
  readonly rps: number;
  readonly p50ms: number;
  readonly p99ms: number;
  readonly errors: number;
}

function toMs(v: string, unit: string): number {
  const n = Number(v);
  return unit === 'us' ? n / 1000 : unit === 's' ? n * 1000 : n;
}

/** Parses `wrk --latency` output. */
export function parseWrk(out: string): WrkResult {
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
  if (!rps?.[1]) throw new Error(`cannot read wrk output: ${out.slice(0, 500)}`);
  const pct = (p: string): number => {
    const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s)`, 'm').exec(out);
    return m?.[1] && m[2] ? toMs(m[1], m[2]) : NaN;
  };
  const errs = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  const errors = (errs ? [1, 2, 3, 4].reduce((s, i) => s + Number(errs[i]), 0) : 0) + (non2xx?.[1] ? Number(non2xx[1]) : 0);
  return { rps: Number(rps[1]), p50ms: pct('50'), p99ms: pct('99'), errors };
}

export async function wrk(ns: string, url: string, seconds: number, connections: number, close: boolean): Promise<WrkResult> {
  const args = ['-t1', `-c${connections}`, `-d${seconds}s`, '--latency', ...(close ? ['-H', 'Connection: close'] : []), url];
  return parseWrk((await run('wrk', args, { netns: ns })).stdout);
}

export interface PairsOptions {
  readonly ns: string;
  readonly ours: string;
  readonly base: string;
  readonly seconds: number;
  readonly runs: number;
  readonly connections: number;
  /** true: one connection per request (`Connection: close`). */
  readonly close: boolean;
  /** Run before every wrk run (e.g. flushing conntrack). */
  readonly before: () => Promise<void>;
  /** Log line of one pair. */
  readonly logPair: (i: number, ours: WrkResult, base: WrkResult) => void;
}

export interface PairsResult {
  readonly ratios: Summary;
  /** The target "<what> ≥ min" on the median ratio. */
  readonly target: (what: string, min: number) => TargetCheck;
  /** mode, ours req/s, base req/s, ratio, ours p50 / p99, base p50 / p99: medians (min–max). */
  readonly row: (mode: string) => string[];
}

/** `runs` interleaved pairs of wrk runs; any wrk error fails the benchmark. */
export async function interleavedPairs(o: PairsOptions): Promise<PairsResult> {
  const ours: WrkResult[] = [];
  const base: WrkResult[] = [];
  for (let i = 0; i < o.runs; i++) {
    const pair = i % 2 === 0 ? ([o.ours, o.base] as const) : ([o.base, o.ours] as const);
    for (const url of pair) {
      await o.before();
      const r = await wrk(o.ns, url, o.seconds, o.connections, o.close);
      if (r.errors > 0) throw new Error(`wrk ${url} (${o.close ? 'one connection per request' : 'keep-alive'}): ${r.errors} errors`);
      (url === o.ours ? ours : base).push(r);
    }
    o.logPair(i, ours[i] as WrkResult, base[i] as WrkResult);
  }
  const ratios = summarize(ours.map((r, i) => r.rps / (base[i]?.rps ?? NaN)));
  const rps = (rs: WrkResult[]): string => {
    const s = summarize(rs.map((r) => r.rps));
    return `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`;
  };
  const lat = (rs: WrkResult[]): string => `${fmt(summarize(rs.map((r) => r.p50ms)).median)} / ${fmt(summarize(rs.map((r) => r.p99ms)).median)} ms`;
  return {
    ratios,
    target: (what, min) => ({
      target: `${what} ≥ ${min}`,
      measured: `${ratios.median.toFixed(3)} (median of ${o.runs} pairs; min ${ratios.min.toFixed(3)}, max ${ratios.max.toFixed(3)})`,
      met: ratios.median >= min,
    }),
    row: (mode) => [mode, rps(ours), rps(base), `${fmtRatio(ratios.median)} (${fmtRatio(ratios.min)}–${fmtRatio(ratios.max)})`, lat(ours), lat(base)],
  };
}

/** The table of the modes' rows (PairsResult.row): `ours`/`base` name the two paths, `short` ours in the latency column. */
export function pairsTable(o: Pick<PairsOptions, 'runs' | 'seconds' | 'connections'>, names: { ours: string; base: string; short: string; baseShort?: string }, rows: string[][]): Table {
  return {
    caption: `${o.runs} interleaved pairs of ${o.seconds} s wrk runs (1 thread, ${o.connections} connections) per mode; median (min–max):`,
    columns: ['mode', `${names.ours}, req/s`, `${names.base}, req/s`, 'ratio (per pair)', `${names.short} p50 / p99`, `${names.baseShort ?? 'direct'} p50 / p99`],
    rows,
  };
}

export interface WrkLatency {
  readonly minUs: number;
  readonly p1Us: number;
  readonly p10Us: number;
  readonly p50Us: number;
  readonly requests: number;
}

/** Parses the line bench/lib/wrk-latency.lua prints. */
export function parseWrkLatency(out: string): WrkLatency {
  const m = /LATENCY_US min=(\d+) p1=(\d+) p10=(\d+) p50=(\d+) n=(\d+)/.exec(out);
  if (m === null) throw new Error(`cannot read wrk's latency line: ${out.slice(0, 500)}`);
  return { minUs: Number(m[1]), p1Us: Number(m[2]), p10Us: Number(m[3]), p50Us: Number(m[4]), requests: Number(m[5]) };
}

/**
 * One connection, one request after another (`close`: a new connection for each): the low
 * percentiles of the request time are the path's own cost with the least of the other users'
 * scheduling in it (a request that waited for a core lands in the upper percentiles), so they
 * hold on a loaded machine where saturated req/s does not.
 */
export async function wrkLatency(ns: string, url: string, seconds: number, close: boolean): Promise<WrkLatency> {
  const script = fileURLToPath(new URL('./wrk-latency.lua', import.meta.url));
  return parseWrkLatency((await run('wrk', ['-t1', '-c1', `-d${seconds}s`, '-s', script, ...(close ? ['-H', 'Connection: close'] : []), url], { netns: ns })).stdout);
}
