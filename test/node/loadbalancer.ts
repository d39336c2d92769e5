/**
 * LoadBalancer Services on the blog's network with a real load balancer: MetalLB
 * (test/node/metallb.ts) allocates and announces the addresses on ens4, the node agent serves them
 * (installed as docs/node-agent.md says, the node given its address and parent), the blog's nginx
 * pods are the backends. A client in a network namespace on ens4's segment (a macvlan on the far
 * end of its veth, off the pods' subnet as the node-port test's, so that Local's replies go back
 * through the node) sends the requests; the blog's client pod sends them through its sidecar.
 *
 * The Services select their backends with the service-selector annotation, as docs/loadbalancer.md
 * recommends for Local: then our slices are the only ones and MetalLB's Local choice is the agent's.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { dump } from 'js-yaml';
import type { RealNode } from '../harness/node.js';
import { chiSquareUniform, type UniformTest } from '../harness/chi-square.js';
import { burstArrivals, type Burst, CLIENT, curlBurst, net1Addresses, pod, pods, SERVICE, sliceAddresses } from './cluster.js';
import { besideMetalLB, ingressIps, l2Announcers, POOL_ANNOTATION, SegmentProbe, uninstallMetalLB, type MetalLBInstall } from './metallb.js';
import { NODE_ADDRESS, uninstallAgent } from './nodeport.js';
import { installAgent, until } from './tenant.js';
import { SERVICE_NETWORK_ANNOTATION, SERVICE_SELECTOR_ANNOTATION } from '../../src/keys.js';

const run = promisify(execFile);

const NS = 'default';
/** The outside client, and a second address of it outside loadBalancerSourceRanges (TEST-NET-2, as the node-port test's). */
export const LB_CLIENT = '198.51.100.30';
export const LB_OUTSIDER = '198.51.100.31';
const CLIENT_SUBNET = '198.51.100.0/24';

export const LB_SERVICES = { cluster: 'nginx-lb', local: 'nginx-lb-local', ranges: 'nginx-lb-ranges', nobody: 'nginx-lb-nobody' } as const;

export function lbService(name: string, o: { policy: 'Cluster' | 'Local'; selector?: string; sourceRanges?: string[] }, pool: string): object {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: NS, annotations: { [SERVICE_NETWORK_ANNOTATION]: 'macvlan1', [SERVICE_SELECTOR_ANNOTATION]: o.selector ?? `app=${SERVICE}`, [POOL_ANNOTATION]: pool } },
    spec: { type: 'LoadBalancer', externalTrafficPolicy: o.policy, ...(o.sourceRanges ? { loadBalancerSourceRanges: o.sourceRanges } : {}), ports: [{ protocol: 'TCP', port: 80 }] },
  };
}

export interface LoadBalancerObservations {
  metallb: MetalLBInstall;
  agentInterface: string;
  vips: Record<keyof typeof LB_SERVICES, string>;
  backends: Record<string, string>;
  cluster: Burst & { chiSquare: UniformTest };
  local: Burst;
  /** GET http://<node address>:<healthCheckNodePort>/ from the outside client, for the Local Service. */
  health: { port: number; status: number; body: string };
  ranges: { admitted: string[]; outsider: string[] };
  /** The blog's client pod through its sidecar. */
  sidecar: Burst & { clientNet1: string };
  /** MetalLB's announcements: Local with backends, Local whose selector matches no pod. */
  announced: { local: string[]; nobody: string[] };
}

const okCount = (c: string[]): string => `${c.filter((x) => x === 'ok').length}/${c.length} ok`;

/** Runs the checks; the Services, MetalLB and the agent are removed whether they passed or not. */
export async function runLoadBalancer(node: RealNode, log: (m: string) => void, n = 100): Promise<LoadBalancerObservations> {
  const probe = new SegmentProbe('mpxtest-lb', 'mpxtestlb0', `${LB_CLIENT}/24`);
  let agentInterface = '';
  try {
    // Independent of each other: installed side by side.
    const [iface, metallb] = await besideMetalLB(node, log, installAgent(node));
    agentInterface = iface;
    const pool = metallb.pool.name;
    await node.apply(
      [
        lbService(LB_SERVICES.cluster, { policy: 'Cluster' }, pool),
        lbService(LB_SERVICES.local, { policy: 'Local' }, pool),
        lbService(LB_SERVICES.ranges, { policy: 'Cluster', sourceRanges: [`${LB_CLIENT}/32`] }, pool),
        lbService(LB_SERVICES.nobody, { policy: 'Local', selector: 'app=nobody' }, pool),
      ]
        .map((o) => dump(o))
        .join('---\n'),
    );
    const vips = {} as Record<keyof typeof LB_SERVICES, string>;
    for (const [k, svc] of Object.entries(LB_SERVICES) as [keyof typeof LB_SERVICES, string][]) {
      vips[k] = await until(`MetalLB's address for ${svc}`, 60_000, async () => (await ingressIps(node, NS, svc))[0]);
    }
    const backendPods = (await pods(node, NS, `app=${SERVICE}`)).filter((p) => !p.metadata?.deletionTimestamp);
    const backends = Object.fromEntries(backendPods.map((p) => [p.metadata?.name ?? '', net1Addresses(p)[0] ?? '']));
    const names = Object.keys(backends);
    for (const svc of [LB_SERVICES.cluster, LB_SERVICES.local, LB_SERVICES.ranges]) {
      await until(`the slices of ${svc}`, 30_000, async () => ((await sliceAddresses(node, NS, svc)).length === names.length ? true : undefined));
    }
    log(`LoadBalancer addresses ${JSON.stringify(vips)}; backends ${JSON.stringify(backends)}; agent interface ${agentInterface}`);

    await probe.create();
    await probe.addAddress(`${LB_OUTSIDER}/24`);
    // The node reaches the clients' subnet through its own interface on the segment (Local's replies).
    await host(['ip', 'route', 'replace', CLIENT_SUBNET, 'dev', agentInterface]);
    for (const vip of Object.values(vips)) await probe.onLink(vip);
    await probe.onLink(NODE_ADDRESS);
    const url = (vip: string): string => `http://${vip}/`;
    const expect = SERVICE;
    // The agent's rules follow the Service's status within a sync; the first answer says they are in place.
    await until('a first answer through the Cluster address', 60_000, async () => ((await probe.curls(url(vips.cluster), 1, { expect }))[0] === 'ok' ? true : undefined));

    const c = await burstArrivals(node, NS, names, () => probe.curls(url(vips.cluster), n, { expect }));
    const cluster = { ...c, chiSquare: chiSquareUniform(names.map((p) => c.answeredBy[p] ?? 0)) };
    log(
      `Cluster: ${okCount(cluster.curls)}, by ${JSON.stringify(cluster.answeredBy)} (chi-square ${cluster.chiSquare.statistic.toFixed(2)} <= ${cluster.chiSquare.critical}?), sources ${cluster.sources.join(', ')}`,
    );

    await until('a first answer through the Local address', 60_000, async () => ((await probe.curls(url(vips.local), 1, { expect }))[0] === 'ok' ? true : undefined));
    const local = await burstArrivals(node, NS, names, () => probe.curls(url(vips.local), 30, { expect }));
    log(`Local: ${okCount(local.curls)}, by ${JSON.stringify(local.answeredBy)}, sources ${local.sources.join(', ')}`);
    const port = Number(await node.kubectl(['get', 'service', '-n', NS, LB_SERVICES.local, '-o', 'jsonpath={.spec.healthCheckNodePort}']));
    // The agent opens the health port in the sync that programs the Service; the last answer is kept for the assertion.
    let answer = { status: 0, body: '' };
    await until('the Local health check to answer 200', 30_000, async () => {
      answer = await probe.get(`http://${NODE_ADDRESS}:${port}/`);
      return answer.status === 200 ? true : undefined;
    }).catch(() => undefined);
    const health = { port, ...answer };
    log(`Local health check http://${NODE_ADDRESS}:${port}/: ${health.status} ${health.body}`);

    await until('a first answer through the source-ranged address', 60_000, async () => ((await probe.curls(url(vips.ranges), 1, { expect }))[0] === 'ok' ? true : undefined));
    const ranges = { admitted: await probe.curls(url(vips.ranges), 10, { expect }), outsider: await probe.curls(url(vips.ranges), 5, { expect, from: LB_OUTSIDER, timeoutS: 1 }) };
    log(`loadBalancerSourceRanges ${LB_CLIENT}/32: from ${LB_CLIENT} ${okCount(ranges.admitted)}, from ${LB_OUTSIDER} ${okCount(ranges.outsider)}`);

    const clientNet1 = net1Addresses(await pod(node, NS, CLIENT))[0] ?? '';
    await until('the sidecar to reach the Cluster address', 60_000, async () => ((await curlBurst(node, NS, CLIENT, url(vips.cluster), 1))[0] === 'ok' ? true : undefined));
    const sidecar = { ...(await burstArrivals(node, NS, names, () => curlBurst(node, NS, CLIENT, url(vips.cluster), 20))), clientNet1 };
    log(`sidecar client ${CLIENT} (${clientNet1}): ${okCount(sidecar.curls)}, sources ${sidecar.sources.join(', ')}`);

    const announced = {
      local: (await l2Announcers(node, NS, LB_SERVICES.local)).map((a) => `${a.node}/${a.interfaces.join(',')}`),
      nobody: (await l2Announcers(node, NS, LB_SERVICES.nobody)).map((a) => `${a.node}/${a.interfaces.join(',')}`),
    };
    log(`MetalLB announces ${LB_SERVICES.local} from ${JSON.stringify(announced.local)}, ${LB_SERVICES.nobody} (no backend) from ${JSON.stringify(announced.nobody)}`);
    return { metallb, agentInterface, vips, backends, cluster, local, health, ranges, sidecar, announced };
  } finally {
    await probe.remove();
    if (agentInterface) await host(['ip', 'route', 'del', CLIENT_SUBNET, 'dev', agentInterface]).catch(() => '');
    await node.kubectl(['delete', 'service', '-n', NS, '--ignore-not-found', '--wait=true', ...Object.values(LB_SERVICES)]).catch((e: Error) => log(`deleting the Services failed: ${e.message}`));
    await Promise.all([uninstallMetalLB(node).catch((e: Error) => log(`MetalLB uninstall failed: ${e.message}`)), uninstallAgent(node, log)]);
  }
}

async function host(args: string[]): Promise<string> {
  const [cmd = '', ...rest] = args;
  return (await run(cmd, rest, { encoding: 'utf8' })).stdout;
}
