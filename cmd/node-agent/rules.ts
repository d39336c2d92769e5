/**
 * The node agent's rules, in the node's own network namespace. Pure: a NodeState in, the same
 * `Rendered` shape the sidecar's renderer produces out (rulesets per family, routes, resolved
 * targets), so the shared apply loop (src/dataplane/core/pipeline.ts) plans, restores, routes and flushes
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
import { compareText } from '../../src/order.js';
import { networkKey, type NetworkRef } from '../../src/annotations/service-network.js';
import {
  render,
  RenderCache,
  type BackendEndpoint,
  type IpFamily,
  type PodInterface,
  type Rendered,
  type ResolvedTarget,
  type ServicePortTarget,
  type SkippedTarget,
  type Stage,
} from '../../src/dataplane/index.js';
import {
  chooseEndpoints,
  normalizeAddress,
  validPort,
  hashName,
  type Layout,
  IptablesStage,
  comment,
  matchPort,
  portLabel,
  rejectWith,
  serviceChainRules,
  type IptablesRules,
  type Ruleset,
} from '../../src/dataplane/node.js';

export const NODE_CHAIN_PREFIX = 'MPXN-';
/** The node's nftables table (nft-rules.ts renders it). */
export const NODE_NFT_TABLE = 'multus_proxy_node';
export const NODEPORTS_CHAIN = 'MPXN-NODEPORTS';
export const NODE_SERVICES_CHAIN = 'MPXN-SERVICES';
export const NODE_REJECT_CHAIN = 'MPXN-REJECT';
export const NODE_POSTROUTING_CHAIN = 'MPXN-POSTROUTING';
export const NODE_FORWARD_CHAIN = 'MPXN-FORWARD';
export const NODEPORT_CHAIN_PREFIX = 'MPXN-NP-';
export const NODE_SERVICE_CHAIN_PREFIX = 'MPXN-SVC-';
/** nat chain of one LoadBalancer ingress IP port (the DNAT rules, as a node port's). */
export const LOADBALANCER_CHAIN_PREFIX = 'MPXN-LB-';
/** nat chain of one allowed external IP port (the DNAT rules, as an ingress IP's). */
export const EXTERNAL_IP_CHAIN_PREFIX = 'MPXN-EXT-';
/** filter chain of one ingress IP port with loadBalancerSourceRanges: admitted sources RETURN, the rest DROP. */
export const FIREWALL_CHAIN_PREFIX = 'MPXN-FW-';
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
      // An ingress IP is not the node's: what nat did not DNAT to it (a source outside the ranges,
      // a port without endpoints) is forwarded, and refused here.
      { chain: 'FORWARD', spec: jump(NODE_REJECT_CHAIN, '-m conntrack --ctstate NEW ') },
    ],
  },
  setChains: new Set([NODEPORTS_CHAIN, NODE_SERVICES_CHAIN, NODE_REJECT_CHAIN]),
  // Distinct from the sidecar's 241: a node's routes and a pod's never mix up.
  routeProto: 242,
  dispatchChain: NODE_SERVICES_CHAIN,
  rejectChain: NODE_REJECT_CHAIN,
  serviceChainPrefix: NODE_SERVICE_CHAIN_PREFIX,
  nftTable: NODE_NFT_TABLE,
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

/**
 * One port of one LoadBalancer Service on one ingress IP (ipMode VIP, validated where it entered,
 * src/annotations/load-balancer.ts). `base` is the Service's cluster-IP target of the ingress IP's
 * family, whose network and endpoints it serves.
 */
export interface LoadBalancerTarget {
  readonly base: ServicePortTarget;
  /** Normalised, of base's family. */
  readonly ingressIP: string;
  readonly policy: TrafficPolicy;
  /** Local: the endpoints on this node; ignored for Cluster. */
  readonly localEndpoints: readonly BackendEndpoint[];
  /** loadBalancerSourceRanges of base's family as CIDRs; undefined: every source; empty: none. */
  readonly sourceRanges?: readonly string[];
}

/**
 * One port of one Service on one of its `spec.externalIPs` the admin's CIDRs allow (state.ts
 * re-checks them): served to outside clients as kube-proxy does, by externalTrafficPolicy (Cluster:
 * every endpoint, masqueraded; Local: this node's, the client's address kept, dropped when the
 * endpoints are all elsewhere). `base` is the Service's cluster-IP target of the address's family.
 */
export interface ExternalIPTarget {
  readonly base: ServicePortTarget;
  /** Normalised, of base's family. */
  readonly address: string;
  readonly policy: TrafficPolicy;
  /** Local: the endpoints on this node; ignored for Cluster. */
  readonly localEndpoints: readonly BackendEndpoint[];
}

export interface NodeState {
  /** Cluster IP ports the node itself reaches (every opted-in ClusterIP/NodePort/LoadBalancer Service on a served network, and LoadBalancer ingress IPs and allowed external IPs). */
  readonly clusterTargets: readonly ServicePortTarget[];
  readonly nodePorts: readonly NodePortTarget[];
  /** LoadBalancer ingress IPs served to outside clients (absent: none). */
  readonly loadBalancers?: readonly LoadBalancerTarget[];
  /** Allowed external IPs served to outside clients (absent: none). */
  readonly externalIPs?: readonly ExternalIPTarget[];
  readonly networks: readonly NodeNetwork[];
  /** The masquerade mark bit's value (DEFAULT_MASQUERADE_MARK). */
  readonly masqueradeMark: number;
}

const hex = (n: number): string => `0x${n.toString(16)}`;

/**
 * One frontend the node serves to outside clients, whatever made it: a node port (the node's own
 * address on the network, the Service's nodePort) or a LoadBalancer ingress IP (that address, the
 * Service's port). One table-driven function (frontendWork) turns either into rules.
 */
interface Frontend {
  readonly kind: 'nodePort' | 'loadBalancer' | 'externalIP';
  readonly base: ServicePortTarget;
  readonly policy: TrafficPolicy;
  readonly localEndpoints: readonly BackendEndpoint[];
  /** The destination address; undefined: the node's own address on the network. */
  readonly address: string | undefined;
  readonly port: number;
  readonly sourceRanges: readonly string[] | undefined;
}

const asFrontend = (t: NodePortTarget): Frontend => ({
  kind: 'nodePort',
  base: t.base,
  policy: t.policy,
  localEndpoints: t.localEndpoints,
  address: undefined,
  port: t.nodePort,
  sourceRanges: undefined,
});
const lbFrontend = (t: LoadBalancerTarget): Frontend => ({
  kind: 'loadBalancer',
  base: t.base,
  policy: t.policy,
  localEndpoints: t.localEndpoints,
  address: t.ingressIP,
  port: t.base.port,
  sourceRanges: t.sourceRanges,
});

const extFrontend = (t: ExternalIPTarget): Frontend => ({
  kind: 'externalIP',
  base: t.base,
  policy: t.policy,
  localEndpoints: t.localEndpoints,
  address: t.address,
  port: t.base.port,
  sourceRanges: undefined,
});

/** What differs between the kinds of frontend, as data. */
const KINDS = {
  nodePort: { chainPrefix: NODEPORT_CHAIN_PREFIX, label: 'nodePort', portWord: 'node port' },
  loadBalancer: { chainPrefix: LOADBALANCER_CHAIN_PREFIX, label: 'loadBalancer', portWord: 'port' },
  externalIP: { chainPrefix: EXTERNAL_IP_CHAIN_PREFIX, label: 'externalIP', portWord: 'port' },
} as const;

function frontendChain(f: Frontend, address: string): string {
  // A node port's name is as before (existing chains keep their names across an upgrade).
  if (f.kind === 'nodePort') return hashName(NODEPORT_CHAIN_PREFIX, f.base.service, f.base.portName, f.base.protocol, f.base.family, address, f.port, f.policy);
  return hashName(KINDS[f.kind].chainPrefix, f.base.service, f.base.portName, f.base.protocol, f.base.family, address, f.port, f.policy);
}

function describe(f: Frontend): string {
  const where = f.kind === 'nodePort' ? `nodePort ${f.port}` : `${KINDS[f.kind].label} ${f.address ?? ''}:${f.port}`;
  return `${portLabel(f.base)}/${f.base.protocol} ${where} (IPv${f.base.family}, ${f.policy})`;
}

/** What a frontend is, for a back end that renders it its own way (cmd/node-agent/nft-rules.ts). */
export interface FrontendFacts {
  readonly kind: Frontend['kind'];
  /** Cluster policy: the masquerade mark is set before the DNAT. */
  readonly masquerade: boolean;
  /** loadBalancerSourceRanges (undefined: every source). */
  readonly sourceRanges: readonly string[] | undefined;
  /** No endpoints to serve: refused at once, or dropped (Local ingress IP with endpoints only elsewhere). */
  readonly refusal: 'reject' | 'drop' | undefined;
}

/** A frontend's rules beyond its ResolvedTarget: every dispatch line, the filter lines, a firewall chain. */
export interface FrontendRules {
  readonly resolved: ResolvedTarget;
  readonly facts: FrontendFacts;
  /** Its nat chain's rules (mark, then the DNAT rules; none without endpoints). */
  readonly natRules: readonly string[];
  /** nat MPXN-NODEPORTS lines (one per source range when the Service has ranges). */
  readonly dispatch: readonly string[];
  /** filter MPXN-REJECT lines: the port's refusal (no endpoints), or the jump to its firewall chain. */
  readonly refuse: readonly string[];
  /** loadBalancerSourceRanges: filter chain MPXN-FW-… (admitted sources RETURN, or are refused when there are no endpoints; the rest DROP). */
  readonly firewall?: { readonly chain: string; readonly rules: readonly string[] };
}

/** One frontend's work before the duplicate check: skipped, or resolved with the address:port it takes. */
type FrontendWork =
  | { readonly ok: false; readonly key: string; readonly skip: SkippedTarget }
  | { readonly ok: true; readonly key: string; readonly portKey: string; readonly rules: FrontendRules; readonly warnings: readonly string[] };

/**
 * Memo of frontend work between renders, keyed by the target object (the planner, state.ts
 * NodePlanner, hands back the same object for an unchanged Service port). The work depends on the
 * target and on the node's networks and masquerade mark only, so it is dropped whole when those
 * change, and what a render did not use is dropped at the next one.
 */
export class FrontendMemo<T extends object> {
  private old = new Map<T, FrontendWork>();
  private current = new Map<T, FrontendWork>();
  private context: string | undefined;
  /** The last input list and its sorted order (an unchanged list is not sorted again). */
  private lastInput: readonly T[] | undefined;
  private lastSorted: readonly T[] = [];

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
  get(t: T): FrontendWork | undefined {
    const w = this.current.get(t) ?? this.old.get(t);
    if (w !== undefined) this.current.set(t, w);
    return w;
  }
  set(t: T, w: FrontendWork): void {
    this.current.set(t, w);
  }
  sorted(input: readonly T[], keyOf: (t: T) => string): readonly T[] {
    if (input !== this.lastInput) {
      this.lastInput = input;
      this.lastSorted = sortByKey(input, keyOf);
    }
    return this.lastSorted;
  }
}

/** The NodePort memo (its name before LoadBalancer frontends shared it). */
export class NodePortMemo extends FrontendMemo<NodePortTarget> {}

/** Sorted by key, computed once per item; stable (equal keys keep their order). */
function sortByKey<T>(items: readonly T[], keyOf: (t: T) => string): T[] {
  return items
    .map((item) => ({ item, key: keyOf(item) }))
    .sort((a, b) => compareText(a.key, b.key))
    .map((x) => x.item);
}

/** Everything about one frontend that does not depend on the others (see resolveFrontends). */
function frontendWork(f: Frontend, state: NodeState): FrontendWork {
  const fam = f.base.family;
  const k = frontendKey(f);
  const kind = KINDS[f.kind];
  const net = state.networks.find((n) => n.network.namespace === f.base.network.namespace && n.network.name === f.base.network.name);
  const skip = (reason: string, level: SkippedTarget['level']): FrontendWork => ({ ok: false, key: k, skip: { target: describe(f), reason, level } });
  if (net === undefined) return skip(`the node has no interface of its own on network ${networkKey(f.base.network)}`, 'info');
  // The node's address there: a node port's destination, and (Cluster) the masquerade source.
  const nodeAddress = normalizeAddress((fam === 4 ? net.ipv4 : net.ipv6) ?? '', fam);
  if (nodeAddress === undefined) return skip(`the node has no IPv${fam} address on network ${networkKey(net.network)}`, 'info');
  const address = f.address === undefined ? nodeAddress : normalizeAddress(f.address, fam);
  if (address === undefined) return skip(`ingress IP ${JSON.stringify(f.address)} is not an IPv${fam} address`, 'warn');
  if (!validPort(f.port)) return skip(`${kind.portWord} ${JSON.stringify(f.port)} is not a number from 1 to 65535`, 'warn');
  const warnings: string[] = [];
  const chosen = chooseEndpoints(f.policy === 'Local' ? f.localEndpoints : f.base.endpoints, fam, (m) => warnings.push(m), describe(f));
  const chain = frontendChain(f, address);
  const frontend: ServicePortTarget = { ...f.base, clusterIP: address, port: f.port };
  const match = matchPort(address, frontend);
  const label = `${portLabel(f.base)} ${kind.label} ${f.policy}`;
  const mark = f.policy === 'Cluster' ? [`-A ${chain} ${comment('masquerade')} -j MARK --or-mark ${hex(state.masqueradeMark)}`] : [];
  const why = f.policy === 'Local' ? 'has no endpoints on this node' : 'has no endpoints';
  // kube-proxy: a port with no endpoints at all is refused; an ingress or external IP with Local whose endpoints
  // are all on other nodes is dropped (the balancer's health check steers clients away; a reset
  // would end connections it is still moving). Node ports keep refusing (docs/node-agent.md).
  const elsewhere = f.kind !== 'nodePort' && f.policy === 'Local' && chosen.endpoints.length === 0 && chooseEndpoints(f.base.endpoints, fam, () => undefined, '').endpoints.length > 0;
  const reject = elsewhere ? '-j DROP' : `-j REJECT --reject-with ${rejectWith(frontend)}`;
  const ranges = f.sourceRanges;
  // Matched by address, not by `-i`: with Linux's default arp_ignore=0 the parent interface
  // (not ours to reconfigure) also answers ARP for our address, so a client's packets may
  // arrive on the parent instead of our macvlan (measured: the first connection did).
  // With source ranges only admitted sources are DNATed; the rest keep the ingress IP as their
  // destination, and filter (MPXN-REJECT, from INPUT and FORWARD) drops them in the firewall chain.
  const dispatch = ranges === undefined ? [`-A ${NODEPORTS_CHAIN} ${match} ${comment(label)} -j ${chain}`] : ranges.map((r) => `-A ${NODEPORTS_CHAIN} -s ${r} ${match} ${comment(label)} -j ${chain}`);
  const empty = chosen.endpoints.length === 0;
  let refuse: string[];
  let firewall: FrontendRules['firewall'];
  if (ranges === undefined) refuse = empty ? [`-A ${NODE_REJECT_CHAIN} ${match} ${comment(`${label} ${why}`)} ${reject}`] : [];
  else {
    const fw = hashName(FIREWALL_CHAIN_PREFIX, chain);
    refuse = [`-A ${NODE_REJECT_CHAIN} ${match} ${comment(`${label} loadBalancerSourceRanges`)} -j ${fw}`];
    firewall = {
      chain: fw,
      rules: [
        // The protocol again: tcp-reset is only valid in a rule that matches TCP (the kernel refuses it otherwise).
        ...ranges.map((r) => (empty ? `-A ${fw} -s ${r} -p ${f.base.protocol.toLowerCase()} ${comment(`${label} ${why}`)} ${reject}` : `-A ${fw} -s ${r} -j RETURN`)),
        `-A ${fw} ${comment(`${label} source outside loadBalancerSourceRanges`)} -j DROP`,
      ],
    };
  }
  return {
    ok: true,
    key: k,
    portKey: `${address}|${f.base.protocol}|${f.port}`,
    warnings,
    rules: {
      resolved: {
        target: frontend,
        clusterIP: address,
        chain,
        interface: net.interface,
        source: nodeAddress,
        endpoints: chosen.endpoints,
        choice: chosen.choice,
        ...(f.base.affinityTimeoutSeconds !== undefined ? { affinitySeconds: f.base.affinityTimeoutSeconds } : {}),
        route: { family: fam, dst: address, dev: net.interface, src: nodeAddress },
      },
      // No endpoints: no mark either (nothing is forwarded), only the reject rule.
      natRules: empty ? [] : [...mark, ...serviceChainRules(chain, frontend, chosen.endpoints)],
      dispatch,
      refuse,
      ...(firewall !== undefined ? { firewall } : {}),
      facts: { kind: f.kind, masquerade: f.policy === 'Cluster', sourceRanges: ranges, refusal: empty ? (elsewhere ? 'drop' : 'reject') : undefined },
    },
  };
}

/**
 * The node's frontends: one per (Service port, family) on each network where the node has an
 * address of that family, per node port and per ingress IP. Each carries a ResolvedTarget whose
 * `clusterIP` is the frontend's address and whose target's `port` is the frontend's port, so the
 * shared conntrack planner flushes `--orig-dst <address> --orig-port-dst <port>` exactly as it
 * does for cluster IPs. With memos, an unchanged target resolves to the very same object as last time.
 */
export function resolveFrontends(
  state: NodeState,
  cache?: Pick<NodeRenderCache, 'nodePorts' | 'loadBalancers' | 'externalIPs'>,
): { frontends: FrontendRules[]; skipped: SkippedTarget[]; warnings: string[] } {
  const frontends: FrontendRules[] = [];
  const skipped: SkippedTarget[] = [];
  const warnings: string[] = [];
  const seen = new Set<string>();
  const pass = <T extends object>(list: readonly T[], toFrontend: (t: T) => Frontend, memo: FrontendMemo<T> | undefined): void => {
    memo?.begin(state);
    const work = (t: T): FrontendWork => {
      let w = memo?.get(t);
      if (w === undefined) {
        w = frontendWork(toFrontend(t), state);
        memo?.set(t, w);
      }
      return w;
    };
    const sorted = memo !== undefined ? memo.sorted(list, (t) => work(t).key) : sortByKey(list, (t) => frontendKey(toFrontend(t)));
    for (const t of sorted) {
      const w = work(t);
      if (!w.ok) {
        skipped.push(w.skip);
        continue;
      }
      if (seen.has(w.portKey)) {
        const f = toFrontend(t);
        skipped.push({
          target: describe(f),
          reason: `${f.base.protocol} ${KINDS[f.kind].portWord} ${f.port} on ${w.rules.resolved.clusterIP} is listed twice; the first entry is used`,
          level: 'warn',
        });
        continue;
      }
      seen.add(w.portKey);
      warnings.push(...w.warnings);
      frontends.push(w.rules);
    }
  };
  pass(state.nodePorts, asFrontend, cache?.nodePorts);
  pass(state.loadBalancers ?? [], lbFrontend, cache?.loadBalancers);
  pass(state.externalIPs ?? [], extFrontend, cache?.externalIPs);
  return { frontends, skipped, warnings };
}

const frontendKey = (f: Frontend): string =>
  JSON.stringify(
    f.kind === 'nodePort'
      ? [f.base.service, f.base.portName, f.base.protocol, f.base.family, networkKey(f.base.network), f.port, f.policy]
      : [f.base.service, f.base.portName, f.base.protocol, f.base.family, networkKey(f.base.network), f.address, f.port, f.policy, f.sourceRanges],
  );

/** The node's iptables rules, both families. */
const nodeIptables = (cluster: IptablesRules, frontends: readonly FrontendRules[], state: NodeState): IptablesRules => ({
  v4: ruleset(cluster.v4, frontends, 4, state),
  v6: ruleset(cluster.v6, frontends, 6, state),
});

/** The whole node ruleset of one family: the sidecar's cluster-IP rules under our names (`base`), plus the frontends. */
function ruleset(base: Ruleset, frontends: readonly FrontendRules[], family: IpFamily, state: NodeState): Ruleset {
  const nat = new Map(base.nat);
  const filter = new Map(base.filter);
  const dispatch: string[] = [];
  const reject = [...(filter.get(NODE_REJECT_CHAIN) ?? [])];
  for (const f of frontends) {
    const r = f.resolved;
    if (r.target.family !== family) continue;
    dispatch.push(...f.dispatch);
    reject.push(...f.refuse);
    nat.set(r.chain, f.natRules);
    if (f.firewall !== undefined) filter.set(f.firewall.chain, f.firewall.rules);
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
 * What renderNodeState keeps between renders: the sidecar's render cache for the cluster-IP part
 * (per-target work, and the patch of the last render when only endpoints changed) and the NodePort
 * memo. renderNodeState(state, cache) equals renderNodeState(state) (test/unit/node-agent/incremental.test.ts).
 */
export class NodeRenderCache {
  readonly cluster = new RenderCache(NODE_LAYOUT);
  readonly nodePorts = new NodePortMemo();
  readonly loadBalancers = new FrontendMemo<LoadBalancerTarget>();
  readonly externalIPs = new FrontendMemo<ExternalIPTarget>();
  /** The node's networks as the sidecar's pod interfaces, kept while the networks are the same. */
  interfaces: { readonly networks: readonly NodeNetwork[]; readonly value: readonly PodInterface[] } | undefined;
}

/** The node's networks as the sidecar's pod interfaces (the node takes the pod's place in the shared state and render). */
export const asPodInterfaces = (networks: readonly NodeNetwork[]): PodInterface[] =>
  networks.map((n) => ({ network: n.network, interface: n.interface, ipv4: n.ipv4 !== undefined ? [n.ipv4] : [], ipv6: n.ipv6 !== undefined ? [n.ipv6] : [] }));

/**
 * The node's render: the shared one (every served target, the cluster-IP routes) and what the
 * node's stages (NodeIptablesStage here, NodeNftStage in nft-rules.ts) build its rules from.
 */
export interface NodeRendered extends Rendered {
  /** The cluster-IP part as the sidecar's render makes it, with the node's interfaces and layout. */
  readonly cluster: Rendered;
  readonly frontends: readonly FrontendRules[];
  readonly state: NodeState;
}

/**
 * Pure: the node's render. The cluster-IP part is the sidecar's render with the node's interfaces
 * in the pod's place and the node layout; NodePorts and LoadBalancer frontends are resolved beside
 * it. With a cache only what changed is redone; the result is the same. No back end's rules: the
 * running back end's stage makes them (only that one, so no work is wasted on the other).
 */
export function renderNodeState(state: NodeState, cache?: NodeRenderCache): NodeRendered {
  let interfaces: readonly PodInterface[];
  if (cache?.interfaces !== undefined && cache.interfaces.networks === state.networks) interfaces = cache.interfaces.value;
  else {
    interfaces = asPodInterfaces(state.networks);
    if (cache !== undefined) cache.interfaces = { networks: state.networks, value: interfaces };
  }
  const cluster = render({ targets: state.clusterTargets, interfaces }, cache?.cluster, NODE_LAYOUT);
  const fe = resolveFrontends(state, cache);
  const { resolution } = cluster;
  return {
    resolution: { targets: [...resolution.targets, ...fe.frontends.map((f) => f.resolved)], skipped: [...resolution.skipped, ...fe.skipped], warnings: [...resolution.warnings, ...fe.warnings] },
    routes: cluster.routes,
    cluster,
    frontends: fe.frontends,
    state,
  };
}

/** The iptables back end's stage for the node: the cluster-IP rulesets of the sidecar's stage under the node layout, with the frontends added. */
export class NodeIptablesStage implements Stage<IptablesRules, NodeRendered> {
  private readonly cluster = new IptablesStage(NODE_LAYOUT);
  step(r: NodeRendered): IptablesRules {
    return nodeIptables(this.cluster.step(r.cluster), r.frontends, r.state);
  }
}
