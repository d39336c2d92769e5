/**
 * planNode: from Kubernetes objects to the node's interfaces, rules state, problems and unservable
 * networks. A malformed or unservable NAD yields its Event and nothing for that network, while the
 * other networks are served.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  NODE_ADDRESS_RANGE_ANNOTATION,
  NODE_ADDRESSES_ANNOTATION,
  NODE_PARENTS_ANNOTATION,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  PROXY_NAME,
  PROXY_NAME_LABEL,
  SERVICE_NAME_LABEL,
  SERVICE_NETWORK_ANNOTATION,
} from '../../../src/keys.js';
import type { NetworkAttachmentDefinition, V1EndpointSlice, V1Node, V1Service } from '../../../src/kube/types.js';
import { NodePlanner, planNode, type NodeInput } from '../../../cmd/node-agent/state.js';
import { parseExternalIPPolicy } from '../../../src/external-ips.js';
import { hostInterfaceFor, hostInterfaceName, parentRefusal, planHostInterfaces, type ExistingLink } from '../../../cmd/node-agent/host-interface.js';
import { DEFAULT_MASQUERADE_MARK } from '../../../cmd/node-agent/rules.js';

const nad = (name: string, config: unknown, annotations: Record<string, string> = {}): NetworkAttachmentDefinition => ({
  metadata: { name, namespace: 'demo', annotations },
  spec: { config: typeof config === 'string' ? config : JSON.stringify(config) },
});
const svc = (name: string, net: string, spec: NonNullable<V1Service['spec']>): V1Service => ({
  metadata: { name, namespace: 'demo', labels: { [PROXY_NAME_LABEL]: PROXY_NAME }, annotations: { [SERVICE_NETWORK_ANNOTATION]: net } },
  spec,
});
const slice = (service: string, net: string, eps: { ip: string; node: string; ready?: boolean }[]): V1EndpointSlice => ({
  metadata: { name: `${service}-x`, namespace: 'demo', labels: { [SERVICE_NAME_LABEL]: service, [MANAGED_BY_LABEL]: MANAGED_BY }, annotations: { [SERVICE_NETWORK_ANNOTATION]: `demo/${net}` } },
  addressType: 'IPv4',
  ports: [{ name: '', port: 8080, protocol: 'TCP' }],
  endpoints: eps.map((e) => ({ addresses: [e.ip], nodeName: e.node, conditions: { ready: e.ready ?? true } })),
});
const node = (annotations: Record<string, string> = {}): V1Node => ({ metadata: { name: 'w1', annotations }, status: { addresses: [{ type: 'InternalIP', address: '10.0.0.11' }] } });

function input(over: Partial<NodeInput> = {}): NodeInput {
  return {
    nodeName: 'w1',
    node: node({ [NODE_ADDRESSES_ANNOTATION]: 'demo/good=192.168.101.211/24', [NODE_PARENTS_ANNOTATION]: 'demo/good=ens4' }),
    masqueradeMark: DEFAULT_MASQUERADE_MARK,
    nads: [nad('good', { type: 'macvlan', master: 'ens4' }), nad('broken', '{"type":"macvlan","master":'), nad('vf', { type: 'sriov' })],
    services: [
      svc('web', 'good', { type: 'NodePort', clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10'], ports: [{ port: 80, protocol: 'TCP', nodePort: 30080 }], externalTrafficPolicy: 'Local' }),
      svc('also', 'broken', { type: 'NodePort', clusterIP: '10.96.0.11', ports: [{ port: 80, protocol: 'TCP', nodePort: 30081 }] }),
      svc('dpdk', 'vf', { type: 'ClusterIP', clusterIP: '10.96.0.12', ports: [{ port: 80, protocol: 'TCP' }] }),
    ],
    slices: [
      slice('web', 'good', [
        { ip: '192.168.101.3', node: 'w1' },
        { ip: '192.168.101.4', node: 'w2' },
        { ip: '192.168.101.5', node: 'w1', ready: false },
      ]),
    ],
    ...over,
  };
}

void describe('planNode', () => {
  void test("spec.externalIPs: only those inside the admin's CIDRs are served (frontends by externalTrafficPolicy, and the node's own access); none when not configured; never a node address", () => {
    const ext = svc('ext', 'good', {
      type: 'ClusterIP',
      clusterIP: '10.96.0.20',
      clusterIPs: ['10.96.0.20'],
      ports: [{ port: 80, protocol: 'TCP' }],
      externalTrafficPolicy: 'Local',
      externalIPs: ['192.0.2.7', '198.51.100.7', '192.168.101.211'],
    });
    const objs = input({ services: [...input().services, ext], slices: [...input().slices, slice('ext', 'good', [{ ip: '192.168.101.3', node: 'w1' }])] });
    const policy = parseExternalIPPolicy(['192.0.2.0/24', '192.168.101.0/24'], 'test');
    assert.ok(policy.ok);
    const p = new NodePlanner(undefined, policy.value).update(objs);
    assert.deepEqual(
      (p.state.externalIPs ?? []).map((e) => [e.address, e.policy, e.base.clusterIP, e.localEndpoints.map((x) => x.ip)]),
      [['192.0.2.7', 'Local', '10.96.0.20', ['192.168.101.3']]],
    );
    assert.deepEqual(
      p.state.clusterTargets.filter((t) => t.externalIP === true).map((t) => t.clusterIP),
      ['192.0.2.7'],
    );
    const none = planNode(objs);
    assert.deepEqual([none.state.externalIPs, none.state.clusterTargets.filter((t) => t.externalIP === true)], [[], []]);
  });
  void test('a malformed NAD and an unservable one: an Event each and nothing applied for them; the good network is served', () => {
    const p = planNode(input());
    assert.deepEqual(
      p.interfaces.map((i) => i.name),
      [hostInterfaceName({ namespace: 'demo', name: 'good' })],
    );
    assert.deepEqual(p.interfaces[0]?.addresses, [{ family: 4, address: '192.168.101.211', prefix: 24 }]);
    assert.deepEqual(
      p.problems.map((x) => [x.kind, x.name, x.reason]),
      [
        ['NetworkAttachmentDefinition', 'broken', 'InvalidNetworkConfig'],
        ['NetworkAttachmentDefinition', 'vf', 'UnservableNetwork'],
      ],
    );
    assert.match(p.problems[0]?.message ?? '', /^NetworkAttachmentDefinition demo\/broken: spec\.config ".*": is not valid JSON .*; write the CNI configuration/);
    assert.deepEqual(p.unservable, [{ network: 'demo/vf', type: 'sriov', reason: p.unservable[0]?.reason }]);
    assert.deepEqual(p.servable, [{ network: 'demo/good', type: 'macvlan' }], "the servable network with its type (the unservable gauge's zero)");
    assert.deepEqual(
      p.state.clusterTargets.map((t) => t.service),
      ['demo/web'],
      'only the served network has cluster-IP targets',
    );
  });
  void test('NodePort Local: local endpoints by nodeName; health counts ready local endpoints', () => {
    const p = planNode(input());
    assert.equal(p.state.nodePorts.length, 1);
    const np = p.state.nodePorts[0];
    assert.equal(np?.nodePort, 30080);
    assert.equal(np?.policy, 'Local');
    assert.deepEqual(
      np?.localEndpoints.map((e) => e.ip),
      ['192.168.101.3', '192.168.101.5'],
    );
    assert.deepEqual(p.healthChecks, [{ service: 'demo/web', localEndpoints: 1 }]);
  });
  void test('the Node annotation is the only source; a NAD range is ignored with an Event; a bad one is an Event on the Node; no address at all says which annotation to set', () => {
    const pinned = planNode(input({ node: node({ [NODE_ADDRESSES_ANNOTATION]: 'demo/good=192.168.101.9/24', [NODE_PARENTS_ANNOTATION]: 'demo/good=ens4' }) }));
    assert.equal(pinned.state.networks[0]?.ipv4, '192.168.101.9');
    // A tenant's NAD range (another namespace's backend address, or a /15) never reaches the host.
    const ranged = planNode(input({ node: node(), nads: [nad('good', { type: 'macvlan', master: 'ens4' }, { [NODE_ADDRESS_RANGE_ANNOTATION]: '10.0.0.0-10.1.255.254/15' })] }));
    assert.deepEqual(ranged.interfaces, []);
    assert.deepEqual(ranged.state.networks, []);
    assert.ok(ranged.problems.some((x) => x.kind === 'NetworkAttachmentDefinition' && x.reason === 'NodeAddressRangeIgnored' && x.message.includes(NODE_ADDRESSES_ANNOTATION)));
    const withNode = planNode(input({ nads: [nad('good', { type: 'macvlan', master: 'ens4' }, { [NODE_ADDRESS_RANGE_ANNOTATION]: '10.0.0.0-10.1.255.254/15' })] }));
    assert.deepEqual(withNode.interfaces[0]?.addresses, [{ family: 4, address: '192.168.101.211', prefix: 24 }]);
    const bad = planNode(input({ node: node({ [NODE_ADDRESSES_ANNOTATION]: 'good=1.2.3.4/24' }) }));
    assert.ok(bad.problems.some((x) => x.kind === 'Node' && x.reason === 'InvalidNodeAddresses' && /^Node w1: annotation multus-proxy\.k8s\.cni\.cncf\.io\/node-addresses/.test(x.message)));
    assert.equal(bad.interfaces.length, 0);
    const none = planNode(input({ node: node(), nads: [nad('good', { type: 'macvlan', master: 'ens4' })] }));
    assert.ok(none.problems.some((x) => x.reason === 'NoNodeAddress' && x.message.includes(NODE_ADDRESSES_ANNOTATION) && !x.message.includes(NODE_ADDRESS_RANGE_ANNOTATION)));
  });
  void test("the parent is the admin's: a NAD master that differs is overridden, with an Event on the Node naming both", () => {
    const p = planNode(input({ node: node({ [NODE_ADDRESSES_ANNOTATION]: 'demo/good=192.168.101.211/24', [NODE_PARENTS_ANNOTATION]: 'demo/good=eth9' }) }));
    assert.deepEqual(
      p.interfaces.map((i) => [i.kind, i.parent]),
      [['macvlan', 'eth9']],
    );
    assert.deepEqual(
      p.state.networks.map((n) => n.network.name),
      ['good'],
    );
    const over = p.problems.filter((x) => x.reason === 'ParentOverridden');
    assert.deepEqual(
      over.map((x) => [x.kind, x.name]),
      [['Node', 'w1']],
    );
    assert.match(
      over[0]?.message ?? '',
      /network demo\/good: node w1 uses the parent "eth9" from the Node annotation multus-proxy\.k8s\.cni\.cncf\.io\/node-parents, not the NAD's master \(or bridge\) "ens4"/,
    );
    assert.deepEqual(p.parentNotConfigured, []);
    // Equal: no Event. A bridge network's bridge is the admin's too.
    assert.ok(!planNode(input()).problems.some((x) => x.reason === 'ParentOverridden'));
    const bridged = planNode(
      input({
        nads: [nad('good', { type: 'bridge', bridge: 'tenant-br' })],
        node: node({ [NODE_ADDRESSES_ANNOTATION]: 'demo/good=192.168.101.211/24', [NODE_PARENTS_ANNOTATION]: 'demo/good=br-admin' }),
      }),
    );
    assert.deepEqual(
      bridged.interfaces.map((i) => [i.kind, i.parent]),
      [['veth', 'br-admin']],
    );
  });
  void test("no parent from the admin: not served, a ParentNotConfigured Event on the Node with the exact command, counted; --parent-from-nad keeps the NAD's master", () => {
    const addrsOnly = node({ [NODE_ADDRESSES_ANNOTATION]: 'demo/good=192.168.101.211/24;demo/other=10.1.0.5/16', [NODE_PARENTS_ANNOTATION]: 'demo/other=ens7' });
    const p = planNode(input({ node: addrsOnly }));
    assert.deepEqual(p.interfaces, []);
    assert.deepEqual(p.state.networks, []);
    assert.deepEqual(p.state.clusterTargets, []);
    assert.deepEqual(p.state.nodePorts, []);
    assert.deepEqual(p.parentNotConfigured, ['demo/good']);
    const why = p.problems.filter((x) => x.reason === 'ParentNotConfigured');
    assert.deepEqual(
      why.map((x) => [x.kind, x.name]),
      [['Node', 'w1']],
    );
    assert.match(why[0]?.message ?? '', /^network demo\/good is not served on node w1: .* The NAD's master \(or bridge\) is "ens4"/);
    assert.ok(why[0]?.message.includes(`kubectl annotate node w1 --overwrite ${NODE_PARENTS_ANNOTATION}='demo/other=ens7;demo/good=ens4'`), why[0]?.message);
    // No annotation at all: the same, not an error.
    assert.deepEqual(planNode(input({ node: node({ [NODE_ADDRESSES_ANNOTATION]: 'demo/good=192.168.101.211/24' }) })).parentNotConfigured, ['demo/good']);

    const upgrade = planNode(input({ node: addrsOnly, parentFromNad: true }));
    assert.deepEqual(
      upgrade.interfaces.map((i) => i.parent),
      ['ens4'],
    );
    assert.deepEqual(upgrade.parentNotConfigured, []);
    assert.ok(!upgrade.problems.some((x) => x.reason === 'ParentNotConfigured' || x.reason === 'ParentOverridden'));
    // The admin's entry still wins under --parent-from-nad.
    assert.deepEqual(
      planNode(input({ parentFromNad: true, node: node({ [NODE_ADDRESSES_ANNOTATION]: 'demo/good=192.168.101.211/24', [NODE_PARENTS_ANNOTATION]: 'demo/good=eth9' }) })).interfaces.map(
        (i) => i.parent,
      ),
      ['eth9'],
    );
  });
  void test('a malformed node-parents serves nothing on this node (even under --parent-from-nad), with an Event naming the Node, the key, the value and the fix', () => {
    for (const parentFromNad of [false, true]) {
      const p = planNode(input({ parentFromNad, node: node({ [NODE_ADDRESSES_ANNOTATION]: 'demo/good=192.168.101.211/24', [NODE_PARENTS_ANNOTATION]: 'demo/good=ens4 ens5' }) }));
      assert.deepEqual(p.interfaces, []);
      const bad = p.problems.filter((x) => x.reason === 'InvalidNodeParents');
      assert.equal(bad.length, 1);
      assert.match(
        bad[0]?.message ?? '',
        /^Node w1: annotation multus-proxy\.k8s\.cni\.cncf\.io\/node-parents "demo\/good=ens4 ens5": entry 1 \(demo\/good\): the interface name "ens4 ens5" contains .*; .*write "<namespace>\/<nad>=<interface>"/,
      );
    }
  });
  void test("the refusal holds for the admin's parent too: the uplink named by mistake is refused", () => {
    const p = planNode(input({ node: node({ [NODE_ADDRESSES_ANNOTATION]: 'demo/good=192.168.101.211/24', [NODE_PARENTS_ANNOTATION]: 'demo/good=eth0' }) }));
    const eth0: ExistingLink = { name: 'eth0', kind: '', up: true, addresses: [{ family: 4, address: '10.0.0.11', prefix: 24 }] };
    const plan = planHostInterfaces(p.interfaces, [eth0], { internalIPs: ['10.0.0.11'], defaultRouteDevs: ['eth0'] });
    assert.deepEqual(plan.lines, []);
    assert.match(
      plan.refused.join('\n'),
      /network demo\/good is not served on this node: its parent eth0 holds the node's InternalIP 10\.0\.0\.11\. .*name it in the Node annotation multus-proxy\.k8s\.cni\.cncf\.io\/node-parents/,
    );
  });
  void test('Services not opted in, and NADs that do not exist yet, are ignored', () => {
    const foreign: V1Service = { metadata: { name: 'plain', namespace: 'demo' }, spec: { type: 'NodePort', clusterIP: '10.96.0.20', ports: [{ port: 80, nodePort: 30099 }] } };
    const p = planNode(input({ services: [...input().services, foreign, svc('later', 'not-yet', { type: 'NodePort', clusterIP: '10.96.0.21', ports: [{ port: 80, nodePort: 30098 }] })] }));
    assert.ok(!p.state.nodePorts.some((t) => t.nodePort === 30099 || t.nodePort === 30098));
    assert.ok(!p.problems.some((x) => x.name === 'not-yet'));
  });
});

void describe('parentRefusal (pure)', () => {
  const w = hostInterfaceFor({ namespace: 'demo', name: 'good' }, { servable: true, plugin: 'macvlan', parent: 'cni0', mode: 'bridge' }, [{ family: 4, address: '192.168.101.9', prefix: 24 }]);
  const link = (name: string, address?: string): ExistingLink => ({ name, kind: 'bridge', up: true, addresses: address === undefined ? [] : [{ family: 4, address, prefix: 24 }] });
  void test('an InternalIP on the parent or a default route through it refuses; anything else does not', () => {
    assert.match(parentRefusal(w, [link('cni0', '10.0.0.11')], { internalIPs: ['10.0.0.11'], defaultRouteDevs: [] }) ?? '', /holds the node's InternalIP 10\.0\.0\.11/);
    assert.match(parentRefusal(w, [link('cni0')], { internalIPs: ['10.0.0.11'], defaultRouteDevs: ['cni0'] }) ?? '', /default route/);
    assert.equal(parentRefusal(w, [link('cni0', '192.168.101.1')], { internalIPs: ['10.0.0.11'], defaultRouteDevs: ['eth0'] }), undefined);
    const plan = planHostInterfaces([w], [link('cni0', '10.0.0.11')], { internalIPs: ['10.0.0.11'], defaultRouteDevs: [] });
    assert.deepEqual(plan.lines, []);
    assert.equal(plan.refused.length, 1);
  });
});

void describe('planNode: LoadBalancer', () => {
  const lb = (spec: Partial<NonNullable<V1Service['spec']>>, ingress: { ip?: string; ipMode?: string }[]): V1Service => ({
    ...svc('lb', 'good', { type: 'LoadBalancer', clusterIP: '10.96.0.20', clusterIPs: ['10.96.0.20'], ports: [{ port: 80, protocol: 'TCP', nodePort: 30090 }], ...spec }),
    status: { loadBalancer: { ingress } },
  });
  const lbSlice = slice('lb', 'good', [
    { ip: '192.168.101.3', node: 'w1' },
    { ip: '192.168.101.4', node: 'w2' },
  ]);
  const plan = (s: V1Service): ReturnType<typeof planNode> => planNode(input({ services: [s], slices: [lbSlice] }));

  void test('Cluster: each VIP ingress IP on the Service port, all endpoints; the node port too; the node reaches the VIP itself', () => {
    const p = plan(lb({}, [{ ip: '192.168.101.240' }, { ip: '192.168.101.241', ipMode: 'VIP' }]));
    assert.deepEqual(
      p.state.loadBalancers?.map((t) => [t.ingressIP, t.base.port, t.policy, t.base.endpoints.length, t.sourceRanges]),
      [
        ['192.168.101.240', 80, 'Cluster', 2, undefined],
        ['192.168.101.241', 80, 'Cluster', 2, undefined],
      ],
    );
    assert.deepEqual(
      p.state.nodePorts.map((t) => t.nodePort),
      [30090],
    );
    assert.deepEqual(
      p.state.clusterTargets.map((t) => `${t.clusterIP}${t.ingress === true ? ' ingress' : ''}`),
      ['10.96.0.20', '192.168.101.240 ingress', '192.168.101.241 ingress'],
    );
    assert.deepEqual(p.problems, []);
  });
  void test('Local: local endpoints only; the health check counts them on healthCheckNodePort, without node ports too', () => {
    const p = plan(lb({ externalTrafficPolicy: 'Local', healthCheckNodePort: 32000, allocateLoadBalancerNodePorts: false, ports: [{ port: 80, protocol: 'TCP' }] }, [{ ip: '192.168.101.240' }]));
    assert.deepEqual(
      p.state.loadBalancers?.map((t) => [t.policy, t.localEndpoints.map((e) => e.ip)]),
      [['Local', ['192.168.101.3']]],
    );
    assert.deepEqual(p.state.nodePorts, [], 'allocateLoadBalancerNodePorts: false: no node port rules, the ingress IP stays');
    assert.deepEqual(p.healthChecks, [{ service: 'demo/lb', port: 32000, localEndpoints: 1 }]);
  });
  void test('ipMode Proxy: the address is not programmed, neither for outside clients nor for the node', () => {
    const p = plan(lb({}, [{ ip: '192.168.101.240', ipMode: 'Proxy' }]));
    assert.deepEqual(p.state.loadBalancers, []);
    assert.ok(!p.state.clusterTargets.some((t) => t.ingress === true));
  });
  void test("loadBalancerSourceRanges: the family's CIDRs, masked; only the other family listed: none admitted", () => {
    const p = plan(lb({ loadBalancerSourceRanges: ['198.51.100.7/24', '2001:db8::/32'] }, [{ ip: '192.168.101.240' }]));
    assert.deepEqual(
      p.state.loadBalancers?.map((t) => t.sourceRanges),
      [['198.51.100.0/24']],
    );
    const closed = plan(lb({ loadBalancerSourceRanges: ['2001:db8::/32'] }, [{ ip: '192.168.101.240' }]));
    assert.deepEqual(
      closed.state.loadBalancers?.map((t) => t.sourceRanges),
      [[]],
    );
    // The node's own source (192.168.101.211) is outside: it does not short-circuit to the VIP either.
    assert.ok(!closed.state.clusterTargets.some((t) => t.ingress === true));
  });
  void test("refused ingress IPs: the node's own addresses (InternalIP, its address on the network), loopback, garbage: a Warning Event on the Service each, nothing programmed", () => {
    const p = plan(lb({}, [{ ip: '10.0.0.11' }, { ip: '192.168.101.211' }, { ip: '127.0.0.1' }, { ip: 'x' }]));
    assert.deepEqual(p.state.loadBalancers, []);
    assert.ok(!p.state.clusterTargets.some((t) => t.ingress === true && (t.clusterIP === '10.0.0.11' || t.clusterIP === '192.168.101.211')), "never a DNAT on the node's own address");
    const refused = p.problems.filter((x) => x.kind === 'Service' && x.name === 'lb' && x.namespace === 'demo' && x.reason === 'LoadBalancerInputRefused');
    assert.equal(refused.length, 4);
    assert.match(refused[0]?.message ?? '', /^Service demo\/lb: status\.loadBalancer\.ingress\[0\]\.ip "10\.0\.0\.11": is a node's or the reading pod's own address 10\.0\.0\.11: it is not served; /);
    assert.match(refused[1]?.message ?? '', /own address 192\.168\.101\.211/);
  });
  void test('a NodePort or ClusterIP Service with a stale status gets no ingress rules', () => {
    const stale = { ...lb({ type: 'NodePort' }, [{ ip: '192.168.101.240' }]) };
    const p = plan(stale);
    assert.deepEqual(p.state.loadBalancers, []);
    assert.ok(!p.state.clusterTargets.some((t) => t.ingress === true));
  });
});
