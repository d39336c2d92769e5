/**
 * The nftables shard count with hysteresis (src/dataplane/nft/shards.ts shardsAfter),
 * property-tested: a power of two that never leaves more than PORTS_PER_SHARD ports per table,
 * grows exactly as shardCount, shrinks only when the ports fit in half the tables filled to
 * SHRINK_FILL, keeps the previous count between the two, and settles after at most one change
 * when the port count hovers at a boundary.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { PORTS_PER_SHARD, shardCount, shardsAfter, SHRINK_FILL } from '../../src/dataplane/nftables/tuning/shards.js';

const powerOfTwo = (n: number): boolean => Number.isInteger(n) && n >= 1 && (n & (n - 1)) === 0;
/** Port counts up to 70,000 (past the sidecar's 30,000 measured), and a count a shard function returned. */
const ports = fc.integer({ min: 0, max: 70_000 });
const previous = fc.option(
  fc.integer({ min: 0, max: 7 }).map((k) => 2 ** k),
  { nil: undefined },
);
const perShard = fc.oneof(fc.constant(PORTS_PER_SHARD), fc.integer({ min: 1, max: 5_000 }));

void test('shardsAfter: a power of two between shardCount and the fewest tables filled to SHRINK_FILL; the previous count when it is between', () => {
  fc.assert(
    fc.property(ports, previous, perShard, (n, prev, per) => {
      const s = shardsAfter(n, prev, per);
      assert.ok(powerOfTwo(s), `${s} tables`);
      assert.ok(s >= shardCount(n, per), `${s} tables for ${n} ports leave more than ${per} in a table`);
      // Never so many tables that half of them, filled to SHRINK_FILL, would hold the ports.
      if (s > 1) assert.ok(n > SHRINK_FILL * per * (s / 2), `${s} tables for ${n} ports: half would do`);
      if (prev === undefined) assert.equal(s, shardCount(n, per), 'without a previous count, the fewest');
      // Grows as shardCount does, as soon as the ports exceed the previous tables.
      else if (n > prev * per) assert.equal(s, shardCount(n, per), 'grown to the fewest');
      // Keeps the previous count whenever it satisfies both bounds.
      else if (prev === 1 || n > SHRINK_FILL * per * (prev / 2)) assert.equal(s, prev, 'kept');
      // Shrinks only when the ports fit in half the tables filled to SHRINK_FILL.
      else assert.ok(s < prev && n <= SHRINK_FILL * per * (prev / 2), `shrunk from ${prev} to ${s}`);
    }),
    { numRuns: 2_000 },
  );
});

void test('shardsAfter: a port count hovering at a boundary changes the count at most once after its first step', () => {
  // Two counts whose ranges overlap (the larger at most the smaller / SHRINK_FILL), alternated.
  const hovering = fc.tuple(fc.integer({ min: 1, max: 40_000 }), fc.double({ min: 0, max: 1, noNaN: true })).map(([a, x]) => [a, Math.floor(a + x * (a / SHRINK_FILL - a))] as const);
  fc.assert(
    fc.property(hovering, previous, fc.integer({ min: 2, max: 40 }), ([a, b], prev, steps) => {
      let s = shardsAfter(a, prev);
      let changes = 0;
      for (let i = 1; i < steps; i++) {
        const next = shardsAfter(i % 2 === 1 ? b : a, s);
        if (next !== s) changes += 1;
        s = next;
      }
      assert.ok(changes <= 1, `${a} and ${b} ports alternated ${steps} times from ${prev}: ${changes} changes`);
    }),
    { numRuns: 2_000 },
  );
});

void test('shardsAfter at the sidecar boundaries: 1,000 / 1,001 ports alternated pay one change; shrinking waits for 750 per table', () => {
  let s = shardsAfter(1000, undefined);
  const seen = [s];
  for (let i = 0; i < 20; i++) seen.push((s = shardsAfter(i % 2 === 0 ? 1001 : 1000, s)));
  assert.deepEqual([...new Set(seen)], [1, 2]);
  assert.equal(seen.filter((x, i) => i > 0 && x !== seen[i - 1]).length, 1);
  assert.deepEqual(
    [751, 750, 2000, 2001, 1501, 1500, 3000].map((n) => shardsAfter(n, 2)),
    [2, 1, 2, 4, 2, 2, 4],
  );
  assert.deepEqual(
    [3001, 1501, 1500, 750].map((n) => shardsAfter(n, 4)),
    [4, 4, 2, 1],
  );
  assert.equal(shardsAfter(30_000, 64), 64, '30,000 ports in 64 tables: 469 a table, above 375');
  assert.equal(shardsAfter(20_000, 64), 32);
  assert.equal(shardsAfter(1e6, 8, Infinity), 1, 'Infinity keeps one table');
});
