/**
 * The policy-for annotation in its three forms (name, namespace/name, comma list; a bare name in
 * the policy's namespace), by example and by property, and linear in its length.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { policyNetworks, type MultiNetworkPolicy } from '../../../src/policy/api.js';
import { networkKey } from '../../../src/annotations/service-network.js';
import { POLICY_FOR_ANNOTATION } from '../../../src/keys.js';
import { assertNoPollution, assertWellFormed, blanks, expectErr, expectOk, FEW_RUNS, networkRef, pathological, RUNS, shortLabel } from '../annotations/arbitraries.js';

const policy = (value: unknown, namespace = 'team-a'): MultiNetworkPolicy => ({ metadata: { name: 'p', namespace, annotations: { [POLICY_FOR_ANNOTATION]: value as string } } });

void describe('policy-for annotation', () => {
  void test('absent: undefined (the policy is for no network)', () => {
    assert.equal(policyNetworks({ metadata: { name: 'p', namespace: 'a' } }), undefined);
  });

  void test('a bare name is in the policy namespace; namespace/name is explicit; a comma list with blanks; duplicates dropped', () => {
    const r = policyNetworks(policy(' net-a , other/net-b,net-a,team-a/net-a '));
    assert.deepEqual(expectOk(r ?? assert.fail('undefined')).map(networkKey), ['team-a/net-a', 'other/net-b']);
  });

  void test('bad values are denied with the key, the value, the reason and a fix', () => {
    for (const bad of ['', 'a,,b', 'a/b/c', '/net', 'Net_A', 'ns/UPPER']) {
      const e = expectErr(policyNetworks(policy(bad)) ?? assert.fail('undefined'));
      assert.equal(e.key, POLICY_FOR_ANNOTATION);
      assert.equal(e.value, bad);
      assert.ok(e.fix.length > 0);
    }
  });

  void test('property: any list of refs, bare or qualified, with blanks, parses to those refs in order', () => {
    const item = fc.record({ ref: networkRef, bare: fc.boolean(), before: blanks, after: blanks });
    fc.assert(
      fc.property(fc.array(item, { minLength: 1, maxLength: 8 }), shortLabel, (items, ns) => {
        const text = items.map((i) => `${i.before}${i.bare ? i.ref.name : `${i.ref.namespace}/${i.ref.name}`}${i.after}`).join(',');
        const want = [...new Set(items.map((i) => `${i.bare ? ns : i.ref.namespace}/${i.ref.name}`))];
        const got = expectOk(policyNetworks(policy(text, ns)) ?? assert.fail('undefined')).map(networkKey);
        assert.deepEqual(got, want);
      }),
      RUNS,
    );
  });

  void test('property: no input throws; every answer is well formed', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 300, unit: 'binary' }), fc.constantFrom(...pathological.filter((p) => p !== undefined))), (s) => {
        const r = policyNetworks(policy(s));
        assert.ok(r !== undefined);
        assertWellFormed(r, s);
      }),
      FEW_RUNS,
    );
    assertNoPollution();
  });

  void test('linear: a value 8 times longer costs about 8 times as much, not 64', () => {
    const time = (n: number): number => {
      const p = policy(`${'x'.repeat(n)},${Array.from({ length: 30 }, (_, i) => `ns/n${i}`).join(',')}`);
      let best = Infinity;
      for (let i = 0; i < 15; i++) {
        const t0 = process.hrtime.bigint();
        policyNetworks(p);
        best = Math.min(best, Number(process.hrtime.bigint() - t0) / 1e6);
      }
      return best;
    };
    time(20_000);
    const ratio = time(160_000) / Math.max(time(20_000), 0.05);
    assert.ok(ratio < 24, `8x the input took ${ratio.toFixed(1)}x the time`);
  });
});
