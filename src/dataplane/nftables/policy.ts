/**
 * The pod's MultiNetworkPolicy in the sidecar's nftables table: a compiled PodPolicy
 * (../../policy/model.ts) -> filter chains on the pod's secondary interfaces, and the `nft -f`
 * text that writes them whole (inside the table's block) or changes them by difference (inside
 * the same sync's transaction). Pure; the layout is docs/decisions/0230-policy-nftables-layout.md.
 *
 *   chain policy-input   type filter hook input priority 0; policy accept
 *       iifname "<if>" jump MPX-PIN-<hash>         one rule per interface whose ingress is isolated
 *   chain policy-output  type filter hook output priority 0; policy accept
 *       oifname "<if>" jump MPX-PEG-<hash>         (after nat-output: egress sees the endpoint a Service picked)
 *   chain MPX-PIN-/MPX-PEG-<hash>   one network, one direction
 *       ct state established,related accept        replies, and ICMP errors of allowed connections
 *       icmpv6 type { nd-* } accept                neighbour discovery always passes
 *       <peer> @MPX-PA-..                          per rule and family: a hash set of its pod addresses,
 *           [meta l4proto . th dport @MPX-PP-..]    or, with an ipBlock, an interval set of its peers,
 *                                                   each ipBlock less its excepts (policy-intervals.ts)
 *       ip saddr . ether saddr @MPX-PM-.. [ports]   ingress: pod peers whose MAC is known, as pairs (policy-macs.ts)
 *           [<peer> . meta l4proto . th dport @MPX-PN-..]   named ports resolved per peer
 *           accept
 *       counter name "MPX-PC-.." ... drop           one named counter per (policy, direction)
 *
 * A direction that is not isolated gets no chain (accept). A PolicyFailure isolates its direction
 * (both when it names none) and allows nothing. Sets keep their names when only their elements
 * change, so a peer change is no rule: in a hash set the elements added and deleted, an interval
 * set (whose ranges a change may join or split) flushed and refilled, in the same transaction.
 * Rules whose sets are equal share one, and the sets of one sidecar are bounded (policy-sets.ts).
 */
import { flat } from '../core/flat.js';
import { hashName } from '../core/names.js';
import type { IpFamily } from '../core/model.js';
import type { DirectionPolicy, NetworkPolicySet, PeerPort, PodPolicy, PolicyRule, PortRange } from '../../policy/model.js';
import { hostsOnly, intervalText, peerHosts, peerIntervals } from './policy-intervals.js';
import { boundPeers, pairType } from './policy-macs.js';
import { SetPool, type NftPolicySet, type WantedSet } from './policy-sets.js';

export const POLICY_INPUT_CHAIN = 'policy-input';
export const POLICY_OUTPUT_CHAIN = 'policy-output';
export type Direction = 'ingress' | 'egress';

/** One set of the policy (declared with the pool that shares them). */
export type { NftPolicySet };

/** The policy's part of the sidecar's table. */
export interface NftPolicy {
  /** policy-input and policy-output: the base chains (first line the hook), name -> rules. */
  readonly hooks: ReadonlyMap<string, readonly string[]>;
  /** One chain per isolated (network, direction): name -> rules. */
  readonly chains: ReadonlyMap<string, readonly string[]>;
  readonly sets: ReadonlyMap<string, NftPolicySet>;
  /** Named counters, one per (policy, direction) that drops here. */
  readonly counters: readonly string[];
  /** What was left out, and why (bad values are fail-closed: the rule allows nothing). */
  readonly warnings: readonly string[];
}

const FAMILIES: readonly IpFamily[] = [4, 6];
const ND_TYPES = 'icmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, nd-redirect } accept';
const ESTABLISHED = 'ct state established,related accept';
const HOOKS: Readonly<Record<Direction, { chain: string; head: string; match: string; prefix: string }>> = {
  ingress: { chain: POLICY_INPUT_CHAIN, head: 'type filter hook input priority 0; policy accept;', match: 'iifname', prefix: 'MPX-PIN-' },
  egress: { chain: POLICY_OUTPUT_CHAIN, head: 'type filter hook output priority 0; policy accept;', match: 'oifname', prefix: 'MPX-PEG-' },
};
/** A kernel interface name (IFNAMSIZ 16 with its NUL): anything else cannot be one, and never reaches a rule. */
const IFNAME = /^[A-Za-z0-9_.-]{1,15}$/;
const PROTOCOLS: Readonly<Record<string, string>> = { TCP: 'tcp', UDP: 'udp', SCTP: 'sctp' };

/** The chain of one network's direction: a pure function of the network and interface. */
export const policyChainName = (dir: Direction, network: string, iface: string): string => hashName(HOOKS[dir].prefix, network, iface);
/** The drop counter of one policy in one direction. */
export const policyCounterName = (policy: string, dir: Direction): string => hashName('MPX-PC-', policy, dir);

const peerField = (dir: Direction, f: IpFamily): string => `${f === 4 ? 'ip' : 'ip6'} ${dir === 'ingress' ? 'saddr' : 'daddr'}`;
const addrType = (f: IpFamily): string => (f === 4 ? 'ipv4_addr' : 'ipv6_addr');

interface Acc {
  readonly sets: Map<string, NftPolicySet>;
  readonly pool: SetPool;
  readonly warnings: string[];
}

function portElements(ports: readonly PortRange[]): string[] | string {
  const out: string[] = [];
  for (const p of ports) {
    const proto = PROTOCOLS[p.protocol];
    if (proto === undefined) return `protocol ${JSON.stringify(p.protocol)} is not TCP, UDP or SCTP`;
    if (!Number.isInteger(p.from) || !Number.isInteger(p.to) || p.from < 1 || p.to > 65535 || p.from > p.to) return `port ${p.from}-${p.to} is not a range within 1-65535`;
    out.push(p.from === p.to ? `${proto} . ${p.from}` : `${proto} . ${p.from}-${p.to}`);
  }
  return mergePortElements(out);
}

/** Port elements without overlaps (an interval set refuses them): per protocol, ranges joined. */
function mergePortElements(elems: readonly string[]): string[] {
  const by = new Map<string, [number, number][]>();
  for (const e of elems) {
    const [proto = '', range = ''] = e.split(' . ');
    const [a, b] = range.split('-').map(Number) as [number, number | undefined];
    (by.get(proto) ?? by.set(proto, []).get(proto))?.push([a, b ?? a]);
  }
  const out: string[] = [];
  for (const proto of [...by.keys()].sort()) {
    const list = (by.get(proto) ?? []).sort((x, y) => x[0] - y[0]);
    const merged: [number, number][] = [];
    for (const [a, b] of list) {
      const last = merged[merged.length - 1];
      if (last !== undefined && a <= last[1] + 1) last[1] = Math.max(last[1], b);
      else merged.push([a, b]);
    }
    for (const [a, b] of merged) out.push(a === b ? `${proto} . ${a}` : `${proto} . ${a}-${b}`);
  }
  return out;
}

function peerPortElements(list: readonly PeerPort[], f: IpFamily): string[] | string {
  const out = new Set<string>();
  for (const p of list) {
    const proto = PROTOCOLS[p.protocol];
    if (proto === undefined) return `protocol ${JSON.stringify(p.protocol)} is not TCP, UDP or SCTP`;
    if (!Number.isInteger(p.port) || p.port < 1 || p.port > 65535) return `port ${p.port} is not within 1-65535`;
    const r = peerIntervals({ addresses: [p.address], blocks: [] });
    if (!r.ok) return r.reason;
    const one = r.byFamily[f][0];
    if (one !== undefined) out.add(`${intervalText(one, f)} . ${proto} . ${p.port}`);
  }
  return [...out].sort();
}

/** One rule's accept lines (none when it allows nothing), its sets added to `acc` (shared with equal ones: policy-sets.ts). */
function ruleLines(rule: PolicyRule, dir: Direction, scope: string, pos: number, acc: Acc): string[] {
  const name = (prefix: string, f?: IpFamily): string => hashName(prefix, scope, dir, pos, rule.policy, rule.index, f ?? 0);
  const refuse = (why: string): string[] => {
    acc.warnings.push(`policy ${rule.policy} ${dir} rule ${rule.index}: ${why}; the rule allows nothing`);
    return [];
  };
  // Ingress from pod peers whose MAC is known matches (address, MAC) pairs; the rest by address.
  const bound = rule.peers !== undefined && dir === 'ingress' ? boundPeers(rule.peers) : undefined;
  for (const w of bound?.warnings ?? []) acc.warnings.push(`policy ${rule.policy} ${dir} rule ${rule.index}: ${w}`);
  const byAddress = bound?.unbound ?? rule.peers;
  // Pod addresses go into hash sets; interval sets only for a family an ipBlock adds ranges to.
  const hosts = byAddress === undefined ? undefined : peerHosts(byAddress.addresses);
  if (hosts?.ok === false) return refuse(hosts.reason);
  const ranges = byAddress === undefined || byAddress.blocks.length === 0 ? undefined : peerIntervals(byAddress);
  if (ranges?.ok === false) return refuse(ranges.reason);
  const ports = rule.ports === undefined ? undefined : portElements(rule.ports);
  if (typeof ports === 'string') return refuse(ports);
  const anyPort = rule.ports === undefined && rule.peerPorts === undefined;
  const wanted: WantedSet[] = [];
  // Peer sets per family, each with whether it holds (address, MAC) pairs; [undefined] alone: every
  // peer of either family, when the rule names no peers.
  const peerSets: [IpFamily | undefined, string | undefined, boolean][] = [];
  if (byAddress === undefined || hosts === undefined) peerSets.push([undefined, undefined, false]);
  else
    for (const f of FAMILIES) {
      const plain = ranges === undefined || hostsOnly(byAddress, f);
      const elements = plain ? hosts.byFamily[f] : (ranges?.byFamily[f] ?? []).map((i) => intervalText(i, f));
      if (elements.length === 0) continue;
      // A hash set has a name of its own: its type differs from the interval set's.
      const set = plain ? hashName('MPX-PA-', scope, dir, pos, rule.policy, rule.index, f, 'hosts') : name('MPX-PA-', f);
      wanted.push({ name: set, set: { decl: plain ? [`type ${addrType(f)}`] : [`type ${addrType(f)}`, 'flags interval'], elements } });
      peerSets.push([f, set, false]);
    }
  for (const f of FAMILIES) {
    const pairs = bound?.pairs[f] ?? [];
    if (pairs.length === 0) continue;
    const set = name('MPX-PM-', f);
    wanted.push({ name: set, set: { decl: [pairType(f)], elements: pairs } });
    peerSets.push([f, set, true]);
  }
  let portSet: string | undefined;
  if (ports !== undefined && ports.length > 0) {
    portSet = name('MPX-PP-');
    wanted.push({ name: portSet, set: { decl: ['type inet_proto . inet_service', 'flags interval'], elements: ports } });
  }
  const named: [IpFamily, string][] = [];
  if (rule.peerPorts !== undefined && rule.peerPorts.length > 0)
    for (const f of FAMILIES) {
      const elems = peerPortElements(rule.peerPorts, f);
      if (typeof elems === 'string') return refuse(elems);
      if (elems.length === 0 || !peerSets.some(([pf]) => pf === undefined || pf === f)) continue;
      const set = name('MPX-PN-', f);
      wanted.push({ name: set, set: { decl: [`type ${addrType(f)} . inet_proto . inet_service`], elements: elems } });
      named.push([f, set]);
    }
  const names = acc.pool.addAll(wanted);
  if (typeof names === 'string') return refuse(names);
  const ref = (set: string | undefined): string => names.get(set ?? '') ?? set ?? '';
  const match = (f: IpFamily | undefined, set: string | undefined, mac: boolean): string =>
    f === undefined || set === undefined ? '' : `${peerField(dir, f)}${mac ? ' . ether saddr' : ''} @${ref(set)} `;
  const out: string[] = [];
  for (const [f, set, mac] of peerSets) {
    const m = match(f, set, mac);
    if (anyPort) out.push(`${m}accept`);
    else if (portSet !== undefined) out.push(`${m}meta l4proto . th dport @${ref(portSet)} accept`);
  }
  // Named ports: only peers of the rule, through each of its peer matches of the family (address
  // and pair sets alike), or every peer when the rule names none.
  for (const [f, set] of named)
    for (const [pf, peerSet, mac] of peerSets) if (pf === undefined || pf === f) out.push(`${match(pf, peerSet, mac)}${peerField(dir, f)} . meta l4proto . th dport @${ref(set)} accept`);
  return out;
}

/** The policies whose counters a direction's drop counts. */
function droppers(d: DirectionPolicy, failures: readonly string[]): string[] {
  const names = new Set<string>([...(d.isolatedBy ?? d.rules.map((r) => r.policy)), ...failures]);
  return [...names].sort();
}

const failedIn = (n: NetworkPolicySet, dir: Direction): string[] => n.failures.filter((x) => x.direction === undefined || x.direction === dir).map((x) => x.policy);

/** The policies (`<namespace>/<name>`) whose drop counters one network's direction counts into; none when it is not isolated. */
export function directionDroppers(n: NetworkPolicySet, dir: Direction): string[] {
  const failed = failedIn(n, dir);
  return !n[dir].isolated && failed.length === 0 ? [] : droppers(n[dir], failed);
}

function directionChain(n: NetworkPolicySet, dir: Direction, acc: Acc, counters: Set<string>): string[] | undefined {
  const d = n[dir];
  const failed = failedIn(n, dir);
  if (!d.isolated && failed.length === 0) return undefined;
  const failedSet = new Set(failed);
  const lines = [ESTABLISHED, ND_TYPES];
  const scope = `${n.network}\u0000${n.interface}`;
  // A policy that failed allows nothing: its own rules are left out, the others' stand (the union).
  d.rules.forEach((r, pos) => {
    if (!failedSet.has(r.policy)) lines.push(...ruleLines(r, dir, scope, pos, acc));
  });
  const names = droppers(d, failed).map((p) => policyCounterName(p, dir));
  // No policy named (a resolver that leaves isolatedBy and rules empty): a counter of the network's direction.
  if (names.length === 0) names.push(hashName('MPX-PC-', scope, dir));
  for (const c of names) counters.add(c);
  lines.push(flat(`${names.map((c) => `counter name "${c}" `).join('')}drop`));
  return lines;
}

/** Renders by the compiled policy's identity: the stage and the sidecar's warnings (policy-support.ts) share one render. */
const rendered = new WeakMap<PodPolicy, NftPolicy | undefined>();

/** The policy's part of the table, or undefined when nothing is isolated (then no chain of it exists). */
export function renderPolicy(policy: PodPolicy | undefined): NftPolicy | undefined {
  if (policy === undefined) return undefined;
  if (rendered.has(policy)) return rendered.get(policy);
  const part = renderPolicyPart(policy);
  rendered.set(policy, part);
  return part;
}

function renderPolicyPart(policy: PodPolicy): NftPolicy | undefined {
  const sets = new Map<string, NftPolicySet>();
  const acc: Acc = { sets, pool: new SetPool(sets), warnings: [] };
  const chains = new Map<string, readonly string[]>();
  const counters = new Set<string>();
  const jumps: Record<Direction, string[]> = { ingress: [], egress: [] };
  const seen = new Set<string>();
  for (const n of [...policy.networks].sort((a, b) => (a.interface < b.interface ? -1 : a.interface > b.interface ? 1 : 0))) {
    if (!IFNAME.test(n.interface)) {
      acc.warnings.push(`policy on network ${n.network}: interface ${JSON.stringify(n.interface)} is not a kernel interface name; no traffic can use it, nothing written`);
      continue;
    }
    if (seen.has(n.interface)) {
      acc.warnings.push(`policy on network ${n.network}: interface ${n.interface} is already policed for another network; this one left out`);
      continue;
    }
    seen.add(n.interface);
    for (const dir of ['ingress', 'egress'] as const) {
      const lines = directionChain(n, dir, acc, counters);
      if (lines === undefined) continue;
      const chain = policyChainName(dir, n.network, n.interface);
      chains.set(chain, lines);
      jumps[dir].push(`${HOOKS[dir].match} "${n.interface}" jump ${chain}`);
    }
  }
  if (chains.size === 0) return acc.warnings.length === 0 ? undefined : { hooks: new Map(), chains, sets: acc.sets, counters: [], warnings: acc.warnings };
  const hooks = new Map<string, readonly string[]>();
  for (const dir of ['ingress', 'egress'] as const) hooks.set(HOOKS[dir].chain, [HOOKS[dir].head, ...jumps[dir]]);
  return { hooks, chains, sets: acc.sets, counters: [...counters].sort(), warnings: acc.warnings };
}

const setBody = (s: NftPolicySet, withElements: boolean): string => `${s.decl.join('; ')};${withElements && s.elements.length > 0 ? ` elements = { ${s.elements.join(', ')} };` : ''}`;

const chainBody = (rules: readonly string[]): string => rules.map((r) => `\t\t${r}\n`).join('');

/** The policy's declarations inside the table's block (a full write), onto `out`. */
export function policyBlock(out: string[], p: NftPolicy | undefined): void {
  if (p === undefined) return;
  for (const c of p.counters) out.push(`\tcounter ${c} {\n\t}\n`);
  for (const [name, s] of p.sets) out.push(`\tset ${name} {\n${s.decl.map((l) => `\t\t${l}\n`).join('')}${s.elements.length > 0 ? `\t\telements = { ${s.elements.join(', ')} }\n` : ''}\t}\n`);
  for (const [name, rules] of p.chains) out.push(`\tchain ${name} {\n${chainBody(rules)}\t}\n`);
  for (const [name, rules] of p.hooks) out.push(`\tchain ${name} {\n${chainBody(rules)}\t}\n`);
}

const sameLines = (a: readonly string[] | undefined, b: readonly string[] | undefined): boolean => a !== undefined && b !== undefined && a.length === b.length && a.every((l, i) => l === b[i]);

/** A chain written whole in a partial change: flushed when it exists, then `add chain` with its rules (a block, as render.ts refill). */
function rewrite(T: string, name: string, rules: readonly string[], exists: boolean): string[] {
  return [...(exists ? [`flush chain ${T} ${name}`] : []), `add chain ${T} ${name} {\n${chainBody(rules)}\t}`];
}

/**
 * The policy written over whatever table `T` holds (a whole write in place: ./tuning/replace.ts),
 * as commands of one transaction: counters and sets declared (an existing one is kept), each set
 * flushed and refilled, each chain declared, flushed and written whole, the direction chains
 * before the hooks that jump to them. The old rules hold until this transaction commits, so the
 * policy never fails open in between. What the table holds beyond `p` is the caller's to delete.
 */
export function policyInPlace(T: string, p: NftPolicy | undefined): string[] {
  if (p === undefined) return [];
  const out: string[] = [];
  for (const c of p.counters) out.push(`add counter ${T} ${c}`);
  for (const [name, s] of p.sets) out.push(`add set ${T} ${name} { ${setBody(s, false)} }`, `flush set ${T} ${name}`, `add set ${T} ${name} { ${setBody(s, true)} }`);
  for (const m of [p.chains, p.hooks])
    for (const [name, rules] of m) {
      const hook = rules[0]?.startsWith('type ') === true ? ` { ${rules[0]} }` : '';
      out.push(`add chain ${T} ${name}${hook}`, ...rewrite(T, name, rules, true));
    }
  return out;
}

/** What a partial change writes for the policy: `adds` go before anything is removed, `removes` last. */
export interface PolicyChange {
  readonly adds: readonly string[];
  readonly removes: readonly string[];
  /** The policy chains written or deleted, for the write report. */
  readonly changed: readonly string[];
  readonly deleted: readonly string[];
}

/**
 * The change from `prev` to `next` in table `T` (`inet <name>`): new counters, new sets and
 * changed sets' elements (flushed and written whole, in the same transaction), changed chains
 * written whole, then what is no longer used deleted (chains before the sets and counters they
 * name). Sets named by a rewritten chain are declared again (nft resolves a chain block's sets in
 * its cache, and this transaction fetches none; re-adding a set keeps its elements). Returns the
 * writes; the chains written and deleted go onto `into.changed` and `into.deleted` (the write
 * report's lists) and the removals onto `into.removes` (written after every write).
 */
export function policyChange(T: string, prev: NftPolicy | undefined, next: NftPolicy | undefined, into: { changed: string[]; deleted: string[]; removes: string[] }): string[] {
  if (prev === next) return [];
  const out = policyDiff(T, prev, next);
  into.changed.push(...out.changed);
  into.deleted.push(...out.deleted);
  into.removes.push(...out.removes);
  return [...out.adds];
}

/** The element deletes and adds that take a hash set from `before` to `after`. */
function elementChange(T: string, name: string, before: readonly string[], after: readonly string[]): string[] {
  const had = new Set(before);
  const has = new Set(after);
  const gone = before.filter((e) => !has.has(e));
  const come = after.filter((e) => !had.has(e));
  return [...(gone.length > 0 ? [`delete element ${T} ${name} { ${gone.join(', ')} }`] : []), ...(come.length > 0 ? [`add element ${T} ${name} { ${come.join(', ')} }`] : [])];
}

function policyDiff(T: string, prev: NftPolicy | undefined, next: NftPolicy | undefined): PolicyChange {
  const empty = new Map<string, never>();
  const before = { hooks: prev?.hooks ?? empty, chains: prev?.chains ?? empty, sets: prev?.sets ?? empty, counters: new Set(prev?.counters ?? []) };
  const after = { hooks: next?.hooks ?? empty, chains: next?.chains ?? empty, sets: next?.sets ?? empty, counters: new Set(next?.counters ?? []) };
  const adds: string[] = [];
  const removes: string[] = [];
  const changed: string[] = [];
  const deleted: string[] = [];
  for (const c of after.counters) if (!before.counters.has(c)) adds.push(`add counter ${T} ${c}`);
  const chainsChange = [...after.chains, ...after.hooks].some(([n, r]) => !sameLines(before.chains.get(n) ?? before.hooks.get(n), r));
  for (const [name, s] of after.sets) {
    const was = before.sets.get(name);
    if (was === undefined) adds.push(`add set ${T} ${name} { ${setBody(s, true)} }`);
    else if (sameLines(was.elements, s.elements)) {
      if (chainsChange) adds.push(`add set ${T} ${name} { ${setBody(s, false)} }`);
    } else if (s.decl.includes('flags interval')) adds.push(`flush set ${T} ${name}`, `add set ${T} ${name} { ${setBody(s, true)} }`);
    else {
      // A hash set (same name, same type): only the elements that differ, in the same transaction.
      if (chainsChange) adds.push(`add set ${T} ${name} { ${setBody(s, false)} }`);
      adds.push(...elementChange(T, name, was.elements, s.elements));
    }
  }
  if (chainsChange) for (const c of after.counters) if (before.counters.has(c)) adds.push(`add counter ${T} ${c}`);
  // Direction chains before the hooks that jump to them; removed ones after the hooks stop jumping.
  for (const m of [after.chains, after.hooks])
    for (const [name, rules] of m) {
      const was = before.chains.get(name) ?? before.hooks.get(name);
      if (sameLines(was, rules)) continue;
      adds.push(...rewrite(T, name, rules, was !== undefined));
      changed.push(name);
    }
  const gone = (m: ReadonlyMap<string, unknown>, keep: ReadonlyMap<string, unknown>): string[] => [...m.keys()].filter((n) => !keep.has(n));
  for (const name of [...gone(before.hooks, after.hooks), ...gone(before.chains, after.chains)]) {
    removes.push(`flush chain ${T} ${name}`);
    deleted.push(name);
  }
  for (const name of deleted) removes.push(`delete chain ${T} ${name}`);
  for (const name of gone(before.sets, after.sets)) removes.push(`delete set ${T} ${name}`);
  for (const c of before.counters) if (!after.counters.has(c)) removes.push(`delete counter ${T} ${c}`);
  return { adds, removes, changed, deleted };
}

/** Every chain of the policy with its rule count (a hook's `type` line not counted), for the drift check. */
export function policyChainCounts(p: NftPolicy | undefined): [string, number][] {
  if (p === undefined) return [];
  return [...[...p.chains].map(([n, r]): [string, number] => [n, r.length]), ...[...p.hooks].map(([n, r]): [string, number] => [n, r.length - 1])];
}
