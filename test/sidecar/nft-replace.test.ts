/**
 * A whole nftables write over the tables of ours a namespace holds (a restarted sidecar, a full
 * resync), in place and in bounded transactions (src/dataplane/nftables/tuning/replace.ts).
 * Against the real kernel in namespaces this test creates and removes:
 *  - a restarted dataplane over another state's tables (ports gone, endpoints changed, affinity
 *    switched on and off, a different shard count, a chain and a set of ours that no state
 *    explains) leaves our tables listing the same, element for element, as the new state's whole
 *    text loaded into an empty namespace; a foreign table stays as it was;
 *  - it went through in place (no fallback to the one transaction) and in more than one chunk;
 *  - a table of ours the write cannot take in place (a set of another type under one of our
 *    names) falls back to the whole text, with a warning, and the tables are again the same.
 * And, pure: every chunk within the bound, every Service port once, the old dispatch rewritten
 * only after every chunk.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createDataplane, type Dataplane, type DataplaneOptions } from '../../src/dataplane/index.js';
import { sidecarDataplaneOptions } from '../../cmd/sidecar/dataplane-options.js';
import { createTopology, type Pod, type Topology } from '../harness/netns.js';
import { manyPortsState, nftListingLines, restartState } from './render-fixtures.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';
import { render } from '../../src/dataplane/core/incremental.js';
import { fullText, renderNft } from '../../src/dataplane/nftables/render.js';
import { shardCount } from '../../src/dataplane/nftables/tuning/shards.js';
import { listedObjects, planReplace, replaceChunkText, staleTexts } from '../../src/dataplane/nftables/tuning/replace.js';

const before1 = (pod: Pod): DesiredState => restartState(pod.net1, 40, false);
const after1 = (pod: Pod): DesiredState => restartState(pod.net1, 40, true);

const FOREIGN = 'table inet foreign {\n\tchain c {\n\t\ttype filter hook output priority 10; policy accept;\n\t\tip daddr 198.51.100.7 counter\n\t}\n}\n';
const PODS = ['replace', 'whole', 'fallback'] as const;

void describe('nftables whole write over our tables: in place, in bounded transactions', () => {
  let topo: Topology;
  const pods: Record<(typeof PODS)[number], Pod> = {} as never;
  const dps: Dataplane[] = [];
  before(async () => {
    topo = await createTopology();
    for (const name of PODS) pods[name] = await topo.addPod(name);
  });
  after(async () => {
    for (const d of dps) d.close();
    await topo.teardown();
  });

  const make = (pod: Pod, extra: Partial<DataplaneOptions> = {}): Dataplane => {
    const dp = createDataplane({ ...sidecarDataplaneOptions({ cleanup: false, iptablesBackend: 'auto', elementWriter: false }, 'nftables'), netns: pod.ns, ...extra });
    dps.push(dp);
    return dp;
  };
  const listing = async (pod: Pod): Promise<string[]> => nftListingLines((await topo.run(pod, ['nft', 'list', 'ruleset'])).stdout);
  /** The state's whole text in one `nft -f` into `pod`, beside the foreign table: what the write in place must equal. */
  const whole = async (pod: Pod, s: DesiredState, perShard: number): Promise<string[]> => {
    const targets = render(s).resolution.targets;
    await topo.run(pod, ['nft', 'flush', 'ruleset']);
    await topo.run(pod, ['nft', '-f', '-'], { input: FOREIGN + fullText(renderNft(targets, undefined, undefined, shardCount(targets.length, perShard))) });
    return listing(pod);
  };

  void test('a restart over another state, another shard count and leftovers of ours: the same tables as the new state written whole', async () => {
    const pod = pods.replace;
    await topo.run(pod, ['nft', '-f', '-'], { input: FOREIGN });
    const first = await make(pod, { nftPortsPerShard: 8 }).sync(before1(pod), { full: true });
    assert.equal(first.families[0]?.via, 'first-fill-text');
    // Leftovers of ours no state explains (an older version's chain and set).
    await topo.run(pod, ['nft', 'add chain inet multus_proxy MPX-SVC-STALETEST { ip daddr 198.51.100.9 drop; }']);
    await topo.run(pod, ['nft', 'add set inet multus_proxy MPX-AFF-STALETEST { type ipv4_addr; }']);
    const warnings: string[] = [];
    const logger = { debug: () => undefined, info: () => undefined, warn: (m: string) => warnings.push(m), error: () => undefined } as unknown as NonNullable<DataplaneOptions['logger']>;
    const r = await make(pod, { nftPortsPerShard: 4, logger }).sync(after1(pod), { full: true });
    assert.deepEqual(warnings, []);
    assert.equal(r.families[0]?.via, 'replace', 'the write fell back to the one transaction');
    const got = await listing(pod);
    assert.ok(!got.some((l) => l.includes('STALETEST')), 'a leftover of ours stayed');
    assert.ok(got.includes('ip daddr 198.51.100.7 counter packets 0 bytes 0'), 'the foreign table changed');
    assert.deepEqual(got, await whole(pods.whole, after1(pods.whole), 4));
    // And once more from there (the same state): nothing changes.
    const again = await make(pod, { nftPortsPerShard: 4 }).sync(after1(pod), { full: true });
    assert.equal(again.families[0]?.via, 'replace');
    assert.deepEqual(await listing(pod), got);
  });

  void test('a table of ours the write cannot take in place falls back to the whole text, with a warning', async () => {
    const pod = pods.fallback;
    await topo.run(pod, ['nft', '-f', '-'], { input: FOREIGN });
    await make(pod).sync(before1(pod), { full: true });
    // The dispatch map under our name, with another type: `add map` of ours cannot take it.
    await topo.run(pod, ['nft', '-f', '-'], {
      input: 'flush chain inet multus_proxy nat-output\ndelete map inet multus_proxy services-v6\nadd map inet multus_proxy services-v6 { type ipv4_addr : verdict; }\n',
    });
    const warnings: string[] = [];
    const logger = { debug: () => undefined, info: () => undefined, warn: (m: string) => warnings.push(m), error: () => undefined } as unknown as NonNullable<DataplaneOptions['logger']>;
    const r = await make(pod, { logger }).sync(after1(pod), { full: true });
    assert.equal(r.families[0]?.via, 'replace-whole');
    assert.equal(warnings.length, 1, warnings.join(' | '));
    assert.match(warnings[0] ?? '', /write in place over our tables failed, writing them whole in one transaction/);
    assert.deepEqual(await listing(pod), await whole(pods.whole, after1(pods.whole), 1000));
  });
});

void describe('nftables whole write over our tables: the plan (pure)', () => {
  const big = renderNft(render(manyPortsState(700, 10, '10.96.4')).resolution.targets);

  void test('chunks within the bound, every Service port once; the dispatch only in the finals', () => {
    const plan = planReplace(big, ['multus_proxy', 'multus_proxy-s1'], 2000);
    const r = plan.replace;
    assert.ok(r !== undefined);
    assert.ok(r.chunks.length >= 3, `${r.chunks.length} chunks`);
    for (const c of r.chunks) {
      const ranges = c.reduce((n, p) => n + [...p.target.maps.values()].reduce((k, m) => k + m.endpoints.length, 0) + p.target.rules.length + 1, 0);
      assert.ok(ranges <= 2000, `a chunk of ${ranges}`);
      assert.doesNotMatch(replaceChunkText(c), /services-v|no-endpoints|goto MPX-SVC/, 'a chunk touches the dispatch');
    }
    assert.deepEqual(
      r.chunks.flat().map((p) => p.target.chain),
      [...big.targets.keys()],
    );
    assert.deepEqual(r.staleTables, ['multus_proxy-s1'], 'the shard the write does not keep');
    assert.match(r.finals[0] ?? '', /^flush map inet multus_proxy services-v4$/m);
  });

  void test('what is stale: only names our kept tables hold beyond the write; chains flushed before any is deleted, sets after', () => {
    const chain = [...big.targets.keys()][0] ?? '';
    const listingText = [
      'table inet multus_proxy {',
      `\tchain ${chain} {`,
      '\t}',
      '\tchain MPX-SVC-OLD {',
      '\t}',
      '\tmap MPX-EPS-OLD {',
      '\t\ttypeof numgen random mod 4294967295 : ip daddr . tcp dport',
      '\t}',
      '\tcounter MPX-PC-OLD {',
      '\t}',
      '}',
      'table inet other {',
      '\tchain MPX-SVC-NOTOURS {',
      '\t}',
      '}',
      '',
    ].join('\n');
    assert.deepEqual(listedObjects(listingText).get('other'), [{ kind: 'chain', name: 'MPX-SVC-NOTOURS' }]);
    assert.deepEqual(staleTexts(listingText, big), [
      'flush chain inet multus_proxy MPX-SVC-OLD\n',
      'delete chain inet multus_proxy MPX-SVC-OLD\n',
      'delete map inet multus_proxy MPX-EPS-OLD\ndelete counter inet multus_proxy MPX-PC-OLD\n',
    ]);
  });
});
