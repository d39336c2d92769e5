/**
 * Which pods a policy selects (src/policy/selection.ts): full LabelSelector semantics, policy-for
 * scoping, the fail-closed rule for a policy that fails its checks, and agreement with the
 * resolver on random policies and pods (a pod is selected exactly where resolvePodPolicy compiles
 * a network for it).
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { POLICY_FOR_ANNOTATION } from '../../../src/keys.js';
import type { MultiNetworkPolicy } from '../../../src/policy/api.js';
import { resolvePodPolicy } from '../../../src/policy/resolve.js';
import { policySelection, selectingPolicy, selectsOn, type SelectablePod } from '../../../src/policy/selection.js';

const policy = (name: string, podSelector: unknown, policyFor: string | undefined, namespace = 'x'): MultiNetworkPolicy => ({
  metadata: { name, namespace, ...(policyFor !== undefined ? { annotations: { [POLICY_FOR_ANNOTATION]: policyFor } } : {}) },
  spec: { podSelector: podSelector as never },
});
const pod = (labels: Record<string, string>, networks: string[] = ['x/net1'], namespace = 'x'): SelectablePod => ({ namespace, labels, networks });

void describe('src/policy/selection', () => {
  void test('a podSelector with matchExpressions, on the networks policy-for names, in its own namespace', () => {
    const p = policySelection(policy('db', { matchLabels: { app: 'db' }, matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['test'] }] }, 'net1,y/net2'));
    assert.equal(selectsOn(p, pod({ app: 'db' })), 'x/net1');
    assert.equal(selectsOn(p, pod({ app: 'db', tier: 'prod' }, ['x/other', 'y/net2'])), 'y/net2');
    assert.equal(selectsOn(p, pod({ app: 'db', tier: 'test' })), undefined, 'NotIn excludes');
    assert.equal(selectsOn(p, pod({ app: 'web' })), undefined, 'labels do not match');
    assert.equal(selectsOn(p, pod({ app: 'db' }, ['x/other'])), undefined, 'a network the policy is not for');
    assert.equal(selectsOn(p, pod({ app: 'db' }, ['x/net1'], 'y')), undefined, 'another namespace');
    assert.equal(selectsOn(p, pod({ app: 'db' }, [])), undefined, 'no network attached');
  });

  void test('no policy-for: for no network, selects nothing', () => {
    assert.equal(selectsOn(policySelection(policy('all', {}, undefined)), pod({})), undefined);
  });

  void test('fail-closed: an unreadable selector selects every pod, an unreadable policy-for every network', () => {
    const badSelector = policySelection(policy('bad', { matchExpressions: [{ key: 'app', operator: 'Equal', values: ['db'] }] }, 'net1'));
    assert.match(badSelector.problem ?? '', /spec.podSelector.matchExpressions\[0\].operator "Equal"/);
    assert.equal(selectsOn(badSelector, pod({ app: 'web' })), 'x/net1');
    assert.equal(selectsOn(badSelector, pod({ app: 'web' }, ['x/other'])), undefined, 'its networks were read: only those');
    // policy-for is read first: when it fails, nothing after it was read, so every pod on every network.
    const badFor = policySelection(policy('bad-for', { matchLabels: { app: 'db' } }, 'a/b/c'));
    assert.match(badFor.problem ?? '', /k8s.v1.cni.cncf.io\/policy-for "a\/b\/c"/);
    assert.equal(selectsOn(badFor, pod({ app: 'web' }, ['x/other'])), 'x/other');
    // A rule that fails after the selector and networks were read: selection as if it were valid.
    const badRule = policySelection({ ...policy('bad-rule', { matchLabels: { app: 'db' } }, 'net1'), spec: { podSelector: { matchLabels: { app: 'db' } }, ingress: [{ ports: [{ endPort: 80 }] }] } });
    assert.ok(badRule.problem !== undefined);
    assert.equal(selectsOn(badRule, pod({ app: 'db' })), 'x/net1');
    assert.equal(selectsOn(badRule, pod({ app: 'web' })), undefined);
  });

  void test('the selecting policy named is the first by name, whatever the order of the cache', () => {
    const all = ['c', 'a', 'b'].map((n) => policySelection(policy(n, {}, 'net1')));
    assert.equal(selectingPolicy(all, pod({}))?.name, 'a');
    assert.equal(selectingPolicy(all.reverse(), pod({}))?.name, 'a');
    assert.equal(selectingPolicy(all, pod({}, ['x/other'])), undefined);
  });

  void test('property: selected exactly where the resolver compiles a network for the pod', () => {
    const label = fc.constantFrom('a', 'b', 'c');
    const selector = fc.oneof(
      fc.record({ matchLabels: fc.dictionary(fc.constantFrom('app', 'tier'), label, { maxKeys: 2 }) }),
      fc.record({
        matchExpressions: fc.array(
          fc.record({ key: fc.constantFrom('app', 'tier'), operator: fc.constantFrom('In', 'NotIn', 'Exists', 'DoesNotExist', 'Bad'), values: fc.array(label, { maxLength: 2 }) }),
          { maxLength: 2 },
        ),
      }),
    );
    const policyFor = fc.option(fc.constantFrom('net1', 'net2', 'net1,y/net3', 'x/', 'y/net3'), { nil: undefined });
    const arbPolicy = fc.record({ name: fc.constantFrom('p1', 'p2', 'p3'), selector, policyFor, ns: fc.constantFrom('x', 'y') });
    const arbPod = fc.record({ labels: fc.dictionary(fc.constantFrom('app', 'tier'), label, { maxKeys: 2 }), networks: fc.subarray(['x/net1', 'x/net2', 'y/net3']) });
    fc.assert(
      fc.property(fc.uniqueArray(arbPolicy, { maxLength: 4, selector: (q) => `${q.ns}/${q.name}` }), arbPod, (ps, p) => {
        const policies = ps.map((q) => policy(q.name, q.selector, q.policyFor, q.ns));
        const resolved = resolvePodPolicy(
          { namespace: 'x', labels: p.labels, networks: p.networks.map((n, i) => ({ network: n, interface: `net${i + 1}`, addresses: [] })), containerPorts: [] },
          policies,
          () => [],
        );
        const sels = policies.map((q) => policySelection(q));
        const selectedNetworks = new Set(sels.flatMap((s) => p.networks.filter((n) => selectsOn({ ...s, networks: s.networks ?? [n] }, pod(p.labels, [n])) !== undefined)));
        assert.deepEqual([...selectedNetworks].sort(), resolved.networks.map((n) => n.network).sort());
        assert.equal(selectingPolicy(sels, pod(p.labels, p.networks)) !== undefined, resolved.networks.length > 0);
      }),
    );
  });
});
