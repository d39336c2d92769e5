/** docs/benchmarks.md's sections (bench/lib/report.ts): one section replaced, everything else kept. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { upsertSection } from '../lib/report.js';

const PAGE = ['# Benchmarks', '', 'intro', '', '<!-- bench:b1 begin -->', 'one', '<!-- bench:b1 end -->', '', 'written by hand after b1', '', '<!-- bench:b3 begin -->', 'three', '<!-- bench:b3 end -->', ''].join('\n');

void test('upsertSection: replacing a section keeps the others and the text written by hand after one', () => {
  assert.equal(upsertSection(PAGE, 'b3', 'three'), PAGE, 'unchanged body: the page round-trips');
  const out = upsertSection(PAGE, 'b1', 'ONE');
  assert.match(out, /<!-- bench:b1 begin -->\nONE\n<!-- bench:b1 end -->\n\nwritten by hand after b1\n\n<!-- bench:b3 begin -->/);
  const added = upsertSection(PAGE, 'b2', 'two');
  assert.match(added, /written by hand after b1\n\n<!-- bench:b2 begin -->\ntwo\n<!-- bench:b2 end -->\n\n<!-- bench:b3 begin -->/, 'a new section goes in its order, after the text that follows the one before it');
  assert.ok(upsertSection(PAGE, 'soak', 'x').endsWith('<!-- bench:soak begin -->\nx\n<!-- bench:soak end -->\n'), 'a section without a number goes last');
});
