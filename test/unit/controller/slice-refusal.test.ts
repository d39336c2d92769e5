/**
 * A slice write refused as invalid (422): the pure decisions (which endpoints the answer names,
 * the slice without them, the message) and the writer's handling with a fake client, including
 * the case the real-apiserver test cannot provoke from tenant input (a refusal naming no endpoint).
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { describeSlice, isolateEndpoints, namedEndpoints, refusalMessage } from '../../../cmd/controller/slice-refusal.js';
import { Reconciler, RetryableWriteError } from '../../../cmd/controller/reconcile.js';
import { createControllerMetrics } from '../../../cmd/controller/metrics.js';
import { KubeApiError, type KubeClient } from '../../../src/kube/client.js';
import type { V1Endpoint, V1EndpointSlice, V1Service } from '../../../src/kube/types.js';
import { createLogger } from '../../../src/log.js';
import { createRegistry } from '../../../src/metrics.js';
import { MANAGED_BY, MANAGED_BY_LABEL, SERVICE_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from '../../../src/keys.js';
import { networkStatus, pod, service } from './fixtures.js';

const ep = (name: string, addresses: string[]): V1Endpoint => ({ addresses, conditions: { ready: true }, targetRef: { kind: 'Pod', namespace: 'ns', name } });
const slice = (endpoints: V1Endpoint[], name?: string): V1EndpointSlice => ({
  apiVersion: 'discovery.k8s.io/v1',
  kind: 'EndpointSlice',
  metadata: { ...(name === undefined ? { generateName: 'web-' } : { name }), namespace: 'ns' },
  addressType: 'IPv4',
  endpoints,
});

void describe('slice refusal: pure decisions', () => {
  void test('the endpoints named by the Status causes or, without details, by the message', () => {
    const details = {
      causes: [{ reason: 'FieldValueTooMany', field: 'endpoints[1].addresses' }, { field: 'endpoints[4].conditions' }, { field: 'metadata.labels' }, { field: 'endpoints[9].addresses' }],
    };
    assert.deepEqual(namedEndpoints(details, '', 5), [1, 4]);
    assert.deepEqual(namedEndpoints(undefined, 'EndpointSlice "web-x" is invalid: [endpoints[2].addresses: Too many: 101, endpoints[0].addresses[0]: Invalid value]', 3), [0, 2]);
    assert.deepEqual(namedEndpoints({ causes: 'x' }, 'ports[0].port: Invalid value', 3), []);
  });
  void test('property: never throws; indices sorted, unique, below the count', () => {
    fc.assert(
      fc.property(fc.anything(), fc.string({ maxLength: 300 }), fc.array(fc.nat(200), { maxLength: 5 }), fc.nat(150), (details, message, named, count) => {
        const text = `${message} ${named.map((i) => `endpoints[${i}].addresses`).join(', ')}`;
        const out = namedEndpoints(details, text, count);
        assert.deepEqual(
          out,
          [...new Set(out)].sort((a, b) => a - b),
        );
        assert.ok(out.every((i) => Number.isInteger(i) && i >= 0 && i < count));
        for (const i of named) if (i < count) assert.ok(out.includes(i));
      }),
    );
  });
  void test('isolating: the others are kept; nothing when none or all are named', () => {
    const s = slice([ep('a', ['10.0.0.1']), ep('bad', ['10.0.0.2']), ep('c', ['10.0.0.3'])], 'web-x');
    const out = isolateEndpoints(s, [1]);
    assert.deepEqual(
      out?.slice.endpoints?.map((e) => e.targetRef?.name),
      ['a', 'c'],
    );
    assert.deepEqual(
      out?.dropped.map((e) => e.targetRef?.name),
      ['bad'],
    );
    assert.equal(out?.slice.metadata?.name, 'web-x');
    assert.equal(isolateEndpoints(s, []), undefined);
    assert.equal(isolateEndpoints(s, [0, 1, 2]), undefined);
    assert.equal(isolateEndpoints(s, [7]), undefined);
  });
  void test("the message names the slice, the apiserver's words and what was done", () => {
    const many = Array.from({ length: 101 }, (_, i) => `10.3.1.${i + 1}`);
    const written = refusalMessage('ns/web', describeSlice(slice([]), 'ns/net'), 'create', 'endpoints[1].addresses: Too many', { written: true, dropped: [ep('bad', many)] });
    assert.equal(
      written,
      "Service ns/web: the apiserver refused the create of a new EndpointSlice ns/web-… (network ns/net, IPv4) as invalid: endpoints[1].addresses: Too many. Left out: Pod ns/bad (10.3.1.1, 10.3.1.2, 10.3.1.3 … 101 addresses); the slice's other endpoints were written. Retrying with backoff; fix what the apiserver names (the pod's network-status).",
    );
    const kept = refusalMessage('ns/web', describeSlice(slice([], 'web-x'), 'ns/net'), 'update', 'x'.repeat(5000), { written: false });
    assert.match(kept, /^Service ns\/web: the apiserver refused the update of EndpointSlice ns\/web-x as invalid: x{600}…\. The answer names no single endpoint/);
  });
});

void describe('slice refusal: the writer', () => {
  const svc: V1Service = service('web', { network: 'net-a,net-b', selector: { app: 'web' } });
  const status = networkStatus([
    { name: 'default/net-a', ips: ['10.1.0.1'] },
    { name: 'default/net-b', ips: ['10.2.0.1'] },
  ]);
  /** A slice of ours on a network the Service no longer names: the plan deletes it. */
  const stale: V1EndpointSlice = {
    ...slice([ep('old', ['10.9.0.1'])], 'web-old'),
    metadata: {
      name: 'web-old',
      namespace: 'default',
      resourceVersion: '5',
      labels: { [SERVICE_NAME_LABEL]: 'web', [MANAGED_BY_LABEL]: MANAGED_BY },
      annotations: { [SERVICE_NETWORK_ANNOTATION]: 'default/net-c' },
    },
  };

  function run(refuse: (s: V1EndpointSlice) => KubeApiError | undefined): {
    r: Reconciler;
    created: V1EndpointSlice[];
    deleted: string[];
    warnings: string[];
    registry: ReturnType<typeof createRegistry>;
  } {
    const created: V1EndpointSlice[] = [];
    const deleted: string[] = [];
    const warnings: string[] = [];
    const unexpected = (): never => {
      throw new Error('unexpected API call');
    };
    const client: KubeClient = {
      get: unexpected,
      list: unexpected,
      create: <T>(_p: string, body: T): Promise<T> => {
        const s = body as V1EndpointSlice;
        const e = refuse(s);
        if (e !== undefined) return Promise.reject(e);
        created.push(s);
        return Promise.resolve({ ...s, metadata: { ...s.metadata, name: `web-${created.length}`, resourceVersion: String(10 + created.length) } } as T);
      },
      replace: unexpected,
      patch: unexpected,
      delete: (p: string) => {
        deleted.push(p);
        return Promise.resolve();
      },
      watch: unexpected,
      requestCount: () => ({}),
    };
    const registry = createRegistry('t');
    const r = new Reconciler({
      client,
      logger: createLogger('test', 'silent'),
      metrics: createControllerMetrics(registry),
      events: { warn: (_s, _subject, reason, message) => (warnings.push(`${reason}: ${message}`), true), record: () => true },
      getService: () => svc,
      enqueue: () => undefined,
      enqueueAfter: () => undefined,
      mayWrite: () => true,
      maxEndpointsPerSlice: 100,
      eventIntervalMs: 60_000,
    });
    r.onService(svc);
    r.onSlice(stale, false);
    for (const name of ['a', 'b']) r.onPod(pod(name, { labels: { app: 'web' }, status }), undefined);
    return { r, created, deleted, warnings, registry };
  }
  const onNet = (s: V1EndpointSlice): string => s.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] ?? '';
  const invalid = (field: string): KubeApiError => new KubeApiError(422, `EndpointSlice.discovery.k8s.io "" is invalid: ${field}: Invalid value`, 'Invalid', { causes: [{ field }] });

  void test('a refusal naming no endpoint: that slice is left, the other network is written, the deletes wait, the key is retried', async () => {
    const h = run((s) => (onNet(s) === 'default/net-a' ? invalid('metadata.labels') : undefined));
    await assert.rejects(h.r.reconcile('default/web'), (e: unknown) => e instanceof RetryableWriteError && /1 left unwritten, deletes held/.test(e.message));
    assert.deepEqual(h.created.map(onNet), ['default/net-b']);
    assert.deepEqual(h.deleted, [], 'no slice deleted while another was refused');
    assert.equal(h.warnings.length, 1);
    assert.match(h.warnings[0] ?? '', /^SliceRefused: .*network default\/net-a, IPv4\) as invalid: .*metadata.labels.*names no single endpoint/);
    assert.match(await h.registry.metrics(), /slice_writes_refused_total\{verb="create"\} 1/);
  });

  void test('a refusal naming one endpoint: the slice is written without it, the deletes go ahead, the key is retried', async () => {
    const h = run((s) =>
      onNet(s) === 'default/net-a' && s.endpoints?.some((e) => e.targetRef?.name === 'b') ? invalid(`endpoints[${s.endpoints.findIndex((e) => e.targetRef?.name === 'b')}].addresses`) : undefined,
    );
    await assert.rejects(h.r.reconcile('default/web'), (e: unknown) => e instanceof RetryableWriteError && /0 left unwritten, deletes done/.test(e.message));
    assert.deepEqual(
      h.created.map((s) => [onNet(s), s.endpoints?.map((e) => e.targetRef?.name)]),
      [
        ['default/net-a', ['a']],
        ['default/net-b', ['a', 'b']],
      ],
    );
    assert.equal(h.deleted.length, 1);
    assert.match(h.warnings[0] ?? '', /Left out: Pod default\/b \(10\.1\.0\.1\)/);
  });

  void test('other errors are thrown as before, with no Event', async () => {
    const h = run(() => new KubeApiError(500, 'etcd down'));
    await assert.rejects(h.r.reconcile('default/web'), (e: unknown) => e instanceof KubeApiError && e.status === 500);
    assert.deepEqual(h.warnings, []);
  });
});
