/**
 * B11: LoadBalancer dataplane on the real node (test/harness/node.ts). MetalLB (built here,
 * test/node/metallb.ts) gives a `type: LoadBalancer` Service on the blog's macvlan network its
 * address and answers ARP for it on ens4; the node agent serves it (Cluster: DNAT and masquerade
 * on the node). A client in a network namespace on ens4's segment (a macvlan on the far end of its
 * veth, an address of the network's subnet, as a host of that LAN) sends HTTP with wrk through the
 * address against the same load sent to the backend pod's net1 address directly, keep-alive and
 * one connection per request, interleaved, as B4 does for the cluster IP. One backend replica, so
 * both paths end at the same nginx: the ratio is the path's cost alone (through the node's veth
 * end, its netfilter and its macvlan, against macvlan to macvlan). Before the saturated runs, the
 * request time of one connection on each path (bench/lib/request-time.ts), whose low end holds on
 * the loaded machine where req/s does not.
 */
import { dump } from 'js-yaml';
import { startNode } from '../test/harness/node.js';
import { blogFile, net1Addresses, pods, SERVICE, sliceAddresses } from '../test/node/cluster.js';
import { installBootstrap } from '../test/node/install.js';
import { ingressIps, installMetalLB, POOL_ANNOTATION, SegmentProbe } from '../test/node/metallb.js';
import { installAgent, until } from '../test/node/tenant.js';
import { SERVICE_NETWORK_ANNOTATION, SERVICE_SELECTOR_ANNOTATION } from '../src/keys.js';
import { requireTool, run } from './lib/proc.js';
import { fmt } from '../test/harness/stats.js';
import { interleavedPairs, pairsTable, wrk } from './lib/wrk.js';
import { tuneForShortConnections } from './lib/traffic-pair.js';
import { REQUEST_TIME_MODES, requestTimeRounds, requestTimeTable } from './lib/request-time.js';
import type { Table, TargetCheck } from './lib/report.js';
import { defineBenchmark } from './lib/define.js';
import { isMain, runStandalone } from './lib/runner.js';

const NS = 'default';
const LB = 'b11-lb';
/** The same backend behind a plain LoadBalancer Service (spec.selector, no annotation): kube-proxy serves its address, to the pod's primary address. */
const KP = 'b11-kube-proxy';
/** The client: a host of the network's subnet, above whereabouts' low end and below the pool (docs/loadbalancer.md). */
const CLIENT = '10.1.1.220';
const SIZES = { quick: { seconds: 2, runs: 3 }, full: { seconds: 5, runs: 7 } };

export const benchmark = defineBenchmark('b11', 'LoadBalancer: HTTP through the MetalLB address vs the backend address directly (real node)', SIZES, async (ctx, { seconds, runs }, cleanup) => {
  await requireTool('wrk', ['--version'], 'install wrk (apt-get install wrk)');
  await requireTool('conntrack', ['--version'], 'install conntrack (apt-get install conntrack)');
  const node = await startNode({ log: (m) => ctx.log(`node: ${m}`) });
  cleanup.add('real node', async () => {
    await node.stop();
  });
  const probe = new SegmentProbe('b11c', 'b11c0', `${CLIENT}/24`);
  cleanup.add('client namespace', () => probe.remove());

  await installBootstrap(node);
  await node.apply(blogFile('net-attach.yml'), NS);
  await node.apply(blogFile('deployment.yml'), NS);
  await node.kubectl(['scale', '-n', NS, `deployment/${SERVICE}`, '--replicas=1']);
  await node.wait(`deployment/${SERVICE}`, 'condition=Available', { namespace: NS, timeoutMs: 180_000 });
  const { pool } = await installMetalLB(node, ctx.log);
  const lbService = (name: string, annotations: Record<string, string>, selector?: Record<string, string>): string =>
    dump({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: NS, annotations: { ...annotations, [POOL_ANNOTATION]: pool.name } },
      spec: { type: 'LoadBalancer', externalTrafficPolicy: 'Cluster', ...(selector ? { selector } : {}), ports: [{ protocol: 'TCP', port: 80 }] },
    });
  await node.apply(lbService(LB, { [SERVICE_NETWORK_ANNOTATION]: 'macvlan1', [SERVICE_SELECTOR_ANNOTATION]: `app=${SERVICE}` }));
  await node.apply(lbService(KP, {}, { app: SERVICE }));
  // The agent makes its interface on a network once a Service of that network exists: after the Service.
  const agentInterface = await installAgent(node);
  const vip = await until(`MetalLB's address for ${LB}`, 60_000, async () => (await ingressIps(node, NS, LB))[0]);
  const kpVip = await until(`MetalLB's address for ${KP}`, 60_000, async () => (await ingressIps(node, NS, KP))[0]);
  const backends = (await pods(node, NS, `app=${SERVICE}`)).filter((p) => !p.metadata?.deletionTimestamp);
  const backend = net1Addresses(backends[0] ?? {})[0];
  if (backends.length !== 1 || backend === undefined) throw new Error(`B11 needs exactly one backend pod with a net1 address: ${backends.map((p) => p.metadata?.name).join(', ')}`);
  await until(`the slice of ${LB}`, 30_000, async () => ((await sliceAddresses(node, NS, LB)).length === 1 ? true : undefined));

  await probe.create();
  // As B4: short TIME_WAIT and a wide port range in the client's namespace, or one-connection-per-request runs collapse.
  await tuneForShortConnections(probe.ns);
  const viaLb = `http://${vip}/`;
  const viaKubeProxy = `http://${kpVip}/`;
  const direct = `http://${backend}/`;
  for (const url of [viaLb, viaKubeProxy]) {
    await until(`a first answer through ${url}`, 60_000, async () => ((await probe.curls(url, 1, { expect: SERVICE }))[0] === 'ok' ? true : undefined));
  }
  ctx.log(`MetalLB addresses ${vip} (served by the agent on ${agentInterface}) and ${kpVip} (kube-proxy); backend net1 ${backend}; client ${CLIENT}`);
  const connections = 16;
  for (const url of [viaLb, viaKubeProxy, direct]) await wrk(probe.ns, url, 1, connections, false);

  const tables: Table[] = [];
  const targets: TargetCheck[] = [];
  // Each run starts without the previous run's flows: the client's table, and the node's for the two addresses only.
  const flush = async (): Promise<void> => {
    await run('conntrack', ['-F'], { netns: probe.ns, check: false });
    for (const a of [vip, kpVip]) await run('conntrack', ['-D', '-d', a], { check: false });
  };
  // The request time of one connection, one request after another, on the three paths: its low end
  // is each path's own work, which holds on the loaded machine where saturated req/s moves 2x (bench/lib/request-time.ts).
  const urls = { direct, 'kube-proxy': viaKubeProxy, 'multus-proxy': viaLb } as const;
  const paths = Object.keys(urls) as (keyof typeof urls)[];
  for (const mode of REQUEST_TIME_MODES) {
    const rounds = await requestTimeRounds({
      ns: probe.ns,
      paths,
      urlOf: (k) => urls[k],
      before: flush,
      runs,
      seconds: Math.min(seconds, 3),
      close: mode.close,
      log: (i, round) => ctx.log(`request time (${mode.name}) round ${i + 1}: ${paths.map((k) => `${k} ${round.get(k)?.[mode.low] ?? NaN} µs`).join(', ')}`),
    });
    tables.push(
      requestTimeTable(rounds, {
        paths,
        label: (k) => ({ direct: 'direct to backend net1', 'kube-proxy': 'via kube-proxy LoadBalancer address (primary network)', 'multus-proxy': 'via multus-proxy LoadBalancer address' })[k],
        low: mode.low,
        over: [
          { path: 'direct', name: 'direct' },
          { path: 'kube-proxy', name: 'kube-proxy' },
        ],
        caption: `request time, ${mode.name}, one request after another (wrk, 1 connection${mode.close ? ' at a time' : ''}): ${runs} rounds of ${Math.min(seconds, 3)} s, every path once per round, the order rotating`,
      }),
    );
  }
  // Then saturated req/s, the issue's measure: first against the pod's address directly (the issue's target), then against kube-proxy serving
  // a LoadBalancer address of the same pod on the primary network: the same hop through the node.
  for (const vs of [
    { base: direct, baseName: 'direct to backend net1', short: 'direct', target: 0.95 as number | undefined },
    { base: viaKubeProxy, baseName: 'via kube-proxy LoadBalancer address (primary network)', short: 'kube-proxy', target: undefined },
  ]) {
    const rows: string[][] = [];
    for (const mode of [
      { name: 'keep-alive', close: false },
      { name: 'one connection per request', close: true },
    ]) {
      const { target, row } = await interleavedPairs({
        ns: probe.ns,
        ours: viaLb,
        base: vs.base,
        seconds,
        runs,
        connections,
        close: mode.close,
        before: flush,
        logPair: (i, o, b) => ctx.log(`${mode.name} run ${i + 1}: LoadBalancer ${fmt(o.rps)} req/s, ${vs.short} ${fmt(b.rps)} req/s`),
      });
      rows.push(row(mode.name));
      if (vs.target !== undefined && !mode.close) targets.push(target(`${mode.name}: LoadBalancer / direct`, vs.target));
    }
    tables.push(pairsTable({ runs, seconds, connections }, { ours: 'via multus-proxy LoadBalancer address', base: vs.baseName, short: 'multus-proxy', baseShort: vs.short }, rows));
  }
  return {
    tables,
    targets,
    notes: [
      'Method: the real node with multus-proxy (bootstrap install), the node agent (DaemonSet, the node given 10.1.1.250 and parent ens4) and MetalLB v0.15.2 (pool 10.1.1.200-207, L2 on ens4); ' +
        `one nginx replica of the blog on macvlan1; a Cluster LoadBalancer Service selecting it (service-selector annotation). The client is a network namespace with a macvlan on the far end of ens4's veth, address ${CLIENT}/24. ` +
        "Through the address: ARP answered by MetalLB with ens4's MAC, so the request enters the node on ens4, is DNATed to the pod and masqueraded to the node's address by the agent's rules, and leaves through the agent's macvlan; " +
        'the reply comes back the same way. Direct: macvlan to macvlan on the same parent, the node not involved. ' +
        "Both paths end at the same nginx process, whose access log (the tests read it) costs the same for both. wrk, nginx, the node and the kernel share the machine's 2 cores with other users; the ratio per interleaved pair is what counts. " +
        "The client's namespace gets conntrack TIME_WAIT 1 s, a wide ephemeral port range and tcp_tw_reuse (as B4); before each run its conntrack table is flushed, and the node's entries for the address are deleted (the node's own settings are not touched). " +
        `The second table's baseline: a plain LoadBalancer Service (spec.selector, no annotation) on the same pod, address ${kpVip} from the same pool and announced the same way, which kube-proxy (iptables mode) serves: DNAT to the pod's primary address and masquerade, out through the node's pod bridge: the same hop through the node, kube-proxy's rules instead of the agent's. ` +
        'No target for one connection per request (the issue sets one for keep-alive only). ' +
        "Request time (the first tables): wrk with one connection, keep-alive or `Connection: close`, and a Lua done() hook printing min, p1, p10 and p50 in µs (bench/lib/wrk-latency.lua); a request delayed by another user's process lands in the upper percentiles, so the low end (p1 with keep-alive, min for new connections) is the path's own work; per round, what one path adds over another. B11-netns measures the same in namespaces, with a minimal DNAT as the floor of any through-node path.",
    ],
  };
});

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
