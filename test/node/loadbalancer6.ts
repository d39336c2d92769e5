/**
 * A LoadBalancer Service over IPv6 on a secondary network, on the real node: the blog's backends and client pod in their own namespace, whose
 * NAD `macvlan1` is an IPv6 network on ens4 (whereabouts, `fd00:10:1:1::/64`); the node agent given
 * the node's IPv6 address on it; MetalLB (test/node/metallb.ts) with docs/loadbalancer.md's IPv6
 * pool, announcing by NDP on ens4; Services with `ipFamilies: [IPv6]` (the cluster's Service CIDR is
 * dual-stack, test/harness/node.ts). The outside client is a network namespace on ens4's segment with
 * 2001:db8:100::30, off the network's subnet as the IPv4 test's client, so Local's replies must go
 * back through the node. The primary network is IPv4 only, so the pods have no IPv6 default route:
 * the NAD's IPAM gives them a route to the client's subnet via the node's address on the network,
 * the path their IPv4 replies take through eth0 (docs/decisions/0034-loadbalancer-serving.md).
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { dump } from 'js-yaml';
import type { RealNode } from '../harness/node.js';
import { NODE } from '../harness/node-config.js';
import { chiSquareUniform, type UniformTest } from '../harness/chi-square.js';
import { blogFile, burstArrivals, type Burst, CLIENT, createNamespace, curlBurst, net1Addresses, pod, pods, SERVICE, sliceAddresses } from './cluster.js';
import { CONFIG_HEADING_V6, hostMac, ingressIps, installMetalLB, l2Announcers, METALLB_NAMESPACE, POOL_ANNOTATION, poolConfig, SegmentProbe, uninstallMetalLB } from './metallb.js';
import { AGENT_NAMESPACE, AGENT_SELECTOR, uninstallAgent } from './nodeport.js';
import { installAgent, until } from './tenant.js';
import { SERVICE_NETWORK_ANNOTATION, SERVICE_SELECTOR_ANNOTATION } from '../../src/keys.js';
import { ipToBigInt } from '../../src/annotations/ip.js';

const run = promisify(execFile);

export const LB6_NS = 'lb-v6';
/** The IPv6 network, the node's address on it (kept out of whereabouts' range with the pool), the outside client. */
export const V6 = {
  subnet: 'fd00:10:1:1::/64',
  excluded: 'fd00:10:1:1::c0/122',
  nodeAddress: 'fd00:10:1:1::fa',
  client: '2001:db8:100::30',
  clientSubnet: '2001:db8:100::/64',
  /** The route to the client's subnet via ens4, for MetalLB's NDP answers: above the one via the agent's interface, which forwarded replies take. */
  parentRouteMetric: 2048,
} as const;

export const LB6_SERVICES = { cluster: 'nginx-lb6', local: 'nginx-lb6-local' } as const;

/** The blog's NAD, IPv6: same name and parent, so the blog's Deployment and client pod apply unchanged. */
export function v6Nad(): object {
  const config = {
    cniVersion: '0.3.1',
    type: 'macvlan',
    master: NODE.parent,
    mode: 'bridge',
    ipam: { type: 'whereabouts', range: V6.subnet, exclude: [V6.excluded], routes: [{ dst: V6.clientSubnet, gw: V6.nodeAddress }] },
  };
  return { apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name: 'macvlan1', namespace: LB6_NS }, spec: { config: JSON.stringify(config) } };
}

function v6Service(name: string, policy: 'Cluster' | 'Local', pool: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: LB6_NS, annotations: { [SERVICE_NETWORK_ANNOTATION]: 'macvlan1', [SERVICE_SELECTOR_ANNOTATION]: `app=${SERVICE}`, [POOL_ANNOTATION]: pool } },
    spec: { type: 'LoadBalancer', ipFamilyPolicy: 'SingleStack', ipFamilies: ['IPv6'], externalTrafficPolicy: policy, ports: [{ protocol: 'TCP', port: 80 }] },
  };
}

export interface LoadBalancerV6Observations {
  agentInterface: string;
  pool: { first: string; last: string };
  vips: Record<keyof typeof LB6_SERVICES, string>;
  clusterIPs: Record<keyof typeof LB6_SERVICES, string[]>;
  backends: Record<string, string>;
  /** Who answered NDP for the Cluster address from the segment, and ens4's MAC. */
  ndpMac: string | undefined;
  ens4Mac: string;
  announcers: string[];
  cluster: Burst & { chiSquare: UniformTest };
  local: Burst;
  health: { port: number; status: number; body: string };
  sidecar: Burst & { clientNet1: string };
}

const okCount = (c: string[]): string => `${c.filter((x) => x === 'ok').length}/${c.length} ok`;
const url = (ip: string): string => `http://[${ip}]/`;

/** Runs the checks; everything it made (namespace, Services, MetalLB, agent, probe) is removed whether they passed or not. */
export async function runLoadBalancerV6(node: RealNode, log: (m: string) => void, n = 100): Promise<LoadBalancerV6Observations> {
  const probe = new SegmentProbe('mpxtest-lb6', 'mpxtestlb6', `${V6.client}/64`);
  const pool = poolConfig(undefined, CONFIG_HEADING_V6);
  let agentInterface = '';
  try {
    await createNamespace(node, LB6_NS, true);
    await node.apply(dump(v6Nad()));
    await node.apply(blogFile('deployment.yml'), LB6_NS);
    await node.apply(blogFile('pod.yml'), LB6_NS);
    // The agent serves a network once an opted-in Service names it: the Services come first. They
    // wait for their address until MetalLB and its IPv6 pool are there.
    await node.apply([v6Service(LB6_SERVICES.cluster, 'Cluster', pool.name), v6Service(LB6_SERVICES.local, 'Local', pool.name)].map((o) => dump(o)).join('---\n'));
    // The pods starting, MetalLB and the agent are independent of each other: side by side, and all
    // settle before a failure is thrown (nothing is still installing when the cleanup runs).
    const started = (async (): Promise<void> => {
      await node.wait(`deployment/${SERVICE}`, 'condition=Available', { namespace: LB6_NS, timeoutMs: 180_000 });
      await node.wait(`pod/${CLIENT}`, 'condition=Ready', { namespace: LB6_NS, timeoutMs: 180_000 });
    })();
    const agent = installAgent(node, `${LB6_NS}/macvlan1`, `${V6.nodeAddress}/64`).then((i) => (agentInterface = i));
    const metallb = installMetalLB(node, log).then(() => node.apply(pool.yaml));
    for (const r of await Promise.allSettled([started, agent, metallb])) if (r.status === 'rejected') throw r.reason;
    const vips = {} as Record<keyof typeof LB6_SERVICES, string>;
    const clusterIPs = {} as Record<keyof typeof LB6_SERVICES, string[]>;
    for (const [k, svc] of Object.entries(LB6_SERVICES) as [keyof typeof LB6_SERVICES, string][]) {
      vips[k] = await until(`MetalLB's address for ${svc}`, 60_000, async () => (await ingressIps(node, LB6_NS, svc))[0]);
      clusterIPs[k] = (await node.kubectl(['get', 'service', '-n', LB6_NS, svc, '-o', 'jsonpath={.spec.clusterIPs[*]}'])).trim().split(/\s+/);
    }
    const backendPods = (await pods(node, LB6_NS, `app=${SERVICE}`)).filter((p) => !p.metadata?.deletionTimestamp);
    const backends = Object.fromEntries(backendPods.map((p) => [p.metadata?.name ?? '', net1Addresses(p)[0] ?? '']));
    const names = Object.keys(backends);
    for (const svc of Object.values(LB6_SERVICES)) {
      await until(`the slices of ${svc}`, 30_000, async () => ((await sliceAddresses(node, LB6_NS, svc)).length === names.length ? true : undefined));
    }
    log(`IPv6 LoadBalancer addresses ${JSON.stringify(vips)}, cluster IPs ${JSON.stringify(clusterIPs)}; backends ${JSON.stringify(backends)}; agent interface ${agentInterface}`);

    await probe.create();
    // An IPv6 address is tentative until its duplicate address detection ends: curl cannot bind it before.
    await until('the client address past DAD', 10_000, async () => ((await host(['ip', '-n', probe.ns, '-6', 'addr', 'show', 'tentative'])).trim() === '' ? true : undefined));
    await host(['ip', '-6', 'route', 'replace', V6.clientSubnet, 'dev', agentInterface]);
    // MetalLB's speaker sends its neighbour advertisement through the IP stack out of ens4 (not as
    // a raw frame, as its ARP reply), and the kernel refuses it without a route to the solicitor via
    // ens4: "sendmsg: network is unreachable" (docs/loadbalancer.md, "MetalLB: an IPv6 pool").
    await host(['ip', '-6', 'route', 'replace', V6.clientSubnet, 'dev', NODE.parent, 'metric', String(V6.parentRouteMetric)]);
    for (const vip of Object.values(vips)) await probe.onLink(vip);
    await probe.onLink(V6.nodeAddress);
    const ndpMac = await probe.arpOwner(vips.cluster);
    const expect = SERVICE;
    await until('a first answer through the IPv6 Cluster address', 60_000, async () => ((await probe.curls(url(vips.cluster), 1, { expect }))[0] === 'ok' ? true : undefined));
    const c = await burstArrivals(node, LB6_NS, names, () => probe.curls(url(vips.cluster), n, { expect }));
    const cluster = { ...c, chiSquare: chiSquareUniform(names.map((p) => c.answeredBy[p] ?? 0)) };
    log(
      `IPv6 Cluster: ${okCount(cluster.curls)}, by ${JSON.stringify(cluster.answeredBy)} (chi-square ${cluster.chiSquare.statistic.toFixed(2)} <= ${cluster.chiSquare.critical}?), sources ${cluster.sources.join(', ')}; NDP for ${vips.cluster} answered by ${ndpMac} (ens4 ${hostMac(NODE.parent)})`,
    );

    await until('a first answer through the IPv6 Local address', 60_000, async () => ((await probe.curls(url(vips.local), 1, { expect }))[0] === 'ok' ? true : undefined));
    const local = await burstArrivals(node, LB6_NS, names, () => probe.curls(url(vips.local), 30, { expect }));
    log(`IPv6 Local: ${okCount(local.curls)}, by ${JSON.stringify(local.answeredBy)}, sources ${local.sources.join(', ')}`);
    const port = Number(await node.kubectl(['get', 'service', '-n', LB6_NS, LB6_SERVICES.local, '-o', 'jsonpath={.spec.healthCheckNodePort}']));
    let answer = { status: 0, body: '' };
    await until('the Local health check on the IPv6 node address to answer 200', 30_000, async () => {
      answer = await probe.get(`http://[${V6.nodeAddress}]:${port}/`);
      return answer.status === 200 ? true : undefined;
    }).catch(() => undefined);
    const health = { port, ...answer };
    log(`IPv6 Local health check http://[${V6.nodeAddress}]:${port}/: ${health.status} ${health.body}`);

    const clientNet1 = net1Addresses(await pod(node, LB6_NS, CLIENT))[0] ?? '';
    await until('the sidecar to reach the IPv6 Cluster address', 60_000, async () => ((await curlBurst(node, LB6_NS, CLIENT, url(vips.cluster), 1))[0] === 'ok' ? true : undefined));
    const sidecar = { ...(await burstArrivals(node, LB6_NS, names, () => curlBurst(node, LB6_NS, CLIENT, url(vips.cluster), 20))), clientNet1 };
    log(`IPv6 sidecar client ${CLIENT} (${clientNet1}): ${okCount(sidecar.curls)}, sources ${sidecar.sources.join(', ')}`);
    const announcers = (await l2Announcers(node, LB6_NS, LB6_SERVICES.local)).map((a) => `${a.node}/${a.interfaces.join(',')}`);
    return { agentInterface, pool: { first: pool.first, last: pool.last }, vips, clusterIPs, backends, ndpMac, ens4Mac: hostMac(NODE.parent), announcers, cluster, local, health, sidecar };
  } catch (e) {
    const agentLog = await node.kubectlResult(['logs', '-n', AGENT_NAMESPACE, '-l', AGENT_SELECTOR, '--tail=20'], { allowFail: true });
    const speakerLog = await node.kubectlResult(['logs', '-n', METALLB_NAMESPACE, '-l', 'component=speaker', '--tail=10'], { allowFail: true });
    log(
      `failed (${(e as Error).message}); agent log:\n${agentLog.stdout}${agentLog.stderr}\nspeaker log:\n${speakerLog.stdout}${speakerLog.stderr}\nhost IPv6 routes:\n${await host(['ip', '-6', 'route']).catch(() => '')}`,
    );
    throw e;
  } finally {
    await probe.remove();
    if (agentInterface) await host(['ip', '-6', 'route', 'del', V6.clientSubnet, 'dev', agentInterface]).catch(() => '');
    await host(['ip', '-6', 'route', 'del', V6.clientSubnet, 'dev', NODE.parent, 'metric', String(V6.parentRouteMetric)]).catch(() => '');
    await node.kubectl(['delete', 'service', '-n', LB6_NS, '--ignore-not-found', '--wait=true', ...Object.values(LB6_SERVICES)]).catch((e: Error) => log(`deleting the Services failed: ${e.message}`));
    await node.kubectlResult(['delete', '--ignore-not-found', '-f', '-'], { input: pool.yaml, allowFail: true });
    // Independent of each other, as the installs: removed side by side.
    await Promise.all([
      uninstallMetalLB(node).catch((e: Error) => log(`MetalLB uninstall failed: ${e.message}`)),
      uninstallAgent(node, log),
      node.kubectl(['delete', 'namespace', LB6_NS, '--ignore-not-found', '--wait=true', '--timeout=120s'], { timeoutMs: 130_000 }).catch((e: Error) => log(`deleting ${LB6_NS} failed: ${e.message}`)),
    ]);
  }
}

/** The test's assertions (kept beside the run, so a driver outside the suite checks the same). */
export function checkLoadBalancerV6(o: LoadBalancerV6Observations): void {
  const names = Object.keys(o.backends);
  assert.ok(names.length >= 2, `backends: ${JSON.stringify(o.backends)}`);
  for (const a of Object.values(o.backends)) assert.match(a, /^fd00:10:1:1::/, `backends' net1 addresses come from the IPv6 range: ${JSON.stringify(o.backends)}`);
  for (const [k, vip] of Object.entries(o.vips)) {
    const at = (ip: string): bigint => ipToBigInt(ip, 6);
    assert.ok(vip.includes(':') && at(vip) >= at(o.pool.first) && at(vip) <= at(o.pool.last), `${k}: ${vip} is from the IPv6 pool ${o.pool.first}-${o.pool.last}`);
    assert.ok(
      o.clusterIPs[k as keyof typeof o.vips].every((ip) => ip.includes(':')),
      `${k}: single-stack IPv6 cluster IP ${o.clusterIPs[k as keyof typeof o.vips].join(',')}`,
    );
  }
  assert.equal(o.ndpMac, o.ens4Mac, "MetalLB answers NDP for the address with ens4's MAC");
  assert.deepEqual(o.cluster.curls, Array(100).fill('ok'), 'every request through the IPv6 Cluster address answered');
  assert.equal(
    Object.values(o.cluster.answeredBy).reduce((a, b) => a + b, 0),
    100,
  );
  assert.ok(o.cluster.chiSquare.uniform, `equal shares: ${JSON.stringify(o.cluster.answeredBy)}, chi-square ${o.cluster.chiSquare.statistic.toFixed(2)} > ${o.cluster.chiSquare.critical} (α 0.001)`);
  assert.deepEqual(o.cluster.sources, [V6.nodeAddress], "Cluster masquerades to the node's IPv6 address on the network");
  assert.deepEqual(o.local.curls, Array(30).fill('ok'));
  assert.deepEqual(o.local.sources, [V6.client], "Local keeps the client's IPv6 address");
  assert.equal(o.health.status, 200, `health check: ${o.health.body}`);
  assert.equal((JSON.parse(o.health.body) as { localEndpoints: number }).localEndpoints, names.length, `the local count: ${o.health.body}`);
  assert.deepEqual(o.announcers, [`${NODE.name}/${NODE.parent}`], 'MetalLB announces the Local Service from this node on ens4');
  assert.match(o.sidecar.clientNet1, /^fd00:10:1:1::/);
  assert.deepEqual(o.sidecar.curls, Array(20).fill('ok'), 'the client pod reaches the IPv6 address');
  assert.deepEqual(o.sidecar.sources, [o.sidecar.clientNet1], "through its sidecar, straight to a backend: the backends see the client's own IPv6 net1 address");
}

async function host(args: string[]): Promise<string> {
  const [cmd = '', ...rest] = args;
  return (await run(cmd, rest, { encoding: 'utf8' })).stdout;
}
