/**
 * Summary statistics for benchmark samples. Medians and p10/p90 rather than means: on a shared
 * 2-core machine a single descheduled run can be 10× slower, and one outlier must not move the figure.
 */

export interface Summary {
  readonly n: number;
  readonly min: number;
  readonly p10: number;
  readonly median: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
}

/** Linear-interpolated quantile (q in [0,1]) of an already sorted array. */
export function quantileSorted(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const a = sorted[lo] ?? NaN;
  const b = sorted[hi] ?? NaN;
  return a + (b - a) * (pos - lo);
}

export function summarize(samples: readonly number[]): Summary {
  const s = [...samples].sort((a, b) => a - b);
  return {
    n: s.length,
    min: s[0] ?? NaN,
    p10: quantileSorted(s, 0.1),
    median: quantileSorted(s, 0.5),
    p90: quantileSorted(s, 0.9),
    p99: quantileSorted(s, 0.99),
    max: s[s.length - 1] ?? NaN,
  };
}

/**
 * The figure that judges a p99 target: p99 itself once there are 100 samples (one or more above
 * it), else the max, which is ≥ p99 and the only honest bound from fewer samples.
 */
export function p99Bound(s: Summary): { readonly value: number; readonly name: 'p99' | 'max (≥ p99)' } {
  return s.n >= 100 ? { value: s.p99, name: 'p99' } : { value: s.max, name: 'max (≥ p99)' };
}

/** A number with about three significant figures, so tables stay readable. */
export function fmt(x: number): string {
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  if (a >= 1) return x.toFixed(2);
  return x.toPrecision(2);
}

/** `12.3 ms (min 11.0 – max 14.2, n=5)`: the median with its spread, for one table cell. */
export function fmtSummary(s: Summary, unit: string): string {
  return `${fmt(s.median)} ${unit} (${fmt(s.min)}–${fmt(s.max)}, n=${s.n})`;
}

/** ours / baseline of the medians, as `1.07×`. */
export function ratio(ours: Summary | number, baseline: Summary | number): number {
  const o = typeof ours === 'number' ? ours : ours.median;
  const b = typeof baseline === 'number' ? baseline : baseline.median;
  return o / b;
}

export function fmtRatio(r: number): string {
  return Number.isFinite(r) ? `${r.toFixed(2)}×` : '–';
}
