/**
 * A line chart as a standalone SVG document: axes with ticks (linear or base-10 log), one
 * polyline with point marks per series, a legend. Pure, no dependencies: the benches' charts are
 * a handful of series of a few points each, and a reader opens them in the browser or on GitHub.
 */

export interface Series {
  readonly name: string;
  /** [x, y] pairs; points with a non-finite coordinate (or ≤ 0 on a log axis) are left out. */
  readonly points: readonly (readonly [number, number])[];
  /** Drawn dashed: a baseline beside the series it is compared with. */
  readonly dashed?: boolean;
}

export interface Axis {
  readonly label: string;
  readonly log?: boolean;
  /** Forced bounds; otherwise the data's, padded to round ticks. */
  readonly min?: number;
  readonly max?: number;
}

export interface LineChart {
  readonly title: string;
  readonly x: Axis;
  readonly y: Axis;
  readonly series: readonly Series[];
  /** A line under the title: the run it was drawn from. */
  readonly subtitle?: string;
}

const W = 720;
const H = 420;
const M = { left: 72, right: 28, top: 52, bottom: 56 } as const;
const LEGEND_ROW = 18;
const COLOURS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'] as const;

export function escapeXml(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Short tick text: 1,000 → "1k", 0.25 → "0.25", 12000 → "12k". */
export function tickLabel(v: number): string {
  const a = Math.abs(v);
  if (a >= 1e6) return `${+(v / 1e6).toPrecision(3)}M`;
  if (a >= 1e3) return `${+(v / 1e3).toPrecision(3)}k`;
  return `${+v.toPrecision(3)}`;
}

/** Round tick values covering [lo, hi]: 1-2-5 steps (linear) or powers of ten (log). */
export function ticks(lo: number, hi: number, log: boolean): number[] {
  if (log) {
    const out: number[] = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) out.push(10 ** e);
    return out;
  }
  const span = hi - lo || Math.abs(hi) || 1;
  const raw = span / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((f) => f * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  for (let v = Math.floor(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  if ((out.at(-1) ?? -Infinity) < hi) out.push(+(out.at(-1)! + step).toPrecision(12));
  return out;
}

function usable(p: readonly [number, number], x: Axis, y: Axis): boolean {
  return Number.isFinite(p[0]) && Number.isFinite(p[1]) && (!x.log || p[0] > 0) && (!y.log || p[1] > 0);
}

function bounds(values: readonly number[], axis: Axis): [number, number] {
  let lo = axis.min ?? Math.min(...values);
  let hi = axis.max ?? Math.max(...values);
  if (!axis.log && axis.min === undefined && lo > 0 && lo < hi / 3) lo = 0;
  if (lo === hi) [lo, hi] = axis.log ? [lo / 10, hi * 10] : [lo - 1, hi + 1];
  const t = ticks(lo, hi, axis.log ?? false);
  // A log axis starts at a power of ten and ends at the data: a whole empty decade says nothing.
  const top = axis.log ? hi * 1.2 : Math.max(hi, t.at(-1) ?? hi);
  return [axis.min ?? Math.min(lo, t[0] ?? lo), axis.max ?? top];
}

function scale(lo: number, hi: number, log: boolean, from: number, to: number): (v: number) => number {
  const f = log ? Math.log10 : (v: number): number => v;
  const a = f(lo);
  const b = f(hi);
  return (v) => from + ((f(v) - a) / (b - a || 1)) * (to - from);
}

const n = (v: number): string => (Math.round(v * 10) / 10).toString();

export function renderLineChart(c: LineChart): string {
  const series = c.series.map((s) => ({ ...s, points: s.points.filter((p) => usable(p, c.x, c.y)) })).filter((s) => s.points.length > 0);
  if (series.length === 0) throw new Error(`chart "${c.title}": no series has a point to draw`);
  const legendH = series.length * LEGEND_ROW + 8;
  const height = H + legendH;
  const [x0, x1] = bounds(
    series.flatMap((s) => s.points.map((p) => p[0])),
    c.x,
  );
  const [y0, y1] = bounds(
    series.flatMap((s) => s.points.map((p) => p[1])),
    c.y,
  );
  const plotBottom = H - M.bottom;
  const sx = scale(x0, x1, c.x.log ?? false, M.left, W - M.right);
  const sy = scale(y0, y1, c.y.log ?? false, plotBottom, M.top);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" font-family="sans-serif" font-size="12">`,
    `<title>${escapeXml(c.title)}</title>`,
    `<rect width="${W}" height="${height}" fill="#fff"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="15" font-weight="bold">${escapeXml(c.title)}</text>`,
  ];
  if (c.subtitle) out.push(`<text x="${W / 2}" y="38" text-anchor="middle" fill="#555">${escapeXml(c.subtitle)}</text>`);
  out.push('<g class="grid" stroke="#ddd">');
  const xt = ticks(x0, x1, c.x.log ?? false).filter((t) => t >= x0 && t <= x1);
  const yt = ticks(y0, y1, c.y.log ?? false).filter((t) => t >= y0 && t <= y1);
  for (const t of xt) out.push(`<line x1="${n(sx(t))}" y1="${M.top}" x2="${n(sx(t))}" y2="${plotBottom}"/>`);
  for (const t of yt) out.push(`<line x1="${M.left}" y1="${n(sy(t))}" x2="${W - M.right}" y2="${n(sy(t))}"/>`);
  out.push('</g>');
  out.push(`<g class="axis x-axis"><line x1="${M.left}" y1="${plotBottom}" x2="${W - M.right}" y2="${plotBottom}" stroke="#000"/>`);
  for (const t of xt) out.push(`<text x="${n(sx(t))}" y="${plotBottom + 16}" text-anchor="middle">${tickLabel(t)}</text>`);
  out.push(`<text x="${(M.left + W - M.right) / 2}" y="${plotBottom + 38}" text-anchor="middle">${escapeXml(c.x.label)}</text></g>`);
  out.push(`<g class="axis y-axis"><line x1="${M.left}" y1="${M.top}" x2="${M.left}" y2="${plotBottom}" stroke="#000"/>`);
  for (const t of yt) out.push(`<text x="${M.left - 6}" y="${n(sy(t) + 4)}" text-anchor="end">${tickLabel(t)}</text>`);
  const my = (M.top + plotBottom) / 2;
  out.push(`<text x="16" y="${my}" text-anchor="middle" transform="rotate(-90 16 ${my})">${escapeXml(c.y.label)}</text></g>`);
  series.forEach((s, i) => {
    const colour = COLOURS[i % COLOURS.length] ?? '#000';
    const pts = s.points.map((p) => `${n(sx(p[0]))},${n(sy(p[1]))}`);
    out.push(`<g class="series" data-name="${escapeXml(s.name)}">`);
    out.push(`<polyline fill="none" stroke="${colour}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''} points="${pts.join(' ')}"/>`);
    for (const p of pts) {
      const [px, py] = p.split(',');
      out.push(`<circle cx="${px}" cy="${py}" r="3" fill="${colour}"/>`);
    }
    out.push('</g>');
    const ly = H + i * LEGEND_ROW;
    out.push(
      `<g class="legend"><line x1="${M.left}" y1="${ly}" x2="${M.left + 24}" y2="${ly}" stroke="${colour}" stroke-width="2"${s.dashed ? ' stroke-dasharray="6 4"' : ''}/>` +
        `<text x="${M.left + 30}" y="${ly + 4}">${escapeXml(s.name)}</text></g>`,
    );
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
