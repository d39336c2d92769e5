import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { p99Bound, summarize } from '../../harness/stats.js';

void describe('bench stats: the figure that judges a p99 target', () => {
  void test('under 100 samples the max judges (the only bound ≥ p99); from 100 on, p99 itself', () => {
    const slow = (n: number): number[] => Array.from({ length: n }, (_, i) => (i === n - 1 ? 50 : 2 + (i % 3)));
    const few = summarize(slow(50));
    assert.deepEqual(p99Bound(few), { value: 50, name: 'max (≥ p99)' });
    const many = summarize(slow(200));
    const b = p99Bound(many);
    assert.equal(b.name, 'p99');
    assert.ok(b.value < 50 && b.value === many.p99, `one slow sample of 200 stays above p99 (${b.value})`);
  });
});
