import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import jsonpatch from 'fast-json-patch';
import { createPatch, escapePointerToken, jsonEqual } from '../../cmd/webhook/patch.js';
import type { PatchOperation } from '../../cmd/webhook/responses.js';
import { injectSidecar } from '../../cmd/webhook/mutate.js';
import type { V1Pod } from '../../src/kube/types.js';
import { SIDECAR } from './fixtures.js';

function apply(doc: unknown, ops: PatchOperation[]): unknown {
  return jsonpatch.applyPatch(structuredClone(doc), ops as jsonpatch.Operation[], true, false).newDocument;
}

/** Keys that stress pointer escaping: slashes, tildes, both, "~1" literally, empty. */
const key = fc.oneof(fc.string({ maxLength: 6 }), fc.constantFrom('a/b', '~', '~1', '/~0', '', 'kubectl.kubernetes.io/default-container', 'constructor', 'toString'));
const json: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, fc.constant(null), fc.boolean(), fc.integer(), fc.string({ maxLength: 5 }), tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 4 }),
  object: fc.dictionary(key, tie('value'), { maxKeys: 4 }),
})).value;

void describe('webhook/patch', () => {
  void test('pointer tokens escape ~ before /', () => {
    assert.equal(escapePointerToken('a/b'), 'a~1b');
    assert.equal(escapePointerToken('~'), '~0');
    assert.equal(escapePointerToken('~1'), '~01');
    assert.equal(escapePointerToken('/~'), '~1~0');
  });

  void test('a missing parent is added whole, with its slash-bearing keys escaped', () => {
    const ops = createPatch({ metadata: { name: 'p' } }, { metadata: { name: 'p', annotations: { 'kubectl.kubernetes.io/default-container': 'app' } } });
    assert.deepEqual(ops, [{ op: 'add', path: '/metadata/annotations', value: { 'kubectl.kubernetes.io/default-container': 'app' } }]);
    const ops2 = createPatch({ metadata: { labels: { a: '1' } } }, { metadata: { labels: { a: '1', 'x.io/y~z': '2' } } });
    assert.deepEqual(ops2, [{ op: 'add', path: '/metadata/labels/x.io~1y~0z', value: '2' }]);
  });

  void test('an element put in front of an array is one add at index 0, not a rewrite', () => {
    const before = { spec: { initContainers: [{ name: 'a' }, { name: 'b' }], volumes: [{ name: 'v' }] } };
    const after = { spec: { initContainers: [{ name: 's' }, { name: 'a' }, { name: 'b' }], volumes: [{ name: 'v' }, { name: 't' }] } };
    assert.deepEqual(createPatch(before, after), [
      { op: 'add', path: '/spec/initContainers/0', value: { name: 's' } },
      { op: 'add', path: '/spec/volumes/1', value: { name: 't' } },
    ]);
  });

  void test('equal objects give no operations; undefined-valued keys count as absent', () => {
    assert.deepEqual(createPatch({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 }), []);
    assert.deepEqual(createPatch({ a: 1 }, { a: 1, b: undefined }), []);
    assert.equal(jsonEqual({ a: undefined }, {}), true);
    assert.deepEqual(createPatch({ a: 1, b: 2 }, { a: 1, b: undefined }), [{ op: 'remove', path: '/b' }]);
  });

  void test('keys that Object.prototype also has (constructor, toString) are compared as own properties', () => {
    assert.deepEqual(createPatch({ toString: 1 }, {}), [{ op: 'remove', path: '/toString' }]);
    assert.deepEqual(createPatch({}, { constructor: 'x' }), [{ op: 'add', path: '/constructor', value: 'x' }]);
    assert.deepEqual(createPatch({ a: {} }, { a: { valueOf: [1] } }), [{ op: 'add', path: '/a/valueOf', value: [1] }]);
  });

  void test('the injection never reads what it does not change (managedFields, the other containers, the rest of the spec)', () => {
    // Any look inside a poisoned object throws, so this fails if the mutation copies the pod
    // deeply or the patch compares identical subtrees: both cost O(size of the pod) per request.
    // A container's ports are the one thing read of it (the named ones go to the sidecar).
    const poison = (readable: readonly string[] = []): Record<string, unknown> =>
      new Proxy(
        {},
        {
          get: (_t, k) => (typeof k === 'string' && readable.includes(k) ? undefined : assert.fail('read')),
          ownKeys: () => assert.fail('keys read'),
          has: () => assert.fail('has'),
          getOwnPropertyDescriptor: () => assert.fail('descriptor read'),
        },
      );
    const container = (): never => poison(['ports']) as never;
    const pod = (): V1Pod => ({
      metadata: { name: 'p', annotations: { a: 'b' }, managedFields: [poison(), poison()] as never },
      spec: { affinity: poison(), volumes: [{ name: 'data', emptyDir: {} }], containers: [{ name: 'app' }, container()], initContainers: [container()] },
    });
    const native = pod();
    assert.deepEqual(
      createPatch(native, injectSidecar(native, SIDECAR, true)).map((o) => o.path),
      ['/spec/volumes/1', '/spec/volumes/2', '/spec/volumes/3', '/spec/initContainers/0'],
    );
    // Regular: the sidecar goes in front of the app's containers, whose first one names the default.
    const regular: V1Pod = { ...pod(), spec: { ...pod().spec, containers: [{ name: 'app' }], initContainers: [container()] } };
    assert.deepEqual(
      createPatch(regular, injectSidecar(regular, SIDECAR, false)).map((o) => o.path),
      ['/metadata/annotations/kubectl.kubernetes.io~1default-container', '/spec/volumes/1', '/spec/volumes/2', '/spec/volumes/3', '/spec/containers/0'],
    );
  });

  void test('property: the patch applied to the original (fast-json-patch, validated) gives the target', () => {
    fc.assert(
      fc.property(json, json, (a, b) => {
        const ops = createPatch(a, b);
        assert.ok(jsonEqual(apply(a, ops), b));
      }),
      { numRuns: 2000 },
    );
  });

  void test('property: small edits of a document give a patch that reproduces them', () => {
    // Random documents rarely share structure; here the target is derived from the original.
    const edited = fc.tuple(fc.dictionary(key, json, { maxKeys: 5 }), fc.dictionary(key, json, { maxKeys: 3 }), fc.array(key, { maxLength: 2 })).map(([base, additions, removals]) => {
      const target: Record<string, unknown> = { ...base, ...additions };
      for (const r of removals) delete target[r];
      return [base, target] as const;
    });
    fc.assert(
      fc.property(edited, ([a, b]) => {
        const ops = createPatch(a, b);
        assert.ok(jsonEqual(apply(a, ops), b));
        if (jsonEqual(a, b)) assert.equal(ops.length, 0);
      }),
      { numRuns: 1000 },
    );
  });

  void test('property: for random pods, the patch applied to the pod equals the mutated pod (native and regular)', () => {
    const name = fc.constantFrom('app', 'init', 'multus-proxy-token', 'multus-proxy-token-1', 'data', 'x/y');
    const container = fc.record({ name, image: fc.string({ maxLength: 5 }) }, { requiredKeys: ['name'] });
    const pod: fc.Arbitrary<V1Pod> = fc.record(
      {
        metadata: fc.record(
          {
            name: fc.string({ maxLength: 8 }),
            generateName: fc.string({ maxLength: 8 }),
            annotations: fc.dictionary(key, fc.string({ maxLength: 5 }), { maxKeys: 3 }),
            labels: fc.dictionary(key, fc.string({ maxLength: 5 }), { maxKeys: 2 }),
          },
          { requiredKeys: [] },
        ),
        spec: fc.record(
          {
            containers: fc.array(container, { maxLength: 3 }),
            initContainers: fc.array(container, { maxLength: 2 }),
            volumes: fc.uniqueArray(fc.record({ name, emptyDir: fc.constant({}) }), { maxLength: 3, selector: (v) => v.name }),
            automountServiceAccountToken: fc.boolean(),
          },
          { requiredKeys: ['containers'] },
        ),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(pod, fc.boolean(), (p, native) => {
        const before = JSON.stringify(p);
        const mutated = injectSidecar(p, SIDECAR, native);
        assert.ok(jsonEqual(apply(p, createPatch(p, mutated)), mutated));
        assert.equal(JSON.stringify(p), before, 'the input pod is never modified');
        const volumeNames = (mutated.spec?.volumes ?? []).map((v) => v.name);
        assert.equal(new Set(volumeNames).size, volumeNames.length, 'volume names never collide');
      }),
      { numRuns: 1000 },
    );
  });
});
