import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { linkSignals, withLinkedSignal } from '../../src/abort.js';

void describe('linkSignals', () => {
  void test('aborts with the reason of whichever source aborts first, and unhooks from the others', () => {
    const a = new AbortController();
    const b = new AbortController();
    const linked = linkSignals([a.signal, b.signal]);
    assert.equal(linked.signal.aborted, false);
    b.abort(new Error('b first'));
    assert.equal(linked.signal.aborted, true);
    assert.equal((linked.signal.reason as Error).message, 'b first');
    assert.equal(getEventListeners(a.signal, 'abort').length, 0);
    a.abort(new Error('a later'));
    assert.equal((linked.signal.reason as Error).message, 'b first');
  });

  void test('an already aborted source aborts it at once and leaves no listener', () => {
    const a = new AbortController();
    const linked = linkSignals([a.signal, AbortSignal.abort(new Error('done'))]);
    assert.equal(linked.signal.aborted, true);
    assert.equal((linked.signal.reason as Error).message, 'done');
    assert.equal(getEventListeners(a.signal, 'abort').length, 0);
  });

  void test('release() leaves nothing on a long-lived source, however often it is linked', async () => {
    const life = new AbortController();
    for (let i = 0; i < 1000; i++) await withLinkedSignal([life.signal, new AbortController().signal], async (s) => s.aborted);
    assert.equal(getEventListeners(life.signal, 'abort').length, 0);
    const linked = linkSignals([life.signal]);
    linked.release();
    life.abort();
    assert.equal(linked.signal.aborted, false, 'a released link no longer follows its source');
  });

  void test('withLinkedSignal unhooks when the operation throws', async () => {
    const life = new AbortController();
    await assert.rejects(
      withLinkedSignal([life.signal], () => Promise.reject(new Error('boom'))),
      /boom/,
    );
    assert.equal(getEventListeners(life.signal, 'abort').length, 0);
  });
});
