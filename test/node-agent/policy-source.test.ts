/**
 * MultiNetworkPolicy behind the node agent: which source address a pod's ingress policy judges
 * for NodePort and LoadBalancer traffic (docs/policy.md, decision 0265). A "node" namespace runs
 * the node agent's own dataplane (both back ends) in front of a backend pod, a macvlan child of
 * the node's parent; a client sits on the segment. The pod's ingress policy is a real
 * MultiNetworkPolicy, compiled by the resolver and rendered with withPodPolicy on the sidecar's
 * nftables back end in the pod's namespace.
 *
 * - externalTrafficPolicy Local keeps the client's address: the client's own ipBlock admits it,
 *   and allowing only the node's address does not.
 * - Cluster masquerades to the node's address on the network: refused under the client's ipBlock,
 *   admitted once the node's address is allowed.
 * - IPv6 alike, for the Cluster node port.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createTopology, httpRequests, startBackend, type Node, type Pod, type Reply, type Topology } from '../harness/netns.js';
import { createDataplane, withPodPolicy, type Dataplane, type DesiredState } from '../../src/dataplane/index.js';
import type { BackendEndpoint, ServicePortTarget } from '../../src/dataplane/core/model.js';
import { POLICY_FOR_ANNOTATION } from '../../src/keys.js';
import type { MultiNetworkPolicy } from '../../src/policy/api.js';
import { resolvePodPolicy } from '../../src/policy/resolve.js';
import { hostInterfaceFor } from '../../cmd/node-agent/host-interface.js';
import { createHostInterfaces, createNodeDataplane } from '../../cmd/node-agent/dataplane.js';
import { DEFAULT_MASQUERADE_MARK, type NodeState } from '../../cmd/node-agent/rules.js';

const NET = { namespace: 'demo', name: 'net-a' };
const NETWORK = 'demo/net-a';
const HTTP = 80;
/** The node's addresses on the network, the Service's cluster IP, its ingress IPs and node ports. */
const AT = {
  nodeV4: '192.168.101.250',
  nodeV6: 'fd00:101::fa',
  clusterIP: '10.96.0.10',
  clusterIPv6: 'fd00:10:96::a',
  vipCluster: '192.168.101.240',
  vipLocal: '192.168.101.241',
  npCluster: 30080,
  npLocal: 30081,
} as const;

/** The backend's ingress policy: HTTP from these CIDRs only, on demo/net-a. */
function policy(cidrs: readonly string[]): MultiNetworkPolicy {
  return {
    apiVersion: 'k8s.cni.cncf.io/v1beta1',
    kind: 'MultiNetworkPolicy',
    metadata: { name: 'web-from-clients', namespace: 'demo', annotations: { [POLICY_FOR_ANNOTATION]: 'net-a' } },
    spec: { podSelector: { matchLabels: { app: 'web' } }, policyTypes: ['Ingress'], ingress: [{ from: cidrs.map((cidr) => ({ ipBlock: { cidr } })), ports: [{ protocol: 'TCP', port: HTTP }] }] },
  };
}

const outcome = (replies: readonly Reply[]): string[] => [...new Set(replies.map((r) => (r.error !== undefined ? `error:${r.error}` : `${r.name ?? '?'} from ${r.peer ?? '?'}`)))];

for (const agentBackend of ['nftables', 'iptables'] as const)
  void describe(`policy behind the node agent (${agentBackend}): the source the pod's ingress policy judges`, () => {
    let topo: Topology;
    let node: Node;
    let web: Pod;
    let client: Pod;
    let podDataplane: Dataplane;
    let base: DesiredState;

    /** The pod's policy, compiled as its sidecar compiles it, written to its namespace. */
    async function allow(cidrs: readonly string[]): Promise<void> {
      const compiled = resolvePodPolicy(
        { namespace: 'demo', labels: { app: 'web' }, networks: [{ network: NETWORK, interface: 'net1', addresses: [web.net1.ipv4, web.net1.ipv6] }], containerPorts: [] },
        [policy(cidrs)],
        () => [],
      );
      assert.equal(compiled.networks[0]?.ingress.isolated, true);
      await podDataplane.sync(withPodPolicy(base, compiled), { full: false });
    }

    const get = (host: string, port: number): Promise<Reply[]> => httpRequests(topo, client, `http://${host.includes(':') ? `[${host}]` : host}:${port}/`, 2, 1500);

    before(async () => {
      topo = await createTopology();
      node = await topo.addNode('node1');
      web = await topo.addPod('web', { node });
      client = await topo.addPod('client');
      await startBackend(topo, web, { httpPort: HTTP });
      const ifaces = createHostInterfaces({ netns: node.ns });
      const want = hostInterfaceFor(NET, { servable: true, plugin: 'macvlan', parent: node.parent, mode: 'bridge' }, [
        { family: 4, address: AT.nodeV4, prefix: 24 },
        { family: 6, address: AT.nodeV6, prefix: 64 },
      ]);
      await ifaces.sync([want]);
      const ep: BackendEndpoint = { ip: web.net1.ipv4, port: HTTP, ready: true, serving: true, terminating: false };
      const svc: ServicePortTarget = { service: 'demo/web', portName: '', protocol: 'TCP', clusterIP: AT.clusterIP, port: 80, family: 4, network: NET, endpoints: [ep] };
      const ep6: BackendEndpoint = { ...ep, ip: web.net1.ipv6 };
      const svc6: ServicePortTarget = { ...svc, clusterIP: AT.clusterIPv6, family: 6, endpoints: [ep6] };
      const state: NodeState = {
        networks: [{ network: NET, interface: want.name, ipv4: AT.nodeV4, ipv6: AT.nodeV6 }],
        masqueradeMark: DEFAULT_MASQUERADE_MARK,
        clusterTargets: [svc, svc6],
        nodePorts: [
          { base: svc, nodePort: AT.npCluster, policy: 'Cluster', localEndpoints: [ep] },
          { base: svc6, nodePort: AT.npCluster, policy: 'Cluster', localEndpoints: [ep6] },
          { base: svc, nodePort: AT.npLocal, policy: 'Local', localEndpoints: [ep] },
        ],
        loadBalancers: [
          { base: svc, ingressIP: AT.vipCluster, policy: 'Cluster', localEndpoints: [ep] },
          { base: svc, ingressIP: AT.vipLocal, policy: 'Local', localEndpoints: [ep] },
        ],
      };
      const agent = createNodeDataplane({ netns: node.ns, iptablesFlavor: 'nft', ipv6: true, backendKind: agentBackend });
      await agent.sync(state, { full: true });
      // The ingress IPs announced on the node's parent, as MetalLB's L2 mode answers ARP for them.
      const mac = (JSON.parse((await topo.run(node, ['ip', '-j', 'link', 'show', 'eth1'])).stdout) as { address: string }[])[0]?.address ?? '';
      for (const vip of [AT.vipCluster, AT.vipLocal]) await topo.run(client, ['ip', 'neigh', 'replace', vip, 'lladdr', mac, 'dev', 'net1', 'nud', 'permanent']);
      // Local keeps the client's address: the pod answers it through its node (docs/node-agent.md).
      await topo.run(web, ['ip', 'route', 'add', `${client.net1.ipv4}/32`, 'via', AT.nodeV4]);
      base = { targets: [], interfaces: [{ network: NET, interface: 'net1', ipv4: [web.net1.ipv4], ipv6: [web.net1.ipv6] }] };
      podDataplane = createDataplane({ netns: web.ns, backendKind: 'nftables' });
      await podDataplane.sync(base, { full: true });
    });

    after(async () => {
      podDataplane?.close();
      await topo?.teardown();
    });

    void test('without a policy: Local arrives from the client, Cluster from the node (the sources the rule is about)', async () => {
      assert.deepEqual(outcome(await get(AT.nodeV4, AT.npLocal)), [`web from ${client.net1.ipv4}`]);
      assert.deepEqual(outcome(await get(AT.vipLocal, HTTP)), [`web from ${client.net1.ipv4}`]);
      assert.deepEqual(outcome(await get(AT.nodeV4, AT.npCluster)), [`web from ${AT.nodeV4}`]);
      assert.deepEqual(outcome(await get(AT.vipCluster, HTTP)), [`web from ${AT.nodeV4}`]);
      assert.deepEqual(outcome(await get(AT.nodeV6, AT.npCluster)), [`web from ${AT.nodeV6}`]);
    });

    void test("the client's ipBlock: Local is admitted with the client's address, Cluster (the node's address) is dropped", async () => {
      await allow([`${client.net1.ipv4}/32`, `${client.net1.ipv6}/128`]);
      assert.deepEqual(outcome(await get(web.net1.ipv4, HTTP)), [`web from ${client.net1.ipv4}`], 'direct from the client: admitted');
      assert.deepEqual(outcome(await get(AT.nodeV4, AT.npLocal)), [`web from ${client.net1.ipv4}`]);
      assert.deepEqual(outcome(await get(AT.vipLocal, HTTP)), [`web from ${client.net1.ipv4}`]);
      assert.deepEqual(outcome(await get(AT.nodeV4, AT.npCluster)), ['error:ETIMEDOUT'], 'Cluster is judged as the node address, which no rule admits');
      assert.deepEqual(outcome(await get(AT.vipCluster, HTTP)), ['error:ETIMEDOUT']);
      assert.deepEqual(outcome(await get(AT.nodeV6, AT.npCluster)), ['error:ETIMEDOUT'], 'IPv6 alike');
    });

    void test("the node's address allowed as well: Cluster is admitted, from the node's address", async () => {
      await allow([`${client.net1.ipv4}/32`, `${client.net1.ipv6}/128`, `${AT.nodeV4}/32`, `${AT.nodeV6}/128`]);
      assert.deepEqual(outcome(await get(AT.nodeV4, AT.npCluster)), [`web from ${AT.nodeV4}`]);
      assert.deepEqual(outcome(await get(AT.vipCluster, HTTP)), [`web from ${AT.nodeV4}`]);
      assert.deepEqual(outcome(await get(AT.nodeV4, AT.npLocal)), [`web from ${client.net1.ipv4}`]);
      assert.deepEqual(outcome(await get(AT.nodeV6, AT.npCluster)), [`web from ${AT.nodeV6}`]);
    });

    void test("only the node's address allowed: Cluster passes, Local does not (it is judged as the client)", async () => {
      await allow([`${AT.nodeV4}/32`]);
      assert.deepEqual(outcome(await get(AT.nodeV4, AT.npCluster)), [`web from ${AT.nodeV4}`]);
      assert.deepEqual(outcome(await get(AT.nodeV4, AT.npLocal)), ['error:ETIMEDOUT']);
      assert.deepEqual(outcome(await get(AT.vipLocal, HTTP)), ['error:ETIMEDOUT']);
    });
  });
