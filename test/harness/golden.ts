/**
 * Golden files: `golden(folder, name, actual)` compares with test/golden/<folder>/<name>;
 * UPDATE_GOLDEN=1 rewrites the file instead (review the diff before committing).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', 'golden');

export function golden(folder: string, name: string, actual: string): void {
  const dir = join(ROOT, folder);
  const file = join(dir, name);
  if (process.env['UPDATE_GOLDEN'] === '1') {
    mkdirSync(dir, { recursive: true });
    writeFileSync(file, actual);
    return;
  }
  assert.ok(existsSync(file), `golden file ${file} is missing; run with UPDATE_GOLDEN=1 to create it`);
  assert.equal(actual, readFileSync(file, 'utf8'), `${name} differs from the golden file; if the change is intended, rerun with UPDATE_GOLDEN=1 and review the diff`);
}
