/**
 * The nftables back end's endpoint maps (src/dataplane/nft/render.ts, pick-ranges.ts) with real
 * traffic in network namespaces this test creates: a Service port without affinity picks its
 * endpoint through `numgen random mod M map @MPX-EPS-<hash>`. Checked here: the split over N = 3
 * is equal (300 connections, chi-square), and endpoints changed under a client loop (each change
 * a map refill, no rule written) lose no connection and send none to a removed endpoint once the
 * sync has returned.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createDataplane, type Dataplane } from '../../src/dataplane/apply.js';
import { httpRequests, type Pod } from '../harness/netns.js';
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
    dp = createDataplane({ netns: env.client.ns, spareRestore: true, rules: 'nftables' });
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
      const text = res.families[0]?.restoreText ?? '';
      assert.match(text, /^flush map inet multus_proxy MPX-EPS-\S+\nadd element inet multus_proxy MPX-EPS-\S+ \{ [^\n]+ \}\n$/, text);
      steps.push({ pods, began, done });
      await pause(400);
    }
    loop.stdin?.end();
    await exited;
    const hits = JSON.parse(out) as Hit[];
    assert.ok(hits.length >= 30, `the loop ran (${hits.length} connections)`);
    assert.deepEqual(hits.filter((h) => h.error !== undefined), [], 'no connection failed while the maps changed');
    for (const [i, s] of steps.entries()) {
      const until = steps[i + 1]?.began ?? Infinity;
      // Started after this step's sync returned and before the next one began: only this step's endpoints.
      const inStep = hits.filter((h) => h.t0 > s.done && h.t0 < until);
      const allowed = new Set(s.pods.map((p) => p.name));
      assert.deepEqual(inStep.filter((h) => !allowed.has(h.name ?? '')), [], `step ${i} (${[...allowed].join(',')})`);
      assert.ok(inStep.length > 0, `step ${i} saw connections`);
    }
  });
});
