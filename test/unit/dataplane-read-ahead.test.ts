/**
 * read-ahead.ts: which reads are shared and which start ahead (and who asks for them), that a
 * shared read runs once until drop(), and that the apply loop (apply-loop.ts) drops the kept answers
 * once per operation, when it settles.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { firstSyncReads, readAheadExec, sharedRead } from '../../src/dataplane/tuning/read-ahead.js';
import { sidecarDataplaneOptions } from '../../cmd/sidecar/dataplane-options.js';
import type { ExecResult, SpareExec } from '../../src/dataplane/core/exec.js';
import { routesReadArgs } from '../../src/dataplane/core/routes.js';
import { TABLES_LISTING } from '../../src/dataplane/core/exec.js';
import { createPipeline } from '../../src/dataplane/core/pipeline.js';
import type { WriteReport, RuleBackend } from '../../src/dataplane/core/seam.js';
import { render } from '../../src/dataplane/core/incremental.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';

/** An exec that records each run (with ` <input` when given input) and answers from `answer`. */
function recorder(answer: (argv: string) => ExecResult = () => ({ code: 0, stdout: 'table inet multus_proxy\n', stderr: '' })): SpareExec & { runs: string[] } {
  const runs: string[] = [];
  const exec = (cmd: string, args: readonly string[], stdin?: string): Promise<ExecResult> => {
    const argv = [cmd, ...args].join(' ') + (stdin !== undefined ? ' <input' : '');
    runs.push(argv);
    return Promise.resolve(answer(argv));
  };
  return Object.assign(exec, { runs, close: () => undefined, spares: () => 0, startSpare: () => undefined });
}

void test('sharedRead: the tables listing and our routes are shared; writes and other reads are not', () => {
  assert.equal(sharedRead('nft', TABLES_LISTING), true);
  assert.equal(sharedRead('ip', routesReadArgs(241)), true);
  assert.equal(sharedRead('nft', ['list', 'chains', 'inet']), false, 'one family is a different answer');
  assert.equal(sharedRead('nft', ['list', 'table', 'inet', 'multus_proxy']), false);
  assert.equal(sharedRead('nft', ['-f', '-']), false);
  assert.equal(sharedRead('ip', ['-force', '-batch', '-']), false);
  assert.equal(sharedRead('iptables-nft-save', []), false);
});

void test('firstSyncReads: the tables listing and our routes, only when asked and for nftables; the sidecar asks in its run mode, not with --cleanup', () => {
  assert.deepEqual(firstSyncReads({ asked: true, rules: 'nftables', routeProto: 241 }), [
    ['nft', TABLES_LISTING],
    ['ip', routesReadArgs(241)],
  ]);
  assert.deepEqual(firstSyncReads({ asked: false, rules: 'nftables', routeProto: 241 }), [], 'not asked (the node agent, --cleanup)');
  assert.deepEqual(firstSyncReads({ asked: true, rules: 'iptables', routeProto: 241 }), [], 'an iptables first sync');
  const settings = { iptablesBackend: 'auto', elementWriter: '/usr/local/bin/nfnl-batch' } as const;
  assert.equal(sidecarDataplaneOptions({ ...settings, cleanup: false }, 'nftables').readAhead, true);
  const cleanup = sidecarDataplaneOptions({ ...settings, cleanup: true }, 'nftables');
  assert.deepEqual([cleanup.readAhead, cleanup.spareRestore, cleanup.elementWriter], [undefined, undefined, false], '--cleanup: nothing ahead, no spares, no writer');
});

void test('a read started ahead is the answer of the next callers, until drop()', async () => {
  const inner = recorder();
  const exec = readAheadExec(inner);
  exec.ahead([['nft', TABLES_LISTING]]);
  assert.deepEqual(inner.runs, ['nft list chains'], 'started at once, before any caller');
  const [a, b] = await Promise.all([exec('nft', TABLES_LISTING), exec('nft', TABLES_LISTING)]);
  assert.equal(a, b);
  assert.deepEqual(inner.runs, ['nft list chains'], 'two callers, one run');
  assert.equal(exec.kept(), 1);
  exec.drop();
  assert.equal(exec.kept(), 0);
  await exec('nft', TABLES_LISTING);
  assert.deepEqual(inner.runs, ['nft list chains', 'nft list chains'], 'after drop(), a new run');
});

void test('writes and unshared reads always run; a read given input is never kept', async () => {
  const inner = recorder();
  const exec = readAheadExec(inner);
  await exec('nft', ['-f', '-'], 'add table inet x\n');
  await exec('nft', ['-f', '-'], 'add table inet x\n');
  await exec('nft', ['list', 'chains', 'inet']);
  await exec('nft', ['list', 'chains', 'inet']);
  await exec('nft', TABLES_LISTING, '');
  await exec('nft', TABLES_LISTING, '');
  assert.equal(inner.runs.length, 6);
  assert.equal(exec.kept(), 0);
});

void test('a run that rejects is not kept: the next caller runs it again', async () => {
  let n = 0;
  const inner = recorder();
  const failing = Object.assign(
    (cmd: string, args: readonly string[], stdin?: string): Promise<ExecResult> => {
      n += 1;
      return n === 1 ? Promise.reject(new Error('spawn failed')) : inner(cmd, args, stdin);
    },
    { close: () => undefined, spares: () => 0, startSpare: () => undefined },
  );
  const exec = readAheadExec(failing);
  exec.ahead([['ip', routesReadArgs(241)]]);
  await assert.rejects(exec('ip', routesReadArgs(241)), /spawn failed/);
  assert.equal((await exec('ip', routesReadArgs(241))).code, 0);
  assert.equal(n, 2);
});

void test('the apply loop drops the kept answers once per operation, when it settles', async () => {
  // The log holds each command the loop runs and each drop(), in order.
  const inner = recorder((argv) => ({ code: 0, stdout: argv.startsWith('ip -j route') ? '[]' : '', stderr: '' }));
  const exec = readAheadExec(inner);
  const drop = exec.drop.bind(exec);
  exec.drop = () => {
    inner.runs.push('drop');
    drop();
  };
  const listing = async (): Promise<boolean> => (await exec('nft', TABLES_LISTING)).code === 0;
  let failWrite = false;
  // A back end whose every step runs a command through the loop's exec: its reads are shared ones.
  const be: RuleBackend<string, boolean, string> = {
    flavor: () => Promise.resolve('nftables'),
    rules: () => 'rules',
    read: listing,
    holdsOurs: (e) => e === true,
    plan: (_next, _prev, _existing, full) => (full ? 'full' : 'partial'),
    async write(plan): Promise<WriteReport[]> {
      await exec('nft', ['-f', '-'], plan);
      if (failWrite) throw new Error('write failed');
      return [{ family: 4, text: plan, changedChains: [], deletedChains: [], writeMs: 0, rules: 0 }];
    },
    drift: async () => ((await listing()) ? undefined : 'gone'),
    async cleanup() {
      await listing();
      await exec('nft', ['-f', '-'], 'cleanup');
      return { text: { v4: '', v6: '' }, failures: [] };
    },
    present: listing,
    close: () => undefined,
  };
  // The other back end is present: the first sync removes it after its write, listing the tables again.
  const other = {
    present: listing,
    async cleanup() {
      await listing();
      return { text: { v4: '', v6: '' }, failures: [] };
    },
  };
  const dp = createPipeline<DesiredState, string, boolean, string>({ exec, rules: be, others: [other], families: [4], routeProto: 241 }, (s) => render(s));
  const state: DesiredState = { targets: [], interfaces: [] };
  const drops = (): number => inner.runs.filter((r) => r === 'drop').length;
  const ops: [string, () => Promise<unknown>][] = [
    ['full sync', () => dp.sync(state, { full: true })],
    ['partial sync', () => dp.sync(state, { full: false })],
    ['deep drift check', () => dp.checkDrift({ deep: true })],
    [
      'failed sync',
      () => {
        failWrite = true;
        return dp.sync(state, { full: true }).catch(() => 'failed');
      },
    ],
    [
      'cleanup',
      () => {
        failWrite = false;
        return dp.cleanup();
      },
    ],
  ];
  for (const [i, [name, op]] of ops.entries()) {
    const from = inner.runs.length;
    await op();
    assert.equal(drops(), i + 1, `${name}: one drop per operation; log: ${inner.runs.slice(from).join(' | ')}`);
    assert.equal(inner.runs.at(-1), 'drop', `${name}: the drop comes when the operation settled, after its last command`);
    assert.equal(exec.kept(), 0, `${name}: nothing kept past the operation`);
  }
  // The first sync's listing served its read, the other back end's presence and its cleanup after the write.
  const first = inner.runs.slice(0, inner.runs.indexOf('drop'));
  assert.deepEqual(
    first.filter((r) => r === 'nft list chains'),
    ['nft list chains'],
    `first sync: ${first.join(' | ')}`,
  );
  assert.ok(first.includes('nft -f - <input'), 'the first sync wrote');
});
