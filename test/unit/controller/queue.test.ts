import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { WorkQueue } from '../../../cmd/controller/queue.js';

void describe('WorkQueue', () => {
  void test('a key added many times while waiting is processed once, in first-added order', async () => {
    const q = new WorkQueue();
    for (const k of ['a', 'b', 'a', 'a', 'c', 'b']) q.add(k);
    assert.equal(q.length(), 3);
    const got = [await q.get(), await q.get(), await q.get()];
    assert.deepEqual(got, ['a', 'b', 'c']);
    assert.equal(q.length(), 0);
  });

  void test('a key added while processing is not handed out twice, and is re-queued on done', async () => {
    const q = new WorkQueue();
    q.add('a');
    const k = await q.get();
    assert.equal(k, 'a');
    q.add('a');
    assert.equal(q.length(), 0, 'not queued while processing');
    const next = q.get();
    let resolved: string | undefined | null = null;
    void next.then((v) => (resolved = v));
    await sleep(5);
    assert.equal(resolved, null, 'a second worker does not get the key being processed');
    q.done('a');
    assert.equal(await next, 'a');
  });

  void test('an urgent key goes to the front, or moves there when it waits already; dedup holds', async () => {
    const q = new WorkQueue();
    for (const k of ['a', 'b', 'c']) q.add(k);
    q.addUrgent('d');
    q.addUrgent('c');
    q.add('d');
    assert.equal(q.length(), 4);
    const got = [await q.get(), await q.get(), await q.get(), await q.get()];
    assert.deepEqual(got, ['c', 'd', 'a', 'b']);
  });

  void test('an urgent add while the key is processed re-queues it at the front on done', async () => {
    const q = new WorkQueue();
    q.add('a');
    assert.equal(await q.get(), 'a');
    q.add('b');
    q.add('a');
    q.addUrgent('a');
    q.done('a');
    assert.deepEqual([await q.get(), await q.get()], ['a', 'b']);
    q.done('a');
    q.done('b');
    // A plain add while processing still re-queues at the back.
    q.add('x');
    assert.equal(await q.get(), 'x');
    q.add('y');
    q.add('x');
    q.done('x');
    assert.deepEqual([await q.get(), await q.get()], ['y', 'x']);
  });

  void test('a reserve worker (getUrgent) takes an urgent key while every other worker is busy, never a plain one', async () => {
    const q = new WorkQueue();
    const tick = (): Promise<void> => new Promise((r) => setImmediate(r));
    q.add('a');
    q.add('b');
    assert.deepEqual([await q.get(), await q.get()], ['a', 'b'], 'both workers busy');
    const got: string[] = [];
    const reserve = q.getUrgent().then((k) => void got.push(String(k)));
    q.add('c');
    await tick();
    assert.equal(got.length, 0, 'a plain key waits for a worker');
    q.addUrgent('d');
    await reserve;
    assert.deepEqual(got, ['d']);
    q.done('d');
    // A waiting key made urgent goes to a free reserve worker.
    const promoted = q.getUrgent();
    q.addUrgent('c');
    assert.equal(await promoted, 'c');
    q.done('c');
    // One worker per key: an urgent add of a key being processed waits for its done.
    const again = q.getUrgent().then((k) => void got.push(String(k)));
    q.addUrgent('a');
    await tick();
    assert.deepEqual(got, ['d'], 'not while a is processed');
    q.done('a');
    await again;
    assert.deepEqual(got, ['d', 'a']);
    q.done('a');
    q.done('b');
    // An urgent key already waiting is taken at once; a plain one at the front is not.
    q.addUrgent('u');
    assert.equal(await q.getUrgent(), 'u');
    q.done('u');
    q.add('p');
    const late = q.getUrgent();
    q.shutdown();
    assert.equal(await late, undefined, 'shutdown releases a reserve worker');
  });

  void test('a waiting worker gets a key as soon as it is added', async () => {
    const q = new WorkQueue();
    const p = q.get();
    q.add('x');
    assert.equal(await p, 'x');
    q.done('x');
    assert.equal(q.pending(), 0);
  });

  void test('addRateLimited backs off exponentially up to the ceiling; forget resets', () => {
    const q = new WorkQueue({ baseDelayMs: 10, maxDelayMs: 100 });
    const delays = [1, 2, 3, 4, 5, 6].map(() => q.addRateLimited('k'));
    assert.deepEqual(delays, [10, 20, 40, 80, 100, 100]);
    assert.equal(q.retries('k'), 6);
    q.forget('k');
    assert.equal(q.addRateLimited('k'), 10);
    q.shutdown();
  });

  void test('addAfter delivers after the delay; the earlier of two delayed adds wins', async () => {
    const q = new WorkQueue();
    const t0 = Date.now();
    q.addAfter('k', 200);
    q.addAfter('k', 30);
    q.addAfter('m', 100); // a marker between the two delays: k must come before it
    assert.equal(q.length(), 0);
    assert.equal(q.pending(), 2);
    assert.equal(await q.get(), 'k');
    const waited = Date.now() - t0;
    assert.ok(waited >= 25, `delivered after ${waited} ms, before its delay`);
    q.done('k');
    assert.equal(await q.get(), 'm', 'k was delivered at the earlier delay, before the 100 ms marker');
    q.done('m');
    await sleep(220);
    assert.equal(q.length(), 0, 'the later timer was cancelled');
  });

  void test('shutdown releases waiting workers with undefined and ignores later adds', async () => {
    const q = new WorkQueue();
    const p = q.get();
    q.shutdown();
    assert.equal(await p, undefined);
    q.add('a');
    assert.equal(await q.get(), undefined);
  });
});
