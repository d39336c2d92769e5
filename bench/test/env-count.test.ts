import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseCount } from '../lib/env-count.js';

void test('parseCount: unset or blank is the default; a whole number in range is taken; anything else names the variable, the value and the fix', () => {
  assert.equal(parseCount('B3_CYCLES', undefined, 20, 1000), 20);
  assert.equal(parseCount('B3_CYCLES', ' ', 20, 1000), 20);
  assert.equal(parseCount('B3_CYCLES', '100', 20, 1000), 100);
  for (const bad of ['0', '-3', '2.5', '1e9', 'ten', '1001', 'NaN']) {
    assert.throws(
      () => parseCount('B3_CYCLES', bad, 20, 1000),
      (e: Error) => e.message.includes(`B3_CYCLES="${bad}"`) && e.message.includes('from 1 to 1000') && e.message.includes('default 20'),
      bad,
    );
  }
});
