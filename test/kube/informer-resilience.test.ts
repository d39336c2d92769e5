/**
 * The informer survives what breaks a plain ListWatch, on a private control plane whose apiserver
 * runs with --watch-cache=false (watches go straight to etcd, so a compacted resourceVersion
 * really yields 410 Gone). A loopback TCP proxy between informer and apiserver cuts the informer
 * off (refuse) or makes its watch go silent (blackhole) without touching the apiserver.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import pino from 'pino';
import { createKubeClient, type KubeClient, type ListOptions } from '../../src/kube/client.js';
import { createInformer, type Informer } from '../../src/kube/informer.js';
import { apiPath } from '../../src/kube/paths.js';
import { objectKey, type KubeObject } from '../../src/kube/types.js';
import { startControlPlane, type ControlPlane } from '../harness/controlplane.js';
import { startTcpProxy, type TcpProxy } from '../harness/tcpproxy.js';
import { waitFor } from '../harness/wait.js';

const cmPath = (ns: string, name?: string): string => apiPath('', 'v1', 'configmaps', ns, name);
const cm = (name: string, data: Record<string, string> = {}): KubeObject & { data: Record<string, string> } => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name },
  data,
});

/** Captures the informer's log lines (pino JSON) so a test can tell which path it took. */
function captureLogger(): { logger: pino.Logger; messages: () => string[] } {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString('utf8').split('\n')) if (l.trim()) lines.push((JSON.parse(l) as { msg: string }).msg);
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, sink), messages: () => [...lines] };
}

/** The client, recording the resourceVersion each list asked for ('' = none: a quorum read). */
function recordLists(inner: KubeClient): { client: KubeClient; rvs: string[] } {
  const rvs: string[] = [];
  const client: KubeClient = {
    get: (path, opts) => inner.get(path, opts),
    list: (path, opts?: ListOptions) => {
      rvs.push(opts?.resourceVersion ?? '');
      return inner.list(path, opts);
    },
    create: (path, body, opts) => inner.create(path, body, opts),
    replace: (path, body, opts) => inner.replace(path, body, opts),
    patch: (path, body, type, opts) => inner.patch(path, body, type, opts),
    delete: (path, opts) => inner.delete(path, opts),
    watch: (path, opts, onEvent, signal) => inner.watch(path, opts, onEvent, signal),
    requestCount: () => inner.requestCount(),
  };
  return { client, rvs };
}

/** Every handler call, plus a live view of how often each key was added. */
function tracker(inf: Informer<KubeObject>): { log: string[]; adds: Map<string, number> } {
  const log: string[] = [];
  const adds = new Map<string, number>();
  inf.on({
    add: (o) => {
      log.push(`add:${o.metadata?.name}`);
      adds.set(objectKey(o), (adds.get(objectKey(o)) ?? 0) + 1);
    },
    update: (o) => log.push(`update:${o.metadata?.name}`),
    delete: (o) => log.push(`delete:${o.metadata?.name}`),
  });
  return { log, adds };
}

/** The informer's store equals what the apiserver has: same keys, same resourceVersions. */
async function assertMatchesServer(cp: ControlPlane, inf: Informer<KubeObject>, ns: string): Promise<void> {
  const want = async (): Promise<string[]> => (await cp.client.list<KubeObject>(cmPath(ns))).items.map((o) => `${objectKey(o)}@${o.metadata?.resourceVersion}`).sort();
  const have = (): string[] =>
    inf
      .list()
      .map((o) => `${objectKey(o)}@${o.metadata?.resourceVersion}`)
      .sort();
  let server: string[] = [];
  await waitFor(
    'informer store to match the apiserver',
    async () => {
      server = await want();
      return JSON.stringify(server) === JSON.stringify(have());
    },
    20_000,
    () => `server ${server.join(' ')} | informer ${have().join(' ')}`,
  );
}

void describe('informer resilience (private control plane, --watch-cache=false)', () => {
  let cp: ControlPlane;
  let proxy: TcpProxy;
  before(async () => {
    cp = await startControlPlane({ watchCache: false });
    proxy = await startTcpProxy(Number(new URL(cp.server).port));
  });
  after(async () => {
    await proxy?.close();
    await cp?.stop();
  });

  /** A client that reaches the apiserver through the proxy. */
  const proxied = () => createKubeClient({ ...cp.connection, server: `https://127.0.0.1:${proxy.port}` });

  void test('survives an apiserver restart without losing or duplicating objects', async (t) => {
    const ns = 'restart';
    await cp.createNamespace(ns);
    for (const n of ['a', 'b', 'c']) await cp.client.create(cmPath(ns), cm(n));
    const inf = createInformer<KubeObject>(cp.client, { path: cmPath(ns), minBackoffMs: 100, maxBackoffMs: 1_000, watchdogMs: 30_000 });
    t.after(() => inf.stop());
    const { log, adds } = tracker(inf);
    inf.start();
    await inf.synced;
    await cp.restartApiserver();
    await cp.client.create(cmPath(ns), cm('d'));
    await cp.client.delete(cmPath(ns, 'b'));
    await cp.client.patch(cmPath(ns, 'a'), { data: { v: '2' } }, 'merge');
    await assertMatchesServer(cp, inf, ns);
    assert.deepEqual([...adds.values()], [1, 1, 1, 1], `one add per object: ${log.join(' ')}`);
    assert.deepEqual(
      log.filter((l) => !l.startsWith('add:')),
      ['delete:b', 'update:a'],
    );
  });

  void test('etcd compaction while disconnected: 410 Gone, relist, and only the real differences are emitted', async (t) => {
    const ns = 'compact';
    await cp.createNamespace(ns);
    for (const n of ['keep', 'change', 'vanish']) await cp.client.create(cmPath(ns), cm(n));
    const client = proxied();
    const { logger, messages } = captureLogger();
    const inf = createInformer<KubeObject>(client, { path: cmPath(ns), minBackoffMs: 100, maxBackoffMs: 500, watchdogMs: 30_000, logger });
    t.after(() => inf.stop());
    const { log, adds } = tracker(inf);
    inf.start();
    await inf.synced;
    await waitFor('the watch to be open', () => (client.requestCount()['watch'] ?? 0) >= 1);
    const listsBefore = client.requestCount()['list'] ?? 0;
    const logBefore = log.length;

    proxy.setMode('refuse');
    await cp.client.delete(cmPath(ns, 'vanish'));
    await cp.client.create(cmPath(ns), cm('appeared'));
    await cp.client.patch(cmPath(ns, 'change'), { data: { v: '2' } }, 'merge');
    const revision = await cp.compactEtcd();
    assert.ok(revision > 0);
    await waitFor('the informer to notice the cut', () => messages().includes('list/watch failed; retrying'));
    proxy.setMode('pass');

    await assertMatchesServer(cp, inf, ns);
    assert.ok(messages().includes('watch expired (410 Gone); relisting'), `410 path taken: ${messages().join(' | ')}`);
    assert.ok((client.requestCount()['list'] ?? 0) > listsBefore, 'relisted');
    assert.deepEqual(log.slice(logBefore).sort(), ['add:appeared', 'delete:vanish', 'update:change']);
    assert.ok(
      [...adds.values()].every((n) => n === 1),
      `no duplicate adds: ${log.join(' ')}`,
    );
  });

  void test('the watchdog restarts a watch that went silent', async (t) => {
    const ns = 'silent';
    await cp.createNamespace(ns);
    const client = proxied();
    const { logger, messages } = captureLogger();
    const inf = createInformer<KubeObject>(client, { path: cmPath(ns), minBackoffMs: 100, maxBackoffMs: 500, watchdogMs: 1_500, logger });
    t.after(() => inf.stop());
    const { log } = tracker(inf);
    inf.start();
    await inf.synced;
    await waitFor('the watch to be open', () => (client.requestCount()['watch'] ?? 0) >= 1);
    proxy.setMode('blackhole');
    await cp.client.create(cmPath(ns), cm('during-silence'));
    await waitFor('the watchdog to fire', () => messages().includes('watch silent too long (watchdog); restarting it'), 10_000);
    assert.equal(log.length, 0, `nothing can arrive through the black hole: ${log.join(' ')}`);
    proxy.setMode('pass');
    await waitFor(
      'the object created during the silence',
      () => log.includes('add:during-silence'),
      15_000,
      () => messages().join(' | '),
    );
    assert.ok((client.requestCount()['watch'] ?? 0) >= 2, 'a new watch was opened');
    assert.equal(client.requestCount()['list'], 1, 'restarting a silent watch needs no relist');
  });

  void test('HTTP/2 (opt-in): one connection carries every list and watch of the client, and comes back after an apiserver restart', async (t) => {
    const namespaces = ['h2-a', 'h2-b', 'h2-c'];
    for (const ns of namespaces) {
      await cp.createNamespace(ns);
      await cp.client.create(cmPath(ns), cm('before'));
    }
    const client = createKubeClient({ ...cp.connection, server: `https://127.0.0.1:${proxy.port}` }, { http2: true });
    const accepted = proxy.connections();
    const infs = namespaces.map((ns) => createInformer<KubeObject>(client, { path: cmPath(ns), minBackoffMs: 100, maxBackoffMs: 1_000, watchdogMs: 30_000 }));
    t.after(() => infs.forEach((i) => i.stop()));
    const trackers = infs.map((i) => tracker(i));
    infs.forEach((i) => i.start());
    await Promise.all(infs.map((i) => i.synced));
    await waitFor('three watches open', () => (client.requestCount()['watch'] ?? 0) >= 3);
    assert.equal(proxy.connections() - accepted, 1, 'three lists and three watches over one connection');
    await cp.restartApiserver();
    for (const ns of namespaces) {
      await cp.client.create(cmPath(ns), cm('after'));
      await cp.client.delete(cmPath(ns, 'before'));
    }
    for (const [k, ns] of namespaces.entries()) {
      await assertMatchesServer(cp, infs[k]!, ns);
      assert.deepEqual([...trackers[k]!.adds.values()], [1, 1], `one add per object: ${trackers[k]!.log.join(' ')}`);
    }
  });

  void test('HTTP/2 (opt-in): a watch on a connection that went silent is restarted by the watchdog and recovers when bytes pass again', async (t) => {
    const ns = 'h2-silent';
    await cp.createNamespace(ns);
    const client = createKubeClient({ ...cp.connection, server: `https://127.0.0.1:${proxy.port}` }, { http2: true });
    const { logger, messages } = captureLogger();
    const inf = createInformer<KubeObject>(client, { path: cmPath(ns), minBackoffMs: 100, maxBackoffMs: 500, watchdogMs: 1_500, logger });
    t.after(() => inf.stop());
    const { log } = tracker(inf);
    inf.start();
    await inf.synced;
    await waitFor('the watch to be open', () => (client.requestCount()['watch'] ?? 0) >= 1);
    proxy.setMode('blackhole');
    await cp.client.create(cmPath(ns), cm('during-silence'));
    await waitFor('the watchdog to fire', () => messages().includes('watch silent too long (watchdog); restarting it'), 10_000);
    proxy.setMode('pass');
    await waitFor(
      'the object created during the silence',
      () => log.includes('add:during-silence'),
      20_000,
      () => messages().join(' | '),
    );
  });

  for (const listFrom of ['cache', 'quorum'] as const) {
    void test(`lists (${listFrom}): ${listFrom === 'cache' ? 'first at resourceVersion=0 (watch cache), after 410 at the last one seen' : 'every list a quorum read (the old way)'}`, async (t) => {
      const ns = `lists-${listFrom}`;
      await cp.createNamespace(ns);
      for (const n of ['a', 'b']) await cp.client.create(cmPath(ns), cm(n));
      const { client, rvs } = recordLists(proxied());
      const { logger, messages } = captureLogger();
      const inf = createInformer<KubeObject>(client, { path: cmPath(ns), minBackoffMs: 100, maxBackoffMs: 500, watchdogMs: 30_000, relistJitterMs: 1_000, listFrom, logger });
      t.after(() => inf.stop());
      inf.start();
      await inf.synced;
      await waitFor('the watch to be open', () => (client.requestCount()['watch'] ?? 0) >= 1);
      await cp.client.create(cmPath(ns), cm('c'));
      await waitFor('the watch to deliver c', () => inf.get(`${ns}/c`) !== undefined);
      const seen = inf.get(`${ns}/c`)?.metadata?.resourceVersion ?? '';
      proxy.setMode('refuse');
      await cp.client.delete(cmPath(ns, 'a'));
      await cp.client.create(cmPath(ns), cm('d')); // compaction at the delete's own revision would drop its tombstone
      await cp.compactEtcd();
      await waitFor('the informer to notice the cut', () => messages().includes('list/watch failed; retrying'));
      proxy.setMode('pass');
      await assertMatchesServer(cp, inf, ns);
      assert.ok(messages().includes('watch expired (410 Gone); relisting'), `410 path taken: ${messages().join(' | ')}`);
      if (listFrom === 'cache') {
        // The relist is unpaginated, so "not older than" (a paginated one would be an exact read
        // of the compacted revision: 410, and an endless loop after an apiserver restart).
        assert.deepEqual(rvs, ['0', seen], 'first from the watch cache, the relist not older than what was seen');
      } else {
        assert.deepEqual(rvs, ['', ''], 'one list, one relist, both quorum reads');
      }
    });
  }
});
