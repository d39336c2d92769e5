/**
 * The node agent's dataplane in network namespaces that mirror two real nodes: each "node" has a
 * parent interface `eth1` on one L2 segment; backend "pods" are macvlan children of their node's
 * eth1 in their own namespaces (a on node1, b on node2); an "external client" sits on the same
 * segment. The agent's own code makes the host-side interfaces (mpxh…, macvlan bridge mode on
 * eth1) and applies the rendered rules with real iptables (nft) or real nftables (both back ends,
 * the same tests), routes and conntrack.
 *
 * LoadBalancer: the ingress IPs are announced as MetalLB's L2 mode does, by a neighbour entry on
 * the clients pointing at the announcing node's parent (`eth1`, the interface the speaker answers
 * ARP/NDP on); a second client ("outsider") is outside the ranged Service's source ranges; the
 * Local health check is the agent's own server, in the node's namespace, answering on the node's
 * secondary address with the count the planner made from real Service and slice objects.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createTopology, httpRequests, startBackend, udpRequests, type Node, type Pod, type Reply, type Topology } from '../harness/netns.js';
import type { BackendEndpoint, ServicePortTarget } from '../../src/dataplane/core/model.js';
import type { Dataplane } from '../../src/dataplane/index.js';
import type { V1EndpointSlice, V1Service } from '../../src/kube/types.js';
import { MANAGED_BY, MANAGED_BY_LABEL, NODE_ADDRESSES_ANNOTATION, NODE_PARENTS_ANNOTATION, PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { planNode, type HealthCheck } from '../../cmd/node-agent/state.js';
import { hostInterfaceFor } from '../../cmd/node-agent/host-interface.js';
import { createHostInterfaces, createNodeDataplane, type HostInterfaces } from '../../cmd/node-agent/dataplane.js';
import { DEFAULT_MASQUERADE_MARK, type LoadBalancerTarget, type NodePortTarget, type NodeState } from '../../cmd/node-agent/rules.js';

const NET = { namespace: 'demo', name: 'net-a' };

/** The agent's Local health-check server (cmd/node-agent/health-check.ts), run inside a node's namespace. */
const HEALTH_SERVER_JS = `
import { createHealthCheckServers } from ${JSON.stringify(new URL('../../cmd/node-agent/health-check.ts', import.meta.url).href)};
const log = { warn: (o, m) => console.error(m, o), info() {}, error() {}, debug() {}, fatal() {}, child() { return log; } };
const servers = createHealthCheckServers(log, '::', () => true);
await servers.update(JSON.parse(process.argv[1]));
if (servers.ports().length === 0) { console.error('no listener'); process.exit(1); }
console.log('ready');
`;
const HTTP = 80;
const UDP = 5353;
const CLUSTER_V4 = '10.96.0.10';
const CLUSTER_V6 = 'fd00:10:96::a';
/** Ingress IPs in the segment's subnet (a MetalLB pool would hand these out). */
const VIP_CLUSTER = '192.168.101.240';
const VIP_LOCAL = '192.168.101.241';
const VIP_ONLY_A = '192.168.101.242';
const VIP_RANGED = '192.168.101.243';
const VIP_V6 = 'fd00:101::f0';
const VIP_RANGED_EMPTY = '192.168.101.244';
const HEALTH_PORT = 32000;

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

for (const rules of ['iptables', 'nftables'] as const)
  void describe(`node agent dataplane (${rules}): two nodes, macvlan pods, an external client on the segment`, () => {
    let topo: Topology;
    let a: Pod;
    let b: Pod;
    let client: Pod;
    let outsider: Pod;
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
      const lb = (t: ServicePortTarget, ingressIP: string, policy: 'Cluster' | 'Local', sourceRanges?: readonly string[]): LoadBalancerTarget => ({
        base: t,
        ingressIP,
        policy,
        localEndpoints: np(t, 0, policy, [local]).localEndpoints,
        ...(sourceRanges !== undefined ? { sourceRanges } : {}),
      });
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
        loadBalancers: [
          lb(base('demo/web', 4), VIP_CLUSTER, 'Cluster'),
          lb(base('demo/web', 6), VIP_V6, 'Cluster'),
          lb(base('demo/local', 4), VIP_LOCAL, 'Local'),
          lb(onlyA, VIP_ONLY_A, 'Local'),
          lb(base('demo/ranged', 4), VIP_RANGED, 'Cluster', [`${client.net1.ipv4}/32`]),
          lb(base('demo/ranged-empty', 4, { endpoints: [] }), VIP_RANGED_EMPTY, 'Cluster', [`${client.net1.ipv4}/32`]),
          // SCTP: the rule shape loads into the kernel with the rest (traffic is the sidecar tests').
          lb(base('demo/sig', 4, { protocol: 'SCTP', port: 3868, endpoints: all(4, 3868) }), VIP_RANGED_EMPTY, 'Cluster'),
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
      outsider = await topo.addPod('outsider');
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
        return { node, v4, v6, ifaces, iface: want.name, dataplane: createNodeDataplane({ netns: node.ns, iptablesFlavor: 'nft', ipv6: true, backendKind: rules }) };
      };
      n1 = await make(node1, '192.168.101.250', 'fd00:101::fa');
      n2 = await make(node2, '192.168.101.251', 'fd00:101::fb');
      // Local keeps the client's address, so the pods must send their replies back through their
      // node (as pods whose route to off-node clients is their node): a host route to the client.
      await topo.run(a, ['ip', 'route', 'add', `${client.net1.ipv4}/32`, 'via', n1.v4]);
      await topo.run(b, ['ip', 'route', 'add', `${client.net1.ipv4}/32`, 'via', n2.v4]);
      for (const n of [n1, n2]) assert.equal((await n.dataplane.sync(state(n), { full: true })).backend, rules === 'iptables' ? 'nft' : 'nftables');
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
      assert.ok(
        refused.every((r) => r.ms < 1000),
        'refused at once, not a timeout',
      );
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

    /** The announcement: the client sends the ingress IP's frames to this node's parent, as MetalLB's L2 speaker answers ARP/NDP on it. */
    async function announce(vip: string, n: AgentNode, clients: readonly Pod[] = [client, outsider]): Promise<void> {
      const mac = (JSON.parse((await topo.run(n.node, ['ip', '-j', 'link', 'show', 'eth1'])).stdout) as { address: string }[])[0]?.address ?? '';
      for (const c of clients) await topo.run(c, ['ip', ...(vip.includes(':') ? ['-6'] : []), 'neigh', 'replace', vip, 'lladdr', mac, 'dev', 'net1', 'nud', 'permanent']);
    }

    /**
     * Packets dropped by the rule that says why: iptables, the filter rules whose comment contains
     * `text.iptables` and whose verdict is DROP; nftables, the counted drop rules of the chain whose
     * name starts with `text.nftChain`.
     */
    async function droppedBy(n: AgentNode, text: { readonly iptables: string; readonly nftChain: string }): Promise<number> {
      if (rules === 'iptables') {
        const save = (await topo.run(n.node, ['iptables-nft-save', '-c', '-t', 'filter'])).stdout;
        return save
          .split('\n')
          .filter((l) => l.includes(text.iptables) && l.endsWith('-j DROP'))
          .reduce((sum, l) => sum + Number(/^\[(\d+):/.exec(l)?.[1] ?? 0), 0);
      }
      const listing = (await topo.run(n.node, ['nft', 'list', 'table', 'inet', 'multus_proxy_node'])).stdout;
      let chain = '';
      let sum = 0;
      for (const line of listing.split('\n').map((l) => l.trim())) {
        chain = /^chain (\S+) \{$/.exec(line)?.[1] ?? chain;
        const m = /counter packets (\d+) bytes \d+ drop$/.exec(line);
        if (m !== null && chain.startsWith(text.nftChain)) sum += Number(m[1]);
      }
      return sum;
    }

    void test('LoadBalancer Cluster: the external client reaches the ingress IP on the announcing node, equal shares, masqueraded', async () => {
      await announce(VIP_CLUSTER, n1);
      const replies = await httpRequests(topo, client, `http://${VIP_CLUSTER}/`, 60);
      assert.equal(replies.filter((r) => r.error !== undefined).length, 0, names(replies).join(','));
      assert.ok(count(replies, 'a') >= 15 && count(replies, 'b') >= 15, `shares: a=${count(replies, 'a')} b=${count(replies, 'b')}`);
      assert.deepEqual([...new Set(replies.map((r) => r.peer))], [n1.v4], 'backends see the node address (masqueraded)');
      // Every node serves the address: the announcement moves, the service stays.
      await announce(VIP_CLUSTER, n2);
      const moved = await httpRequests(topo, client, `http://${VIP_CLUSTER}/`, 20);
      assert.equal(moved.filter((r) => r.error !== undefined).length, 0, names(moved).join(','));
      assert.deepEqual([...new Set(moved.map((r) => r.peer))], [n2.v4]);
    });

    void test('LoadBalancer IPv6 ingress IP', async () => {
      await announce(VIP_V6, n1);
      const replies = await httpRequests(topo, client, `http://[${VIP_V6}]/`, 20);
      assert.equal(replies.filter((r) => r.error !== undefined).length, 0, names(replies).join(','));
      assert.ok(count(replies, 'a') > 0 && count(replies, 'b') > 0, names(replies).join(','));
      assert.deepEqual([...new Set(replies.map((r) => r.peer))], [n1.v6]);
    });

    void test('LoadBalancer Local: the local endpoint only, the client address kept; endpoints only elsewhere: dropped (no answer), as kube-proxy', async () => {
      await announce(VIP_LOCAL, n1);
      const on1 = await httpRequests(topo, client, `http://${VIP_LOCAL}/`, 10);
      assert.deepEqual([...new Set(names(on1))], ['a']);
      assert.deepEqual([...new Set(on1.map((r) => r.peer))], [client.net1.ipv4]);
      await announce(VIP_LOCAL, n2);
      const on2 = await httpRequests(topo, client, `http://${VIP_LOCAL}/`, 10);
      assert.deepEqual([...new Set(names(on2))], ['b']);
      assert.deepEqual([...new Set(on2.map((r) => r.peer))], [client.net1.ipv4]);
      await announce(VIP_ONLY_A, n2);
      const dropped = await httpRequests(topo, client, `http://${VIP_ONLY_A}/`, 2, 800);
      assert.deepEqual([...new Set(names(dropped))], ['error:ETIMEDOUT'], 'node2 has no endpoint of only-a: dropped, not forwarded');
      assert.ok((await droppedBy(n2, { iptables: 'demo/only-a:80 loadBalancer Local has no endpoints on this node', nftChain: 'refuse' })) >= 2, 'by the rule that says why');
      await announce(VIP_ONLY_A, n1);
      assert.deepEqual([...new Set(names(await httpRequests(topo, client, `http://${VIP_ONLY_A}/`, 3)))], ['a']);
    });

    void test('loadBalancerSourceRanges: the client inside is served, the outsider is dropped', async () => {
      await announce(VIP_RANGED, n1);
      const inside = await httpRequests(topo, client, `http://${VIP_RANGED}/`, 10);
      assert.equal(inside.filter((r) => r.error !== undefined).length, 0, names(inside).join(','));
      const outside = await httpRequests(topo, outsider, `http://${VIP_RANGED}/`, 2, 800);
      assert.deepEqual([...new Set(names(outside))], ['error:ETIMEDOUT'], 'dropped');
      assert.ok((await droppedBy(n1, { iptables: 'demo/ranged:80 loadBalancer Cluster source outside loadBalancerSourceRanges', nftChain: 'MPXN-FW-' })) >= 2, 'by the firewall chain');
      // No endpoints: the admitted client is refused at once, the outsider still dropped.
      await announce(VIP_RANGED_EMPTY, n1);
      const refused = await httpRequests(topo, client, `http://${VIP_RANGED_EMPTY}/`, 2, 2000);
      assert.deepEqual([...new Set(names(refused))], ['error:ECONNREFUSED']);
      assert.ok(
        refused.every((r) => r.ms < 1000),
        'refused at once',
      );
      assert.deepEqual([...new Set(names(await httpRequests(topo, outsider, `http://${VIP_RANGED_EMPTY}/`, 2, 800)))], ['error:ETIMEDOUT']);
      // The same outsider reaches an unranged ingress IP: the drop is the range, not the path.
      await announce(VIP_CLUSTER, n1);
      const open = await httpRequests(topo, outsider, `http://${VIP_CLUSTER}/`, 4);
      assert.equal(open.filter((r) => r.error !== undefined).length, 0, names(open).join(','));
    });

    void test("Local health check: the agent's server in the node answers on the node's secondary address with the local count, kube-proxy's body", async () => {
      // The planner's count from real objects: demo/only-a (Local) has its one endpoint on node1.
      const svc: V1Service = {
        metadata: { namespace: 'demo', name: 'only-a', labels: { [PROXY_NAME_LABEL]: PROXY_NAME }, annotations: { [SERVICE_NETWORK_ANNOTATION]: 'demo/net-a' } },
        spec: { type: 'LoadBalancer', externalTrafficPolicy: 'Local', healthCheckNodePort: HEALTH_PORT, clusterIP: CLUSTER_V4, clusterIPs: [CLUSTER_V4], ports: [{ port: 80, protocol: 'TCP' }] },
        status: { loadBalancer: { ingress: [{ ip: VIP_ONLY_A }] } },
      };
      const slice: V1EndpointSlice = {
        metadata: { namespace: 'demo', name: 'only-a-x', labels: { [SERVICE_NAME_LABEL]: 'only-a', [MANAGED_BY_LABEL]: MANAGED_BY }, annotations: { [SERVICE_NETWORK_ANNOTATION]: 'demo/net-a' } },
        addressType: 'IPv4',
        ports: [{ name: '', port: HTTP, protocol: 'TCP' }],
        endpoints: [{ addresses: [a.net1.ipv4], nodeName: 'node1', conditions: { ready: true } }],
      };
      const checks = (nodeName: string, address: string): readonly HealthCheck[] =>
        planNode({
          nodeName,
          node: { metadata: { name: nodeName, annotations: { [NODE_ADDRESSES_ANNOTATION]: `demo/net-a=${address}/24`, [NODE_PARENTS_ANNOTATION]: 'demo/net-a=eth1' } } },
          services: [svc],
          slices: [slice],
          nads: [{ metadata: { namespace: 'demo', name: 'net-a' }, spec: { config: JSON.stringify({ type: 'macvlan', master: 'eth1' }) } }],
          masqueradeMark: DEFAULT_MASQUERADE_MARK,
        }).healthChecks;
      assert.deepEqual(checks('node1', n1.v4), [{ service: 'demo/only-a', port: HEALTH_PORT, localEndpoints: 1 }]);
      for (const [n, want, status] of [
        [n1, 1, 200],
        [n2, 0, 503],
      ] as const) {
        const server = topo.spawn(n.node, [process.execPath, '--import', 'tsx', '--input-type=module', '-e', HEALTH_SERVER_JS, JSON.stringify(checks(n.node.name, n.v4))]);
        try {
          await new Promise<void>((resolve, reject) => {
            let err = '';
            server.stderr?.on('data', (d: Buffer) => (err += d.toString()));
            server.stdout?.on('data', (d: Buffer) => (d.toString().includes('ready') ? resolve() : undefined));
            server.once('exit', (code) => reject(new Error(`health server exited ${code}: ${err}`)));
          });
          const r = await topo.run(client, ['curl', '-s', '-i', '--max-time', '3', `http://${n.v4}:${HEALTH_PORT}/`]);
          assert.match(r.stdout, new RegExp(`^HTTP/1.1 ${status} `));
          assert.match(r.stdout, /content-type: application\/json/i);
          const body = JSON.parse(r.stdout.slice(r.stdout.indexOf('\r\n\r\n') + 4)) as unknown;
          assert.deepEqual(body, { service: { namespace: 'demo', name: 'only-a' }, localEndpoints: want, serviceProxyHealthy: true });
        } finally {
          server.kill('SIGKILL');
        }
      }
    });

    void test('cleanup removes only what the agent added: rules, routes and the interface; eth1 and foreign rules stay', async () => {
      await topo.run(n2.node, ['iptables-nft', '-t', 'nat', '-N', 'FOREIGN']);
      await topo.run(n2.node, ['iptables-nft', '-t', 'nat', '-A', 'PREROUTING', '-d', '192.0.2.1', '-j', 'FOREIGN']);
      await n2.dataplane.cleanup();
      assert.deepEqual(await n2.ifaces.removeAll(), [`link del dev ${n2.iface}`]);
      const save = (await topo.run(n2.node, ['iptables-nft-save'])).stdout + (await topo.run(n2.node, ['ip6tables-nft-save'])).stdout;
      assert.ok(!save.includes('MPXN-') && !save.includes('multus-proxy-node'), save);
      assert.doesNotMatch((await topo.run(n2.node, ['nft', 'list', 'tables'])).stdout, /multus_proxy_node/);
      assert.ok(save.includes('-A PREROUTING -d 192.0.2.1/32 -j FOREIGN'));
      const links = (await topo.run(n2.node, ['ip', '-br', 'link'])).stdout;
      assert.ok(links.includes('eth1') && !links.includes('mpxh'), links);
      assert.equal((await topo.run(n2.node, ['ip', 'route', 'show', 'proto', '242'])).stdout.trim(), '');
    });
  });
