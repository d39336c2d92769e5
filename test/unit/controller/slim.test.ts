import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { podEndpoints } from '../../../cmd/controller/pod-endpoints.js';
import { podChangeMatters } from '../../../cmd/controller/reconcile.js';
import { MAX_POLICY_KEPT_BYTES, nadChanged, slimNad, slimNamespace, slimNode, slimPod, slimPolicy } from '../../../cmd/controller/slim.js';
import type { MultiNetworkPolicy, MultiNetworkPolicySpec } from '../../../src/policy/api.js';
import { checkPolicy } from '../../../src/policy/validate.js';
import { isInjectionEnabled } from '../../../cmd/controller/sidecar-rbac.js';
import { INJECTION_ENABLED, INJECTION_LABEL, NETWORK_STATUS_ANNOTATION, POLICY_FOR_ANNOTATION, SERVICE_NAMESPACES_ANNOTATION } from '../../../src/keys.js';
import type { V1Namespace, V1Pod } from '../../../src/kube/types.js';
import { networkStatus, pod, service } from './fixtures.js';

/** A pod as the apiserver sends it: the fixture plus the bulk the controller never reads. */
function fullPod(p: V1Pod): V1Pod {
  return {
    ...p,
    metadata: {
      ...p.metadata,
      resourceVersion: '7',
      annotations: { ...p.metadata?.annotations, 'kubectl.kubernetes.io/last-applied-configuration': 'x'.repeat(2000) },
      managedFields: [{ manager: 'kubelet', operation: 'Update' }],
    },
    spec: { ...p.spec, containers: (p.spec?.containers ?? []).map((c) => ({ ...c, env: [{ name: 'A', value: 'b' }], image: 'nginx:1' })), volumes: [{ name: 'v' }] },
    status: { ...p.status, podIP: '10.0.0.1', containerStatuses: [], conditions: [...(p.status?.conditions ?? []).map((c) => ({ ...c, lastTransitionTime: new Date() }))] },
  };
}

void describe('controller informer transforms', () => {
  void test('an over-budget network-status is cached as its length only, and refused as the whole text is', () => {
    const svc = service('web', { network: 'macvlan1' });
    const big = pod('big', { status: `[${' '.repeat(256 * 1024)}]` });
    const slim = slimPod(big);
    const kept = slim.metadata?.annotations?.[NETWORK_STATUS_ANNOTATION] ?? '';
    assert.ok(kept.length < 64, `kept ${kept.length} characters`);
    const full = podEndpoints(svc, [{ namespace: 'default', name: 'macvlan1' }], big);
    const cached = podEndpoints(svc, [{ namespace: 'default', name: 'macvlan1' }], slim);
    assert.deepEqual(cached.endpoints, []);
    assert.deepEqual(
      cached.skips.map((s) => s.reason),
      full.skips.map((s) => s.reason),
    );
    assert.match(cached.skips[0]?.message ?? '', /is 262146 characters long, more than the 65536/);
    assert.match(full.skips[0]?.message ?? '', /is 262146 characters long, more than the 65536/);
  });

  void test('a slim pod is the same to the planner as the full one (property over fixture options)', () => {
    const svc = service('web', { network: 'macvlan1' });
    fc.assert(
      fc.property(
        fc.record({
          ready: fc.boolean(),
          terminating: fc.boolean(),
          phase: fc.constantFrom('Pending', 'Running', 'Succeeded'),
          nodeName: fc.constantFrom('n1', 'n2'),
          ip: fc.constantFrom('10.1.0.1', 'fd00::1'),
          withStatus: fc.boolean(),
          ports: fc.array(fc.record({ name: fc.constantFrom('http', 'dns'), containerPort: fc.integer({ min: 1, max: 65535 }), protocol: fc.constantFrom('TCP', 'UDP') }), { maxLength: 3 }),
        }),
        (o) => {
          const full = fullPod(
            pod('p', {
              ready: o.ready,
              terminating: o.terminating,
              phase: o.phase,
              nodeName: o.nodeName,
              containerPorts: o.ports,
              ...(o.withStatus ? { status: networkStatus([{ name: 'default/macvlan1', ips: [o.ip] }]) } : {}),
            }),
          );
          const slim = slimPod(full);
          assert.equal(podChangeMatters(full, slim), false, 'everything the planner reads is kept');
          const nets = [{ namespace: 'default', name: 'macvlan1' }];
          assert.deepEqual(
            podEndpoints(svc, nets, slim, () => 'z'),
            podEndpoints(svc, nets, full, () => 'z'),
          );
          assert.equal(slim.metadata?.managedFields, undefined);
          assert.equal(slim.metadata?.annotations?.['kubectl.kubernetes.io/last-applied-configuration'], undefined);
          assert.ok(JSON.stringify(slim).length < JSON.stringify(full).length / 2);
        },
      ),
    );
  });

  void test('nodes keep name and labels; namespaces keep what sidecar RBAC decides on', () => {
    const node = { metadata: { name: 'n1', labels: { 'topology.kubernetes.io/zone': 'a' }, managedFields: [{}] }, status: { images: [] } };
    assert.deepEqual(JSON.parse(JSON.stringify(slimNode(node))), { metadata: { name: 'n1', labels: { 'topology.kubernetes.io/zone': 'a' } } });
    const nss: V1Namespace[] = [
      { metadata: { name: 'on', labels: { [INJECTION_LABEL]: INJECTION_ENABLED }, managedFields: [{}] }, spec: { finalizers: ['kubernetes'] }, status: { phase: 'Active' } },
      { metadata: { name: 'gone', labels: { [INJECTION_LABEL]: INJECTION_ENABLED } }, status: { phase: 'Terminating' } },
      { metadata: { name: 'off' }, status: { phase: 'Active' } },
    ] as V1Namespace[];
    assert.deepEqual(nss.map(slimNamespace).map(isInjectionEnabled), nss.map(isInjectionEnabled));
    assert.deepEqual(nss.map(isInjectionEnabled), [true, false, false]);
  });

  void test('NADs keep the sharing annotation and the parsed IPAM range, not the config; a change of either is a change', () => {
    const nad = (ipam: unknown, shared?: string, mtu = 1500): { metadata: object; spec: { config: string } } => ({
      metadata: { name: 'wb', namespace: 'ns', annotations: { ...(shared === undefined ? {} : { [SERVICE_NAMESPACES_ANNOTATION]: shared }), other: 'x' }, managedFields: [{}] },
      spec: { config: JSON.stringify({ type: 'macvlan', master: 'eth1', mtu, ipam }) },
    });
    const a = slimNad(nad({ type: 'whereabouts', range: '10.1.1.0/24' }, 'b'));
    assert.deepEqual(a.metadata?.annotations, { [SERVICE_NAMESPACES_ANNOTATION]: 'b' });
    assert.equal((a as { spec?: unknown }).spec, undefined);
    assert.ok(a.ipam.ok && a.ipam.value.readable && a.ipam.value.ranges.length === 1);
    assert.equal(nadChanged(slimNad(nad({ type: 'whereabouts', range: '10.1.1.0/24' }, 'b', 9000)), a), false);
    assert.equal(nadChanged(slimNad(nad({ type: 'whereabouts', range: '10.1.2.0/24' }, 'b')), a), true);
    assert.equal(nadChanged(slimNad(nad({ type: 'whereabouts', range: '10.1.1.0/24' }, 'c')), a), true);
    assert.equal(nadChanged(slimNad(nad({ type: 'whereabouts', range: '10.1.1.0' }, 'b')), a), true);
  });
});

void describe('slimPolicy', () => {
  const policy = (spec: unknown): MultiNetworkPolicy => ({
    apiVersion: 'k8s.cni.cncf.io/v1beta1',
    kind: 'MultiNetworkPolicy',
    metadata: { name: 'p', namespace: 'x', uid: 'u', generation: 3, annotations: { [POLICY_FOR_ANNOTATION]: 'net1', 'kubectl.kubernetes.io/last-applied-configuration': 'x'.repeat(500) } },
    spec: spec as MultiNetworkPolicySpec,
  });

  void test('keeps what checkPolicy and the groups read: identity, generation, policy-for and the spec; checks the same', () => {
    const full = policy({ podSelector: { matchLabels: { app: 'db' } }, ingress: [{ from: [{ podSelector: {} }], ports: [{ port: 'http' }] }] });
    const slim = slimPolicy(full);
    assert.deepEqual(slim.metadata?.annotations, { [POLICY_FOR_ANNOTATION]: 'net1' });
    assert.equal(slim.metadata?.generation, 3);
    assert.equal(slim.overBudget, undefined);
    assert.deepEqual(checkPolicy(slim), checkPolicy(full));
  });

  void test('a policy over the byte budget keeps no spec and is marked', () => {
    const values = Array.from({ length: 40_000 }, (_, i) => `v${i}`);
    const slim = slimPolicy(policy({ podSelector: { matchExpressions: [{ key: 'k', operator: 'In', values }] } }));
    assert.equal(slim.spec, undefined);
    assert.equal(slim.overBudget?.budget, 'bytes');
    assert.ok(JSON.stringify(slim).length < MAX_POLICY_KEPT_BYTES / 100);
  });
});
