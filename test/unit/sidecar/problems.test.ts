import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ProblemState, REASON_INVALID_ANNOTATION, REASON_SYNC_FAILED, REASON_SYNC_RECOVERED } from '../../../cmd/sidecar/problems.js';
import { REASON_INVALID_GROUP_ANNOTATION } from '../../../src/sidecar-contract.js';

void test('a bad annotation value is told once per distinct value, and again after it was fixed and broke again', () => {
  const p = new ProblemState(60_000);
  const first = p.input('network-status', 'pod a/b: network-status[1].interface "net1\\nroute" is not an interface name');
  assert.equal(first.length, 1);
  assert.equal(first[0]?.type, 'Warning');
  assert.equal(first[0]?.reason, REASON_INVALID_ANNOTATION);
  assert.match(first[0]?.message ?? '', /interface .* last good value/);
  assert.ok(p.invalid('network-status'));
  assert.deepEqual(p.input('network-status', 'pod a/b: network-status[1].interface "net1\\nroute" is not an interface name'), [], 'the same value again: nothing new');
  assert.equal(p.input('network-status', 'another problem').length, 1);
  assert.deepEqual(p.input('network-status', undefined), []);
  assert.ok(!p.invalid('network-status'));
  assert.ok(!p.invalid('service-network'), 'the keys are separate');
  assert.equal(p.input('network-status', 'another problem').length, 1, 'broken again after a fix: told again');
});

void test('a failing sync is told at its first failure, then at most once per interval, and its recovery once', () => {
  const p = new ProblemState(60_000);
  assert.deepEqual(p.sync(undefined, 0, 0), [], 'a success with nothing failing before says nothing');
  const f1 = p.sync(new Error('RTNETLINK answers: File exists'), 1, 1_000);
  assert.equal(f1[0]?.reason, REASON_SYNC_FAILED);
  assert.match(f1[0]?.message ?? '', /\(1 in a row\): RTNETLINK answers: File exists; the last good rules stay in place/);
  assert.deepEqual(p.sync(new Error('again'), 2, 30_000), []);
  assert.equal(p.sync(new Error('still'), 5, 61_000)[0]?.reason, REASON_SYNC_FAILED);
  const ok = p.sync(undefined, 0, 62_000);
  assert.deepEqual(
    ok.map((s) => [s.type, s.reason]),
    [['Normal', REASON_SYNC_RECOVERED]],
  );
  assert.deepEqual(p.sync(undefined, 0, 63_000), []);
  assert.equal(p.sync('a string error', 1, 64_000)[0]?.message.includes('a string error'), true, 'told at once after a recovery');
});

void test('property: Warnings about sync failures are never closer than the interval, and every recovery follows a Warning', () => {
  fc.assert(
    fc.property(fc.array(fc.record({ dt: fc.integer({ min: 0, max: 100_000 }), fail: fc.boolean() }), { maxLength: 60 }), (steps) => {
      const p = new ProblemState(60_000);
      let now = 0;
      let lastWarn: number | undefined;
      let warnedSinceRecovery = false;
      let failures = 0;
      for (const s of steps) {
        now += s.dt;
        failures = s.fail ? failures + 1 : 0;
        for (const say of p.sync(s.fail ? new Error('x') : undefined, failures, now)) {
          if (say.reason === REASON_SYNC_FAILED) {
            if (lastWarn !== undefined && warnedSinceRecovery) assert.ok(now - lastWarn >= 60_000);
            lastWarn = now;
            warnedSinceRecovery = true;
          } else {
            assert.equal(say.reason, REASON_SYNC_RECOVERED);
            assert.ok(warnedSinceRecovery);
            warnedSinceRecovery = false;
          }
        }
      }
    }),
  );
});

void test('a bad endpoint-macs of an address-group slice: one Warning per slice and distinct value, counted while it lasts, forgotten when fixed or deleted', () => {
  const p = new ProblemState(60_000);
  const said = p.group('ns/g-1', 'EndpointSlice ns/g-1: annotation multus-proxy/endpoint-macs "x": is not JSON');
  assert.equal(said[0]?.reason, REASON_INVALID_GROUP_ANNOTATION);
  assert.match(said[0]?.message ?? '', /is not JSON; the policy rules match those peers by address alone/);
  assert.deepEqual(p.group('ns/g-1', 'EndpointSlice ns/g-1: annotation multus-proxy/endpoint-macs "x": is not JSON'), [], 'the same value: nothing new');
  assert.equal(p.group('ns/g-2', 'EndpointSlice ns/g-2: another').length, 1, 'another slice is told on its own');
  assert.equal(p.invalidGroups(), 2);
  assert.deepEqual(p.group('ns/g-1', undefined), []);
  assert.equal(p.invalidGroups(), 1);
  assert.equal(p.group('ns/g-1', 'EndpointSlice ns/g-1: annotation multus-proxy/endpoint-macs "x": is not JSON').length, 1, 'broken again after a fix: told again');
  assert.ok(!p.invalid('network-status'), 'the pod annotations are apart');
});
