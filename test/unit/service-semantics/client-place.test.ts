import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clientPlace, zoneFromSlices } from '../../../src/service-semantics/client-place.js';
import type { V1EndpointSlice } from '../../../src/kube/types.js';

const slice = (eps: { node?: string; zone?: string }[]): V1EndpointSlice => ({
  addressType: 'IPv4',
  endpoints: eps.map((e, i) => ({ addresses: [`10.0.0.${i + 1}`], ...(e.node !== undefined ? { nodeName: e.node } : {}), ...(e.zone !== undefined ? { zone: e.zone } : {}) })),
});

void test('NODE_ZONE wins; the slices fill in a missing zone from an endpoint on this node', () => {
  const slices = [slice([{ node: 'n2', zone: 'b' }]), slice([{ node: 'n1', zone: 'a' }, { node: 'n1' }])];
  assert.deepEqual(clientPlace('n1', 'z', slices), { nodeName: 'n1', zone: 'z' });
  assert.deepEqual(clientPlace('n1', '', slices), { nodeName: 'n1', zone: 'a' });
});

void test('no endpoint on this node, no node name, or endpoints that disagree: no zone (zone hints unused)', () => {
  assert.equal(zoneFromSlices('n3', [slice([{ node: 'n1', zone: 'a' }])]), undefined);
  assert.equal(zoneFromSlices('', [slice([{ zone: 'a' }])]), undefined);
  assert.equal(zoneFromSlices('n1', [slice([{ node: 'n1', zone: 'a' }]), slice([{ node: 'n1', zone: 'b' }])]), undefined);
  assert.deepEqual(clientPlace('n3', '', [slice([{ node: 'n1', zone: 'a' }])]), { nodeName: 'n3', zone: '' });
});
