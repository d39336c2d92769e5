import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { closingLine, closingLines, findTests, OrderedOutput, parseArgs, planTiers, tierOf } from '../run.js';
import { mergeSummaries } from './failure-summary.js';

void test('findTests: every *.test.ts below a folder, sorted; helpers, node_modules and dot folders left out', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'find-tests-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const d of ['unit/a', 'kube', 'node_modules/x', '.hidden']) mkdirSync(join(dir, d), { recursive: true });
  for (const f of ['unit/a/z.test.ts', 'unit/b.test.ts', 'kube/client.test.ts', 'kube/helper.ts', 'kube/x.test.js', 'node_modules/x/y.test.ts', '.hidden/h.test.ts']) {
    writeFileSync(join(dir, f), '');
  }
  assert.deepEqual(
    findTests(dir).map((f) => relative(dir, f)),
    ['kube/client.test.ts', 'unit/a/z.test.ts', 'unit/b.test.ts'],
  );
  assert.deepEqual(
    findTests(join(dir, 'unit', 'b.test.ts')).map((f) => relative(dir, f)),
    ['unit/b.test.ts'],
  );
  assert.deepEqual(findTests(join(dir, 'missing')), []);
});

void test('tierOf: test/unit and bench are unit, test/node and the files sharing its host state are node, the rest cluster', () => {
  assert.equal(tierOf('test/unit/cli.test.ts'), 'unit');
  assert.equal(tierOf('bench/test/stats.test.ts'), 'unit');
  assert.equal(tierOf('test/node/realnode.test.ts'), 'node');
  assert.equal(tierOf('test/deploy/image-run.test.ts'), 'node');
  assert.equal(tierOf('test/deploy/helm.test.ts'), 'cluster');
  assert.equal(tierOf('test/harness/run.test.ts'), 'cluster');
});

void test('planTiers: tiers in order, unit files in parallel, the others one at a time, empty tiers left out', () => {
  const files = ['test/kube/a.test.ts', 'test/node/n.test.ts', 'test/unit/u.test.ts', 'test/unit/v.test.ts'];
  assert.deepEqual(planTiers(files, [], 2), [
    { tier: 'unit', files: ['test/unit/u.test.ts', 'test/unit/v.test.ts'], concurrency: 2 },
    { tier: 'cluster', files: ['test/kube/a.test.ts'], concurrency: 1 },
    { tier: 'node', files: ['test/node/n.test.ts'], concurrency: 1 },
  ]);
  assert.deepEqual(
    planTiers(files, ['cluster'], 4).map((r) => r.tier),
    ['cluster'],
  );
  assert.deepEqual(planTiers(['test/unit/u.test.ts'], ['node'], 2), []);
});

void test('parseArgs: --tier X, --tier=X and --unit (its alias) pick tiers; an unknown tier is refused by name', () => {
  assert.deepEqual(parseArgs(['--tier', 'cluster', 'test/kube']), { tiers: ['cluster'], targets: ['test/kube'] });
  assert.deepEqual(parseArgs(['--unit']), { tiers: ['unit'], targets: [] });
  assert.deepEqual(parseArgs(['--tier=node', '--tier', 'unit']), { tiers: ['node', 'unit'], targets: [] });
  assert.throws(() => parseArgs(['--tier', 'e2e']), /--tier e2e: expected one of unit, cluster, node/);
  assert.throws(() => parseArgs(['--tier']), /expected one of/);
});

void test('closing lines: only top-level TAP totals are read; the run sums counts and reports its own wall time', () => {
  assert.deepEqual(closingLine('# pass 12'), ['pass', 12]);
  assert.deepEqual(closingLine('# duration_ms 1234.5'), ['duration_ms', 1234.5]);
  assert.equal(closingLine('    # pass 3'), undefined);
  assert.equal(closingLine('# passing 3'), undefined);
  const lines = closingLines(
    [
      { tests: 3, pass: 2, fail: 1 },
      { tests: 5, pass: 5 },
    ],
    42,
  );
  assert.deepEqual(lines, ['# tests 8', '# suites 0', '# pass 7', '# fail 1', '# cancelled 0', '# skipped 0', '# todo 0', '# duration_ms 42.000']);
});

void test('OrderedOutput: the first unfinished stream prints at once, later ones are held and kept whole', () => {
  const printed: string[] = [];
  const out = new OrderedOutput(3, (l) => printed.push(l));
  out.line(2, 'c1');
  out.line(0, 'a1');
  out.line(1, 'b1');
  out.end(2);
  out.line(0, 'a2');
  assert.deepEqual(printed, ['a1', 'a2']);
  out.end(0);
  assert.deepEqual(printed, ['a1', 'a2', 'b1']);
  out.line(1, 'b2');
  out.end(1);
  assert.deepEqual(printed, ['a1', 'a2', 'b1', 'b2', 'c1']);
});

void test("mergeSummaries: the tiers' failure blocks become one, renumbered; nothing failed gives nothing", () => {
  const a = '# ===== 1 failed test(s) =====\n# 1. s > t  (test/unit/a.test.ts)\n#      error: boom\n# ===== end of failed tests =====\n';
  const b = '# ===== 2 failed test(s) =====\n# 1. u  (test/node/n.test.ts)\n# 2. v\n# ===== end of failed tests =====\n';
  assert.deepEqual(mergeSummaries([a, '', b]), [
    '# ===== 3 failed test(s) =====',
    '# 1. s > t  (test/unit/a.test.ts)',
    '#      error: boom',
    '# 2. u  (test/node/n.test.ts)',
    '# 3. v',
    '# ===== end of failed tests =====',
  ]);
  assert.deepEqual(mergeSummaries(['', '']), []);
});
