import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { applyEvent, diffStore, fullJitter, jitter, transformEvent, listResourceVersion, relistDelay } from '../../src/kube/informer.js';
import type { KubeObject } from '../../src/kube/types.js';

const obj = (name: string, rv: string, ns = 'a'): KubeObject => ({ metadata: { name, namespace: ns, resourceVersion: rv } });

void describe('diffStore (relist)', () => {
  void test('adds new keys, updates moved resourceVersions, deletes vanished keys, ignores unchanged', () => {
    const store = new Map([
      ['a/keep', obj('keep', '1')],
      ['a/changed', obj('changed', '1')],
      ['a/gone', obj('gone', '1')],
    ]);
    const { changes, next } = diffStore(store, [obj('keep', '1'), obj('changed', '5'), obj('new', '6')]);
    assert.deepEqual(changes.map((c) => `${c.type}:${c.obj.metadata?.name}`).sort(), ['add:new', 'delete:gone', 'update:changed']);
    assert.deepEqual([...next.keys()].sort(), ['a/changed', 'a/keep', 'a/new']);
  });

  void test('property: applying the changes to the old store gives exactly the fresh list', () => {
    const item = fc.record({ name: fc.constantFrom('a', 'b', 'c', 'd', 'e'), rv: fc.constantFrom('1', '2', '3') });
    fc.assert(
      fc.property(fc.uniqueArray(item, { selector: (i) => i.name }), fc.uniqueArray(item, { selector: (i) => i.name }), (before, after) => {
        const store = new Map(before.map((i) => [`a/${i.name}`, obj(i.name, i.rv)]));
        const { changes } = diffStore(
          store,
          after.map((i) => obj(i.name, i.rv)),
        );
        const replay = new Map(store);
        const keys = new Set<string>();
        for (const c of changes) {
          const key = `a/${c.obj.metadata?.name}`;
          assert.ok(!keys.has(key), 'one change per key');
          keys.add(key);
          if (c.type === 'add') assert.ok(!replay.has(key), 'no add for a known key');
          if (c.type === 'delete') replay.delete(key);
          else replay.set(key, c.obj);
        }
        assert.deepEqual([...replay.values()].map((o) => `${o.metadata?.name}@${o.metadata?.resourceVersion}`).sort(), after.map((i) => `${i.name}@${i.rv}`).sort());
      }),
    );
  });
});

void describe('applyEvent (watch)', () => {
  void test('the stored object changes identity only with an add or update; a delete hands over the stored one', () => {
    const store = new Map<string, KubeObject>();
    const first = obj('x', '1');
    applyEvent(store, { type: 'ADDED', object: first });
    // The same resourceVersion again (a watch restarted): nothing said, so nothing replaced.
    assert.equal(applyEvent(store, { type: 'MODIFIED', object: obj('x', '1') }), undefined);
    assert.equal(store.get('a/x'), first);
    const second = obj('x', '2');
    const up = applyEvent(store, { type: 'MODIFIED', object: second });
    assert.equal(up?.type === 'update' ? up.old : undefined, first);
    const del = applyEvent(store, { type: 'DELETED', object: obj('x', '3') });
    assert.equal(del?.type === 'delete' ? del.stored : undefined, second);
    // A relist keeps the objects whose resourceVersion did not move.
    const kept = obj('k', '1');
    const { next, changes } = diffStore(
      new Map([
        ['a/k', kept],
        ['a/g', obj('g', '1')],
      ]),
      [obj('k', '1')],
    );
    assert.equal(next.get('a/k'), kept);
    assert.deepEqual(
      changes.map((c) => (c.type === 'delete' ? c.stored.metadata?.name : c.type)),
      ['g'],
    );
  });

  void test('ADDED for a known key is an update, identical is nothing, DELETED of unknown is nothing', () => {
    const store = new Map<string, KubeObject>();
    assert.equal(applyEvent(store, { type: 'ADDED', object: obj('x', '1') })?.type, 'add');
    assert.equal(applyEvent(store, { type: 'ADDED', object: obj('x', '1') }), undefined);
    assert.equal(applyEvent(store, { type: 'ADDED', object: obj('x', '2') })?.type, 'update');
    assert.equal(applyEvent(store, { type: 'MODIFIED', object: obj('y', '3') })?.type, 'add');
    assert.equal(applyEvent(store, { type: 'BOOKMARK', object: obj('', '9') }), undefined);
    assert.equal(applyEvent(store, { type: 'DELETED', object: obj('x', '4') })?.type, 'delete');
    assert.equal(applyEvent(store, { type: 'DELETED', object: obj('x', '4') }), undefined);
    assert.deepEqual([...store.keys()], ['a/y']);
  });
});

void describe('jitter', () => {
  void test('stays within [base/2, base]', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 1_000_000 }), fc.double({ min: 0, max: 0.999999, noNaN: true }), (base, r) => {
        const j = jitter(base, () => r);
        assert.ok(j >= Math.floor(base / 2) && j <= base, `${j} for ${base}`);
      }),
    );
  });
});

void describe('fullJitter (retries after a failure)', () => {
  void test('an integer in [0, window]: the ends of the window are reached, nothing outside it', () => {
    assert.equal(
      fullJitter(1000, () => 0),
      0,
    );
    assert.equal(
      fullJitter(1000, () => 0.9999999),
      1000,
    );
    assert.equal(
      fullJitter(1000, () => 0.5),
      500,
    );
    assert.equal(
      fullJitter(0, () => 0.7),
      0,
    );
    assert.equal(
      fullJitter(-5, () => 0.7),
      0,
    );
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 1_000_000 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (w, r) => {
        const d = fullJitter(w, () => r);
        return Number.isInteger(d) && d >= 0 && d <= w;
      }),
    );
  });

  void test('spreads a cohort over the whole window, where half jitter leaves its first half empty', () => {
    // 1,000 clients whose watches broke at the same moment, a deterministic even spread of draws.
    const draws = Array.from({ length: 1000 }, (_, i) => (i + 0.5) / 1000);
    const perQuarter = (f: (r: number) => number): number[] => {
      const q = [0, 0, 0, 0];
      for (const r of draws) q[Math.min(3, Math.floor(f(r) / 250))]!++;
      return q;
    };
    assert.deepEqual(
      perQuarter((r) => fullJitter(999, () => r)),
      [250, 250, 250, 250],
    );
    const half = perQuarter((r) => jitter(1000, () => r));
    assert.deepEqual(half.slice(0, 2), [0, 0]);
    assert.equal(half[2]! + half[3]!, 1000);
  });
});

void describe('transformEvent (watch with a transform)', () => {
  const upper = (o: KubeObject): KubeObject => ({ metadata: { ...o.metadata, name: (o.metadata?.name ?? '').toUpperCase() } });
  void test('transforms the object of ADDED, MODIFIED and DELETED; passes BOOKMARK and ERROR through untouched', () => {
    for (const type of ['ADDED', 'MODIFIED', 'DELETED'] as const) {
      const ev = transformEvent({ type, object: obj('x', '1') }, upper);
      assert.deepEqual(ev, { type, object: { metadata: { name: 'X', namespace: 'a', resourceVersion: '1' } } });
    }
    for (const type of ['BOOKMARK', 'ERROR'] as const) {
      const ev = { type, object: obj('x', '2') };
      assert.equal(transformEvent(ev, upper), ev);
    }
  });
});

void describe('list resourceVersion (client-go reflector rules)', () => {
  void test('first list from the watch cache (0), then the last seen; quorum when unavailable or asked for', () => {
    assert.equal(listResourceVersion('cache', undefined, false), '0');
    assert.equal(listResourceVersion('cache', '42', false), '42');
    assert.equal(listResourceVersion('cache', '42', true), undefined);
    assert.equal(listResourceVersion('quorum', undefined, false), undefined);
    assert.equal(listResourceVersion('quorum', '42', false), undefined);
  });
});

void describe('relist delay after 410', () => {
  void test('first: uniform in [0, jitter); repeated: [w/2, w], w doubling up to max(max, jitter)', () => {
    assert.equal(
      relistDelay(0, 5000, 30_000, () => 0),
      0,
    );
    assert.equal(
      relistDelay(0, 5000, 30_000, () => 0.999),
      4995,
    );
    assert.equal(
      relistDelay(1, 5000, 30_000, () => 0),
      5000,
    );
    assert.equal(
      relistDelay(1, 5000, 30_000, () => 1),
      10_000,
    );
    assert.equal(
      relistDelay(3, 5000, 30_000, () => 1),
      30_000,
    );
    assert.equal(
      relistDelay(10, 5000, 30_000, () => 1),
      30_000,
    );
    fc.assert(
      fc.property(fc.nat(20), fc.integer({ min: 0, max: 60_000 }), fc.integer({ min: 0, max: 60_000 }), fc.double({ min: 0, max: 0.9999, noNaN: true }), (streak, jit, max, r) => {
        const d = relistDelay(streak, jit, max, () => r);
        return d >= 0 && d <= Math.max(max, jit, 1) && (streak > 0 || d < Math.max(jit, 1));
      }),
    );
  });
});
