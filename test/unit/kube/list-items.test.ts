/**
 * ListItemSplitter (src/kube/list-items.ts): whatever the list document and wherever the chunk
 * boundaries fall (inside strings, escapes, multi-byte characters, keys), the items come out as
 * JSON.parse of the whole document would give them, and the envelope is the document with
 * `"items":[]`.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { StringDecoder } from 'node:string_decoder';
import fc from 'fast-check';
import { ListItemSplitter } from '../../../src/kube/list-items.js';

/** Feeds `bytes` cut at `cuts` through a UTF-8 decoder into a splitter, as the client does. */
function split(bytes: Buffer, cuts: readonly number[]): { items: unknown[]; envelope: unknown } {
  const s = new ListItemSplitter();
  const dec = new StringDecoder('utf8');
  const texts: string[] = [];
  let prev = 0;
  for (const p of [...new Set(cuts)].sort((a, b) => a - b).concat(bytes.length)) {
    texts.push(...s.push(dec.write(bytes.subarray(prev, p))));
    prev = p;
  }
  texts.push(...s.push(dec.end()));
  return { items: texts.map((t) => JSON.parse(t) as unknown), envelope: JSON.parse(s.end()) as unknown };
}

// Keys and strings that look like structure: quotes, escapes, brackets, an "items" key inside items.
const trickyString = fc.oneof(fc.string(), fc.constantFrom('items', '"items":[', '\\', '\\"', '}]', '{[', 'ü€😀', '\u2028'));
const json = fc.letrec((tie) => ({
  value: fc.oneof({ depthSize: 'small' }, fc.constant(null), fc.boolean(), fc.double({ noNaN: true, noDefaultInfinity: true }), trickyString, tie('array'), tie('object')),
  array: fc.array(tie('value'), { maxLength: 4 }),
  object: fc.dictionary(trickyString, tie('value'), { maxKeys: 4 }),
})) as { value: fc.Arbitrary<unknown>; object: fc.Arbitrary<Record<string, unknown>> };

const listDoc = fc.record({
  before: fc.dictionary(
    trickyString.filter((k) => k !== 'items'),
    json.value,
    { maxKeys: 3 },
  ),
  items: fc.array(json.object, { maxLength: 6 }),
  after: fc.dictionary(
    trickyString.filter((k) => k !== 'items'),
    json.value,
    { maxKeys: 3 },
  ),
});

void describe('ListItemSplitter', () => {
  void test('any list document, any cuts (bytes), any indentation: items and envelope as a whole parse gives them', () => {
    fc.assert(
      fc.property(listDoc, fc.constantFrom(undefined, 1, '\t'), fc.array(fc.nat(), { maxLength: 12 }), (doc, indent, rawCuts) => {
        const whole = { ...doc.before, items: doc.items, ...doc.after };
        const bytes = Buffer.from(JSON.stringify(whole, null, indent));
        const got = split(
          bytes,
          rawCuts.map((c) => c % (bytes.length + 1)),
        );
        // Through JSON once: the generated objects have no prototype, parsed ones do.
        const plain = (v: unknown): unknown => JSON.parse(JSON.stringify(v));
        assert.deepEqual(got.items, plain(doc.items));
        assert.deepEqual(got.envelope, plain({ ...whole, items: [] }));
      }),
      { numRuns: 300 },
    );
  });

  void test('a Kubernetes list cut at every byte', () => {
    const list = {
      kind: 'ServiceList',
      apiVersion: 'v1',
      metadata: { resourceVersion: '42', continue: 'c"x' },
      items: [{ metadata: { name: 'a', annotations: { 'x/items': '{"items":[1]}' } } }, { metadata: { name: 'ü€' }, spec: { items: [] } }],
    };
    const bytes = Buffer.from(JSON.stringify(list));
    for (let cut = 0; cut <= bytes.length; cut += 1) {
      const got = split(bytes, [cut]);
      assert.deepEqual(got.items, list.items, `cut at ${cut}`);
      assert.deepEqual(got.envelope, { ...list, items: [] });
    }
  });

  void test('no items, null items, empty items', () => {
    for (const doc of [{ metadata: {} }, { metadata: {}, items: null }, { items: [], metadata: { resourceVersion: '1' } }]) {
      const got = split(Buffer.from(JSON.stringify(doc)), []);
      assert.deepEqual(got.items, []);
      assert.deepEqual(got.envelope, doc.items === undefined ? doc : { ...doc, items: doc.items === null ? null : [] });
    }
  });

  void test('an element of items that is not an object, and a truncated document, are errors', () => {
    for (const bad of ['2', '"x"', 'null', '[]']) assert.throws(() => new ListItemSplitter().push(`{"items":[{"a":1}, ${bad}]}`), /an element of "items" is not an object/, bad);
    const s = new ListItemSplitter();
    s.push('{"metadata":{},"items":[{"a":');
    assert.throws(() => s.end(), /ended in the middle of its JSON/);
  });
});
