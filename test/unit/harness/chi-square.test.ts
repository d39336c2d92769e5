import assert from 'node:assert/strict';
import { test } from 'node:test';
import { chiSquareUniform } from '../../harness/chi-square.js';

void test('chiSquareUniform: equal and chance-sized differences pass; one-sided shares fail', () => {
  assert.equal(chiSquareUniform([50, 50]).statistic, 0);
  assert.equal(chiSquareUniform([58, 42]).uniform, true, '2.56 < 10.83');
  assert.equal(chiSquareUniform([100, 0]).uniform, false);
  assert.equal(chiSquareUniform([70, 30]).uniform, false, '16 > 10.83');
  const three = chiSquareUniform([40, 30, 30]);
  assert.equal(three.degreesOfFreedom, 2);
  assert.equal(three.uniform, true);
  assert.equal(chiSquareUniform([90, 5, 5]).uniform, false);
});

void test('chiSquareUniform: too few samples or backends is an error, not a pass', () => {
  assert.throws(() => chiSquareUniform([3, 2]), /need at least 10/);
  assert.throws(() => chiSquareUniform([10]), /1 backends/);
});
