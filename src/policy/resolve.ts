/**
 * The resolver: every MultiNetworkPolicy that selects one pod, compiled into the PodPolicy its
 * sidecar enforces (model.ts), with NetworkPolicy's semantics on each network the policies are
 * for. Pure: the peers' addresses come from a lookup the caller provides (address groups, or a
 * test's table), which answers for one network and one pair of selectors at a time.
 *
 * - A policy selects the pod when it is in the pod's namespace and its podSelector matches, and
 *   then only on the networks its policy-for annotation names.
 * - policyTypes default to Ingress, plus Egress when egress has a rule; a direction is isolated
 *   when any selecting policy has it, and its rules are the union of theirs.
 * - A peer's podSelector alone means pods of the policy's namespace; a namespaceSelector widens it.
 * - Named ports: on ingress from the pod's own containerPorts, on egress from each peer's.
 * - A selecting policy that fails its checks isolates the directions it would have (both when
 *   unknown), allows nothing and is reported (fail-closed).
 */
import { matchesSelector } from '../annotations/label-selector.js';
import { parseSourceRange } from '../annotations/load-balancer.js';
import { ipToBigInt, parseIp } from '../annotations/ip.js';
import { networkKey } from '../annotations/service-network.js';
import { compareText } from '../order.js';
import type { MultiNetworkPolicy } from './api.js';
import type { AddressBlock, DirectionPolicy, NetworkPolicySet, PeerPort, PeerSet, PodPolicy, PolicyFailure, PolicyProtocol, PolicyRule, PortRange } from './model.js';
import type { ParsedSelector } from './selector.js';
import { checkPolicy, type CheckedBlock, type CheckedPeer, type CheckedPolicy, type CheckedRule, type PolicyTypes } from './validate.js';

export interface ContainerPort {
  readonly name?: string;
  readonly containerPort: number;
  /** TCP when absent. */
  readonly protocol?: string;
}

/** One of the pod's secondary networks, as its network-status says. */
export interface PodNetwork {
  /** `<namespace>/<nad>`. */
  readonly network: string;
  readonly interface: string;
  readonly addresses: readonly string[];
}

/** The selected pod's facts. */
export interface SelectedPod {
  readonly namespace: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly networks: readonly PodNetwork[];
  readonly containerPorts: readonly ContainerPort[];
}

/** A peer pod: its addresses on the network asked about, and its containerPorts (for named ports). */
export interface PeerPod {
  readonly addresses: readonly string[];
  readonly containerPorts: readonly ContainerPort[];
  /** Its MAC on that network, by address, where known: ingress from that address is bound to it. */
  readonly macs?: Readonly<Record<string, string>>;
}

/** Which namespaces a peer's pods are in: one by name, or those a selector matches (`{}`: all). */
export type NamespaceScope = { readonly kind: 'namespace'; readonly name: string } | { readonly kind: 'selector'; readonly selector: ParsedSelector };

export interface PeerQuery {
  /** `<namespace>/<name>` of the policy that asks: each policy's peers are its own address group. */
  readonly policy: string;
  readonly network: string;
  readonly namespaces: NamespaceScope;
  readonly pods: ParsedSelector;
}

/** The pods on `network` that the query selects. */
export type PeerLookup = (query: PeerQuery) => readonly PeerPod[];

const EVERY: ParsedSelector = { requirements: [] };
const EVERY_POD: Omit<PeerQuery, 'network' | 'policy'> = { namespaces: { kind: 'selector', selector: EVERY }, pods: EVERY };
const ALL_TYPES: PolicyTypes = { ingress: true, egress: true };

interface Direction {
  isolated: boolean;
  rules: PolicyRule[];
}

interface Accumulated {
  readonly network: string;
  readonly interface: string;
  readonly ingress: Direction;
  readonly egress: Direction;
  readonly failures: PolicyFailure[];
}

/** A checked address without prefix, normalised; undefined when it is not one. */
function checkedAddress(text: string): string | undefined {
  if (typeof text !== 'string') return undefined;
  const p = parseIp(text);
  return p.ok && p.value.prefix === undefined && !p.value.address.includes('%') ? p.value.address : undefined;
}

function protocolOf(p: ContainerPort): PolicyProtocol | undefined {
  const proto = p.protocol ?? 'TCP';
  return proto === 'TCP' || proto === 'UDP' || proto === 'SCTP' ? proto : undefined;
}

function validPort(n: unknown): n is number {
  return typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= 65535;
}

/** Whether an address lies in a block and outside its excepts. */
export function inBlock(address: string, block: CheckedBlock | AddressBlock): boolean {
  const p = parseIp(address);
  if (!p.ok) return false;
  const n = ipToBigInt(p.value.address, p.value.family);
  const within = (cidr: string): boolean => {
    const r = parseSourceRange(cidr);
    if (typeof r === 'string' || r.family !== p.value.family) return false;
    const shift = BigInt((r.family === 4 ? 32 : 128) - r.prefix);
    return n >> shift === r.network >> shift;
  };
  return within(block.cidr) && !block.except.some(within);
}

function sorted<T>(items: Iterable<T>, key: (t: T) => string): T[] {
  const byKey = new Map<string, T>();
  for (const t of items) byKey.set(key(t), t);
  return [...byKey.entries()].sort((a, b) => compareText(a[0], b[0])).map(([, t]) => t);
}

/** Peer lookups of one resolve, each query asked once. */
function cachedLookup(lookup: PeerLookup): PeerLookup {
  const cache = new Map<string, readonly PeerPod[]>();
  return (q) => {
    const k = JSON.stringify(q);
    const hit = cache.get(k);
    if (hit !== undefined) return hit;
    const found = lookup(q);
    cache.set(k, found);
    return found;
  };
}

/** The address-group question of one pod peer of `policy` on `network`. */
export function peerQuery(network: string, policy: CheckedPolicy, peer: Extract<CheckedPeer, { kind: 'pods' }>): PeerQuery {
  const namespaces: NamespaceScope = peer.namespaceSelector === undefined ? { kind: 'namespace', name: policy.namespace } : { kind: 'selector', selector: peer.namespaceSelector };
  return { policy: policy.key, network, namespaces, pods: peer.podSelector };
}

/** The rule's peers as pods (with their ports) and blocks; undefined when the rule has no peer list (every peer). */
function rulePeers(network: string, policy: CheckedPolicy, rule: CheckedRule, lookup: PeerLookup): { pods: PeerPod[]; blocks: CheckedBlock[] } | undefined {
  if (rule.peers === undefined) return undefined;
  const pods: PeerPod[] = [];
  const blocks: CheckedBlock[] = [];
  for (const peer of rule.peers) {
    if (peer.kind === 'block') blocks.push(peer.block);
    else pods.push(...lookup(peerQuery(network, policy, peer)));
  }
  return { pods, blocks };
}

/**
 * The rule's peers. On ingress, a pod address carries the MACs its pods have there (a spoofed
 * source keeps the sender's own MAC); an address some pod gives without a MAC matches by address
 * alone (the union: that pod is allowed from any MAC).
 */
function peerSet(peers: { pods: PeerPod[]; blocks: CheckedBlock[] }, ingress: boolean): PeerSet {
  const addresses = new Set<string>();
  const macs = new Map<string, Set<string>>();
  const unbound = new Set<string>();
  for (const pod of peers.pods)
    for (const a of pod.addresses) {
      const c = checkedAddress(a);
      if (c === undefined) continue;
      addresses.add(c);
      const mac = pod.macs?.[a];
      if (mac === undefined) unbound.add(c);
      else (macs.get(c) ?? macs.set(c, new Set()).get(c))?.add(mac);
    }
  const bound = ingress ? [...macs].filter(([a]) => !unbound.has(a)).sort((x, y) => compareText(x[0], y[0])) : [];
  return {
    addresses: sorted(addresses, (a) => a),
    blocks: sorted(peers.blocks, (b) => `${b.cidr} ${b.except.join(',')}`).map((b) => ({ cidr: b.cidr, except: [...b.except] })),
    ...(bound.length > 0 ? { macs: Object.fromEntries(bound.map(([a, m]) => [a, [...m].sort()])) } : {}),
  };
}

/** Named port `name`/`protocol` of one pod's containerPorts: every number it names. */
function namedPorts(ports: readonly ContainerPort[], name: string, protocol: PolicyProtocol): number[] {
  return ports.filter((p) => p.name === name && protocolOf(p) === protocol && validPort(p.containerPort)).map((p) => p.containerPort);
}

/**
 * Egress named ports, per peer address: the peers' own containerPorts. Peers that are blocks (or
 * every peer) are the pods on the network whose addresses they cover.
 */
function egressPeerPorts(network: string, policy: string, rule: CheckedRule, peers: { pods: PeerPod[]; blocks: CheckedBlock[] } | undefined, lookup: PeerLookup): PeerPort[] {
  const named = (rule.ports ?? []).filter((p) => p.name !== undefined);
  if (named.length === 0) return [];
  const candidates: { pod: PeerPod; covers: (a: string) => boolean }[] = [];
  if (peers === undefined) for (const pod of lookup({ policy, network, ...EVERY_POD })) candidates.push({ pod, covers: () => true });
  else {
    for (const pod of peers.pods) candidates.push({ pod, covers: () => true });
    if (peers.blocks.length > 0) for (const pod of lookup({ policy, network, ...EVERY_POD })) candidates.push({ pod, covers: (a) => peers.blocks.some((b) => inBlock(a, b)) });
  }
  const out: PeerPort[] = [];
  for (const { pod, covers } of candidates) {
    for (const p of named) {
      const numbers = namedPorts(pod.containerPorts, p.name ?? '', p.protocol);
      if (numbers.length === 0) continue;
      for (const a of pod.addresses) {
        const address = checkedAddress(a);
        if (address === undefined || !covers(address)) continue;
        for (const port of numbers) out.push({ address, protocol: p.protocol, port });
      }
    }
  }
  return sorted(out, (p) => `${p.address} ${p.protocol} ${p.port}`);
}

function numericPorts(rule: CheckedRule, pod: SelectedPod, ingress: boolean): PortRange[] {
  const out: PortRange[] = [];
  for (const p of rule.ports ?? []) {
    if (p.name === undefined) out.push({ protocol: p.protocol, from: p.port ?? 1, to: p.port === undefined ? 65535 : (p.endPort ?? p.port) });
    else if (ingress) for (const n of namedPorts(pod.containerPorts, p.name, p.protocol)) out.push({ protocol: p.protocol, from: n, to: n });
  }
  return sorted(out, (r) => `${r.protocol} ${String(r.from).padStart(5, '0')} ${String(r.to).padStart(5, '0')}`);
}

function compileRule(network: string, policy: CheckedPolicy, rule: CheckedRule, ingress: boolean, pod: SelectedPod, lookup: PeerLookup): PolicyRule {
  const peers = rulePeers(network, policy, rule, lookup);
  const base = { policy: policy.key, index: rule.index, ...(peers !== undefined ? { peers: peerSet(peers, ingress) } : {}) };
  if (rule.ports === undefined) return base;
  const hasNamed = rule.ports.some((p) => p.name !== undefined);
  return { ...base, ports: numericPorts(rule, pod, ingress), ...(!ingress && hasNamed ? { peerPorts: egressPeerPorts(network, policy.key, rule, peers, lookup) } : {}) };
}

function accumulator(net: { network: string; interface: string }): Accumulated {
  return { network: net.network, interface: net.interface, ingress: { isolated: false, rules: [] }, egress: { isolated: false, rules: [] }, failures: [] };
}

function applyPolicy(acc: Accumulated, policy: CheckedPolicy, pod: SelectedPod, lookup: PeerLookup): void {
  if (policy.types.ingress) {
    acc.ingress.isolated = true;
    for (const r of policy.ingress) acc.ingress.rules.push(compileRule(acc.network, policy, r, true, pod, lookup));
  }
  if (policy.types.egress) {
    acc.egress.isolated = true;
    for (const r of policy.egress) acc.egress.rules.push(compileRule(acc.network, policy, r, false, pod, lookup));
  }
}

function applyFailure(acc: Accumulated, failure: PolicyFailure, types: PolicyTypes): void {
  if (types.ingress) acc.ingress.isolated = true;
  if (types.egress) acc.egress.isolated = true;
  acc.failures.push(failure);
}

function freeze(d: Direction): DirectionPolicy {
  return { isolated: d.isolated, rules: d.rules };
}

/** The PodPolicy of one pod. `policies` may hold every policy of the cluster; those of other namespaces are skipped. */
export function resolvePodPolicy(pod: SelectedPod, policies: readonly MultiNetworkPolicy[], lookup: PeerLookup): PodPolicy {
  const ask = cachedLookup(lookup);
  const byNetwork = new Map<string, Accumulated>();
  const touch = (net: PodNetwork): Accumulated => {
    let acc = byNetwork.get(net.network);
    if (acc === undefined) byNetwork.set(net.network, (acc = accumulator(net)));
    return acc;
  };
  const own = policies.filter((p) => (p.metadata?.namespace ?? '') === pod.namespace);
  for (const policy of sorted(own, (p) => p.metadata?.name ?? '')) {
    const checked = checkPolicy(policy, pod.namespace);
    if (checked.ok) {
      if (!matchesSelector(checked.value.podSelector, pod.labels)) continue;
      const names = new Set((checked.value.networks ?? []).map(networkKey));
      for (const net of pod.networks) if (names.has(net.network)) applyPolicy(touch(net), checked.value, pod, ask);
      continue;
    }
    const problem = checked.error;
    // What could not be read is assumed to select: every pod, every network, both directions.
    if (problem.podSelector !== undefined && !matchesSelector(problem.podSelector, pod.labels)) continue;
    const names = problem.networks === undefined ? undefined : new Set(problem.networks.map(networkKey));
    for (const net of pod.networks) {
      if (names === undefined || names.has(net.network)) applyFailure(touch(net), { policy: problem.key, message: problem.message }, problem.types ?? ALL_TYPES);
    }
  }
  const networks: NetworkPolicySet[] = pod.networks
    .map((n) => byNetwork.get(n.network))
    .filter((a): a is Accumulated => a !== undefined)
    .map((a) => ({ network: a.network, interface: a.interface, ingress: freeze(a.ingress), egress: freeze(a.egress), failures: a.failures }));
  return { networks };
}
