/** bench/soak.ts's report on the recorded 2-hour soak: the memory targets come from the judgement of test/node/soak-memory.ts. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { report } from '../soak.js';
import type { SoakRecord } from '../../test/node/soak.js';

const ROOT = join(import.meta.dirname, '..', '..');
const FILE = join(ROOT, 'bench', 'records', 'soak-2026-11-26T22-57-08Z.json');

void test('soak report of the 2026-11-26 record: every component judged (none "not judged"), the webhook settles, the node agent is flat, and the thirds table lists all four', () => {
  const r = JSON.parse(readFileSync(FILE, 'utf8')) as SoakRecord;
  const out = report(r, FILE, 60_000, 'image of the record');
  const memory = out.targets.filter((t) => t.target.includes('private memory'));
  assert.deepEqual(
    memory.map((t) => [t.target.split(':')[0], t.measured.split(':')[0], t.met]),
    [
      ['sidecar (client)', 'settles', true],
      ['controller leader', 'settles', true],
      ['webhook', 'settles', true],
      ['node agent', 'flat', true],
    ],
  );
  const thirds = out.tables.find((t) => t.columns.includes('last third max'));
  assert.deepEqual(
    thirds?.rows.map((row) => [row[0], row.at(-1)]),
    [
      ['sidecar (client)', 'settles'],
      ['controller leader', 'settles'],
      ['webhook', 'settles'],
      ['node agent', 'flat'],
    ],
  );
});
