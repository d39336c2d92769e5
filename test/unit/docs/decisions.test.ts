/** docs/decisions/: every record has its four sections and a status, and the index lists each one as it is. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const DIR = join(import.meta.dirname, '..', '..', '..', 'docs', 'decisions');
const RECORD = /^(\d{4})-[a-z0-9]+(?:-[a-z0-9]+)*\.md$/;
const records = readdirSync(DIR).filter((f) => RECORD.test(f)).sort();
const index = readFileSync(join(DIR, 'README.md'), 'utf8');

interface Parsed { readonly title: string; readonly status: string; readonly sections: readonly string[] }

function parse(file: string): Parsed {
  const text = readFileSync(join(DIR, file), 'utf8');
  const number = file.slice(0, 4);
  const title = new RegExp(`^# ${number}\\. (.+)$`, 'm').exec(text)?.[1] ?? '';
  const status = /^## Status\n\n(.+)$/m.exec(text)?.[1] ?? '';
  const sections = [...text.matchAll(/^## (.+)$/gm)].map((m) => m[1] ?? '');
  return { title, status, sections };
}

void test('the folder holds decision records, and no two share a number', () => {
  assert.ok(records.length > 0, `no NNNN-title.md file in ${DIR}`);
  const numbers = records.map((f) => f.slice(0, 4));
  const twice = numbers.filter((n, i) => numbers.indexOf(n) !== i);
  assert.deepEqual(twice, [], `numbers used twice: ${twice.join(', ')}`);
});

void test('every record has a "# NNNN. Title" heading and Status, Context, Decision, Consequences in that order', () => {
  for (const f of records) {
    const p = parse(f);
    assert.ok(p.title.length > 0, `${f}: first heading must be "# ${f.slice(0, 4)}. <title>"`);
    assert.deepEqual(p.sections, ['Status', 'Context', 'Decision', 'Consequences'], `${f}: sections`);
  }
});

void test('every status is Accepted or "Superseded by" an existing record', () => {
  for (const f of records) {
    const { status } = parse(f);
    if (status === 'Accepted') continue;
    const m = /^Superseded by \[(\d{4})\]\((\d{4}-[^)]+\.md)\)$/.exec(status);
    assert.ok(m, `${f}: status ${JSON.stringify(status)}: use "Accepted" or "Superseded by [NNNN](NNNN-title.md)"`);
    assert.ok(records.includes(m[2] ?? ''), `${f}: superseded by ${m[2]}, which is not in docs/decisions/`);
    assert.equal(m[2]?.slice(0, 4), m[1], `${f}: link text and target name different records`);
  }
});

void test('the index lists every record with its title and status, and nothing else', () => {
  const rows = [...index.matchAll(/^\| \[(\d{4})\]\(([^)]+)\) \| (.+) \| (.+) \|$/gm)];
  const listed = rows.map((m) => m[2] ?? '');
  assert.deepEqual([...listed].sort(), records, 'docs/decisions/README.md rows (add a row "| [NNNN](file) | title | status |" per record)');
  for (const m of rows) {
    const p = parse(m[2] ?? '');
    assert.equal(m[3], p.title, `${m[2]}: title in the index`);
    assert.equal(m[4], p.status, `${m[2]}: status in the index`);
  }
});
