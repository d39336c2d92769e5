import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { legacySliceServiceKey, legacySlicesToRemove, removalMessage } from '../../../cmd/controller/migration.js';
import type { V1EndpointSlice, V1Service } from '../../../src/kube/types.js';
import { service } from './fixtures.js';

const slice = (name: string, svc?: string): V1EndpointSlice => ({
  addressType: 'IPv4',
  endpoints: [],
  metadata: { name, namespace: 'app', labels: { 'endpointslice.kubernetes.io/managed-by': 'multus-endpointslice-controller.npwg.k8s.io', ...(svc ? { 'kubernetes.io/service-name': svc } : {}) } },
});

void describe('migration from multus-service (pure part)', () => {
  void test('a legacy slice belongs to the Service its service-name label names', () => {
    assert.equal(legacySliceServiceKey(slice('a', 'web')), 'app/web');
    assert.equal(legacySliceServiceKey(slice('a')), undefined);
  });

  void test('removed only for a Service we serve: proxy label and a valid spec', () => {
    const legacy = [slice('a', 'web'), slice('b', 'web')];
    const served = service('web', { namespace: 'app', network: 'macvlan1', selector: { app: 'x' } });
    assert.deepEqual(legacySlicesToRemove(served, legacy), legacy);
    assert.deepEqual(legacySlicesToRemove(undefined, legacy), []);
    const unlabelled: V1Service = { ...served, metadata: { ...served.metadata, labels: {} } };
    assert.deepEqual(legacySlicesToRemove(unlabelled, legacy), []);
    const malformed: V1Service = { ...served, metadata: { ...served.metadata, annotations: { 'k8s.v1.cni.cncf.io/service-network': 'a,,b' } } };
    assert.deepEqual(legacySlicesToRemove(malformed, legacy), [], 'a typo must not take the old endpoints away');
  });

  void test('the Event names the Service, the slices and the label', () => {
    const svc = service('web', { namespace: 'app', network: 'macvlan1' });
    assert.equal(
      removalMessage(svc, ['web-b', 'web-a']),
      "Service app/web: deleted 2 EndpointSlices left by multus-service (endpointslice.kubernetes.io/managed-by=multus-endpointslice-controller.npwg.k8s.io): web-a, web-b; multus-proxy publishes this Service's endpoints now",
    );
  });
});
