/**
 * The deletion measurement's pure parts (test/controller/deletion-watch.ts, deletion-breakdown.ts):
 * first sightings only, latencies per manager, and the join of a victim's sightings with the
 * controller's write log line that published it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DeletionRecord } from '../../controller/deletion-watch.js';
import { breakdown, writeLines } from '../../controller/deletion-breakdown.js';

void test('DeletionRecord keeps the first sighting of each kind, per manager', () => {
  const r = new DeletionRecord();
  r.add({ kind: 'listed', pod: 'a', manager: 'ours', at: 900 });
  r.add({ kind: 'deleting', pod: 'a', at: 1000 });
  r.add({ kind: 'deleting', pod: 'a', at: 1500 });
  r.add({ kind: 'terminating', pod: 'a', manager: 'ours', at: 1012 });
  r.add({ kind: 'terminating', pod: 'a', manager: 'kube', at: 1030 });
  r.add({ kind: 'terminating', pod: 'a', manager: 'ours', at: 1100 });
  r.add({ kind: 'deleting', pod: 'b', at: 2000 });
  r.add({ kind: 'listed', pod: 'b', manager: 'ours', at: 2100 });
  assert.deepEqual(r.deleted(), ['a', 'b']);
  assert.deepEqual(r.deletionToTerminating(['a', 'b'], 'ours'), { ms: [12], missing: [], neverListed: ['b'] });
  assert.deepEqual(r.deletionToTerminating(['a']), { ms: [12], missing: [], neverListed: [] }, 'any manager: the first of all');
  assert.deepEqual(r.deletionToTerminating(['a'], 'kube').ms, [30]);
  assert.deepEqual(r.times('a', 'ours'), { deletingAt: 1000, terminatingAt: 1012 });
});

void test('a listed victim never seen terminating is missing', () => {
  const r = new DeletionRecord();
  r.add({ kind: 'listed', pod: 'a', manager: 'ours', at: 900 });
  r.add({ kind: 'deleting', pod: 'a', at: 1000 });
  assert.deepEqual(r.deletionToTerminating(['a'], 'ours'), { ms: [], missing: ['a'], neverListed: [] });
});

void test('breakdown joins a victim to the last write sent before its sighting, and splits the time', () => {
  const logs = [
    'not json',
    JSON.stringify({ msg: 'EndpointSlices written', time: 950, service: 'ns/web', changeMs: 40, planMs: 1, writeMs: 5 }),
    // The deletion's write: change seen at 1003 (urgent), reconcile from 1010, plan 2, sent 1012, answered 1020.
    JSON.stringify({ msg: 'EndpointSlices written', time: 1020, service: 'ns/web', changeMs: 30, urgentMs: 17, echoWaitMs: 4, planMs: 2, writeMs: 8 }),
    JSON.stringify({ msg: 'EndpointSlices written', time: 1019, service: 'ns/other', changeMs: 5, planMs: 1, writeMs: 1 }),
    JSON.stringify({ msg: 'EndpointSlices written', time: 1100, service: 'ns/web', changeMs: 5, planMs: 1, writeMs: 3 }),
  ];
  const lines = writeLines(logs);
  assert.equal(lines.length, 4);
  // The watcher saw the slice at 1018, before the controller's answer: still that write.
  const [b] = breakdown([{ pod: 'web-1', deletingAt: 1000, terminatingAt: 1018 }], lines, 'ns/web');
  assert.deepEqual(b, { pod: 'web-1', totalMs: 18, toControllerMs: 3, queuedMs: 7, echoWaitMs: 4, planMs: 2, writeMs: 8, toWatcherMs: -2 });
  // A write whose change was seen long before the deletion is not this deletion's.
  assert.deepEqual(breakdown([{ pod: 'web-2', deletingAt: 1000, terminatingAt: 1010 }], lines, 'ns/web'), []);
});
