import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { networkLabelValue } from '../../../src/annotations/network-label.js';
import { parseLabelSelector, matchesSelector } from '../../../src/annotations/label-selector.js';
import { networkKey } from '../../../src/annotations/service-network.js';
import { NETWORK_LABEL } from '../../../src/keys.js';
import { dnsLabel, dnsSubdomain, expectOk, networkRef, RUNS } from './arbitraries.js';

/** Label-value rule written independently of src/annotations/names.ts. */
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
function assertLabelValue(v: string): void {
  assert.ok(v.length > 0 && v.length <= 63, `length ${v.length}: ${v}`);
  assert.match(v, LABEL_VALUE);
}

const longRef = fc.tuple(dnsLabel, dnsSubdomain).map(([namespace, name]) => ({ namespace, name }));

void describe('networkLabelValue', () => {
  void test('readable <ns>.<nad> when it fits', () => {
    assert.equal(networkLabelValue({ namespace: 'default', name: 'macvlan-a' }), 'default.macvlan-a');
    assert.equal(networkLabelValue({ namespace: 'a', name: 'b.c' }), 'a.b.c');
    const fits = { namespace: 'n'.repeat(31), name: 'm'.repeat(31) };
    assert.equal(networkLabelValue(fits), `${'n'.repeat(31)}.${'m'.repeat(31)}`);
  });
  void test('64 characters and more: readable prefix, "_", 32 hex digits', () => {
    const v = networkLabelValue({ namespace: 'n'.repeat(32), name: 'm'.repeat(31) });
    assert.match(v, /^n{30}_[0-9a-f]{32}$/);
    assertLabelValue(v);
    const long = networkLabelValue({ namespace: 'team-payments-production', name: `${'x'.repeat(100)}.example` });
    assert.match(long, /^team-payments-production\.xxxxx_[0-9a-f]{32}$/);
  });
  void test('refs that are not valid names still give a valid label value', () => {
    for (const ref of [
      { namespace: '', name: '' },
      { namespace: '-', name: '_' },
      { namespace: 'Ünï', name: 'c😀de' },
      { namespace: 'a b', name: 'c/d' },
      { namespace: 'x'.repeat(1000), name: 'y' },
    ]) {
      assertLabelValue(networkLabelValue(ref));
    }
    assert.notEqual(networkLabelValue({ namespace: 'a/b', name: 'c' }), networkLabelValue({ namespace: 'a', name: 'b/c' }));
  });
  void test('deterministic, valid, readable when short, and distinct for distinct refs', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.oneof(networkRef, longRef), { minLength: 2, maxLength: 20, selector: networkKey }), (refs) => {
        const values = refs.map(networkLabelValue);
        for (const [i, ref] of refs.entries()) {
          const v = values[i] ?? '';
          assertLabelValue(v);
          assert.equal(networkLabelValue({ ...ref }), v, 'not deterministic');
          const readable = `${ref.namespace}.${ref.name}`;
          if (readable.length <= 63) assert.equal(v, readable);
          else assert.match(v, /_[0-9a-f]{32}$/);
        }
        assert.equal(new Set(values).size, values.length, `collision among ${JSON.stringify(refs)}`);
      }),
      RUNS,
    );
  });
  void test('a sidecar can select its networks server-side with the value in a set selector', () => {
    fc.assert(
      fc.property(fc.oneof(networkRef, longRef), fc.oneof(networkRef, longRef), (mine, other) => {
        const sel = expectOk(parseLabelSelector(`${NETWORK_LABEL} in (${networkLabelValue(mine)})`));
        assert.equal(matchesSelector(sel, { [NETWORK_LABEL]: networkLabelValue(mine) }), true);
        if (networkKey(mine) !== networkKey(other)) assert.equal(matchesSelector(sel, { [NETWORK_LABEL]: networkLabelValue(other) }), false);
      }),
      RUNS,
    );
  });
});
