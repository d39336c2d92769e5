/**
 * The nftables back end's rules: resolved targets -> one `inet` table of our own, and the
 * `nft -f` text that writes it whole (full) or changes it by difference (partial). Pure, tested
 * against golden files (test/golden/nft); the IO is backend.ts.
 *
 * A ruleset is the program's fixed part (NftTable: its maps and sets, its hook chains; the node
 * agent's varies with the node's networks) plus one part per Service port (NftTarget: its chain,
 * the chains and sets it owns, and the elements it puts into the fixed maps and sets). The
 * sidecar's table (SIDECAR_TABLE; as kube-proxy's nftables proxier):
 *
 *   chain nat-output     type nat hook output priority -100
 *       ip  daddr . meta l4proto . th dport vmap @services-v4      one lookup, whatever the number of Services
 *       ip6 daddr . meta l4proto . th dport vmap @services-v6
 *   map services-v4/-v6  (cluster IP . protocol . port) : goto <Service-port chain>
 *   chain MPX-SVC-<hash> without affinity, one static rule: `dnat ip to numgen random mod M map @MPX-EPS-<hash>`;
 *                        with sessionAffinity ClientIP: `ip saddr @<set of endpoint i> goto <endpoint chain>`
 *                        per endpoint, then one rule per endpoint `numgen random mod (N-i) 0 goto <endpoint chain>`,
 *                        the last unconditional (equal shares, as iptables's statistic rules)
 *   map MPX-EPS-<hash>   (no affinity, N >= 1) numgen value range : endpoint address . port, N equal ranges of
 *                        [0, M) (pick-ranges.ts): an endpoint change rewrites these elements and no rule
 *   chain MPX-SEP-<hash> (affinity only) `update @<set> { ip saddr }`, then the DNAT
 *   set MPX-AFF-<hash>   (affinity only) client addresses, `flags dynamic,timeout`, the Service's timeout
 *   chain filter-output  type filter hook output priority 0
 *       ct state new (daddr . l4proto . dport) @no-endpoints-v4/-v6 goto reject-chain
 *   chain reject-chain   TCP reset, else ICMP(v6) port unreachable (ECONNREFUSED at once, as iptables)
 *
 * Past PORTS_PER_SHARD Service ports the sidecar's table is spread over shard tables (shards.ts):
 * the table above is shard 0, and shards 1..S-1 (`multus_proxy-s<i>`) each hold their own
 * nat-output hook, services-v4/-v6 maps and their Service ports' chains, maps and sets (a rule can
 * name only a set of its own table); no-endpoints sets, filter-output and reject-chain stay in the
 * root. Which shard holds a Service port is a pure function of its chain name and S.
 *
 * The node agent's table is cmd/node-agent/nft-rules.ts, from the same parts (never sharded).
 *
 * Affinity refreshes its timeout on every new connection that uses it (kube-proxy's nftables
 * behaviour); the iptables back end's `recent --rcheck` counts from the last new choice instead.
 * The source address of a connection comes from the cluster IP's route (routes.ts), for both back ends.
 */
import { flat } from '../core/flat.js';
import { changedEntries, Snapshot } from '../core/engine.js';
import { hashName, SERVICE_CHAIN_PREFIX } from '../core/names.js';
import { isClusterIP } from '../core/endpoints.js';
import type { ChosenEndpoint, IpFamily, ResolvedTarget } from '../core/model.js';
import { endpointRanges, PICK_MODULUS, rangeHeads, type EndpointRange } from './pick-ranges.js';
import { shardCount, shardOf, shardTableName } from './tuning/shards.js';
import type { ElementWrite } from './netlink-batch.js';
import { policyBlock, policyChange, type NftPolicy } from './policy.js';

export const NFT_FAMILY = 'inet';
/** The sidecar's table name. */
export const NFT_TABLE = 'multus_proxy';

/** One element a Service port puts into a map or set of the fixed part. */
export interface NftElement {
  readonly set: string;
  /** `<address> . <proto> . <port>` */
  readonly key: string;
  /** A map's value, e.g. `goto <chain>`; none for a set. */
  readonly value?: string;
}

/** One Service port (or node frontend) as the table holds it. */
export interface NftTarget {
  readonly family: IpFamily;
  /** Its first element's key: `<address> . <proto> . <port>`. */
  readonly key: string;
  readonly chain: string;
  /** Its chain's rules (statement text). */
  readonly rules: readonly string[];
  /** Other chains it owns (affinity endpoint chains, a node frontend's source-range and firewall chains): name -> rules. */
  readonly ownedChains: ReadonlyMap<string, readonly string[]>;
  /** Affinity sets: name -> timeout in seconds. */
  readonly sets: ReadonlyMap<string, number>;
  /** Endpoint maps (one, for a Service port without affinity that has endpoints): name -> its elements. */
  readonly maps: ReadonlyMap<string, NftEndpointMap>;
  /** What it puts into the fixed maps and sets; the first one is its dispatch (and names its key). */
  readonly elements: readonly NftElement[];
}

/**
 * A Service port's endpoint map: numgen range -> endpoint address and port. It keeps the resolved
 * target's own endpoint list and no ranges: the ranges are a function of the count
 * (pick-ranges.ts), made when text or a write needs them (B5: 10 range objects and 20 heap
 * numbers per Service were ~0.9 MiB of heap at 1,000 Services × 10).
 */
export interface NftEndpointMap {
  /** The declaration's `typeof ...` line (as `nft list` prints it back). */
  readonly type: string;
  readonly endpoints: readonly ChosenEndpoint[];
}

/** The map's elements: its endpoints' equal shares of the numgen values, in order. */
export const mapRanges = (m: NftEndpointMap): EndpointRange[] => endpointRanges(m.endpoints);

export interface NftChain {
  readonly name: string;
  /** A hook chain's first line is its `type ... hook ... priority ...; policy accept;`. */
  readonly rules: readonly string[];
}

export interface NftSetDecl {
  readonly name: string;
  /** `type ...` (and `flags ...`) lines. */
  readonly decl: readonly string[];
}

/** A program's fixed part of its table. */
export interface NftTable {
  readonly name: string;
  readonly sets: readonly NftSetDecl[];
  readonly chains: readonly NftChain[];
  /** The sets and chains every shard table has its own of (shards.ts); the rest stays in the root table. None: never sharded. */
  readonly perShard?: { readonly sets: readonly string[]; readonly chains: readonly string[] };
}

/** The whole table's content: the fixed part, then the Service ports by chain, in render order. */
export interface NftRuleset {
  readonly table: NftTable;
  readonly targets: ReadonlyMap<string, NftTarget>;
  /** The tables the Service ports are spread over (shards.ts); absent: 1, the root table alone. */
  readonly shards?: number;
  /** The pod's MultiNetworkPolicy chains and sets (policy.ts), in the root table; absent: none. */
  readonly policy?: NftPolicy;
}

// One string per name (a template per call would be a new string per target).
const SERVICES_MAPS: Readonly<Record<IpFamily, string>> = { 4: 'services-v4', 6: 'services-v6' };
const NO_ENDPOINTS_SETS: Readonly<Record<IpFamily, string>> = { 4: 'no-endpoints-v4', 6: 'no-endpoints-v6' };
const CLUSTER_IPS_SETS: Readonly<Record<IpFamily, string>> = { 4: 'cluster-ips-v4', 6: 'cluster-ips-v6' };
export const servicesMap = (f: IpFamily): string => SERVICES_MAPS[f];
export const noEndpointsSet = (f: IpFamily): string => NO_ENDPOINTS_SETS[f];
/** The served cluster IPs: a new connection still bound for one after nat is on a port or protocol the Service does not have, and is refused. */
export const clusterIPsSet = (f: IpFamily): string => CLUSTER_IPS_SETS[f];
export const REJECT_CHAIN = 'reject-chain';

export const ipKw = (f: IpFamily): string => (f === 4 ? 'ip' : 'ip6');
const addr = (f: IpFamily, ip: string, port: number): string => (f === 4 ? `${ip}:${port}` : `[${ip}]:${port}`);
/** The map/set key of destination address, protocol and port. */
export const KEY_TYPE: Record<IpFamily, string> = { 4: 'ipv4_addr . inet_proto . inet_service', 6: 'ipv6_addr . inet_proto . inet_service' };
/** A rule's match of that key, against a map or set. */
export const keyMatch = (f: IpFamily): string => `${ipKw(f)} daddr . meta l4proto . th dport`;
export const FAMILIES: readonly IpFamily[] = [4, 6];

/** A verdict map keyed by destination. */
export const verdictMap = (name: string, f: IpFamily): NftSetDecl => ({ name, decl: [`type ${KEY_TYPE[f]} : verdict`] });
/** The family of a dispatch map (verdictMap's declaration), else undefined: what a first fill writes as goto elements (first-fill.ts). */
export const dispatchFamily = (s: NftSetDecl): IpFamily | undefined => FAMILIES.find((f) => s.decl.length === 1 && s.decl[0] === `type ${KEY_TYPE[f]} : verdict`);
/** A set of destinations. */
export const keySet = (name: string, f: IpFamily): NftSetDecl => ({ name, decl: [`type ${KEY_TYPE[f]}`] });
/** A set of addresses. */
export const addressSet = (name: string, f: IpFamily): NftSetDecl => ({ name, decl: [`type ${f === 4 ? 'ipv4_addr' : 'ipv6_addr'}`] });
/**
 * The rules refusing what nat left bound for a served cluster IP (a port or protocol no Service
 * port has), one lookup per family whatever the number of cluster IPs, as kube-proxy's nftables
 * mode. In a filter chain after nat: a DNATed connection no longer has the cluster IP as its
 * destination, and a dropped one (no endpoint for this client) never gets here.
 */
export const unservedRules = (prefix = ''): string[] => FAMILIES.map((f) => `${prefix}${ipKw(f)} daddr @${clusterIPsSet(f)} goto ${REJECT_CHAIN}`);
/** TCP reset, else ICMP(v6) port unreachable: ECONNREFUSED at once, as the iptables back end's REJECT. */
export const REJECT_RULES: readonly string[] = ['meta l4proto tcp reject with tcp reset', 'reject with icmpx port-unreachable'];

/** The sidecar's fixed part. */
export const SIDECAR_TABLE: NftTable = {
  name: NFT_TABLE,
  sets: FAMILIES.flatMap((f) => [verdictMap(servicesMap(f), f), keySet(noEndpointsSet(f), f), addressSet(clusterIPsSet(f), f)]),
  chains: [
    { name: REJECT_CHAIN, rules: REJECT_RULES },
    { name: 'nat-output', rules: ['type nat hook output priority -100; policy accept;', ...FAMILIES.map((f) => `${keyMatch(f)} vmap @${servicesMap(f)}`)] },
    {
      name: 'filter-output',
      rules: [
        'type filter hook output priority 0; policy accept;',
        ...FAMILIES.map((f) => `ct state new ${keyMatch(f)} @${noEndpointsSet(f)} goto ${REJECT_CHAIN}`),
        ...unservedRules('ct state new '),
      ],
    },
  ],
  // A rule names only sets of its own table: each shard dispatches its own Service ports. The
  // reject part gets only element changes (never validated), so one copy in the root serves all.
  perShard: { sets: FAMILIES.map(servicesMap), chains: ['nat-output'] },
};

/**
 * Shard i's fixed part: the root table's for 0; after it, its own copies of the per-shard sets and
 * chains. Made once per table and shard: a partial plan asks for every shard's, twice (B2 at
 * 10,000 Services: 47 KiB of a change's 547 when made anew per call).
 */
export function shardFixed(table: NftTable, i: number): NftTable {
  if (i === 0 || table.perShard === undefined) return table;
  const made = shardTables.get(table) ?? shardTables.set(table, []).get(table) ?? [];
  let t = made[i];
  if (t === undefined) {
    const { sets, chains } = table.perShard;
    made[i] = t = { name: shardTableName(table.name, i), sets: table.sets.filter((s) => sets.includes(s.name)), chains: table.chains.filter((c) => chains.includes(c.name)) };
  }
  return t;
}
/** Each fixed part's shard tables, by shard (a table is never changed once made). */
const shardTables = new WeakMap<NftTable, NftTable[]>();

/** The number of tables a ruleset writes (1 for a table that cannot shard). */
export const shardsOf = (r: NftRuleset): number => (r.table.perShard === undefined ? 1 : (r.shards ?? 1));

/** The names of the tables a ruleset writes, root first. */
export const tableNames = (r: NftRuleset): string[] => Array.from({ length: shardsOf(r) }, (_, i) => shardTableName(r.table.name, i));

/** The shard holding a Service port's chain (and its maps, sets, owned chains). */
export const targetShard = (r: NftRuleset, chain: string): number => shardOf(chain, shardsOf(r));

/** The shard holding one of a Service port's elements: its own (`shard`, when known) for a per-shard set, else the root. */
const elementShard = (r: NftRuleset, t: NftTarget, e: NftElement, shard?: number): number => (r.table.perShard?.sets.includes(e.set) === true ? (shard ?? targetShard(r, t.chain)) : 0);

/** One table's content: its fixed part, its Service ports, and the elements of its fixed sets by set. */
export interface NftTablePart {
  readonly table: NftTable;
  readonly targets: NftTarget[];
  readonly elements: Map<string, NftElement[]>;
  /** The policy's part (the root table's only). */
  readonly policy?: NftPolicy;
}

/** A ruleset split by table, root first (one part for one shard). Pure. */
export function tableParts(r: NftRuleset): NftTablePart[] {
  const parts: NftTablePart[] = Array.from({ length: shardsOf(r) }, (_, i) => ({
    table: shardFixed(r.table, i),
    targets: [],
    elements: new Map(),
    ...(i === 0 && r.policy !== undefined ? { policy: r.policy } : {}),
  }));
  for (const t of r.targets.values()) {
    const shard = targetShard(r, t.chain);
    (parts[shard] as NftTablePart).targets.push(t);
    for (let i = 0; i < t.elements.length; i += 1) {
      const e = t.elements[i] as NftElement;
      const m = (parts[elementShard(r, t, e, shard)] as NftTablePart).elements;
      const list = m.get(e.set);
      if (list === undefined) m.set(e.set, [e]);
      else list.push(e);
    }
  }
  return parts;
}

function dnat(f: IpFamily, proto: string, ep: ChosenEndpoint): string {
  return `meta l4proto ${proto} dnat ${ipKw(f)} to ${addr(f, ep.ip, ep.port)}`;
}

/**
 * Affinity picks: rule i of n takes 1/(n-i) of what reaches it (a fresh `numgen` per rule), the
 * last takes the rest: equal shares, as the iptables back end's `statistic` probabilities. No
 * anonymous sets (a `numgen ... map { }` per Service would be one): at 10,000 Services they made a
 * whole-table load 20x slower and every change slower (docs/decisions/0024-nft-endpoint-maps.md). Affinity Services keep
 * these rules: their picks go to endpoint chains (verdicts), which a data map cannot hold.
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

/**
 * The endpoint map of a Service port: a pure function of its chain, so an endpoint change keeps
 * the name. A Service chain's name is already a hash (names.ts serviceChainName): the map takes
 * its hash part, one to one, with no second sha256 (10,000 of them in a first sync at 10,000
 * Services). Any other chain name (none the sidecar makes) is hashed. Map names may change between
 * versions: a process's first sync replaces its tables whole.
 */
export const endpointMapName = (chain: string): string =>
  chain.startsWith(SERVICE_CHAIN_PREFIX) ? flat(ENDPOINT_MAP_PREFIX + chain.slice(SERVICE_CHAIN_PREFIX.length)) : hashName(ENDPOINT_MAP_PREFIX, chain);
export const ENDPOINT_MAP_PREFIX = 'MPX-EPS-';

/** The map's key and data, as nft 1.0.6 accepts and lists back (`th dport` would do too; the protocol's own reads better). */
export function endpointMapType(f: IpFamily, proto: string): string {
  const byProto = mapTypes[f];
  let t = byProto.get(proto);
  if (t === undefined) byProto.set(proto, (t = flat(`typeof numgen random mod ${PICK_MODULUS} : ${ipKw(f)} daddr . ${proto} dport`)));
  return t;
}
/** One string per family and protocol, shared by every map (B5: strings kept per target cost heap). */
const mapTypes: Readonly<Record<IpFamily, Map<string, string>>> = { 4: new Map(), 6: new Map() };

/** A protocol as nft writes it, without a new string per target for the three Kubernetes has. */
function protoText(p: string): string {
  switch (p) {
    case 'TCP':
      return 'tcp';
    case 'UDP':
      return 'udp';
    case 'SCTP':
      return 'sctp';
    default:
      return p.toLowerCase();
  }
}

/** An endpoint map's element as nft lists it: `from-to : address . port`. */
export const rangeText = (r: EndpointRange): string => `${r.from}-${r.to} : ${r.ip} . ${r.port}`;

/** An endpoint map's elements as nft text: rangeText of each of mapRanges(m), joined by `, `, from the count's shared heads. */
export function mapElementsText(m: NftEndpointMap): string {
  const pieces: (string | number)[] = [];
  mapElementsInto(pieces, m);
  return pieces.join('');
}

/**
 * mapElementsText as pieces onto `pieces`, to be joined: a join makes one flat string, where a
 * concatenation per endpoint made ~5 intermediate strings (a first sync at 1,000 Services
 * allocated 1.5 MB in them, and ran them in the interpreter).
 */
function mapElementsInto(pieces: (string | number)[], m: NftEndpointMap): void {
  const eps = m.endpoints;
  const heads = rangeHeads(eps.length);
  for (let i = 0; i < eps.length; i += 1) {
    const ep = eps[i] as ChosenEndpoint;
    if (i > 0) pieces.push(', ');
    pieces.push(heads[i] ?? '', ep.ip, ' . ', ep.port);
  }
}

/** What rendering one Service port reads of its resolved target. */
export type NftTargetInput = Pick<ResolvedTarget, 'clusterIP' | 'chain' | 'endpoints' | 'affinitySeconds'> & {
  readonly target: Pick<ResolvedTarget['target'], 'family' | 'protocol' | 'port' | 'ingress' | 'externalIP'>;
  /** 'drop': no endpoint for this client while others exist (internalTrafficPolicy Local): dropped, not refused. */
  readonly choice?: ResolvedTarget['choice'];
};

/** The key of a target's address, protocol and port. */
export const targetKey = (r: NftTargetInput): string => flat(`${r.clusterIP} . ${protoText(r.target.protocol)} . ${r.target.port}`);

/**
 * How a Service port without affinity picks its endpoint: through its own interval map (`map`,
 * the sidecar's: an endpoint change is a map refill, which the kernel does not validate), or one
 * `numgen` DNAT rule per endpoint (`rules`, the node agent's: it shares the host's namespace with
 * other nftables users, and nft 1.0.6 reads every interval set of a namespace before any element
 * command, so our maps would slow kube-proxy's or firewalld's; docs/decisions/0024-nft-endpoint-maps.md).
 */
export type PickLayout = 'map' | 'rules';

/**
 * The sidecar's tables hold endpoint maps while they serve at most this many Service ports, and
 * one DNAT rule per endpoint beyond. Why first: the kernel finds a set by name in a list, so
 * loading N named maps in one table costs O(N²) (30,000 in 201 s, B10 2026-11-27). Shard tables
 * (shards.ts) took that away (30,000 over 32 tables: 4.1 s); what keeps the bound is kernel
 * memory, ~17 KB per map charged to the sidecar's cgroup (30,000: +523 MiB against its 128 Mi
 * limit). Past it, changes pay the kernel's table validation (docs/decisions/0024-nft-endpoint-maps.md
 * and docs/decisions/0025-nft-shard-tables.md).
 */
export const MAX_ENDPOINT_MAPS = 10_000;

/** The sidecar's layout for a table of `ports` Service ports. Pure, so a from-scratch render and the engine's edits agree. */
export const sidecarPickLayout = (ports: number, max: number = MAX_ENDPOINT_MAPS): PickLayout => (ports > max ? 'rules' : 'map');

/** A Service port's chain, endpoint chains and affinity sets, without elements. Pure. */
export function renderPicks(r: NftTargetInput, first: readonly string[] = [], layout: PickLayout = 'map'): Pick<NftTarget, 'rules' | 'ownedChains' | 'sets' | 'maps'> {
  const f = r.target.family;
  const proto = protoText(r.target.protocol);
  const eps = r.endpoints;
  // No endpoints: an empty chain (the refusal is an element of the program's reject set), or one
  // that drops when endpoints exist but none is this client's (kube-proxy drops, it does not refuse).
  if (eps.length === 0) return { rules: r.choice === 'drop' ? DROP_RULES : [], ownedChains: NONE, sets: NONE, maps: NONE };
  // The first sync renders every target: no spread or map() of arrays, no empty Maps (NONE).
  const rules: string[] = [];
  for (const l of first) rules.push(flat(l));
  if (r.affinitySeconds === undefined && layout === 'rules') {
    for (let i = 0; i < eps.length; i += 1) rules.push(flat(`${pick(eps.length, i)}${dnat(f, proto, eps[i] as ChosenEndpoint)}`));
    return { rules, ownedChains: NONE, sets: NONE, maps: NONE };
  }
  if (r.affinitySeconds === undefined) {
    const name = endpointMapName(r.chain);
    rules.push(flat(`meta l4proto ${proto} dnat ${ipKw(f)} to numgen random mod ${PICK_MODULUS} map @${name}`));
    const maps = new Map<string, NftEndpointMap>();
    maps.set(name, { type: endpointMapType(f, proto), endpoints: eps });
    return { rules, ownedChains: NONE, sets: NONE, maps };
  }
  const ownedChains = new Map<string, readonly string[]>();
  const sets = new Map<string, number>();
  const picks: string[] = [];
  for (const [i, ep] of eps.entries()) {
    const set = affinitySetName(r.chain, ep, r.affinitySeconds);
    const epChain = endpointChainName(r.chain, ep);
    sets.set(set, r.affinitySeconds);
    ownedChains.set(epChain, [flat(`update @${set} { ${ipKw(f)} saddr }`), flat(dnat(f, proto, ep))]);
    rules.push(flat(`${ipKw(f)} saddr @${set} goto ${epChain}`));
    picks.push(flat(`${pick(eps.length, i)}goto ${epChain}`));
  }
  for (const l of picks) rules.push(l);
  return { rules, ownedChains, sets, maps: NONE };
}

/**
 * One shared empty map for the parts most targets do not have (owned chains and affinity sets
 * exist only with affinity, endpoint maps only with endpoints): an empty Map still costs ~180
 * bytes of heap (B5: two per Service).
 */
const NONE: ReadonlyMap<never, never> = new Map<never, never>();

/** One sidecar Service port's part of the table. Pure; the result depends only on the resolved target. */
export function renderTarget(r: NftTargetInput, layout: PickLayout = 'map'): NftTarget {
  const f = r.target.family;
  const key = targetKey(r);
  const dispatch: NftElement = { set: servicesMap(f), key, value: flat(`goto ${r.chain}`) };
  const elements: NftElement[] = r.endpoints.length === 0 && r.choice !== 'drop' ? [dispatch, { set: noEndpointsSet(f), key }] : [dispatch];
  // Several ports of one cluster IP each add it: a set holds it once, and a port that goes leaves it to the others (partialText rewrites a set that loses an element from every target's).
  if (isClusterIP(r.target)) elements.push({ set: clusterIPsSet(f), key: r.clusterIP });
  const p = renderPicks(r, NO_FIRST, layout);
  return { family: f, key, chain: r.chain, rules: p.rules, ownedChains: p.ownedChains, sets: p.sets, maps: p.maps, elements };
}
const NO_FIRST: readonly string[] = [];
const DROP_RULES: readonly string[] = ['drop'];

/**
 * Targets in order into a ruleset: a dispatch element already taken (the same address, protocol
 * and port twice in one map) keeps the first, as the iptables dispatch chain's first matching rule does.
 */
export function collectTargets(table: NftTable, targets: Iterable<NftTarget>, shards = 1): NftRuleset {
  const out = new Map<string, NftTarget>();
  // Dispatch keys taken, per map: no key string per target.
  const taken = new Map<string, Set<string>>();
  for (const t of targets) {
    if (out.has(t.chain)) continue;
    const d = t.elements[0];
    const set = d?.set ?? '';
    const key = d?.key ?? '';
    let keys = taken.get(set);
    if (keys === undefined) taken.set(set, (keys = new Set()));
    if (keys.has(key)) continue;
    keys.add(key);
    out.set(t.chain, t);
  }
  return shards > 1 ? { table, targets: nftTargets(out), shards } : { table, targets: nftTargets(out) };
}

/** Rule statements of one Service port (its chain and the chains it owns): what countNftRules adds up. */
const targetRuleCount = (t: NftTarget): number => {
  let n = t.rules.length;
  for (const l of t.ownedChains.values()) n += l.length;
  return n;
};

/** Service ports by chain as the engine's snapshot (../engine.ts): the next sync edits it in O(changes), counted by rules. */
export const nftTargets = (m: Map<string, NftTarget>): Snapshot<string, NftTarget> => Snapshot.of(m, targetRuleCount);

/**
 * The sidecar's table for these targets. `memo` keeps each resolved target's part (for one
 * layout): the render caches (incremental.ts) hand back the same object for an unchanged target,
 * so a sync renders only what changed.
 */
export function renderNft<I extends NftTargetInput>(
  targets: readonly I[],
  memo?: WeakMap<I, NftTarget>,
  layout: PickLayout = sidecarPickLayout(targets.length),
  shards: number = shardCount(targets.length),
): NftRuleset {
  const parts: NftTarget[] = new Array<NftTarget>(targets.length);
  for (let i = 0; i < targets.length; i += 1) {
    const r = targets[i] as I;
    let t = memo?.get(r);
    if (t === undefined) {
      t = renderTarget(r, layout);
      memo?.set(r, t);
    }
    parts[i] = t;
  }
  return collectTargets(SIDECAR_TABLE, parts, shards);
}

export const tableRef = (name: string): string => `${NFT_FAMILY} ${name}`;

export function setDecl(name: string, f: IpFamily, timeout: number): string {
  return `set ${name} { type ${f === 4 ? 'ipv4_addr' : 'ipv6_addr'}; flags dynamic,timeout; timeout ${timeout}s; }`;
}

/** `<indent><head> {`, the rules one a line, `}`: a chain inside the table block, or an `add chain` command. */
function chainBlock(name: string, lines: readonly string[], indent = '\t', head = `chain ${name}`): string[] {
  return [`${indent}${head} {`, ...lines.map((l) => `${indent}\t${l}`), `${indent}}`];
}

/** An endpoint map in the table block, as `nft list` prints it (which also wraps long element lines): one flat string (fullText). Empty for a skeleton. */
function mapBlock(name: string, m: NftEndpointMap, skeleton: boolean): string {
  if (skeleton) return `\tmap ${name} {\n\t\t${m.type}\n\t\tflags interval\n\t}\n`;
  const pieces: (string | number)[] = ['\tmap ', name, ' {\n\t\t', m.type, '\n\t\tflags interval\n\t\telements = { '];
  mapElementsInto(pieces, m);
  pieces.push(' }\n\t}\n');
  return pieces.join('');
}

/** A chain inside the table block: one flat string (fullText). */
function chainText(name: string, lines: readonly string[]): string {
  let block = `\tchain ${name} {\n`;
  for (let i = 0; i < lines.length; i += 1) block += `\t\t${lines[i] as string}\n`;
  return flat(`${block}\t}\n`);
}

/**
 * An endpoint map declared by a command, with elements or without (an existing map keeps its
 * own). Why `add map { elements }` and never `add element`: before an element command nft 1.0.6
 * fetches the elements of every interval set of the table, one dump per set; at 10,000 endpoint
 * maps a one-map `flush map` + `add element` took 6-7 s, the same with `add map ... { elements }`
 * 80-110 ms (docs/decisions/0024-nft-endpoint-maps.md).
 */
export const mapDecl = (T: string, name: string, m: NftEndpointMap, elements = false): string =>
  `add map ${T} ${name} { ${m.type}; flags interval;${elements ? ` elements = { ${mapElementsText(m)} };` : ''} }`;

/** The commands replacing an endpoint map's contents: flush, then the new elements (one transaction with the rest). */
const mapFill = (T: string, name: string, m: NftEndpointMap): string[] => [`flush map ${T} ${name}`, mapDecl(T, name, m, true)];

export const setKind = (s: NftSetDecl): 'map' | 'set' => (s.decl.some((l) => l.includes(' : ')) ? 'map' : 'set');

/** The same endpoints in the same order: then the ranges are the same too (a function of the count). */
const sameEndpoints = (a: readonly ChosenEndpoint[], b: readonly ChosenEndpoint[]): boolean =>
  a === b ||
  (a.length === b.length &&
    a.every((e, i) => {
      const o = b[i] as ChosenEndpoint;
      return e.ip === o.ip && e.port === o.port;
    }));

const sameMap = (a: NftEndpointMap | undefined, b: NftEndpointMap | undefined): boolean => a !== undefined && b !== undefined && a.type === b.type && sameEndpoints(a.endpoints, b.endpoints);

export const elementText = (e: NftElement): string => (e.value === undefined ? e.key : `${e.key} : ${e.value}`);

/**
 * The whole table, replacing whatever table of that name exists, in one transaction: the first
 * line creates it if missing, so deleting it cannot fail, and the block recreates it.
 *
 * Built as one flat string per block (a map, a chain), joined once: a block's concatenation
 * tree dies as soon as it is flattened, so the young-generation GC copies one string per block
 * and not a line string and its tree per line; and the join walks ~30,000 strings at 10,000
 * Service ports, not ~100,000 lines (or ~1,000,000 pieces). Measured in a cold process at
 * 10,000 Services: the text ~40 % less CPU than line by line (docs/decisions/0026-first-sync-fills-maps-over-netlink.md).
 *
 * `skeleton`: the same tables without the endpoint maps' and dispatch maps' elements (first-fill.ts
 * writes those in the next transaction). Nothing dispatches to a Service chain until then, so the
 * tables are inert in between.
 */
export function fullText(next: NftRuleset, stale: readonly string[] = [], skeleton = false): string {
  return partsText(tableParts(next), stale, skeleton);
}

/** fullText of a ruleset already split by table. */
export function partsText(parts: readonly NftTablePart[], stale: readonly string[] = [], skeleton = false): string {
  const out: string[] = [];
  // Tables of ours the new layout does not have (fewer shards): removed in the same transaction.
  for (const name of stale) out.push(`add table ${tableRef(name)}\ndelete table ${tableRef(name)}\n`);
  for (const part of parts) tableBlock(out, part, skeleton);
  return out.join('');
}

/** One table whole, onto `out` (a string per block, each ending in a newline): created if missing, so deleting it cannot fail, then written by its block. */
function tableBlock(out: string[], { table, targets: all, elements: members, policy }: NftTablePart, skeleton: boolean): void {
  const T = tableRef(table.name);
  out.push(`add table ${T}\ndelete table ${T}\ntable ${T} {\n`);
  // Most Service ports have no sets or owned chains (affinity only): no iterator for those.
  // Index loops: a first sync runs this cold, where for-of allocates an iterator result per step.
  for (let i = 0; i < all.length; i += 1) {
    const t = all[i] as NftTarget;
    if (t.sets.size > 0) for (const [name, timeout] of t.sets) out.push(`\t${setDecl(name, t.family, timeout)}\n`);
  }
  for (let i = 0; i < all.length; i += 1) {
    const t = all[i] as NftTarget;
    if (t.maps.size > 0) for (const [name, m] of t.maps) out.push(mapBlock(name, m, skeleton));
  }
  for (let i = 0; i < all.length; i += 1) {
    const t = all[i] as NftTarget;
    if (t.ownedChains.size > 0) for (const [name, lines] of t.ownedChains) out.push(chainText(name, lines));
  }
  for (let i = 0; i < all.length; i += 1) {
    const t = all[i] as NftTarget;
    out.push(chainText(t.chain, t.rules));
  }
  for (const s of table.sets) {
    let block = `\t${setKind(s)} ${s.name} {\n`;
    for (const l of s.decl) block += `\t\t${l}\n`;
    out.push(block);
    const elems = skeleton && dispatchFamily(s) !== undefined ? [] : (members.get(s.name) ?? []);
    if (elems.length > 0) {
      out.push('\t\telements = { ');
      for (let i = 0; i < elems.length; i += 1) {
        const e = elems[i] as NftElement;
        if (i > 0) out.push(',\n\t\t\t     ');
        if (e.value === undefined) out.push(e.key);
        else out.push(e.key, ' : ', e.value);
      }
      out.push(' }\n');
    }
    out.push('\t}\n');
  }
  for (const c of table.chains) out.push(chainText(c.name, c.rules));
  policyBlock(out, policy);
  out.push('}\n');
}

const same = (x: readonly string[], y: readonly string[]): boolean => x.length === y.length && x.every((l, i) => l === y[i]);

function sameTarget(a: NftTarget, b: NftTarget): boolean {
  if (a === b) return true;
  if (!same(a.rules, b.rules) || a.sets.size !== b.sets.size || a.ownedChains.size !== b.ownedChains.size || !same(a.elements.map(elementText), b.elements.map(elementText))) return false;
  if (
    !same(
      a.elements.map((e) => e.set),
      b.elements.map((e) => e.set),
    )
  )
    return false;
  for (const [n, s] of a.sets) if (b.sets.get(n) !== s) return false;
  if (a.maps.size !== b.maps.size) return false;
  for (const [n, m] of a.maps) if (!sameMap(m, b.maps.get(n))) return false;
  for (const [n, l] of a.ownedChains) {
    const o = b.ownedChains.get(n);
    if (o === undefined || !same(l, o)) return false;
  }
  return true;
}

export interface NftPlan {
  /** `nft -f` input; '' when nothing changed. */
  readonly text: string;
  readonly full: boolean;
  /** The Service ports (by chain) whose part changed, and the fixed chains rewritten. */
  readonly changedChains: readonly string[];
  readonly deletedChains: readonly string[];
  /** Endpoint maps whose contents the text replaces (`flush map` + `add map ... { elements }`), in text order. */
  readonly replacedMaps: readonly NftMapReplacement[];
  /** The text is those replacements and nothing else (an endpoint-only change): a writer of elements may send them instead. */
  readonly onlyReplacements: boolean;
  /** A first fill (first-fill.ts): the text is the tables' skeletons, which go one table a transaction, and the elements follow in bounded chunks. */
  readonly fill?: NftFirstFill;
  /** A whole write over tables of ours that are there (tuning/replace.ts): in place, in bounded transactions. */
  readonly replace?: NftReplace;
}

/** A whole write over the tables of ours found, in place and in bounded transactions, in order (tuning/replace.ts). */
export interface NftReplace {
  /** `add table` of every table written: the first transaction. */
  readonly tables: string;
  /** The Service ports' parts, each rewritten in place with its table's name, a bounded number a transaction. */
  readonly chunks: readonly (readonly NftPlacedTarget[])[];
  /** Each table's fixed part, its dispatch and (the root's) policy rewritten in place: one transaction each, after the chunks. */
  readonly finals: readonly string[];
  /** Tables of ours found that the write does not keep: deleted after the finals. */
  readonly staleTables: readonly string[];
}

/** A Service port's part and the table that holds it. */
export interface NftPlacedTarget {
  readonly table: string;
  readonly target: NftTarget;
}

/** A first fill's transactions, in order (first-fill.ts). */
export interface NftFirstFill {
  /** Each table's skeleton, root first: one `nft -f` each. */
  readonly skeletons: readonly string[];
  /** The endpoint maps' ranges, then the dispatch elements, a bounded number a chunk: one transaction each. */
  readonly chunks: readonly NftFillChunk[];
}

/** One transaction of a first fill's elements: the writes (an nfnetlink batch), and each write's map declaration (its `add map` text instead). */
export interface NftFillChunk {
  readonly writes: readonly ElementWrite[];
  readonly decls: readonly string[];
}

/** An endpoint map's new contents. */
export interface NftMapReplacement {
  /** The table holding it (its Service port's shard). */
  readonly table: string;
  readonly map: string;
  readonly family: IpFamily;
  readonly ranges: readonly EndpointRange[];
}

/**
 * A chain written whole: flushed when it exists, then `add chain <name> { rules }`. Why a block and
 * not `add rule` lines: nft 1.0.6 fetches every chain, set, object and flowtable of the namespace
 * before a transaction holding `add rule` or an element command, and only the tables for `flush
 * chain` and `add chain` with a block: at 10,000 Services a one-endpoint change is half the cost
 * (docs/decisions/0024-nft-endpoint-maps.md).
 */
function refill(T: string, name: string, rules: readonly string[], exists: boolean): string[] {
  const flush = exists ? [`flush chain ${T} ${name}`] : [];
  if (rules.length === 0) return exists ? flush : [`add chain ${T} ${name}`];
  return [...flush, ...chainBlock(name, rules, '', `add chain ${T} ${name}`)];
}

/**
 * The change from `prev` (what this process wrote last) to `next`, touching only the Service
 * ports that differ: their sets and maps declared and owned chains written first, then endpoint
 * maps whose contents changed refilled, then each Service chain whose rules changed written whole,
 * then elements removed and added, then what is no longer used deleted (a chain must be empty and
 * unreferenced to go). A fixed chain whose rules changed (the node's networks) is written whole
 * too. One `nft -f` is one transaction: all or nothing. An endpoint change of a Service port
 * without affinity (N >= 1 before and after) is only its map's refill: no rule, so the kernel
 * validates nothing at commit.
 */
export function partialText(next: NftRuleset, prev: NftRuleset): NftPlan {
  // Each Service port's commands name its shard's table (the same in prev and next: a change of
  // the shard count is a full sync, planNft).
  const names = tableNames(next);
  const tables = names.map(tableRef);
  const tableOf = (chain: string): string => tables[targetShard(next, chain)] as string;
  const adds: string[] = [];
  const refills: string[] = [];
  const replacedMaps: NftMapReplacement[] = [];
  const fills: string[] = [];
  // Per fixed map or set (by shard and name: `<shard> <set>`): the elements added, and whether one goes (then it is written whole).
  const elemAdd = new Map<string, string[]>();
  const elemDel = new Set<string>();
  const added = (set: string, text: string): void => void (elemAdd.get(set) ?? elemAdd.set(set, []).get(set))?.push(text);
  const placed = (t: NftTarget, e: NftElement): string => `${elementShard(next, t, e)} ${e.set}`;
  const flushes: string[] = [];
  const deletes: string[] = [];
  const changedChains: string[] = [];
  const deletedChains: string[] = [];
  const elemKey = (e: NftElement): string => `${e.set} { ${e.key} }`;
  const removeParts = (t: NftTarget, keep: NftTarget | undefined): void => {
    const T = tableOf(t.chain);
    for (const name of t.ownedChains.keys())
      if (keep?.ownedChains.has(name) !== true) {
        flushes.push(`flush chain ${T} ${name}`);
        deletes.push(`delete chain ${T} ${name}`);
        deletedChains.push(name);
      }
    for (const name of t.sets.keys()) if (keep?.sets.has(name) !== true) deletes.push(`delete set ${T} ${name}`);
    for (const name of t.maps.keys()) if (keep?.maps.has(name) !== true) deletes.push(`delete map ${T} ${name}`);
  };
  // Only the Service ports that differ (../engine.ts: two versions of one table cost the change, not the table).
  for (const [chain, { before: old, after: t }] of changedEntries(prev.targets, next.targets, sameTarget)) {
    const T = tableOf(chain);
    if (t === undefined) {
      if (old === undefined) continue;
      for (const e of old.elements) elemDel.add(placed(old, e));
      flushes.push(`flush chain ${T} ${chain}`);
      // The Service chain goes before its owned chains: it is what refers to them.
      deletes.unshift(`delete chain ${T} ${chain}`);
      deletedChains.push(chain);
      removeParts(old, undefined);
      continue;
    }
    // Every set the chains name is declared again, kept or new: a chain block can name only sets
    // nft has in its cache, and this transaction fetches no set (re-adding an existing set keeps its elements).
    for (const [name, timeout] of t.sets) adds.push(`add ${setDecl(name, t.family, timeout).replace(/^set /, `set ${T} `)}`);
    const rewrite = old === undefined || !same(old.rules, t.rules);
    for (const [name, m] of t.maps) {
      const was = old?.maps.get(name);
      const changed = !sameMap(was, m);
      if (changed) replacedMaps.push({ table: names[targetShard(next, chain)] as string, map: name, family: t.family, ranges: mapRanges(m) });
      // A new map is declared with its elements; a kept one again when the chain naming it is
      // written (as the sets above), and refilled when its elements changed.
      if (was === undefined) adds.push(mapDecl(T, name, m, true));
      else {
        if (rewrite) adds.push(mapDecl(T, name, m));
        if (changed) refills.push(...mapFill(T, name, m));
      }
    }
    // A new chain is declared first: an owned chain may send to it (a node frontend's source ranges).
    if (old === undefined && t.ownedChains.size > 0) adds.push(`add chain ${T} ${chain}`);
    for (const [name, lines] of t.ownedChains) {
      const was = old?.ownedChains.get(name);
      if (was === undefined || !same(was, lines)) adds.push(...refill(T, name, lines, was !== undefined));
    }
    if (rewrite) fills.push(...refill(T, chain, t.rules, old !== undefined));
    changedChains.push(chain);
    // Elements by difference; one whose value changed is deleted and added again (a map's value cannot change in place).
    const had = new Map((old?.elements ?? []).map((e) => [elemKey(e), elementText(e)]));
    const has = new Map(t.elements.map((e) => [elemKey(e), elementText(e)]));
    for (const e of old?.elements ?? []) if (has.get(elemKey(e)) !== elementText(e)) elemDel.add(placed(old as NftTarget, e));
    for (const e of t.elements) if (had.get(elemKey(e)) !== elementText(e)) added(placed(t, e), elementText(e));
    if (old !== undefined) removeParts(old, t);
  }
  const fixed: string[] = policyChange(tables[0] as string, prev.policy, next.policy, { changed: changedChains, deleted: deletedChains, removes: flushes });
  // The same fixed part (the sidecar's, always): no fixed chain changed.
  for (const [i, T] of prev.table === next.table ? [] : tables.entries()) {
    const before = new Map(shardFixed(prev.table, i).chains.map((c) => [c.name, c.rules]));
    for (const c of shardFixed(next.table, i).chains) {
      const o = before.get(c.name);
      if (o === undefined || !same(o, c.rules)) {
        fixed.push(...refill(T, c.name, c.rules, o !== undefined));
        changedChains.push(c.name);
      }
    }
  }
  // Chains are deleted before sets and maps: a rule may still name one until its chain goes.
  const ordered = [...deletes.filter((l) => l.startsWith('delete chain')), ...deletes.filter((l) => !l.startsWith('delete chain'))];
  const elems = fixedElements(tables, next, elemAdd, elemDel);
  const others = [...adds, ...fills, ...elems, ...fixed, ...flushes, ...ordered];
  const lines = [...adds, ...refills, ...fills, ...elems, ...fixed, ...flushes, ...ordered];
  return { text: lines.length === 0 ? '' : `${lines.join('\n')}\n`, full: false, changedChains, deletedChains, replacedMaps, onlyReplacements: others.length === 0 && refills.length > 0 };
}

/**
 * The element changes of the fixed maps and sets, without element commands (see mapDecl for why):
 * added elements as `add map|set <name> { <decl>; elements = { ... } }`; a map or set that loses
 * an element is flushed and written whole (O(its elements), 190 ms for 10,000 verdict elements
 * where one `delete element` took 3.5-5 s). One transaction: no packet sees it half-written.
 */
function fixedElements(tables: readonly string[], next: NftRuleset, adds: ReadonlyMap<string, readonly string[]>, dels: ReadonlySet<string>): string[] {
  const out: string[] = [];
  for (const [i, T] of tables.entries())
    for (const s of shardFixed(next.table, i).sets) {
      const kind = setKind(s);
      const at = `${i} ${s.name}`;
      let elems = adds.get(at);
      if (dels.has(at)) {
        out.push(`flush ${kind} ${T} ${s.name}`);
        const all: string[] = [];
        for (const t of next.targets.values()) for (const e of t.elements) if (e.set === s.name && elementShard(next, t, e) === i) all.push(elementText(e));
        elems = all;
      }
      if (elems !== undefined && elems.length > 0) out.push(`add ${kind} ${T} ${s.name} { ${s.decl.join('; ')}; elements = { ${elems.join(', ')} }; }`);
    }
  return out;
}

/**
 * Full or partial, as the iptables planner decides: full without a previous state of ours (or
 * another table's), and when the number of shards changed (every Service port may move table).
 * `existing`: the tables of ours the namespace holds (read back for a full sync); a full text
 * removes those, and prev's, that `next` does not have.
 */
export function planNft(next: NftRuleset, prev: NftRuleset | undefined, full: boolean, existing: readonly string[] = []): NftPlan {
  if (prev === undefined || wholeTableDue(next, prev, full)) {
    const keep = new Set(tableNames(next));
    const stale = [...new Set([...existing, ...(prev === undefined ? [] : tableNames(prev))])].filter((t) => !keep.has(t));
    return { text: fullText(next, stale), full: true, changedChains: [...next.targets.keys()], deletedChains: [], replacedMaps: [], onlyReplacements: false };
  }
  return partialText(next, prev);
}

/** Whether the next plan writes the tables whole (planNft): asked, nothing before, or another layout. */
export function wholeTableDue(next: NftRuleset, prev: NftRuleset | undefined, full: boolean): boolean {
  return (
    full ||
    prev === undefined ||
    prev.table.name !== next.table.name ||
    shardsOf(prev) !== shardsOf(next) ||
    !same(
      prev.table.sets.map((s) => s.name),
      next.table.sets.map((s) => s.name),
    )
  );
}

/** The text removing tables of ours (nothing else of ours exists in nftables): the root and any shards. */
export function cleanupText(table: string = NFT_TABLE, shards: readonly string[] = []): string {
  return [table, ...shards.filter((s) => s !== table)].map((t) => `add table ${tableRef(t)}\ndelete table ${tableRef(t)}\n`).join('');
}

/** Rule statements in a ruleset, for the rules-count metric (Service and owned chains; the fixed chains not counted). */
export function countNftRules(r: NftRuleset): number {
  // A rendered table keeps its count as it changes; another program's own map is counted.
  if (r.targets instanceof Snapshot) return r.targets.total;
  let n = 0;
  for (const t of r.targets.values()) n += targetRuleCount(t);
  return n;
}
