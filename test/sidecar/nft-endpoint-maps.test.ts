/**
 * The nftables back end's endpoint maps (src/dataplane/nft/render.ts, pick-ranges.ts) with real
 * traffic in network namespaces this test creates: a Service port without affinity picks its
 * endpoint through `numgen random mod M map @MPX-EPS-<hash>`. Checked here: the split over N = 3
 * is equal (300 connections, chi-square), and endpoints changed under a client loop (each change
 * a map refill, no rule written) lose no connection and send none to a removed endpoint once the
 * sync has returned. Then the same refills through the element writer (nfnl-batch from $BIN_DIR,
 * scripts/build-native.sh): used only when the change is nothing but refills, and a writer that
 * fails (before or after applying its batch) leaves the change to `nft -f`, with the same table.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { binDir } from '../harness/controlplane.js';
import { createDataplane, type Dataplane } from '../../src/dataplane/index.js';
import { httpRequests, type Pod } from '../harness/netns.js';
import { shardTablesIn } from '../../src/dataplane/nftables/tuning/shards.js';
import { HTTP_PORT, WEB_V4, createEnv, endpoints, state, tally, webTarget, type Env } from './dataplane-env.js';

/** chi-square with 2 degrees of freedom at p = 0.001: a fair split fails this 1 run in 1,000. */
const CHI2_DF2_P001 = 13.816;

/** New connections one after another until stdin closes; each with its start time (ms, this machine's clock). */
const LOOP_JS = `
const http = require('node:http');
const [url] = process.argv.slice(1);
let stop = false; process.stdin.on('data', () => {}); process.stdin.on('end', () => (stop = true));
const one = () => new Promise((resolve) => {
  const t0 = Date.now();
  const req = http.get(url, { agent: false, timeout: 2000 }, (res) => {
    let body = ''; res.on('data', (d) => (body += d));
    res.on('end', () => { try { resolve({ t0, name: JSON.parse(body).name }); } catch { resolve({ t0, error: 'BADBODY' }); } });
  });
  req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
  req.on('error', (e) => resolve({ t0, error: e.code || e.message }));
});
(async () => { const out = []; while (!stop) out.push(await one()); console.log(JSON.stringify(out)); })();
`;

/** Each of the table's endpoint maps as listed (name -> its element text), from `nft list table`. */
async function endpointMaps(env: Env): Promise<Map<string, string>> {
  const listing = (await env.topo.run(env.client, ['nft', 'list', 'table', 'inet', 'multus_proxy'])).stdout;
  return new Map([...listing.matchAll(/map (MPX-EPS-\S+) \{[^]*?elements = \{([^}]*)\}/g)].map((m) => [m[1] ?? '', (m[2] ?? '').replace(/\s+/g, ' ').trim()]));
}

interface Hit {
  readonly t0: number;
  readonly name?: string;
  readonly error?: string;
}

void describe('nftables endpoint maps: real traffic', () => {
  let env: Env;
  let dp: Dataplane;
  before(async () => {
    env = await createEnv(3);
    dp = createDataplane({ netns: env.client.ns, spareRestore: true, backendKind: 'nftables' });
  });
  after(async () => {
    dp.close();
    await env.topo.teardown();
  });

  void test('N = 3: 300 connections split equally (chi-square <= 13.8, df 2, p 0.001), through the endpoint map', async () => {
    await dp.sync(state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT))]), { full: true });
    const table = (await env.topo.run(env.client, ['nft', 'list', 'table', 'inet', 'multus_proxy'])).stdout;
    assert.match(table, /dnat ip to numgen random mod 4294967295 map @MPX-EPS-/, table);
    const n = 300;
    const counts = tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, n));
    const expected = n / env.backends.length;
    const chi2 = env.backends.reduce((s, b) => s + ((counts.get(b.name) ?? 0) - expected) ** 2 / expected, 0);
    assert.ok(chi2 <= CHI2_DF2_P001, `chi-square ${chi2.toFixed(2)} > ${CHI2_DF2_P001}: ${JSON.stringify([...counts])}`);
    assert.equal(counts.size, 3, JSON.stringify([...counts]));
  });

  void test('endpoints changed under a client loop: each change is a map refill, no connection fails, none reaches a removed endpoint after the sync', async () => {
    const [b1, b2, b3] = env.backends;
    assert.ok(b1 && b2 && b3);
    await dp.sync(state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT))]), { full: true });
    const loop = env.topo.spawn(env.client, [process.execPath, '-e', LOOP_JS, `http://${WEB_V4}:80/`]);
    let out = '';
    loop.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<void>((resolve) => loop.on('exit', () => resolve()));
    const pause = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
    // Each step's endpoint set, when its sync began and when it returned.
    const steps: { pods: readonly Pod[]; began: number; done: number }[] = [];
    await pause(500);
    for (const pods of [[b1, b2], [b2, b3], [b3], [b1, b3], [b1, b2, b3], [b2]]) {
      const began = Date.now();
      const res = await dp.sync(state(env, [webTarget(endpoints(pods, 4, HTTP_PORT))]), { full: false });
      const done = Date.now();
      assert.equal(res.full, false);
      const text = res.families[0]?.text ?? '';
      assert.match(text, /^flush map inet multus_proxy MPX-EPS-\S+\nadd map inet multus_proxy MPX-EPS-\S+ \{ [^\n]+; elements = \{ [^\n]+ \}; \}\n$/, text);
      steps.push({ pods, began, done });
      await pause(400);
    }
    loop.stdin?.end();
    await exited;
    const hits = JSON.parse(out) as Hit[];
    assert.ok(hits.length >= 30, `the loop ran (${hits.length} connections)`);
    assert.deepEqual(
      hits.filter((h) => h.error !== undefined),
      [],
      'no connection failed while the maps changed',
    );
    for (const [i, s] of steps.entries()) {
      const until = steps[i + 1]?.began ?? Infinity;
      // Started after this step's sync returned and before the next one began: only this step's endpoints.
      const inStep = hits.filter((h) => h.t0 > s.done && h.t0 < until);
      const allowed = new Set(s.pods.map((p) => p.name));
      assert.deepEqual(
        inStep.filter((h) => !allowed.has(h.name ?? '')),
        [],
        `step ${i} (${[...allowed].join(',')})`,
      );
      assert.ok(inStep.length > 0, `step ${i} saw connections`);
    }
  });
});

/**
 * nfnl-batch behind a switch: with `<dir>/mode` absent it is the real sender; `fail` answers as a
 * refused message without touching the kernel; `apply-then-fail` sends the batch, then reports a
 * failure anyway. The mode is looked at per batch, once the batch is complete, so a spare started
 * earlier obeys the mode of its write. As the real one, with `--serve` it answers batch after
 * batch (each through a one-batch run of the real sender) until EOF or its first failure.
 */
function switchableSender(real: string): { binary: string; mode: (m: 'real' | 'fail' | 'apply-then-fail') => void; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'nfnl-switch-'));
  const binary = join(dir, 'nfnl-batch');
  writeFileSync(
    binary,
    `#!${process.execPath}
const { spawnSync } = require('node:child_process');
const { readFileSync } = require('node:fs');
const serve = process.argv.includes('--serve');
const mode = () => { try { return readFileSync(${JSON.stringify(join(dir, 'mode'))}, 'utf8'); } catch { return 'real'; } };
// The batch's end: the byte after its NFNL_MSG_BATCH_END (0x11) message, or -1.
const end = (b) => { for (let off = 0; off + 16 <= b.length; ) { const len = b.readUInt32LE(off); if (len < 16 || off + len > b.length) return -1; if (b.readUInt16LE(off + 4) === 0x11) return off + len; off += (len + 3) & ~3; } return -1; };
let buf = Buffer.alloc(0);
process.stdin.on('data', (chunk) => {
  buf = Buffer.concat([buf, chunk]);
  const e = end(buf);
  if (e < 0) return;
  const batch = buf.subarray(0, e);
  buf = buf.subarray(e);
  const m = mode();
  if (m === 'fail') { process.stderr.write('message seq 2: Operation not permitted\\n'); process.exit(1); }
  const r = spawnSync(${JSON.stringify(real)}, [], { input: batch });
  if (m === 'apply-then-fail') { process.stderr.write('message seq 2: Device or resource busy\\n'); process.exit(1); }
  if (r.status !== 0) { process.stderr.write(r.stderr); process.exit(r.status ?? 1); }
  process.stdout.write(r.stdout);
  if (!serve) process.exit(0);
});
process.stdin.on('end', () => process.exit(0));
`,
  );
  chmodSync(binary, 0o755);
  return {
    binary,
    mode: (m) => (m === 'real' ? rmSync(join(dir, 'mode'), { force: true }) : writeFileSync(join(dir, 'mode'), m)),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

void describe('nftables endpoint maps: through the element writer', () => {
  const real = join(binDir(), 'nfnl-batch');
  let env: Env;
  let dp: Dataplane;
  let sender: ReturnType<typeof switchableSender>;
  const warnings: string[] = [];
  before(async () => {
    assert.ok(existsSync(real), `${real} not found: run scripts/build-native.sh (scripts/setup.sh runs it)`);
    sender = switchableSender(real);
    env = await createEnv(3);
    const logger = pino({ level: 'warn' }, { write: (line: string) => void warnings.push(line) });
    dp = createDataplane({ netns: env.client.ns, spareRestore: true, backendKind: 'nftables', elementWriter: sender.binary, logger });
  });
  after(async () => {
    dp.close();
    await env.topo.teardown();
    sender.remove();
  });

  /** The table after a sync equals what a full sync of the same state writes (maps by their elements), and serves it. */
  async function sameAsFull(pods: readonly Pod[]): Promise<void> {
    const maps = await endpointMaps(env);
    assert.equal(await dp.checkDrift({ deep: true }), undefined);
    const counts = tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 30));
    assert.deepEqual([...counts.keys()].sort(), pods.map((p) => p.name).sort());
    await dp.sync(state(env, [webTarget(endpoints(pods, 4, HTTP_PORT))]), { full: true });
    assert.deepEqual(await endpointMaps(env), maps, 'a full sync of the same state writes the same maps');
  }

  void test('an endpoint-only change goes through the writer; a change with more than refills through nft -f', async () => {
    const [b1, b2, b3] = env.backends;
    assert.ok(b1 && b2 && b3);
    await dp.sync(state(env, [webTarget(endpoints([b1, b2], 4, HTTP_PORT))]), { full: true });
    const res = await dp.sync(state(env, [webTarget(endpoints([b2, b3], 4, HTTP_PORT))]), { full: false });
    assert.equal(res.families[0]?.via, 'element-writer', JSON.stringify(res.families));
    await sameAsFull([b2, b3]);
    // A second Service appears beside an endpoint change: not only refills, so nft -f.
    const other = { ...webTarget(endpoints([b1], 4, HTTP_PORT)), service: 'demo/other', clusterIP: '10.96.0.77' };
    const mixed = await dp.sync(state(env, [webTarget(endpoints([b3], 4, HTTP_PORT)), other]), { full: false });
    assert.equal(mixed.families[0]?.via, undefined);
    assert.deepEqual(warnings, []);
  });

  void test('a writer that fails, or fails after applying, leaves the change to nft -f: the same table, served', async () => {
    const [b1, b2, b3] = env.backends;
    assert.ok(b1 && b2 && b3);
    await dp.sync(state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT))]), { full: true });
    for (const [mode, pods] of [
      ['fail', [b1]],
      ['apply-then-fail', [b2, b3]],
    ] as const) {
      sender.mode(mode);
      warnings.length = 0;
      const res = await dp.sync(state(env, [webTarget(endpoints(pods, 4, HTTP_PORT))]), { full: false });
      sender.mode('real');
      assert.equal(res.families[0]?.via, undefined, `${mode}: reported as nft -f`);
      assert.match(res.families[0]?.text ?? '', /^flush map .*\nadd map /);
      assert.equal(warnings.length, 1, warnings.join('\n'));
      assert.match(warnings[0] ?? '', /nftables element writer failed, writing the same change with nft -f: nfnl-batch failed/);
      await sameAsFull(pods);
    }
    // And the writer is used again once it works.
    const res = await dp.sync(state(env, [webTarget(endpoints([b1, b3], 4, HTTP_PORT))]), { full: false });
    assert.equal(res.families[0]?.via, 'element-writer');
    await sameAsFull([b1, b3]);
  });
});

/**
 * Shard tables (src/dataplane/nft/shards.ts) with real traffic: one Service port per table, so
 * seven Services take 8 tables, each with its own nat-output hook. Every Service reaches only its
 * endpoints whichever table holds it (the first table's DNAT ends the nat hooks for that
 * connection), a Service without endpoints is refused by the root's reject part, an endpoint
 * change goes through the element writer into its shard's table, and shrinking to one Service
 * removes all but two tables (shrinking keeps headroom).
 */
void describe('nftables shard tables: real traffic', () => {
  const real = join(binDir(), 'nfnl-batch');
  let env: Env;
  let dp: Dataplane;
  before(async () => {
    assert.ok(existsSync(real), `${real} not found: run scripts/build-native.sh (scripts/setup.sh runs it)`);
    env = await createEnv(3);
    dp = createDataplane({ netns: env.client.ns, spareRestore: true, backendKind: 'nftables', elementWriter: real, nftPortsPerShard: 1 });
  });
  after(async () => {
    dp.close();
    await env.topo.teardown();
  });
  const ours = async (): Promise<string[]> => shardTablesIn((await env.topo.run(env.client, ['nft', 'list', 'tables'])).stdout, 'inet', 'multus_proxy');
  /** Service i: cluster IP 10.96.7.<i+1>, endpoints the backends given. */
  const svc = (i: number, pods: readonly Pod[]) => ({ ...webTarget(endpoints(pods, 4, HTTP_PORT)), service: `demo/shard${i}`, clusterIP: `10.96.7.${i + 1}` });
  // 24 requests: a two-endpoint Service answered by one endpoint only has odds 2^-23 (with 6, as
  // before, 1 in 32 per Service; CI of 3836511 failed on it).
  const names = async (i: number, n = 24): Promise<string[]> => [...tally(await httpRequests(env.topo, env.client, `http://10.96.7.${i + 1}:80/`, n)).keys()].sort();

  void test('seven Services over 8 tables each reach only their endpoints; none-left is refused; a change goes through the writer into its shard; shrinking removes the tables but two', async () => {
    const [b1, b2, b3] = env.backends;
    assert.ok(b1 && b2 && b3);
    const pick = (i: number): Pod[] => [[b1], [b2], [b3], [b1, b2], [b2, b3], [b1, b3]][i] ?? [];
    const six = Array.from({ length: 6 }, (_, i) => svc(i, pick(i)));
    await dp.sync(state(env, [...six, svc(6, [])]), { full: true });
    assert.equal((await ours()).length, 8);
    assert.equal(await dp.checkDrift({ deep: true }), undefined);
    for (let i = 0; i < 6; i++)
      assert.deepEqual(
        await names(i),
        pick(i)
          .map((p) => p.name)
          .sort(),
        `Service ${i}`,
      );
    const refused = await httpRequests(env.topo, env.client, 'http://10.96.7.7:80/', 2);
    assert.deepEqual(
      refused.map((r) => r.error),
      ['ECONNREFUSED', 'ECONNREFUSED'],
    );
    // An endpoint-only change: one map refill, through the writer, in whatever table holds it.
    const changed = six.map((t, i) => (i === 4 ? svc(4, [b1]) : t));
    const res = await dp.sync(state(env, [...changed, svc(6, [])]), { full: false });
    assert.equal(res.families[0]?.via, 'element-writer', JSON.stringify(res.families));
    assert.deepEqual(await names(4), [b1.name]);
    assert.equal(await dp.checkDrift({ deep: true }), undefined);
    // One Service left: two tables (hysteresis, shards.ts shardsAfter: one port is more than 75 %
    // of one table of one), the other six gone in the same transaction; it still serves.
    await dp.sync(state(env, [svc(2, [b3])]), { full: false });
    assert.deepEqual(await ours(), ['multus_proxy', 'multus_proxy-s1']);
    assert.deepEqual(await names(2), [b3.name]);
    assert.equal(await dp.checkDrift({ deep: true }), undefined);
    await dp.cleanup();
    assert.deepEqual(await ours(), []);
  });
});
