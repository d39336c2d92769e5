/**
 * The curated page's charts, each drawn from one benchmark's latest result (its tables as
 * bench/results/<id>.json keeps them): B2 sync against Services, B3 and B3-real latency CDFs,
 * B5 memory against Services, B10 first-packet rate, the policy's first-packet time against peers. Pure: results in, SVG text out.
 */
import type { ResultRecord, Table } from './report.js';
import { renderLineChart, type LineChart, type Series } from './svg-chart.js';

export interface ChartSpec {
  readonly file: string;
  /** The result it is drawn from (a full run). */
  readonly key: string;
  readonly build: (r: ResultRecord) => Omit<LineChart, 'subtitle'> | undefined;
}

const UNIT_TO_MS: Record<string, number> = { ms: 1, s: 1000, µs: 0.001, us: 0.001 };

/** The first figure of a cell ("35.1 ms (29.2–42.2, n=7)" → 35.1, "1,000" → 1000); NaN when none. */
export function figure(cell: string | undefined): number {
  const m = /-?\d[\d,]*(?:\.\d+)?|-?\.\d+/.exec(cell ?? '');
  return m ? Number(m[0].replace(/,/g, '')) : NaN;
}

/** A time cell in ms, whatever unit it carries ("2.4 s" → 2400); a bare number is taken as ms. */
export function millis(cell: string | undefined): number {
  const m = /(-?\d[\d,]*(?:\.\d+)?)\s*(ms|s|µs|us)?\b/.exec(cell ?? '');
  return m ? Number((m[1] ?? '').replace(/,/g, '')) * (UNIT_TO_MS[m[2] ?? 'ms'] ?? 1) : NaN;
}

/** A Service count from a row label ("nftables: 1,000 × 10" → 1000, "idle (no Services)" → 0). */
export function services(label: string | undefined): number {
  if (/no Services|idle/i.test(label ?? '')) return 0;
  return figure(/[\d,]+(?=\s*(?:×|Services|$))/.exec(label ?? '')?.[0] ?? label);
}

export function findTable(r: ResultRecord, first: RegExp): Table | undefined {
  return r.tables.find((t) => first.test(t.columns[0] ?? ''));
}

const col = (t: Table, name: RegExp): number => t.columns.findIndex((c) => name.test(c));

/** CDF points of a percentile row (p50, p90, p99, max). */
function cdf(t: Table, row: readonly string[]): [number, number][] {
  const at: [RegExp, number][] = [
    [/^p50$/, 0.5],
    [/^p90$/, 0.9],
    [/^p99$/, 0.99],
    [/^max$/, 1],
  ];
  return at.map(([c, q]): [number, number] => [figure(row[col(t, c)]), q]);
}

/** A row of a percentile table to draw, by its label. */
type Pick = { readonly row: RegExp; readonly name: string; readonly dashed?: boolean };

function percentileSeries(t: Table, pick: readonly Pick[]): Series[] {
  return pick.flatMap((p) => {
    const row = t.rows.find((r) => p.row.test(r[0] ?? ''));
    return row ? [{ name: p.name, points: cdf(t, row), ...(p.dashed ? { dashed: true } : {}) }] : [];
  });
}

const CDF_Y = { label: 'fraction of changes', min: 0, max: 1 } as const;

/** A latency CDF from the first percentile table (its first column unnamed): one line per picked row. */
function cdfChart(file: string, key: string, title: string, picks: readonly Pick[]): ChartSpec {
  return {
    file,
    key,
    build: (r) => {
      const t = findTable(r, /^$/);
      return t ? { title, x: { label: 'ms', log: true }, y: CDF_Y, series: percentileSeries(t, picks) } : undefined;
    },
  };
}

export const CHARTS: readonly ChartSpec[] = [
  {
    file: 'b2-sync.svg',
    key: 'b2',
    build: (r) => {
      const t = findTable(r, /^Services × endpoints/);
      if (!t) return undefined;
      const ours = col(t, /^ours: full sync/);
      const raw = col(t, /^raw /);
      const series = (backend: string, label: string): Series[] => {
        const rows = t.rows.filter((row) => (row[0] ?? '').startsWith(`${backend}:`));
        return [
          { name: `ours, ${backend}`, points: rows.map((row) => [services(row[0]), millis(row[ours])]) },
          { name: `${label} of the same text`, points: rows.map((row) => [services(row[0]), millis(row[raw])]), dashed: true },
        ];
      };
      return {
        title: 'B2: full sync into a fresh namespace (10 endpoints per Service)',
        x: { label: 'Services', log: true },
        y: { label: 'full sync, ms (median)', log: true },
        series: [...series('nftables', 'raw nft -f'), ...series('iptables', 'raw iptables-restore')],
      };
    },
  },
  cdfChart('b3-latency-cdf.svg', 'b3', 'B3: EndpointSlice write to rules in the pod (1,000 Services)', [
    { row: /^ours: write/, name: 'ours: write → rules in the pod' },
    { row: /^baseline/, name: 'baseline: write → event at a plain watch', dashed: true },
  ]),
  cdfChart('b3real-latency-cdf.svg', 'b3real', 'B3-real: EndpointSlice event to rule, sidecar vs kube-proxy (real node)', [
    { row: /^\(a\).*sidecar, in the client pod/, name: 'sidecar, endpoint added' },
    { row: /^\(b\).*sidecar, in the client pod/, name: 'sidecar, endpoint removed' },
    { row: /^\(a\).*kube-proxy/, name: 'kube-proxy, endpoint added', dashed: true },
    { row: /^\(b\).*kube-proxy/, name: 'kube-proxy, endpoint removed', dashed: true },
  ]),
  {
    file: 'b5-memory.svg',
    key: 'b5',
    build: (r) => {
      const t = findTable(r, /^cluster$/);
      if (!t) return undefined;
      const priv = col(t, /^private/);
      const byProcess = new Map<string, [number, number][]>();
      let cluster = '';
      for (const row of t.rows) {
        if (row[0]) cluster = row[0];
        const process = row[1] ?? '';
        byProcess.set(process, [...(byProcess.get(process) ?? []), [services(cluster), figure(row[priv])]]);
      }
      return {
        title: 'B5: sidecar private memory against Services (10 endpoints each)',
        x: { label: 'Services' },
        y: { label: 'private (anonymous) memory, MiB', min: 0 },
        series: [...byProcess].map(([name, points]) => ({ name, points, ...(/bare/.test(name) ? { dashed: true } : {}) })),
      };
    },
  },
  {
    file: 'b10-first-packet.svg',
    key: 'b10',
    build: (r) => {
      const t = findTable(r, /^back end$/);
      if (!t) return undefined;
      const via = col(t, /^via cluster IP/);
      const direct = col(t, /^direct/);
      const series = ['nftables', 'iptables'].flatMap((backend): Series[] => {
        const rows = t.rows.filter((row) => row[0] === backend);
        return [
          { name: `${backend}: via the cluster IP`, points: rows.map((row) => [figure(row[1]), figure(row[via])]) },
          { name: `${backend}: direct to the backend`, points: rows.map((row) => [figure(row[1]), figure(row[direct])]), dashed: true },
        ];
      });
      return { title: 'B10: new connections per second against Services', x: { label: 'Services', log: true }, y: { label: 'connections/s (median)', min: 0 }, series };
    },
  },
  {
    file: 'policy-first-packet.svg',
    key: 'policy',
    build: (r) => {
      const t = findTable(r, /^layout$/);
      if (!t) return undefined;
      const per = col(t, /^per new flow/);
      const layout = (name: string): [number, number][] => t.rows.filter((row) => row[0] === name).map((row) => [figure(row[1]), figure(row[per])]);
      const set = layout('peer set');
      const none = figure(t.rows.find((row) => row[0] === 'no policy')?.[per]);
      // No policy has no peers: drawn level across the peer counts measured.
      const flat: [number, number][] = set.map(([x]) => [x, none]);
      return {
        title: 'Policy: time per new flow against peer addresses (one egress rule)',
        x: { label: 'peer addresses', log: true },
        y: { label: 'µs per new flow (median)', log: true },
        series: [
          { name: 'peer set (ours)', points: set },
          { name: 'one rule per peer', points: layout('one rule per peer'), dashed: true },
          { name: 'no policy', points: flat, dashed: true },
        ],
      };
    },
  },
];

/**
 * The chart's SVG from its benchmark's full result, or from its quick one while there is no full
 * result (a checkout where only `npm run bench -- --quick` ran); undefined when neither has the table.
 */
export function renderChart(spec: ChartSpec, results: ReadonlyMap<string, ResultRecord>): string | undefined {
  const r = results.get(spec.key) ?? results.get(`${spec.key}-quick`);
  if (!r) return undefined;
  const c = spec.build(r);
  if (!c) return undefined;
  return renderLineChart({ ...c, subtitle: `${r.date.slice(0, 10)}, commit ${r.commit}${r.quick ? ', quick mode' : ''}` });
}
