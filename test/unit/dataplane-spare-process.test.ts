/**
 * src/dataplane/spare-process.ts with real processes (`sh`, no namespace, nothing written to the
 * kernel): the process started ahead is the one that runs the input; a dead one is replaced; a run
 * killed by a signal runs again once from a new process; close() lets the waiting one go.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { setImmediate as immediate } from 'node:timers/promises';
import { BLOCKING_INPUT_MIN, launch, setRef, SpareProcess, writeInput, type Launched, type LaunchResult } from '../../src/dataplane/tuning/spare-process.js';
import { readsWholeInputFirst } from '../../src/dataplane/tuning/spare-exec.js';

/** Prints its pid, then its input back (so a run says which process ran it). */
const ECHO = ['sh', '-c', 'echo $$; cat'];

const write =
  (input: string) =>
  (l: Launched): Promise<LaunchResult> => {
    l.child.stdin?.end(input);
    return l.result;
  };

const pidOf = (r: LaunchResult): number => Number(r.stdout.split('\n')[0]);

void describe('SpareProcess', () => {
  void test('the process started ahead runs the input, and the next one is started after the run', async () => {
    const spare = new SpareProcess(ECHO);
    spare.start();
    assert.equal(spare.ready(), true);
    const first = (spare as unknown as { waiting: Launched }).waiting.child.pid;
    const r = await spare.run(write('hello'));
    assert.equal(r.code, 0);
    assert.equal(pidOf(r), first, 'run by the process started ahead');
    assert.match(r.stdout, /\nhello$/);
    assert.equal(spare.ready(), false, 'none waits until the caller has run');
    await immediate();
    assert.equal(spare.ready(), true, 'the next one is started after the run');
    const r2 = await spare.run(write('again'), false);
    assert.notEqual(pidOf(r2), first);
    await immediate();
    assert.equal(spare.ready(), false, 'next = false starts none');
    spare.close();
  });

  void test('a waiting process that died is replaced by a new one', async () => {
    const spare = new SpareProcess(ECHO);
    spare.start();
    const waiting = (spare as unknown as { waiting: Launched }).waiting;
    // A waiting process does not keep this one alive: hold it while the test waits for its end.
    setRef(waiting, true);
    waiting.child.kill('SIGKILL');
    await waiting.result;
    const r = await spare.run(write('x'), false);
    assert.equal(r.code, 0);
    assert.notEqual(pidOf(r), waiting.child.pid);
    spare.close();
  });

  void test('a run killed by a signal is run once more, from a new process', async () => {
    const spare = new SpareProcess(ECHO);
    spare.start();
    const pids: (number | undefined)[] = [];
    const r = await spare.run(async (l) => {
      pids.push(l.child.pid);
      if (pids.length === 1) l.child.kill('SIGTERM');
      return write('y')(l);
    }, false);
    assert.equal(pids.length, 2);
    assert.notEqual(pids[0], pids[1]);
    assert.equal(r.signal, undefined);
    assert.match(r.stdout, /\ny$/);
    spare.close();
  });

  void test('close() gives the waiting process EOF (it exits 0 having done nothing) and starts none again', async () => {
    const spare = new SpareProcess(['sh', '-c', 'cat >/dev/null; echo done']);
    spare.start();
    const waiting = (spare as unknown as { waiting: Launched }).waiting;
    setRef(waiting, true);
    spare.close();
    const r = await waiting.result;
    assert.equal(r.code, 0);
    assert.equal(spare.ready(), false);
    spare.start();
    assert.equal(spare.ready(), false, 'closed: start() does nothing');
  });
});

void describe('SpareProcess serving input after input', () => {
  /** Answers each line with its pid and the line; exits 1 at the line `bad` (as nfnl-batch --serve at a failure). */
  const SERVER = ['sh', '-c', 'while read l; do [ "$l" = bad ] && exit 1; echo "$$ $l"; done'];
  /** One line in, its answer (or the exit) out, as element-writer.ts runs a batch. */
  const ask =
    (line: string) =>
    (l: Launched): Promise<LaunchResult> =>
      new Promise((resolve) => {
        l.child.stdout?.once('data', (b: Buffer) => resolve({ code: 0, stdout: b.toString(), stderr: '' }));
        void l.result.then(resolve);
        l.child.stdin?.write(`${line}\n`);
      });

  void test('one process answers run after run and waits again at once; a failure ends it and the next run starts another; close() lets it go', async () => {
    const spare = new SpareProcess(SERVER, (r) => r.code === 0);
    spare.start();
    const first = (spare as unknown as { waiting: Launched }).waiting;
    const a = await spare.run(ask('a'));
    assert.equal(a.stdout, `${first.child.pid} a\n`);
    assert.equal(spare.ready(), true, 'the same process waits again, without a turn of the event loop');
    const b = await spare.run(ask('b'));
    assert.equal(b.stdout, `${first.child.pid} b\n`, 'served by the same process');
    const bad = await spare.run(ask('bad'));
    assert.equal(bad.code, 1);
    assert.equal(bad.stdout, '', 'a serving process keeps no stdout of its own (its user reads each answer)');
    assert.equal(spare.ready(), false, 'none waits until the caller has run');
    await immediate();
    const c = await spare.run(ask('c'));
    const pid = Number(c.stdout.split(' ')[0]);
    assert.notEqual(pid, first.child.pid, 'a new process after the failure');
    const waiting = (spare as unknown as { waiting: Launched }).waiting;
    assert.equal(waiting.child.pid, pid, 'and it serves on');
    setRef(waiting, true);
    spare.close();
    assert.equal((await waiting.result).code, 0, 'EOF: it exits 0');
  });
});

void describe('writeInput', () => {
  // The reader waits, then reads all of its input before it writes anything, as `nft -f -` does.
  // While it waits nothing drains the socket, so a write that is not blocking can only fill the
  // socket's send buffer (its size is the host's net.core.wmem_default; some hosts raise it far
  // above the usual 208 KiB, which made a fixed 1 MiB input fit once): the input is 8 times that.
  const sendBuffer = (): number => {
    try {
      return Number(readFileSync('/proc/sys/net/core/wmem_default', 'utf8').trim()) || 0;
    } catch {
      return 0;
    }
  };
  const big = 'x'.repeat(Math.max(1024 * 1024, 8 * sendBuffer()));
  const WAIT_MS = 200;
  const reader = ['sh', '-c', `sleep ${WAIT_MS / 1000}; exec wc -c`];
  void test('a large input to a command that reads it whole first is written in one blocking write; otherwise per turn of the event loop', async () => {
    const blocking = launch(reader);
    const t0 = performance.now();
    writeInput(blocking, big, true);
    const blockedMs = performance.now() - t0;
    // Written by the time end() returned: nothing left buffered in this process, and the write
    // waited for the reader.
    assert.equal(blocking.child.stdin?.writableLength, 0, 'the input was not written in one blocking write');
    assert.ok(blockedMs >= WAIT_MS / 2, `the write returned after ${blockedMs.toFixed(1)} ms, before the reader had started reading: it did not block`);
    assert.equal((await blocking.result).stdout.trim(), String(big.length));
    const paced = launch(reader);
    writeInput(paced, big, false);
    assert.ok((paced.child.stdin?.writableLength ?? 0) > 0, `a ${big.length}-byte input fit the socket buffer of a reader that had not read yet: the write was not paced`);
    assert.equal((await paced.result).stdout.trim(), String(big.length));
  });

  void test('only `nft -f -` reads its whole input first; small inputs are written as usual', () => {
    assert.equal(readsWholeInputFirst('nft', ['-f', '-']), true);
    assert.equal(readsWholeInputFirst('iptables-nft-restore', ['--noflush']), false);
    assert.equal(readsWholeInputFirst('ip', ['-force', '-batch', '-']), false);
    assert.ok(BLOCKING_INPUT_MIN <= 64 * 1024);
  });
});
