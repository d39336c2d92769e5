/**
 * B8: the node agent's rules. First B2's comparison for the node: a full sync of the agent's
 * rules (NodePort frontends, Cluster and Local mixed, plus the node's own cluster-IP access) for
 * N NodePort Services × 10 endpoints into a fresh network namespace, against a raw
 * `iptables-restore --noflush` of the same text, interleaved; then one endpoint changed (partial
 * sync) against a raw restore of the same partial text. Then the latency from an EndpointSlice
 * write in a real kube-apiserver to the rule on the node, with the real agent program in a node
 * namespace (NET_ADMIN + NET_RAW only, as test/node-agent/agent.test.ts runs it). Both rule back
 * ends in the same run: iptables (against raw `iptables-restore`) and nftables (its table
 * `inet multus_proxy_node`, against a raw `nft -f` of the same text).
 */
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { NOTHING_EXISTING, planRestore } from '../src/dataplane/iptables/restore.js';
import { apiPath } from '../src/kube/paths.js';
import { createNodeDataplane } from '../cmd/node-agent/dataplane.js';
import { hostInterfaceName } from '../cmd/node-agent/host-interface.js';
import { NODE_LAYOUT, type NodeState } from '../cmd/node-agent/rules.js';
import { renderNode } from '../cmd/node-agent/stages.js';
import { NODE_NFT_TABLE } from '../cmd/node-agent/nft-rules.js';
import { fullText } from '../src/dataplane/nftables/render.js';
import { createTopology } from '../test/harness/netns.js';
import { startApiserverRelay } from '../test/harness/apiserver-relay.js';
import { BENCH_NAMESPACE, ENDPOINT_PREFIX_LEN, NETWORK, changedEndpointIP } from './lib/services.js';
import { NODE_ADDRESS, NODE_NAME, benchNad, benchNode, checkedState, nodeInput, nodePortService, nodeSlice, nodeState } from './lib/node.js';
import { NodePlanner } from '../cmd/node-agent/state.js';
import { replaceSlice, benchControlPlane, createServices, createSlices } from './lib/cluster.js';
import { buildBundle, logged, timeToLine, type LogLine } from './lib/sidecar-env.js';
import { createClientNetns } from './lib/netns.js';
import { requireTool, run, sleep, startProcess, type Cleanup } from './lib/proc.js';
import { fmt, summarize, type Summary } from '../test/harness/stats.js';
import { fullSyncVsRaw, nftTool, partialRow, partialVsRaw, PARTIAL_COLUMNS, RULE_SYNC_COLUMNS, type PartialResult, type SyncSubject } from './lib/rule-sync.js';
import { ROOT, type RunContext, type Table, type TargetCheck } from './lib/report.js';
import { defineBenchmark } from './lib/define.js';
import { isMain, runStandalone } from './lib/runner.js';

const ENDPOINTS = 10;
const SERVICES = 1000;
const SIZES = { quick: { runs: 3, changes: 5, samples: 50 }, full: { runs: 7, changes: 20, samples: 200 } };

const NODE: SyncSubject<NodeState> = {
  // The node as the agent finds it after creating its interface: a link of that name with the node's address.
  freshNetns: (cleanup) => createClientNetns('b8', cleanup, hostInterfaceName(NETWORK), NODE_ADDRESS, ENDPOINT_PREFIX_LEN, 'mpxbench'),
  dataplane: (netns) => createNodeDataplane({ netns, iptablesFlavor: 'auto', backendKind: 'iptables' }),
  state: (n) => nodeState(nodeInput(n, ENDPOINTS)),
  plan: (state) => {
    const rules = renderNode(state).iptables;
    if (rules === undefined) throw new Error('b8: an iptables render of the node carries its rulesets');
    return planRestore(rules.v4, undefined, NOTHING_EXISTING, true, NODE_LAYOUT).text;
  },
};

/** The same agent with the nftables back end: its whole table, applied raw with `nft -f`. */
const NODE_NFT: SyncSubject<NodeState> = {
  ...NODE,
  dataplane: (netns) => createNodeDataplane({ netns, backendKind: 'nftables' }),
  plan: (state) => {
    const t = renderNode(state, undefined, { nft: true }).nft;
    if (t === undefined) throw new Error('renderNode gave no nftables table');
    return fullText(t);
  },
  ...nftTool(NODE_NFT_TABLE),
};

type RuleKind = 'iptables' | 'nftables';

/**
 * The state after change g, as the agent's runtime builds it: its NodePlanner over its informers'
 * objects, where only the changed slice is a new object (cmd/node-agent/state.ts).
 */
function nodeStates(n: number): (g: number) => NodeState {
  const loaded = nodeInput(n, ENDPOINTS);
  const planner = new NodePlanner();
  return (g) => {
    const svc = (g * 997) % n;
    return checkedState(planner.update(g === 0 ? loaded : { ...loaded, slices: loaded.slices.map((s, i) => (i === svc ? nodeSlice(svc, ENDPOINTS, g) : s)) }));
  };
}

const row = (name: string, s: Summary): string[] => [name, fmt(s.median), fmt(s.p90), fmt(s.p99), fmt(s.max), String(s.n)];

interface Latency {
  readonly table: Table;
  readonly p99: number;
  readonly median: number;
  readonly firstSyncMs: number;
  readonly how: string;
}

/** The real agent on a node of the test topology, with one rule back end; `samples` single-endpoint changes, one at a time. */
async function latency(ctx: RunContext, samples: number, cleanup: Cleanup, rules: RuleKind): Promise<Latency> {
  const cp = await benchControlPlane(cleanup);
  const topo = await createTopology();
  cleanup.add('topology', () => topo.teardown());
  const node = await topo.addNode('node1');
  const relay = await startApiserverRelay(topo, cp.server, cp.dir);
  cleanup.add('apiserver relay', () => relay.close());
  await relay.attach(node);
  await cp.client.create(apiPath('', 'v1', 'nodes'), benchNode(node.parent));
  await cp.client.create(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', BENCH_NAMESPACE), benchNad(node.parent));
  await createServices(cp.client, SERVICES, 0, nodePortService);
  const slices = await createSlices(cp.client, SERVICES, ENDPOINTS, 0, nodeSlice);
  ctx.log(`loaded ${SERVICES} NodePort Services × ${ENDPOINTS} endpoints`);

  const bundle = await buildBundle(cleanup, 'node-agent');
  const argv = bundle !== undefined ? [bundle] : ['--import', 'tsx', path.join(ROOT, 'cmd', 'node-agent', 'main.ts')];
  const how = bundle !== undefined ? 'a bundle of the current source (scripts/build.mjs --only node-agent)' : 'tsx (cmd/node-agent/main.ts)';
  const env = { ...process.env, NODE_NAME, KUBECONFIG: cp.kubeconfigPath, HEALTH_PORT: '19191', LOG_LEVEL: 'info', DATAPLANE_BACKEND: rules };
  const child = startProcess('setpriv', ['--bounding-set=-all,+net_admin,+net_raw', '--', process.execPath, ...argv], { netns: node.ns, cwd: ROOT, env });
  const agent = logged(child, how, 'node agent', cleanup);
  const t0 = performance.now();
  await agent.waitFor((l) => l.msg === 'first sync done; ready', 180_000, 'first sync');
  const firstSyncMs = performance.now() - t0;
  ctx.log(`agent (${how}, ${rules}) ready after ${fmt(firstSyncMs)} ms`);

  const applied: LogLine[] = [];
  agent.onLine((l) => {
    if (l.msg === 'node rules applied') applied.push(l);
  });
  const took: number[] = [];
  const current = new Map(slices.map((s, i) => [i, s]));
  for (let g = 1; g <= samples; g++) {
    const i = Math.floor(Math.random() * SERVICES);
    const ip = changedEndpointIP(g);
    const write = (): Promise<void> => replaceSlice(cp.client, current, i, nodeSlice(i, ENDPOINTS, g));
    const listing = rules === 'iptables' ? (['iptables-save', ['-t', 'nat']] as const) : (['nft', ['list', 'table', 'inet', NODE_NFT_TABLE]] as const);
    const landed = async (): Promise<boolean> => (await run(listing[0], listing[1], { netns: node.ns })).stdout.includes(`${ip}:`);
    took.push(await timeToLine(agent, applied, 'node rules applied', write, landed, `an apply after change ${g}`));
    await sleep(Math.random() * 50);
  }
  const s = summarize(took);
  const partial = summarize(applied.filter((l) => l['full'] === false).map((l) => Number(l['ms'])));
  return {
    table: {
      caption: `${rules}: ${samples} single-endpoint changes, one at a time, ${SERVICES.toLocaleString('en')} NodePort Services × ${ENDPOINTS} endpoints loaded (milliseconds):`,
      columns: ['', 'p50', 'p90', 'p99', 'max', 'n'],
      rows: [row('write → rule on the node (agent apply finished)', s), row("of which the agent's rule sync (render + restore, not the plan), from its log", partial)],
    },
    p99: s.p99,
    median: s.median,
    firstSyncMs,
    how,
  };
}

export const benchmark = defineBenchmark(
  'b8',
  'node agent: NodePort rule sync vs raw iptables-restore, and EndpointSlice change to rule on the node',
  SIZES,
  async (ctx, { runs, changes, samples }, cleanup) => {
    await requireTool('iptables-restore', ['--version'], 'install iptables (apt-get install iptables)');
    await requireTool('setpriv', ['--version'], 'install util-linux (apt-get install util-linux)');
    await requireTool('nft', ['--version'], 'install nftables (apt-get install nftables)');
    const nsCost: number[] = [];
    // Both back ends in the same run, nftables first at each step (the same machine moment).
    const syncs: { rules: RuleKind; full: Awaited<ReturnType<typeof fullSyncVsRaw>>; p: PartialResult }[] = [];
    for (const [rules, subject] of [
      ['nftables', NODE_NFT],
      ['iptables', NODE],
    ] as const) {
      let p: PartialResult | undefined;
      const full = await fullSyncVsRaw(
        ctx,
        subject,
        SERVICES,
        runs,
        `${rules}: ${SERVICES.toLocaleString('en')} × ${ENDPOINTS}`,
        nsCost,
        async (dp, ns) => void (p = await partialVsRaw(ctx, dp, ns, changes, nodeStates(SERVICES), subject.raw)),
      );
      if (p === undefined) throw new Error('the partial-sync measurement did not run');
      syncs.push({ rules, full, p });
    }
    const lats: { rules: RuleKind; lat: Latency }[] = [];
    for (const rules of ['nftables', 'iptables'] as const) lats.push({ rules, lat: await latency(ctx, samples, cleanup, rules) });
    const lat = lats[lats.length - 1]?.lat;
    if (lat === undefined) throw new Error('the latency measurement did not run');
    const targets: TargetCheck[] = [
      ...syncs.flatMap(({ rules, full, p }) => [
        { target: `${rules}: full node sync ≤ 1.2× raw at 1,000 NodePort Services`, measured: `${full.row[6] ?? ''}, median of per-run ratios`, met: full.pairs.median <= 1.2 },
        { target: `${rules}: one-endpoint change at 1,000 NodePort Services ≤ 50 ms`, measured: `${fmt(p.ours.median)} ms (median; max ${fmt(p.ours.max)} ms)`, met: p.ours.median <= 50 },
      ]),
      ...lats.map(({ rules, lat: l }) => ({ target: `${rules}: EndpointSlice write → rule on the node p99 ≤ 250 ms`, measured: `${fmt(l.p99)} ms (p50 ${fmt(l.median)} ms)`, met: l.p99 <= 250 })),
    ];
    return {
      tables: [
        {
          caption: `Node rules, full sync into a fresh namespace, ${SERVICES.toLocaleString('en')} NodePort Services × ${ENDPOINTS} endpoints (median, min–max):`,
          columns: RULE_SYNC_COLUMNS,
          rows: syncs.map((x) => x.full.row),
        },
        {
          caption: `One endpoint of one Service changed, ${SERVICES.toLocaleString('en')} NodePort Services loaded (partial sync; ${changes} changes):`,
          columns: ['back end', ...PARTIAL_COLUMNS],
          rows: syncs.map((x) => [x.rules, ...partialRow(x.p)]),
        },
        ...lats.map((x) => x.lat.table),
      ],
      targets,
      notes: [
        `Rules: the agent's own planner (cmd/node-agent/state.ts planNode) over ${SERVICES.toLocaleString('en')} opted-in NodePort Services (node ports 30000+, every fourth \`externalTrafficPolicy: Local\`), ` +
          `their slices (every other endpoint on this node), a macvlan NAD and the Node with its address ${NODE_ADDRESS}/${ENDPOINT_PREFIX_LEN} on the network; the rules are NodePort frontends in nat PREROUTING plus the node's cluster-IP access in nat OUTPUT, the masquerade and filter hooks. ` +
          `Each measurement gets a fresh namespace with loopback and a veth named as the agent's interface (${hostInterfaceName(NETWORK)}) carrying the node address. ` +
          '"ours" is `createNodeDataplane().sync(state, {full: true})` (the shared apply loop, src/dataplane/apply.ts, with the node layout), timed from the call to its return; ' +
          `"raw" is \`iptables-restore --noflush\` of the very text ours applies, alone. Both run under \`ip netns exec\` (${fmt(summarize(nsCost).median)} ms per command here, measured with \`true\`); runs alternate which goes first. ` +
          'nftables rows: the same agent with `rules: nftables` (cmd/node-agent/nft-rules.ts); "raw" is `nft -f -` of the very text it applies. ' +
          "The partial sync replaces one EndpointSlice object and times what the agent does then: its state from the informer objects (cmd/node-agent/state.ts NodePlanner, which redoes only the changed Service) plus `sync(state, {full: false})` (the node render cache redoes only that Service's chains).",
        `Latency: a private kube-apiserver + etcd; the agent runs in a node namespace of the test harness's topology (reaching the apiserver through the harness's relay) as ${lat.how}, under \`setpriv --bounding-set=-all,+net_admin,+net_raw\`, ` +
          `with its defaults (minimum sync interval 100 ms) and DATAPLANE_BACKEND set to each back end in turn, LOG_LEVEL=info, where each apply that changed something logs "node rules applied" with a timestamp. ` +
          "Each change replaces endpoint 0 of a random Service's slice with a new address; the latency runs from just before the replace call to the timestamp of the first such line after it " +
          "whose rules contain the new address (checked with `iptables-save -t nat`, or `nft list table inet multus_proxy_node`, in the node's namespace after each line, outside the timing). Changes are 0–50 ms apart after each one lands. " +
          `The agent's first sync of ${SERVICES.toLocaleString('en')} Services took ${fmt(lat.firstSyncMs)} ms from process start.`,
      ],
    };
  },
);

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
