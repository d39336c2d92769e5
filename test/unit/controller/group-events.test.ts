/**
 * Which policies an event concerns: a pod's change the policies it is a peer of (scope and pod
 * selector, old or new labels) and those of its namespace that select it; a namespace's label
 * change the policies with a namespaceSelector matching its old or new labels. Nothing else.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { GroupCaches, groupPodChangeMatters, hasSidecar } from '../../../cmd/controller/group-controller.js';
import { slimPolicy } from '../../../cmd/controller/slim.js';
import { POLICY_FOR_ANNOTATION } from '../../../src/keys.js';
import type { MultiNetworkPolicySpec } from '../../../src/policy/api.js';
import { pod } from './fixtures.js';

function caches(): GroupCaches {
  const c = new GroupCaches(() => []);
  const add = (namespace: string, name: string, spec: unknown): void =>
    void c.policies.set(
      `${namespace}/${name}`,
      slimPolicy({
        apiVersion: 'k8s.cni.cncf.io/v1beta1',
        kind: 'MultiNetworkPolicy',
        metadata: { name, namespace, annotations: { [POLICY_FOR_ANNOTATION]: 'net1' } },
        spec: spec as MultiNetworkPolicySpec,
      }),
    );
  c.namespaces.set('x', { team: 'a' });
  c.namespaces.set('y', { team: 'b' });
  add('x', 'from-web', { podSelector: { matchLabels: { app: 'db' } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }] }] });
  add('x', 'from-team-a', { podSelector: { matchLabels: { app: 'none' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'a' } } }] }] });
  add('y', 'from-web', { podSelector: { matchLabels: { app: 'none' } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }] }] });
  return c;
}

const ofPod = (c: GroupCaches, ns: string, labels: Record<string, string>): string[] => {
  const out = new Set<string>();
  c.policiesOfPod(ns, labels, out);
  return [...out].sort();
};

void describe('address-group events to policies', () => {
  void test('a pod concerns the policies it is a peer of, in scope, and those of its namespace that select it', () => {
    const c = caches();
    assert.deepEqual(ofPod(c, 'x', { app: 'web' }), ['x/from-team-a', 'x/from-web']);
    assert.deepEqual(ofPod(c, 'x', { app: 'db' }), ['x/from-team-a', 'x/from-web']);
    assert.deepEqual(ofPod(c, 'y', { app: 'web' }), ['y/from-web']);
    assert.deepEqual(ofPod(c, 'y', { app: 'other' }), []);
  });

  void test('a namespace label change concerns the namespaceSelector policies matching before or after', () => {
    const c = caches();
    assert.deepEqual(c.policiesOfNamespace({ team: 'a' }, { team: 'b' }), ['x/from-team-a']);
    assert.deepEqual(c.policiesOfNamespace({ team: 'c' }, { team: 'b' }), []);
  });

  void test('pod changes that matter, and the sidecar', () => {
    const a = pod('a', { namespace: 'x' });
    assert.equal(groupPodChangeMatters(a, { ...a, status: { ...a.status, conditions: [] } }), false, 'readiness does not move a group');
    assert.equal(groupPodChangeMatters(a, { ...a, metadata: { ...a.metadata, labels: { app: 'db' } } }), true);
    assert.equal(hasSidecar(a), false);
    assert.equal(hasSidecar({ ...a, spec: { containers: [], initContainers: [{ name: 'multus-proxy', restartPolicy: 'Always' }] } }), true);
  });
});
