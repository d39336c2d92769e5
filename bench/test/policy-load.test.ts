/** The policy benchmark's loads (bench/lib/policy-load.ts): what they render to is what the benchmark says it measures. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { renderPolicy } from '../../src/dataplane/nftables/policy.js';
import { POLICY_BUDGETS } from '../../src/object-budgets.js';
import { SERVER_IP, budgetPolicy, egressPolicy, naiveEgressTable, peerAddresses } from '../lib/policy-load.js';

void test('N peer addresses are N distinct hosts, the server last, and render to an egress peer set of N elements (none merged)', () => {
  for (const n of [10, 10000]) {
    const peers = peerAddresses(n);
    assert.equal(new Set(peers).size, n);
    assert.equal(peers[n - 1], SERVER_IP);
    const part = renderPolicy(egressPolicy(peers));
    assert.ok(part);
    assert.deepEqual(part.warnings, []);
    const addressSets = [...part.sets].filter(([name]) => name.startsWith('MPX-PA-'));
    assert.equal(addressSets.length, 1);
    assert.equal(addressSets[0]?.[1].elements.length, n);
    assert.equal(part.chains.size, 1, 'egress only');
  }
});

void test('the naive layout has one accept rule per peer, the server last, then the drop', () => {
  const text = naiveEgressTable('t', peerAddresses(100));
  const accepts = text.split('\n').filter((l) => /ip daddr \S+ udp dport \d+-\d+ accept/.test(l));
  assert.equal(accepts.length, 100);
  assert.match(accepts[99] ?? '', new RegExp(`ip daddr ${SERVER_IP.replace(/\./g, '\\.')} `));
  assert.match(text, /accept\n\t\tdrop\n/);
});

void test('the budget policy stays within the object budgets and renders without warnings', () => {
  const p = budgetPolicy({ rules: POLICY_BUDGETS.rules, perRule: 100, addresses: 1000 });
  const net = p.networks[0];
  assert.ok(net);
  assert.equal(net.ingress.rules.length, POLICY_BUDGETS.rules);
  assert.equal(net.egress.rules.length, POLICY_BUDGETS.rules);
  for (const r of net.ingress.rules) {
    assert.equal(r.ports?.length, POLICY_BUDGETS.ports);
    assert.equal(r.peers?.blocks[0]?.except.length, POLICY_BUDGETS.except);
  }
  assert.deepEqual(renderPolicy(p)?.warnings, []);
});
