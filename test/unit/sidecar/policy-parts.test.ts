/**
 * The sidecar's MultiNetworkPolicy parts alone: the pod's networks from network-status, which
 * selecting policies still wait for their address groups, the compiled policy kept as one object
 * while nothing it depends on changed, the caches' budgets, the drop counters read back, and the
 * options.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { PolicyInput, podNetworks, unwrittenGroups } from '../../../cmd/sidecar/policy-input.js';
import { MAX_GROUP_SLICE_ENDPOINTS, MAX_POLICY_BYTES, policyRefusalOf, slimAddressGroupSlice, slimPolicy, type CachedPolicy } from '../../../cmd/sidecar/policy-slim.js';
import { counterPackets } from '../../../cmd/sidecar/policy-drops.js';
import { parseOptions } from '../../../cmd/sidecar/options.js';
import { policyDropCounters, readNetworkStatus } from '../../../src/dataplane/index.js';
import { NETWORK_STATUS_ANNOTATION, POLICY_FOR_ANNOTATION } from '../../../src/keys.js';
import type { V1EndpointSlice } from '../../../src/kube/types.js';
import { ADDRESS_GROUP_LABEL, addressGroupKey, addressGroupView, canonicalQuery, PEER_QUERY_ANNOTATION, policyPeerQueries, POLICY_GENERATION_ANNOTATION } from '../../../src/policy/address-group.js';
import type { MultiNetworkPolicy, MultiNetworkPolicySpec } from '../../../src/policy/api.js';
import { checkPolicy } from '../../../src/policy/validate.js';
import { DEFAULT_POLICY_HOLD_MS } from '../../../src/sidecar-contract.js';

const STATUS = readNetworkStatus({
  metadata: {
    annotations: {
      [NETWORK_STATUS_ANNOTATION]: JSON.stringify([
        { name: 'kindnet', interface: 'eth0', ips: ['10.244.0.5'], default: true },
        { name: 'x/net1', interface: 'net1', ips: ['192.168.1.5', 'fd00::5'] },
        { name: 'x/net2', ips: ['192.168.2.5'] },
      ]),
    },
  },
});

function policy(name: string, spec: unknown, generation = 2, networks = 'net1'): CachedPolicy {
  return {
    apiVersion: 'k8s.cni.cncf.io/v1beta1',
    kind: 'MultiNetworkPolicy',
    metadata: { name, namespace: 'x', generation, annotations: { [POLICY_FOR_ANNOTATION]: networks } },
    spec: spec as MultiNetworkPolicySpec,
  };
}

/** The slices the controller writes for every query of `p`, with `addresses`, for `generation`. */
function groups(p: MultiNetworkPolicy, addresses: string[], generation = p.metadata?.generation ?? 0): V1EndpointSlice[] {
  const checked = checkPolicy(p, 'x');
  assert.ok(checked.ok);
  return policyPeerQueries(checked.value).map((q) => ({
    metadata: {
      namespace: 'x',
      name: addressGroupKey(q),
      labels: { [ADDRESS_GROUP_LABEL]: addressGroupKey(q) },
      annotations: { [PEER_QUERY_ANNOTATION]: canonicalQuery(q), [POLICY_GENERATION_ANNOTATION]: String(generation) },
    },
    addressType: 'IPv4',
    endpoints: addresses.map((a) => ({ addresses: [a] })),
  }));
}

const FROM_WEB = { podSelector: { matchLabels: { app: 'db' } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }] }] };

void describe('sidecar policy parts', () => {
  void test('podNetworks: the secondary networks with an interface, their addresses; not the default network', () => {
    assert.deepEqual(podNetworks(STATUS.ok ? STATUS.value : []), [{ network: 'x/net1', interface: 'net1', addresses: ['192.168.1.5', 'fd00::5'] }]);
  });

  void test('unwrittenGroups: a selecting policy waits until every group is written for its generation; others never wait', () => {
    const pod = { namespace: 'x', labels: { app: 'db' }, networks: podNetworks(STATUS.ok ? STATUS.value : []), containerPorts: [] };
    const p = policy('from-web', FROM_WEB, 3);
    const other = policy('not-me', { ...FROM_WEB, podSelector: { matchLabels: { app: 'web' } } });
    const elsewhere = policy('other-net', FROM_WEB, 1, 'net9');
    const broken = policy('broken', { podSelector: 'nope' });
    const all = [p, other, elsewhere, broken];
    assert.deepEqual(unwrittenGroups(pod, all, addressGroupView([])), [{ policy: 'x/from-web', generation: 3, missing: 1, queries: 1 }]);
    assert.deepEqual(
      unwrittenGroups(pod, all, addressGroupView(groups(p, [], 2))).map((w) => w.policy),
      ['x/from-web'],
      'an older generation is not enough',
    );
    assert.deepEqual(unwrittenGroups(pod, all, addressGroupView(groups(p, [], 3))), [], 'written (empty) for the generation');
  });

  void test('PolicyInput: the same object while nothing changed, a new one on a change, undefined when nothing selects', () => {
    const input = new PolicyInput('x', [{ name: 'sql', containerPort: 5432 }]);
    const status = STATUS.ok ? STATUS.value : [];
    const p = policy('from-web', FROM_WEB);
    let gs = groups(p, ['192.168.1.9']);
    const src = { status, policies: () => [p], groups: () => gs };
    assert.equal(input.compute(src), undefined, 'no labels yet: not selected');
    assert.equal(input.setLabels({ app: 'db' }), true);
    assert.equal(input.setLabels({ app: 'db' }), false, 'the same labels are no change');
    const first = input.compute(src);
    assert.deepEqual(first?.networks[0]?.ingress.rules[0]?.peers?.addresses, ['192.168.1.9']);
    assert.equal(input.compute(src), first, 'nothing changed: the same object, no resolve');
    input.changed();
    assert.equal(input.compute(src), first, 'a change that resolves the same: the same object');
    gs = groups(p, ['192.168.1.10']);
    input.changed();
    const second = input.compute(src);
    assert.notEqual(second, first);
    assert.deepEqual(second?.networks[0]?.ingress.rules[0]?.peers?.addresses, ['192.168.1.10']);
  });

  void test('policyDropCounters: one counter per (policy, direction) that isolates, failed policies included', () => {
    const input = new PolicyInput('x', []);
    input.setLabels({ app: 'db' });
    const compiled = input.compute({
      status: STATUS.ok ? STATUS.value : [],
      policies: () => [policy('from-web', FROM_WEB), policy('bad', { podSelector: {}, ingress: 'x' })],
      groups: () => [],
    });
    const rows = policyDropCounters(compiled).map((c) => `${c.policy} ${c.direction}`);
    assert.deepEqual(rows.sort(), ['x/bad egress', 'x/bad ingress', 'x/from-web ingress']);
    assert.equal(new Set(policyDropCounters(compiled).map((c) => c.name)).size, 3);
  });

  void test('budgets: a policy over its bytes is a stub that fails closed and says why; an oversized group slice reads as not written', () => {
    const big = policy('big', { podSelector: {}, ingress: [{ from: [{ podSelector: { matchLabels: { k: 'v'.repeat(MAX_POLICY_BYTES) } } }] }] });
    const stub = slimPolicy(big);
    assert.match(policyRefusalOf(stub)?.message ?? '', /^MultiNetworkPolicy x\/big is \d+ bytes .* isolates the pods it may select/);
    const compiled = new PolicyInput('x', []).compute({ status: STATUS.ok ? STATUS.value : [], policies: () => [stub], groups: () => [] });
    assert.equal(compiled?.networks[0]?.failures[0]?.policy, 'x/big');
    assert.ok(compiled?.networks[0]?.ingress.isolated && compiled.networks[0].egress.isolated, 'both directions isolated');
    const small = policy('small', FROM_WEB);
    assert.equal(policyRefusalOf(slimPolicy(small)), undefined);
    assert.deepEqual(slimPolicy(small).spec, small.spec);
    const [g] = groups(
      small,
      Array.from({ length: MAX_GROUP_SLICE_ENDPOINTS + 1 }, (_, i) => `10.0.${i >> 8}.${i & 255}`),
    );
    assert.ok(g !== undefined);
    const q = checkPolicy(small, 'x');
    assert.ok(q.ok);
    const [query] = policyPeerQueries(q.value);
    assert.ok(query !== undefined);
    assert.equal(addressGroupView([slimAddressGroupSlice(g)]).written(query), false);
    assert.equal(addressGroupView([slimAddressGroupSlice({ ...g, endpoints: g.endpoints?.slice(0, 3) })]).written(query), true);
  });

  void test('counterPackets reads nft -j output and never throws on anything else', () => {
    const json = JSON.stringify({
      nftables: [
        { metainfo: { version: '1.0.6' } },
        { counter: { family: 'inet', name: 'MPX-PC-1', table: 'multus_proxy', handle: 3, packets: 7, bytes: 420 } },
        { counter: { name: 'MPX-PC-2', packets: -1 } },
      ],
    });
    assert.deepEqual([...counterPackets(json)], [['MPX-PC-1', 7]]);
    fc.assert(
      fc.property(fc.string(), (s) => counterPackets(s) instanceof Map),
      { numRuns: 200 },
    );
  });

  void test('options: POLICY_HOLD_MS and POLICY_API_RETRY_MS, defaults and bounds', () => {
    const base = { POD_NAME: 'p', POD_NAMESPACE: 'x' };
    const d = parseOptions(base, []);
    assert.ok(d.ok);
    assert.equal(d.value.policyHoldMs, DEFAULT_POLICY_HOLD_MS);
    const set = parseOptions({ ...base, POLICY_HOLD_MS: '2500', POLICY_API_RETRY_MS: '1000' }, []);
    assert.ok(set.ok);
    assert.deepEqual([set.value.policyHoldMs, set.value.policyApiRetryMs], [2500, 1000]);
    const bad = parseOptions({ ...base, POLICY_API_RETRY_MS: '10' }, []);
    assert.ok(!bad.ok && bad.error.includes('POLICY_API_RETRY_MS (--policy-api-retry-ms)'), bad.ok ? '' : bad.error);
  });
});
