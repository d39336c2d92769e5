/**
 * The node agent's dataplane in network namespaces that mirror two real nodes: each "node" has a
 * parent interface `eth1` on one L2 segment; backend "pods" are macvlan children of their node's
 * eth1 in their own namespaces (a on node1, b on node2); an "external client" sits on the same
 * segment. The agent's own code makes the host-side interfaces (mpxh…, macvlan bridge mode on
 * eth1) and applies the rendered rules with real iptables (nft), routes and conntrack.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createTopology, httpRequests, startBackend, udpRequests, type Node, type Pod, type Reply, type Topology } from '../harness/netns.js';
import type { BackendEndpoint, ServicePortTarget } from '../../src/dataplane/model.js';
import type { Dataplane } from '../../src/dataplane/apply.js';
import { hostInterfaceFor } from '../../src/node-agent/host-interface.js';
import { createHostInterfaces, createNodeDataplane, type HostInterfaces } from '../../src/node-agent/dataplane.js';
import { DEFAULT_MASQUERADE_MARK, type NodePortTarget, type NodeState } from '../../src/node-agent/rules.js';

const NET = { namespace: 'demo', name: 'net-a' };
const HTTP = 80;
const UDP = 5353;
const CLUSTER_V4 = '10.96.0.10';
const CLUSTER_V6 = 'fd00:10:96::a';

interface AgentNode {
  readonly node: Node;
  readonly v4: string;
  readonly v6: string;
  readonly ifaces: HostInterfaces;
  readonly dataplane: Dataplane<NodeState>;
  readonly iface: string;
}

const ep = (ip: string, port: number): BackendEndpoint => ({ ip, port, ready: true, serving: true, terminating: false });

function need(bin: string): void {
  try {
    execFileSync('sh', ['-c', `command -v ${bin}`], { stdio: 'ignore' });
  } catch {
    throw new Error(`${bin} is missing: apt-get install iptables conntrack iproute2`);
  }
}

const names = (replies: readonly Reply[]): string[] => replies.map((r) => r.name ?? `error:${r.error ?? '?'}`);
const count = (replies: readonly Reply[], name: string): number => replies.filter((r) => r.name === name).length;

void describe('node agent dataplane: two nodes, macvlan pods, an external client on the segment', () => {
  let topo: Topology;
  let a: Pod;
  let b: Pod;
  let client: Pod;
  let n1: AgentNode;
  let n2: AgentNode;

  /** The desired state of one node: which pods are local to it decides Local's endpoints. */
  function state(me: AgentNode, opts: { udpEndpoints?: readonly Pod[] } = {}): NodeState {
    const all = (family: 4 | 6, port: number, pods: readonly Pod[] = [a, b]): BackendEndpoint[] => pods.map((p) => ep(family === 4 ? p.net1.ipv4 : p.net1.ipv6, port));
    const local = me === n1 ? a : b;
    const base = (service: string, family: 4 | 6, over: Partial<ServicePortTarget> = {}): ServicePortTarget => ({
      service,
      portName: '',
      protocol: 'TCP',
      clusterIP: family === 4 ? CLUSTER_V4 : CLUSTER_V6,
      port: 80,
      family,
      network: NET,
      endpoints: all(family, HTTP),
      ...over,
    });
    const np = (t: ServicePortTarget, nodePort: number, policy: 'Cluster' | 'Local', localPods: readonly Pod[]): NodePortTarget => ({
      base: t,
      nodePort,
      policy,
      localEndpoints: t.endpoints.filter((e) => localPods.some((p) => p.net1.ipv4 === e.ip || p.net1.ipv6 === e.ip)),
    });
    const onlyA = base('demo/only-a', 4, { endpoints: all(4, HTTP, [a]) });
    return {
      networks: [{ network: NET, interface: me.iface, ipv4: me.v4, ipv6: me.v6 }],
      masqueradeMark: DEFAULT_MASQUERADE_MARK,
      clusterTargets: [base('demo/web', 4), base('demo/web', 6)],
      nodePorts: [
        np(base('demo/web', 4), 30080, 'Cluster', [local]),
        np(base('demo/web', 6), 30080, 'Cluster', [local]),
        np(base('demo/local', 4), 30081, 'Local', [local]),
        np(onlyA, 30082, 'Local', [local]),
        np(base('demo/dns', 4, { protocol: 'UDP', port: 53, endpoints: all(4, UDP, opts.udpEndpoints ?? [a, b]) }), 30053, 'Cluster', [local]),
      ],
    };
  }

  before(async () => {
    for (const bin of ['ip', 'iptables-nft-restore', 'ip6tables-nft-restore', 'conntrack']) need(bin);
    topo = await createTopology();
    const node1 = await topo.addNode('node1');
    const node2 = await topo.addNode('node2');
    a = await topo.addPod('a', { node: node1 });
    b = await topo.addPod('b', { node: node2 });
    client = await topo.addPod('client');
    await startBackend(topo, a, { httpPort: HTTP, udpPort: UDP });
    await startBackend(topo, b, { httpPort: HTTP, udpPort: UDP });
    const make = async (node: Node, v4: string, v6: string): Promise<AgentNode> => {
      const ifaces = createHostInterfaces({ netns: node.ns });
      const want = hostInterfaceFor(NET, { servable: true, plugin: 'macvlan', parent: node.parent, mode: 'bridge' }, [
        { family: 4, address: v4, prefix: 24 },
        { family: 6, address: v6, prefix: 64 },
      ]);
      const plan = await ifaces.sync([want]);
      assert.deepEqual(plan.created, [want.name]);
      return { node, v4, v6, ifaces, iface: want.name, dataplane: createNodeDataplane({ netns: node.ns, backend: 'nft', ipv6: true }) };
    };
    n1 = await make(node1, '192.168.101.250', 'fd00:101::fa');
    n2 = await make(node2, '192.168.101.251', 'fd00:101::fb');
    // Local keeps the client's address, so the pods must send their replies back through their
    // node (as pods whose route to off-node clients is their node): a host route to the client.
    await topo.run(a, ['ip', 'route', 'add', `${client.net1.ipv4}/32`, 'via', n1.v4]);
    await topo.run(b, ['ip', 'route', 'add', `${client.net1.ipv4}/32`, 'via', n2.v4]);
    for (const n of [n1, n2]) await n.dataplane.sync(state(n), { full: true });
  });

  after(async () => {
    await topo?.teardown();
  });

  void test('the external client reaches nodeIP:nodePort on both nodes, with equal shares; Cluster masquerades', async () => {
    for (const n of [n1, n2]) {
      const replies = await httpRequests(topo, client, `http://${n.v4}:30080/`, 60);
      assert.equal(replies.filter((r) => r.error !== undefined).length, 0, names(replies).join(','));
      // Binomial(60, 1/2): fewer than 15 of either has probability < 0.01 %.
      assert.ok(count(replies, 'a') >= 15 && count(replies, 'b') >= 15, `shares on ${n.node.name}: a=${count(replies, 'a')} b=${count(replies, 'b')}`);
      assert.deepEqual([...new Set(replies.map((r) => r.peer))], [n.v4], 'backends see the node address (masqueraded)');
    }
  });

  void test('IPv6 NodePort', async () => {
    const replies = await httpRequests(topo, client, `http://[${n1.v6}]:30080/`, 20);
    assert.equal(replies.filter((r) => r.error !== undefined).length, 0, names(replies).join(','));
    assert.ok(count(replies, 'a') > 0 && count(replies, 'b') > 0, names(replies).join(','));
    assert.deepEqual([...new Set(replies.map((r) => r.peer))], [n1.v6]);
  });

  void test('Local: only the local endpoint, the client address kept; a node without local endpoints refuses', async () => {
    const on1 = await httpRequests(topo, client, `http://${n1.v4}:30081/`, 10);
    assert.deepEqual([...new Set(names(on1))], ['a']);
    assert.deepEqual([...new Set(on1.map((r) => r.peer))], [client.net1.ipv4]);
    const on2 = await httpRequests(topo, client, `http://${n2.v4}:30081/`, 10);
    assert.deepEqual([...new Set(names(on2))], ['b']);
    assert.deepEqual([...new Set(on2.map((r) => r.peer))], [client.net1.ipv4]);
    // demo/only-a has its one endpoint on node1: node2 refuses at once.
    assert.deepEqual([...new Set(names(await httpRequests(topo, client, `http://${n1.v4}:30082/`, 3)))], ['a']);
    const refused = await httpRequests(topo, client, `http://${n2.v4}:30082/`, 3);
    assert.deepEqual([...new Set(names(refused))], ['error:ECONNREFUSED']);
    assert.ok(refused.every((r) => r.ms < 1000), 'refused at once, not a timeout');
  });

  void test('a host-network process on the node reaches the cluster IP, from the node address on that network', async () => {
    const v4 = await httpRequests(topo, n1.node, `http://${CLUSTER_V4}/`, 20);
    assert.equal(v4.filter((r) => r.error !== undefined).length, 0, names(v4).join(','));
    assert.ok(count(v4, 'a') > 0 && count(v4, 'b') > 0, names(v4).join(','));
    assert.deepEqual([...new Set(v4.map((r) => r.peer))], [n1.v4]);
    const v6 = await httpRequests(topo, n1.node, `http://[${CLUSTER_V6}]/`, 6);
    assert.deepEqual([...new Set(v6.map((r) => r.peer))], [n1.v6], names(v6).join(','));
  });

  void test('UDP NodePort works, and an endpoint leaving flushes conntrack so the same flow moves', async () => {
    const first = await udpRequests(topo, client, n1.v4, 30053, 3, { localPort: 40053 });
    const served = first[0]?.name;
    assert.ok(served === 'a' || served === 'b', names(first).join(','));
    assert.deepEqual([...new Set(names(first))], [served], 'one flow, one backend');
    const remaining = served === 'a' ? b : a;
    await n1.dataplane.sync(state(n1, { udpEndpoints: [remaining] }), { full: false });
    const moved = await udpRequests(topo, client, n1.v4, 30053, 3, { localPort: 40053 });
    assert.deepEqual([...new Set(names(moved))], [remaining.name], 'the same 5-tuple now reaches the remaining endpoint');
  });

  void test('cleanup removes only what the agent added: rules, routes and the interface; eth1 and foreign rules stay', async () => {
    await topo.run(n2.node, ['iptables-nft', '-t', 'nat', '-N', 'FOREIGN']);
    await topo.run(n2.node, ['iptables-nft', '-t', 'nat', '-A', 'PREROUTING', '-d', '192.0.2.1', '-j', 'FOREIGN']);
    await n2.dataplane.cleanup();
    assert.deepEqual(await n2.ifaces.removeAll(), [`link del dev ${n2.iface}`]);
    const save = (await topo.run(n2.node, ['iptables-nft-save'])).stdout + (await topo.run(n2.node, ['ip6tables-nft-save'])).stdout;
    assert.ok(!save.includes('MPXN-') && !save.includes('multus-proxy-node'), save);
    assert.ok(save.includes('-A PREROUTING -d 192.0.2.1/32 -j FOREIGN'));
    const links = (await topo.run(n2.node, ['ip', '-br', 'link'])).stdout;
    assert.ok(links.includes('eth1') && !links.includes('mpxh'), links);
    assert.equal((await topo.run(n2.node, ['ip', 'route', 'show', 'proto', '242'])).stdout.trim(), '');
  });
});
