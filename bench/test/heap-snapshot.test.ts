import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { groupSnapshot, growth, totalBytes } from '../lib/heap-snapshot.js';

/** A snapshot in V8's layout: node_fields, the type names, then flat node rows and a string table. */
function snap(rows: readonly [type: number, name: number, size: number][]): Parameters<typeof groupSnapshot>[0] {
  return {
    snapshot: {
      meta: {
        node_fields: ['type', 'name', 'id', 'self_size', 'edge_count', 'trace_node_id', 'detachedness'],
        node_types: [['hidden', 'array', 'string', 'object', 'code', 'closure'], 'string', 'number'],
      },
    },
    nodes: rows.flatMap(([type, name, size], i) => [type, name, i + 1, size, 0, 0, 0]),
    strings: ['', 'WeakRef', 'Map', 'onAbort'],
  };
}

void describe('heap snapshot groups', () => {
  void test('objects by constructor, closures by function name, the rest by type', () => {
    const g = groupSnapshot(
      snap([
        [3, 1, 32],
        [3, 1, 32],
        [3, 2, 64],
        [5, 3, 40],
        [5, 0, 40],
        [2, 0, 100],
        [4, 0, 500],
      ]),
    );
    assert.deepEqual(g.get('WeakRef'), { count: 2, bytes: 64 });
    assert.deepEqual(g.get('Map'), { count: 1, bytes: 64 });
    assert.deepEqual(g.get('closure onAbort'), { count: 1, bytes: 40 });
    assert.deepEqual(g.get('closure (anonymous)'), { count: 1, bytes: 40 });
    assert.deepEqual(g.get('(string)'), { count: 1, bytes: 100 });
    assert.deepEqual(g.get('(code)'), { count: 1, bytes: 500 });
    assert.equal(totalBytes(g), 808);
  });

  void test('growth lists what grew, most bytes first, and nothing that shrank', () => {
    const before = groupSnapshot(
      snap([
        [3, 1, 32],
        [3, 2, 64],
        [2, 0, 100],
      ]),
    );
    const after = groupSnapshot(
      snap([
        [3, 1, 32],
        [3, 1, 32],
        [3, 1, 32],
        [3, 2, 640],
        [2, 0, 50],
      ]),
    );
    assert.deepEqual(
      growth(before, after).map((g) => [g.key, g.before.count, g.after.count]),
      [
        ['Map', 1, 1],
        ['WeakRef', 1, 3],
      ],
    );
  });

  void test('a snapshot without the fields it needs is refused by name', () => {
    const bad = { ...snap([]), snapshot: { meta: { node_fields: ['type', 'name'], node_types: [['object']] } } };
    assert.throws(() => groupSnapshot(bad), /no node field self_size/);
  });
});
