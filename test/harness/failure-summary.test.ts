import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FailureCollector, errorText, type ReporterEvent } from './failure-summary.js';
import { reporterArgs } from '../run.js';

const start = (name: string, nesting: number, file = '/r/test/a.test.ts'): ReporterEvent => ({ type: 'test:start', data: { name, nesting, file } });
const fail = (name: string, nesting: number, error: unknown, file = '/r/test/a.test.ts'): ReporterEvent => ({ type: 'test:fail', data: { name, nesting, file, details: { error } } });
const out = (message: string, file = '/r/test/a.test.ts'): ReporterEvent => ({ type: 'test:stdout', data: { message, file } });

void test("failure summary: a failed test is named with its suites and file, its cause's message and its file's last lines; suites' roll-ups are not counted twice", () => {
  const c = new FailureCollector({ detailed: 5, contextLines: 2, errorChars: 1000, lineChars: 100 }, '/r');
  const wrapped = Object.assign(new Error('test failed'), { code: 'ERR_TEST_FAILURE', failureType: 'testCodeFailure', cause: new Error('p99 1200 ms over the bound 1000 ms') });
  for (const e of [
    start('real node', 0),
    out('# node: one\n# node: two\n'),
    start('harness', 1),
    out('# node: three'),
    start('soak', 1),
    fail('soak', 1, wrapped),
    out('# other file', '/r/test/b.test.ts'),
    fail('real node', 0, { failureType: 'subtestsFailed' }),
  ])
    c.feed(e);
  assert.deepEqual(c.failures, [{ file: 'test/a.test.ts', path: ['real node', 'soak'], error: 'p99 1200 ms over the bound 1000 ms', before: ['# node: two', '# node: three'] }]);
  const lines = c.summary();
  assert.equal(lines[0], '# ===== 1 failed test(s) =====');
  assert.equal(lines[1], '# 1. real node > soak  (test/a.test.ts)');
  assert.ok(lines.includes('#      error: p99 1200 ms over the bound 1000 ms'), lines.join('\n'));
  assert.ok(lines.includes('#        # node: three'));
  assert.equal(lines.at(-1), '# ===== end of failed tests =====');
});

void test('failure summary: nothing failed prints nothing; past the detailed count only names; long errors are clipped', () => {
  assert.deepEqual(new FailureCollector().summary(), []);
  const c = new FailureCollector({ detailed: 1, contextLines: 1, errorChars: 10, lineChars: 100 });
  c.feed(fail('first', 0, new Error('x'.repeat(50))));
  c.feed(fail('second', 0, new Error('y')));
  const s = c.summary();
  assert.ok(
    s.some((l) => l.includes('xxxxxxxxxx… (40 more characters)')),
    s.join('\n'),
  );
  assert.ok(s.includes('# 2. second  (/r/test/a.test.ts)'), s.join('\n'));
  assert.ok(!s.some((l) => l.includes('error: y')), 'the second is named only');
  assert.equal(errorText('plain'), 'plain');
  assert.equal(errorText({ a: 1 }), '{"a":1}');
});

void test("failure summary: through `npm test`'s reporters, a failing file prints the block after TAP's closing counts", (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'failure-summary-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'f.test.mjs');
  writeFileSync(file, "import { test } from 'node:test';\ntest('ok one', () => {});\ntest('broken one', () => { console.log('# last words'); throw new Error('it broke'); });\n");
  // Without node:test's marker of a child file, or the child would think it is nested in this test.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'NODE_TEST_CONTEXT'));
  const r = spawnSync(process.execPath, ['--test', ...reporterArgs(dir), file], { encoding: 'utf8', timeout: 60_000, env });
  assert.equal(r.status, 1, r.stderr);
  const tail = r.stdout.slice(r.stdout.indexOf('# fail 1'));
  assert.match(tail, /# ===== 1 failed test\(s\) =====\n# 1\. broken one {2}\(.*f\.test\.mjs\)\n# {6}error: it broke\n/);
  assert.match(tail, /# last words/);
  assert.match(r.stdout, /^not ok 2 - broken one$/m, 'TAP is still printed');
});
