import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { fairShare, waterLevel, type ShareItem } from '../../src/fair-share.js';

interface It {
  readonly id: number;
}
const item = (id: number, namespace: string, weight: number, rank = String(id).padStart(4, '0')): ShareItem<It> => ({ item: { id }, namespace, weight, rank });
const keptIds = (r: { kept: ReadonlySet<It> }): number[] => [...r.kept].map((i) => i.id).sort((a, b) => a - b);

void describe('fair share', () => {
  void test('water level: the largest whole L with sum(min(d, L)) <= capacity', () => {
    assert.equal(waterLevel([1, 2], 3), Infinity);
    assert.equal(waterLevel([10, 10, 1], 9), 4);
    assert.equal(waterLevel([3, 3, 3], 8), 2);
    assert.equal(waterLevel([100], 7), 7);
  });

  void test('a namespace that sorts first cannot push out another: "aaa" over its share loses only its own', () => {
    const items = [item(1, 'aaa-tenant', 1), item(2, 'aaa-tenant', 1), item(3, 'aaa-tenant', 1), item(4, 'default', 1)];
    const r = fairShare(items, 3);
    assert.ok(keptIds(r).includes(4), 'the other namespace keeps its Service');
    assert.equal(r.over.length, 1);
    assert.equal(r.over[0]?.namespace, 'aaa-tenant');
    assert.equal(r.over[0]?.share, 2);
    assert.deepEqual(
      r.over[0]?.dropped.map((i) => i.id),
      [3],
    );
  });

  void test("the client's own namespace is served first, up to the whole cap; one big item cannot take a share it does not fit", () => {
    const r = fairShare([item(1, 'own', 4), item(2, 'b', 3), item(3, 'c', 5000)], 6, 'own');
    // own: 4; rest 2 split between b (3) and c (5000): level 1, neither fits.
    assert.deepEqual(keptIds(r), [1]);
    assert.deepEqual(
      r.over.map((o) => o.namespace),
      ['b', 'c'],
    );
    const r2 = fairShare([item(1, 'own', 2), item(2, 'b', 3), item(3, 'c', 5000)], 10, 'own');
    assert.deepEqual(keptIds(r2), [1, 2], 'b (3) is under the level (4 of 8 left for two)');
    assert.deepEqual(
      r2.over.map((o) => o.namespace),
      ['c'],
    );
  });

  void test('free items (weight 0) are always kept', () => {
    const r = fairShare([item(1, 'a', 0), item(2, 'a', 9), item(3, 'b', 9)], 1);
    assert.deepEqual(keptIds(r), [1]);
  });

  const world = fc.record({
    items: fc.array(fc.tuple(fc.integer({ min: 0, max: 5 }), fc.integer({ min: 0, max: 12 }), fc.integer({ min: 0, max: 99 })), { maxLength: 40 }),
    cap: fc.integer({ min: 0, max: 60 }),
    own: fc.option(fc.integer({ min: 0, max: 5 }), { nil: undefined }),
    perm: fc.shuffledSubarray([0, 1, 2, 3, 4, 5], { minLength: 6, maxLength: 6 }),
    seed: fc.integer(),
  });

  void test("property: total <= cap; no namespace at or under its fair share loses anything; only namespaces named over lose; names' sort order and input order do not matter", () => {
    fc.assert(
      fc.property(world, ({ items: specs, cap, own, perm, seed }) => {
        const ns = (n: number): string => `ns-${n}`;
        // The same world with namespaces renamed so that they sort in another order.
        const renamed = (n: number): string => `${String.fromCharCode(97 + (perm[n] as number))}-renamed`;
        // Ranks are unique, as Service names in a namespace are.
        const items = specs.map(([n, w, r], id) => item(id, ns(n), w, `${String(r).padStart(3, '0')}-${id}`));
        const r = fairShare(items, cap, own === undefined ? undefined : ns(own));
        const byId = new Map(items.map((i) => [i.item.id, i]));
        const keptWeight = [...r.kept].reduce((a, k) => a + (byId.get(k.id)?.weight ?? 0), 0);
        assert.ok(keptWeight <= cap, `kept ${keptWeight} > cap ${cap}`);
        const demand = new Map<string, number>();
        for (const i of items) demand.set(i.namespace, (demand.get(i.namespace) ?? 0) + i.weight);
        const ownNs = own === undefined ? undefined : ns(own);
        const ownDemand = ownNs === undefined ? 0 : (demand.get(ownNs) ?? 0);
        const ownKept = items.filter((i) => i.namespace === ownNs && r.kept.has(i.item)).reduce((a, i) => a + i.weight, 0);
        const others = [...demand].filter(([n, d]) => n !== ownNs && d > 0);
        const equal = others.length === 0 ? Infinity : Math.floor((cap - ownKept) / others.length);
        const lost = new Set(items.filter((i) => !r.kept.has(i.item)).map((i) => i.namespace));
        if (ownNs !== undefined && ownDemand <= cap) assert.ok(!lost.has(ownNs), 'own namespace under the cap keeps all');
        for (const [n, d] of others) if (d <= equal) assert.ok(!lost.has(n), `${n} asks ${d} <= equal share ${equal} and lost`);
        assert.deepEqual(
          [...lost].sort(),
          r.over.map((o) => o.namespace),
        );
        // Renamed and shuffled: the same items kept.
        const shuffled = items
          .map((i) => ({ ...i, namespace: renamed(Number(i.namespace.slice(3))) }))
          .map((i, k) => ({ i, k: (k * 7919 + seed) % 1009 }))
          .sort((a, b) => a.k - b.k)
          .map((x) => x.i);
        const r2 = fairShare(shuffled, cap, own === undefined ? undefined : renamed(own));
        assert.deepEqual(keptIds(r2), keptIds(r));
      }),
      { numRuns: 500 },
    );
  });
});
