/**
 * The figures bench/side-by-side.ts reads out of a tree's benchmark result: table cells by caption
 * and row label, and the numbers in them. Pure, so the reading is tested without running a tree.
 */
import type { BenchResult } from './report.js';

/** Figures of one measurement of one tree, by name. */
export type Figures = Record<string, number>;

/** The first number of a table cell (`1,234 ms (…)`, `12.3`, `1.02×`). */
export function num(cell: string | undefined): number {
  const m = /-?[\d,]*\.?\d+(?:e-?\d+)?/.exec(cell ?? '');
  if (m === null) throw new Error(`side-by-side: no number in ${JSON.stringify(cell)}`);
  return Number(m[0].replace(/,/g, ''));
}

/** The row of `r`'s tables whose first cell starts with `label`, in the table whose caption starts with `caption`. */
export function row(r: BenchResult, caption: string, label: string): readonly string[] {
  const t = r.tables.find((x) => x.caption?.startsWith(caption));
  const found = t?.rows.find((x) => x[0]?.startsWith(label));
  if (found === undefined) throw new Error(`side-by-side: no row ${JSON.stringify(label)} in the table ${JSON.stringify(caption)}`);
  return found;
}

/**
 * B10's figures: per back end and Service count, the new-connection rate through the cluster IP
 * (median of the runs) and its ratio to the direct rate of the same pairs (the figure that counts on
 * a shared machine; B10's own notes say so). Rows are back end, Services, via, direct, per-pair
 * ratio, …; a row of shard tables (B10_ONLY=shards) is not one of these and is refused.
 */
export function b10Figures(r: BenchResult): Figures {
  const t = r.tables.find((x) => x.columns[0] === 'back end' && x.columns[1] === 'Services');
  if (t === undefined || t.rows.length === 0) throw new Error('side-by-side: B10 returned no table of back ends and Service counts');
  const got: Figures = {};
  for (const cells of t.rows) {
    const [backend, services, via, , perPair] = cells;
    if (backend === undefined || !/^[a-z]+$/.test(backend)) throw new Error(`side-by-side: B10 row of ${JSON.stringify(backend)} is not a back end`);
    const n = num(services).toLocaleString('en');
    got[`${backend}: ${n} Services, via cluster IP, conn/s`] = num(via);
    got[`${backend}: ${n} Services, cluster IP / direct`] = num(perPair);
  }
  return got;
}
