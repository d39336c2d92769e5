/**
 * Pure rendering: DesiredState -> per-family iptables rulesets, routes, and the
 * `iptables-restore --noflush` text that moves a namespace from what it has to what it should have.
 * No IO here, so every decision (which endpoints, which chains change, full or partial) is tested
 * against golden files and unit tests.
 *
 * Layout (chosen for the nf_tables back end, where kube-proxy's chain-per-endpoint layout is
 * quadratic — see ../shared/DESIGN.md):
 *
 *   nat    OUTPUT       -> MPX-SERVICES            (exactly one jump, ours)
 *   nat    MPX-SERVICES -d <clusterIP> -p <proto> --dport <port> -> MPX-SVC-<hash>   (one rule per Service port)
 *   nat    MPX-SVC-<hash>  the DNAT rules themselves, `statistic random 1/(n-i)`, last unconditional;
 *                          with sessionAffinity ClientIP, `recent --rcheck` rules first and
 *                          `recent --set` on each chosen rule (no per-endpoint chains).
 *   filter OUTPUT       -> MPX-REJECT (NEW connections only)
 *   filter MPX-REJECT   -d <clusterIP> -p <proto> --dport <port> -j REJECT   (Service ports without endpoints)
 *
 * Why a second jump, in filter: the nat table cannot REJECT, and a Service without usable
 * endpoints must fail fast (ECONNREFUSED: tcp-reset for TCP, icmp(6)-port-unreachable for UDP and
 * SCTP) rather than time out. As kube-proxy, only Service ports without endpoints get a reject
 * rule, so every other new connection crosses an empty-ish filter chain.
 *
 * Two tables, and iptables-restore commits each table separately (verified: a failing `*filter`
 * section leaves an earlier `*nat` section applied). Every mix of old and new is still safe: nat
 * OUTPUT runs before filter OUTPUT, so a packet that nat DNATed no longer has the cluster IP as its
 * destination when filter sees it, and a reject rule can never break a Service that has DNAT rules;
 * a missing reject rule turns "refused" into "timeout" until the retry (a full sync). filter goes
 * first so a Service that loses its last endpoint rejects before its DNAT rules go.
 */
import { createHash } from 'node:crypto';
import { networkKey } from '../src/annotations/service-network.js';
import { isIPv4, isIPv6 } from 'node:net';
import { normalizeIPv6 } from '../src/annotations/ip.js';
import type { BackendEndpoint, DesiredState, IpFamily, PodInterface, Protocol, ServicePortTarget } from './model.js';

export const CHAIN_PREFIX = 'MPX-';
export const DISPATCH_CHAIN = 'MPX-SERVICES';
export const REJECT_CHAIN = 'MPX-REJECT';
export const SERVICE_CHAIN_PREFIX = 'MPX-SVC-';
/** iptables limits chain names to 28 characters (29 bytes with the NUL). */
export const MAX_CHAIN_NAME = 28;
/** Comment on our jumps from OUTPUT; also how cleanup recognises them. */
export const JUMP_COMMENT = 'multus-proxy';
export type TableName = 'filter' | 'nat';
/** Restore order: filter first, so a Service port that loses its last endpoint rejects before its DNAT rules go. */
export const TABLES: readonly TableName[] = ['filter', 'nat'];

/** The canonical jump rule spec (what iptables-save prints after `-A OUTPUT `), per table. */
export const JUMP_SPEC: Readonly<Record<TableName, string>> = {
  nat: `-m comment --comment ${JUMP_COMMENT} -j ${DISPATCH_CHAIN}`,
  filter: `-m conntrack --ctstate NEW -m comment --comment ${JUMP_COMMENT} -j ${REJECT_CHAIN}`,
};

const PROTOCOLS: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];
const MAX_AFFINITY_SECONDS = 86400;

// ---------------------------------------------------------------------------------------------
// Names

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** RFC 4648 base32 (no padding) of the first bytes needed for `chars` characters. */
export function base32(bytes: Uint8Array, chars: number): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = ((value << 8) | b) & 0xfffff; // only the unread bits (< 13 + 8) matter
    bits += 8;
    while (bits >= 5 && out.length < chars) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
    if (out.length >= chars) break;
  }
  return out;
}

/** 16 base32 characters of sha256, as kube-proxy names its chains: 80 bits, no practical collisions. */
export function hashName(prefix: string, ...parts: readonly (string | number)[]): string {
  const digest = createHash('sha256').update(parts.join('\u0000')).digest();
  return prefix + base32(digest, 16);
}

/** The nat chain of one Service port: a function of (service, port name, protocol, family, cluster IP). */
export function serviceChainName(t: Pick<ServicePortTarget, 'service' | 'portName' | 'protocol' | 'family' | 'clusterIP'>): string {
  return hashName(SERVICE_CHAIN_PREFIX, t.service, t.portName, t.protocol, t.family, t.clusterIP);
}

/** The xt_recent list of one endpoint of one Service chain (valid: [A-Z0-9-], 20 chars, unique). */
export function recentListName(chain: string, ep: Pick<BackendEndpoint, 'ip' | 'port'>): string {
  return hashName(CHAIN_PREFIX, chain, ep.ip, ep.port);
}

// ---------------------------------------------------------------------------------------------
// Resolution: which targets are served, through which interface, to which endpoints

export interface ChosenEndpoint {
  readonly ip: string;
  readonly port: number;
}

/** A target the pod serves, with everything rendering needs decided. */
export interface ResolvedTarget {
  readonly target: ServicePortTarget;
  /** Normalised cluster IP. */
  readonly clusterIP: string;
  readonly chain: string;
  readonly interface: string;
  /** The pod's address on that interface: the source of every connection to the cluster IP. */
  readonly source: string;
  /** Endpoints that get traffic (ready; else serving+terminating), sorted, deduplicated. */
  readonly endpoints: readonly ChosenEndpoint[];
  /** Which rule picked them, for logs and metrics. */
  readonly choice: 'ready' | 'terminating' | 'none';
  readonly affinitySeconds?: number;
  /** The Service chain's DNAT rules, its dispatch rule and its reject rule (used when it has no endpoints). */
  readonly rules: readonly string[];
  readonly dispatch: string;
  readonly reject: string;
  /** Its cluster IP's route (the first target of a cluster IP decides). */
  readonly route: Route;
}

export interface SkippedTarget {
  /** `namespace/name:port/PROTO (clusterIP)` */
  readonly target: string;
  readonly reason: string;
  /** 'info' for normal situations (the pod is not on that network), 'warn' for bad input. */
  readonly level: 'info' | 'warn';
}

export interface Route {
  readonly family: IpFamily;
  /** Cluster IP (normalised), routed as /32 or /128. */
  readonly dst: string;
  readonly dev: string;
  readonly src: string;
}

export interface Resolution {
  readonly targets: readonly ResolvedTarget[];
  readonly skipped: readonly SkippedTarget[];
  /** Endpoints dropped for bad input, as messages. */
  readonly warnings: readonly string[];
}

function describe(t: ServicePortTarget): string {
  return `${t.service}:${t.portName === '' ? t.port : t.portName}/${t.protocol} (${t.clusterIP})`;
}

function validPort(p: number): boolean {
  return Number.isInteger(p) && p >= 1 && p <= 65535;
}

/** Normalised address of family `family`, or undefined when `text` is not one (no prefix, no zone). */
export function normalizeAddress(text: string, family: IpFamily): string | undefined {
  // isIPv4 already refuses leading zeros and prefixes, so a valid IPv4 text is its own normal form.
  if (family === 4) return isIPv4(text) ? text : undefined;
  return isIPv6(text) && !text.includes('%') ? normalizeIPv6(text) : undefined;
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Sort key that keeps output stable whatever order the informers delivered things in. */
function targetOrder(a: ServicePortTarget, b: ServicePortTarget): number {
  return (
    compareText(a.service, b.service) ||
    compareText(a.portName, b.portName) ||
    compareText(a.protocol, b.protocol) ||
    a.family - b.family ||
    compareText(a.clusterIP, b.clusterIP) ||
    compareText(networkKey(a.network), networkKey(b.network)) ||
    a.port - b.port
  );
}

/**
 * kube-proxy's choice: ready endpoints; if none, serving and terminating ones (so a rolling update
 * of the last pod does not drop traffic); if none, nothing (the Service rejects).
 */
export function chooseEndpoints(
  endpoints: readonly BackendEndpoint[],
  family: IpFamily,
  warn: (msg: string) => void,
  what: string,
): { endpoints: ChosenEndpoint[]; choice: ResolvedTarget['choice'] } {
  const all = isClean(endpoints, family) ? endpoints : mergeEndpoints(endpoints, family, warn, what);
  const pick = (keep: (e: BackendEndpoint) => boolean): ChosenEndpoint[] => {
    const out: ChosenEndpoint[] = [];
    for (const e of all) if (keep(e)) out.push({ ip: e.ip, port: e.port });
    return out;
  };
  const ready = pick((e) => e.ready);
  if (ready.length > 0) return { endpoints: ready, choice: 'ready' };
  const terminating = pick((e) => e.serving && e.terminating);
  if (terminating.length > 0) return { endpoints: terminating, choice: 'terminating' };
  return { endpoints: [], choice: 'none' };
}

/** The runtime's usual input: valid, normalised, sorted, unique. Checked in one pass, no allocation. */
function isClean(endpoints: readonly BackendEndpoint[], family: IpFamily): boolean {
  let prev: BackendEndpoint | undefined;
  for (const e of endpoints) {
    if (!validPort(e.port) || normalizeAddress(e.ip, family) !== e.ip) return false;
    if (prev !== undefined && (compareText(prev.ip, e.ip) || prev.port - e.port) >= 0) return false;
    prev = e;
  }
  return true;
}

/** Anything else: drop bad entries (with a message), normalise, merge duplicates, sort. */
function mergeEndpoints(endpoints: readonly BackendEndpoint[], family: IpFamily, warn: (msg: string) => void, what: string): BackendEndpoint[] {
  const merged = new Map<string, BackendEndpoint>();
  for (const ep of endpoints) {
    const ip = normalizeAddress(ep.ip, family);
    if (ip === undefined || !validPort(ep.port)) {
      warn(`${what}: endpoint ${JSON.stringify(ep.ip)} port ${JSON.stringify(ep.port)} dropped: not an IPv${family} address with a port from 1 to 65535; the controller should not publish it`);
      continue;
    }
    const key = `${ip}|${ep.port}`;
    const seen = merged.get(key);
    // The same address twice (e.g. in two slices during a move): the more usable state wins.
    merged.set(key, {
      ip,
      port: ep.port,
      ready: ep.ready || (seen?.ready ?? false),
      serving: ep.serving || (seen?.serving ?? false),
      terminating: seen === undefined ? ep.terminating : seen.terminating && ep.terminating,
    });
  }
  return [...merged.values()].sort((a, b) => compareText(a.ip, b.ip) || a.port - b.port);
}

/** Per-target work that depends only on the target's own fields: validation, chain, endpoints, rules. */
type TargetWork =
  | { readonly ok: false; readonly reason: string }
  | {
      readonly ok: true;
      readonly clusterIP: string;
      readonly chain: string;
      /** cluster IP|protocol|port: one target per such triple. */
      readonly portKey: string;
      readonly endpoints: readonly ChosenEndpoint[];
      readonly choice: ResolvedTarget['choice'];
      readonly warnings: readonly string[];
      readonly rules: readonly string[];
      readonly dispatch: string;
      readonly reject: string;
      /** What it resolved to last time (memo; valid while interface and source stay the same). */
      resolved?: ResolvedTarget;
    };

/**
 * Memo of per-target work between renders. The runtime rebuilds its DesiredState from scratch on
 * every sync; with 5,000 Services re-deriving every chain would cost more than the one-chain
 * restore itself. Entries are keyed by the target's identity and reused when the target's fields
 * and endpoints compare equal (field by field, no fingerprint strings: building and hashing those
 * cost more than the work saved). Entries not used by a render are dropped at the next one.
 */
export class RenderCache {
  // service -> entries of its ports (a handful), so no composite key string is built and hashed.
  private old = new Map<string, CacheEntry[]>();
  private current = new Map<string, CacheEntry[]>();
  private count = 0;
  get(t: ServicePortTarget): TargetWork | undefined {
    const current = this.current.get(t.service);
    const seen = find(current, t);
    if (seen !== undefined) return sameTarget(seen.target, t) ? seen.work : undefined;
    const hit = find(this.old.get(t.service), t);
    if (hit === undefined || !sameTarget(hit.target, t)) return undefined;
    // Carry the entry over as it is (its target is equal to this one).
    if (current === undefined) this.current.set(t.service, [hit]);
    else current.push(hit);
    this.count += 1;
    return hit.work;
  }
  set(t: ServicePortTarget, work: TargetWork): void {
    const list = this.current.get(t.service);
    const entry = { target: t, work };
    if (list === undefined) this.current.set(t.service, [entry]);
    else {
      const i = list.findIndex((e) => sameIdentity(e.target, t));
      if (i >= 0) {
        list[i] = entry;
        return;
      }
      list.push(entry);
    }
    this.count += 1;
  }
  /** Called once per full render, before it: what the previous render did not use is forgotten. */
  rotate(): void {
    this.old = this.current;
    this.current = new Map();
    this.count = 0;
    this.last = undefined;
  }
  /** The last render and its input, which the next one may patch (see patchRender). */
  last: LastRender | undefined;
  /** Set by resolveTargets: position of each served target of its input in its output. */
  positions: Map<ServicePortTarget, number> | undefined;
  /** Entries used or made by the last render. */
  get size(): number {
    return this.count;
  }
}

interface CacheEntry {
  readonly target: ServicePortTarget;
  readonly work: TargetWork;
}

function find(list: readonly CacheEntry[] | undefined, t: ServicePortTarget): CacheEntry | undefined {
  if (list === undefined) return undefined;
  for (const e of list) if (sameIdentity(e.target, t)) return e;
  return undefined;
}

function sameIdentity(a: ServicePortTarget, b: ServicePortTarget): boolean {
  return a.portName === b.portName && a.protocol === b.protocol && a.family === b.family && a.clusterIP === b.clusterIP && a.port === b.port;
}

function sameTarget(a: ServicePortTarget, b: ServicePortTarget): boolean {
  if (a === b) return true;
  if (a.affinityTimeoutSeconds !== b.affinityTimeoutSeconds) return false;
  if (a.endpoints === b.endpoints) return true;
  if (a.endpoints.length !== b.endpoints.length) return false;
  for (let i = 0; i < a.endpoints.length; i += 1) {
    const x = a.endpoints[i];
    const y = b.endpoints[i];
    if (x === y) continue;
    if (x === undefined || y === undefined) return false;
    if (x.ip !== y.ip || x.port !== y.port || x.ready !== y.ready || x.serving !== y.serving || x.terminating !== y.terminating) return false;
  }
  return true;
}

function targetWork(t: ServicePortTarget): TargetWork {
  const bad = (reason: string): TargetWork => ({ ok: false, reason });
  if (t.family !== 4 && t.family !== 6) return bad(`family ${JSON.stringify(t.family)} is not 4 or 6`);
  const clusterIP = normalizeAddress(t.clusterIP, t.family);
  if (clusterIP === undefined) return bad(`cluster IP ${JSON.stringify(t.clusterIP)} is not an IPv${t.family} address; the Service's spec.clusterIPs must hold plain addresses`);
  if (!PROTOCOLS.includes(t.protocol)) return bad(`protocol ${JSON.stringify(t.protocol)} is not one of TCP, UDP, SCTP`);
  if (!validPort(t.port)) return bad(`port ${JSON.stringify(t.port)} is not a number from 1 to 65535`);
  const aff = t.affinityTimeoutSeconds;
  if (aff !== undefined && !(Number.isInteger(aff) && aff >= 1 && aff <= MAX_AFFINITY_SECONDS)) {
    return bad(`sessionAffinityConfig.clientIP.timeoutSeconds ${JSON.stringify(aff)} is not a whole number from 1 to ${MAX_AFFINITY_SECONDS}`);
  }
  const warnings: string[] = [];
  const chosen = chooseEndpoints(t.endpoints, t.family, (m) => warnings.push(m), describe(t));
  const chain = serviceChainName({ ...t, clusterIP });
  const match = matchPort(clusterIP, t);
  const label = comment(portLabel(t));
  const how = t.protocol === 'TCP' ? 'tcp-reset' : t.family === 4 ? 'icmp-port-unreachable' : 'icmp6-port-unreachable';
  return {
    ok: true,
    clusterIP,
    chain,
    portKey: `${clusterIP}|${t.protocol}|${t.port}`,
    endpoints: chosen.endpoints,
    choice: chosen.choice,
    warnings,
    rules: serviceChainRules(chain, t, chosen.endpoints),
    dispatch: `-A ${DISPATCH_CHAIN} ${match} ${label} -j ${chain}`,
    reject: `-A ${REJECT_CHAIN} ${match} ${comment(`${portLabel(t)} has no endpoints`)} -j REJECT --reject-with ${how}`,
  };
}

function sameNetwork(a: PodInterface['network'], b: PodInterface['network']): boolean {
  return a.name === b.name && a.namespace === b.namespace;
}

function skippedTarget(t: ServicePortTarget, reason: string, level: SkippedTarget['level']): SkippedTarget {
  return { target: describe(t), reason, level };
}

/**
 * Decides, for every target, whether the pod serves it and how. A cluster IP is routed through
 * one interface only (the route carries one source address), so when one cluster IP appears on two
 * networks the pod has, the first network in sort order wins and the other targets are skipped
 * with a warning; the same (cluster IP, protocol, port) twice keeps the first.
 */
export function resolveTargets(state: DesiredState, cache: RenderCache = new RenderCache()): Resolution {
  cache.rotate();
  const skipped: SkippedTarget[] = [];
  const warnings: string[] = [];
  // The pod has a handful of interfaces: found by comparing fields, no key string per target.
  const ifaces: { key: string; iface: PodInterface; source: Partial<Record<IpFamily, string>> }[] = [];
  for (const i of state.interfaces) {
    if (ifaces.some((x) => sameNetwork(x.iface.network, i.network))) continue;
    const source: Partial<Record<IpFamily, string>> = {};
    for (const family of [4, 6] as const) {
      const found = (family === 4 ? i.ipv4 : i.ipv6).map((a) => normalizeAddress(a, family)).find((a) => a !== undefined);
      if (found !== undefined) source[family] = found;
    }
    ifaces.push({ key: networkKey(i.network), iface: i, source });
  }
  const ipOwner = new Map<string, (typeof ifaces)[number]>(); // cluster IP -> the interface it leaves through
  const portOwner = new Set<string>(); // cluster IP|proto|port
  const chainOwner = new Set<string>();
  const out: ResolvedTarget[] = [];
  // Where each served target of `state` landed in `out`: what a later patchRender edits.
  const positions = new Map<ServicePortTarget, number>();
  cache.positions = positions;
  // No closures in this loop: at 5,000 targets per sync, allocation is what costs.
  for (const t of [...state.targets].sort(targetOrder)) {
    let work = cache.get(t);
    if (work === undefined) {
      work = targetWork(t);
      cache.set(t, work);
    }
    if (!work.ok) {
      skipped.push(skippedTarget(t, work.reason, 'warn'));
      continue;
    }
    let found: (typeof ifaces)[number] | undefined;
    for (const x of ifaces) if (sameNetwork(x.iface.network, t.network)) found = x;
    if (found === undefined) {
      skipped.push(skippedTarget(t, `the pod has no interface on network ${networkKey(t.network)}`, 'info'));
      continue;
    }
    const source = found.source[t.family];
    if (source === undefined) {
      skipped.push(skippedTarget(t, `the pod's interface ${found.iface.interface} on network ${found.key} has no IPv${t.family} address`, 'info'));
      continue;
    }
    const { clusterIP, chain } = work;
    const owner = ipOwner.get(clusterIP);
    if (owner !== undefined && owner !== found) {
      skipped.push(skippedTarget(t, `cluster IP ${clusterIP} is already served through network ${owner.key}; one cluster IP can leave through one interface only`, 'warn'));
      continue;
    }
    if (chainOwner.has(chain) || portOwner.has(work.portKey)) {
      skipped.push(skippedTarget(t, `${t.protocol} port ${t.port} of cluster IP ${clusterIP} is listed twice; the first entry is used`, 'warn'));
      continue;
    }
    ipOwner.set(clusterIP, found);
    portOwner.add(work.portKey);
    chainOwner.add(chain);
    if (work.warnings.length > 0) warnings.push(...work.warnings);
    // An unchanged target through the same interface resolves to the very same object as last
    // time: fewer allocations per sync, and identical arrays compare in O(1) downstream.
    const last = work.resolved;
    positions.set(t, out.length);
    if (last !== undefined && last.interface === found.iface.interface && last.source === source) {
      out.push(last);
      continue;
    }
    const base: ResolvedTarget = {
      target: t,
      clusterIP,
      chain,
      interface: found.iface.interface,
      source,
      endpoints: work.endpoints,
      choice: work.choice,
      rules: work.rules,
      dispatch: work.dispatch,
      reject: work.reject,
      route: { family: t.family, dst: clusterIP, dev: found.iface.interface, src: source },
    };
    const resolved = t.affinityTimeoutSeconds === undefined ? base : { ...base, affinitySeconds: t.affinityTimeoutSeconds };
    work.resolved = resolved;
    out.push(resolved);
  }
  return { targets: out, skipped, warnings };
}

// ---------------------------------------------------------------------------------------------
// Rules

/** Chains of one table: name -> its rule lines (`-A NAME ...`), in output order. */
export type Chains = ReadonlyMap<string, readonly string[]>;

export interface Ruleset {
  readonly family: IpFamily;
  readonly filter: Chains;
  readonly nat: Chains;
}

export interface Rendered {
  readonly resolution: Resolution;
  readonly v4: Ruleset;
  readonly v6: Ruleset;
  readonly routes: readonly Route[];
}

/** Comments may only carry safe characters; names from Kubernetes already are, this is belt and braces. */
function comment(text: string): string {
  return `-m comment --comment "${text.replace(/[^A-Za-z0-9_./: -]/g, '_').slice(0, 200)}"`;
}

function hostPrefix(ip: string, family: IpFamily): string {
  return `${ip}/${family === 4 ? 32 : 128}`;
}

function endpointAddress(ep: ChosenEndpoint, family: IpFamily): string {
  return family === 4 ? `${ep.ip}:${ep.port}` : `[${ep.ip}]:${ep.port}`;
}

/** kube-proxy prints probabilities with %0.10f; 1/(n-i) for rule i keeps shares equal. */
export function probability(n: number, i: number): string {
  return (1 / (n - i)).toFixed(10);
}

function matchPort(clusterIP: string, t: ServicePortTarget): string {
  const p = t.protocol.toLowerCase();
  return `-d ${hostPrefix(clusterIP, t.family)} -p ${p} -m ${p} --dport ${t.port}`;
}

function portLabel(t: ServicePortTarget): string {
  return `${t.service}:${t.portName === '' ? String(t.port) : t.portName}`;
}

/** The DNAT rules of one Service port chain. */
export function serviceChainRules(chain: string, t: ServicePortTarget, endpoints: readonly ChosenEndpoint[]): string[] {
  const fam = t.family;
  const head = `-A ${chain} -p ${t.protocol.toLowerCase()}`;
  const n = endpoints.length;
  const aff = t.affinityTimeoutSeconds;
  const lines: string[] = [];
  if (aff !== undefined) {
    // A client seen within the timeout goes back to the endpoint it was sent to last time.
    for (const ep of endpoints) {
      lines.push(`${head} -m recent --name ${recentListName(chain, ep)} --rcheck --seconds ${aff} --reap -j DNAT --to-destination ${endpointAddress(ep, fam)}`);
    }
  }
  endpoints.forEach((ep, i) => {
    const pick = i < n - 1 ? ` -m statistic --mode random --probability ${probability(n, i)}` : '';
    const remember = aff !== undefined ? ` -m recent --name ${recentListName(chain, ep)} --set` : '';
    lines.push(`${head}${pick}${remember} -j DNAT --to-destination ${endpointAddress(ep, fam)}`);
  });
  return lines;
}

/** The ruleset of one family. Service chains exist even when empty, so the dispatch rules never change with endpoints. */
export function renderRuleset(targets: readonly ResolvedTarget[], family: IpFamily): Ruleset {
  const dispatch: string[] = [];
  const reject: string[] = [];
  const nat = new Map<string, readonly string[]>();
  nat.set(DISPATCH_CHAIN, dispatch);
  for (const r of targets) {
    if (r.target.family !== family) continue;
    dispatch.push(r.dispatch);
    if (r.endpoints.length === 0) reject.push(r.reject);
    nat.set(r.chain, r.rules);
  }
  return { family, filter: new Map([[REJECT_CHAIN, reject]]), nat };
}

/** One route per served cluster IP: out of the Service's network interface, from the pod's address there. */
export function planRoutes(targets: readonly ResolvedTarget[]): Route[] {
  const routes = new Map<string, Route>();
  for (const r of targets) {
    if (!routes.has(r.clusterIP)) routes.set(r.clusterIP, r.route);
  }
  return [...routes.values()];
}

/** `cache` (optional) carries per-target work from one render to the next; see RenderCache. */
export function render(state: DesiredState, cache?: RenderCache): Rendered {
  const patched = cache === undefined ? undefined : patchRender(state, cache);
  if (patched !== undefined) return patched;
  const resolution = resolveTargets(state, cache);
  const rendered = {
    resolution,
    v4: renderRuleset(resolution.targets, 4),
    v6: renderRuleset(resolution.targets, 6),
    routes: planRoutes(resolution.targets),
  };
  if (cache?.positions !== undefined) cache.last = { state, rendered, index: cache.positions };
  return rendered;
}

interface LastRender {
  readonly state: DesiredState;
  readonly rendered: Rendered;
  /** Position of each served target of `state` in `rendered.resolution.targets` (edited in place by patches). */
  readonly index: Map<ServicePortTarget, number>;
}

/** Up to this many changed targets, a render patches the last one instead of redoing every target. */
const PATCH_LIMIT = 64;

/** Everything but the endpoints is the same, so every decision of resolveTargets comes out the same. */
function endpointsOnly(a: ServicePortTarget, b: ServicePortTarget): boolean {
  return sameIdentity(a, b) && a.service === b.service && sameNetwork(a.network, b.network) && a.affinityTimeoutSeconds === b.affinityTimeoutSeconds;
}

/**
 * The render of `state` made by editing the cache's last render, when `state` differs from that
 * render's input only in the endpoints of a few targets (by identity: the runtime hands over the
 * same object for an unchanged Service port, sidecar/state.ts StateMemo): the common partial sync,
 * one Service's endpoints changed. Then the order, the skip decisions, the dispatch rules and the
 * routes are all the same as last time, and only the changed targets' chains (and the reject
 * chain, if one of them gained its first or lost its last endpoint) are redone; at 5,000 Services
 * that is well under a millisecond against a full render's ~10. Undefined: render in full. The
 * result equals a full render's (a property test holds it to that).
 */
function patchRender(state: DesiredState, cache: RenderCache): Rendered | undefined {
  const last = cache.last;
  if (last === undefined || last.rendered.resolution.warnings.length > 0) return undefined;
  const before = last.state.targets;
  if (state.targets.length !== before.length) return undefined;
  if (state.interfaces !== last.state.interfaces && JSON.stringify(state.interfaces) !== JSON.stringify(last.state.interfaces)) return undefined;
  const changes: { from: ServicePortTarget; to: ServicePortTarget; work: (TargetWork & { ok: true }) | undefined }[] = [];
  let redone = 0;
  for (let i = 0; i < before.length; i += 1) {
    const to = state.targets[i] as ServicePortTarget;
    const from = before[i] as ServicePortTarget;
    if (to === from) continue;
    if (!endpointsOnly(to, from)) return undefined;
    // A new but equal object: last time's work stands (as in a full render, via the cache).
    if (sameTarget(from, to)) {
      changes.push({ from, to, work: undefined });
      continue;
    }
    if (++redone > PATCH_LIMIT) return undefined;
    const work = targetWork(to);
    // New warnings would change the resolution's list: leave that to a full render.
    if (!work.ok || work.warnings.length > 0) return undefined;
    changes.push({ from, to, work });
  }
  const prev = last.rendered;
  if (changes.length === 0) {
    cache.last = { ...last, state };
    return prev;
  }
  const index = last.index;
  const targets = [...prev.resolution.targets];
  const touched: Record<IpFamily, { old: ResolvedTarget; next: ResolvedTarget }[]> = { 4: [], 6: [] };
  for (const { from, to, work } of changes) {
    const pos = index.get(from);
    index.delete(from);
    // Not served last time (no interface, a duplicate port): not served now either, for the same reason.
    if (pos === undefined) {
      if (work !== undefined) cache.set(to, work);
      continue;
    }
    if (work === undefined) {
      // Same resolved object as before (its `target` is the equal old object, as a full render keeps it).
      index.set(to, pos);
      continue;
    }
    cache.set(to, work);
    const old = targets[pos] as ResolvedTarget;
    const next: ResolvedTarget = { ...old, target: to, endpoints: work.endpoints, choice: work.choice, rules: work.rules };
    work.resolved = next;
    targets[pos] = next;
    index.set(to, pos);
    touched[to.family].push({ old, next });
  }
  const ruleset = (family: IpFamily, was: Ruleset): Ruleset => {
    const edits = touched[family];
    if (edits.length === 0) return was;
    // A copy keeps the insertion order, and set() on a present key keeps its place: same order as a full render.
    const nat = new Map(was.nat);
    for (const { next } of edits) nat.set(next.chain, next.rules);
    const rejectChanged = edits.some(({ old, next }) => (old.endpoints.length === 0) !== (next.endpoints.length === 0));
    return { family, nat, filter: rejectChanged ? renderRuleset(targets, family).filter : was.filter };
  };
  const rendered: Rendered = {
    resolution: { targets, skipped: prev.resolution.skipped, warnings: prev.resolution.warnings },
    v4: ruleset(4, prev.v4),
    v6: ruleset(6, prev.v6),
    routes: prev.routes,
  };
  cache.last = { state, rendered, index };
  return rendered;
}

// ---------------------------------------------------------------------------------------------
// Restore text: full or partial

/** Ours as found in a namespace (from iptables-save), per table. */
export interface ExistingTable {
  /** Chains whose name starts with our prefix. */
  readonly chains: readonly string[];
  /** Rule specs in OUTPUT (text after `-A OUTPUT `) that jump to one of our chains. */
  readonly jumps: readonly string[];
}
export type Existing = Readonly<Record<TableName, ExistingTable>>;
export const NOTHING_EXISTING: Existing = { filter: { chains: [], jumps: [] }, nat: { chains: [], jumps: [] } };

export interface RestorePlan {
  /** The restore input; '' when there is nothing to do. */
  readonly text: string;
  readonly full: boolean;
  /** `table/chain` declared (created or flushed) and refilled. */
  readonly changedChains: readonly string[];
  /** `table/chain` deleted. */
  readonly deletedChains: readonly string[];
}

function sameLines(a: readonly string[] | undefined, b: readonly string[]): boolean {
  if (a === b) return true;
  return a !== undefined && a.length === b.length && a.every((l, i) => l === b[i]);
}

/**
 * Which chains a sync must rewrite. Full (start-up, periodic resync, after a failure, or when the
 * previous state is unknown): every chain of ours is declared (which under --noflush flushes just
 * that chain) and refilled, chains of ours that should not exist are deleted, and the OUTPUT jumps
 * are repaired to exactly one. Partial: only Service chains whose lines differ from what was
 * applied last are rewritten, chains that disappeared are deleted, and the dispatch and reject
 * chains get single-rule `-D`/`-A` edits; everything else in the namespace is not even mentioned.
 * So an endpoint change is one chain rewrite, and a Service coming or going is one chain plus one
 * rule, whatever the number of Services.
 */
export function planRestore(next: Ruleset, prev: Ruleset | undefined, existing: Existing | undefined, full: boolean): RestorePlan {
  const isFull = full || prev === undefined;
  const have = existing ?? NOTHING_EXISTING;
  // One flat list of lines, joined once: at 5,000 Services the text is several MB.
  const out: string[] = [];
  const changedChains: string[] = [];
  const deletedChains: string[] = [];
  for (const table of TABLES) {
    const want = next[table];
    const rewrite: string[] = [];
    const head: string[] = [];
    const removeRules: string[] = [];
    const appendRules: string[] = [];
    const gone = isFull ? have[table].chains.filter((c) => !want.has(c)) : [...(prev?.[table].keys() ?? [])].filter((c) => !want.has(c));
    for (const [chain, lines] of want) {
      const old = isFull ? undefined : prev?.[table].get(chain);
      if (!isFull && sameLines(old, lines)) continue;
      if (old !== undefined && SET_CHAINS.has(chain)) {
        // A Service came or went: edit its one rule instead of rewriting a chain of 5,000.
        const edits = editSetChain(old, lines);
        removeRules.push(...edits.remove);
        appendRules.push(...edits.append);
        changedChains.push(`${table}/${chain}`);
        continue;
      }
      rewrite.push(chain);
    }
    if (isFull) {
      // Exactly one canonical jump: keep the first one that is, delete every other jump to ours.
      let kept = false;
      for (const spec of have[table].jumps) {
        if (spec === JUMP_SPEC[table] && !kept) kept = true;
        else head.push(`-D OUTPUT ${spec}`);
      }
      if (!kept) head.push(`-I OUTPUT 1 ${JUMP_SPEC[table]}`);
    }
    if (rewrite.length + head.length + gone.length + removeRules.length + appendRules.length === 0) continue;
    out.push(`*${table}`);
    for (const chain of rewrite) out.push(`:${chain} - [0:0]`);
    // Declaring a stale chain flushes it; its only reference (a dispatch rule) is deleted or
    // rewritten below in the same transaction; then it can be deleted.
    for (const chain of gone) out.push(`:${chain} - [0:0]`);
    for (const l of head) out.push(l);
    for (const l of removeRules) out.push(l);
    for (const chain of rewrite) {
      for (const l of want.get(chain) ?? []) out.push(l);
      changedChains.push(`${table}/${chain}`);
    }
    // After the rewritten chains: an appended dispatch rule may jump to a chain created above.
    for (const l of appendRules) out.push(l);
    for (const chain of gone) {
      out.push(`-X ${chain}`);
      deletedChains.push(`${table}/${chain}`);
    }
    out.push('COMMIT');
  }
  return { text: out.length === 0 ? '' : `${out.join('\n')}\n`, full: isFull, changedChains, deletedChains };
}

/**
 * Chains whose rules are independent of their order (each matches its own cluster IP and port), so a
 * partial sync edits them rule by rule: `-D` what went, `-A` what came. A full sync rewrites them
 * in sorted order.
 */
const SET_CHAINS: ReadonlySet<string> = new Set([DISPATCH_CHAIN, REJECT_CHAIN]);

/** `-D`/`-A` lines turning the rules `old` into `next` (both `-A CHAIN spec` lines). */
export function editSetChain(old: readonly string[], next: readonly string[]): { remove: string[]; append: string[] } {
  const before = new Set(old);
  const after = new Set(next);
  return {
    remove: old.filter((l) => !after.has(l)).map((l) => `-D ${l.slice('-A '.length)}`),
    append: next.filter((l) => !before.has(l)),
  };
}

/** Restore input that removes everything of ours that `existing` lists (jumps first, then chains). */
export function planCleanup(existing: Existing): string {
  const sections: string[] = [];
  for (const table of TABLES) {
    const { chains, jumps } = existing[table];
    if (chains.length === 0 && jumps.length === 0) continue;
    sections.push(
      [`*${table}`, ...chains.map((c) => `:${c} - [0:0]`), ...jumps.map((j) => `-D OUTPUT ${j}`), ...chains.map((c) => `-X ${c}`), 'COMMIT'].join('\n'),
    );
  }
  return sections.length === 0 ? '' : `${sections.join('\n')}\n`;
}

/** Parses iptables-save output into what is ours per table. Pure, for both back ends. */
export function parseExisting(saveText: string): Existing {
  const result: Record<TableName, { chains: string[]; jumps: string[] }> = { filter: { chains: [], jumps: [] }, nat: { chains: [], jumps: [] } };
  let table: TableName | undefined;
  for (const raw of saveText.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('*')) {
      const name = line.slice(1);
      table = name === 'filter' || name === 'nat' ? name : undefined;
      continue;
    }
    if (table === undefined) continue;
    if (line.startsWith(`:${CHAIN_PREFIX}`)) {
      result[table].chains.push(line.slice(1).split(' ')[0] ?? '');
    } else {
      const spec = ourJump(line);
      if (spec !== undefined) result[table].jumps.push(spec);
    }
  }
  return result;
}

/** The rule spec of an OUTPUT rule (`-A OUTPUT ...`, as -S and iptables-save print it) that jumps to one of our chains. */
export function ourJump(line: string): string | undefined {
  if (!line.startsWith('-A OUTPUT ')) return undefined;
  const spec = line.slice('-A OUTPUT '.length).trim();
  const target = / -[jg] (\S+)/.exec(` ${spec}`)?.[1];
  return target !== undefined && target.startsWith(CHAIN_PREFIX) ? spec : undefined;
}

/**
 * What is ours when this process applied `prev` itself: its chains (only we create chains with our
 * prefix, and a failure forgets `prev`), plus the OUTPUT jumps as listed now (`-S OUTPUT`, one
 * chain: ~7 ms where a whole iptables-save of 1,000 Services takes ~200 ms).
 */
export function existingFromApplied(prev: Ruleset, outputLines: Readonly<Record<TableName, string>>): Existing {
  const table = (t: TableName): ExistingTable => ({
    chains: [...prev[t].keys()],
    jumps: outputLines[t]
      .split('\n')
      .map((l) => ourJump(l.trim()))
      .filter((j): j is string => j !== undefined),
  });
  return { filter: table('filter'), nat: table('nat') };
}

/** Number of rule lines in a ruleset, for the rules-count metric. */
export function countRules(r: Ruleset): number {
  let n = 0;
  for (const table of TABLES) for (const lines of r[table].values()) n += lines.length;
  return n;
}
