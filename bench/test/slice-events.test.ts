import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { breakdown, ruleBound, type AppliedSync } from '../lib/slice-events.js';

const sync = (end: number, ms: number): AppliedSync => ({ end, ms, full: false });

void describe('bench slice events: when a rule is known in place', () => {
  void test("the sync's logged end (+1 ms) when it comes before nft monitor's report was read", () => {
    assert.deepEqual(ruleBound(1010, [sync(1000, 3), sync(1005, 2)]), { at: 1006, by: 'sync end' });
  });
  void test("nft monitor's report when it was read first, or when no sync matches", () => {
    assert.deepEqual(ruleBound(1004, [sync(1005, 3)]), { at: 1004, by: 'nft monitor' });
    assert.deepEqual(ruleBound(1004, []), { at: 1004, by: 'nft monitor' });
    // A sync that ended more than 50 ms before the report is not the one that wrote the rule.
    assert.deepEqual(ruleBound(1100, [sync(1000, 3)]), { at: 1100, by: 'nft monitor' });
  });
  void test('a sync that started after the report is not matched', () => {
    assert.deepEqual(ruleBound(1000, [sync(1010, 2)]), { at: 1000, by: 'nft monitor' });
    assert.equal(breakdown(990, 1000, [sync(1010, 2)]), undefined);
  });
});
