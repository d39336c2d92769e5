/**
 * The pod's MultiNetworkPolicy on the fake nftables: every row of the policy truth table
 * (test/harness/tracer/policy-cases.ts) through the project's renderer and planner, from scratch,
 * as a partial change from the row before and as a full sync over it written in place; a seeded property that a partial change after any
 * policy leaves the table a from-scratch write makes; the iptables refusal; and the render's
 * fail-closed handling of bad values.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FakeSidecar } from '../../harness/tracer/sidecar.js';
import { FakeNft } from '../../harness/tracer/nftables.js';
import { POLICY_CASES, NET1, PEERS, policyPacket, probeName, type PolicyCase } from '../../harness/tracer/policy-cases.js';
import { randomPolicy, withOtherPeers } from '../../harness/tracer/policy-random.js';
import { rng } from '../../harness/property.js';
import { withPodPolicy, policyBackendRefusal } from '../../../src/dataplane/policy-support.js';
import { renderPolicy } from '../../../src/dataplane/nftables/policy.js';
import { fullText, planNft, renderNft } from '../../../src/dataplane/nftables/render.js';
import { NFT_TABLE } from '../../../src/dataplane/nftables/render.js';
import { NftStage } from '../../../src/dataplane/nftables/stage.js';
import { render, RenderCache } from '../../../src/dataplane/core/incremental.js';
import type { DesiredState } from '../../../src/dataplane/core/model.js';
import type { PodPolicy, PolicyRule } from '../../../src/policy/model.js';

const BASE: DesiredState = { targets: [], interfaces: [] };

function answers(fake: FakeSidecar, c: PolicyCase): string[] {
  return c.probes.map((p) => {
    const { pkt, path } = policyPacket(p);
    const out = fake.trace(pkt, path);
    const pass = out.every((o) => o.verdict.kind === 'accept');
    assert.ok(pass || out.every((o) => o.verdict.kind === 'drop'), `${c.name}: ${probeName(p)} ends in ${JSON.stringify(out.map((o) => o.verdict))}`);
    return `${probeName(p)}: ${pass ? 'passes' : 'dropped'}`;
  });
}
/** Every probe of every row passes: no policy is left. */
function allPass(fake: FakeSidecar): void {
  for (const c of POLICY_CASES)
    for (const p of c.probes) {
      const { pkt, path } = policyPacket(p);
      assert.ok(
        fake.trace(pkt, path).every((o) => o.verdict.kind === 'accept'),
        `${probeName(p)} passes with no policy`,
      );
    }
}
const wanted = (c: PolicyCase): string[] => c.probes.map((p) => `${probeName(p)}: ${p.pass ? 'passes' : 'dropped'}`);

void describe('policy on the tracer', () => {
  for (const c of POLICY_CASES)
    void test(`${c.name} (from scratch)`, () => {
      const fake = new FakeSidecar('nftables');
      fake.sync(withPodPolicy(BASE, c.policy));
      assert.deepEqual(answers(fake, c), wanted(c));
    });

  void test('every row as a full sync over the row before, written in place (a restart), then the policy removed the same way', () => {
    const fake = new FakeSidecar('nftables');
    fake.sync(BASE, true);
    for (const c of POLICY_CASES) {
      fake.sync(withPodPolicy(BASE, c.policy), true);
      assert.ok(!/^delete table /m.test(fake.texts.join('')), `${c.name}: in place, not the tables deleted and written again`);
      assert.deepEqual(answers(fake, c), wanted(c), c.name);
    }
    fake.sync(BASE, true);
    assert.match(fake.texts.join(''), /^delete chain inet multus_proxy policy-(input|output)$/m, 'the policy hook chains of the last row removed');
    allPass(fake);
  });

  void test('every row as a partial change from the row before, then the policy removed', () => {
    const fake = new FakeSidecar('nftables');
    fake.sync(BASE);
    for (const c of POLICY_CASES) {
      fake.sync(withPodPolicy(BASE, c.policy));
      assert.ok(!/^table /m.test(fake.texts.join('')), `${c.name}: a partial change, not a whole table`);
      assert.deepEqual(answers(fake, c), wanted(c), c.name);
    }
    fake.sync(BASE);
    allPass(fake);
  });

  void test('a pod peer joining or leaving is one element added or deleted; with an ipBlock, a set refill; no chain is written', () => {
    const c = POLICY_CASES[0] as PolicyCase;
    const more: PodPolicy = JSON.parse(JSON.stringify(c.policy).replace(`"${PEERS.a.ipv4}"`, `"${PEERS.a.ipv4}","${PEERS.b.ipv4}"`)) as PodPolicy;
    const a = { ...renderNft([]), policy: renderPolicy(c.policy) };
    const b = { ...renderNft([]), policy: renderPolicy(more) };
    const join = planNft(b, a, false);
    assert.match(join.text, new RegExp(`^add element inet multus_proxy MPX-PA-\\S+ \\{ ${PEERS.b.ipv4.replace(/\./g, '\\.')} \\}$`, 'm'));
    assert.doesNotMatch(join.text, /chain|flush|^add set/m);
    assert.deepEqual(join.changedChains, []);
    const leave = planNft(a, b, false);
    assert.match(leave.text, new RegExp(`^delete element inet multus_proxy MPX-PA-\\S+ \\{ ${PEERS.b.ipv4.replace(/\./g, '\\.')} \\}$`, 'm'));
    assert.doesNotMatch(leave.text, /chain|flush|^add/m);
    const withBlock = (except: string): PodPolicy => ({
      networks: [
        {
          network: NET1,
          interface: 'net1',
          ingress: { isolated: true, rules: [{ policy: 'demo/b', index: 0, peers: { addresses: [PEERS.a.ipv4], blocks: [{ cidr: '192.168.101.0/28', except: [except] }] } }] },
          egress: { isolated: false, rules: [] },
          failures: [],
        },
      ],
    });
    const refill = planNft({ ...renderNft([]), policy: renderPolicy(withBlock('192.168.101.8/30')) }, { ...renderNft([]), policy: renderPolicy(withBlock('192.168.101.4/30')) }, false);
    assert.match(refill.text, /^flush set inet multus_proxy MPX-PA-/m);
    assert.doesNotMatch(refill.text, /chain|(add|delete) element/);
  });

  void test('the stage carries the state policy through a cached render, and drops it when it goes', () => {
    const cache = new RenderCache();
    const stage = new NftStage();
    const pol = POLICY_CASES[0]?.policy;
    assert.equal(stage.step(render(BASE, cache)).policy, undefined);
    const withIt = stage.step(render(withPodPolicy(BASE, pol), cache));
    assert.ok(withIt.policy !== undefined && withIt.policy.chains.size === 1);
    assert.equal(stage.step(render(BASE, cache)).policy, undefined);
  });
});

/** The fake's table as comparable data: chains' rules and sets' elements, by name. */
function dump(fake: FakeNft): unknown {
  const t = fake.table(NFT_TABLE);
  if (t === undefined) return undefined;
  return {
    chains: [...t.chains].map(([n, c]) => [n, c.hook, c.rules.map((x) => x.text)]).sort(),
    sets: [...t.sets].map(([n, s]) => [n, s.decl, [...s.elements.keys()].sort()]).sort(),
    counters: [...(t.counters ?? [])].sort(),
  };
}

void test('property: a partial policy change leaves the table a from-scratch write makes (5 seeds x 40 steps, every other one a peer change)', () => {
  for (const seed of [1, 2, 3, 4, 5]) {
    const r = rng(seed);
    const inc = new FakeNft();
    let prev = renderNft([]);
    let last = randomPolicy(r);
    inc.apply(fullText(prev));
    for (let step = 0; step < 40; step += 1) {
      last = step % 2 === 1 ? withOtherPeers(last, r) : randomPolicy(r);
      const policy = renderPolicy(last);
      const next = policy === undefined ? renderNft([]) : { ...renderNft([]), policy };
      const plan = planNft(next, prev, false);
      try {
        if (plan.text !== '') inc.apply(plan.text);
      } catch (e) {
        assert.fail(`seed ${seed} step ${step}: ${(e as Error).message}\n${plan.text}`);
      }
      const scratch = new FakeNft();
      scratch.apply(fullText(next));
      assert.deepEqual(dump(inc), dump(scratch), `seed ${seed} step ${step}`);
      prev = next;
    }
  }
});

void describe('policy support and bad values', () => {
  void test('the iptables back end refuses a policy that isolates, naming the setting; nftables and an empty policy pass', () => {
    const pol = POLICY_CASES[0]?.policy;
    const why = policyBackendRefusal('iptables', pol, 'DATAPLANE_BACKEND (--backend)');
    assert.match(why ?? '', /not supported on the iptables back end/);
    assert.match(why ?? '', /demo\/web/);
    assert.match(why ?? '', /set DATAPLANE_BACKEND \(--backend\) to "nftables"/);
    assert.equal(policyBackendRefusal('nftables', pol, 'X'), undefined);
    assert.equal(policyBackendRefusal('iptables', { networks: [] }, 'X'), undefined);
    assert.equal(policyBackendRefusal('iptables', undefined, 'X'), undefined);
  });
  void test('a bad address, except or port makes its rule allow nothing (fail-closed), with a warning; a bad interface name reaches no rule', () => {
    const bad = (peers: PolicyRule['peers'], ports?: PolicyRule['ports']): PodPolicy => ({
      networks: [
        {
          network: NET1,
          interface: 'net1',
          ingress: { isolated: true, rules: [{ policy: 'demo/p', index: 0, ...(peers ? { peers } : {}), ...(ports ? { ports } : {}) }] },
          egress: { isolated: false, rules: [] },
          failures: [],
        },
      ],
    });
    for (const p of [
      bad({ addresses: ['10.0.0.300'], blocks: [] }),
      bad({ addresses: [], blocks: [{ cidr: '10.0.0.0/8', except: ['nonsense'] }] }),
      bad({ addresses: ['10.0.0.0/24'], blocks: [] }),
      bad(undefined, [{ protocol: 'TCP', from: 0, to: 70000 }]),
      bad(undefined, [{ protocol: 'ICMP' as 'TCP', from: 1, to: 2 }]),
    ]) {
      const out = renderPolicy(p);
      assert.equal(out?.warnings.length, 1, JSON.stringify(p));
      const chain = [...(out?.chains.values() ?? [])][0] ?? [];
      assert.equal(chain.filter((l) => l.endsWith(' accept') && !l.startsWith('ct ') && !l.startsWith('icmpv6 ')).length, 0);
      assert.match(chain[chain.length - 1] ?? '', /drop$/);
    }
    const evil = renderPolicy({ networks: [{ network: NET1, interface: 'net1" accept; #', ingress: { isolated: true, rules: [] }, egress: { isolated: false, rules: [] }, failures: [] }] });
    assert.equal(evil?.chains.size, 0);
    assert.match(evil?.warnings[0] ?? '', /not a kernel interface name/);
  });
});
