/**
 * Every rule shape of the node agent's golden files loads into a real kernel: the restore text of
 * SAMPLE (NodePort, cluster IPs for the node) and LB_SAMPLE (every LoadBalancer ingress-IP shape:
 * Cluster, Local, DROP for endpoints only elsewhere, source ranges with and without endpoints,
 * ranges admitting nobody, UDP, SCTP, IPv6) is applied with iptables-nft-restore /
 * ip6tables-nft-restore in a namespace the test creates, twice (the second a full sync over the
 * first), and iptables-save then lists every chain rendered. A rule the kernel refuses (as
 * `--reject-with tcp-reset` without `-p tcp` was) fails here, not on a node.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createTopology, type Node, type Topology } from '../harness/netns.js';
import { NOTHING_EXISTING, parseExisting, planRestore } from '../../src/dataplane/iptables/restore.js';
import { NODE_LAYOUT, type NodeState } from '../../cmd/node-agent/rules.js';
import { renderNode } from '../../cmd/node-agent/stages.js';
import { LB_SAMPLE, SAMPLE } from '../unit/node-agent/node-fixtures.js';

void describe('node agent rules: the real iptables loads every golden shape', () => {
  let topo: Topology;
  let node: Node;
  before(async () => {
    topo = await createTopology();
    node = await topo.addNode('node');
  });
  after(async () => topo?.teardown());

  for (const [name, state] of [
    ['SAMPLE', SAMPLE],
    ['LB_SAMPLE', LB_SAMPLE],
  ] as const satisfies readonly (readonly [string, NodeState])[]) {
    void test(`${name}: both families load, twice, and every chain is there`, async () => {
      const r = renderNode(state).iptables;
      assert.ok(r !== undefined, 'an iptables render carries its rulesets');
      for (const [family, rules, restore, save] of [
        ['v4', r.v4, 'iptables-nft-restore', 'iptables-nft-save'],
        ['v6', r.v6, 'ip6tables-nft-restore', 'ip6tables-nft-save'],
      ] as const) {
        for (const round of [1, 2]) {
          const existing = round === 1 ? NOTHING_EXISTING : parseExisting((await topo.run(node, [save])).stdout, NODE_LAYOUT);
          const text = planRestore(rules, undefined, existing, true, NODE_LAYOUT).text;
          const res = await topo.run(node, [restore, '--noflush'], { input: text, allowFail: true });
          assert.equal(res.code, 0, `${name} ${family} round ${round}: ${res.stderr}\n${text}`);
        }
        const listed = (await topo.run(node, [save])).stdout;
        for (const table of ['nat', 'filter'] as const) for (const chain of rules[table].keys()) assert.ok(listed.includes(`:${chain} `), `${name} ${family}: ${table} ${chain} missing`);
      }
    });
  }
});
