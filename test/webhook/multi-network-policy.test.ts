/**
 * MultiNetworkPolicy admission. Golden files: test/golden/webhook-policy/<case>.in.json is a
 * policy as the apiserver would send it, <case>.out.json our answer without its uid. The case name
 * says what must happen (`deny-*` denied, anything else allowed). UPDATE_GOLDEN=1 rewrites the
 * answers; review the diff. Beside them: UPDATE, deletion, and how NAD lookups are used.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { policyValidationHandler } from '../../cmd/webhook/handlers.js';
import type { MultiNetworkPolicy } from '../../src/policy/api.js';
import { admissionRequest, fakeCluster } from './fixtures.js';

const DIR = join(import.meta.dirname, '..', 'golden', 'webhook-policy');
const UPDATE = process.env['UPDATE_GOLDEN'] === '1';
const NADS = { 'apps/missing-net': 'missing', 'slow-ns/slow-net': 'unknown' } as const;

const cases = readdirSync(DIR)
  .filter((f) => f.endsWith('.in.json'))
  .map((f) => f.slice(0, -'.in.json'.length))
  .sort();

const request = (p: MultiNetworkPolicy, operation: 'CREATE' | 'UPDATE' = 'CREATE', old?: MultiNetworkPolicy): ReturnType<typeof admissionRequest> => ({
  ...admissionRequest(p, p.metadata?.namespace ?? 'apps', operation, 'MultiNetworkPolicy'),
  resource: { group: 'k8s.cni.cncf.io', version: 'v1beta1', resource: 'multi-networkpolicies' },
  ...(old !== undefined ? { oldObject: old } : {}),
});

void describe('webhook: MultiNetworkPolicy validation', () => {
  void test('there are golden cases', () => assert.ok(cases.length >= 10, `only ${cases.length} cases in ${DIR}`));
  for (const name of cases) {
    void test(`golden: ${name}`, async () => {
      const policy = JSON.parse(readFileSync(join(DIR, `${name}.in.json`), 'utf8')) as MultiNetworkPolicy;
      const { response } = await policyValidationHandler({ cluster: fakeCluster({ nads: NADS }) })(request(policy));
      const { uid: _uid, ...answer } = response;
      const outFile = join(DIR, `${name}.out.json`);
      if (UPDATE) writeFileSync(outFile, `${JSON.stringify(answer, null, 2)}\n`);
      assert.deepEqual(answer, JSON.parse(readFileSync(outFile, 'utf8')));
      assert.equal(response.allowed, !name.startsWith('deny-'));
      if (!response.allowed) assert.match(response.status?.message ?? '', new RegExp(`^MultiNetworkPolicy apps/${policy.metadata?.name ?? ''}: `));
    });
  }

  const valid: MultiNetworkPolicy = { metadata: { name: 'p', namespace: 'apps', annotations: { 'k8s.v1.cni.cncf.io/policy-for': 'a, apps/a, other/b' } }, spec: { podSelector: {} } };

  void test('each network of policy-for is looked up once; none for a policy that fails its checks', async () => {
    const cluster = fakeCluster();
    const r = await policyValidationHandler({ cluster })(request(valid));
    assert.equal(r.response.allowed, true);
    assert.deepEqual(cluster.calls.sort(), ['nad:apps/a', 'nad:other/b']);
    const bad = fakeCluster();
    await policyValidationHandler({ cluster: bad })(request({ ...valid, spec: { podSelector: {}, ingress: [{ ports: [{ endPort: 3 }] }] } }));
    assert.deepEqual(bad.calls, []);
  });

  void test('a lookup slower than its bound denies (fail closed)', async () => {
    const cluster = { ...fakeCluster(), nadExists: () => new Promise<never>(() => undefined) };
    const r = await policyValidationHandler({ cluster, nadLookupTimeoutMs: 50 })(request(valid));
    assert.equal(r.response.allowed, false);
    assert.equal(r.reason, 'network-unverified');
  });

  void test('UPDATE is checked like CREATE; a policy being deleted whose update leaves it as it was passes unchecked', async () => {
    const broken: MultiNetworkPolicy = { ...valid, spec: { podSelector: { matchLabels: { 'bad key': 'x' } } } };
    const h = policyValidationHandler({ cluster: fakeCluster({ nads: { 'apps/a': 'missing' } }) });
    assert.equal((await h(request(broken, 'UPDATE', valid))).response.allowed, false);
    const deleting: MultiNetworkPolicy = { ...broken, metadata: { ...broken.metadata, deletionTimestamp: '2026-01-01T00:00:00Z' } };
    const r = await h(request(deleting, 'UPDATE', broken));
    assert.equal(r.response.allowed, true);
    assert.equal(r.reason, 'being-deleted');
    const changed: MultiNetworkPolicy = { ...deleting, spec: { podSelector: { matchLabels: { 'another bad': 'x' } } } };
    assert.equal((await h(request(changed, 'UPDATE', broken))).response.allowed, false);
  });
});
