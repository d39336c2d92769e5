/**
 * The lean client against a scripted loopback HTTP server: watch streams cut at awkward places,
 * ERROR events, Status errors, paging, token-file rotation, abort.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import fc from 'fast-check';
import { createKubeClient, isGone, KubeApiError, LineSplitter } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { WatchEvent } from '../../src/kube/types.js';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

async function fakeServer(t: { after(fn: () => Promise<void> | void): void }, handler: Handler): Promise<string> {
  const srv = http.createServer(handler);
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  srv.on('connection', () => serverConnections.set(url, (serverConnections.get(url) ?? 0) + 1));
  t.after(
    () =>
      new Promise<void>((r) => {
        srv.closeAllConnections();
        srv.close(() => r());
      }),
  );
  const addr = srv.address();
  const url = `http://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
  return url;
}

/** Connections each fake server accepted, by its URL. */
const serverConnections = new Map<string, number>();

void describe('paths', () => {
  void test('core, grouped, namespaced and cluster-scoped', () => {
    assert.equal(apiPath('', 'v1', 'pods', 'ns', 'web'), '/api/v1/namespaces/ns/pods/web');
    assert.equal(apiPath('', 'v1', 'namespaces', undefined, 'ns'), '/api/v1/namespaces/ns');
    assert.equal(apiPath('discovery.k8s.io', 'v1', 'endpointslices'), '/apis/discovery.k8s.io/v1/endpointslices');
    assert.equal(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', 'a'), '/apis/k8s.cni.cncf.io/v1/namespaces/a/network-attachment-definitions');
  });
});

void describe('LineSplitter', () => {
  void test('any split of the stream yields the same lines', () => {
    const lines = ['{"type":"ADDED","object":{"a":1}}', '{"type":"MODIFIED","object":{"b":"ü€"}}', '{"type":"DELETED","object":{}}'];
    const text = lines.join('\n') + '\n';
    fc.assert(
      fc.property(fc.array(fc.nat(text.length), { maxLength: 8 }), (cuts) => {
        const points = [...new Set(cuts)].sort((a, b) => a - b);
        const s = new LineSplitter();
        const out: string[] = [];
        let prev = 0;
        for (const p of [...points, text.length]) {
          out.push(...s.push(text.slice(prev, p)));
          prev = p;
        }
        out.push(...s.end());
        assert.deepEqual(out, lines);
      }),
    );
  });
  void test('a last line without newline is delivered at the end', () => {
    const s = new LineSplitter();
    assert.deepEqual(s.push('a\nb'), ['a']);
    assert.deepEqual(s.end(), ['b']);
  });
});

void describe('client against a scripted server', () => {
  void test('watch: events split mid-line and mid-character arrive whole; ERROR 410 rejects as Gone', async (t) => {
    const events = [
      { type: 'ADDED', object: { metadata: { name: 'a', resourceVersion: '1' }, note: 'ünïcödé €' } },
      { type: 'BOOKMARK', object: { metadata: { resourceVersion: '2' } } },
      { type: 'MODIFIED', object: { metadata: { name: 'a', resourceVersion: '3' } } },
    ];
    const bytes = Buffer.from(events.map((e) => JSON.stringify(e)).join('\n') + '\n');
    let query = '';
    const url = await fakeServer(t, (req, res) => {
      query = req.url ?? '';
      res.writeHead(200, { 'Content-Type': 'application/json' });
      // Write in 7-byte pieces: cuts land inside JSON and inside multi-byte UTF-8 characters.
      void (async () => {
        for (let i = 0; i < bytes.length; i += 7) {
          res.write(bytes.subarray(i, i + 7));
          await delay(1);
        }
        res.end(JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version: 1 (5)' } }) + '\n');
      })();
    });
    const client = createKubeClient({ server: url });
    const got: WatchEvent<unknown>[] = [];
    const ctl = new AbortController();
    const err = await client
      .watch('/api/v1/pods', { resourceVersion: '1', allowWatchBookmarks: true, labelSelector: 'a=b' }, (e) => got.push(e), ctl.signal)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.deepEqual(got, events);
    assert.ok(err instanceof KubeApiError, `expected a KubeApiError, got ${String(err)}`);
    assert.equal(err.status, 410);
    assert.ok(isGone(err));
    assert.match(err.message, /too old resource version/);
    assert.match(query, /watch=true/);
    assert.match(query, /allowWatchBookmarks=true/);
    assert.match(query, /resourceVersion=1/);
    assert.match(query, /labelSelector=a%3Db/);
    assert.equal(client.requestCount()['watch'], 1);
  });

  void test('watch: after an ERROR event the stream is read to its end, so the next request reuses the connection', async (t) => {
    const url = await fakeServer(t, (req, res) => {
      if (!/watch=true/.test(req.url ?? '')) {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ metadata: { resourceVersion: '9' }, items: [] }));
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write(JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version: 1 (5)' } }) + '\n');
      // The apiserver ends the stream a moment after the ERROR event.
      setTimeout(() => res.end(), 30);
    });
    const client = createKubeClient({ server: url });
    const err = await client
      .watch('/api/v1/pods', { resourceVersion: '1' }, () => {}, new AbortController().signal)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.ok(isGone(err), `410 Gone: ${String(err)}`);
    // The relist follows at once (the old quorum mode does this): it must find the connection free.
    await client.list('/api/v1/pods', { resourceVersion: '5', limit: 0 });
    await client.list('/api/v1/pods', { resourceVersion: '5', limit: 0 });
    assert.equal(serverConnections.get(url), 1, 'one connection for the failed watch and both lists');
  });

  void test('watch: a stream that does not end after an ERROR event is cut after a second, and the watch rejects with the ERROR', async (t) => {
    const url = await fakeServer(t, (_req, res) => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.write(JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired', message: 'too old resource version: 1 (5)' } }) + '\n');
      // ... and never ends.
    });
    const client = createKubeClient({ server: url });
    const t0 = Date.now();
    const err = await client
      .watch('/api/v1/pods', { resourceVersion: '1' }, () => {}, new AbortController().signal)
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    const took = Date.now() - t0;
    assert.ok(isGone(err), `410 Gone, not a mid-stream cut: ${String(err)}`);
    assert.ok(took >= 900, `cut after the drain time (${took} ms)`);
  });

  void test('watch: abort resolves and closes the connection', async (t) => {
    let closed = false;
    const url = await fakeServer(t, (req, res) => {
      res.writeHead(200);
      res.write('{"type":"ADDED","object":{"metadata":{"name":"x"}}}\n');
      req.on('close', () => (closed = true));
    });
    const client = createKubeClient({ server: url });
    const ctl = new AbortController();
    let n = 0;
    const done = client.watch(
      '/api/v1/pods',
      {},
      () => {
        n++;
        ctl.abort();
      },
      ctl.signal,
    );
    await done;
    assert.equal(n, 1);
    await delay(50);
    assert.ok(closed, 'the server saw the connection close');
  });

  void test('watch: a connection cut mid-stream rejects', async (t) => {
    const url = await fakeServer(t, (req, res) => {
      res.writeHead(200);
      res.write('{"type":"ADDED","object":{}}\n{"type":"MOD');
      setTimeout(() => req.socket.destroy(), 20);
    });
    const client = createKubeClient({ server: url });
    await assert.rejects(
      client.watch('/x', {}, () => {}, new AbortController().signal),
      /closed mid-stream|aborted|socket hang up|ECONNRESET/,
    );
  });

  void test('every verb takes an abort signal: a hanging request ends when it aborts; an aborted one is not sent', async (t) => {
    let arrived = 0;
    const url = await fakeServer(t, () => {
      arrived++; // never answers: a partitioned apiserver
    });
    const client = createKubeClient({ server: url });
    const calls: [string, (signal: AbortSignal) => Promise<unknown>][] = [
      ['get', (signal) => client.get('/x', { signal })],
      ['list', (signal) => client.list('/x', { signal })],
      ['create', (signal) => client.create('/x', {}, { signal })],
      ['replace', (signal) => client.replace('/x', {}, { signal })],
      ['patch', (signal) => client.patch('/x', {}, 'merge', { signal })],
      ['delete', (signal) => client.delete('/x', { signal })],
    ];
    // The server never answers: each call can only end by the caller's abort.
    for (const [verb, call] of calls) await assert.rejects(call(AbortSignal.timeout(100)), /aborted by the caller/, verb);
    assert.equal(arrived, calls.length);
    const before = client.requestCount();
    await assert.rejects(client.replace('/x', {}, { signal: AbortSignal.abort(new Error('no permission')) }), /aborted by the caller \(no permission\)/);
    assert.deepEqual(client.requestCount(), before, 'not counted');
    await delay(50);
    assert.equal(arrived, calls.length, 'not sent');
  });

  void test('errors carry status, reason and the apiserver message; delete ignores 404', async (t) => {
    const url = await fakeServer(t, (req, res) => {
      if (req.method === 'DELETE') {
        res.writeHead(404, { 'Content-Type': 'application/json' });
        res.end(JSON.stringify({ kind: 'Status', code: 404, reason: 'NotFound', message: 'pods "x" not found' }));
        return;
      }
      res.writeHead(422, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', code: 422, reason: 'Invalid', message: 'Service "s" is invalid: spec.ports: Required value', details: { causes: [{ field: 'spec.ports' }] } }));
    });
    const client = createKubeClient({ server: url });
    await client.delete('/api/v1/namespaces/a/pods/x');
    const e = await client.create('/api/v1/namespaces/a/services', {}).then(
      () => undefined,
      (x: unknown) => x,
    );
    assert.ok(e instanceof KubeApiError);
    assert.equal(e.status, 422);
    assert.equal(e.reason, 'Invalid');
    assert.equal(e.apiMessage, 'Service "s" is invalid: spec.ports: Required value');
    assert.match(e.message, /^POST \/api\/v1\/namespaces\/a\/services: 422 Invalid: Service "s" is invalid/);
    assert.deepEqual(e.details, { causes: [{ field: 'spec.ports' }] });
  });

  void test('list follows continue pages and keeps the first page resourceVersion', async (t) => {
    const seen: string[] = [];
    const url = await fakeServer(t, (req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      seen.push(u.search);
      const cont = u.searchParams.get('continue');
      res.writeHead(200, { 'Content-Type': 'application/json' });
      if (!cont) res.end(JSON.stringify({ metadata: { resourceVersion: '10', continue: 'p2' }, items: [{ n: 1 }, { n: 2 }] }));
      else res.end(JSON.stringify({ metadata: { resourceVersion: '10' }, items: [{ n: 3 }] }));
    });
    const client = createKubeClient({ server: url });
    const list = await client.list<{ n: number }>('/api/v1/pods', { limit: 2, fieldSelector: 'spec.nodeName=n1' });
    assert.deepEqual(
      list.items.map((i) => i.n),
      [1, 2, 3],
    );
    assert.equal(list.metadata?.resourceVersion, '10');
    assert.equal(seen.length, 2);
    assert.match(seen[1] ?? '', /continue=p2/);
    assert.match(seen[0] ?? '', /fieldSelector=spec.nodeName%3Dn1/);
    assert.equal(client.requestCount()['list'], 2);
  });

  void test('list parses items as they arrive (bytes cut mid-character) and transforms each; a malformed body is a clear error', async (t) => {
    const items = [
      { metadata: { name: 'a', resourceVersion: '1' }, note: 'ünïcödé €', big: 'x'.repeat(3000) },
      { metadata: { name: 'b', resourceVersion: '2' }, big: 'y' },
    ];
    const bytes = Buffer.from(JSON.stringify({ kind: 'PodList', metadata: { resourceVersion: '7' }, items }));
    let mode: 'ok' | 'bad' | 'status' = 'ok';
    const url = await fakeServer(t, (req, res) => {
      if (mode === 'status') {
        res.writeHead(403, { 'Content-Type': 'application/json' }).end(JSON.stringify({ kind: 'Status', code: 403, reason: 'Forbidden', message: 'pods is forbidden' }));
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/json' });
      const body = mode === 'ok' ? bytes : Buffer.from('{"metadata":{},"items":[{"a":1},{"b":}]}');
      void (async () => {
        for (let i = 0; i < body.length; i += 5) {
          res.write(body.subarray(i, i + 5));
          if (i % 500 === 0) await delay(1);
        }
        res.end();
      })();
    });
    const client = createKubeClient({ server: url });
    const seen: string[] = [];
    const list = await client.list<{ metadata: { name: string }; note?: string; big?: string }>('/api/v1/pods', {
      resourceVersion: '0',
      transform: (o) => {
        seen.push(o.metadata.name);
        return { metadata: o.metadata, ...(o.note === undefined ? {} : { note: o.note }) };
      },
    });
    assert.deepEqual(seen, ['a', 'b']);
    assert.deepEqual(list.items, [{ metadata: items[0]?.metadata, note: 'ünïcödé €' }, { metadata: items[1]?.metadata }]);
    assert.equal(list.metadata?.resourceVersion, '7');
    mode = 'bad';
    await assert.rejects(client.list('/api/v1/pods'), /^Error: GET \/api\/v1\/pods: the apiserver sent a list item that is not JSON .*\{"b":\}/);
    mode = 'status';
    await assert.rejects(client.list('/api/v1/pods'), (e: unknown) => e instanceof KubeApiError && e.status === 403 && /pods is forbidden/.test(e.message));
  });

  void test('patch content types, dryRun and field manager', async (t) => {
    const seen: { ct: string | undefined; url: string }[] = [];
    const url = await fakeServer(t, (req, res) => {
      seen.push({ ct: req.headers['content-type'], url: req.url ?? '' });
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{}');
    });
    const client = createKubeClient({ server: url });
    await client.patch('/p', [], 'json');
    await client.patch('/p', {}, 'merge', { dryRun: true });
    await client.patch('/p', {}, 'strategic');
    await client.patch('/p', {}, 'apply', { force: true });
    assert.deepEqual(
      seen.map((s) => s.ct),
      ['application/json-patch+json', 'application/merge-patch+json', 'application/strategic-merge-patch+json', 'application/apply-patch+yaml'],
    );
    assert.match(seen[1]?.url ?? '', /dryRun=All/);
    assert.match(seen[3]?.url ?? '', /fieldManager=multus-proxy/);
    assert.match(seen[3]?.url ?? '', /force=true/);
  });

  void test('a 401 re-reads the token file at once and retries once', async (t) => {
    let valid = 'old';
    const seen: string[] = [];
    const url = await fakeServer(t, (req, res) => {
      seen.push(req.headers.authorization ?? '');
      res.writeHead(req.headers.authorization === `Bearer ${valid}` ? 200 : 401, { 'Content-Type': 'application/json' });
      res.end('{}');
    });
    const dir = mkdtempSync(join(tmpdir(), 'mp-401-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'old');
    const client = createKubeClient({ server: url, tokenFile }, { tokenRereadMs: 3_600_000 });
    await client.get('/x');
    writeFileSync(tokenFile, 'new');
    valid = 'new';
    await client.get('/x'); // long before the re-read period: only the 401 makes it read the file
    assert.deepEqual(seen, ['Bearer old', 'Bearer old', 'Bearer new']);
    valid = 'neither';
    await assert.rejects(client.get('/x'), (e: { status?: number }) => e.status === 401);
    assert.equal(seen.length, 5, 'one retry, not a loop');
  });

  void test('a rotated token file is picked up', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'token-test-'));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, 'first\n');
    const auth: (string | undefined)[] = [];
    const url = await fakeServer(t, (req, res) => {
      auth.push(req.headers.authorization);
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{}');
    });
    const client = createKubeClient({ server: url, token: 'ignored-when-file-set', tokenFile }, { tokenRereadMs: 50 });
    await client.get('/x');
    writeFileSync(tokenFile, 'second\n');
    await client.get('/x'); // within the re-read interval: still the cached token
    await delay(80);
    await client.get('/x');
    assert.deepEqual(auth, ['Bearer first', 'Bearer first', 'Bearer second']);
  });
});
