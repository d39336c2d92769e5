/** The benches' SVG charts (bench/lib/svg-chart.ts, bench/lib/charts.ts): well-formed SVG, two labelled axes, one line per series. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderLineChart, ticks } from '../lib/svg-chart.js';
import { CHARTS, figure, millis, renderChart, services } from '../lib/charts.js';
import { readResults } from '../lib/results.js';

const ROOT = join(import.meta.dirname, '..', '..');

/** Well-formed XML, as far as these documents go: every tag closed in order, attributes quoted, no bare & or <. Returns the element names in order. */
function wellFormed(svg: string): string[] {
  const names: string[] = [];
  const stack: string[] = [];
  const text = svg.replace(/<\?xml[^>]*\?>/, '');
  let last = 0;
  for (const m of text.matchAll(/<(\/?)([a-zA-Z][\w:-]*)((?:\s+[\w:-]+="[^"<]*")*)\s*(\/?)>/g)) {
    const between = text.slice(last, m.index);
    assert.doesNotMatch(between, /<|&(?!amp;|lt;|gt;|quot;|#\d+;)/, `stray markup or unescaped & before ${m[0]}`);
    last = m.index + m[0].length;
    const [, close, name = '', , selfClose] = m;
    if (close) assert.equal(stack.pop(), name, `</${name}> closes another element`);
    else {
      names.push(name);
      if (!selfClose) stack.push(name);
    }
  }
  assert.doesNotMatch(text.slice(last), /</, 'markup after the last tag');
  assert.deepEqual(stack, [], 'unclosed elements');
  return names;
}

void test('a line chart is a well-formed SVG document with both axes, their labels, and one polyline and legend entry per series', () => {
  const svg = renderLineChart({
    title: 'A & B <test>',
    x: { label: 'Services', log: true },
    y: { label: 'ms' },
    series: [
      {
        name: 'ours',
        points: [
          [100, 5],
          [1000, 12],
          [10000, 90],
        ],
      },
      {
        name: 'raw',
        points: [
          [100, 4],
          [1000, 11],
          [10000, 80],
        ],
        dashed: true,
      },
      {
        name: 'only bad points',
        points: [
          [0, 1],
          [NaN, 2],
        ],
      },
    ],
  });
  const names = wellFormed(svg);
  assert.equal(names[0], 'svg');
  assert.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  assert.match(svg, /<title>A &amp; B &lt;test&gt;<\/title>/, 'the title is escaped');
  assert.equal((svg.match(/<g class="axis x-axis">/g) ?? []).length, 1);
  assert.equal((svg.match(/<g class="axis y-axis">/g) ?? []).length, 1);
  assert.match(svg, />Services<\/text>/);
  assert.match(svg, />ms<\/text>/);
  assert.match(svg, />100<\/text>[\s\S]*>1k<\/text>[\s\S]*>10k<\/text>/, 'log ticks at the powers of ten');
  assert.equal((svg.match(/<polyline /g) ?? []).length, 2, 'a series with no drawable point (0 on a log axis, NaN) is left out');
  assert.equal((svg.match(/<g class="legend">/g) ?? []).length, 2);
  assert.equal((svg.match(/stroke-dasharray/g) ?? []).length, 2, 'the dashed series: its line and its legend entry');
  assert.equal((svg.match(/<circle /g) ?? []).length, 6, 'a mark per point');
});

void test('a chart with nothing to draw is an error naming it, not an empty picture', () => {
  assert.throws(() => renderLineChart({ title: 'empty', x: { label: 'x' }, y: { label: 'y' }, series: [{ name: 's', points: [] }] }), /chart "empty": no series/);
});

void test('ticks: 1-2-5 steps covering the range, powers of ten on a log axis', () => {
  assert.deepEqual(ticks(0, 23, false), [0, 5, 10, 15, 20, 25]);
  assert.deepEqual(ticks(0, 1, false), [0, 0.2, 0.4, 0.6, 0.8, 1]);
  assert.deepEqual(ticks(3, 4200, true), [1, 10, 100, 1000, 10000]);
});

void test('figures are read from the tables as the benches write them', () => {
  assert.equal(figure('35.1 ms (29.2–42.2, n=7)'), 35.1);
  assert.equal(figure('2,891 (1613–4393)'), 2891);
  assert.ok(Number.isNaN(figure('')));
  assert.equal(millis('2.4 s'), 2400);
  assert.equal(millis('659 ms (647–736, n=3)'), 659);
  assert.equal(services('nftables: 1,000 × 10'), 1000);
  assert.equal(services('5,000 Services × 10 endpoints'), 5000);
  assert.equal(services('idle (no Services)'), 0);
});

void test('a chart is drawn from the full result, from the quick one only while there is no full one, and says so', () => {
  const results = readResults();
  const b10 = results.get('b10');
  assert.ok(b10, 'bench/results/b10.json');
  const spec = CHARTS.find((c) => c.key === 'b10');
  assert.ok(spec);
  const quick = { ...b10, key: 'b10-quick', quick: true, commit: 'q1' };
  const both = renderChart(
    spec,
    new Map([
      ['b10', b10],
      ['b10-quick', quick],
    ]),
  );
  assert.match(both ?? '', new RegExp(`commit ${b10.commit}<`));
  const onlyQuick = renderChart(spec, new Map([['b10-quick', quick]]));
  assert.match(onlyQuick ?? '', /commit q1, quick mode</);
  assert.equal(renderChart(spec, new Map()), undefined, 'no result, no chart');
});

void test('the kept results draw every chart, each with its series, and the files in docs/benchmarks/ are what they draw now', () => {
  const results = readResults();
  const expected: Record<string, number> = { 'b2-sync.svg': 4, 'b3-latency-cdf.svg': 2, 'b3real-latency-cdf.svg': 4, 'b5-memory.svg': 2, 'b10-first-packet.svg': 4, 'policy-first-packet.svg': 3 };
  assert.deepEqual(CHARTS.map((c) => c.file).sort(), Object.keys(expected).sort());
  for (const spec of CHARTS) {
    const svg = renderChart(spec, results);
    assert.ok(svg, `${spec.file}: bench/results/${spec.key}.json is missing or lacks its table`);
    wellFormed(svg);
    assert.equal((svg.match(/<polyline /g) ?? []).length, expected[spec.file], `${spec.file}: series`);
    assert.equal(readFileSync(join(ROOT, 'docs', 'benchmarks', spec.file), 'utf8'), svg, `${spec.file} is stale: node --import tsx bench/regenerate.ts`);
  }
  assert.deepEqual(readdirSync(join(ROOT, 'docs', 'benchmarks')).sort(), Object.keys(expected).sort(), 'no chart file without a spec');
});
