/**
 * MultiNetworkPolicy in the kernel: a partial change (hash sets changed by element, interval sets
 * refilled, chains rewritten) leaves the table a from-scratch write of the same policy makes, over
 * random policy sequences (the fake's property, test/unit/tracer/policy.test.ts, against nft
 * itself). One namespace is written incrementally, the other from scratch after every step.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createTopology, type Pod, type Topology } from '../harness/netns.js';
import { rng } from '../harness/property.js';
import { randomPolicy, withOtherPeers } from '../harness/tracer/policy-random.js';
import { nftListingLines } from './render-fixtures.js';
import { renderPolicy } from '../../src/dataplane/nftables/policy.js';
import { fullText, NFT_TABLE, planNft, renderNft, type NftRuleset } from '../../src/dataplane/nftables/render.js';

void describe('nftables: policy changes in the kernel equal a from-scratch write', () => {
  let topo: Topology;
  let inc: Pod;
  let scratch: Pod;
  before(async () => {
    topo = await createTopology();
    inc = await topo.addPod('inc');
    scratch = await topo.addPod('scratch');
  });
  after(async () => topo?.teardown());

  // Counter values aside: a stray packet (IPv6 multicast on the links) may count in one namespace.
  const listing = async (pod: Pod): Promise<string[]> =>
    nftListingLines((await topo.run(pod, ['nft', 'list', 'table', 'inet', NFT_TABLE])).stdout.replace(/^#.*$/gm, '').replace(/packets \d+ bytes \d+/g, ''));

  void test('partial write after every step = full write of that policy (2 seeds x 30 steps, every other one a peer change)', async () => {
    let elementChanges = 0;
    for (const seed of [21, 22]) {
      const r = rng(seed);
      let prev: NftRuleset = renderNft([]);
      let last = randomPolicy(r);
      await topo.run(inc, ['nft', 'delete', 'table', 'inet', NFT_TABLE], { allowFail: true });
      await topo.run(inc, ['nft', '-f', '-'], { input: fullText(prev) });
      for (let step = 0; step < 30; step += 1) {
        // Every other step a peer change alone (pods joining and leaving), else any policy.
        last = step % 2 === 1 ? withOtherPeers(last, r) : randomPolicy(r);
        const policy = renderPolicy(last);
        const next = policy === undefined ? renderNft([]) : { ...renderNft([]), policy };
        const where = `seed ${seed} step ${step}`;
        const plan = planNft(next, prev, false);
        if (/^(add|delete) element /m.test(plan.text)) elementChanges += 1;
        if (plan.text !== '') {
          const w = await topo.run(inc, ['nft', '-f', '-'], { input: plan.text, allowFail: true });
          assert.equal(w.code, 0, `${where}: ${w.stderr}\n${plan.text}`);
        }
        await topo.run(scratch, ['nft', 'delete', 'table', 'inet', NFT_TABLE], { allowFail: true });
        await topo.run(scratch, ['nft', '-f', '-'], { input: fullText(next) });
        assert.deepEqual(await listing(inc), await listing(scratch), where);
        prev = next;
      }
    }
    assert.ok(elementChanges >= 10, `element adds and deletes should be exercised (${elementChanges} steps had them)`);
  });
});
