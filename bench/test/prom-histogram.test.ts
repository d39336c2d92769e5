import assert from 'node:assert/strict';
import { test } from 'node:test';
import { histogram, shareUnder } from '../lib/prom-histogram.js';

const text = (put: [string, number][], post: number): string =>
  [
    '# HELP apiserver_request_duration_seconds x',
    ...put.map(([le, n]) => `apiserver_request_duration_seconds_bucket{component="apiserver",resource="endpointslices",verb="PUT",le="${le}"} ${n}`),
    `apiserver_request_duration_seconds_bucket{component="apiserver",resource="endpointslices",verb="POST",le="+Inf"} ${post}`,
    'apiserver_request_duration_seconds_sum{resource="endpointslices",verb="PUT"} 1.5',
  ].join('\n');

void test('histogram reads only the matching series, +Inf included', () => {
  const h = histogram(
    text(
      [
        ['0.005', 2],
        ['0.05', 7],
        ['+Inf', 10],
      ],
      99,
    ),
    'apiserver_request_duration_seconds',
    { verb: 'PUT', resource: 'endpointslices' },
  );
  assert.deepEqual(
    [...h.entries()],
    [
      [0.005, 2],
      [0.05, 7],
      [Infinity, 10],
    ],
  );
});

void test('shareUnder is the window between two readings, not the totals', () => {
  const m = { verb: 'PUT', resource: 'endpointslices' };
  const before = histogram(
    text(
      [
        ['0.005', 2],
        ['0.05', 7],
        ['+Inf', 10],
      ],
      0,
    ),
    'apiserver_request_duration_seconds',
    m,
  );
  const after = histogram(
    text(
      [
        ['0.005', 3],
        ['0.05', 13],
        ['+Inf', 20],
      ],
      0,
    ),
    'apiserver_request_duration_seconds',
    m,
  );
  const s = shareUnder(before, after);
  assert.equal(s.n, 10);
  assert.deepEqual(s.under, [
    [0.005, 0.1],
    [0.05, 0.6],
  ]);
});

void test('an empty window gives NaN shares, not 0 or 1', () => {
  const m = { verb: 'PUT', resource: 'endpointslices' };
  const h = histogram(
    text(
      [
        ['0.05', 1],
        ['+Inf', 1],
      ],
      0,
    ),
    'apiserver_request_duration_seconds',
    m,
  );
  const s = shareUnder(h, h);
  assert.equal(s.n, 0);
  assert.ok(Number.isNaN(s.under[0]?.[1]));
});
