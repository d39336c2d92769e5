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
import { render } from '../../src/dataplane/incremental.js';
import { cleanupText, fullText, partialText, planNft, renderNft, type NftRuleset } from '../../src/dataplane/nft/render.js';
import { compareTable, countElements, nftFailedLine, parseNftChains } from '../../src/dataplane/nft/backend.js';
import { probeNftables, probeText } from '../../src/dataplane/nft/probe.js';
import { createExec } from '../../src/dataplane/iptables.js';
import type { DesiredState } from '../../src/dataplane/model.js';
import { CLIENT_BLUE, SHAPE_STATES, ep, nftListingLines as normalise, sampleState, target } from './render-fixtures.js';

const golden = (name: string, actual: string): void => sharedGolden('nft', name, actual);
const nft = (state: DesiredState): NftRuleset => renderNft(render(state).resolution.targets);
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
  empty: { interfaces: [CLIENT_BLUE], targets: [] },
};

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
  });
  void test('one endpoint leaves one Service: one chain flushed and written whole as a block, nothing else named', () => {
    const s = sampleState();
    const changed = withTargets(
      s,
      s.targets.map((t) => (t.service === 'demo/web' && t.family === 4 ? { ...t, endpoints: t.endpoints.filter((e) => e.ip !== '192.168.101.5') } : t)),
    );
    const text = partialText(nft(changed), nft(s)).text;
    golden('sample-endpoint-removed.nft', text);
    // The one Service chain flushed and written whole (a block: two rules for the two remaining
    // endpoints); no `add rule` or element command, which would make nft fetch every chain and set.
    const commands = text.split('\n').filter((l) => l !== '' && !l.startsWith('\t') && l !== '}');
    assert.deepEqual(
      commands.map((l) => l.split(' ').slice(0, 2).join(' ')),
      ['flush chain', 'add chain'],
      text,
    );
    assert.equal(new Set(commands.map((l) => l.split(' ')[4])).size, 1, text);
    assert.equal(text.split('\n').filter((l) => l.startsWith('\t')).length, 2, text);
  });
  void test('nothing changed: no text; order of input does not matter', () => {
    const s = sampleState();
    assert.equal(partialText(nft(s), nft(s)).text, '');
    const shuffled = withTargets(s, [...s.targets].reverse().map((t) => ({ ...t, endpoints: [...t.endpoints].reverse() })));
    assert.equal(partialText(nft(shuffled), nft(s)).text, '');
  });
  void test('a cluster IP, protocol and port twice: the first keeps the map element', () => {
    const r = nft({ interfaces: [CLIENT_BLUE], targets: [target('demo/a', '10.96.2.1', 80, [ep('192.168.101.3', 80)]), target('demo/b', '10.96.2.1', 80, [ep('192.168.101.4', 80)])] });
    assert.equal(r.targets.size, 1);
    assert.match(fullText(r), /dnat ip to 192\.168\.101\.3:80/);
  });
});

void describe('nftables render: parsers', () => {
  void test('nft error line, chain listing, element count', () => {
    assert.equal(nftFailedLine('/dev/stdin:12:3-8: Error: syntax error, unexpected reject\n'), 12);
    assert.equal(nftFailedLine('Error: Could not process rule: No such file or directory\n'), undefined);
    assert.deepEqual([...parseNftChains('table inet x {\n\tchain a {\n\t\ttype nat hook output priority -100; policy accept;\n\t\tip daddr 1.2.3.4 accept\n\t}\n\tchain b {\n\t}\n}\n')], [
      ['a', 1],
      ['b', 0],
    ]);
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
    const a = withTargets(b, b.targets.map((t) => (t.portName === 'http' && t.family === 4 ? { ...t, endpoints: t.endpoints.slice(0, 2) } : t)));
    await load(fullText(nft(b)));
    const kept = [...(nft(b).targets.values())].find((t) => t.key.startsWith('10.96.1.10 . tcp'));
    const set = kept === undefined ? undefined : [...kept.sets.keys()][0];
    assert.ok(set !== undefined);
    await load(`add element inet multus_proxy ${set} { 192.168.1.7 }\n`);
    const text = partialText(nft(a), nft(b)).text;
    assert.doesNotMatch(text, /^add rule |^add element /m, text);
    await load(text);
    assert.equal(compareTable(nft(a), await listing()), undefined);
    assert.match((await topoOf().run(podOf(), ['nft', 'list', 'set', 'inet', 'multus_proxy', set])).stdout, /192\.168\.1\.7/, 'a kept affinity set keeps its clients');
  });
  void test('the start-up probe table (every rule shape) passes nft -c here and changes nothing; a refused text is reported in nft\'s words', async () => {
    const text = probeText();
    for (const shape of ['numgen random mod 2', 'flags dynamic,timeout', 'ip6 daddr', 'sctp', 'reject with tcp reset', 'type nat hook output']) assert.ok(text.includes(shape), `probe text lacks ${shape}`);
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
  void test('cleanup removes the table, and works when there is none', async () => {
    await load(cleanupText());
    await load(cleanupText());
    const r = await topoOf().run(podOf(), ['nft', 'list', 'tables'], { allowFail: true });
    assert.doesNotMatch(r.stdout, /multus_proxy/);
  });
});
