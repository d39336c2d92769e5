/**
 * The policy queue serves namespaces in turn: one namespace's burst cannot starve another's key;
 * dedup, one worker per key and re-queue on done hold as in the Service queue.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FairQueue } from '../../../cmd/controller/fair-queue.js';

async function drain(q: FairQueue, n: number): Promise<string[]> {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const k = await q.get();
    if (k === undefined) break;
    out.push(k);
    q.done(k);
  }
  return out;
}

void describe('FairQueue', () => {
  void test('a namespace with many keys waits its turn: the other namespace is served second, not last', async () => {
    const q = new FairQueue();
    for (let i = 0; i < 100; i++) q.add(`busy/p${i}`);
    q.add('quiet/p');
    q.add('other/p');
    const order = await drain(q, 5);
    assert.deepEqual(order, ['busy/p0', 'quiet/p', 'other/p', 'busy/p1', 'busy/p2']);
    q.shutdown();
  });

  void test('dedup while waiting; a key added while processed is queued again by done, never handed twice', async () => {
    const q = new FairQueue();
    q.add('a/x');
    q.add('a/x');
    assert.equal(q.length(), 1);
    const k = await q.get();
    q.add('a/x');
    assert.equal(q.length(), 0);
    q.done(k as string);
    assert.equal(q.length(), 1);
    assert.equal(await q.get(), 'a/x');
    q.shutdown();
    assert.equal(await q.get(), undefined);
  });

  void test('backoff doubles until forget', () => {
    const q = new FairQueue({ baseDelayMs: 10, maxDelayMs: 35 });
    assert.deepEqual([q.addRateLimited('a/x'), q.addRateLimited('a/x'), q.addRateLimited('a/x')], [10, 20, 35]);
    q.forget('a/x');
    assert.equal(q.addRateLimited('a/x'), 10);
    q.shutdown();
  });
});
