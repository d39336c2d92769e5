/**
 * What the webhook's policy cache keeps of a MultiNetworkPolicy (cmd/webhook/policy-cache.ts
 * slimPolicy): the selection and nothing else, and a policy over the byte budget kept as selecting
 * every pod on its networks. The cache's life (CRD absent, installed later, policies added) runs
 * against a real apiserver in selected-pods-apiserver.test.ts.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { MAX_KEPT_SELECTION_BYTES, slimPolicy } from '../../cmd/webhook/policy-cache.js';
import { POLICY_FOR_ANNOTATION } from '../../src/keys.js';
import type { MultiNetworkPolicy } from '../../src/policy/api.js';
import { selectsOn } from '../../src/policy/selection.js';

const policy = (podSelector: unknown): MultiNetworkPolicy => ({
  metadata: {
    name: 'p',
    namespace: 'x',
    uid: 'u1',
    resourceVersion: '7',
    labels: { big: 'x'.repeat(60) },
    annotations: { [POLICY_FOR_ANNOTATION]: 'net1', other: 'y'.repeat(1000) },
    managedFields: [{}],
  } as never,
  spec: { podSelector: podSelector as never, ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/8' } }] }] },
});

void describe('webhook policy cache: what is kept of a policy', () => {
  void test('identity and selection only: no rules, labels, other annotations or managedFields', () => {
    const kept = slimPolicy(policy({ matchLabels: { app: 'db' } }));
    assert.deepEqual(Object.keys(kept).sort(), ['metadata', 'selection']);
    assert.equal(kept.metadata?.resourceVersion, '7');
    assert.equal(kept.metadata?.labels, undefined);
    assert.equal(kept.metadata?.annotations, undefined);
    assert.equal(selectsOn(kept.selection, { namespace: 'x', labels: { app: 'db' }, networks: ['x/net1'] }), 'x/net1');
    assert.equal(selectsOn(kept.selection, { namespace: 'x', labels: { app: 'web' }, networks: ['x/net1'] }), undefined);
    assert.ok(JSON.stringify(kept).length < 400, JSON.stringify(kept));
  });

  void test('over the byte budget: kept as selecting every pod on its networks, and says why', () => {
    // Within the checker's budgets (32 terms, 64 values of 63 characters), far over the cache's.
    const values = Array.from({ length: 64 }, (_, i) => `${String(i).padStart(2, '0')}${'v'.repeat(61)}`);
    const exprs = Array.from({ length: 8 }, (_, i) => ({ key: `k${i}`, operator: 'In', values }));
    const kept = slimPolicy(policy({ matchExpressions: exprs }));
    assert.ok(JSON.stringify(kept).length <= MAX_KEPT_SELECTION_BYTES);
    assert.equal(kept.selection.podSelector, undefined);
    assert.match(kept.selection.problem ?? '', /more than the 16384 the webhook keeps for one policy/);
    assert.equal(selectsOn(kept.selection, { namespace: 'x', labels: {}, networks: ['x/other', 'x/net1'] }), 'x/net1');
    assert.equal(selectsOn(kept.selection, { namespace: 'x', labels: {}, networks: ['x/other'] }), undefined, 'still only its networks');
  });
});
