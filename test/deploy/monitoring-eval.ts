/**
 * Evaluating the chart's alert expressions and dashboard queries on scraped series with promtool
 * alone (no Prometheus server): scrapes become `promtool test rules` input series, one scrape round
 * per evaluation step, and each expression becomes an alert that fires when the expression returns
 * a number. Pure functions here; the promtool run and the scrapes are the callers' (the unit tests
 * and test/node/monitoring.ts).
 */

/** One sample of the text exposition format. */
export interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** One /metrics answer: its samples, the families' types, and every family it declares. */
export interface Exposition {
  readonly samples: readonly Sample[];
  /** Family name → counter, gauge, histogram, summary or untyped. */
  readonly types: ReadonlyMap<string, string>;
}

/** The value of a label in the text format: `\\`, `\"` and `\n` are its only escapes. */
function readQuoted(s: string, start: number): { value: string; end: number } {
  let out = '';
  for (let i = start; i < s.length; i++) {
    const c = s[i];
    if (c === '"') return { value: out, end: i + 1 };
    if (c === '\\') {
      const n = s[++i];
      out += n === 'n' ? '\n' : (n ?? '');
    } else out += c;
  }
  throw new Error(`unterminated label value in ${JSON.stringify(s)}`);
}

/** A sample value as Prometheus reads one: Go's ParseFloat, so NaN and Inf in any case (prom-client writes "Nan"). */
function parseValue(t: string): number {
  const l = t.toLowerCase();
  if (l === '+inf' || l === 'inf') return Infinity;
  if (l === '-inf') return -Infinity;
  if (l === 'nan') return NaN;
  const v = Number(t);
  if (t === '' || Number.isNaN(v)) throw new Error(`not a sample value: ${JSON.stringify(t)}`);
  return v;
}

/** One sample line: `name{label="value",...} value [timestamp]`. */
function parseSampleLine(line: string): Sample {
  const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)?.[0];
  if (name === undefined) throw new Error(`not a sample line: ${JSON.stringify(line)}`);
  const labels: Record<string, string> = {};
  let i = name.length;
  if (line[i] === '{') {
    i++;
    for (;;) {
      while (line[i] === ' ' || line[i] === ',') i++;
      if (line[i] === '}') {
        i++;
        break;
      }
      const key = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(line.slice(i))?.[0];
      if (key === undefined || line[i + key.length] !== '=' || line[i + key.length + 1] !== '"') throw new Error(`bad labels in ${JSON.stringify(line)}`);
      const q = readQuoted(line, i + key.length + 2);
      labels[key] = q.value;
      i = q.end;
    }
  }
  const [value = ''] = line.slice(i).trim().split(/\s+/);
  return { name, labels, value: parseValue(value) };
}

/** The Prometheus text format (what the programs' prom-client registries serve). */
export function parseExposition(text: string): Exposition {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (line === '') continue;
    if (line.startsWith('#')) {
      const m = /^#\s+TYPE\s+(\S+)\s+(\S+)/.exec(line);
      if (m?.[1] !== undefined && m[2] !== undefined) types.set(m[1], m[2]);
      continue;
    }
    samples.push(parseSampleLine(line));
  }
  return { samples, types };
}

/** The family a series name belongs to: a histogram's or summary's `_bucket`, `_sum`, `_count` → it. */
export function familyOf(name: string, types: ReadonlyMap<string, string>): string {
  if (types.has(name)) return name;
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  return m?.[1] !== undefined && types.has(m[1]) ? m[1] : name;
}

/** Whether a series only grows: a counter, or a histogram's or summary's buckets, sum and count. */
export function cumulative(name: string, types: ReadonlyMap<string, string>): boolean {
  const t = types.get(familyOf(name, types));
  return t === 'counter' || t === 'histogram' || t === 'summary';
}

/** One target's scrape: the labels Prometheus gives the target (namespace, pod, job, ...) and its answer. */
export interface Scrape {
  readonly target: Readonly<Record<string, string>>;
  readonly exposition: Exposition;
}

/** A `promtool test rules` input series. */
export interface InputSeries {
  readonly series: string;
  readonly values: string;
}

/** A series selector in PromQL's text: `name{k="v",...}`, labels sorted, values quoted as Go strings. */
export function seriesText(name: string, labels: Readonly<Record<string, string>>): string {
  const ls = Object.keys(labels)
    .sort()
    .map((k) => `${k}=${JSON.stringify(labels[k])}`);
  return ls.length === 0 ? name : `${name}{${ls.join(',')}}`;
}

function valueText(v: number): string {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

/**
 * The labels a sample has in Prometheus: its own, with the target's added. A scraped label the
 * target also sets is kept as exported_<name> (honor_labels false, the operator's default).
 */
export function withTarget(sample: Readonly<Record<string, string>>, target: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(sample)) out[k in target ? `exported_${k}` : k] = v;
  return { ...out, ...target };
}

/**
 * Scrape rounds as input series, one round per evaluation step (`interval`), in order. A series
 * missing from a round is `_` there. With `hold` > 0 the last round is held for that many more
 * steps: gauges keep their last value, cumulative series keep growing by their last step, so the
 * condition the last two rounds show stays true as long as a rule's `for` needs.
 */
export function inputSeries(rounds: readonly (readonly Scrape[])[], hold = 0): InputSeries[] {
  const series = new Map<string, { values: (number | undefined)[]; grows: boolean }>();
  rounds.forEach((round, r) => {
    for (const { target, exposition } of round) {
      for (const s of exposition.samples) {
        const key = seriesText(s.name, withTarget(s.labels, target));
        let e = series.get(key);
        if (e === undefined) series.set(key, (e = { values: Array<number | undefined>(rounds.length).fill(undefined), grows: cumulative(s.name, exposition.types) }));
        e.values[r] = s.value;
      }
    }
  });
  return [...series].map(([key, { values, grows }]) => {
    const text = values.map((v) => (v === undefined ? '_' : valueText(v)));
    const last = values[values.length - 1];
    const before = values[values.length - 2];
    if (hold > 0 && last !== undefined && Number.isFinite(last)) {
      const step = grows && before !== undefined && Number.isFinite(before) ? last - before : 0;
      text[text.length - 1] = `${valueText(last)}${step < 0 ? '-' : '+'}${valueText(Math.abs(step))}x${hold}`;
    }
    return { series: key, values: text.join(' ') };
  });
}

const COMPARISONS = ['==', '!=', '>=', '<=', '>', '<'] as const;

/**
 * An alert's expression without its threshold: the left side of the last comparison outside any
 * parentheses, braces, brackets or quotes (`max by (pod) (x) >= 3` → `max by (pod) (x)`). An
 * expression without one comes back as it is.
 */
export function withoutThreshold(expr: string): string {
  let depth = 0;
  let quote: string | undefined;
  let cut = -1;
  for (let i = 0; i < expr.length; i++) {
    const c = expr[i] ?? '';
    if (quote !== undefined) {
      if (c === '\\') i++;
      else if (c === quote) quote = undefined;
      continue;
    }
    if (c === '"' || c === "'" || c === '`') quote = c;
    else if ('({['.includes(c)) depth++;
    else if (')}]'.includes(c)) depth--;
    else if (depth === 0) {
      const op = COMPARISONS.find((o) => expr.startsWith(o, i));
      // `=~` and `!~` only occur inside braces; `!=` at depth 0 is a comparison.
      if (op !== undefined) {
        cut = i;
        i += op.length - 1;
      }
    }
  }
  return cut < 0 ? expr.trim() : expr.slice(0, cut).trim();
}

/** The multus-proxy metric names an expression reads. */
export function metricNames(expr: string): string[] {
  return [...new Set([...expr.matchAll(/\bmultus_proxy_[a-z0-9_]+/g)].map((m) => m[0]))];
}

/** An expression to evaluate, and where it comes from (for messages). */
export interface Query {
  readonly where: string;
  readonly expr: string;
}

/**
 * Alerting rules, one per query, named Q0, Q1, ...: each fires (with no labels) when its query
 * returns at least one number; NaN (a quantile of nothing) does not count.
 */
export function dataRules(queries: readonly Query[]): { groups: { name: string; rules: { alert: string; expr: string }[] }[] } {
  return { groups: [{ name: 'returns-data', rules: queries.map((q, i) => ({ alert: `Q${i}`, expr: `count((${q.expr}) >= -Inf)` })) }] };
}

/** The `promtool test rules` file for dataRules: every query evaluated at `at` over `series`. */
export function dataTest(ruleFile: string, queries: readonly Query[], series: readonly InputSeries[], at: string): unknown {
  return {
    rule_files: [ruleFile],
    evaluation_interval: '1m',
    tests: [
      {
        name: 'returns-data',
        interval: '1m',
        input_series: series,
        alert_rule_test: queries.map((_, i) => ({ eval_time: at, alertname: `Q${i}`, exp_alerts: [{ exp_labels: {} }] })),
      },
    ],
  };
}

/** The alert names promtool reports as failed (`alertname: Q3, time: 1m`), from its output. */
export function failedAlerts(output: string): Set<string> {
  return new Set([...output.matchAll(/alertname: ([A-Za-z0-9_:]+),/g)].map((m) => m[1] ?? ''));
}

/** What a query found: a number, or only the series its metrics name, or not even that. */
export type Found = 'data' | 'series' | 'declared' | 'none';

/**
 * How a query that returned no number stands: `series` when every metric it names has series in
 * the scrapes (its label selection or rate had nothing yet), `declared` when some metric is only
 * declared (a labelled counter nothing has counted yet: prom-client serves its HELP and TYPE
 * only), `none` when a metric is in no scrape at all.
 */
export function foundWithoutData(expr: string, scrapes: readonly Scrape[]): Exclude<Found, 'data'> {
  let worst: Exclude<Found, 'data'> = 'series';
  for (const name of metricNames(expr)) {
    const hasSeries = scrapes.some((s) => s.exposition.samples.some((x) => x.name === name));
    if (hasSeries) continue;
    const declared = scrapes.some((s) => s.exposition.types.has(familyOf(name, s.exposition.types)));
    if (!declared) return 'none';
    worst = 'declared';
  }
  return worst;
}
