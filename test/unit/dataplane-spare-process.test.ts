/**
 * src/dataplane/spare-process.ts with real processes (`sh`, no namespace, nothing written to the
 * kernel): the process started ahead is the one that runs the input; a dead one is replaced; a run
 * killed by a signal runs again once from a new process; close() lets the waiting one go.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as immediate } from 'node:timers/promises';
import { setRef, SpareProcess, type Launched, type LaunchResult } from '../../src/dataplane/spare-process.js';

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
