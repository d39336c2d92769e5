/**
 * The packet tracer against the kernel for the node agent: the node cases
 * (test/harness/tracer/node-cases.ts) on two nodes made as the node agent's netns test makes them
 * (macvlan pods a on node1 and b on node2, an external client and an outsider on the segment,
 * ingress IPs announced by a neighbour entry as MetalLB's L2 mode does), each probe answered by
 * real connections (which backends, whether they saw the client's address or the node's, or
 * refused, or nothing) and by the tracer over the same rules. They must agree, and say what the
 * row expects. Both back ends.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createTopology, httpRequests, startBackend, udpRequests, type Node, type Pod, type Reply, type Topology } from '../harness/netns.js';
import type { Dataplane } from '../../src/dataplane/index.js';
import { hostInterfaceFor } from '../../cmd/node-agent/host-interface.js';
import { createHostInterfaces, createNodeDataplane } from '../../cmd/node-agent/dataplane.js';
import { FakeNode, type NodeState } from '../harness/tracer/node.js';
import { HTTP, NET, NODES, NODE_CASES, UDP, nodeExpected, nodeObservation, nodePacket, nodeState, type NodeName, type NodeRow } from '../harness/tracer/node-cases.js';

interface Side {
  readonly node: Node;
  readonly iface: string;
  readonly dataplane: Dataplane<NodeState>;
  readonly fake: FakeNode;
}

for (const rules of ['iptables', 'nftables'] as const)
  void describe(`tracer and kernel agree on the node agent's rules (${rules})`, () => {
    let topo: Topology;
    let pods: Record<'a' | 'b' | 'client' | 'outsider', Pod>;
    const sides = {} as Record<NodeName, Side>;

    before(async () => {
      topo = await createTopology();
      const node1 = await topo.addNode('node1');
      const node2 = await topo.addNode('node2');
      const a = await topo.addPod('a', { node: node1 });
      const b = await topo.addPod('b', { node: node2 });
      pods = { a, b, client: await topo.addPod('client'), outsider: await topo.addPod('outsider') };
      for (const p of [a, b]) await startBackend(topo, p, { httpPort: HTTP, udpPort: UDP });
      for (const [name, node] of [
        ['n1', node1],
        ['n2', node2],
      ] as const) {
        const want = hostInterfaceFor(NET, { servable: true, plugin: 'macvlan', parent: node.parent, mode: 'bridge' }, [
          { family: 4, address: NODES[name].ipv4, prefix: 24 },
          { family: 6, address: NODES[name].ipv6, prefix: 64 },
        ]);
        await createHostInterfaces({ netns: node.ns }).sync([want]);
        sides[name] = { node, iface: want.name, dataplane: createNodeDataplane({ netns: node.ns, iptablesFlavor: 'nft', ipv6: true, backendKind: rules }), fake: new FakeNode(rules) };
      }
      // Local keeps the client's address: the pods answer it through their own node.
      await topo.run(a, ['ip', 'route', 'add', `${pods.client.net1.ipv4}/32`, 'via', NODES.n1.ipv4]);
      await topo.run(b, ['ip', 'route', 'add', `${pods.client.net1.ipv4}/32`, 'via', NODES.n2.ipv4]);
      for (const name of ['n1', 'n2'] as const) {
        const s = sides[name];
        await s.dataplane.sync(nodeState(name, s.iface), { full: true });
        s.fake.sync(nodeState(name, s.iface), true);
      }
    });
    after(async () => {
      await topo?.teardown();
    });

    /** Ingress IPs go to the row's node: the clients send their frames to its parent. */
    async function announce(vip: string, n: Node): Promise<void> {
      const mac = (JSON.parse((await topo.run(n, ['ip', '-j', 'link', 'show', 'eth1'])).stdout) as { address: string }[])[0]?.address ?? '';
      for (const c of [pods.client, pods.outsider]) await topo.run(c, ['ip', ...(vip.includes(':') ? ['-6'] : []), 'neigh', 'replace', vip, 'lladdr', mac, 'dev', 'net1', 'nud', 'permanent']);
    }

    async function kernelProbe(row: NodeRow, dst: string, src: string): Promise<string> {
      const from = row.from === 'node' ? sides[row.node].node : row.from === 'client' ? pods.client : pods.outsider;
      const ask = (count: number, timeoutMs: number): Promise<Reply[]> =>
        row.protocol === 'tcp'
          ? httpRequests(topo, from, `http://${dst.includes(':') ? `[${dst}]` : dst}:${row.port}/`, count, timeoutMs)
          : udpRequests(topo, from, dst, row.port, count, { timeoutMs, socketEach: true });
      const first = await ask(2, 1000);
      if (first.every((r) => r.error === 'ECONNREFUSED')) return 'refused';
      if (first.every((r) => r.error !== undefined && r.error !== 'ECONNREFUSED')) return 'unanswered';
      const replies = [...first, ...(await ask(22, 2000))];
      const failed = replies.filter((r) => r.error !== undefined);
      if (failed.length > 0) return `mixed: ${failed.length} of ${replies.length} failed`;
      const peers = new Set(replies.map((r) => r.peer));
      if (peers.size !== 1) return `mixed sources: ${[...peers].join(',')}`;
      return `reach ${[...new Set(replies.map((r) => r.name ?? '?'))].sort().join(',')} ${[...peers][0] === src ? 'source kept' : 'masqueraded'}`;
    }

    for (const row of NODE_CASES)
      void test(row.name, async () => {
        const side = sides[row.node];
        const { pkt, path } = nodePacket(row, side.iface);
        if (row.from !== 'node' && !Object.values(NODES).some((n) => n.ipv4 === pkt.dst || n.ipv6 === pkt.dst)) await announce(pkt.dst, side.node);
        const traced = nodeObservation(side.fake.trace(pkt, path));
        const kernel = await kernelProbe(row, pkt.dst, pkt.src);
        assert.equal(kernel, traced, `the kernel did "${kernel}", the tracer says "${traced}"`);
        assert.equal(traced, nodeExpected(row.expect));
      });
  });
