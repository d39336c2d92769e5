/**
 * The policy's sets shared and bounded (src/dataplane/nftables/policy-sets.ts): rules with equal
 * peers or ports use one set, in either direction and across policies, and the packets they let
 * through on the fake nftables are the same; past the cap a rule allows nothing and says why (the
 * render's warning, and the sidecar's Event message built from it).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeSidecar } from '../harness/tracer/sidecar.js';
import { NET1, PEERS, policyPacket, type PolicyProbe } from '../harness/tracer/policy-cases.js';
import { policyCapWarnings, withPodPolicy } from '../../src/dataplane/policy-support.js';
import { policyCapMessage } from '../../cmd/sidecar/policy-run.js';
import { renderPolicy } from '../../src/dataplane/nftables/policy.js';
import { MAX_POLICY_SET_ELEMENTS, SetPool, type NftPolicySet } from '../../src/dataplane/nftables/policy-sets.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';
import type { PodPolicy, PolicyRule } from '../../src/policy/model.js';

const BASE: DesiredState = { targets: [], interfaces: [] };
const ab = [PEERS.a.ipv4, PEERS.b.ipv4];
const tcp = [{ protocol: 'TCP' as const, from: 8080, to: 8080 }];
const rule = (policy: string, index: number, addresses: readonly string[]): PolicyRule => ({ policy, index, peers: { addresses, blocks: [] }, ports: tcp });

function policy(ingress: readonly PolicyRule[], egress: readonly PolicyRule[]): PodPolicy {
  return { networks: [{ network: NET1, interface: 'net1', ingress: { isolated: true, rules: ingress }, egress: { isolated: true, rules: egress }, failures: [] }] };
}

const passes = (fake: FakeSidecar, p: Omit<PolicyProbe, 'pass' | 'family' | 'protocol'>): boolean => {
  const { pkt, path } = policyPacket({ ...p, family: 4, protocol: 'tcp', pass: true });
  return fake.trace(pkt, path).every((o) => o.verdict.kind === 'accept');
};

void test('rules with equal peers and ports share one set each, across directions and policies, and admit the same packets', () => {
  const p = policy([rule('ns/p1', 0, ab), rule('ns/p2', 0, ab)], [rule('ns/p1', 0, ab), rule('ns/p2', 1, [PEERS.c.ipv4])]);
  const part = renderPolicy(p);
  assert.ok(part);
  assert.deepEqual(part.warnings, []);
  const addressSets = [...part.sets.keys()].filter((n) => n.startsWith('MPX-PA-'));
  assert.equal(addressSets.length, 2, 'a+b once, c once');
  assert.equal([...part.sets.keys()].filter((n) => n.startsWith('MPX-PP-')).length, 1, 'one port set for four rules');
  const used = [...part.chains.values()].flat().join('\n');
  for (const name of part.sets.keys()) assert.ok(used.includes(`@${name} `), `${name} is referred to`);
  const fake = new FakeSidecar('nftables');
  fake.sync(withPodPolicy(BASE, p));
  assert.deepEqual(
    (['a', 'b', 'c'] as const).map((peer) => [passes(fake, { dir: 'ingress', peer }), passes(fake, { dir: 'egress', peer })]),
    [
      [true, true],
      [true, true],
      [false, true],
    ],
  );
});

void test('a peer change all users of a shared set share is an element change of that set, no chain written', () => {
  const before = policy([rule('ns/p1', 0, ab)], [rule('ns/p1', 0, ab)]);
  const after = policy([rule('ns/p1', 0, [PEERS.a.ipv4])], [rule('ns/p1', 0, [PEERS.a.ipv4])]);
  const fake = new FakeSidecar('nftables');
  fake.sync(withPodPolicy(BASE, before));
  fake.sync(withPodPolicy(BASE, after));
  const text = fake.texts.join('');
  // Pod addresses live in a hash set: the peer that left is deleted from the one shared set.
  assert.match(text, /^delete element inet multus_proxy MPX-PA-\S+ \{ 192\.168\.101\.4 \}$/m);
  assert.equal(new Set([...text.matchAll(/^(?:delete|add) element inet multus_proxy (MPX-PA-\S+)/gm)].map((m) => m[1])).size, 1, 'one set for both rules');
  assert.doesNotMatch(text, /^(flush|add) chain /m);
  assert.equal(passes(fake, { dir: 'egress', peer: 'b' }), false);
  assert.equal(passes(fake, { dir: 'egress', peer: 'a' }), true);
});

void test('past the cap a rule allows nothing and says why; the rules before it and rules reusing a set stand', () => {
  const many = (from: number): string[] => Array.from({ length: 10_000 }, (_, i) => `10.${from + (i >> 15)}.${((2 * i) >> 8) & 255}.${(2 * i) & 255}`);
  const first = many(1);
  const rules = [rule('ns/big', 0, first), rule('ns/big', 1, many(2)), rule('ns/big', 2, many(3)), rule('ns/big', 3, first)];
  const part = renderPolicy(policy(rules, []));
  assert.ok(part);
  const elements = [...part.sets.values()].reduce((n, s) => n + s.elements.length, 0);
  assert.ok(elements <= MAX_POLICY_SET_ELEMENTS, `${elements} elements`);
  assert.equal(part.warnings.length, 1);
  assert.match(part.warnings[0] ?? '', /^policy ns\/big ingress rule 2: its sets add 10000 elements to the 20001 .* more than the 25000 it keeps .*; the rule allows nothing$/);
  const chain = [...part.chains.values()][0] ?? [];
  assert.equal(chain.filter((l) => l.endsWith(' accept') && l.includes('@MPX-PA-')).length, 3, 'rules 0, 1 and 3 (which reuses rule 0 set)');
  // The sidecar's Event takes the cap's warnings, not a bad value's.
  const withBad = policy([...rules, rule('ns/bad', 0, ['not-an-address'])], []);
  assert.equal(renderPolicy(withBad)?.warnings.length, 2);
  assert.deepEqual(policyCapWarnings('nftables', withBad), [part.warnings[0]]);
  assert.deepEqual(policyCapWarnings('iptables', withBad), []);
  const message = policyCapMessage(policyCapWarnings('nftables', withBad));
  assert.match(message ?? '', /^1 rule of the policies that select this pod allow nothing, past the sidecar's bound on policy set elements: policy ns\/big ingress rule 2: /);
  assert.equal(policyCapMessage([]), undefined);
  assert.match(policyCapMessage(['a', 'b', 'c']) ?? '', /^3 rules .*: a \(and 2 more rules; the sidecar's log lists each\)$/);
});

void test('the pool adds a rule whole or not at all', () => {
  const sets = new Map<string, NftPolicySet>();
  const pool = new SetPool(sets, 3);
  const s = (...elements: string[]) => ({ decl: ['type ipv4_addr'], elements });
  assert.deepEqual(pool.addAll([{ name: 'A', set: s('1', '2') }]), new Map([['A', 'A']]));
  assert.equal(
    typeof pool.addAll([
      { name: 'B', set: s('1', '2') },
      { name: 'C', set: s('3', '4') },
    ]),
    'string',
  );
  assert.deepEqual([...sets.keys()], ['A'], 'B (shared) not kept when C is refused');
  assert.deepEqual(
    pool.addAll([
      { name: 'B', set: s('1', '2') },
      { name: 'C', set: s('3') },
    ]),
    new Map([
      ['B', 'A'],
      ['C', 'C'],
    ]),
  );
  assert.equal(pool.elements, 3);
});
