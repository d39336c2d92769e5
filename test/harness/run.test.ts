import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { findTests } from '../run.js';

void test('findTests: every *.test.ts below a folder, sorted; helpers, node_modules and dot folders left out', (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'find-tests-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  for (const d of ['unit/a', 'kube', 'node_modules/x', '.hidden']) mkdirSync(join(dir, d), { recursive: true });
  for (const f of ['unit/a/z.test.ts', 'unit/b.test.ts', 'kube/client.test.ts', 'kube/helper.ts', 'kube/x.test.js', 'node_modules/x/y.test.ts', '.hidden/h.test.ts']) {
    writeFileSync(join(dir, f), '');
  }
  assert.deepEqual(findTests(dir).map((f) => relative(dir, f)), ['kube/client.test.ts', 'unit/a/z.test.ts', 'unit/b.test.ts']);
  assert.deepEqual(findTests(join(dir, 'unit', 'b.test.ts')).map((f) => relative(dir, f)), ['unit/b.test.ts']);
  assert.deepEqual(findTests(join(dir, 'missing')), []);
});
