/**
 * The nftables back end's endpoint ranges (src/dataplane/nft/pick-ranges.ts), property-tested:
 * N ranges cover 0..M-1 exactly (in order, no gap, no overlap) and their sizes differ by at most 1;
 * the element text made from the shared range heads equals the ranges' own.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { endpointRanges, equalRanges, PICK_MODULUS, rangeHeads } from '../../src/dataplane/nftables/pick-ranges.js';
import { mapElementsText, mapRanges, rangeText } from '../../src/dataplane/nftables/render.js';

function checkCover(n: number, m: number): void {
  const r = equalRanges(n, m);
  assert.equal(r.length, n);
  assert.equal(r[0]?.from, 0);
  assert.equal(r.at(-1)?.to, m - 1);
  let min = Infinity;
  let max = 0;
  for (const [i, x] of r.entries()) {
    assert.ok(Number.isInteger(x.from) && Number.isInteger(x.to) && x.from <= x.to, `range ${i} of ${n}: ${x.from}-${x.to}`);
    if (i > 0) assert.equal(x.from, (r[i - 1]?.to ?? NaN) + 1, `range ${i} of ${n} follows the one before`);
    min = Math.min(min, x.to - x.from + 1);
    max = Math.max(max, x.to - x.from + 1);
  }
  assert.ok(max - min <= 1, `sizes ${min}..${max} for n=${n}, m=${m}`);
}

void test('N ranges cover 0..M-1 exactly and differ in size by at most 1 (M = numgen modulus)', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 100_000 }), (n) => checkCover(n, PICK_MODULUS)),
    { numRuns: 300 },
  );
  for (const n of [1, 2, 3, 7, 4096, 65_535]) checkCover(n, PICK_MODULUS);
});

void test('the same for any modulus (small ones reach n = m)', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 5_000 }).chain((m) => fc.tuple(fc.constant(m), fc.integer({ min: 1, max: m }))),
      ([m, n]) => checkCover(n, m),
    ),
    { numRuns: 500 },
  );
});

void test('an interval end (to + 1) fits in 32 bits; bad counts are refused with the count in the message', () => {
  assert.equal((equalRanges(1).at(-1)?.to ?? 0) + 1, 2 ** 32 - 1);
  assert.throws(() => equalRanges(0), /equalRanges: 0 endpoints cannot split 4294967295 values/);
  assert.throws(() => equalRanges(1.5), /1\.5 endpoints/);
  assert.throws(() => equalRanges(4, 3), /need 1 <= n <= 3/);
});

void test('endpoint ranges keep the endpoints in order', () => {
  assert.deepEqual(
    endpointRanges([
      { ip: '10.0.0.1', port: 80 },
      { ip: '10.0.0.2', port: 81 },
    ]),
    [
      { from: 0, to: 2147483646, ip: '10.0.0.1', port: 80 },
      { from: 2147483647, to: 4294967294, ip: '10.0.0.2', port: 81 },
    ],
  );
});

void test("a map's element text from the shared range heads is each range's own text, joined (any count, kept or not)", () => {
  for (const n of [1, 2, 3, 10, 1024, 1025, 3000]) {
    const m = {
      type: 'typeof numgen random mod 4294967295 : ip daddr . tcp dport',
      endpoints: Array.from({ length: n }, (_, i) => ({ ip: `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`, port: 8000 + (i % 7) })),
    };
    assert.equal(mapElementsText(m), mapRanges(m).map(rangeText).join(', '), `n=${n}`);
  }
  assert.equal(rangeHeads(10), rangeHeads(10), 'one array per count, shared');
  assert.notEqual(rangeHeads(2000), rangeHeads(2000), 'a count past the kept ones is made each time');
  assert.deepEqual(rangeHeads(2), ['0-2147483646 : ', '2147483647-4294967294 : ']);
});
