/**
 * What the controller keeps of a Service and what it does with one over budget, or one it cannot
 * read that has slices on a network no longer shared with it. Pure parts and a Reconciler over a
 * fake client that records its calls.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { slimService } from '../../../cmd/controller/slim.js';
import { TOPOLOGY_AWARE_HINTS_ANNOTATION, TOPOLOGY_MODE_ANNOTATION } from '../../../cmd/controller/topology-hints.js';
import { readServiceSpec } from '../../../cmd/controller/service-spec.js';
import { Reconciler } from '../../../cmd/controller/reconcile.js';
import { createControllerMetrics } from '../../../cmd/controller/metrics.js';
import { nadSharedWith } from '../../../src/annotations/nad-sharing.js';
import type { KubeClient } from '../../../src/kube/client.js';
import { objectKey, type V1EndpointSlice, type V1Service } from '../../../src/kube/types.js';
import { createLogger } from '../../../src/log.js';
import { createRegistry } from '../../../src/metrics.js';
import { MANAGED_BY, MANAGED_BY_LABEL, SERVICE_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from '../../../src/keys.js';
import { MAX_SERVICE_PORTS } from '../../../src/object-budgets.js';
import { service } from './fixtures.js';

void describe('slimService', () => {
  void test('keeps what the controller reads and drops the rest; the spec it reads is the same as from the whole object', () => {
    const whole = service('web', { namespace: 'ns', network: 'net-a', selector: { app: 'web' }, headless: true, publishNotReadyAddresses: true });
    whole.metadata = {
      ...whole.metadata,
      managedFields: [{ manager: 'kubectl' }],
      annotations: { ...whole.metadata?.annotations, 'kubectl.kubernetes.io/last-applied-configuration': 'x'.repeat(10_000) },
      deletionTimestamp: new Date(0),
    };
    whole.spec = { ...whole.spec, loadBalancerSourceRanges: Array.from({ length: 1000 }, () => '10.0.0.0/8') };
    const slim = slimService(whole);
    assert.deepEqual(readServiceSpec(slim), readServiceSpec(whole));
    assert.equal(slim.metadata?.managedFields, undefined);
    assert.deepEqual(Object.keys(slim.metadata?.annotations ?? {}), [SERVICE_NETWORK_ANNOTATION]);
    assert.equal(slim.spec?.loadBalancerSourceRanges, undefined);
    assert.ok(slim.metadata?.deletionTimestamp, 'a Service being deleted is still seen as such');
    assert.equal(slim.overBudget, undefined);
  });

  void test('keeps the fields the topology hints read: type, trafficDistribution and the topology annotations', () => {
    const whole = service('web', { namespace: 'ns', network: 'net-a', selector: { app: 'web' } });
    whole.metadata = { ...whole.metadata, annotations: { ...whole.metadata?.annotations, [TOPOLOGY_MODE_ANNOTATION]: 'Auto', [TOPOLOGY_AWARE_HINTS_ANNOTATION]: 'auto' } };
    whole.spec = { ...whole.spec, type: 'NodePort', trafficDistribution: 'PreferClose' };
    const slim = slimService(whole);
    assert.equal(slim.spec?.type, 'NodePort');
    assert.equal(slim.spec?.trafficDistribution, 'PreferClose');
    assert.equal(slim.metadata?.annotations?.[TOPOLOGY_MODE_ANNOTATION], 'Auto');
    assert.equal(slim.metadata?.annotations?.[TOPOLOGY_AWARE_HINTS_ANNOTATION], 'auto');
  });

  void test('over a budget: marked with it, its big parts dropped, refused whole by the spec with the fix', () => {
    const labels = Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`l${i}`, 'v'.repeat(60)]));
    const big = service('big', { namespace: 'ns', network: 'net-a', selector: { app: 'big' } });
    big.metadata = { ...big.metadata, labels: { ...big.metadata?.labels, ...labels } };
    const slim = slimService(big);
    assert.equal(slim.overBudget?.budget, 'bytes');
    assert.ok(JSON.stringify(slim).length < 2000, 'the cache holds a stub');
    const spec = readServiceSpec(slim);
    assert.equal(spec.kind, 'refuse');
    assert.match((spec as { message: string }).message, /Service ns\/big: its labels, annotations, ports and selector come to \d+ bytes, more than the 65536/);
    // Label only (no service-network annotation: it never reached the webhook): refused all the same, not withdrawn in silence.
    const labelOnly = service('label-only', { namespace: 'ns', selector: { app: 'big' } });
    labelOnly.metadata = { ...labelOnly.metadata, labels: { ...labelOnly.metadata?.labels, ...labels } };
    const labelOnlySpec = readServiceSpec(slimService(labelOnly));
    assert.equal(labelOnlySpec.kind, 'refuse');
    assert.match((labelOnlySpec as { message: string }).message, /^Service ns\/label-only: its labels/);

    const ports = service('ports', { namespace: 'ns', network: 'net-a', selector: { app: 'p' }, ports: Array.from({ length: MAX_SERVICE_PORTS + 1 }, (_, i) => ({ name: `p${i}`, port: 1000 + i })) });
    assert.equal(slimService(ports).overBudget?.budget, 'ports');
    const names = service('names', { namespace: 'ns', network: Array.from({ length: 33 }, (_, i) => `n${i}`).join(','), selector: { app: 'n' } });
    assert.deepEqual(readServiceSpec(names).kind, 'refuse');
    assert.equal(readServiceSpec(service('at', { namespace: 'ns', network: Array.from({ length: 32 }, (_, i) => `n${i}`).join(','), selector: { app: 'n' } })).kind, 'serve');
  });
});

void describe('Reconciler: Services it cannot serve', () => {
  const slice = (name: string, network: string): V1EndpointSlice => ({
    addressType: 'IPv4',
    endpoints: [],
    metadata: { name, namespace: 'ns', resourceVersion: '1', labels: { [SERVICE_NAME_LABEL]: 'web', [MANAGED_BY_LABEL]: MANAGED_BY }, annotations: { [SERVICE_NETWORK_ANNOTATION]: network } },
  });

  function harness(svc: V1Service): { r: Reconciler; deleted: string[]; warnings: string[] } {
    const deleted: string[] = [];
    const warnings: string[] = [];
    const unexpected = (): never => {
      throw new Error('unexpected API call');
    };
    const client = {
      get: unexpected,
      list: unexpected,
      create: unexpected,
      replace: unexpected,
      patch: unexpected,
      watch: unexpected,
      requestCount: () => ({}),
      delete: (path: string) => (deleted.push(path.slice(path.lastIndexOf('/') + 1)), Promise.resolve()),
    } as unknown as KubeClient;
    const r = new Reconciler({
      client,
      logger: createLogger('test', 'silent'),
      metrics: createControllerMetrics(createRegistry('test')),
      events: { warn: (_s, _subject, reason) => (warnings.push(reason), true), record: () => true },
      getService: (key) => (key === objectKey(svc) ? svc : undefined),
      enqueue: () => undefined,
      enqueueAfter: () => undefined,
      mayWrite: () => true,
      maxEndpointsPerSlice: 100,
      eventIntervalMs: 60_000,
      // Shared with nobody: only the Service's own namespace may use a NAD.
      nadSharing: (ref, ns) => nadSharedWith(ref, ns, {}, true),
    });
    r.onService(svc);
    r.onSlice(slice('web-own', 'ns/net-a'), false);
    r.onSlice(slice('web-other', 'victim/net'), false);
    r.startEnqueueing();
    return { r, deleted, warnings };
  }

  void test('an unreadable annotation keeps its slices, but not those on a network no longer shared with it', async () => {
    const h = harness(service('web', { namespace: 'ns', network: 'Bad_Name!', selector: { app: 'web' } }));
    await h.r.reconcile('ns/web');
    assert.deepEqual(h.deleted, ['web-other']);
    assert.deepEqual(h.warnings, ['InvalidServiceAnnotation']);
  });

  void test('over budget: every slice deleted, one OverBudget Warning', async () => {
    const h = harness(service('web', { namespace: 'ns', network: Array.from({ length: 40 }, (_, i) => `n${i}`).join(','), selector: { app: 'web' } }));
    await h.r.reconcile('ns/web');
    assert.deepEqual(h.deleted.sort(), ['web-other', 'web-own']);
    assert.deepEqual(h.warnings, ['OverBudget']);
  });
});
