/** Prometheus histograms in the text format: read one series' buckets, and what share of a window fell under each bound. Pure. */

/** One Prometheus histogram's cumulative buckets (le -> count) for the series whose labels match. */
export function histogram(text: string, metric: string, match: Record<string, string>): Map<number, number> {
  const out = new Map<number, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${metric}_bucket{`)) continue;
    const close = line.indexOf('}');
    const labels = new Map<string, string>();
    for (const m of line.slice(line.indexOf('{') + 1, close).matchAll(/(\w+)="([^"]*)"/g)) labels.set(m[1] ?? '', m[2] ?? '');
    if (!Object.entries(match).every(([k, v]) => labels.get(k) === v)) continue;
    const le = labels.get('le');
    const value = Number(line.slice(close + 1).trim());
    if (le === undefined || !Number.isFinite(value)) continue;
    const bound = le === '+Inf' ? Infinity : Number(le);
    out.set(bound, (out.get(bound) ?? 0) + value);
  }
  return out;
}

/** The share of observations at or under each bound between two readings of a cumulative histogram. */
export function shareUnder(before: Map<number, number>, after: Map<number, number>): { n: number; under: [number, number][] } {
  const bounds = [...after.keys()].sort((a, b) => a - b);
  const n = (after.get(Infinity) ?? 0) - (before.get(Infinity) ?? 0);
  return { n, under: bounds.filter((b) => b !== Infinity).map((b) => [b, n === 0 ? NaN : ((after.get(b) ?? 0) - (before.get(b) ?? 0)) / n]) };
}
