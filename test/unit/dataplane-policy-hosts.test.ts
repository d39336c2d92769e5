/**
 * The policy's pod-address elements (peerHosts, src/dataplane/nftables/policy-intervals.ts): per
 * family each address once, sorted, canonical, the same as reading every address through
 * cidrInterval; bad values refused with the reason peerIntervals gives.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { cidrInterval, intervalText, peerHosts, peerIntervals } from '../../src/dataplane/nftables/policy-intervals.js';

/** The reference: every address through cidrInterval, per family, deduplicated and sorted. */
function reference(addresses: readonly string[]): Record<4 | 6, string[]> {
  const out: Record<4 | 6, Map<bigint, string>> = { 4: new Map(), 6: new Map() };
  for (const a of addresses) {
    const r = cidrInterval(a);
    if (typeof r === 'string') throw new Error(r);
    out[r.family].set(r.interval.lo, intervalText(r.interval, r.family));
  }
  const sorted = (m: Map<bigint, string>): string[] => [...m].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0)).map(([, t]) => t);
  return { 4: sorted(out[4]), 6: sorted(out[6]) };
}

void test('property: peerHosts equals the addresses read through cidrInterval, deduplicated and sorted', () => {
  const v6 = fc.ipV6().map((a) => a.toLowerCase());
  fc.assert(
    fc.property(fc.array(fc.oneof(fc.ipV4(), v6, fc.constantFrom('10.0.0.1', 'fd00::1', 'FD00:0:0::1', '::ffff:10.0.0.1')), { maxLength: 40 }), (addresses) => {
      const got = peerHosts(addresses);
      assert.ok(got.ok);
      assert.deepEqual(got.byFamily, reference(addresses));
    }),
    { seed: 39, numRuns: 300 },
  );
});

void test('bad values: the reason peerIntervals gives, for the first one', () => {
  for (const bad of ['10.0.0.1/24', '010.0.0.1', '10.0.0.256', 'fe80::1%eth0', 'nonsense', '']) {
    const want = peerIntervals({ addresses: ['10.0.0.2', bad], blocks: [] });
    const got = peerHosts(['10.0.0.2', bad]);
    assert.equal(want.ok, false, bad);
    assert.deepEqual(got, want, bad);
  }
});
