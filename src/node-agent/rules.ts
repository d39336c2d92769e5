/**
 * The node agent's rules, in the node's own network namespace. Pure: a NodeState in, the same
 * `Rendered` shape the sidecar's renderer produces out (rulesets per family, routes, resolved
 * targets), so the shared apply loop (src/dataplane/apply.ts) plans, restores, routes and flushes
 * conntrack for it unchanged. Endpoint choice, DNAT rules, affinity and reject rules are the
 * sidecar's own functions (src/dataplane/); only the hooks and the NodePort frontends are new.
 *
 * Layout (prefix MPXN-, distinct from the sidecar's MPX-, KUBE- and MULTUS-):
 *
 *   nat    PREROUTING    -> MPXN-NODEPORTS
 *   nat    MPXN-NODEPORTS  -d <node addr on the network> -p P --dport <nodePort> -> MPXN-NP-<hash>
 *   nat    MPXN-NP-<hash>  Cluster: MARK the masquerade bit, then the DNAT rules over all endpoints;
 *                          Local: the DNAT rules over this node's endpoints only (source kept)
 *   nat    OUTPUT        -> MPXN-SERVICES   (the node's and host-network pods' access to cluster IPs:
 *                                           the sidecar's rules, with routes `<clusterIP> dev <our
 *                                           interface> src <node addr> proto 242`)
 *   nat    POSTROUTING   -> MPXN-POSTROUTING   -m mark --mark <bit>/<bit> -j MASQUERADE
 *   filter INPUT, OUTPUT -> MPXN-REJECT (NEW only): node ports and cluster IP ports without
 *                           endpoints (Local: without local endpoints) answer at once
 *   filter FORWARD       -> MPXN-FORWARD: DNATed traffic in or out of our interfaces is accepted,
 *                           so a FORWARD policy of DROP (Docker's) does not eat NodePort traffic
 *
 * Masquerading uses a mark set in the NodePort chain because nat POSTROUTING no longer knows the
 * packet came through a node port (its destination is already the endpoint); MASQUERADE then
 * takes the outgoing interface's address, which is the node's address on that network (the
 * endpoints are reached through our interface there), so replies come back through the node.
 */
import { compareText } from '../order.js';
import { networkKey, type NetworkRef } from '../annotations/service-network.js';
import { chooseEndpoints, normalizeAddress, validPort } from '../dataplane/endpoints.js';
import { hashName, type Layout } from '../dataplane/names.js';
import { render, RenderCache } from '../dataplane/incremental.js';
import { comment, matchPort, portLabel, rejectWith, serviceChainRules } from '../dataplane/rules.js';
import type { BackendEndpoint, IpFamily, PodInterface, Rendered, ResolvedTarget, Ruleset, ServicePortTarget, SkippedTarget } from '../dataplane/model.js';

export const NODE_CHAIN_PREFIX = 'MPXN-';
export const NODEPORTS_CHAIN = 'MPXN-NODEPORTS';
export const NODE_SERVICES_CHAIN = 'MPXN-SERVICES';
export const NODE_REJECT_CHAIN = 'MPXN-REJECT';
export const NODE_POSTROUTING_CHAIN = 'MPXN-POSTROUTING';
export const NODE_FORWARD_CHAIN = 'MPXN-FORWARD';
export const NODEPORT_CHAIN_PREFIX = 'MPXN-NP-';
export const NODE_SERVICE_CHAIN_PREFIX = 'MPXN-SVC-';
/** Comment on our jumps from the built-in chains; also how they are recognised. */
export const NODE_JUMP_COMMENT = 'multus-proxy-node';
/** Default masquerade mark: bit 13 (kube-proxy uses 14 and 15). */
export const DEFAULT_MASQUERADE_MARK = 0x2000;

const jump = (chain: string, extra = ''): string => `${extra}-m comment --comment ${NODE_JUMP_COMMENT} -j ${chain}`;

export const NODE_LAYOUT: Layout = {
  prefix: NODE_CHAIN_PREFIX,
  hooks: {
    nat: [
      { chain: 'PREROUTING', spec: jump(NODEPORTS_CHAIN) },
      { chain: 'OUTPUT', spec: jump(NODE_SERVICES_CHAIN) },
      { chain: 'POSTROUTING', spec: jump(NODE_POSTROUTING_CHAIN) },
    ],
    filter: [
      { chain: 'INPUT', spec: jump(NODE_REJECT_CHAIN, '-m conntrack --ctstate NEW ') },
      { chain: 'OUTPUT', spec: jump(NODE_REJECT_CHAIN, '-m conntrack --ctstate NEW ') },
      { chain: 'FORWARD', spec: jump(NODE_FORWARD_CHAIN) },
    ],
  },
  setChains: new Set([NODEPORTS_CHAIN, NODE_SERVICES_CHAIN, NODE_REJECT_CHAIN]),
  // Distinct from the sidecar's 241: a node's routes and a pod's never mix up.
  routeProto: 242,
  dispatchChain: NODE_SERVICES_CHAIN,
  rejectChain: NODE_REJECT_CHAIN,
  serviceChainPrefix: NODE_SERVICE_CHAIN_PREFIX,
};

/** The node's own interface on one served network (host-interface.ts) and its addresses there. */
export interface NodeNetwork {
  readonly network: NetworkRef;
  readonly interface: string;
  readonly ipv4?: string;
  readonly ipv6?: string;
}

export type TrafficPolicy = 'Cluster' | 'Local';

/** One port of one NodePort Service on one network and family (the base target's cluster IP is unused here). */
export interface NodePortTarget {
  readonly base: ServicePortTarget;
  readonly nodePort: number;
  readonly policy: TrafficPolicy;
  /** Local: the endpoints on this node (by EndpointSlice nodeName); ignored for Cluster. */
  readonly localEndpoints: readonly BackendEndpoint[];
}

export interface NodeState {
  /** Cluster IP ports the node itself reaches (every opted-in ClusterIP/NodePort Service on a served network). */
  readonly clusterTargets: readonly ServicePortTarget[];
  readonly nodePorts: readonly NodePortTarget[];
  readonly networks: readonly NodeNetwork[];
  /** The masquerade mark bit's value (DEFAULT_MASQUERADE_MARK). */
  readonly masqueradeMark: number;
}

const hex = (n: number): string => `0x${n.toString(16)}`;

function nodePortChain(t: NodePortTarget, address: string): string {
  return hashName(NODEPORT_CHAIN_PREFIX, t.base.service, t.base.portName, t.base.protocol, t.base.family, address, t.nodePort, t.policy);
}

function describe(t: NodePortTarget): string {
  return `${portLabel(t.base)}/${t.base.protocol} nodePort ${t.nodePort} (IPv${t.base.family}, ${t.policy})`;
}

/** One NodePort frontend's work before the duplicate check: skipped, or resolved with the address:port it takes. */
type NodePortWork =
  | { readonly ok: false; readonly key: string; readonly skip: SkippedTarget }
  | { readonly ok: true; readonly key: string; readonly portKey: string; readonly resolved: ResolvedTarget; readonly warnings: readonly string[] };

/**
 * Memo of NodePort work between renders, keyed by the NodePortTarget object (the planner,
 * state.ts NodePlanner, hands back the same object for an unchanged Service port). The work
 * depends on the target and on the node's networks and masquerade mark only, so it is dropped
 * whole when those change, and what a render did not use is dropped at the next one.
 */
export class NodePortMemo {
  private old = new Map<NodePortTarget, NodePortWork>();
  private current = new Map<NodePortTarget, NodePortWork>();
  private context: string | undefined;
  /** The last input list and its sorted order (an unchanged list is not sorted again). */
  private lastInput: readonly NodePortTarget[] | undefined;
  private lastSorted: readonly NodePortTarget[] = [];

  /** Called once per render, before it. */
  begin(state: NodeState): void {
    const context = JSON.stringify([state.networks, state.masqueradeMark]);
    if (context !== this.context) {
      this.context = context;
      this.current = new Map();
      this.lastInput = undefined;
    }
    this.old = this.current;
    this.current = new Map();
  }
  get(t: NodePortTarget): NodePortWork | undefined {
    const w = this.current.get(t) ?? this.old.get(t);
    if (w !== undefined) this.current.set(t, w);
    return w;
  }
  set(t: NodePortTarget, w: NodePortWork): void {
    this.current.set(t, w);
  }
  sorted(input: readonly NodePortTarget[], keyOf: (t: NodePortTarget) => string): readonly NodePortTarget[] {
    if (input !== this.lastInput) {
      this.lastInput = input;
      this.lastSorted = sortByKey(input, keyOf);
    }
    return this.lastSorted;
  }
}

/** Sorted by key, computed once per item; stable (equal keys keep their order). */
function sortByKey<T>(items: readonly T[], keyOf: (t: T) => string): T[] {
  return items
    .map((item) => ({ item, key: keyOf(item) }))
    .sort((a, b) => compareText(a.key, b.key))
    .map((x) => x.item);
}

/** Everything about one NodePort frontend that does not depend on the others (see resolveNodePorts). */
function nodePortWork(t: NodePortTarget, state: NodeState): NodePortWork {
  const fam = t.base.family;
  const k = key(t);
  const net = state.networks.find((n) => n.network.namespace === t.base.network.namespace && n.network.name === t.base.network.name);
  const skip = (reason: string, level: SkippedTarget['level']): NodePortWork => ({ ok: false, key: k, skip: { target: describe(t), reason, level } });
  if (net === undefined) return skip(`the node has no interface of its own on network ${networkKey(t.base.network)}`, 'info');
  const address = normalizeAddress((fam === 4 ? net.ipv4 : net.ipv6) ?? '', fam);
  if (address === undefined) return skip(`the node has no IPv${fam} address on network ${networkKey(net.network)}`, 'info');
  if (!validPort(t.nodePort)) return skip(`node port ${JSON.stringify(t.nodePort)} is not a number from 1 to 65535`, 'warn');
  const warnings: string[] = [];
  const chosen = chooseEndpoints(t.policy === 'Local' ? t.localEndpoints : t.base.endpoints, fam, (m) => warnings.push(m), describe(t));
  const chain = nodePortChain(t, address);
  const frontend: ServicePortTarget = { ...t.base, clusterIP: address, port: t.nodePort };
  const match = matchPort(address, frontend);
  const label = `${portLabel(t.base)} nodePort ${t.policy}`;
  const mark = t.policy === 'Cluster' ? [`-A ${chain} ${comment('masquerade')} -j MARK --or-mark ${hex(state.masqueradeMark)}`] : [];
  const why = t.policy === 'Local' ? 'has no endpoints on this node' : 'has no endpoints';
  return {
    ok: true,
    key: k,
    portKey: `${address}|${t.base.protocol}|${t.nodePort}`,
    warnings,
    resolved: {
      target: frontend,
      clusterIP: address,
      chain,
      interface: net.interface,
      source: address,
      endpoints: chosen.endpoints,
      choice: chosen.choice,
      ...(t.base.affinityTimeoutSeconds !== undefined ? { affinitySeconds: t.base.affinityTimeoutSeconds } : {}),
      // No endpoints: no mark either (nothing is forwarded), only the reject rule.
      rules: chosen.endpoints.length === 0 ? [] : [...mark, ...serviceChainRules(chain, frontend, chosen.endpoints)],
      // Matched by address, not by `-i`: with Linux's default arp_ignore=0 the parent interface
      // (not ours to reconfigure) also answers ARP for our address, so a client's packets may
      // arrive on the parent instead of our macvlan (measured: the first connection did).
      dispatch: `-A ${NODEPORTS_CHAIN} ${match} ${comment(label)} -j ${chain}`,
      reject: `-A ${NODE_REJECT_CHAIN} ${match} ${comment(`${label} ${why}`)} -j REJECT --reject-with ${rejectWith(frontend)}`,
      route: { family: fam, dst: address, dev: net.interface, src: address },
    },
  };
}

/**
 * The NodePort frontends: one per (Service port, family) on each network where the node has an
 * address of that family. Returned as ResolvedTargets whose `clusterIP` is the node's address and
 * whose target's `port` is the node port, so the shared conntrack planner flushes
 * `--orig-dst <node addr> --orig-port-dst <nodePort>` exactly as it does for cluster IPs. With a
 * memo, an unchanged NodePortTarget resolves to the very same object as last time.
 */
export function resolveNodePorts(state: NodeState, memo?: NodePortMemo): { targets: ResolvedTarget[]; skipped: SkippedTarget[]; warnings: string[] } {
  const targets: ResolvedTarget[] = [];
  const skipped: SkippedTarget[] = [];
  const warnings: string[] = [];
  const seen = new Set<string>();
  memo?.begin(state);
  const work = (t: NodePortTarget): NodePortWork => {
    let w = memo?.get(t);
    if (w === undefined) {
      w = nodePortWork(t, state);
      memo?.set(t, w);
    }
    return w;
  };
  const sorted = memo !== undefined ? memo.sorted(state.nodePorts, (t) => work(t).key) : sortByKey(state.nodePorts, key);
  for (const t of sorted) {
    const w = work(t);
    if (!w.ok) {
      skipped.push(w.skip);
      continue;
    }
    if (seen.has(w.portKey)) {
      skipped.push({ target: describe(t), reason: `${t.base.protocol} node port ${t.nodePort} on ${w.resolved.clusterIP} is listed twice; the first entry is used`, level: 'warn' });
      continue;
    }
    seen.add(w.portKey);
    warnings.push(...w.warnings);
    targets.push(w.resolved);
  }
  return { targets, skipped, warnings };
}

const key = (t: NodePortTarget): string => JSON.stringify([t.base.service, t.base.portName, t.base.protocol, t.base.family, networkKey(t.base.network), t.nodePort, t.policy]);


/** The whole node ruleset of one family: the sidecar's cluster-IP rules under our names (`base`), plus NodePorts. */
function ruleset(base: Ruleset, nodePorts: readonly ResolvedTarget[], family: IpFamily, state: NodeState): Ruleset {
  const nat = new Map(base.nat);
  const filter = new Map(base.filter);
  const dispatch: string[] = [];
  const reject = [...(filter.get(NODE_REJECT_CHAIN) ?? [])];
  for (const r of nodePorts) {
    if (r.target.family !== family) continue;
    dispatch.push(r.dispatch);
    if (r.endpoints.length === 0) reject.push(r.reject);
    nat.set(r.chain, r.rules);
  }
  nat.set(NODEPORTS_CHAIN, dispatch);
  const m = hex(state.masqueradeMark);
  nat.set(NODE_POSTROUTING_CHAIN, [`-A ${NODE_POSTROUTING_CHAIN} -m mark --mark ${m}/${m} ${comment('multus-proxy-node NodePort with externalTrafficPolicy Cluster')} -j MASQUERADE`]);
  filter.set(NODE_REJECT_CHAIN, reject);
  const forward: string[] = [];
  for (const n of [...state.networks].sort((a, b) => compareText(a.interface, b.interface))) {
    if ((family === 4 ? n.ipv4 : n.ipv6) === undefined) continue;
    for (const dir of ['-i', '-o']) forward.push(`-A ${NODE_FORWARD_CHAIN} ${dir} ${n.interface} -m conntrack --ctstate DNAT ${comment(`multus-proxy-node ${networkKey(n.network)}`)} -j ACCEPT`);
  }
  filter.set(NODE_FORWARD_CHAIN, forward);
  return { family, nat, filter };
}

/**
 * What renderNode keeps between renders: the sidecar's render cache for the cluster-IP part
 * (per-target work, and the patch of the last render when only endpoints changed) and the NodePort
 * memo. renderNode(state, cache) equals renderNode(state) (test/unit/node-agent/incremental.test.ts).
 */
export class NodeRenderCache {
  readonly cluster = new RenderCache(NODE_LAYOUT);
  readonly nodePorts = new NodePortMemo();
  /** The node's networks as the sidecar's pod interfaces, kept while the networks are the same. */
  interfaces: { readonly networks: readonly NodeNetwork[]; readonly value: readonly PodInterface[] } | undefined;
}

/** The node's networks as the sidecar's pod interfaces (the node takes the pod's place in the shared state and render). */
export const asPodInterfaces = (networks: readonly NodeNetwork[]): PodInterface[] =>
  networks.map((n) => ({ network: n.network, interface: n.interface, ipv4: n.ipv4 !== undefined ? [n.ipv4] : [], ipv6: n.ipv6 !== undefined ? [n.ipv6] : [] }));

/**
 * Pure: the node's rules and routes. The cluster-IP part is the sidecar's render with the node's
 * interfaces in the pod's place and the node layout; NodePorts are added beside it. With a cache
 * only what changed is redone; the result is the same.
 */
export function renderNode(state: NodeState, cache?: NodeRenderCache): Rendered {
  let interfaces: readonly PodInterface[];
  if (cache?.interfaces !== undefined && cache.interfaces.networks === state.networks) interfaces = cache.interfaces.value;
  else {
    interfaces = asPodInterfaces(state.networks);
    if (cache !== undefined) cache.interfaces = { networks: state.networks, value: interfaces };
  }
  const cluster = render({ targets: state.clusterTargets, interfaces }, cache?.cluster, NODE_LAYOUT);
  const np = resolveNodePorts(state, cache?.nodePorts);
  const { resolution } = cluster;
  return {
    resolution: { targets: [...resolution.targets, ...np.targets], skipped: [...resolution.skipped, ...np.skipped], warnings: [...resolution.warnings, ...np.warnings] },
    v4: ruleset(cluster.v4, np.targets, 4, state),
    v6: ruleset(cluster.v6, np.targets, 6, state),
    routes: cluster.routes,
  };
}
