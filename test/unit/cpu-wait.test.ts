/**
 * src/cpu-wait.ts: schedstat parsing (property-tested against malformed text), the wait between
 * two snapshots, and a real snapshot of this process and a busy child that has to wait for a CPU.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import fc from 'fast-check';
import { mainThreadCpuMs, parseChildren, parseRunDelay, parseSchedstat, snapshotWait, waitBetween } from '../../src/cpu-wait.js';

void describe('cpu-wait', () => {
  void test('parseRunDelay takes the second of exactly three numbers, and nothing else', () => {
    assert.equal(parseRunDelay('942449 409590 2\n'), 409590);
    assert.equal(parseRunDelay('0 0 0'), 0);
    for (const bad of ['', '1 2', '1 2 3 4', '1 -2 3', '1 x 3', '1 2.5 3', `1 ${'9'.repeat(30)} 3`]) assert.equal(parseRunDelay(bad), undefined, bad);
    fc.assert(
      fc.property(fc.string(), (s) => {
        const w = parseRunDelay(s);
        assert.ok(w === undefined || (Number.isSafeInteger(w) && w >= 0));
      }),
    );
    fc.assert(fc.property(fc.nat(), fc.nat(), fc.nat(), (a, b, c) => parseRunDelay(`${a} ${b} ${c}\n`) === b));
  });

  void test("parseSchedstat takes CPU and wait; the main thread's CPU grows with work done", () => {
    assert.deepEqual(parseSchedstat('942449 409590 2\n'), { cpuNs: 942449, waitNs: 409590 });
    for (const bad of ['', '1 2', '-1 2 3', 'x 2 3', `${'9'.repeat(30)} 2 3`]) assert.equal(parseSchedstat(bad), undefined, bad);
    fc.assert(fc.property(fc.nat(), fc.nat(), fc.nat(), (a, b, c) => assert.deepEqual(parseSchedstat(`${a} ${b} ${c}`), { cpuNs: a, waitNs: b })));
    const before = mainThreadCpuMs();
    assert.ok(before !== undefined && before > 0, 'this Linux host has schedstat for the main thread');
    const until = Date.now() + 60;
    while (Date.now() < until); // busy: CPU time of this thread (how much depends on the machine's load)
    const after = mainThreadCpuMs() ?? 0;
    assert.ok(after > before, `busy work counted no CPU: ${before} ms, then ${after} ms`);
    assert.equal(mainThreadCpuMs('/nonexistent'), undefined);
  });

  void test('parseChildren keeps pids only', () => {
    assert.deepEqual(parseChildren('12 345 \n'), ['12', '345']);
    assert.deepEqual(parseChildren(''), []);
    assert.deepEqual(parseChildren('12 ../x 7'), ['12', '7']);
  });

  void test('waitBetween: growth per pid, a new child whole, an exited one left out, never negative', () => {
    const a = new Map([
      ['self', 1_000_000],
      ['10', 5_000_000],
      ['11', 2_000_000],
    ]);
    const b = new Map([
      ['self', 3_500_000],
      ['10', 5_000_000],
      ['12', 1_000_000],
    ]);
    assert.equal(waitBetween(a, b), 3.5);
    assert.equal(waitBetween(b, a), 0 + 0 + 2, 'self went back (a reused pid): 0; 11 is new: whole');
    assert.equal(waitBetween(new Map(), new Map()), 0);
  });

  void test('a real snapshot: this process, and a busy child that waits for a CPU while every CPU is busy', async () => {
    const first = snapshotWait();
    assert.ok(first.has('self'), 'this kernel has /proc/self/schedstat (CONFIG_SCHED_INFO)');
    // One busy loop per CPU plus one: at least one of them is always runnable and not running.
    const n = availableParallelism() + 1;
    const kids = Array.from({ length: n }, () => spawn('sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' }));
    try {
      await new Promise((r) => setTimeout(r, 50));
      const start = snapshotWait();
      for (const k of kids) assert.ok(start.has(String(k.pid)), `child ${k.pid} is in the snapshot`);
      await new Promise((r) => setTimeout(r, 400));
      const end = snapshotWait();
      const waited = waitBetween(start, end);
      // n busy processes on n-1 CPUs for 400 ms: at least ~400 ms of waiting between them.
      assert.ok(waited >= 200, `the children waited ${waited} ms in 400 ms with ${n} busy loops on ${n - 1} CPUs`);
    } finally {
      for (const k of kids) k.kill('SIGKILL');
    }
  });
});
