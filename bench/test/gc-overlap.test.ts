import { test } from 'node:test';
import assert from 'node:assert/strict';
import { gcOverlap, windowGc, type GcPause } from '../lib/gc-overlap.js';

const windows = [
  { start: 0, end: 2 },
  { start: 10, end: 40 },
  { start: 50, end: 52 },
  { start: 60, end: 75 },
];
const pauses: GcPause[] = [
  { start: 12, ms: 25, kind: 'major' },
  // Half inside the last window.
  { start: 55, ms: 10, kind: 'minor' },
  { start: 100, ms: 5, kind: 'major' },
  { start: 1, ms: 0.5, kind: 'incremental' },
];

void test('windowGc: each window gets the part of each pause inside it, by kind', () => {
  assert.deepEqual(windowGc(windows, pauses), [
    { major: 0, minor: 0, other: 0.5 },
    { major: 25, minor: 0, other: 0 },
    { major: 0, minor: 0, other: 0 },
    { major: 0, minor: 5, other: 0 },
  ]);
});

void test('gcOverlap: slow windows and the slowest 1 % against major pauses; pauses counted while the windows ran', () => {
  const s = gcOverlap(windows, pauses, 10);
  assert.deepEqual(s.slow, { threshold: 10, count: 2, withMajor: 1 });
  // 4 windows: the slowest 1 % is one window, the 30 ms one, which a major pause overlapped.
  assert.deepEqual(s.slowest1pct, { count: 1, withMajor: 1, withMinorOnly: 0 });
  assert.equal(s.windowsWithMajor, 1);
  // The major pause at 100 ms came after the last window: not counted.
  assert.deepEqual(s.pauses.major, { count: 1, totalMs: 25, maxMs: 25 });
  assert.deepEqual(s.pauses.minor, { count: 1, totalMs: 10, maxMs: 10 });
  assert.equal(s.pauses.incremental.count, 1);
});
