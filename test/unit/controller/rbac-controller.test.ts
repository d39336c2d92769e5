import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { namespaceChangeMatters, podChangeMatters } from '../../../cmd/controller/rbac-controller.js';
import { INJECTION_LABEL } from '../../../src/keys.js';
import type { V1Namespace, V1Pod } from '../../../src/kube/types.js';

const ns = (labels: Record<string, string>, phase = 'Active'): V1Namespace => ({ metadata: { name: 'a', labels }, status: { phase } });

void describe('rbac-controller: which namespace events start a sync', () => {
  void test('adds and deletes always; updates only when the injection label or the phase changes', () => {
    assert.equal(namespaceChangeMatters(ns({}), undefined), true);
    assert.equal(namespaceChangeMatters(undefined, ns({})), true);
    assert.equal(namespaceChangeMatters(ns({ [INJECTION_LABEL]: 'enabled' }), ns({})), true);
    assert.equal(namespaceChangeMatters(ns({}, 'Terminating'), ns({})), true);
    assert.equal(namespaceChangeMatters(ns({ other: 'x' }), ns({})), false);
    assert.equal(namespaceChangeMatters(ns({ [INJECTION_LABEL]: 'enabled', other: 'y' }), ns({ [INJECTION_LABEL]: 'enabled' })), false);
  });
});

void describe('rbac controller: which pod events re-sync the bindings', () => {
  const pod = (sa: string | undefined, injected: boolean, ns = 'a'): V1Pod => ({
    metadata: { namespace: ns, name: 'p', labels: { x: String(Math.random()) } },
    spec: { ...(sa !== undefined ? { serviceAccountName: sa } : {}), containers: [{ name: 'app' }, ...(injected ? [{ name: 'multus-proxy' }] : [])] },
  });
  void test('an injected pod coming, going or changing account matters; plain pods and unrelated updates do not', () => {
    assert.equal(podChangeMatters(pod('web', true), undefined), true);
    assert.equal(podChangeMatters(undefined, pod('web', true)), true);
    assert.equal(podChangeMatters(pod('other', true), pod('web', true)), true);
    assert.equal(podChangeMatters(pod('web', true), pod('web', true)), false, 'a label change');
    assert.equal(podChangeMatters(pod(undefined, true), pod('default', true)), false, 'unset is default');
    assert.equal(podChangeMatters(pod('web', false), undefined), false);
    assert.equal(podChangeMatters(undefined, pod('web', false)), false);
  });
});
