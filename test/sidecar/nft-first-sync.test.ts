/**
 * A first nftables sync's commands (real nft, real ip, real nfnl-batch in namespaces this test
 * creates; no traffic): the sidecar's reads are started when its dataplane is made (read-ahead.ts),
 * one `nft list chains` serves both the back end and the check for iptables-nft tables, its `nft -f -`
 * is started ahead too (and its route batch, `ip -force -batch -`), and so is the element writer
 * (its probe and its serving process), through which a first sync into an empty namespace sends
 * every element after the skeleton (nft/first-fill.ts). The node agent's
 * dataplane and the sidecar's `--cleanup` one start no read. The run-mode dataplane's render
 * warm-up (nft/warm-up.ts) runs no command; the other two do not warm up. Seen through shims on PATH that log
 * each command before running the real one.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { binDir } from '../harness/controlplane.js';
import { createDataplane, type Dataplane } from '../../src/dataplane/index.js';
import { createNodeDataplane } from '../../cmd/node-agent/dataplane.js';
import { sidecarDataplaneOptions } from '../../cmd/sidecar/dataplane-options.js';
import { createTopology, type Pod, type Topology } from '../harness/netns.js';
import { BLUE, ep, target } from './render-fixtures.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';

/** A directory with `nft`, `ip` and `nfnl-batch` shims that append their argv to `log` and exec the real binary. */
function shims(realWriter: string): { dir: string; log: string; lines: () => string[] } {
  const dir = mkdtempSync(join(tmpdir(), 'mp-first-sync-'));
  const log = join(dir, 'log');
  writeFileSync(log, '');
  const real = (bin: string): string =>
    execFileSync('sh', ['-c', `command -v ${bin}`])
      .toString()
      .trim();
  // `ip netns exec <ns> cmd` runs cmd through PATH: the shim of cmd logs it, so `ip` logs only its own work.
  const shim = (name: string, target: string, logIf = 'true'): void => {
    writeFileSync(join(dir, name), `#!/bin/sh\nif ${logIf}; then echo "${name} $*" >> ${log}; fi\nexec ${target} "$@"\n`);
    chmodSync(join(dir, name), 0o755);
  };
  shim('nft', real('nft'));
  shim('ip', real('ip'), '[ "$1" != netns ]');
  shim('nfnl-batch', realWriter);
  return {
    dir,
    log,
    lines: () =>
      readFileSync(log, 'utf8')
        .split('\n')
        .filter((l) => l !== ''),
  };
}

void describe('nftables first sync: reads ahead, one tables listing, the elements through the writer started ahead', () => {
  const realWriter = join(binDir(), 'nfnl-batch');
  let topo: Topology;
  let pod: Pod;
  let sh: ReturnType<typeof shims>;
  let dp: Dataplane | undefined;
  const path = process.env['PATH'];
  before(async () => {
    assert.ok(existsSync(realWriter), `${realWriter} not found: run scripts/build-native.sh (scripts/setup.sh runs it)`);
    topo = await createTopology();
    pod = await topo.addPod('client');
    sh = shims(realWriter);
  });
  after(async () => {
    process.env['PATH'] = path;
    dp?.close();
    await topo.teardown();
    rmSync(sh.dir, { recursive: true, force: true });
  });

  const want = (): DesiredState => ({
    interfaces: [{ network: BLUE, interface: 'net1', ipv4: [pod.net1.ipv4], ipv6: [pod.net1.ipv6] }],
    targets: [target('demo/web', '10.96.0.10', 80, [ep('192.168.101.200', 8080), ep('192.168.101.201', 8080)], { portName: 'http' })],
  });
  const count = (prefix: string): number => sh.lines().filter((l) => l.startsWith(prefix)).length;
  const waitFor = async (what: () => boolean, why: string): Promise<void> => {
    for (const until = Date.now() + 5000; !what();) {
      if (Date.now() > until) assert.fail(`${why}; commands run: ${sh.lines().join(' | ')}`);
      await sleep(20);
    }
  };

  void test('reads, nft -f and the element writer start when the dataplane is made; the first sync lists tables once and fills through the writer', async () => {
    // Spawns look PATH up when they run: every command of this dataplane goes through the shims.
    process.env['PATH'] = `${sh.dir}:${path ?? ''}`;
    // As cmd/sidecar/main.ts makes it, in the test's namespace, with the writer's shim.
    let warmUps = 0;
    dp = createDataplane({
      ...sidecarDataplaneOptions({ cleanup: false, iptablesBackend: 'auto', elementWriter: join(sh.dir, 'nfnl-batch') }, 'nftables'),
      netns: pod.ns,
      onWarmedUp: () => (warmUps += 1),
    });
    // Before any sync: the tables listing and the route listing ran, and the first sync's `nft -f -` waits for its input.
    await waitFor(() => count('nft list chains') === 1 && count('ip -j route show') === 1, "the first sync's reads did not start when the dataplane was made");
    await waitFor(() => count('nft -f -') === 1, 'no nft -f - was started ahead of the first sync');
    await waitFor(() => count('ip -force -batch -') === 1, 'no route batch was started ahead of the first sync');
    // The writer's probe (one batch, no argument), then its serving process.
    await waitFor(() => count('nfnl-batch --serve') === 1, 'the element writer did not start ahead of the first sync');
    assert.equal(count('nfnl-batch'), 2, `the element writer's probe and serving process, and nothing else: ${sh.lines().join(' | ')}`);
    // The render warm-up ran (it is scheduled with setImmediate, long past by now) and ran no
    // command: before the first sync, only the reads ahead and the spare `nft -f -` ran.
    await sleep(200);
    assert.equal(warmUps, 1, 'the run-mode dataplane did not warm its render up (once)');
    assert.deepEqual(
      [...sh.lines()].sort(),
      ['ip -force -batch -', 'ip -j route show table all proto 241', 'nfnl-batch ', 'nfnl-batch --serve', 'nft -f -', 'nft list chains'],
      'a command ran while the dataplane warmed up',
    );

    const r = await dp.sync(want(), { full: true });
    assert.equal(r.backend, 'nftables');
    assert.deepEqual(r.warnings, []);
    const lines = sh.lines();
    assert.deepEqual(
      lines.filter((l) => l.startsWith('nft list chains')),
      ['nft list chains'],
      'one listing of every family (no `nft list chains inet` beside it), the one started ahead',
    );
    assert.equal(count('ip -j route show'), 1, 'the route listing started ahead was used');
    assert.equal(count('nft -f -'), 1, 'the first sync wrote into the process started ahead');
    assert.equal(count('ip -force -batch -'), 1, 'the first sync added its route through the batch started ahead');
    assert.match((await topo.run(pod, ['ip', 'route', 'show', '10.96.0.10'])).stdout, /dev net1/, 'the route went in through the batch started ahead');
    assert.equal(r.families[0]?.via, 'first-fill', 'the first sync into an empty namespace did not fill through the writer');
    assert.equal(count('nfnl-batch'), 2, `the elements went through the serving process started ahead, no new spawn: ${lines.join(' | ')}`);
    assert.doesNotMatch(r.families[0]?.text ?? '', /elements = \{ 0-/, "nft -f wrote the skeleton, without the endpoint maps' elements");
    // The rules landed.
    const table = (await topo.run(pod, ['nft', 'list', 'table', 'inet', 'multus_proxy'])).stdout;
    assert.match(table, /10\.96\.0\.10 \. tcp \. 80 : goto /);
    assert.match(table, /192\.168\.101\.201 \. 8080/);

    // What was read before that sync's write is forgotten: a later full sync lists again, finds
    // the table, and rewrites it in place (bounded transactions, no fill).
    const again = await dp.sync(want(), { full: true });
    assert.equal(again.families[0]?.via, 'replace', 'a full sync over our existing table was not written in place');
    assert.equal(count('nft list chains'), 2);
    assert.equal(count('ip -j route show'), 2);
    // The route batch's spare was for the first sync only: none waits after it.
    await sleep(200);
    assert.equal(count('ip -force -batch -'), 1, `a route batch was started again after the first sync: ${sh.lines().join(' | ')}`);
  });

  void test("the node agent's dataplane and the sidecar's --cleanup one read nothing ahead and do not warm up; the sidecar's run-mode one does", async () => {
    process.env['PATH'] = `${sh.dir}:${path ?? ''}`;
    writeFileSync(sh.log, '');
    const options = { iptablesBackend: 'auto', elementWriter: join(sh.dir, 'nfnl-batch') } as const;
    // Warm-ups seen per dataplane, through each one's own hook.
    const warmed = { node: 0, cleanup: 0, run: 0 };
    const node = createNodeDataplane({ netns: pod.ns, backendKind: 'nftables', onWarmedUp: () => (warmed.node += 1) });
    const cleanup = createDataplane({ ...sidecarDataplaneOptions({ ...options, cleanup: true }, 'nftables'), netns: pod.ns, onWarmedUp: () => (warmed.cleanup += 1) });
    // Made after them: once its reads are logged, theirs would have been (spawned earlier, synchronously).
    const run = createDataplane({ ...sidecarDataplaneOptions({ ...options, cleanup: false }, 'nftables'), netns: pod.ns, onWarmedUp: () => (warmed.run += 1) });
    try {
      await waitFor(() => count('nft list chains') >= 1 && count('ip -j route show') >= 1, "the sidecar's run-mode dataplane started no read");
      await sleep(300);
      assert.equal(count('nft list chains'), 1, `only the sidecar's run-mode dataplane lists tables ahead: ${sh.lines().join(' | ')}`);
      assert.equal(count('ip -j route show'), 1, `only the sidecar's run-mode dataplane reads routes ahead: ${sh.lines().join(' | ')}`);
      assert.deepEqual(warmed, { node: 0, cleanup: 0, run: 1 }, "only the sidecar's run-mode dataplane warms its render up");
      // --cleanup reads when it runs: its listing finds the first test's table and removes it.
      await cleanup.cleanup();
      assert.equal(count('nft list chains'), 2);
      assert.doesNotMatch((await topo.run(pod, ['nft', 'list', 'tables'])).stdout, /multus_proxy\b/);
    } finally {
      for (const d of [node, cleanup, run]) d.close();
    }
  });
});
