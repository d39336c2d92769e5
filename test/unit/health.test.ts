/** src/health.ts: `/readyz?wait=<s>` holds the answer until ready (the sidecar's startup probe), on a real local server. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readyWaitMs, startHealthServer } from '../../src/health.js';

void test('readyWaitMs: seconds from the query, capped; anything else is no wait', () => {
  assert.equal(readyWaitMs('wait=9'), 9000);
  assert.equal(readyWaitMs('wait=0.5'), 500);
  assert.equal(readyWaitMs('wait=3600'), 60_000);
  for (const q of ['', 'wait=', 'wait=-1', 'wait=abc', 'other=1']) assert.equal(readyWaitMs(q), undefined, q);
});

void test('/readyz?wait= answers 200 the moment the program is ready, 503 when the wait ends first; without wait at once', async () => {
  let ready = false;
  const server = await startHealthServer({ live: () => true, ready: () => (ready ? { ready: true } : { ready: false, reason: 'first sync' }) }, undefined, 0, '127.0.0.1');
  const get = async (path: string): Promise<{ status: number; ms: number; body: string }> => {
    const t0 = Date.now();
    const r = await fetch(`http://127.0.0.1:${server.port}${path}`);
    return { status: r.status, body: await r.text(), ms: Date.now() - t0 };
  };
  try {
    const now = await get('/readyz');
    assert.equal(now.status, 503);
    assert.ok(now.ms < 500, `no wait asked: answered at once (${now.ms} ms)`);
    const short = await get('/readyz?wait=0.2');
    assert.equal(short.status, 503);
    assert.match(short.body, /not ready: first sync/);
    assert.ok(short.ms >= 180, `held for the wait (${short.ms} ms)`);
    setTimeout(() => (ready = true), 300);
    const held = await get('/readyz?wait=5');
    assert.equal(held.status, 200);
    assert.ok(held.ms >= 250 && held.ms < 2000, `answered when ready, not at the end of the wait (${held.ms} ms)`);
    const after = await get('/readyz?wait=5');
    assert.equal(after.status, 200);
    assert.ok(after.ms < 500);
  } finally {
    await server.close();
  }
});

void test('closing the server ends a held /readyz?wait= (a sidecar stopping during start-up)', async () => {
  const server = await startHealthServer({ live: () => true, ready: () => ({ ready: false }) }, undefined, 0, '127.0.0.1');
  const pending = fetch(`http://127.0.0.1:${server.port}/readyz?wait=30`).then(
    (r) => r.status,
    () => 'closed',
  );
  await new Promise((r) => setTimeout(r, 100));
  const t0 = Date.now();
  await server.close();
  assert.equal(await pending, 'closed');
  assert.ok(Date.now() - t0 < 2000);
});
