import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { SliceTracker } from '../../../cmd/controller/tracker.js';
import { RateLimiter, warningEvent } from '../../../cmd/controller/events.js';
import type { V1EndpointSlice } from '../../../src/kube/types.js';
import { service } from './fixtures.js';

const slice = (name: string, rv: string): V1EndpointSlice => ({ addressType: 'IPv4', endpoints: [], metadata: { name, resourceVersion: rv } });

void describe('SliceTracker', () => {
  void test('a written slice is pending until the cache holds that resourceVersion or newer', () => {
    const t = new SliceTracker();
    t.written('ns/s', 'a', '120', 0);
    assert.equal(t.isCurrent('ns/s', [], 1), false);
    assert.equal(t.isCurrent('ns/s', [slice('a', '119')], 1), false);
    assert.equal(t.isCurrent('ns/s', [slice('a', '121')], 1), true);
    assert.equal(t.size(), 0);
    assert.equal(t.isCurrent('ns/other', [], 1), true);
  });

  void test("overlay: the cache as our writes' echoes will make it, from their answers", () => {
    const t = new SliceTracker();
    const answer = slice('a', '120');
    t.written('ns/s', 'a', '120', 0, answer);
    t.written('ns/s', 'new', '121', 0, slice('new', '121'));
    t.deleted('ns/s', 'gone', 0);
    const cached = [slice('a', '119'), slice('gone', '50'), slice('other', '60')];
    assert.deepEqual(
      t.overlay('ns/s', cached, 1)?.map((s) => `${s.metadata?.name ?? ''}@${s.metadata?.resourceVersion ?? ''}`),
      ['a@120', 'other@60', 'new@121'],
    );
    // Once the cache holds them, the cache itself.
    const current = [slice('a', '120'), slice('new', '121'), slice('other', '60')];
    assert.deepEqual(t.overlay('ns/s', current, 1), current);
    // A write known only by its resourceVersion cannot be stood in for.
    t.written('ns/s', 'b', '130', 0);
    assert.equal(t.overlay('ns/s', current, 1), undefined);
  });

  void test('a deleted slice is pending until it leaves the cache', () => {
    const t = new SliceTracker();
    t.deleted('ns/s', 'a', 0);
    assert.equal(t.isCurrent('ns/s', [slice('a', '5')], 1), false);
    assert.equal(t.isCurrent('ns/s', [], 1), true);
  });

  void test('an observed delete or the ttl releases an expectation that cannot be met', () => {
    const t = new SliceTracker(1000);
    t.written('ns/s', 'a', '7', 0);
    t.observedDelete('ns/s', 'a');
    assert.equal(t.isCurrent('ns/s', [], 1), true);
    t.written('ns/s', 'b', '8', 0);
    assert.equal(t.isCurrent('ns/s', [], 500), false);
    assert.equal(t.isCurrent('ns/s', [], 1001), true);
  });
});

void describe('SliceTracker: own echoes and events during writes', () => {
  void test("the event carrying our write's resourceVersion is our own, once; any other is foreign", () => {
    const t = new SliceTracker();
    t.written('ns/s', 'a', '10');
    assert.equal(t.observed('ns/s', 'a', '9'), 'foreign');
    assert.equal(t.observed('ns/s', 'a', '10'), 'own');
    assert.equal(t.observed('ns/s', 'a', '10'), 'foreign', 'an echo is consumed');
    assert.equal(t.observed('ns/other', 'a', '10'), 'foreign');
  });
  void test('an observed delete forgets the echo', () => {
    const t = new SliceTracker();
    t.written('ns/s', 'a', '10');
    t.observedDelete('ns/s', 'a');
    assert.equal(t.observed('ns/s', 'a', '10'), 'foreign');
  });
  void test('events during writes are held and judged at the end: only our echoes are quiet', () => {
    const t = new SliceTracker();
    t.beginWrites('ns/s');
    assert.equal(t.observed('ns/s', 'a', '11'), 'held', 'the watch delivered our write before its answer');
    t.written('ns/s', 'a', '11');
    assert.equal(t.endWrites('ns/s'), false);
    t.beginWrites('ns/s');
    assert.equal(t.observed('ns/s', 'b', '12'), 'held');
    assert.equal(t.endWrites('ns/s'), true, 'someone else changed slice b meanwhile');
    assert.equal(t.observed('ns/s', 'b', '13'), 'foreign', 'nothing held after endWrites');
  });
});

void describe('RateLimiter and warningEvent', () => {
  void test('one key passes once per interval; other keys are independent', () => {
    const r = new RateLimiter(1000);
    assert.equal(r.allow('a', 0), true);
    assert.equal(r.allow('a', 999), false);
    assert.equal(r.allow('b', 999), true);
    assert.equal(r.allow('a', 1000), true);
  });

  void test('memory stays bounded under many keys', () => {
    const r = new RateLimiter(1_000_000, 100);
    for (let i = 0; i < 1000; i++) r.allow(`k${i}`, i);
    // The newest key is still remembered, so it is limited.
    assert.equal(r.allow('k999', 1000), false);
  });

  void test('the Event names the Service, is a Warning, and keeps long messages under the cap', () => {
    const svc = service('web', { namespace: 'shop' });
    const ev = warningEvent(svc, 'PodSkipped', 'x'.repeat(5000), new Date('2026-01-01T00:00:00Z'), 'ctrl-1');
    assert.equal(ev.type, 'Warning');
    assert.deepEqual(ev.involvedObject, { apiVersion: 'v1', kind: 'Service', name: 'web', namespace: 'shop', uid: 'uid-web' });
    assert.equal(ev.metadata.namespace, 'shop');
    assert.match(ev.metadata.name ?? '', /^web\.[0-9a-f]{16}$/);
    assert.ok((ev.message ?? '').length <= 1000);
  });
});
