/**
 * The informer transforms of the sidecar (cmd/sidecar/slim.ts): what they drop, what they keep, and
 * that the desired state built from slimmed objects is the one built from the objects as the
 * apiserver sends them.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { podInterfaces, readNetworkStatus, readServedNetworks } from '../../src/dataplane/core/state.js';
import { buildDesiredState } from '../../src/dataplane/core/incremental.js';
import { LAST_CHANGE_TRIGGER_TIME_ANNOTATION, refusalOf, slimEndpointSlice, slimPod, slimService } from '../../cmd/sidecar/slim.js';
import { SIDECAR_SERVICE_BUDGET } from '../../src/cache-budget.js';
import fc from 'fast-check';
import type { V1EndpointSlice, V1ObjectMeta, V1Pod, V1Service } from '../../src/kube/types.js';
import { NETWORK_STATUS_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { podObject, serviceObject, sliceObject } from './state-fixtures.js';

/** What the apiserver adds to every object: managedFields, uid, timestamps, a client's annotations. */
function asServed<T extends { metadata?: V1ObjectMeta }>(obj: T, rv: string): T {
  const meta = obj.metadata ?? {};
  return {
    ...obj,
    metadata: {
      ...meta,
      uid: `uid-${meta.name ?? ''}`,
      resourceVersion: rv,
      creationTimestamp: new Date('2026-01-01T00:00:00Z'),
      annotations: { ...meta.annotations, 'kubectl.kubernetes.io/last-applied-configuration': JSON.stringify(obj) },
      managedFields: [{ manager: 'kubectl', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:metadata': { 'f:labels': {} } } }],
    },
  };
}

const NET = 'ns1/net-a';
const pod = asServed(podObject('ns1', 'client', { serviceNetwork: 'net-a', status: [{ name: NET, interface: 'net1', ips: ['10.1.0.9', 'fd00::9'] }] }), '5');
const services: V1Service[] = [
  serviceObject('ns1', 'web', {
    networks: NET,
    clusterIPs: ['10.96.0.10', 'fd00:96::10'],
    ports: [
      { name: 'http', port: 80, targetPort: 8080 },
      { name: 'dns', port: 53, protocol: 'UDP' },
    ],
    affinitySeconds: 600,
  }),
  serviceObject('ns1', 'db', { networks: NET, clusterIPs: ['10.96.0.11'], ports: [{ port: 5432 }], affinitySeconds: 'default' }),
  serviceObject('ns1', 'headless', { networks: NET, headless: true, ports: [{ port: 80 }] }),
  serviceObject('ns1', 'lb', { networks: NET, clusterIPs: ['10.96.0.12'], ports: [{ port: 80 }], type: 'LoadBalancer' }),
  serviceObject('ns1', 'bad', { networks: 'not a/valid/network', clusterIPs: ['10.96.0.13'], ports: [{ port: 80 }] }),
].map((s, i) => {
  const served = asServed(s, String(10 + i));
  return { ...served, spec: { ...served.spec, selector: { app: 'x' }, internalTrafficPolicy: 'Cluster' }, status: { loadBalancer: {} } };
});
const slices: V1EndpointSlice[] = [
  sliceObject('ns1', 'web-v4', {
    service: 'web',
    network: NET,
    family: 4,
    ports: [
      { name: 'http', port: 8080 },
      { name: 'dns', port: 53, protocol: 'UDP' },
    ],
    endpoints: [{ ip: '10.1.0.2' }, { ip: '10.1.0.3', ready: false, serving: true, terminating: true }, { ip: '10.1.0.4', ready: true, serving: true, terminating: false }],
    triggerTime: '2026-01-01T00:00:01Z',
  }),
  sliceObject('ns1', 'web-v6', { service: 'web', network: NET, family: 6, ports: [{ name: 'http', port: 8080 }], endpoints: [{ ip: 'fd00::2', ready: true }] }),
  sliceObject('ns1', 'db-1', { service: 'db', network: NET, family: 4, ports: [{ port: 5432 }], endpoints: [{ ip: '10.1.0.5', ready: true, serving: true, terminating: false }] }),
].map((s, i) => {
  const served = asServed(s, String(20 + i));
  return { ...served, endpoints: served.endpoints.map((e) => ({ ...e, nodeName: 'node-1', targetRef: { kind: 'Pod', namespace: 'ns1', name: `p-${e.addresses[0] ?? ''}`, uid: 'u' } })) };
});

void describe('slim transforms', () => {
  void test('the desired state from slimmed objects equals the one from the objects as served', () => {
    // Interfaces come from the pod's annotations: read them from the full and the slimmed pod.
    const ifaces = (p: V1Pod): ReturnType<typeof podInterfaces> => {
      const served = readServedNetworks(p);
      const status = readNetworkStatus(p);
      assert.ok(served.ok && status.ok);
      return podInterfaces(served.value, status.value);
    };
    const fromFull = buildDesiredState({ interfaces: ifaces(pod), services, slices });
    const fromSlim = buildDesiredState({ interfaces: ifaces(slimPod(pod)), services: services.map(slimService), slices: slices.map(slimEndpointSlice) });
    assert.deepEqual(fromSlim, fromFull);
    // The fixtures exercise what they should: targets of both families, affinity, and a problem.
    assert.ok(fromFull.state.targets.some((t) => t.family === 6));
    assert.ok(fromFull.state.targets.some((t) => t.affinityTimeoutSeconds === 600));
    assert.ok(fromFull.state.targets.some((t) => t.endpoints.some((e) => e.terminating)));
    assert.equal(fromFull.problems.length, 1);
    assert.deepEqual(ifaces(slimPod(pod)), ifaces(pod));
    assert.equal(ifaces(pod).length, 1);
  });

  void test('drops managedFields, status, unread annotations and endpoint details; keeps identity, labels, read annotations', () => {
    const [svc] = services;
    const [slice] = slices;
    assert.ok(svc !== undefined && slice !== undefined);
    const s = slimService(svc);
    assert.deepEqual(JSON.parse(JSON.stringify(s)), {
      metadata: { name: 'web', namespace: 'ns1', uid: 'uid-web', resourceVersion: '10', labels: svc.metadata?.labels, annotations: { [SERVICE_NETWORK_ANNOTATION]: NET } },
      spec: {
        clusterIP: '10.96.0.10',
        clusterIPs: ['10.96.0.10', 'fd00:96::10'],
        sessionAffinity: 'ClientIP',
        sessionAffinityConfig: { clientIP: { timeoutSeconds: 600 } },
        internalTrafficPolicy: 'Cluster',
        ports: [
          { name: 'http', protocol: 'TCP', port: 80 },
          { name: 'dns', protocol: 'UDP', port: 53 },
        ],
      },
    });
    const e = slimEndpointSlice(slice);
    assert.equal(e.metadata?.annotations?.[LAST_CHANGE_TRIGGER_TIME_ANNOTATION], '2026-01-01T00:00:01Z');
    assert.equal(e.metadata?.annotations?.['kubectl.kubernetes.io/last-applied-configuration'], undefined);
    assert.equal(e.metadata?.managedFields, undefined);
    assert.deepEqual(JSON.parse(JSON.stringify(e.endpoints)), [
      // nodeName (and zone and hints when set) stay: internalTrafficPolicy Local and topology read them; targetRef goes.
      { addresses: ['10.1.0.2'], conditions: {}, nodeName: 'node-1' },
      { addresses: ['10.1.0.3'], conditions: { ready: false, serving: true, terminating: true }, nodeName: 'node-1' },
      { addresses: ['10.1.0.4'], conditions: { ready: true, serving: true, terminating: false }, nodeName: 'node-1' },
    ]);
    const p = slimPod(pod);
    assert.deepEqual(Object.keys(p.metadata?.annotations ?? {}).sort(), [NETWORK_STATUS_ANNOTATION, SERVICE_NETWORK_ANNOTATION].sort());
    assert.equal(p.spec, undefined);
    // The point of it all: the slimmed objects are a fraction of the served ones.
    const size = (o: unknown): number => JSON.stringify(o).length;
    assert.ok(size(s) * 2 < size(svc), `slim Service ${size(s)} B vs ${size(svc)} B`);
    assert.ok(size(e) * 2 < size(slice), `slim slice ${size(e)} B vs ${size(slice)} B`);
  });

  void test('equal endpoint conditions share one frozen object; objects without annotations get none', () => {
    const [a, , b] = slimEndpointSlice(slices[0] as V1EndpointSlice).endpoints;
    const [c] = slimEndpointSlice(slices[2] as V1EndpointSlice).endpoints;
    assert.ok(b?.conditions !== undefined && c?.conditions !== undefined && a?.conditions !== undefined);
    assert.equal(b.conditions, c.conditions);
    assert.notEqual(a.conditions, b.conditions);
    assert.ok(Object.isFrozen(b.conditions));
    const bare = slimService({ metadata: { name: 'x', namespace: 'y' } });
    assert.equal(bare.metadata?.annotations, undefined);
    assert.equal(bare.spec, undefined);
    assert.deepEqual(slimEndpointSlice({ metadata: { name: 's' }, addressType: 'IPv4', endpoints: null as unknown as [] }).endpoints, []);
  });

  void test('labels: only the ones read are kept, whatever a tenant adds; deletionTimestamp is kept', () => {
    const svc = services[0] as V1Service;
    const noisy = {
      ...svc,
      metadata: {
        ...svc.metadata,
        deletionTimestamp: new Date('2026-01-02T00:00:00Z'),
        labels: { ...svc.metadata?.labels, ...Object.fromEntries(Array.from({ length: 500 }, (_, i) => [`x${i}`, 'y'.repeat(60)])) },
      },
    };
    const s = slimService(noisy);
    assert.deepEqual(s.metadata?.labels, svc.metadata?.labels);
    assert.deepEqual(s.metadata?.deletionTimestamp, new Date('2026-01-02T00:00:00Z'));
    assert.equal(refusalOf(s), undefined);
  });

  void test('over budget: a stub that names the Service and serves nothing, with the reason; at the budget: served', () => {
    const base = serviceObject('t', 'big', { networks: 't/net-a', clusterIPs: ['10.96.0.50'], ports: [] });
    const withPorts = (n: number): V1Service => ({ ...base, spec: { ...base.spec, ports: Array.from({ length: n }, (_, i) => ({ name: `p${i}`, port: 1000 + i, protocol: 'TCP' })) } });
    assert.equal(refusalOf(slimService(withPorts(SIDECAR_SERVICE_BUDGET.maxPorts))), undefined);
    const stub = slimService(withPorts(20_000));
    assert.equal(refusalOf(stub)?.key, 'ports');
    assert.match(refusalOf(stub)?.message ?? '', /^Service t\/big has 20000 ports \(spec\.ports\); the sidecar serves at most 256 per Service, so it serves none of this Service: split it/);
    assert.equal(stub.spec, undefined);
    assert.equal(stub.metadata?.annotations, undefined);
    assert.ok(JSON.stringify(stub).length < 300, JSON.stringify(stub));
    const lb = (n: number): V1Service => ({
      ...base,
      spec: { ...base.spec, type: 'LoadBalancer', ports: [{ port: 80 }], loadBalancerSourceRanges: Array.from({ length: n }, (_, i) => `10.${i >> 8}.${i & 255}.0/24`) },
    });
    assert.equal(refusalOf(slimService(lb(90_000)))?.key, 'source-ranges');
    assert.equal(refusalOf(slimService(lb(SIDECAR_SERVICE_BUDGET.maxSourceRanges))), undefined);
    const nets = { ...base, metadata: { ...base.metadata, annotations: { [SERVICE_NETWORK_ANNOTATION]: Array.from({ length: 33 }, (_, i) => `n${i}`).join(',') } } };
    assert.equal(refusalOf(slimService(nets))?.key, 'networks');
    // Long port names within the count: the byte budget.
    const long: V1Service = { ...base, spec: { ...base.spec, ports: Array.from({ length: 100 }, (_, i) => ({ name: `${'p'.repeat(700)}${i}`, port: 1000 + i })) } };
    assert.equal(refusalOf(slimService(long))?.key, 'bytes');
  });

  void test('property: whatever the input, the cached form is within the byte budget, and a refused one is a stub', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 3000 }), fc.integer({ min: 1, max: 800 }), (ports, ranges, nameLen) => {
        const svc: V1Service = {
          metadata: { name: 'x', namespace: 'y', labels: { 'service.kubernetes.io/service-proxy-name': 'multus-proxy' }, annotations: { [SERVICE_NETWORK_ANNOTATION]: 'y/a' } },
          spec: {
            type: 'LoadBalancer',
            clusterIPs: ['10.96.0.1'],
            ports: Array.from({ length: ports }, (_, i) => ({ name: `${'n'.repeat(nameLen)}${i}`, port: i + 1 })),
            loadBalancerSourceRanges: Array.from({ length: ranges }, () => '10.0.0.0/8'),
          },
        };
        const s = slimService(svc);
        assert.ok(JSON.stringify(s).length <= SIDECAR_SERVICE_BUDGET.maxBytes);
        if (refusalOf(s) !== undefined) assert.equal(s.spec, undefined);
      }),
      { numRuns: 60 },
    );
  });
});
