/** The soak's pure parts (test/node/soak-analysis.ts): attribution, probe events, slope, the loop's lines. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { attribute, exitRaceEvents, histogramShare, parseLoop, probeFailure, requestsBetween, slope } from '../../node/soak-analysis.js';

void test('attribute: each failure follows the latest churn event issued before it, with the delay', () => {
  const events = [
    { at: 2000, kind: 'scale-down', detail: '2 replicas' },
    { at: 1000, kind: 'scale-up', detail: '4 replicas' },
    { at: 2500, kind: 'webhook pod deleted', detail: 'w' },
  ] as const;
  const got = attribute(
    [
      { path: 'a', at: 500, code: 7 },
      { path: 'a', at: 2300, code: 7 },
      { path: 'b', at: 2500, code: 56 },
    ],
    events,
  );
  assert.deepEqual(
    got.map((f) => [f.after, f.afterMs]),
    [
      [undefined, undefined],
      ['scale-down', 300],
      ['webhook pod deleted', 0],
    ],
  );
});

void test('probeFailure: the kubelet probe-failure messages, by probe and cause; other messages are not probe failures', () => {
  const cases: [string, string | undefined][] = [
    ['Liveness probe failed: Get "http://10.244.0.12:9180/healthz": dial tcp 10.244.0.12:9180: connect: connection refused', 'Liveness/connection refused'],
    ['Liveness probe failed: Get "http://10.244.0.12:9180/healthz": read tcp 10.244.0.1:51234->10.244.0.12:9180: read: connection reset by peer', 'Liveness/connection reset'],
    ['Startup probe failed: HTTP probe failed with statuscode: 503', 'Startup/HTTP 503'],
    ['Readiness probe failed: Get "http://10.244.0.12:9180/readyz": context deadline exceeded (Client.Timeout exceeded while awaiting headers)', 'Readiness/timeout'],
    ['Readiness probe errored and resulted in unknown state: rpc error', 'Readiness/other'],
    ['Back-off restarting failed container', undefined],
  ];
  for (const [message, want] of cases) {
    const p = probeFailure(message);
    assert.equal(p && `${p.probe}/${p.cause}`, want, message);
  }
});

void test('slope: least squares; NaN without two distinct x', () => {
  assert.equal(
    slope([
      { x: 0, y: 1 },
      { x: 1, y: 3 },
      { x: 2, y: 5 },
    ]),
    2,
  );
  assert.ok(
    Math.abs(
      slope([
        { x: 0, y: 10 },
        { x: 1, y: 10.2 },
        { x: 2, y: 9.8 },
        { x: 3, y: 10 },
      ]),
    ) < 0.1,
  );
  assert.ok(Number.isNaN(slope([{ x: 1, y: 1 }])));
  assert.ok(
    Number.isNaN(
      slope([
        { x: 1, y: 1 },
        { x: 1, y: 2 },
      ]),
    ),
  );
});

void test("parseLoop and requestsBetween: the client loop's failures, running counts and total", () => {
  const out = parseLoop(['count 100.5 20 0', 'fail 7 101.25', 'count 103.0 39 1', 'garbage', 'count 106 59 1', 'total 60 1', ''].join('\n'));
  assert.deepEqual(out.failures, [{ code: 7, at: 101250 }]);
  assert.deepEqual(out.total, { ok: 60, failed: 1 });
  assert.equal(requestsBetween(out.counts, 100_000, 104_000), 40);
  assert.equal(requestsBetween(out.counts, 103_000, Infinity), 20);
  assert.equal(parseLoop('fail 7 1').total, undefined);
});

void test("histogramShare: a histogram's count and its bucket at a bound, from /metrics lines", () => {
  const lines = ['x_seconds_bucket{le="0.025"} 3', 'x_seconds_bucket{le="0.05"} 7', 'x_seconds_bucket{le="+Inf"} 10', 'x_seconds_sum 1.5', 'x_seconds_count 10'];
  assert.deepEqual(histogramShare(lines, 'x_seconds', 0.05), { count: 10, atMost: 7 });
  assert.equal(histogramShare(lines, 'x_seconds', 0.1), undefined);
  assert.equal(histogramShare(lines, 'y_seconds', 0.05), undefined);
});

void test('exitRaceEvents: one refused probe of a pod the soak deleted, after its deletion, is excused; nothing else is', () => {
  const churn = [
    { at: Date.parse('2026-11-26T18:00:10Z'), kind: 'webhook pod deleted', detail: 'wh-1' },
    { at: Date.parse('2026-11-26T18:00:20Z'), kind: 'scale-down', detail: 'nginx-a' },
  ] as const;
  const refused = 'Readiness probe failed: Get "https://10.244.0.14:8443/readyz?wait=4": dial tcp 10.244.0.14:8443: connect: connection refused';
  const ev = (pod: string, first: string, message = refused) => ({ pod, first, message });
  const { excused, counted } = exitRaceEvents(
    [
      ev('wh-1', '2026-11-26T18:00:16Z'), // after its deletion: the exit race
      ev('wh-1', '2026-11-26T18:00:17Z'), // a second one of the same pod counts
      ev('wh-1', '2026-11-26T18:00:16Z', 'Readiness probe failed: HTTP probe failed with statuscode: 503'), // not the race
      ev('wh-2', '2026-11-26T18:00:05Z'), // a pod the soak did not delete
      ev('nginx-a', '2026-11-26T18:00:21Z'), // a scale-down is not one of ours deleted
    ],
    churn,
  );
  assert.deepEqual(
    excused.map((e) => `${e.pod} ${e.first}`),
    ['wh-1 2026-11-26T18:00:16Z'],
  );
  assert.equal(counted.length, 4);
  const before = exitRaceEvents([ev('wh-1', '2026-11-26T18:00:05Z')], churn);
  assert.equal(before.counted.length, 1, 'a refused probe before the deletion counts');
});
