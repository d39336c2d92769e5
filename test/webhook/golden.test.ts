/**
 * Golden files: test/golden/webhook/<case>.in.json is a pod as the apiserver would send it;
 * <case>.out.json is what the apiserver would store after applying our JSON Patch (the pod
 * itself when it is allowed: injected or unchanged; with `{warnings, object}` around it when the
 * answer carries warnings), or our answer without its uid when the pod is denied. Regenerate with
 * UPDATE_GOLDEN=1 after an intended change, and review the diff.
 *
 * Every namespace is enabled (the webhook configuration's namespaceSelector sends no other pod):
 * `apps` (the default for pods without a namespace), `regular-apps` (the webhook injects a regular
 * container there), `restricted-apps` and `baseline-apps` (PodSecurity enforce restricted, baseline).
 *
 * The case name says what must happen: `deny-*` denied; `inherited-*` (namespace-wide injection
 * refused for a policy reason) admitted unchanged with a warning; anything else admitted.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { podHandler } from '../../cmd/webhook/handlers.js';
import type { V1Pod } from '../../src/kube/types.js';
import { admissionRequest, applyResponse, ENABLED, fakeCluster, SIDECAR } from './fixtures.js';

const DIR = join(import.meta.dirname, '..', 'golden', 'webhook');
const UPDATE = process.env['UPDATE_GOLDEN'] === '1';
const NAMESPACES = {
  apps: ENABLED,
  'regular-apps': ENABLED,
  'restricted-apps': { ...ENABLED, 'pod-security.kubernetes.io/enforce': 'restricted' },
  'baseline-apps': { ...ENABLED, 'pod-security.kubernetes.io/enforce': 'baseline' },
};

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
      const handler = podHandler({
        cluster: fakeCluster({ namespaces: NAMESPACES }),
        sidecar: { ...SIDECAR, mode: namespace === 'regular-apps' ? 'regular' : 'native' },
      });
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
        assert.match(response.warnings?.[0] ?? '', /^no multus-proxy sidecar added \(namespace-wide injection\): Pod /);
      }
    });
  }
});
