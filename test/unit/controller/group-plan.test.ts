/**
 * The address-group planner: slices from a policy's queries and the pods they select, read back
 * through the sidecar's own view (src/policy/address-group.ts), so planner and contract are
 * checked together; stable updates; budgets; the empty-group marker.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { V1EndpointSlice, V1Pod } from '../../../src/kube/types.js';
import { ADDRESS_GROUP_LABEL, ADDRESS_GROUP_MANAGED_BY, ADDRESS_GROUP_POLICY_LABEL, addressGroupView, PEER_QUERY_ANNOTATION, POLICY_GENERATION_ANNOTATION } from '../../../src/policy/address-group.js';
import type { PeerQuery } from '../../../src/policy/resolve.js';
import { MANAGED_BY_LABEL, PROXY_NAME_LABEL } from '../../../src/keys.js';
import { planAddressGroups, type GroupPlanInput, type GroupPolicy, type GroupQuery } from '../../../cmd/controller/group-plan.js';
import { networkStatus, pod } from './fixtures.js';

const POLICY: GroupPolicy = { name: 'allow-db', namespace: 'x', uid: 'uid-p', generation: 4, apiVersion: 'k8s.cni.cncf.io/v1beta1' };
const Q: PeerQuery = { policy: 'x/allow-db', network: 'x/net1', namespaces: { kind: 'namespace', name: 'x' }, pods: { requirements: [{ key: 'app', operator: 'In', values: ['web'] }] } };

function peer(name: string, ips: string[], o: Parameters<typeof pod>[1] = {}): V1Pod {
  return pod(name, { namespace: 'x', status: networkStatus([{ name: 'x/net1', ips }]), nodeName: 'n1', ...o });
}

/** Applies a plan's diff to a set of slices the way the apiserver would (names for creates). */
function apply(existing: readonly V1EndpointSlice[], input: Omit<GroupPlanInput, 'existing'>, seq = { n: 0 }): { slices: V1EndpointSlice[]; plan: ReturnType<typeof planAddressGroups> } {
  const plan = planAddressGroups({ ...input, existing });
  const byName = new Map(existing.map((s) => [s.metadata?.name ?? '', s]));
  for (const s of plan.diff.delete) byName.delete(s.metadata?.name ?? '');
  for (const s of plan.diff.update) byName.set(s.metadata?.name ?? '', s);
  for (const s of plan.diff.create) {
    const name = `${s.metadata?.generateName ?? ''}${(seq.n += 1)}`;
    byName.set(name, { ...s, metadata: { ...s.metadata, name } });
  }
  return { slices: [...byName.values()], plan };
}

const addressesOf = (slices: readonly V1EndpointSlice[], q: PeerQuery): string[] =>
  addressGroupView(slices)
    .lookup(q)
    .flatMap((p) => p.addresses)
    .sort();

void describe('address-group planner', () => {
  void test('pods with addresses on the network become the group, per the contract, and the sidecar view reads them back', () => {
    const pods = [
      peer('a', ['10.0.0.1', 'fd00::1'], { containerPorts: [{ name: 'http', containerPort: 8080 }] }),
      peer('b', ['10.0.0.2'], { ready: false, phase: 'Pending' }),
      peer('c', ['10.0.0.3'], { phase: 'Succeeded' }),
      peer('d', ['127.0.0.1']), // refused address: left out
      pod('e', { namespace: 'x', status: networkStatus([{ name: 'x/other', ips: ['10.9.0.1'] }]) }),
      pod('f', { namespace: 'x' }), // no network-status yet
    ];
    const { slices, plan } = apply([], { policy: POLICY, queries: [{ query: Q, pods }] });
    assert.equal(plan.diff.update.length + plan.diff.delete.length, 0);
    assert.deepEqual(addressesOf(slices, Q), ['10.0.0.1', '10.0.0.2', 'fd00::1']);
    // Dual stack: one address type per slice; ports grouped (a has http, b none).
    assert.deepEqual(slices.map((s) => `${s.addressType}:${(s.ports ?? []).map((p) => `${p.name}=${p.port}`).join(',')}:${(s.endpoints ?? []).length}`).sort(), [
      'IPv4::1',
      'IPv4:http=8080:1',
      'IPv6:http=8080:1',
    ]);
    for (const s of slices) {
      const m = s.metadata ?? {};
      assert.equal(m.namespace, 'x');
      assert.equal(m.labels?.[MANAGED_BY_LABEL], ADDRESS_GROUP_MANAGED_BY);
      assert.equal(m.labels?.[ADDRESS_GROUP_POLICY_LABEL], 'allow-db');
      assert.equal(m.labels?.[PROXY_NAME_LABEL], 'multus-proxy');
      assert.equal(m.annotations?.[POLICY_GENERATION_ANNOTATION], '4');
      assert.deepEqual(m.ownerReferences, [{ apiVersion: 'k8s.cni.cncf.io/v1beta1', kind: 'MultiNetworkPolicy', name: 'allow-db', uid: 'uid-p', controller: true }]);
      for (const e of s.endpoints ?? []) {
        assert.equal(e.targetRef?.kind, 'Pod');
        assert.equal(e.nodeName, 'n1');
      }
    }
    const view = addressGroupView(slices);
    assert.equal(view.written(Q, 4), true);
    assert.equal(view.written(Q, 5), false);
    const a = view.lookup(Q).find((p) => p.addresses.includes('10.0.0.1'));
    assert.deepEqual(a?.containerPorts, [{ name: 'http', containerPort: 8080, protocol: 'TCP' }]);
  });

  void test('a converged group plans no write; a pod leaving touches one slice; a new generation rewrites every slice', () => {
    const input = { policy: POLICY, queries: [{ query: Q, pods: [peer('a', ['10.0.0.1']), peer('b', ['10.0.0.2'])] }] };
    const first = apply([], input);
    assert.equal(planAddressGroups({ ...input, existing: first.slices }).diff.create.length, 0);
    const again = planAddressGroups({ ...input, existing: first.slices }).diff;
    assert.equal(again.update.length + again.delete.length, 0);
    const left = apply(first.slices, { ...input, queries: [{ query: Q, pods: [peer('a', ['10.0.0.1'])] }] });
    assert.equal(left.plan.diff.update.length, 1);
    assert.equal(left.plan.diff.create.length + left.plan.diff.delete.length, 0);
    assert.deepEqual(addressesOf(left.slices, Q), ['10.0.0.1']);
    const next = apply(left.slices, { ...input, policy: { ...POLICY, generation: 5 }, queries: [{ query: Q, pods: [peer('a', ['10.0.0.1'])] }] });
    assert.equal(next.plan.diff.update.length, left.slices.length);
    assert.ok(next.slices.every((s) => s.metadata?.annotations?.[POLICY_GENERATION_ANNOTATION] === '5'));
  });

  void test('at most maxPerSlice endpoints per slice', () => {
    const pods = Array.from({ length: 7 }, (_, i) => peer(`p${i}`, [`10.0.1.${i + 1}`]));
    const { slices } = apply([], { policy: POLICY, queries: [{ query: Q, pods }], maxPerSlice: 3 });
    assert.deepEqual(slices.map((s) => (s.endpoints ?? []).length).sort(), [1, 3, 3]);
    assert.equal(addressesOf(slices, Q).length, 7);
  });

  void test('an empty group is one slice without endpoints; a group no longer needed is reused or deleted', () => {
    const other: PeerQuery = { ...Q, pods: { requirements: [{ key: 'app', operator: 'In', values: ['db'] }] } };
    const first = apply([], { policy: POLICY, queries: [{ query: Q, pods: [] }] });
    assert.equal(first.slices.length, 1);
    assert.deepEqual(first.slices[0]?.endpoints, []);
    assert.equal(addressGroupView(first.slices).written(Q, 4), true);
    // The query changes: the old group's slice is rewritten for the new one (an update, no create).
    const moved = apply(first.slices, { policy: POLICY, queries: [{ query: other, pods: [peer('a', ['10.0.0.1'])] }] });
    assert.equal(moved.plan.diff.create.length, 0);
    assert.equal(moved.plan.diff.update.length, 1);
    assert.equal(addressGroupView(moved.slices).written(Q), false);
    assert.deepEqual(addressesOf(moved.slices, other), ['10.0.0.1']);
    const gone = apply(moved.slices, { policy: POLICY, queries: [] });
    assert.equal(gone.slices.length, 0);
  });

  void test('a group over its budget is not written (its slices go) and is reported; the others are', () => {
    const small: PeerQuery = { ...Q, pods: { requirements: [] } };
    const pods = [peer('a', ['10.0.0.1']), peer('b', ['10.0.0.2']), peer('c', ['10.0.0.3'])];
    const queries: GroupQuery[] = [
      { query: Q, pods },
      { query: small, pods: pods.slice(0, 1) },
    ];
    const first = apply([], { policy: POLICY, queries: [{ query: Q, pods: pods.slice(0, 2) }] });
    const { slices, plan } = apply(first.slices, { policy: POLICY, queries, budget: { addresses: 2, policyAddresses: 100 } });
    assert.deepEqual(
      plan.over.map((o) => [o.budget, o.addresses]),
      [['addresses', 3]],
    );
    assert.match(plan.over[0]?.message ?? '', /MultiNetworkPolicy x\/allow-db: .* selects 3 addresses, more than the 2/);
    assert.equal(addressGroupView(slices).written(Q), false);
    assert.deepEqual(addressesOf(slices, small), ['10.0.0.1']);
    const policyWide = planAddressGroups({ policy: POLICY, queries, existing: [], budget: { addresses: 10, policyAddresses: 3 } });
    assert.equal(policyWide.over.length, 1);
    assert.equal(policyWide.over[0]?.budget, 'policyAddresses');
  });

  void test('a policy being deleted keeps no group; slices carry their group key and query', () => {
    const { slices } = apply([], { policy: POLICY, queries: [{ query: Q, pods: [peer('a', ['10.0.0.1'])] }] });
    const s = slices[0];
    assert.ok(s?.metadata?.labels?.[ADDRESS_GROUP_LABEL]?.match(/^[0-9a-f]{40}$/));
    assert.ok(s?.metadata?.annotations?.[PEER_QUERY_ANNOTATION]?.includes('"network":"x/net1"'));
    const plan = planAddressGroups({ policy: { ...POLICY, deleting: true }, queries: [{ query: Q, pods: [] }], existing: slices });
    assert.equal(plan.diff.delete.length, slices.length);
  });
});
