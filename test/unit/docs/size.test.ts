/** What keeps every clone light: docs/benchmarks.md under 40 KB, and the raw bench records git tracks under their cap. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..', '..');
const PAGE_CAP = 40 * 1024;
/** docs/decisions/0041-bench-records-out-of-git.md: the one soak record the unit tests read. */
const RECORDS_CAP = 1.5 * 1024 * 1024;

void test('docs/benchmarks.md stays under 40 KB', () => {
  const size = statSync(join(ROOT, 'docs', 'benchmarks.md')).size;
  assert.ok(size < PAGE_CAP, `docs/benchmarks.md is ${size} bytes (cap ${PAGE_CAP}): shorten the hand-written text, or show fewer tables inline (bench/lib/results.ts INLINE_TABLE_CHARS)`);
});

void test('bench/records/ holds at most 1.5 MiB in git', () => {
  let tracked: string[];
  try {
    tracked = execFileSync('git', ['ls-files', '-z', 'bench/records'], { cwd: ROOT, encoding: 'utf8' }).split('\0').filter(Boolean);
  } catch {
    // Not a git checkout (a source archive): nothing is tracked, so nothing to cap.
    tracked = [];
  }
  const sizes = tracked.map((f) => [f, statSync(join(ROOT, f)).size] as const);
  const total = sizes.reduce((s, [, n]) => s + n, 0);
  assert.ok(total <= RECORDS_CAP, `bench/records/ tracks ${total} bytes (cap ${RECORDS_CAP}): ${sizes.map(([f, n]) => `${f} ${n}`).join(', ')}; raw records stay local (.gitignore)`);
});
