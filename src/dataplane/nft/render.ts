/**
 * The nftables back end's rules: resolved targets -> one `inet` table of our own, and the
 * `nft -f` text that writes it whole (full) or changes it by difference (partial). Pure, tested
 * against golden files (test/golden/nft); the IO is nft/io.ts.
 *
 * Layout (the sidecar's; as kube-proxy's nftables proxier):
 *
 *   chain nat-output     type nat hook output priority dstnat
 *       ip  daddr . meta l4proto . th dport vmap @services-v4      one lookup, whatever the number of Services
 *       ip6 daddr . meta l4proto . th dport vmap @services-v6
 *   map services-v4/-v6  (cluster IP . protocol . port) : goto <Service-port chain>
 *   chain MPX-SVC-<hash> one rule per endpoint: `numgen random mod (N-i) 0 dnat ... to <endpoint i>`, the
 *                        last unconditional (equal shares, as iptables's statistic rules; no anonymous sets);
 *                        with sessionAffinity ClientIP: `ip saddr @<set of endpoint i> goto <endpoint chain>`
 *                        per endpoint, then the same picks as `goto <endpoint chain>`
 *   chain MPX-SEP-<hash> (affinity only) `update @<set> { ip saddr }`, then the DNAT
 *   set MPX-<hash>       (affinity only) client addresses, `flags dynamic,timeout`, the Service's timeout
 *   chain filter-output  type filter hook output priority filter
 *       ct state new (daddr . l4proto . dport) @no-endpoints-v4/-v6 goto reject
 *   chain reject         TCP reset, else ICMP(v6) port unreachable (ECONNREFUSED at once, as iptables)
 *
 * Affinity refreshes its timeout on every new connection that uses it (kube-proxy's nftables
 * behaviour); the iptables back end's `recent --rcheck` counts from the last new choice instead.
 * The source address of a connection comes from the cluster IP's route (routes.ts), for both back ends.
 */
import { flat } from '../flat.js';
import { hashName } from '../names.js';
import type { ChosenEndpoint, IpFamily, ResolvedTarget } from '../model.js';

export const NFT_TABLE = 'multus_proxy';
export const NFT_FAMILY = 'inet';
const T = `${NFT_FAMILY} ${NFT_TABLE}`;

/** One Service port as the table holds it. */
export interface NftTarget {
  readonly family: IpFamily;
  /** The verdict-map (and no-endpoint set) key: `<cluster IP> . <proto> . <port>`. */
  readonly key: string;
  readonly chain: string;
  /** The Service chain's rules (statement text). */
  readonly rules: readonly string[];
  /** Endpoint chains (affinity only): name -> rules. */
  readonly endpointChains: ReadonlyMap<string, readonly string[]>;
  /** Affinity sets: name -> timeout in seconds. */
  readonly sets: ReadonlyMap<string, number>;
  /** No endpoints: the key is in the no-endpoint set. */
  readonly reject: boolean;
}

/** The whole table's content: Service ports by chain, in render order. */
export interface NftRuleset {
  readonly targets: ReadonlyMap<string, NftTarget>;
}

export const BASE_CHAINS = { nat: 'nat-output', filter: 'filter-output', reject: 'reject-chain' } as const;
export const servicesMap = (f: IpFamily): string => `services-v${f}`;
export const noEndpointsSet = (f: IpFamily): string => `no-endpoints-v${f}`;

const ipKw = (f: IpFamily): string => (f === 4 ? 'ip' : 'ip6');
const addr = (f: IpFamily, ip: string, port: number): string => (f === 4 ? `${ip}:${port}` : `[${ip}]:${port}`);

function dnat(f: IpFamily, proto: string, ep: ChosenEndpoint): string {
  return `meta l4proto ${proto} dnat ${ipKw(f)} to ${addr(f, ep.ip, ep.port)}`;
}

/**
 * Rule i of n takes 1/(n-i) of what reaches it (a fresh `numgen` per rule), the last takes the
 * rest: equal shares, as the iptables back end's `statistic` probabilities. No anonymous sets (a
 * `numgen ... map { }` per Service would be one): at 10,000 Services they made a whole-table load
 * 20x slower and every change slower, since nft fetches every set before a transaction (docs/decisions.md).
 */
function pick(n: number, i: number): string {
  return i < n - 1 ? `numgen random mod ${n - i} 0 ` : '';
}

/** The endpoint chain of one endpoint of an affinity Service: a pure function of (Service chain, endpoint). */
export function endpointChainName(chain: string, ep: ChosenEndpoint): string {
  return hashName('MPX-SEP-', chain, ep.ip, ep.port);
}

/** An affinity set: named by its timeout too, so a changed timeout is a new set (a set's timeout cannot be changed in place). */
export function affinitySetName(chain: string, ep: ChosenEndpoint, seconds: number): string {
  return hashName('MPX-AFF-', chain, ep.ip, ep.port, seconds);
}

/** What rendering one Service port reads of its resolved target. */
export type NftTargetInput = Pick<ResolvedTarget, 'clusterIP' | 'chain' | 'endpoints' | 'affinitySeconds'> & { readonly target: Pick<ResolvedTarget['target'], 'family' | 'protocol' | 'port'> };

/** One Service port's part of the table. Pure; the result depends only on the resolved target. */
export function renderTarget(r: NftTargetInput): NftTarget {
  const f = r.target.family;
  const proto = r.target.protocol.toLowerCase();
  const key = `${r.clusterIP} . ${proto} . ${r.target.port}`;
  const eps = r.endpoints;
  const endpointChains = new Map<string, readonly string[]>();
  const sets = new Map<string, number>();
  let rules: string[] = [];
  if (eps.length === 0) rules = [];
  else if (r.affinitySeconds === undefined) rules = eps.map((ep, i) => `${pick(eps.length, i)}${dnat(f, proto, ep)}`);
  else {
    const picks: string[] = [];
    for (const [i, ep] of eps.entries()) {
      const set = affinitySetName(r.chain, ep, r.affinitySeconds);
      const epChain = endpointChainName(r.chain, ep);
      sets.set(set, r.affinitySeconds);
      endpointChains.set(epChain, [`update @${set} { ${ipKw(f)} saddr }`, dnat(f, proto, ep)]);
      rules.push(`${ipKw(f)} saddr @${set} goto ${epChain}`);
      picks.push(`${pick(eps.length, i)}goto ${epChain}`);
    }
    rules.push(...picks);
  }
  return { family: f, key, chain: r.chain, rules: rules.map(flat), endpointChains, sets, reject: eps.length === 0 };
}

/**
 * The table's content for these targets. `memo` keeps each resolved target's part: the render
 * caches (incremental.ts) hand back the same object for an unchanged target, so a sync renders
 * only what changed. A key already taken (the same cluster IP, protocol and port twice) keeps the
 * first, as the iptables dispatch chain's first matching rule does.
 */
export function renderNft<I extends NftTargetInput>(targets: readonly I[], memo?: WeakMap<I, NftTarget>): NftRuleset {
  const out = new Map<string, NftTarget>();
  const keys = new Set<string>();
  for (const r of targets) {
    let t = memo?.get(r);
    if (t === undefined) {
      t = renderTarget(r);
      memo?.set(r, t);
    }
    const k = `${t.family} ${t.key}`;
    if (keys.has(k) || out.has(t.chain)) continue;
    keys.add(k);
    out.set(t.chain, t);
  }
  return { targets: out };
}

function setDecl(name: string, f: IpFamily, timeout: number): string {
  return `set ${name} { type ${f === 4 ? 'ipv4_addr' : 'ipv6_addr'}; flags dynamic,timeout; timeout ${timeout}s; }`;
}

/** `<indent><head> {`, the rules one a line, `}`: a chain inside the table block, or an `add chain` command. */
function chainBlock(name: string, lines: readonly string[], indent = '\t', head = `chain ${name}`): string[] {
  return [`${indent}${head} {`, ...lines.map((l) => `${indent}\t${l}`), `${indent}}`];
}

const KEY_TYPE: Record<IpFamily, string> = { 4: 'ipv4_addr . inet_proto . inet_service', 6: 'ipv6_addr . inet_proto . inet_service' };

/**
 * The whole table, replacing whatever table of that name exists, in one transaction: the first
 * line creates it if missing, so deleting it cannot fail, and the block recreates it.
 */
export function fullText(next: NftRuleset): string {
  const out: string[] = [`add table ${T}`, `delete table ${T}`, `table ${T} {`];
  const all = [...next.targets.values()];
  for (const t of all) for (const [name, timeout] of t.sets) out.push(`\t${setDecl(name, t.family, timeout)}`);
  for (const t of all) for (const [name, lines] of t.endpointChains) out.push(...chainBlock(name, lines));
  for (const t of all) out.push(...chainBlock(t.chain, t.rules));
  for (const f of [4, 6] as const) {
    const mine = all.filter((t) => t.family === f);
    const elems = mine.map((t) => `${t.key} : goto ${t.chain}`);
    out.push(`\tmap ${servicesMap(f)} {`, `\t\ttype ${KEY_TYPE[f]} : verdict`, ...(elems.length > 0 ? [`\t\telements = { ${elems.join(',\n\t\t\t     ')} }`] : []), '\t}');
    const rejects = mine.filter((t) => t.reject).map((t) => t.key);
    out.push(`\tset ${noEndpointsSet(f)} {`, `\t\ttype ${KEY_TYPE[f]}`, ...(rejects.length > 0 ? [`\t\telements = { ${rejects.join(',\n\t\t\t     ')} }`] : []), '\t}');
  }
  out.push(...chainBlock(BASE_CHAINS.reject, ['meta l4proto tcp reject with tcp reset', 'reject with icmpx port-unreachable']));
  out.push(
    ...chainBlock(BASE_CHAINS.nat, [
      'type nat hook output priority -100; policy accept;',
      ...([4, 6] as const).map((f) => `${ipKw(f)} daddr . meta l4proto . th dport vmap @${servicesMap(f)}`),
    ]),
  );
  out.push(
    ...chainBlock(BASE_CHAINS.filter, [
      'type filter hook output priority 0; policy accept;',
      ...([4, 6] as const).map((f) => `ct state new ${ipKw(f)} daddr . meta l4proto . th dport @${noEndpointsSet(f)} goto ${BASE_CHAINS.reject}`),
    ]),
  );
  out.push('}');
  return `${out.join('\n')}\n`;
}

function sameTarget(a: NftTarget, b: NftTarget): boolean {
  if (a === b) return true;
  const same = (x: readonly string[], y: readonly string[]): boolean => x.length === y.length && x.every((l, i) => l === y[i]);
  if (a.key !== b.key || a.reject !== b.reject || !same(a.rules, b.rules) || a.sets.size !== b.sets.size || a.endpointChains.size !== b.endpointChains.size) return false;
  for (const [n, s] of a.sets) if (b.sets.get(n) !== s) return false;
  for (const [n, l] of a.endpointChains) {
    const o = b.endpointChains.get(n);
    if (o === undefined || !same(l, o)) return false;
  }
  return true;
}

export interface NftPlan {
  /** `nft -f` input; '' when nothing changed. */
  readonly text: string;
  readonly full: boolean;
  readonly changedChains: readonly string[];
  readonly deletedChains: readonly string[];
}

/**
 * A chain written whole: flushed when it exists, then `add chain <name> { rules }`. Why a block and
 * not `add rule` lines: nft 1.0.6 fetches every chain, set, object and flowtable of the namespace
 * before a transaction holding `add rule` or an element command, and only the tables for `flush
 * chain` and `add chain` with a block: at 10,000 Services a one-endpoint change is half the cost
 * (docs/decisions.md, "nftables change cost").
 */
function refill(name: string, rules: readonly string[], exists: boolean): string[] {
  const flush = exists ? [`flush chain ${T} ${name}`] : [];
  if (rules.length === 0) return exists ? flush : [`add chain ${T} ${name}`];
  return [...flush, ...chainBlock(name, rules, '', `add chain ${T} ${name}`)];
}

/**
 * The change from `prev` (what this process wrote last) to `next`, touching only the Service
 * ports that differ: their sets declared and endpoint chains written first, then each changed
 * Service chain written whole, then map and set elements added and removed, then what is no
 * longer used deleted (a chain must be empty and unreferenced to go). One `nft -f` is one
 * transaction: all or nothing.
 */
export function partialText(next: NftRuleset, prev: NftRuleset): NftPlan {
  const adds: string[] = [];
  const fills: string[] = [];
  const elemAdd: string[] = [];
  const elemDel: string[] = [];
  const flushes: string[] = [];
  const deletes: string[] = [];
  const changedChains: string[] = [];
  const deletedChains: string[] = [];
  const removeParts = (t: NftTarget, keep: NftTarget | undefined): void => {
    for (const name of t.endpointChains.keys())
      if (keep?.endpointChains.has(name) !== true) {
        flushes.push(`flush chain ${T} ${name}`);
        deletes.push(`delete chain ${T} ${name}`);
        deletedChains.push(name);
      }
    for (const name of t.sets.keys()) if (keep?.sets.has(name) !== true) deletes.push(`delete set ${T} ${name}`);
  };
  for (const [chain, t] of next.targets) {
    const old = prev.targets.get(chain);
    if (old !== undefined && sameTarget(old, t)) continue;
    // Every set the chains name is declared again, kept or new: a chain block can name only sets
    // nft has in its cache, and this transaction fetches no set (re-adding an existing set keeps its elements).
    for (const [name, timeout] of t.sets) adds.push(`add ${setDecl(name, t.family, timeout).replace(/^set /, `set ${T} `)}`);
    for (const [name, lines] of t.endpointChains) adds.push(...refill(name, lines, old?.endpointChains.has(name) === true));
    fills.push(...refill(chain, t.rules, old !== undefined));
    changedChains.push(chain);
    if (old === undefined || old.key !== t.key) elemAdd.push(`add element ${T} ${servicesMap(t.family)} { ${t.key} : goto ${chain} }`);
    if (old !== undefined && old.key !== t.key) elemDel.push(`delete element ${T} ${servicesMap(old.family)} { ${old.key} }`);
    if (t.reject && (old === undefined || !old.reject || old.key !== t.key)) elemAdd.push(`add element ${T} ${noEndpointsSet(t.family)} { ${t.key} }`);
    if (old?.reject === true && (!t.reject || old.key !== t.key)) elemDel.push(`delete element ${T} ${noEndpointsSet(old.family)} { ${old.key} }`);
    if (old !== undefined) removeParts(old, t);
  }
  for (const [chain, old] of prev.targets) {
    if (next.targets.has(chain)) continue;
    elemDel.push(`delete element ${T} ${servicesMap(old.family)} { ${old.key} }`);
    if (old.reject) elemDel.push(`delete element ${T} ${noEndpointsSet(old.family)} { ${old.key} }`);
    flushes.push(`flush chain ${T} ${chain}`);
    // The Service chain goes before its endpoint chains: it is what refers to them.
    deletes.unshift(`delete chain ${T} ${chain}`);
    deletedChains.push(chain);
    removeParts(old, undefined);
  }
  // Chains are deleted before sets: a rule in an endpoint chain may still name a set until its chain goes.
  const ordered = [...deletes.filter((l) => l.startsWith('delete chain')), ...deletes.filter((l) => !l.startsWith('delete chain'))];
  const lines = [...adds, ...fills, ...elemAdd, ...elemDel, ...flushes, ...ordered];
  return { text: lines.length === 0 ? '' : `${lines.join('\n')}\n`, full: false, changedChains, deletedChains };
}

/** Full or partial, as the iptables planner decides: full without a previous state of ours. */
export function planNft(next: NftRuleset, prev: NftRuleset | undefined, full: boolean): NftPlan {
  if (full || prev === undefined) return { text: fullText(next), full: true, changedChains: [...next.targets.keys()], deletedChains: [] };
  return partialText(next, prev);
}

/** The text removing our table (nothing else of ours exists in nftables). */
export function cleanupText(): string {
  return `add table ${T}\ndelete table ${T}\n`;
}

/** Rule statements in a ruleset, for the rules-count metric (Service and endpoint chains; the fixed chains not counted). */
export function countNftRules(r: NftRuleset): number {
  let n = 0;
  for (const t of r.targets.values()) {
    n += t.rules.length;
    for (const l of t.endpointChains.values()) n += l.length;
  }
  return n;
}
