import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { COMBINED_PREFIX, createEventQueue, EventCorrelator } from '../../../src/kube/event-queue.js';
import { objectEvent } from '../../../src/kube/events.js';
import type { CoreV1Event } from '../../../src/kube/types.js';

const SOURCE = { component: 'test', instance: 'i' };
const ev = (name: string, reason: string, message: string): CoreV1Event =>
  objectEvent({ apiVersion: 'v1', kind: 'Service', name, namespace: 'ns', uid: `uid-${name}` }, 'Warning', reason, message, new Date(0), SOURCE);

void describe('EventCorrelator (pure)', () => {
  void test('the same Event within the interval is counted, not written; the next one carries the repeats', () => {
    const c = new EventCorrelator({ dedupIntervalMs: 1000 });
    assert.equal(c.correlate(ev('a', 'R', 'm'), 0).write, true);
    assert.deepEqual(c.correlate(ev('a', 'R', 'm'), 10), { write: false, why: 'duplicate' });
    assert.deepEqual(c.correlate(ev('a', 'R', 'm'), 20), { write: false, why: 'duplicate' });
    const again = c.correlate(ev('a', 'R', 'm'), 1000);
    assert.ok(again.write);
    assert.equal(again.event.count, 3);
  });

  void test('past ten different messages of one object and reason, the rest are one combined Event', () => {
    const c = new EventCorrelator();
    const written = Array.from({ length: 100 }, (_, i) => c.correlate(ev('a', 'R', `m${i}`), i)).filter((r) => r.write);
    assert.equal(written.length, 11);
    assert.ok(written[10]?.write && written[10].event.message?.startsWith(`${COMBINED_PREFIX}m10`));
    // Another reason or object is its own group.
    assert.equal(c.correlate(ev('a', 'Other', 'm0'), 200).write, true);
    assert.equal(c.correlate(ev('b', 'R', 'm0'), 200).write, true);
  });

  void test('the spam filter: a burst per object, then one per refill interval', () => {
    const c = new EventCorrelator({ spamBurst: 3, spamRefillMs: 1000, maxSimilar: 1000 });
    const first = Array.from({ length: 10 }, (_, i) => c.correlate(ev('a', `R${i}`, 'm'), 0));
    assert.deepEqual(
      first.map((r) => (r.write ? 'w' : r.why)),
      ['w', 'w', 'w', 'spam', 'spam', 'spam', 'spam', 'spam', 'spam', 'spam'],
    );
    assert.equal(c.correlate(ev('a', 'R20', 'm'), 999).write, false);
    assert.equal(c.correlate(ev('a', 'R21', 'm'), 1000).write, true);
    assert.equal(c.correlate(ev('a', 'R22', 'm'), 1001).write, false);
  });

  void test('remembers at most maxKeys keys', () => {
    const c = new EventCorrelator({ maxKeys: 50 });
    for (let i = 0; i < 10_000; i++) c.correlate(ev(`o${i}`, 'R', 'm'), i);
    const sizes = c as unknown as { similar: Map<string, unknown>; written: Map<string, unknown>; buckets: Map<string, unknown> };
    assert.ok(sizes.similar.size <= 50 && sizes.written.size <= 50 && sizes.buckets.size <= 50);
  });
});

void describe('createEventQueue', () => {
  void test('at most `concurrency` writes in flight and `maxPending` queued; the rest dropped as full; a failed write is reported, never thrown', async () => {
    let inFlight = 0;
    let peak = 0;
    const written: string[] = [];
    const drops: string[] = [];
    const errors: string[] = [];
    const q = createEventQueue({
      maxPending: 20,
      concurrency: 3,
      write: async (e) => {
        inFlight++;
        peak = Math.max(peak, inFlight);
        await new Promise((r) => setTimeout(r, 1));
        inFlight--;
        if (e.involvedObject.name === 'o5') throw new Error('boom');
        written.push(e.involvedObject.name ?? '');
      },
      onDrop: (why) => drops.push(why),
      onError: (err) => errors.push((err as Error).message),
    });
    for (let i = 0; i < 1000; i++) q.submit(ev(`o${i}`, 'R', 'm'));
    assert.equal(q.pending(), 20);
    await q.idle();
    assert.equal(peak, 3);
    assert.equal(written.length, 19);
    assert.deepEqual(errors, ['boom']);
    assert.equal(drops.length, 980);
    assert.ok(drops.every((d) => d === 'full'));
    // Room again once written.
    assert.equal(q.submit(ev('later', 'R', 'm')), true);
    await q.idle();
  });
});
