/**
 * The Reconciler's event → key mapping and its reads of the pod index, without a server: a fake
 * client records writes, `enqueue` records keys.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { matchesSelector, selectorFromMap } from '../../../src/annotations/label-selector.js';
import { podChangeUrgent, Reconciler } from '../../../cmd/controller/reconcile.js';
import { createControllerMetrics } from '../../../cmd/controller/metrics.js';
import type { KubeClient } from '../../../src/kube/client.js';
import { objectKey, type V1EndpointSlice, type V1Pod, type V1Service } from '../../../src/kube/types.js';
import { createLogger } from '../../../src/log.js';
import { createRegistry } from '../../../src/metrics.js';
import { SERVICE_NAME_LABEL } from '../../../src/keys.js';
import { networkStatus, pod, service } from './fixtures.js';

const NET = 'default/net-a';

interface Harness {
  readonly r: Reconciler;
  readonly keys: string[];
  readonly created: V1EndpointSlice[];
  /** What the fake server answered to each create and update: the objects its watch would then show. */
  readonly stored: V1EndpointSlice[];
  readonly services: Map<string, V1Service>;
}

/**
 * `onWrite` runs before the fake server answers: a watch event may overtake the answer.
 * `started`: the workers are running (events enqueue keys), as after the caches synced.
 */
function harness(onWrite?: (stored: V1EndpointSlice) => void, started = true, urgent?: string[]): Harness {
  const keys: string[] = [];
  const created: V1EndpointSlice[] = [];
  const stored: V1EndpointSlice[] = [];
  const services = new Map<string, V1Service>();
  let rv = 100;
  const unexpected = (): never => {
    throw new Error('unexpected API call in this test');
  };
  const client: KubeClient = {
    get: unexpected,
    list: unexpected,
    create: <T>(_path: string, body: T): Promise<T> => {
      const s = body as V1EndpointSlice;
      created.push(s);
      rv += 1;
      const out: V1EndpointSlice = { ...s, metadata: { ...s.metadata, name: `${s.metadata?.generateName ?? ''}${rv}`, resourceVersion: String(rv) } };
      stored.push(out);
      onWrite?.(out);
      return Promise.resolve(out as T);
    },
    replace: <T>(_path: string, body: T): Promise<T> => {
      const s = body as V1EndpointSlice;
      rv += 1;
      const out: V1EndpointSlice = { ...s, metadata: { ...s.metadata, resourceVersion: String(rv) } };
      stored.push(out);
      onWrite?.(out);
      return Promise.resolve(out as T);
    },
    patch: unexpected,
    delete: unexpected,
    watch: unexpected,
    requestCount: () => ({}),
  };
  const r = new Reconciler({
    client,
    logger: createLogger('test', 'silent'),
    metrics: createControllerMetrics(createRegistry('test')),
    events: { warn: () => true, record: () => true },
    getService: (key) => services.get(key),
    enqueue: (key) => keys.push(key),
    ...(urgent ? { enqueueUrgent: (key: string) => urgent.push(key) } : {}),
    enqueueAfter: (key) => keys.push(`after:${key}`),
    mayWrite: () => true,
    maxEndpointsPerSlice: 100,
    eventIntervalMs: 60_000,
  });
  if (started) r.startEnqueueing();
  return { r, keys, created, stored, services };
}

function addService(h: Harness, svc: V1Service): void {
  h.services.set(objectKey(svc), svc);
  h.r.onService(svc);
}

const backend = (name: string, labels: Record<string, string>, ip: string, namespace = 'default'): V1Pod => pod(name, { namespace, labels, status: networkStatus([{ name: NET, ips: [ip] }]) });

const addresses = (slices: readonly V1EndpointSlice[]): string[] => slices.flatMap((s) => (s.endpoints ?? []).flatMap((e) => e.addresses)).sort();

void describe('Reconciler: pod events to Service keys', () => {
  void test('while the caches fill, events only index; starting returns every key once, then events enqueue', () => {
    const h = harness(undefined, false);
    addService(h, service('web', { network: NET, selector: { app: 'web' } }));
    addService(h, service('db', { network: NET, selector: { app: 'db' } }));
    h.r.onPod(backend('a', { app: 'web' }, '10.1.0.1'), undefined);
    h.r.onNode('node-1', 'zone-a');
    // A slice of ours whose Service is gone: its key must come up too, so the slice gets deleted.
    const orphan: V1EndpointSlice = {
      addressType: 'IPv4',
      endpoints: [],
      metadata: { name: 'gone-abcde', namespace: 'default', labels: { [SERVICE_NAME_LABEL]: 'gone' }, resourceVersion: '3' },
    };
    h.r.onSlice(orphan, false);
    assert.deepEqual(h.keys, []);
    assert.deepEqual(h.r.startEnqueueing().sort(), ['default/db', 'default/gone', 'default/web']);
    h.r.onPod(backend('b', { app: 'db' }, '10.1.0.2'), undefined);
    assert.deepEqual(h.keys.splice(0), ['default/db']);
  });

  void test('pod add, relabel (old and new Services), irrelevant update and delete map to exactly the matching keys, in the pod namespace only', () => {
    const h = harness();
    addService(h, service('web', { network: NET, selector: { app: 'web' } }));
    addService(h, service('db', { network: NET, selector: { app: 'db' } }));
    addService(h, service('cache', { network: NET, selector: { app: 'cache' } }));
    addService(h, service('web-elsewhere', { namespace: 'other', network: NET, selector: { app: 'web' } }));
    h.keys.splice(0);

    const v1 = backend('p', { app: 'web' }, '10.1.0.1');
    h.r.onPod(v1, undefined);
    assert.deepEqual(h.keys.splice(0), ['default/web']);

    const v2 = backend('p', { app: 'db' }, '10.1.0.1');
    h.r.onPod(v2, v1);
    assert.deepEqual(h.keys.splice(0).sort(), ['default/db', 'default/web']);

    // Only the resourceVersion moved: nothing the slices read changed.
    const v3 = { ...v2, metadata: { ...v2.metadata, resourceVersion: '9' } };
    h.r.onPod(v3, v2);
    assert.deepEqual(h.keys.splice(0), []);

    h.r.onPod(undefined, v3);
    assert.deepEqual(h.keys.splice(0), ['default/db']);
  });

  void test('a Service whose selector changes is refiled: pod events follow the new selector', () => {
    const h = harness();
    addService(h, service('svc', { network: NET, selector: { app: 'web' } }));
    addService(h, service('svc', { network: NET, selector: { app: 'db' } }));
    h.keys.splice(0);
    h.r.onPod(backend('w', { app: 'web' }, '10.1.0.1'), undefined);
    assert.deepEqual(h.keys.splice(0), []);
    h.r.onPod(backend('d', { app: 'db' }, '10.1.0.2'), undefined);
    assert.deepEqual(h.keys.splice(0), ['default/svc']);
    // Withdrawn (annotation gone) and deleted Services get no pod events.
    addService(h, service('svc', { selector: { app: 'db' } }));
    h.keys.splice(0);
    h.r.onPod(backend('d2', { app: 'db' }, '10.1.0.3'), undefined);
    assert.deepEqual(h.keys.splice(0), []);
  });

  void test('property: the keys enqueued for a pod event are exactly the serving Services matching its old or new labels', () => {
    const labelsArb = fc.dictionary(fc.constantFrom('app', 'tier'), fc.constantFrom('a', 'b'), { maxKeys: 2 }).map((d) => ({ ...d }));
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom('s1', 's2', 's3', 's4'), fc.option(labelsArb, { nil: undefined })), { maxLength: 8 }),
        fc.array(fc.tuple(fc.constantFrom('p1', 'p2', 'p3'), fc.option(labelsArb, { nil: undefined })), { minLength: 1, maxLength: 12 }),
        (svcOps, podOps) => {
          const h = harness();
          const selectors = new Map<string, Record<string, string>>();
          for (const [name, selector] of svcOps) {
            // An empty spec.selector means "withdraw"; undefined here means the Service is deleted.
            const svc = service(name, { network: NET, selector: selector ?? {} });
            if (selector === undefined) {
              h.services.delete(objectKey(svc));
              h.r.onService(svc, true);
              selectors.delete(name);
            } else {
              addService(h, svc);
              if (Object.keys(selector).length > 0) selectors.set(name, selector);
              else selectors.delete(name);
            }
          }
          const current = new Map<string, V1Pod>();
          let ip = 1;
          for (const [name, labels] of podOps) {
            const old = current.get(name);
            const next = labels === undefined ? undefined : backend(name, labels, `10.2.0.${ip++}`);
            if (next === undefined && old === undefined) continue;
            h.keys.splice(0);
            h.r.onPod(next, old);
            if (next === undefined) current.delete(name);
            else current.set(name, next);
            const want = [...selectors]
              .filter(([, s]) => [next, old].some((p) => p !== undefined && matchesSelector(selectorFromMap(s), p.metadata?.labels)))
              .map(([n]) => `default/${n}`)
              .sort();
            assert.deepEqual([...new Set(h.keys)].sort(), want);
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});

void describe('Reconciler: the urgent lane (a pod deletion or Ready flip)', () => {
  const labels = { app: 'web' };
  const base = (o: { ready?: boolean; terminating?: boolean } = {}): V1Pod => pod('p', { labels, status: networkStatus([{ name: NET, ips: ['10.1.0.1'] }]), ...o });

  void test('podChangeUrgent: deletion begun or Ready flipped; nothing else', () => {
    assert.equal(podChangeUrgent(base(), base({ terminating: true })), true);
    assert.equal(podChangeUrgent(base(), base({ ready: false })), true);
    assert.equal(podChangeUrgent(base({ ready: false }), base()), true);
    assert.equal(podChangeUrgent(base(), base()), false);
    assert.equal(podChangeUrgent(base(), { ...base(), metadata: { ...base().metadata, labels: { app: 'other' } } }), false);
  });

  void test('the deletion enqueues its Services urgently; a new pod and a label change go in turn', () => {
    const urgent: string[] = [];
    const h = harness(undefined, true, urgent);
    addService(h, service('web', { network: 'net', selector: labels }));
    h.keys.length = 0;
    h.r.onPod(base(), undefined);
    h.r.onPod(base({ terminating: true }), base());
    assert.deepEqual(h.keys, ['default/web']);
    assert.deepEqual(urgent, ['default/web']);
    h.r.onPod(base({ terminating: true, ready: false }), base({ terminating: true }));
    assert.deepEqual(urgent, ['default/web', 'default/web']);
  });
});

void describe('Reconciler: reconcile reads the pod index', () => {
  void test('a Service gets exactly its pods, and follows relabels and deletes', async () => {
    const h = harness();
    const svc = service('web', { network: NET, selector: { app: 'web' } });
    addService(h, svc);
    const a = backend('a', { app: 'web' }, '10.1.0.1');
    const b = backend('b', { app: 'web', tier: 'x' }, '10.1.0.2');
    h.r.onPod(a, undefined);
    h.r.onPod(b, undefined);
    h.r.onPod(backend('c', { app: 'db' }, '10.1.0.3'), undefined);
    h.r.onPod(backend('d', { app: 'web' }, '10.1.0.4', 'other'), undefined);
    assert.equal(await h.r.reconcile('default/web'), 'written');
    assert.deepEqual(addresses(h.created), ['10.1.0.1', '10.1.0.2']);

    // A second Service over a relabeled and a deleted pod, on a fresh harness state.
    const h2 = harness();
    addService(h2, svc);
    h2.r.onPod(a, undefined);
    h2.r.onPod(b, undefined);
    h2.r.onPod(backend('b', { app: 'db' }, '10.1.0.2'), b);
    h2.r.onPod(undefined, a);
    h2.r.onPod(backend('e', { app: 'web' }, '10.1.0.5'), undefined);
    assert.equal(await h2.r.reconcile('default/web'), 'written');
    assert.deepEqual(addresses(h2.created), ['10.1.0.5']);
  });
});

void describe('Reconciler: the watch echo of our own write', () => {
  const setup = async (): Promise<{ h: Harness; mine: V1EndpointSlice }> => {
    const h = harness();
    addService(h, service('web', { network: NET, selector: { app: 'web' } }));
    h.r.onPod(backend('a', { app: 'web' }, '10.1.0.1'), undefined);
    assert.equal(await h.r.reconcile('default/web'), 'written');
    const mine = h.stored[0];
    if (mine === undefined) throw new Error('no slice created');
    h.keys.splice(0);
    return { h, mine };
  };

  void test('enqueues nothing; a later change of that slice by anyone else does, and so does its deletion', async () => {
    const { h, mine } = await setup();
    h.r.onSlice(mine, false);
    assert.deepEqual(h.keys.splice(0), []);
    assert.equal(await h.r.reconcile('default/web'), 'unchanged');
    // Someone edits our slice: a new resourceVersion, not ours.
    const edited: V1EndpointSlice = { ...mine, endpoints: [], metadata: { ...mine.metadata, resourceVersion: '999' } };
    h.r.onSliceUpdate(edited, mine);
    assert.deepEqual(h.keys.splice(0), ['default/web']);
    h.r.onSlice(edited, true);
    assert.deepEqual(h.keys.splice(0), ['default/web']);
  });

  void test('an event with our resourceVersion seen a second time (relist) enqueues as usual', async () => {
    const { h, mine } = await setup();
    h.r.onSlice(mine, false);
    h.r.onSlice(mine, false);
    assert.deepEqual(h.keys.splice(0), ['default/web']);
  });

  void test('a reconcile refused as stale before the echo is enqueued again by the echo, not only after its delay', async () => {
    const { h, mine } = await setup();
    // A pod change arrives before the watch shows our slice: the cache is behind our write.
    h.r.onPod(backend('b', { app: 'web' }, '10.1.0.2'), undefined);
    assert.deepEqual(h.keys.splice(0), ['default/web']);
    assert.equal(await h.r.reconcile('default/web'), 'stale');
    assert.deepEqual(h.keys.splice(0), ['after:default/web']);
    h.r.onSlice(mine, false);
    assert.deepEqual(h.keys.splice(0), ['default/web']);
    assert.equal(await h.r.reconcile('default/web'), 'written');
    assert.deepEqual(addresses(h.stored.slice(-1)), ['10.1.0.1', '10.1.0.2']);
  });

  void test("an urgent change does not wait for the echo of our previous write: it is planned from that write's answer", async () => {
    const urgent: string[] = [];
    const h = harness(undefined, true, urgent);
    addService(h, service('web', { network: NET, selector: { app: 'web' } }));
    const a = backend('a', { app: 'web' }, '10.1.0.1');
    h.r.onPod(a, undefined);
    h.r.onPod(backend('b', { app: 'web' }, '10.1.0.2'), undefined);
    assert.equal(await h.r.reconcile('default/web'), 'written');
    const mine = h.stored[0];
    if (mine === undefined) throw new Error('no slice created');
    h.keys.splice(0);
    // The pod's deletion arrives before the watch shows our slice.
    const deleting: V1Pod = { ...a, metadata: { ...a.metadata, deletionTimestamp: new Date() } };
    h.r.onPod(deleting, a);
    assert.deepEqual(urgent.splice(0), ['default/web']);
    assert.equal(await h.r.reconcile('default/web'), 'written', 'no wait for the echo');
    const update = h.stored.at(-1);
    assert.equal(h.created.length, 1, 'planned from the answer: the slice we created is updated, no second one');
    assert.equal(update?.metadata?.name, mine.metadata?.name);
    assert.deepEqual(
      update?.endpoints?.map((e) => [e.addresses[0], e.conditions?.terminating]),
      [
        ['10.1.0.1', true],
        ['10.1.0.2', false],
      ],
    );
    // A change that is not urgent still waits for the echo.
    h.r.onPod(backend('c', { app: 'web' }, '10.1.0.3'), undefined);
    assert.deepEqual([urgent.splice(0), h.keys.splice(0)], [[], ['default/web']]);
    assert.equal(await h.r.reconcile('default/web'), 'stale');
    // The echoes arrive late: the cache is current again and nothing is written twice.
    h.r.onSlice(mine, false);
    if (update !== undefined) h.r.onSliceUpdate(update, mine);
    const writes = h.stored.length;
    assert.equal(await h.r.reconcile('default/web'), 'written', 'c is added once the cache has both echoes');
    assert.equal(h.stored.length, writes + 1);
    assert.equal(h.created.length, 1);
  });

  void test('an echo that overtakes the answer to our write enqueues nothing; another event during the write does', async () => {
    // Filled in below: the hook needs the reconciler that the harness builds.
    const late: { r?: Reconciler; foreign?: V1EndpointSlice } = {};
    const h = harness((out) => {
      late.r?.onSlice(out, false);
      if (late.foreign !== undefined) late.r?.onSlice(late.foreign, false);
    });
    late.r = h.r;
    addService(h, service('web', { network: NET, selector: { app: 'web' } }));
    h.r.onPod(backend('a', { app: 'web' }, '10.1.0.1'), undefined);
    h.keys.splice(0);
    assert.equal(await h.r.reconcile('default/web'), 'written');
    assert.deepEqual(h.keys.splice(0), []);
    assert.equal(await h.r.reconcile('default/web'), 'unchanged');

    // Next write: someone else's slice of the same Service shows up meanwhile.
    const mine = h.stored[0];
    if (mine === undefined) throw new Error('no slice created');
    late.foreign = { ...mine, metadata: { ...mine.metadata, name: 'web-by-hand', resourceVersion: '5000' } };
    h.r.onPod(backend('b', { app: 'web' }, '10.1.0.2'), undefined);
    h.keys.splice(0);
    assert.equal(await h.r.reconcile('default/web'), 'written');
    assert.deepEqual(h.keys.splice(0), ['default/web']);
  });
});
