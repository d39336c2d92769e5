/**
 * The nftables back end's rendering (src/dataplane/nft/render.ts): one golden file per rule shape
 * (test/golden/nft), and every golden text loaded by the real `nft` into a namespace this test
 * creates (full texts into an empty one, partial texts on top of the full text they follow, the
 * start-up probe table in check mode).
 * Regenerate with UPDATE_GOLDEN=1 (review the diff before committing).
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { golden as sharedGolden } from '../harness/golden.js';
import { useNftNamespace } from '../harness/nft-namespace.js';
import { render } from '../../src/dataplane/core/incremental.js';
import { cleanupText, fullText, mapRanges, MAX_ENDPOINT_MAPS, partialText, planNft, renderNft, sidecarPickLayout, tableParts, type NftRuleset } from '../../src/dataplane/nftables/render.js';
import { compareTable, countElements, createNftBackend, nftFailedLine, parseNftChains, splitTables } from '../../src/dataplane/nftables/backend.js';
import { PORTS_PER_SHARD, shardCount, shardOf, shardTablesIn } from '../../src/dataplane/nftables/tuning/shards.js';
import { probeNftables, probeText } from '../../src/dataplane/nftables/probe.js';
import { createExec } from '../../src/dataplane/tuning/spare-exec.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';
import { CLIENT_BLUE, SHAPE_STATES, ep, nftListingLines as normalise, sampleState, target } from './render-fixtures.js';

const golden = (name: string, actual: string): void => sharedGolden('nft', name, actual);
const nft = (state: DesiredState): NftRuleset => renderNft(render(state).resolution.targets);
/** The same over `shards` tables (shards.ts; the default keeps one below PORTS_PER_SHARD Service ports). */
const sharded = (state: DesiredState, shards: number): NftRuleset => renderNft(render(state).resolution.targets, undefined, 'map', shards);
/** The sample over 4 tables: 3, 3, 1 and 0 Service ports (the last shard empty). */
const SHARDS = 4;
const withTargets = (s: DesiredState, targets: DesiredState['targets']): DesiredState => ({ ...s, targets });

const eps = (port: number) => [ep('192.168.101.3', port), ep('192.168.101.4', port), ep('192.168.101.5', port)];

/** Each shape: its state; full text golden `<name>.nft`. */
const SHAPES: Record<string, DesiredState> = {
  sample: sampleState(),
  'shape-affinity-ports': {
    interfaces: [CLIENT_BLUE],
    targets: [
      target('demo/sticky', '10.96.1.10', 80, eps(8080), { portName: 'http', affinityTimeoutSeconds: 600 }),
      target('demo/sticky', '10.96.1.10', 53, eps(5353), { portName: 'dns', protocol: 'UDP', affinityTimeoutSeconds: 600 }),
      target('demo/sticky6', 'fd00:10:96::10a', 80, [ep('fd00:101::3', 8080), ep('fd00:101::4', 8080)], { portName: 'http', affinityTimeoutSeconds: 10800 }),
    ],
  },
  'shape-dual-stack': SHAPE_STATES['shape-dual-stack'],
  'shape-sctp': SHAPE_STATES['shape-sctp'],
  'shape-terminating-only': SHAPE_STATES['shape-terminating-only'],
  'shape-networks': SHAPE_STATES['shape-networks'],
  'shape-load-balancer': SHAPE_STATES['shape-load-balancer'],
  'shape-endpoint-maps': endpointMapsState(),
  empty: { interfaces: [CLIENT_BLUE], targets: [] },
};

/** Every family and protocol with an endpoint map (no affinity), 1 to 3 endpoints. */
function endpointMapsState(): DesiredState {
  const v6 = (n: number, port: number) => [ep('fd00:101::3', port), ep('fd00:101::4', port), ep('fd00:101::5', port)].slice(0, n);
  return {
    interfaces: [CLIENT_BLUE],
    targets: [
      target('demo/m4t', '10.96.3.1', 80, eps(8080)),
      target('demo/m4u', '10.96.3.2', 53, eps(5353).slice(0, 2), { protocol: 'UDP' }),
      target('demo/m4s', '10.96.3.3', 9999, eps(9999).slice(0, 1), { protocol: 'SCTP' }),
      target('demo/m6t', 'fd00:10:96::3:1', 80, v6(1, 8080)),
      target('demo/m6u', 'fd00:10:96::3:2', 53, v6(3, 5353), { protocol: 'UDP' }),
      target('demo/m6s', 'fd00:10:96::3:3', 9999, v6(2, 9999), { protocol: 'SCTP' }),
    ],
  };
}

/** The same Services with other endpoints (N >= 1 before and after): an endpoint-only change of each. */
function endpointMapsMoved(): DesiredState {
  const s = endpointMapsState();
  return withTargets(
    s,
    s.targets.map((t, i) => {
      const added = ep(t.family === 4 ? '192.168.101.9' : 'fd00:101::9', t.endpoints[0]?.port ?? 1);
      return { ...t, endpoints: i % 2 === 0 ? [...t.endpoints.slice(1), added] : t.endpoints.length > 1 ? t.endpoints.slice(0, 1) : [added] };
    }),
  );
}

/** The `map MPX-EPS-...` blocks of a text or listing, as text (nft wraps long element lines: unwrapped). */
const endpointMapBlocks = (text: string): string[] => [...text.matchAll(/^\tmap MPX-EPS-.*?^\t\}$/gms)].map((m) => m[0].replace(/,\n\s+/g, ', ')).sort();

/** The partial sync of the iptables golden of the same name: a Service added, one removed, one endpoint added, one Service lost its last endpoint, one gained affinity. */
function partialCase(): { before: DesiredState; after: DesiredState } {
  const before = sampleState();
  const after = withTargets(before, [
    ...before.targets
      .filter((t) => t.service !== 'demo/sig')
      .map((t) =>
        t.service === 'demo/web' && t.family === 4
          ? { ...t, endpoints: [...t.endpoints, ep('192.168.101.9', 8080)], affinityTimeoutSeconds: 300 }
          : t.service === 'demo/dns'
            ? { ...t, endpoints: [] }
            : t,
      ),
    target('demo/new', '10.96.0.60', 8080, [ep('192.168.101.3', 8080)]),
  ]);
  return { before, after };
}

void describe('nftables render: golden files per rule shape', () => {
  for (const [name, state] of Object.entries(SHAPES)) {
    void test(`${name}: the whole table`, () => golden(`${name}.nft`, fullText(nft(state))));
  }
  void test('partial sync: only the changed Service ports, map and set elements by difference', () => {
    const { before, after } = partialCase();
    const plan = planNft(nft(after), nft(before), false);
    assert.equal(plan.full, false);
    golden('shape-partial-sync.nft', plan.text);
    golden('shape-partial-sync-back.nft', partialText(nft(before), nft(after)).text);
    // No element command (nft would fetch every interval map's elements first): additions inside
    // `add map|set { elements }`, a map that loses an element flushed and written whole.
    for (const text of [plan.text, partialText(nft(before), nft(after)).text]) assert.doesNotMatch(text, /^(add|delete) element /m, text);
    assert.match(plan.text, /^flush map inet multus_proxy services-v4\nadd map inet multus_proxy services-v4 \{ type ipv4_addr \. inet_proto \. inet_service : verdict; elements = \{ /m);
  });
  void test('one endpoint leaves one Service: its endpoint map refilled (flush + add map with elements), no chain written, no element command', () => {
    const s = sampleState();
    const changed = withTargets(
      s,
      s.targets.map((t) => (t.service === 'demo/web' && t.family === 4 ? { ...t, endpoints: t.endpoints.filter((e) => e.ip !== '192.168.101.5') } : t)),
    );
    const plan = partialText(nft(changed), nft(s));
    const text = plan.text;
    golden('sample-endpoint-removed.nft', text);
    // The one Service's endpoint map flushed and refilled with two halves; no rule, so the kernel
    // has nothing to validate at commit (docs/decisions/0024-nft-endpoint-maps.md).
    const commands = text.split('\n').filter((l) => l !== '');
    assert.deepEqual(
      commands.map((l) => l.split(' ').slice(0, 2).join(' ')),
      ['flush map', 'add map'],
      text,
    );
    assert.equal(new Set(commands.map((l) => l.split(' ')[4])).size, 1, text);
    assert.match(text, /; flags interval; elements = \{ 0-2147483646 : 192\.168\.101\.3 \. 8080, 2147483647-4294967294 : 192\.168\.101\.4 \. 8080 \}; \}\n$/);
    assert.equal(plan.onlyReplacements, true);
    assert.deepEqual(
      plan.replacedMaps.map((m) => [m.family, m.ranges.map((r) => `${r.ip}:${r.port}`)]),
      [[4, ['192.168.101.3:8080', '192.168.101.4:8080']]],
    );
  });
  void test('endpoint-only changes of every family and protocol: only map refills, one golden', () => {
    const plan = partialText(nft(endpointMapsMoved()), nft(endpointMapsState()));
    golden('shape-endpoint-maps-moved.nft', plan.text);
    assert.equal(plan.onlyReplacements, true, plan.text);
    assert.equal(plan.replacedMaps.length, 6);
    assert.doesNotMatch(plan.text, /chain|rule/);
  });
  void test('an endpoint map beside other changes: the plan is not only replacements', () => {
    const s = endpointMapsState();
    const moved = endpointMapsMoved();
    const plan = partialText(nft(withTargets(moved, [...moved.targets, target('demo/new', '10.96.3.9', 80, eps(80))])), nft(s));
    assert.equal(plan.onlyReplacements, false);
    assert.equal(plan.replacedMaps.length, 7, "the new Service's map is filled too");
    const down = partialText(
      nft(
        withTargets(
          s,
          s.targets.map((t, i) => (i === 0 ? { ...t, endpoints: [] } : t)),
        ),
      ),
      nft(s),
    );
    assert.equal(down.onlyReplacements, false, 'losing the last endpoint rewrites the chain');
    assert.match(down.text, /^flush chain .*\n[^]*^delete map /m);
  });
  void test('nothing changed: no text; order of input does not matter', () => {
    const s = sampleState();
    assert.equal(partialText(nft(s), nft(s)).text, '');
    const shuffled = withTargets(
      s,
      [...s.targets].reverse().map((t) => ({ ...t, endpoints: [...t.endpoints].reverse() })),
    );
    assert.equal(partialText(nft(shuffled), nft(s)).text, '');
  });
  void test(`endpoint maps up to ${MAX_ENDPOINT_MAPS.toLocaleString('en')} Service ports, one DNAT rule per endpoint beyond (the kernel loads N named maps in O(N²))`, () => {
    assert.deepEqual(
      [0, 1, MAX_ENDPOINT_MAPS, MAX_ENDPOINT_MAPS + 1].map((n) => sidecarPickLayout(n)),
      ['map', 'map', 'map', 'rules'],
    );
    const ports = (n: number): DesiredState => ({
      interfaces: [CLIENT_BLUE],
      targets: Array.from({ length: n }, (_, i) => target(`demo/s${i}`, `10.${96 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`, 80, [ep('192.168.101.3', 8080), ep('192.168.101.4', 8080)])),
    });
    const at = nft(ports(MAX_ENDPOINT_MAPS));
    const over = nft(ports(MAX_ENDPOINT_MAPS + 1));
    assert.equal(at.targets.size, MAX_ENDPOINT_MAPS);
    assert.equal([...at.targets.values()].filter((t) => t.maps.size === 1).length, MAX_ENDPOINT_MAPS, 'every port at the bound picks through its map');
    assert.equal([...over.targets.values()].filter((t) => t.maps.size > 0).length, 0, 'no map past the bound');
    const last = [...over.targets.values()].at(-1);
    assert.deepEqual(last?.rules, ['numgen random mod 2 0 meta l4proto tcp dnat ip to 192.168.101.3:8080', 'meta l4proto tcp dnat ip to 192.168.101.4:8080']);
  });
  void test(`shard tables: ${SHARDS} for the sample, each with its nat-output hook and dispatch maps; the reject part only in the root`, () => {
    const r = sharded(sampleState(), SHARDS);
    const text = fullText(r);
    golden('shape-shards.nft', text);
    assert.deepEqual(
      [...text.matchAll(/^table inet (\S+) \{$/gm)].map((m) => m[1]),
      ['multus_proxy', 'multus_proxy-s1', 'multus_proxy-s2', 'multus_proxy-s3'],
    );
    assert.equal(text.match(/type nat hook output priority -100;/g)?.length, SHARDS, 'one nat hook per table');
    assert.equal(text.match(/type filter hook output/g)?.length, 1, 'one filter hook, in the root');
    assert.deepEqual(
      tableParts(r).map((p) => p.targets.length),
      [3, 3, 1, 0],
    );
    // Each Service port's chain, map and dispatch element live in its shard's table.
    for (const [i, part] of tableParts(r).entries()) for (const t of part.targets) assert.equal(shardOf(t.chain, SHARDS), i);
    // A partial change names each Service port's own table; a Service that loses its last endpoint
    // puts its no-endpoints element into the root's set whatever its shard.
    const { before, after } = partialCase();
    const plan = planNft(sharded(after, SHARDS), sharded(before, SHARDS), false);
    assert.equal(plan.full, false);
    golden('shape-shards-partial.nft', plan.text);
    assert.match(plan.text, /^add set inet multus_proxy no-endpoints-v4 \{/m);
    // Fewer shards: a full text that also removes the tables no longer used (and prev's).
    const fewer = planNft(sharded(sampleState(), 2), r, false);
    assert.equal(fewer.full, true);
    golden('shape-shards-fewer.nft', fewer.text);
    assert.match(fewer.text, /^add table inet multus_proxy-s2\ndelete table inet multus_proxy-s2\nadd table inet multus_proxy-s3\ndelete table inet multus_proxy-s3\n/);
    assert.doesNotMatch(fewer.text, /^table inet multus_proxy-s[23] \{/m);
    // Tables a restarted sidecar found (read back) go too.
    assert.match(planNft(r, undefined, true, ['multus_proxy', 'multus_proxy-s9']).text, /^add table inet multus_proxy-s9\ndelete table inet multus_proxy-s9\n/);
  });
  void test(`the shard count: one table up to ${PORTS_PER_SHARD.toLocaleString('en')} Service ports, then powers of two of at most that many on average`, () => {
    assert.deepEqual(
      [0, 1, 1000, 1001, 2000, 2001, 4000, 8001, 10000, 30000].map((n) => shardCount(n)),
      [1, 1, 1, 2, 2, 4, 4, 16, 16, 32],
    );
    assert.deepEqual(
      [1, 2, 3, 5].map((n) => shardCount(n, 1)),
      [1, 2, 4, 8],
    );
    assert.equal(shardCount(1e6, Infinity), 1, 'Infinity keeps one table');
    // Spread: 10,000 chain names over 16 tables, each within 25 % of the mean.
    const counts = new Array<number>(16).fill(0);
    for (let i = 0; i < 10000; i++) {
      const k = shardOf(`MPX-SVC-${i.toString(36).toUpperCase().padStart(16, 'A')}`, 16);
      counts[k] = (counts[k] ?? 0) + 1;
    }
    for (const c of counts) assert.ok(Math.abs(c - 625) < 625 * 0.25, `${counts.join(' ')}`);
    // Only the root and its shards are ours, not the node agent's table.
    assert.deepEqual(
      shardTablesIn('table inet multus_proxy\ntable inet multus_proxy_node\ntable inet multus_proxy-s3\ntable ip multus_proxy-s4\ntable inet multus_proxy-sx\n', 'inet', 'multus_proxy'),
      ['multus_proxy', 'multus_proxy-s3'],
    );
  });
  void test('a cluster IP, protocol and port twice: the first keeps the map element', () => {
    const r = nft({ interfaces: [CLIENT_BLUE], targets: [target('demo/a', '10.96.2.1', 80, [ep('192.168.101.3', 80)]), target('demo/b', '10.96.2.1', 80, [ep('192.168.101.4', 80)])] });
    assert.equal(r.targets.size, 1);
    assert.match(fullText(r), /elements = \{ 0-4294967294 : 192\.168\.101\.3 \. 80 \}/);
  });
});

void describe('nftables render: parsers', () => {
  void test('nft error line, chain listing, element count', () => {
    assert.equal(nftFailedLine('/dev/stdin:12:3-8: Error: syntax error, unexpected reject\n'), 12);
    assert.equal(nftFailedLine('Error: Could not process rule: No such file or directory\n'), undefined);
    assert.deepEqual(
      [...parseNftChains('table inet x {\n\tchain a {\n\t\ttype nat hook output priority -100; policy accept;\n\t\tip daddr 1.2.3.4 accept\n\t}\n\tchain b {\n\t}\n}\n')],
      [
        ['a', 1],
        ['b', 0],
      ],
    );
    assert.equal(countElements('map m {\n\ttype ipv4_addr : verdict\n\telements = { 1.2.3.4 : goto a,\n\t\t5.6.7.8 : goto b }\n}'), 2);
    assert.equal(countElements('set s {\n\ttype ipv4_addr\n}'), 0);
  });
});

void describe('nftables render: the real nft loads every golden text', () => {
  const { load, listing, topo: topoOf, pod: podOf } = useNftNamespace('multus_proxy');

  void test('each full text loads (twice: the second replaces the first), and the listing matches what was written', async () => {
    for (const state of Object.values(SHAPES)) {
      const r = nft(state);
      await load(fullText(r));
      await load(fullText(r));
      assert.equal(compareTable(r, await listing()), undefined);
    }
  });
  void test('partial texts apply on top of the state they follow, and the table then equals the full text of the new state', async () => {
    const { before: b, after: a } = partialCase();
    await load(fullText(nft(b)));
    await load(partialText(nft(a), nft(b)).text);
    assert.equal(compareTable(nft(a), await listing()), undefined);
    const afterPartial = await listing();
    await load(fullText(nft(a)));
    assert.deepEqual(normalise(afterPartial), normalise(await listing()), 'partial and full give the same table');
    await load(partialText(nft(b), nft(a)).text);
    assert.equal(compareTable(nft(b), await listing()), undefined);
  });
  void test('an affinity Service loses an endpoint: its chains name sets that exist already, and the kept sets keep their clients', async () => {
    const b = SHAPES['shape-affinity-ports'];
    assert.ok(b !== undefined);
    const a = withTargets(
      b,
      b.targets.map((t) => (t.portName === 'http' && t.family === 4 ? { ...t, endpoints: t.endpoints.slice(0, 2) } : t)),
    );
    await load(fullText(nft(b)));
    const kept = [...nft(b).targets.values()].find((t) => t.key.startsWith('10.96.1.10 . tcp'));
    const set = kept === undefined ? undefined : [...kept.sets.keys()][0];
    assert.ok(set !== undefined);
    await load(`add element inet multus_proxy ${set} { 192.168.1.7 }\n`);
    const text = partialText(nft(a), nft(b)).text;
    assert.doesNotMatch(text, /^add rule |^add element /m, text);
    await load(text);
    assert.equal(compareTable(nft(a), await listing()), undefined);
    assert.match((await topoOf().run(podOf(), ['nft', 'list', 'set', 'inet', 'multus_proxy', set])).stdout, /192\.168\.1\.7/, 'a kept affinity set keeps its clients');
  });
  void test("the start-up probe table (every rule shape) passes nft -c here and changes nothing; a refused text is reported in nft's words", async () => {
    const text = probeText();
    for (const shape of ['numgen random mod 2', 'map @MPX-EPS-', 'flags dynamic,timeout', 'ip6 daddr', 'sctp', 'reject with tcp reset', 'type nat hook output'])
      assert.ok(text.includes(shape), `probe text lacks ${shape}`);
    const exec = createExec(podOf().ns);
    // The ruleset as listed, without the affinity entries' ticking expiry.
    const ruleset = async (): Promise<string> => (await topoOf().run(podOf(), ['nft', 'list', 'ruleset'])).stdout.replace(/ expires \S+/g, '');
    const before = await ruleset();
    assert.equal(await probeNftables(exec), undefined);
    assert.equal(await ruleset(), before, 'check mode changed the ruleset');
    const bad = await probeNftables(exec, 'table inet multus_proxy {\n\tchain c {\n\t\ttype nat hook output priority -100;\n\t\tmeta l4proto tcp dnat ip to 10.0.0.1:99999\n\t}\n}\n');
    assert.match(bad ?? '', /nft -c -f of the probe table failed \(exit 1\): .*Error/);
    exec.close();
  });
  void test('nft lists every endpoint map back exactly as rendered (IPv4, IPv6; TCP, UDP, SCTP)', async () => {
    const r = nft(endpointMapsState());
    const text = fullText(r);
    await load(text);
    const listed = endpointMapBlocks(await listing());
    assert.equal(listed.length, 6);
    assert.deepEqual(listed, endpointMapBlocks(text));
  });
  void test("endpoint-only changes load as refills, and the table then equals the new state's full text", async () => {
    const b = nft(endpointMapsState());
    const a = nft(endpointMapsMoved());
    await load(fullText(b));
    await load(partialText(a, b).text);
    assert.equal(compareTable(a, await listing()), undefined);
    const afterPartial = await listing();
    await load(fullText(a));
    assert.deepEqual(normalise(afterPartial), normalise(await listing()));
  });
  void test('drift: an endpoint map that lost an element, was flushed, or is missing is reported', async () => {
    const r = nft(endpointMapsState());
    const [name, m] = [...[...r.targets.values()].flatMap((t) => [...t.maps])].find(([, x]) => x.endpoints.length === 3) ?? [];
    assert.ok(name !== undefined && m !== undefined);
    await load(fullText(r));
    const first = mapRanges(m)[0];
    assert.ok(first !== undefined);
    await load(`delete element inet multus_proxy ${name} { ${first.from}-${first.to} }\n`);
    assert.equal(compareTable(r, await listing()), `nftables ${name}: 2 elements, 3 written`);
    await load(`flush map inet multus_proxy ${name}\n`);
    assert.equal(compareTable(r, await listing()), `nftables ${name}: 0 elements, 3 written`);
    const chain = [...r.targets.values()].find((t) => t.maps.has(name))?.chain ?? '';
    await load(`flush chain inet multus_proxy ${chain}\ndelete map inet multus_proxy ${name}\n`);
    assert.match(compareTable(r, await listing()) ?? '', new RegExp(`${chain}: 0 rules, 1 written|${name}: missing`));
  });
  void test('shard tables load, change partially to what a full text gives, and shrink; the back end finds drift in a shard and removes every table', async () => {
    const ruleset = async (): Promise<string> => (await topoOf().run(podOf(), ['nft', 'list', 'ruleset'])).stdout;
    /** Each table's normalised lines under its name (sorted lines alone would not see a chain in the wrong table). */
    const byTable = (l: string): string[] => [...splitTables(l)].flatMap(([name, text]) => normalise(text).map((x) => `${name}: ${x}`)).sort();
    const tables = async (): Promise<string[]> => shardTablesIn((await topoOf().run(podOf(), ['nft', 'list', 'tables'])).stdout, 'inet', 'multus_proxy').sort();
    const { before: b, after: a } = partialCase();
    await load(fullText(sharded(b, SHARDS)));
    await load(fullText(sharded(b, SHARDS)));
    assert.equal(compareTable(sharded(b, SHARDS), await ruleset()), undefined);
    await load(partialText(sharded(a, SHARDS), sharded(b, SHARDS)).text);
    assert.equal(compareTable(sharded(a, SHARDS), await ruleset()), undefined);
    const afterPartial = byTable(await ruleset());
    await load(fullText(sharded(a, SHARDS)));
    assert.deepEqual(afterPartial, byTable(await ruleset()), 'partial and full give the same tables');
    await load(planNft(sharded(a, 2), sharded(a, SHARDS), false).text);
    assert.deepEqual(await tables(), ['multus_proxy', 'multus_proxy-s1']);
    assert.equal(compareTable(sharded(a, 2), await ruleset()), undefined);
    // The back end over shard tables of 2 Service ports: the sample's 7 ports take 4 tables.
    const exec = createExec(podOf().ns);
    try {
      const be = createNftBackend(exec, undefined, { portsPerShard: 2 });
      const r = be.rules(render(sampleState()));
      await be.write(be.plan(r, undefined, await be.read(undefined), true), r);
      assert.deepEqual(await tables(), ['multus_proxy', 'multus_proxy-s1', 'multus_proxy-s2', 'multus_proxy-s3']);
      assert.equal(await be.drift(r, true), undefined);
      // A table of ours that was not written (as more shards would leave), then a flushed shard hook.
      await load('table inet multus_proxy-s7 {\n}\n');
      assert.equal(await be.drift(r, true), 'nftables: table multus_proxy-s7 of ours was not written');
      await load('delete table inet multus_proxy-s7\nflush chain inet multus_proxy-s2 nat-output\n');
      assert.equal(await be.drift(r, false), 'nftables nat-output (multus_proxy-s2): 0 rules, 2 written');
      assert.equal((await be.cleanup()).failures.length, 0);
      assert.deepEqual(await tables(), [], 'every table of ours removed');
    } finally {
      exec.close();
    }
  });
  void test('cleanup removes the table, and works when there is none', async () => {
    await load(cleanupText());
    await load(cleanupText());
    const r = await topoOf().run(podOf(), ['nft', 'list', 'tables'], { allowFail: true });
    assert.doesNotMatch(r.stdout, /multus_proxy/);
  });
});
