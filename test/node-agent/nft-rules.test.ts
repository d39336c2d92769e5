/**
 * The node agent's nftables table (cmd/node-agent/nft-rules.ts): golden files for every rule shape
 * (test/golden/nft-node: NodePort Cluster and Local, a node without local endpoints, no endpoints,
 * UDP with affinity, IPv6, the node's cluster-IP access, and every LoadBalancer shape: Cluster,
 * Local, endpoints only elsewhere, source ranges with and without endpoints, none admitted), a
 * partial text for an endpoint change and for a change of the node's networks, and each one loaded
 * by the real `nft` into a namespace this test creates, the partial result equal to the full one.
 * The start-up probe table passes `nft -c` there. UPDATE_GOLDEN=1 rewrites the golden files.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { golden as goldenIn } from '../harness/golden.js';
import { useNftNamespace } from '../harness/nft-namespace.js';
import { fullText, partialText, type NftRuleset } from '../../src/dataplane/nftables/render.js';
import { compareTable } from '../../src/dataplane/nftables/backend.js';
import { probeNftables } from '../../src/dataplane/nftables/probe.js';
import { createExec } from '../../src/dataplane/tuning/spare-exec.js';
import { type NodeState } from '../../cmd/node-agent/rules.js';
import { renderNode } from '../../cmd/node-agent/stages.js';
import { nodeProbeText } from '../../cmd/node-agent/nft-probe.js';
import { LB_SAMPLE, SAMPLE } from '../unit/node-agent/node-fixtures.js';
import { nftListingLines as normalise } from '../sidecar/render-fixtures.js';

const golden = (name: string, text: string): void => goldenIn('nft-node', name, text);
const nft = (s: NodeState): NftRuleset => {
  const t = renderNode(s, undefined, { nft: true }).nft;
  assert.ok(t !== undefined);
  return t;
};

/** SAMPLE with one endpoint of demo/web gone (its cluster IP, both node ports). */
const endpointGone: NodeState = {
  ...SAMPLE,
  clusterTargets: SAMPLE.clusterTargets.map((t) => (t.service === 'demo/web' && t.family === 4 ? { ...t, endpoints: t.endpoints.slice(0, 2) } : t)),
  nodePorts: SAMPLE.nodePorts.map((p) => (p.base.service === 'demo/web' && p.base.family === 4 ? { ...p, base: { ...p.base, endpoints: p.base.endpoints.slice(0, 2) } } : p)),
};
/** SAMPLE on a node whose interface is renamed (the forward accepts change; every frontend is the same). */
const renamed: NodeState = { ...SAMPLE, networks: SAMPLE.networks.map((n) => ({ ...n, interface: 'mpxhrenamed' })) };

void describe('node agent nftables table: golden files per rule shape', () => {
  void test("a fresh node: NodePorts, the node's cluster-IP access, IPv6, affinity, no endpoints", () => golden('sample.nft', fullText(nft(SAMPLE))));
  void test('every LoadBalancer shape', () => golden('load-balancer.nft', fullText(nft(LB_SAMPLE))));
  void test("partial: one endpoint leaves (only the chains that name it), and the node's interface renamed (only the forward chain)", () => {
    const gone = partialText(nft(endpointGone), nft(SAMPLE));
    golden('sample-endpoint-removed.nft', gone.text);
    assert.doesNotMatch(gone.text, /element|filter-forward|nat-postrouting/, gone.text);
    // The node agent picks by rules, never by interval maps (render.ts, PickLayout: it shares the host's namespace).
    assert.doesNotMatch(fullText(nft(SAMPLE)) + fullText(nft(LB_SAMPLE)), /MPX-EPS-|flags interval/);
    const iface = partialText(nft(renamed), nft(SAMPLE));
    golden('sample-renamed.nft', iface.text);
    assert.deepEqual(iface.changedChains, ['filter-forward']);
  });
  void test('Cluster marks before the DNAT, Local does not; empty and dropped ports have no DNAT', () => {
    const text = fullText(nft(LB_SAMPLE));
    const chainOf = (name: string): string => text.slice(text.indexOf(`chain ${name} {`), text.indexOf('}', text.indexOf(`chain ${name} {`)));
    const t = nft(LB_SAMPLE);
    const local = [...t.targets.values()].find((x) => x.key === '192.168.101.241 . tcp . 80');
    const cluster = [...t.targets.values()].find((x) => x.key === '192.168.101.240 . tcp . 80');
    assert.ok(local !== undefined && cluster !== undefined);
    assert.match(chainOf(cluster.chain), /meta mark set meta mark \| 0x2000\n\t\tnumgen/);
    assert.doesNotMatch(chainOf(local.chain), /mark/);
    const dropped = [...t.targets.values()].find((x) => x.key === '192.168.101.242 . tcp . 80');
    assert.deepEqual(dropped?.rules, []);
    assert.deepEqual(
      dropped?.elements.map((e) => e.set),
      ['frontends-v4', 'drop-v4'],
    );
  });
});

void describe('node agent nftables table: the real nft loads every text', () => {
  const { load, listing, pod } = useNftNamespace('multus_proxy_node');

  void test('each full text loads (twice), and the listing matches what was written', async () => {
    for (const s of [SAMPLE, LB_SAMPLE]) {
      await load(fullText(nft(s)));
      await load(fullText(nft(s)));
      assert.equal(compareTable(nft(s), await listing()), undefined);
    }
  });
  void test('partial texts apply on top of the state they follow, and the table then equals the full text of the new state', async () => {
    for (const [from, to] of [
      [SAMPLE, endpointGone],
      [endpointGone, SAMPLE],
      [SAMPLE, renamed],
      [SAMPLE, LB_SAMPLE],
      [LB_SAMPLE, SAMPLE],
    ] as const) {
      await load(fullText(nft(from)));
      await load(partialText(nft(to), nft(from)).text);
      assert.equal(compareTable(nft(to), await listing()), undefined);
      const afterPartial = await listing();
      await load(fullText(nft(to)));
      assert.deepEqual(normalise(afterPartial), normalise(await listing()), 'partial and full give the same table');
    }
  });
  void test("the node agent's start-up probe table passes nft -c and changes nothing", async () => {
    const exec = createExec(pod().ns);
    const before = await listing();
    assert.equal(await probeNftables(exec, nodeProbeText()), undefined);
    assert.equal(await listing(), before);
    exec.close();
  });
});
