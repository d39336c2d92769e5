/**
 * The node agent program itself (cmd/node-agent/main.ts, run with only NET_ADMIN and NET_RAW and
 * a token of its own ServiceAccount under the install component's RBAC)
 * inside a "node" namespace of the two-node topology, against a real kube-apiserver: it reads the
 * Service, EndpointSlices, NADs and its Node, makes its interface, serves the NodePort and the
 * healthCheckNodePort, reports an unservable NAD as a Warning Event, and a restart under a client
 * loop fails no request (rules and interface stay, and are adopted). The parent is the admin's
 * (Node annotation node-parents): net-a's NAD names a decoy link as its master, and the agent's
 * interface is on the admin's parent all the same; net-b has an address but no parent from the
 * admin and is not served, with a Warning Event on the Node and a metric. A LoadBalancer Service
 * (Local, no node ports) whose status the test writes as a load-balancer implementation would:
 * its ingress IP is served, its healthCheckNodePort answers with the local count, and an ingress
 * IP equal to the node's own address is refused with a Warning Event on the Service.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createTopology, httpRequests, startBackend, type Node, type Place, type Pod, type Topology } from '../harness/netns.js';
import { startApiserverRelay, type ApiserverRelay } from '../harness/apiserver-relay.js';
import { uniqueName, useControlPlane, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { apiPath } from '../../src/kube/paths.js';
import {
  MANAGED_BY,
  MANAGED_BY_LABEL,
  NETWORK_LABEL,
  NODE_ADDRESSES_ANNOTATION,
  NODE_PARENTS_ANNOTATION,
  PROXY_NAME,
  PROXY_NAME_LABEL,
  SERVICE_NAME_LABEL,
  SERVICE_NETWORK_ANNOTATION,
} from '../../src/keys.js';
import { networkLabelValue } from '../../src/annotations/network-label.js';
import type { CoreV1Event, V1Service } from '../../src/kube/types.js';
import { hostInterfaceName } from '../../cmd/node-agent/host-interface.js';
import { render } from '../deploy/kustomize.js';

const AGENT_MAIN = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'cmd', 'node-agent', 'main.ts');
const HEALTH_PORT = 19190;
const NODE_V4 = '192.168.101.250';
const NET_B_V4 = '192.168.102.250';
/** The LoadBalancer's ingress IP, in net-a's subnet, as a MetalLB pool would hand it out. */
const VIP = '192.168.101.240';
/** net-a's NAD names this link (a veth of the node, off the pods' segment) as its master; the admin names eth1. */
const DECOY = 'decoy0';

interface Agent {
  readonly process: ChildProcess;
  stderr(): string;
  terminate(): Promise<number | null>;
}

function spawnAgent(topo: Topology, node: Place, kubeconfig: string, nodeName: string, rules: RuleKind): Agent {
  const env = { NODE_NAME: nodeName, KUBECONFIG: kubeconfig, HEALTH_PORT: String(HEALTH_PORT), MIN_SYNC_INTERVAL_MS: '50', LOG_LEVEL: 'info', IPTABLES_BACKEND: 'nft', DATAPLANE_BACKEND: rules };
  const child = topo.spawn(node, [
    'setpriv',
    '--bounding-set=-all,+net_admin,+net_raw',
    '--',
    'env',
    ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
    process.execPath,
    '--import',
    'tsx',
    AGENT_MAIN,
  ]);
  let text = '';
  child.stdout?.on('data', (b: Buffer) => (text += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (text += b.toString()));
  const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    process: child,
    stderr: () => text.slice(-4000),
    async terminate() {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const code = await exit;
      clearTimeout(timer);
      return code;
    },
  };
}

async function probe(topo: Topology, where: Place, url: string): Promise<number> {
  const r = await topo.run(where, ['curl', '-s', '-o', '/dev/null', '-m', '2', '-w', '%{http_code}', url], { allowFail: true });
  return Number(r.stdout.trim()) || 0;
}

/** HTTP GETs on new connections, one every `gapMs`, for `durationMs`; prints the replies as JSON. */
const LOOP_JS = `
const http = require('node:http');
const [url, durationMs, gapMs] = process.argv.slice(1);
const one = () => new Promise((resolve) => {
  const req = http.get(url, { agent: false, timeout: 2000 }, (res) => { let b = ''; res.on('data', (d) => (b += d)); res.on('end', () => resolve({ ok: res.statusCode === 200 })); });
  req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
  req.on('error', (e) => resolve({ ok: false, error: e.code || e.message }));
});
(async () => { const end = Date.now() + Number(durationMs); const out = []; while (Date.now() < end) { out.push(await one()); await new Promise((r) => setTimeout(r, Number(gapMs))); } console.log(JSON.stringify(out)); })();
`;

type RuleKind = 'iptables' | 'nftables';

/** The agent's nat rules as text: iptables-save's, or our nftables table's listing. */
async function natRules(topo: Topology, node: Place, rules: RuleKind): Promise<string> {
  const argv = rules === 'iptables' ? ['iptables-nft-save', '-t', 'nat'] : ['nft', 'list', 'table', 'inet', 'multus_proxy_node'];
  return (await topo.run(node, argv, { allowFail: true })).stdout;
}

for (const rules of ['iptables', 'nftables'] as const)
  void describe(`node agent program (DATAPLANE_BACKEND=${rules})`, () => {
    let cp: ControlPlane;
    let topo: Topology;
    let relay: ApiserverRelay;
    let node1: Node;
    let a: Pod;
    let b: Pod;
    let client: Pod;
    let agent: Agent | undefined;
    let ns: string;
    let dir: string;

    before(async () => {
      for (const bin of ['setpriv', 'curl', 'iptables-nft-restore', 'nft', 'conntrack']) execFileSync('sh', ['-c', `command -v ${bin}`]);
      cp = await useControlPlane();
      ns = uniqueName('na');
      await cp.createNamespace(ns);
      dir = mkdtempSync(join(tmpdir(), 'mpx-node-agent-'));
      topo = await createTopology();
      node1 = await topo.addNode('node1');
      const node2 = await topo.addNode('node2');
      a = await topo.addPod('a', { node: node1 });
      b = await topo.addPod('b', { node: node2 });
      client = await topo.addPod('client');
      await startBackend(topo, a, { httpPort: 80 });
      await startBackend(topo, b, { httpPort: 80 });
      relay = await startApiserverRelay(topo, cp.server, dir);
      await relay.attach(node1);
      await topo.run(node1, ['ip', '-batch', '-'], { input: `link add ${DECOY} type veth peer name decoy1\nlink set ${DECOY} up\nlink set decoy1 up\n` });

      const nodeName = `${ns}-node1`;
      await cp.client.create(apiPath('', 'v1', 'nodes'), {
        metadata: {
          name: nodeName,
          annotations: { [NODE_ADDRESSES_ANNOTATION]: `${ns}/net-a=${NODE_V4}/24;${ns}/net-b=${NET_B_V4}/24`, [NODE_PARENTS_ANNOTATION]: `${ns}/net-a=${node1.parent}` },
        },
        status: { addresses: [{ type: 'InternalIP', address: '10.0.0.11' }] },
      });
      await cp.client.create(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', ns), {
        apiVersion: 'k8s.cni.cncf.io/v1',
        kind: 'NetworkAttachmentDefinition',
        metadata: { name: 'net-a', namespace: ns },
        spec: { config: JSON.stringify({ cniVersion: '0.4.0', type: 'macvlan', master: DECOY, mode: 'bridge' }) },
      });
      await cp.client.create(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', ns), {
        apiVersion: 'k8s.cni.cncf.io/v1',
        kind: 'NetworkAttachmentDefinition',
        metadata: { name: 'net-b', namespace: ns },
        spec: { config: JSON.stringify({ cniVersion: '0.4.0', type: 'macvlan', master: node1.parent, mode: 'bridge' }) },
      });
      await cp.client.create(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', ns), {
        apiVersion: 'k8s.cni.cncf.io/v1',
        kind: 'NetworkAttachmentDefinition',
        metadata: { name: 'vf', namespace: ns },
        spec: { config: JSON.stringify({ cniVersion: '0.4.0', type: 'sriov', deviceID: '0000:00:01.0' }) },
      });
      const svc = (name: string, net: string, spec: Partial<NonNullable<V1Service['spec']>>): V1Service => ({
        metadata: { name, namespace: ns, labels: { [PROXY_NAME_LABEL]: PROXY_NAME }, annotations: { [SERVICE_NETWORK_ANNOTATION]: net } },
        spec: { type: 'NodePort', ports: [{ port: 80, protocol: 'TCP' }], ...spec },
      });
      await cp.client.create(apiPath('', 'v1', 'services', ns), svc('web', 'net-a', { ports: [{ port: 80, protocol: 'TCP', nodePort: 30080 }] }));
      const local = await cp.client.create<V1Service>(
        apiPath('', 'v1', 'services', ns),
        svc('only-b', 'net-a', { externalTrafficPolicy: 'Local', ports: [{ port: 80, protocol: 'TCP', nodePort: 30082 }] }),
      );
      assert.equal(local.spec?.healthCheckNodePort, undefined, 'Kubernetes allocates healthCheckNodePort for LoadBalancer only');
      await cp.client.create(apiPath('', 'v1', 'services', ns), svc('web-b', 'net-b', { ports: [{ port: 80, protocol: 'TCP', nodePort: 30084 }] }));
      await cp.client.create(apiPath('', 'v1', 'services', ns), svc('sriov', 'vf', { ports: [{ port: 80, protocol: 'TCP', nodePort: 30083 }] }));
      const slice = (service: string, eps: { ip: string; node: string }[]): unknown => ({
        metadata: {
          name: `${service}-v4`,
          namespace: ns,
          labels: { [SERVICE_NAME_LABEL]: service, [MANAGED_BY_LABEL]: MANAGED_BY, [NETWORK_LABEL]: networkLabelValue({ namespace: ns, name: 'net-a' }) },
          annotations: { [SERVICE_NETWORK_ANNOTATION]: `${ns}/net-a` },
        },
        addressType: 'IPv4',
        ports: [{ name: '', port: 80, protocol: 'TCP' }],
        endpoints: eps.map((e) => ({ addresses: [e.ip], nodeName: e.node, conditions: { ready: true, serving: true, terminating: false } })),
      });
      await cp.client.create(
        apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns),
        slice('web', [
          { ip: a.net1.ipv4, node: nodeName },
          { ip: b.net1.ipv4, node: `${ns}-node2` },
        ]),
      );
      await cp.client.create(apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns), slice('only-b', [{ ip: b.net1.ipv4, node: `${ns}-node2` }]));
      // LoadBalancer, Local, no node ports; the status as MetalLB's controller writes it (status
      // subresource), with a second ingress IP that is the node's own address (refused).
      const lb = await cp.client.create<V1Service>(
        apiPath('', 'v1', 'services', ns),
        svc('lb', 'net-a', { type: 'LoadBalancer', externalTrafficPolicy: 'Local', allocateLoadBalancerNodePorts: false }),
      );
      assert.ok((lb.spec?.healthCheckNodePort ?? 0) > 0, 'the apiserver allocates healthCheckNodePort for LoadBalancer Local');
      lbHealthPort = lb.spec?.healthCheckNodePort ?? 0;
      await cp.client.replace(apiPath('', 'v1', 'services', ns, 'lb') + '/status', { ...lb, status: { loadBalancer: { ingress: [{ ip: VIP, ipMode: 'VIP' }, { ip: NODE_V4 }] } } });
      await cp.client.create(
        apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns),
        slice('lb', [
          { ip: a.net1.ipv4, node: nodeName },
          { ip: b.net1.ipv4, node: `${ns}-node2` },
        ]),
      );
      // Local keeps the client's address: pod a answers it through its node.
      await topo.run(a, ['ip', 'route', 'add', `${client.net1.ipv4}/32`, 'via', NODE_V4]);
      // The agent runs with a token of its own ServiceAccount, bound to the component's ClusterRole
      // rules (deploy/components/node-agent, rendered by kustomize): a missing permission fails here.
      const role = (await render('deploy/overlays/node-agent')).find((o) => o.kind === 'ClusterRole' && o.metadata?.name === 'multus-proxy-node') as { rules: unknown[] };
      await cp.client.create(apiPath('rbac.authorization.k8s.io', 'v1', 'clusterroles'), { metadata: { name: `${ns}-node-agent` }, rules: role.rules });
      await cp.client.create(apiPath('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings'), {
        metadata: { name: `${ns}-node-agent` },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `${ns}-node-agent` },
        subjects: [{ kind: 'ServiceAccount', name: 'node-agent', namespace: ns }],
      });
      kubeconfig = await cp.kubeconfigFor(ns, 'node-agent');
      agent = spawnAgent(topo, node1, kubeconfig, nodeName, rules);
    });
    let kubeconfig = '';
    let lbHealthPort = 0;

    after(async () => {
      await agent?.terminate();
      await relay?.close();
      await topo?.teardown();
      if (cp !== undefined) {
        // Node ports are allocated cluster-wide and the other back end's run reuses them on the same
        // apiserver (no namespace controller runs to delete these with their namespace).
        for (const name of ['web', 'only-b', 'web-b', 'sriov', 'lb']) await cp.client.delete(apiPath('', 'v1', 'services', ns, name));
        await cp.client.delete(apiPath('', 'v1', 'nodes', undefined, `${ns}-node1`));
        await cp.client.delete(apiPath('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings', undefined, `${ns}-node-agent`));
        await cp.client.delete(apiPath('rbac.authorization.k8s.io', 'v1', 'clusterroles', undefined, `${ns}-node-agent`));
      }
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    });

    void test("ready after the first sync; the external client reaches the NodePort through the agent's interface", async () => {
      const s = agent as Agent;
      await waitFor(
        '/readyz 200',
        async () => (await probe(topo, node1, `http://127.0.0.1:${HEALTH_PORT}/readyz`)) === 200,
        60_000,
        () => s.stderr(),
      );
      const links = (await topo.run(node1, ['ip', '-br', 'link'])).stdout;
      assert.ok(links.includes(hostInterfaceName({ namespace: ns, name: 'net-a' })), links);
      const replies = await httpRequests(topo, client, `http://${NODE_V4}:30080/`, 20);
      assert.deepEqual(
        replies.filter((r) => r.error !== undefined),
        [],
      );
      assert.ok(replies.some((r) => r.name === 'a') && replies.some((r) => r.name === 'b'));
      // Served by the back end asked for, and only by it (the other one's rules are absent).
      const other = await natRules(topo, node1, rules === 'iptables' ? 'nftables' : 'iptables');
      assert.ok((await natRules(topo, node1, rules)).includes(rules === 'iptables' ? 'MPXN-NODEPORTS' : 'nat-prerouting'), `${rules} rules written`);
      assert.ok(!other.includes('MPXN-NODEPORTS') && !other.includes('nat-prerouting'), `no rules of the other back end: ${other}`);
    });

    void test("the interface hangs off the admin's parent, not the NAD's master; the override is a Warning Event on the Node naming both", async () => {
      const ifname = hostInterfaceName({ namespace: ns, name: 'net-a' });
      const [link] = JSON.parse((await topo.run(node1, ['ip', '-d', '-j', 'link', 'show', ifname])).stdout) as { link?: string }[];
      assert.equal(link?.link, node1.parent, `${ifname} is a macvlan of the admin's ${node1.parent}, not of the NAD's ${DECOY}`);
      assert.doesNotMatch((await topo.run(node1, ['ip', '-br', 'link'])).stdout, new RegExp(`^mpx\\S*@${DECOY} `, 'm'), 'nothing of ours on the decoy');
      await waitFor(
        'the ParentOverridden Event on the Node',
        async () => {
          const events = await cp.client.list<CoreV1Event>(apiPath('', 'v1', 'events', 'default'));
          return events.items.some(
            (e) =>
              e.reason === 'ParentOverridden' &&
              e.type === 'Warning' &&
              e.involvedObject.kind === 'Node' &&
              e.involvedObject.name === `${ns}-node1` &&
              (e.message ?? '').includes(`"${node1.parent}"`) &&
              (e.message ?? '').includes(`"${DECOY}"`),
          );
        },
        20_000,
      );
    });

    void test('a network without a parent from the admin is not served: no interface, a ParentNotConfigured Event on the Node with the command to run, and the metric', async () => {
      const nodeName = `${ns}-node1`;
      const links = (await topo.run(node1, ['ip', '-br', 'link'])).stdout;
      assert.ok(!links.includes(hostInterfaceName({ namespace: ns, name: 'net-b' })), links);
      assert.doesNotMatch((await topo.run(node1, ['ip', '-br', '-4', 'addr'])).stdout, new RegExp(NET_B_V4.replace(/\./g, '\\.')));
      let message = '';
      await waitFor(
        'the ParentNotConfigured Event on the Node',
        async () => {
          const events = await cp.client.list<CoreV1Event>(apiPath('', 'v1', 'events', 'default'));
          message = events.items.find((e) => e.reason === 'ParentNotConfigured' && e.type === 'Warning' && e.involvedObject.kind === 'Node' && e.involvedObject.name === nodeName)?.message ?? '';
          return message !== '';
        },
        20_000,
      );
      assert.match(message, new RegExp(`^network ${ns}/net-b is not served on node ${nodeName}: .*The NAD's master \\(or bridge\\) is "${node1.parent}"`));
      assert.ok(message.includes(`kubectl annotate node ${nodeName} --overwrite ${NODE_PARENTS_ANNOTATION}='${ns}/net-a=${node1.parent};${ns}/net-b=${node1.parent}'`), message);
      const metrics = (await topo.run(node1, ['curl', '-s', '-m', '2', `http://127.0.0.1:${HEALTH_PORT}/metrics`])).stdout;
      assert.match(metrics, /multus_proxy_node_refused_networks\{reason="ParentNotConfigured"\} 1/);
      assert.match(metrics, /multus_proxy_node_networks 1\b/);
    });

    void test('Local health: 503 on a node without local endpoints (from the segment, on the node address); the Local port refuses', async () => {
      assert.equal(await probe(topo, client, `http://${NODE_V4}:${HEALTH_PORT}/services/${ns}/only-b`), 503);
      assert.equal(await probe(topo, client, `http://${NODE_V4}:${HEALTH_PORT}/services/${ns}/web`), 404, 'Cluster Services have no health path');
      const refused = await httpRequests(topo, client, `http://${NODE_V4}:30082/`, 2);
      assert.deepEqual([...new Set(refused.map((r) => r.error))], ['ECONNREFUSED']);
    });

    void test("LoadBalancer: the ingress IP is served (Local: the local endpoint, the client address kept), healthCheckNodePort answers the local count, the node's own address as an ingress IP is refused with an Event", async () => {
      // MetalLB's L2 announcement: the client sends the VIP's frames to node1's parent.
      const mac = (JSON.parse((await topo.run(node1, ['ip', '-j', 'link', 'show', node1.parent])).stdout) as { address: string }[])[0]?.address ?? '';
      await topo.run(client, ['ip', 'neigh', 'replace', VIP, 'lladdr', mac, 'dev', 'net1', 'nud', 'permanent']);
      let replies = await httpRequests(topo, client, `http://${VIP}/`, 10);
      await waitFor(
        'the ingress IP served',
        async () => {
          replies = await httpRequests(topo, client, `http://${VIP}/`, 10);
          return replies.every((r) => r.name === 'a');
        },
        20_000,
        () => JSON.stringify(replies),
      );
      assert.deepEqual([...new Set(replies.map((r) => r.peer))], [client.net1.ipv4], 'Local: the source is kept');
      const health = await topo.run(client, ['curl', '-s', '-m', '2', '-w', ' %{http_code}', `http://${NODE_V4}:${lbHealthPort}/`]);
      assert.equal(health.stdout, `{"service":{"namespace":"${ns}","name":"lb"},"localEndpoints":1,"serviceProxyHealthy":true} 200`);
      let message = '';
      await waitFor(
        'the LoadBalancerInputRefused Event on the Service',
        async () => {
          const events = await cp.client.list<CoreV1Event>(apiPath('', 'v1', 'events', ns));
          message = events.items.find((e) => e.reason === 'LoadBalancerInputRefused' && e.type === 'Warning' && e.involvedObject.kind === 'Service' && e.involvedObject.name === 'lb')?.message ?? '';
          return message !== '';
        },
        20_000,
      );
      assert.equal(
        message,
        `Service ${ns}/lb: status.loadBalancer.ingress[1].ip "${NODE_V4}": is a node's or the reading pod's own address ${NODE_V4}: it is not served; the load-balancer implementation must assign a unicast address from its pool that no node or pod holds`,
      );
      const nat = await natRules(topo, node1, rules);
      assert.ok(nat.includes(VIP), `the ingress IP is served: ${nat}`);
      assert.ok(!nat.includes(rules === 'iptables' ? `-d ${NODE_V4}/32 -p tcp -m tcp --dport 80 ` : `${NODE_V4} . tcp . 80 `), "no DNAT on the node's own address");
      const metrics = (await topo.run(node1, ['curl', '-s', '-m', '2', `http://127.0.0.1:${HEALTH_PORT}/metrics`])).stdout;
      assert.match(metrics, /multus_proxy_node_loadbalancer_frontends 1\b/);
    });

    void test('an unservable NAD (sriov) gets a Warning Event and a metric, the rest is served', async () => {
      await waitFor(
        'the Warning Event on NAD vf',
        async () => {
          const events = await cp.client.list<CoreV1Event>(apiPath('', 'v1', 'events', ns));
          return events.items.some((e) => e.reason === 'UnservableNetwork' && e.involvedObject.name === 'vf' && /type "sriov".*virtual function/.test(e.message ?? ''));
        },
        20_000,
      );
      const metrics = (await topo.run(node1, ['curl', '-s', '-m', '2', `http://127.0.0.1:${HEALTH_PORT}/metrics`])).stdout;
      assert.match(metrics, new RegExp(`multus_proxy_node_unservable_networks\\{network="${ns}/vf",type="sriov"\\} 1`));
    });

    void test('a restart under a NodePort client loop fails no request; the interface is adopted, not recreated', async () => {
      const ifname = hostInterfaceName({ namespace: ns, name: 'net-a' });
      const index = (await topo.run(node1, ['cat', `/sys/class/net/${ifname}/ifindex`])).stdout.trim();
      const loop = topo.run(client, [process.execPath, '-e', LOOP_JS, `http://${NODE_V4}:30080/`, '9000', '20']);
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(await (agent as Agent).terminate(), 0, 'exits 0 on SIGTERM');
      const nat = await natRules(topo, node1, rules);
      assert.ok(nat.includes(rules === 'iptables' ? 'MPXN-NODEPORTS' : `${NODE_V4} . tcp . 30080 : goto MPXN-NP-`), `rules stay when the agent exits: ${nat}`);
      agent = spawnAgent(topo, node1, kubeconfig, `${ns}-node1`, rules);
      const s = agent;
      await waitFor(
        '/readyz 200 after the restart',
        async () => (await probe(topo, node1, `http://127.0.0.1:${HEALTH_PORT}/readyz`)) === 200,
        60_000,
        () => s.stderr(),
      );
      const results = JSON.parse((await loop).stdout) as { ok: boolean; error?: string }[];
      assert.ok(results.length > 50, `the loop ran (${results.length} requests)`);
      assert.deepEqual(
        results.filter((r) => !r.ok),
        [],
        `${results.length} requests`,
      );
      assert.equal((await topo.run(node1, ['cat', `/sys/class/net/${ifname}/ifindex`])).stdout.trim(), index, 'same interface');
    });
  });
