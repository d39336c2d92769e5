/** The informer against a real kube-apiserver (the suite's shared control plane). */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import pino from 'pino';
import { createInformer } from '../../src/kube/informer.js';
import { apiPath } from '../../src/kube/paths.js';
import type { KubeObject } from '../../src/kube/types.js';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';

interface ConfigMap extends KubeObject {
  data?: Record<string, string>;
}

const cmPath = (ns: string, name?: string): string => apiPath('', 'v1', 'configmaps', ns, name);
const cm = (name: string, labels: Record<string, string> = {}, data: Record<string, string> = {}): ConfigMap => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, labels },
  data,
});

/** Records handler calls as "add:name", "update:name", "delete:name". */
function recorder(): { log: string[]; handlers: { add(o: KubeObject): void; update(o: KubeObject): void; delete(o: KubeObject): void } } {
  const log: string[] = [];
  const name = (o: KubeObject): string => o.metadata?.name ?? '?';
  return { log, handlers: { add: (o) => log.push(`add:${name(o)}`), update: (o) => log.push(`update:${name(o)}`), delete: (o) => log.push(`delete:${name(o)}`) } };
}

void describe('informer on a real apiserver', () => {
  let cp: ControlPlane;
  let ns: string;
  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('inf');
    await cp.createNamespace(ns);
  });
  after(async () => {
    await cp.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
    await cp.stop();
  });

  void test('lists, syncs, then sees add, update and delete; label selector applies to list and watch', async (t) => {
    await cp.client.create(cmPath(ns), cm('pre-match', { app: 'x' }));
    await cp.client.create(cmPath(ns), cm('pre-other', { app: 'y' }));
    const inf = createInformer<ConfigMap>(cp.client, { path: cmPath(ns), labelSelector: 'app=x', watchdogMs: 30_000 });
    t.after(() => inf.stop());
    const rec = recorder();
    inf.on(rec.handlers);
    inf.start();
    assert.equal(inf.hasSynced(), false);
    await inf.synced;
    assert.equal(inf.hasSynced(), true);
    assert.deepEqual(
      inf.list().map((o) => o.metadata?.name),
      ['pre-match'],
    );

    await cp.client.create(cmPath(ns), cm('new-match', { app: 'x' }));
    await cp.client.create(cmPath(ns), cm('new-other', { app: 'y' }));
    await cp.client.patch(cmPath(ns, 'pre-match'), { data: { k: 'v' } }, 'merge');
    // Leaving the selector is a delete for this informer; entering it is an add.
    await cp.client.patch(cmPath(ns, 'new-match'), { metadata: { labels: { app: 'y' } } }, 'merge');
    await cp.client.patch(cmPath(ns, 'pre-other'), { metadata: { labels: { app: 'x' } } }, 'merge');
    await cp.client.delete(cmPath(ns, 'pre-match'));
    await waitFor(
      'the informer to see all changes',
      () => rec.log.length >= 6,
      15_000,
      () => rec.log.join(' '),
    );
    assert.deepEqual(rec.log, ['add:pre-match', 'add:new-match', 'update:pre-match', 'delete:new-match', 'add:pre-other', 'delete:pre-match']);
    assert.deepEqual(
      inf.list().map((o) => o.metadata?.name),
      ['pre-other'],
    );
    assert.equal(inf.get(`${ns}/pre-other`)?.metadata?.labels?.['app'], 'x');
  });

  void test('field selector applies to list and watch; handlers registered late get the current objects', async (t) => {
    await cp.client.create(cmPath(ns), cm('field-a'));
    await cp.client.create(cmPath(ns), cm('field-b'));
    const inf = createInformer<ConfigMap>(cp.client, { path: cmPath(ns), fieldSelector: 'metadata.name=field-a' });
    t.after(() => inf.stop());
    inf.start();
    await inf.synced;
    const rec = recorder();
    inf.on(rec.handlers);
    assert.deepEqual(rec.log, ['add:field-a']);
    await cp.client.patch(cmPath(ns, 'field-b'), { data: { x: '1' } }, 'merge');
    await cp.client.patch(cmPath(ns, 'field-a'), { data: { x: '1' } }, 'merge');
    await waitFor(
      'update of field-a',
      () => rec.log.length >= 2,
      15_000,
      () => rec.log.join(' '),
    );
    assert.deepEqual(rec.log, ['add:field-a', 'update:field-a']);
  });

  void test('a throwing handler neither stops the informer nor starves the other handlers', async (t) => {
    const inf = createInformer<ConfigMap>(cp.client, { path: cmPath(ns), labelSelector: 'throw=yes' });
    t.after(() => inf.stop());
    let thrown = 0;
    inf.on({
      add: () => {
        thrown++;
        throw new Error('handler bug');
      },
    });
    const rec = recorder();
    inf.on(rec.handlers);
    inf.start();
    await inf.synced;
    await cp.client.create(cmPath(ns), cm('t1', { throw: 'yes' }));
    await cp.client.create(cmPath(ns), cm('t2', { throw: 'yes' }));
    await waitFor(
      'both adds',
      () => rec.log.length >= 2,
      15_000,
      () => rec.log.join(' '),
    );
    assert.equal(thrown, 2);
    assert.deepEqual(rec.log, ['add:t1', 'add:t2']);
  });

  void test('transform: stored and handed-out objects are the transformed ones, for list and watch; a throwing transform keeps the object as received', async (t) => {
    await cp.client.create(cmPath(ns), cm('tr-listed', { tr: 'yes' }, { keep: 'a', drop: 'b' }));
    // What the server sends carries managedFields: the transform has something to drop.
    const raw = await cp.client.get<ConfigMap>(cmPath(ns, 'tr-listed'));
    assert.ok((raw.metadata?.managedFields?.length ?? 0) > 0);
    const calls: string[] = [];
    const slim = (o: ConfigMap): ConfigMap => {
      calls.push(o.metadata?.name ?? '?');
      if (o.metadata?.name === 'tr-bad') throw new Error('transform bug');
      return { metadata: { name: o.metadata?.name, namespace: o.metadata?.namespace, resourceVersion: o.metadata?.resourceVersion }, data: { keep: o.data?.['keep'] ?? '' } };
    };
    const errors: string[] = [];
    const logger = pino({ level: 'error' }, { write: (line: string) => errors.push(line) });
    const inf = createInformer<ConfigMap>(cp.client, { path: cmPath(ns), labelSelector: 'tr=yes', transform: slim, logger });
    t.after(() => inf.stop());
    const seen: ConfigMap[] = [];
    const olds: ConfigMap[] = [];
    inf.on({ add: (o) => seen.push(o), update: (o, old) => (seen.push(o), olds.push(old)), delete: (o) => seen.push(o) });
    inf.start();
    await inf.synced;
    assert.deepEqual(inf.get(`${ns}/tr-listed`), { metadata: { name: 'tr-listed', namespace: ns, resourceVersion: raw.metadata?.resourceVersion }, data: { keep: 'a' } });

    await cp.client.create(cmPath(ns), cm('tr-watched', { tr: 'yes' }, { keep: 'c', drop: 'd' }));
    await cp.client.patch(cmPath(ns, 'tr-listed'), { data: { keep: 'e' } }, 'merge');
    await cp.client.create(cmPath(ns), cm('tr-bad', { tr: 'yes' }, { keep: 'f', drop: 'g' }));
    await cp.client.delete(cmPath(ns, 'tr-watched'));
    await waitFor(
      'all changes',
      () => seen.length >= 5,
      15_000,
      () => seen.map((o) => o.metadata?.name).join(' '),
    );
    assert.deepEqual(
      seen.map((o) => `${o.metadata?.name}:${JSON.stringify(o.data)}:${o.metadata?.managedFields === undefined ? 'slim' : 'full'}`),
      ['tr-listed:{"keep":"a"}:slim', 'tr-watched:{"keep":"c"}:slim', 'tr-listed:{"keep":"e"}:slim', 'tr-bad:{"drop":"g","keep":"f"}:full', 'tr-watched:{"keep":"c"}:slim'],
    );
    assert.deepEqual(
      olds.map((o) => o.data),
      [{ keep: 'a' }],
    );
    assert.equal(inf.get(`${ns}/tr-bad`)?.data?.['drop'], 'g');
    assert.equal(errors.length, 1);
    assert.match(errors[0] ?? '', /informer transform threw/);
    assert.match(errors[0] ?? '', new RegExp(`${ns}/tr-bad`));
    assert.deepEqual(calls, ['tr-listed', 'tr-watched', 'tr-listed', 'tr-bad', 'tr-watched']);
  });

  void test('after stop() the process exits on its own (no timers, sockets or requests left)', async () => {
    await cp.client.create(cmPath(ns), cm('exit-check'));
    const child = spawn(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'informer-child.ts'), cp.kubeconfigPath, cmPath(ns)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let stoppedAt = 0;
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      if (out.includes('stopped') && !stoppedAt) stoppedAt = Date.now();
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        resolve(null);
      }, 30_000);
      child.on('exit', (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    assert.equal(code, 0, `child did not exit cleanly by itself:\n${out}`);
    assert.match(out, /synced [1-9]/);
    assert.ok(stoppedAt > 0, out);
  });
});
