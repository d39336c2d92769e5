/** The figures bench/side-by-side.ts reads from a tree's B10 result, and the cell reading they rest on. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { b10Figures, num } from '../lib/side-by-side-figures.js';
import type { BenchResult } from '../lib/report.js';

const COLUMNS = ['back end', 'Services', 'via cluster IP, conn/s', 'direct, conn/s', 'cluster IP / direct (per pair)', 'cluster-IP rate / its rate at 1,000', 'cluster IP p50 / p99', 'full sync'];
const b10 = (rows: readonly (readonly string[])[]): BenchResult => ({ tables: [{ caption: '3 interleaved pairs of 2 s wrk runs per cell', columns: COLUMNS, rows }], targets: [], notes: [] });

void test('num: the first number of a cell, thousands separators and a ratio sign read', () => {
  assert.equal(num('1,234 (1,100–1,300)'), 1234);
  assert.equal(num('0.98×'), 0.98);
  assert.equal(num('12.5 / 40.1 ms'), 12.5);
  assert.throws(() => num('–'), /no number in "–"/);
});

void test('b10Figures: the cluster-IP rate and its per-pair ratio to direct, per back end and Service count', () => {
  const got = b10Figures(
    b10([
      ['nftables', '1,000', '4,210 (4,100–4,300)', '4,400 (4,300–4,500)', '0.96×', '1.00×', '3.10 / 9.00 ms', '0.41 s'],
      ['iptables', '30,000', '812 (790–820)', '4,390 (4,200–4,500)', '0.19×', '0.20×', '18.0 / 40.0 ms', '3.20 s'],
    ]),
  );
  assert.deepEqual(got, {
    'nftables: 1,000 Services, via cluster IP, conn/s': 4210,
    'nftables: 1,000 Services, cluster IP / direct': 0.96,
    'iptables: 30,000 Services, via cluster IP, conn/s': 812,
    'iptables: 30,000 Services, cluster IP / direct': 0.19,
  });
});

void test('b10Figures: a result without the table, or with shard rows, is refused with what it found', () => {
  assert.throws(() => b10Figures({ tables: [], targets: [], notes: [] }), /no table of back ends and Service counts/);
  assert.throws(() => b10Figures(b10([['nftables, 16 tables', '1,000', '4,000', '4,100', '0.98×']])), /row of "nftables, 16 tables" is not a back end/);
  assert.throws(() => b10Figures(b10([['nftables', '1,000', '–', '4,100', '0.98×']])), /no number in "–"/);
});
