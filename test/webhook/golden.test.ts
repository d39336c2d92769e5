/**
 * Golden files: test/golden/webhook/<case>.in.json is a pod as the apiserver would send it;
 * <case>.out.json is what the apiserver would store after applying our JSON Patch (the pod
 * itself when it is allowed: injected or unchanged; with `{warnings, object}` around it when the
 * answer carries warnings), or our answer without its uid when the pod is denied. Regenerate with
 * UPDATE_GOLDEN=1 after an intended change, and review the diff.
 *
 * Namespaces enabled for injection: `apps` (the default for pods without a namespace),
 * `regular-apps` (the webhook injects a regular container there), `restricted-apps` and
 * `baseline-apps` (PodSecurity enforce restricted, baseline). `plain-apps` is not enabled: its pods
 * come through the selected-pods endpoint and get the sidecar only when a policy selects them.
 * `vip-apps` is enabled and exempt from the source guard by the admin (sourceGuard.exemptNamespaces).
 * POLICIES select pods labelled app=db on net-a in apps, baseline-apps and plain-apps, and (one that
 * fails its checks) every pod on net-c in apps.
 *
 * The case name says what must happen: `deny-*` denied; `inherited-*` (injection, namespace-wide or
 * by a policy, refused for a policy reason) admitted unchanged with a warning; anything else admitted.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { podHandler } from '../../cmd/webhook/handlers.js';
import type { V1Pod } from '../../src/kube/types.js';
import { admissionRequest, applyResponse, ENABLED, fakeCluster, fakePolicies, SIDECAR } from './fixtures.js';
import { POLICY_FOR_ANNOTATION } from '../../src/keys.js';
import type { MultiNetworkPolicy } from '../../src/policy/api.js';

const DIR = join(import.meta.dirname, '..', 'golden', 'webhook');
const UPDATE = process.env['UPDATE_GOLDEN'] === '1';
const NAMESPACES = {
  apps: ENABLED,
  'regular-apps': ENABLED,
  'restricted-apps': { ...ENABLED, 'pod-security.kubernetes.io/enforce': 'restricted' },
  'baseline-apps': { ...ENABLED, 'pod-security.kubernetes.io/enforce': 'baseline' },
  'plain-apps': {},
  'vip-apps': ENABLED,
};
const dbPolicy = (namespace: string): MultiNetworkPolicy => ({
  metadata: { name: 'db-ingress', namespace, annotations: { [POLICY_FOR_ANNOTATION]: 'net-a' } },
  spec: { podSelector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['db'] }] }, ingress: [{ ports: [{ port: 'pg' }] }] },
});
// One that fails its checks (an operator Kubernetes does not have): taken as selecting every pod on net-c.
const broken: MultiNetworkPolicy = {
  metadata: { name: 'broken', namespace: 'apps', annotations: { [POLICY_FOR_ANNOTATION]: 'net-c' } },
  spec: { podSelector: { matchExpressions: [{ key: 'app', operator: 'Equal' as never, values: ['db'] }] } },
};
const POLICIES = fakePolicies([...['apps', 'baseline-apps', 'plain-apps'].map(dbPolicy), broken]);

const cases = readdirSync(DIR)
  .filter((f) => f.endsWith('.in.json'))
  .map((f) => f.slice(0, -'.in.json'.length))
  .sort();

void describe('webhook golden pods', () => {
  void test('there are golden cases', () => assert.ok(cases.length >= 10, `only ${cases.length} cases in ${DIR}`));
  for (const name of cases) {
    void test(name, async () => {
      const pod = JSON.parse(readFileSync(join(DIR, `${name}.in.json`), 'utf8')) as V1Pod;
      const namespace = pod.metadata?.namespace ?? 'apps';
      const handler = podHandler(
        {
          cluster: fakeCluster({ namespaces: NAMESPACES }),
          sidecar: { ...SIDECAR, mode: namespace === 'regular-apps' ? 'regular' : 'native', sourceGuard: { mode: 'enforce', exemptNamespaces: ['vip-apps'] } },
          policies: POLICIES,
        },
        { namespaceEnabled: namespace !== 'plain-apps' },
      );
      const { response } = await handler(admissionRequest(pod, namespace));
      const { uid: _uid, ...answer } = response;
      const stored = applyResponse(pod, response);
      const actual = !response.allowed ? answer : response.warnings !== undefined ? { warnings: response.warnings, object: stored } : stored;
      const outFile = join(DIR, `${name}.out.json`);
      if (UPDATE) writeFileSync(outFile, `${JSON.stringify(actual, null, 2)}\n`);
      let expected: unknown;
      try {
        expected = JSON.parse(readFileSync(outFile, 'utf8'));
      } catch (e) {
        throw new Error(`${outFile} is missing or not JSON; create it with UPDATE_GOLDEN=1 and review it`, { cause: e });
      }
      assert.deepEqual(actual, expected);
      // The case name says what must happen, so a regenerated file cannot silently flip it.
      if (name.startsWith('deny-')) assert.equal(response.allowed, false);
      else assert.equal(response.allowed, true);
      if (name.startsWith('inherited-')) {
        assert.deepEqual(stored, pod, 'an inherited pod refused for policy is admitted unchanged');
        assert.match(
          response.warnings?.[0] ?? '',
          /^no multus-proxy sidecar added \((namespace-wide injection|MultiNetworkPolicy \S+ selects the pod on network \S+ and is not enforced in it)\): Pod /,
        );
      }
    });
  }
});
