/**
 * The address-group contract between the controller and the sidecars: the queries a policy needs
 * are every query the resolver asks, and a sidecar's view answers a query from the slices written
 * for it, and from nothing else.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { POLICY_FOR_ANNOTATION } from '../../../src/keys.js';
import type { MultiNetworkPolicy, MultiNetworkPolicySpec } from '../../../src/policy/api.js';
import { resolvePodPolicy, type PeerQuery } from '../../../src/policy/resolve.js';
import { checkPolicy } from '../../../src/policy/validate.js';
import { ADDRESS_GROUP_LABEL, addressGroupKey, addressGroupView, canonicalQuery, PEER_QUERY_ANNOTATION, policyPeerQueries, POLICY_GENERATION_ANNOTATION } from '../../../src/policy/address-group.js';
import type { V1EndpointSlice } from '../../../src/kube/types.js';

const POD = {
  namespace: 'x',
  labels: { app: 'db', tier: 'back' },
  networks: [
    { network: 'x/net1', interface: 'net1', addresses: ['10.0.0.1'] },
    { network: 'x/net2', interface: 'net2', addresses: ['10.1.0.1'] },
  ],
  containerPorts: [{ name: 'sql', containerPort: 5432 }],
};

function policy(name: string, spec: unknown, networks = 'x/net1,x/net2'): MultiNetworkPolicy {
  return {
    apiVersion: 'k8s.cni.cncf.io/v1beta1',
    kind: 'MultiNetworkPolicy',
    metadata: { name, namespace: 'x', generation: 3, annotations: { [POLICY_FOR_ANNOTATION]: networks } },
    spec: spec as MultiNetworkPolicySpec,
  };
}

const POLICIES: MultiNetworkPolicy[] = [
  policy('peers', { podSelector: {}, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }, { namespaceSelector: { matchLabels: { team: 'a' } }, podSelector: {} }] }] }),
  policy('named-egress-block', { podSelector: { matchLabels: { app: 'db' } }, egress: [{ to: [{ ipBlock: { cidr: '10.0.0.0/8' } }], ports: [{ port: 'http' }] }] }),
  policy('named-egress-all', { podSelector: {}, egress: [{ ports: [{ port: 'dns', protocol: 'UDP' }] }] }),
  policy('expressions', { podSelector: {}, ingress: [{ from: [{ podSelector: { matchExpressions: [{ key: 'tier', operator: 'In', values: ['b', 'a'] }] } }] }] }, 'x/net1'),
  policy('no-peers', { podSelector: {}, ingress: [{}], egress: [{ to: [{ ipBlock: { cidr: '192.168.0.0/16' } }] }] }),
];

void describe('address groups', () => {
  void test('policyPeerQueries names every query the resolver asks, for every policy', () => {
    for (const p of POLICIES) {
      const checked = checkPolicy(p, 'x');
      assert.ok(checked.ok, p.metadata?.name);
      const needed = new Set(policyPeerQueries(checked.value).map(addressGroupKey));
      const asked: PeerQuery[] = [];
      resolvePodPolicy(POD, [p], (q) => (asked.push(q), []));
      for (const q of asked) assert.ok(needed.has(addressGroupKey(q)), `${p.metadata?.name}: ${canonicalQuery(q)} not named`);
      // And nothing beyond them: each named query is asked for a pod on every network the policy is for.
      assert.equal(new Set(asked.map(addressGroupKey)).size, needed.size, p.metadata?.name);
    }
  });

  void test('the key is the same for selectors that differ only in order, and differs per policy and network', () => {
    const q = (values: string[], policyKey = 'x/p', network = 'x/net1'): PeerQuery => ({
      policy: policyKey,
      network,
      namespaces: { kind: 'namespace', name: 'x' },
      pods: { requirements: [{ key: 'tier', operator: 'In', values }] },
    });
    assert.equal(addressGroupKey(q(['a', 'b'])), addressGroupKey(q(['b', 'a'])));
    assert.notEqual(addressGroupKey(q(['a'])), addressGroupKey(q(['a'], 'x/other')));
    assert.notEqual(addressGroupKey(q(['a'])), addressGroupKey(q(['a'], 'x/p', 'x/net2')));
    assert.match(addressGroupKey(q(['a'])), /^[0-9a-f]{40}$/);
  });

  const query: PeerQuery = { policy: 'x/peers', network: 'x/net1', namespaces: { kind: 'namespace', name: 'x' }, pods: { requirements: [] } };
  function slice(q: PeerQuery, generation: string, addresses: string[][], ports: V1EndpointSlice['ports'] = []): V1EndpointSlice {
    return {
      addressType: 'IPv4',
      metadata: {
        name: 's',
        namespace: 'x',
        labels: { [ADDRESS_GROUP_LABEL]: addressGroupKey(q) },
        annotations: { [PEER_QUERY_ANNOTATION]: canonicalQuery(q), [POLICY_GENERATION_ANNOTATION]: generation },
      },
      endpoints: addresses.map((a) => ({ addresses: a })),
      ports,
    };
  }

  void test('a view answers a query from its slices, with their named ports', () => {
    const view = addressGroupView([slice(query, '3', [['10.0.0.2'], ['10.0.0.3']], [{ name: 'http', port: 8080, protocol: 'TCP' }]), slice(query, '3', [['10.0.0.4']])]);
    const pods = view.lookup(query);
    assert.deepEqual(pods.map((p) => p.addresses[0]).sort(), ['10.0.0.2', '10.0.0.3', '10.0.0.4']);
    assert.deepEqual(pods[0]?.containerPorts, [{ name: 'http', containerPort: 8080, protocol: 'TCP' }]);
    assert.equal(view.written(query, 3), true);
    assert.equal(view.written(query, 4), false);
  });

  void test('an empty group is written; a missing one is not; a slice whose query does not hash to its key is ignored', () => {
    const other: PeerQuery = { ...query, network: 'x/net2' };
    const forged = slice(query, '9', [['10.9.9.9']]);
    forged.metadata = { ...forged.metadata, annotations: { ...forged.metadata?.annotations, [PEER_QUERY_ANNOTATION]: canonicalQuery(other) } };
    const view = addressGroupView([slice(query, '3', []), forged]);
    assert.deepEqual(view.lookup(query), []);
    assert.equal(view.written(query), true);
    assert.equal(view.written(other), false);
    assert.deepEqual(view.lookup(other), []);
  });

  void test('while a group is rewritten its oldest slice decides the generation', () => {
    const view = addressGroupView([slice(query, '4', [['10.0.0.2']]), slice(query, '3', [['10.0.0.3']])]);
    assert.equal(view.written(query, 3), true);
    assert.equal(view.written(query, 4), false);
  });
});
