/**
 * src/program/: the scaffold every program runs on. Signals and failures go through a port (no
 * signal reaches the test runner); the health server is a real one on a local port.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { Writable } from 'node:stream';
import pino from 'pino';
import { Program, type ProcessPort, type Runnable, type StopPolicy } from '../../../src/program/program.js';
import { drainAwareReadiness, healthRunnable } from '../../../src/program/health.js';
import { readOptions } from '../../../src/program/options.js';
import { runMain } from '../../../src/program/main.js';
import { ok, err } from '../../../src/result.js';

/** A process port that records what happens, in order, with the log lines in the same list. */
function harness(policy: Partial<StopPolicy> = {}): { program: Program; steps: string[]; signal(s: 'SIGTERM' | 'SIGINT'): void; exited: Promise<number> } {
  const steps: string[] = [];
  const emitter = new EventEmitter();
  let exit: (code: number) => void = () => {};
  const exited = new Promise<number>((resolve) => (exit = resolve));
  const port: ProcessPort = {
    on: (s, l) => emitter.on(s, l),
    exit: (code) => {
      steps.push(`exit ${code}`);
      exit(code);
    },
  };
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      const line = JSON.parse(chunk.toString()) as { level: number; msg: string };
      steps.push(`log ${pino.levels.labels[line.level]}: ${line.msg}`);
      done();
    },
  });
  const log = pino({ level: 'info' }, sink);
  const program = new Program('test-program', log, { message: 'stopping', errorMessage: 'error while stopping', errorExitCode: 1, ...policy }, port);
  return { program, steps, signal: (s) => emitter.emit(s), exited };
}

const part = (name: string, steps: string[], more: Partial<Runnable> = {}): Runnable => ({
  name,
  start: () => void steps.push(`start ${name}`),
  stop: () => void steps.push(`stop ${name}`),
  ...more,
});

void test('SIGTERM: the stop line, the drain, then the runnables in the reverse order, then exit 0', async () => {
  const h = harness({ drain: async () => void h.steps.push('drain') });
  assert.equal(await h.program.startAll([part('health', h.steps), part('informers', h.steps), part('loop', h.steps)]), true);
  h.program.handleSignals();
  h.signal('SIGTERM');
  h.signal('SIGINT'); // a repeat while stopping changes nothing
  assert.equal(await h.exited, 0);
  assert.deepEqual(h.steps, ['start health', 'start informers', 'start loop', 'log info: stopping', 'drain', 'stop loop', 'stop informers', 'stop health', 'exit 0']);
});

void test('a runnable whose start fails stops the program: its name and error in one fatal line, the started ones stopped, the rest never started, exit 1', async () => {
  const h = harness();
  const started = await h.program.startAll([part('health', h.steps), part('client', h.steps, { start: () => Promise.reject(new Error('no kubeconfig')) }), part('loop', h.steps)]);
  assert.equal(started, false);
  assert.equal(await h.exited, 1);
  assert.deepEqual(h.steps, ['start health', 'log fatal: client failed: no kubeconfig; stopping test-program', 'stop client', 'stop health', 'exit 1']);
  assert.equal(await h.program.start(part('late', h.steps)), false, 'nothing starts once stopping');
});

void test('a runnable that fails while running (RunContext.fail) stops the program with exit 1', async () => {
  const h = harness();
  let fail: (e: unknown) => void = () => {};
  await h.program.startAll([part('health', h.steps), part('watch', h.steps, { start: (ctx) => void (fail = (e) => ctx.fail(e)) })]);
  fail(new Error('watch closed for good'));
  assert.equal(await h.exited, 1);
  assert.deepEqual(h.steps.slice(1), ['log fatal: watch failed: watch closed for good; stopping test-program', 'stop watch', 'stop health', 'exit 1']);
});

void test('a stop that throws is logged and sets the exit code the policy names; stopping ends there', async () => {
  const h = harness({ errorExitCode: 0 });
  await h.program.startAll([part('health', h.steps), part('loop', h.steps, { stop: () => Promise.reject(new Error('boom')) })]);
  h.program.handleSignals();
  h.signal('SIGINT');
  assert.equal(await h.exited, 0);
  assert.deepEqual(h.steps, ['start health', 'start loop', 'log info: stopping', 'log error: error while stopping', 'exit 0']);
});

void test('the deadline exits while a stop still hangs, with the pending exit code', async () => {
  const h = harness({ deadline: { ms: 50, message: 'still stopping; exiting' } });
  await h.program.start(part('loop', h.steps, { stop: () => new Promise<void>(() => {}) }));
  h.program.handleSignals();
  h.signal('SIGTERM');
  assert.equal(await h.exited, 0);
  assert.deepEqual(h.steps, ['start loop', 'log info: stopping', 'log warn: still stopping; exiting', 'exit 0']);
});

void test('readiness while draining, as each program chooses, on a real health server: it flips at the signal and answers until the last stop', async () => {
  for (const [whileDraining, status, body] of [
    ['ready', 200, 'ok\n'],
    ['not-ready', 503, 'not ready: stopping\n'],
    ['unchanged', 503, 'not ready: first sync\n'],
  ] as const) {
    let seen: { status: number; body: string } | undefined;
    const h = harness({
      drain: async () => {
        const r = await fetch(`http://127.0.0.1:${health.server().port}/readyz`);
        seen = { status: r.status, body: await r.text() };
      },
    });
    const ready = drainAwareReadiness(
      () => ({ ready: false, reason: 'first sync' }),
      () => h.program.stopping(),
      whileDraining,
    );
    const health = healthRunnable({ checks: { live: () => true, ready }, port: 0, host: '127.0.0.1' });
    await h.program.start(health);
    const before = await fetch(`http://127.0.0.1:${health.server().port}/readyz`);
    assert.equal(before.status, 503, whileDraining);
    h.program.handleSignals();
    h.signal('SIGTERM');
    assert.equal(await h.exited, 0);
    assert.deepEqual(seen, { status, body }, whileDraining);
    await assert.rejects(fetch(`http://127.0.0.1:${health.server().port}/readyz`), 'closed after the drain');
  }
});

void test('readOptions: --help prints the usage before parsing (exit 0); a parse error is reported and exits 2; else the options', () => {
  const out: string[] = [];
  const io = { stdout: { write: (t: string) => out.push(`out:${t}`) }, stderr: { write: (t: string) => out.push(`err:${t}`) } };
  const neverParsed = (): never => assert.fail('parsed despite --help');
  assert.deepEqual(readOptions({ argv: ['--help'], help: () => 'usage\n', parse: neverParsed }, io), { run: false, code: 0 });
  assert.deepEqual(readOptions({ argv: ['help'], help: () => 'usage\n', parse: () => ok('help' as const) }, io), { run: false, code: 0 });
  assert.deepEqual(readOptions({ argv: ['--x'], help: () => '', parse: () => err('--x: unknown flag') }, io), { run: false, code: 2 });
  const refused: string[] = [];
  assert.deepEqual(readOptions({ argv: [], help: () => '', parse: () => err('bad env'), refuse: (e) => refused.push(e) }, io), { run: false, code: 2 });
  assert.deepEqual(readOptions({ argv: [], help: () => '', parse: () => ok({ port: 1 }) }, io), { run: true, value: { port: 1 } });
  assert.deepEqual(out, ['out:usage\n', 'out:usage\n', 'err:--x: unknown flag\n']);
  assert.deepEqual(refused, ['bad env']);
});

void test('runMain: a returned code exits with it, undefined keeps running, a throw is reported and exits 1', async () => {
  const exits: number[] = [];
  const reported: string[] = [];
  const port = { exit: (c: number) => void exits.push(c) };
  runMain(
    async () => 3,
    () => {},
    port,
  );
  runMain(
    async () => undefined,
    () => {},
    port,
  );
  runMain(
    () => Promise.reject(new Error('port in use')),
    (e) => reported.push((e as Error).message),
    port,
  );
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(exits.sort(), [1, 3]);
  assert.deepEqual(reported, ['port in use']);
});
