/**
 * Request time of each of several paths (B11, B11-netns): one wrk connection, one request after
 * another (wrkLatency), every path once per round in an order that rotates, and the table of
 * each path's low end and what it adds over the others, per round. The low end (p1, min) is the
 * path's own work, which on the shared machine holds where saturated req/s does not.
 */
import { fmt, summarize } from '../../test/harness/stats.js';
import { wrkLatency, type WrkLatency } from './wrk.js';
import type { Table } from './report.js';

/** Which statistic the paths are compared on. */
export type LowEnd = 'p1Us' | 'minUs';

/**
 * The two modes and the statistic each is compared on. Keep-alive: p1 (the distribution is
 * narrow; p1 is as steady as min and less of a single sample). One connection per request: min
 * (p10 is several times min on a loaded machine: connection set-up and teardown wait for cores).
 */
export const REQUEST_TIME_MODES = [
  { name: 'keep-alive', close: false, low: 'p1Us' },
  { name: 'one connection per request', close: true, low: 'minUs' },
] as const satisfies readonly { name: string; close: boolean; low: LowEnd }[];

export type Round<K extends string> = ReadonlyMap<K, WrkLatency>;

/** Round i's order: rotated each round, so no path always runs first or right after another. */
export const rotated = <T>(xs: readonly T[], i: number): T[] => [...xs.slice(i % xs.length), ...xs.slice(0, i % xs.length)];

export interface RoundsOptions<K extends string> {
  readonly ns: string;
  readonly paths: readonly K[];
  readonly urlOf: (k: K) => string;
  /** Before every run (installing the path's rules, flushing conntrack). */
  readonly before: (k: K) => Promise<void>;
  readonly runs: number;
  readonly seconds: number;
  /** true: a new connection per request. */
  readonly close: boolean;
  readonly log: (i: number, round: Round<K>) => void;
}

export async function requestTimeRounds<K extends string>(o: RoundsOptions<K>): Promise<Round<K>[]> {
  const rounds: Round<K>[] = [];
  for (let i = 0; i < o.runs; i++) {
    const round = new Map<K, WrkLatency>();
    for (const k of rotated(o.paths, i)) {
      await o.before(k);
      round.set(k, await wrkLatency(o.ns, o.urlOf(k), o.seconds, o.close));
    }
    rounds.push(round);
    o.log(i, round);
  }
  return rounds;
}

/** Per round, path k's low end minus path over's. */
export const addedUs = <K extends string>(rounds: readonly Round<K>[], k: K, over: K, low: LowEnd): number[] => rounds.map((r) => (r.get(k)?.[low] ?? NaN) - (r.get(over)?.[low] ?? NaN));

const us = (x: number): string => `${fmt(x)} µs`;
const spread = (xs: readonly number[]): string => {
  const s = summarize(xs);
  return `${us(s.median)} (${us(s.min)}–${us(s.max)})`;
};

/** One row per path: min, p1, p10, p50 over rounds, and what it adds over each of `over` (blank for itself and the paths before it there). */
export function requestTimeTable<K extends string>(
  rounds: readonly Round<K>[],
  o: { readonly paths: readonly K[]; readonly label: (k: K) => string; readonly low: LowEnd; readonly over: readonly { readonly path: K; readonly name: string }[]; readonly caption: string },
): Table {
  const stat = o.low === 'p1Us' ? 'p1' : 'min';
  return {
    caption: `${o.caption}; median over rounds (min–max); added: per round, this path's ${stat} minus the other's, with the mean (wrk counts whole µs):`,
    columns: ['path', 'min', 'p1', 'p10', 'p50', ...o.over.map((b) => `${stat} added to ${b.name}`)],
    rows: o.paths.map((k) => {
      const rs = rounds.map((r) => r.get(k)).filter((r): r is WrkLatency => r !== undefined);
      return [
        o.label(k),
        spread(rs.map((r) => r.minUs)),
        spread(rs.map((r) => r.p1Us)),
        spread(rs.map((r) => r.p10Us)),
        spread(rs.map((r) => r.p50Us)),
        ...o.over.map((b) => {
          if (o.paths.indexOf(k) <= o.paths.indexOf(b.path)) return '';
          const xs = addedUs(rounds, k, b.path, o.low);
          return `${spread(xs)}, mean ${fmt(xs.reduce((a, x) => a + x, 0) / xs.length)}`;
        }),
      ];
    }),
  };
}
