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
  const answered: string[] = [];
  const get = async (path: string): Promise<{ status: number; ms: number; body: string }> => {
    const t0 = Date.now();
    const r = await fetch(`http://127.0.0.1:${server.port}${path}`);
    const out = { status: r.status, body: await r.text(), ms: Date.now() - t0 };
    answered.push(path);
    return out;
  };
  // Outcomes in order, not in milliseconds: a request that waited to the end of a 30 s wait would
  // come after this marker.
  let waitEnded = false;
  const marker = setTimeout(() => (waitEnded = true), 30_000);
  try {
    const [now, short] = await Promise.all([get('/readyz'), get('/readyz?wait=0.2')]);
    assert.equal(now.status, 503);
    assert.deepEqual(answered, ['/readyz', '/readyz?wait=0.2'], 'no wait asked: answered at once, before a 0.2 s wait ends');
    assert.equal(short.status, 503);
    assert.match(short.body, /not ready: first sync/);
    assert.ok(short.ms >= 180, `held for the wait (${short.ms} ms)`);
    setTimeout(() => (ready = true), 300);
    const held = await get('/readyz?wait=30');
    assert.equal(held.status, 200);
    assert.ok(held.ms >= 250 && !waitEnded, `answered when ready, not at the end of the wait (${held.ms} ms)`);
    const after = await get('/readyz?wait=30');
    assert.equal(after.status, 200);
    assert.ok(!waitEnded, 'ready already: answered without waiting');
  } finally {
    clearTimeout(marker);
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
  let waitEnded = false;
  const marker = setTimeout(() => (waitEnded = true), 30_000);
  await server.close();
  assert.equal(await pending, 'closed');
  clearTimeout(marker);
  assert.ok(!waitEnded, 'ended by the close, not by its 30 s wait');
});
