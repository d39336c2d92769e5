import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { matchesSelector, parseLabelSelector, type LabelSelector, type Operator, type Requirement } from '../../../src/annotations/label-selector.js';
import { PodIndex, SelectorIndex } from '../../../cmd/controller/pod-index.js';
import { formatInputError } from '../../../src/result.js';
import type { V1Pod } from '../../../src/kube/types.js';
import { pod } from './fixtures.js';

function sel(text: string): LabelSelector {
  const r = parseLabelSelector(text);
  if (!r.ok) throw new Error(formatInputError('test selector', r.error));
  return r.value;
}

const names = (pods: readonly V1Pod[]): string[] => pods.map((p) => p.metadata?.name ?? '').sort();

// A small universe, so that random pods and selectors overlap often.
const NAMESPACES = ['n1', 'n2'];
const KEYS = ['app', 'tier', 'example.com/env', 'x'];
const VALUES = ['a', 'b', 'c', ''];
const labelsArb = fc.dictionary(fc.constantFrom(...KEYS), fc.constantFrom(...VALUES), { maxKeys: 4 }).map((d) => ({ ...d }));
const requirementArb: fc.Arbitrary<Requirement> = fc
  .tuple(fc.constantFrom(...KEYS), fc.constantFrom<Operator>('In', 'NotIn', 'Exists', 'DoesNotExist'), fc.uniqueArray(fc.constantFrom(...VALUES), { minLength: 1, maxLength: 3 }))
  .map(([key, operator, values]) => ({ key, operator, values: operator === 'In' || operator === 'NotIn' ? values : [] }));
const selectorArb: fc.Arbitrary<LabelSelector> = fc.array(requirementArb, { maxLength: 3 }).map((requirements) => ({ requirements }));

type PodOp = { op: 'set'; ns: string; name: string; labels: Record<string, string> } | { op: 'delete'; ns: string; name: string };
const podOpArb: fc.Arbitrary<PodOp> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ op: fc.constant('set' as const), ns: fc.constantFrom(...NAMESPACES), name: fc.constantFrom('p1', 'p2', 'p3', 'p4', 'p5', 'p6'), labels: labelsArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('delete' as const), ns: fc.constantFrom(...NAMESPACES), name: fc.constantFrom('p1', 'p2', 'p3', 'p4', 'p5', 'p6') }) },
);

type SelOp = { op: 'set'; ns: string; name: string; selector: LabelSelector | undefined } | { op: 'delete'; ns: string; name: string };
const selOpArb: fc.Arbitrary<SelOp> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      op: fc.constant('set' as const),
      ns: fc.constantFrom(...NAMESPACES),
      name: fc.constantFrom('s1', 's2', 's3', 's4', 's5'),
      selector: fc.option(selectorArb, { nil: undefined }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('delete' as const), ns: fc.constantFrom(...NAMESPACES), name: fc.constantFrom('s1', 's2', 's3', 's4', 's5') }) },
);

void describe('PodIndex', () => {
  void test('a Service selector finds exactly the matching pods of its own namespace', () => {
    const idx = new PodIndex();
    idx.set(pod('web-1', { labels: { app: 'web', tier: 'front' } }));
    idx.set(pod('web-2', { labels: { app: 'web' } }));
    idx.set(pod('db-1', { labels: { app: 'db', tier: 'back' } }));
    idx.set(pod('web-other', { namespace: 'other', labels: { app: 'web' } }));
    assert.deepEqual(names(idx.select('default', sel('app=web'))), ['web-1', 'web-2']);
    assert.deepEqual(names(idx.select('default', sel('app=web,tier=front'))), ['web-1']);
    assert.deepEqual(names(idx.select('default', sel('app in (web,db),tier'))), ['db-1', 'web-1']);
    assert.deepEqual(names(idx.select('default', sel('app=web,tier!=front'))), ['web-2']);
    assert.deepEqual(names(idx.select('default', sel('tier notin (front)'))), ['db-1', 'web-2']);
    assert.deepEqual(names(idx.select('default', sel('!tier'))), ['web-2']);
    assert.deepEqual(names(idx.select('default', sel('app=cache'))), []);
    assert.deepEqual(names(idx.select('default', sel('nokey=x'))), []);
    assert.deepEqual(names(idx.select('nowhere', sel('app=web'))), []);
    assert.deepEqual(names(idx.select('other', sel('app=web'))), ['web-other']);
  });

  void test('relabeling moves a pod between selectors; deleting removes it; the newest object is returned', () => {
    const idx = new PodIndex();
    idx.set(pod('p', { labels: { app: 'web' } }));
    const moved = pod('p', { labels: { app: 'db' }, nodeName: 'n2' });
    idx.set(moved);
    assert.deepEqual(names(idx.select('default', sel('app=web'))), []);
    assert.equal(idx.select('default', sel('app=db'))[0], moved);
    const sameLabels = pod('p', { labels: { app: 'db' }, nodeName: 'n3' });
    idx.set(sameLabels);
    assert.equal(idx.select('default', sel('app=db'))[0], sameLabels);
    assert.equal(idx.get('default', 'p'), sameLabels);
    idx.delete('default', 'p');
    assert.deepEqual(idx.select('default', sel('app=db')), []);
    assert.equal(idx.size(), 0);
    assert.deepEqual(idx.namespaceNames(), []);
    idx.delete('default', 'p'); // twice is harmless
  });

  void test('an old pod object mutated after indexing does not leave stale entries', () => {
    const idx = new PodIndex();
    const first = pod('p', { labels: { app: 'web' } });
    idx.set(first);
    if (first.metadata?.labels !== undefined) first.metadata.labels['app'] = 'db';
    idx.set(pod('p', { labels: { app: 'cache' } }));
    assert.deepEqual(names(idx.select('default', sel('app=web'))), []);
    assert.deepEqual(names(idx.select('default', sel('app=db'))), []);
    assert.deepEqual(names(idx.select('default', sel('app=cache'))), ['p']);
  });

  void test('pods without labels (absent or null) are found by negative selectors only', () => {
    const idx = new PodIndex();
    const bare = pod('bare');
    if (bare.metadata !== undefined) delete bare.metadata.labels;
    const nulled = pod('nulled');
    if (nulled.metadata !== undefined) (nulled.metadata as { labels: unknown }).labels = null;
    idx.set(bare);
    idx.set(nulled);
    assert.deepEqual(names(idx.select('default', sel('!app'))), ['bare', 'nulled']);
    assert.deepEqual(names(idx.select('default', sel('app'))), []);
  });

  void test('property: after any sequence of sets and deletes, select equals a scan of all pods', () => {
    fc.assert(
      fc.property(fc.array(podOpArb, { maxLength: 40 }), fc.array(selectorArb, { minLength: 1, maxLength: 6 }), (ops, selectors) => {
        const idx = new PodIndex();
        const model = new Map<string, V1Pod>();
        for (const o of ops) {
          const k = `${o.ns}/${o.name}`;
          if (o.op === 'set') {
            const p = pod(o.name, { namespace: o.ns, labels: o.labels });
            idx.set(p);
            model.set(k, p);
          } else {
            idx.delete(o.ns, o.name);
            model.delete(k);
          }
        }
        assert.equal(idx.size(), model.size);
        for (const ns of NAMESPACES) {
          const inNs = [...model.values()].filter((p) => p.metadata?.namespace === ns);
          assert.deepEqual(names(idx.inNamespace(ns)), names(inNs));
          for (const s of selectors) {
            const got = idx.select(ns, s);
            const want = inNs.filter((p) => matchesSelector(s, p.metadata?.labels));
            assert.deepEqual(names(got), names(want), `selector ${JSON.stringify(s)} in ${ns}`);
            // The very objects last set, each once.
            assert.equal(new Set(got).size, got.length);
            for (const p of got) assert.equal(p, model.get(`${ns}/${p.metadata?.name ?? ''}`));
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});

void describe('SelectorIndex', () => {
  void test("a pod's labels find exactly the selectors that match them, in its namespace", () => {
    const idx = new SelectorIndex();
    idx.set('ns', 'web', sel('app=web'));
    idx.set('ns', 'web-front', sel('app=web,tier=front'));
    idx.set('ns', 'multi', sel('app in (web,db)'));
    idx.set('ns', 'has-tier', sel('tier'));
    idx.set('ns', 'not-canary', sel('!canary'));
    idx.set('other', 'web', sel('app=web'));
    const m = (labels: Record<string, string> | undefined, ns = 'ns'): string[] => idx.matching(ns, labels).sort();
    assert.deepEqual(m({ app: 'web', tier: 'front' }), ['has-tier', 'multi', 'not-canary', 'web', 'web-front']);
    assert.deepEqual(m({ app: 'db', canary: 'yes' }), ['multi']);
    assert.deepEqual(m({}), ['not-canary']);
    assert.deepEqual(m(undefined), ['not-canary']);
    assert.deepEqual(m({ app: 'web' }, 'other'), ['web']);
    assert.deepEqual(m({ app: 'web' }, 'nowhere'), []);
  });

  void test('replacing a selector refiles it; undefined and delete remove it', () => {
    const idx = new SelectorIndex();
    idx.set('ns', 's', sel('app=web'));
    idx.set('ns', 's', sel('app=db'));
    assert.deepEqual(idx.matching('ns', { app: 'web' }), []);
    assert.deepEqual(idx.matching('ns', { app: 'db' }), ['s']);
    idx.set('ns', 's', undefined);
    assert.deepEqual(idx.matching('ns', { app: 'db' }), []);
    idx.set('ns', 's', sel('tier'));
    idx.delete('ns', 's');
    assert.deepEqual(idx.matching('ns', { tier: 'x' }), []);
    idx.delete('ns', 's');
  });

  void test('a selector mutated by its owner after filing is still removed from where it was filed', () => {
    const idx = new SelectorIndex();
    const s = sel('app=web');
    idx.set('ns', 's', s);
    const r = s.requirements[0];
    if (r !== undefined) r.values = ['db'];
    idx.set('ns', 's', sel('app=cache'));
    assert.deepEqual(idx.matching('ns', { app: 'web' }), []);
    assert.deepEqual(idx.matching('ns', { app: 'db' }), []);
    assert.deepEqual(idx.matching('ns', { app: 'cache' }), ['s']);
  });

  void test('property: after any sequence of sets and deletes, matching equals a scan of all selectors', () => {
    fc.assert(
      fc.property(fc.array(selOpArb, { maxLength: 30 }), fc.array(labelsArb, { minLength: 1, maxLength: 6 }), (ops, podLabels) => {
        const idx = new SelectorIndex();
        const model = new Map<string, { ns: string; name: string; selector: LabelSelector }>();
        for (const o of ops) {
          const k = `${o.ns}/${o.name}`;
          if (o.op === 'set' && o.selector !== undefined) {
            idx.set(o.ns, o.name, o.selector);
            model.set(k, { ns: o.ns, name: o.name, selector: o.selector });
          } else {
            if (o.op === 'set') idx.set(o.ns, o.name, undefined);
            else idx.delete(o.ns, o.name);
            model.delete(k);
          }
        }
        for (const ns of NAMESPACES) {
          for (const labels of podLabels) {
            const got = idx.matching(ns, labels);
            const want = [...model.values()].filter((e) => e.ns === ns && matchesSelector(e.selector, labels)).map((e) => e.name);
            assert.equal(new Set(got).size, got.length, 'no name twice');
            assert.deepEqual([...got].sort(), want.sort(), `labels ${JSON.stringify(labels)} in ${ns}`);
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});
