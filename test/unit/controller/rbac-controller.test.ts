import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { namespaceChangeMatters } from '../../../src/controller/rbac-controller.js';
import { INJECTION_LABEL } from '../../../src/keys.js';
import type { V1Namespace } from '../../../src/kube/types.js';

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
