/**
 * Rule text: resolved targets -> per-family iptables rulesets (chain -> `-A` lines) and routes.
 * Pure, tested against golden files. What moves a namespace to a ruleset is restore.ts.
 *
 * Layout (chosen for the nf_tables back end, where kube-proxy's chain-per-endpoint layout is
 * quadratic — see docs/design.md):
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
 * Two tables (restore.ts orders them), and iptables-restore commits each table separately (verified: a failing `*filter`
 * section leaves an earlier `*nat` section applied). Every mix of old and new is still safe: nat
 * OUTPUT runs before filter OUTPUT, so a packet that nat DNATed no longer has the cluster IP as its
 * destination when filter sees it, and a reject rule can never break a Service that has DNAT rules;
 * a missing reject rule turns "refused" into "timeout" until the retry (a full sync). filter goes
 * first so a Service that loses its last endpoint rejects before its DNAT rules go.
 */
import { flat } from '../core/flat.js';
import { Snapshot } from '../core/engine.js';
import { recentListName, SIDECAR_LAYOUT, TABLES, type Layout } from '../core/names.js';
import { isClusterIP } from '../core/endpoints.js';
import type { ChosenEndpoint, IpFamily, ResolvedTarget, ServicePortTarget } from '../core/model.js';
import type { Ruleset } from './rulesets.js';

/** How a port without endpoints refuses: a TCP reset, else ICMP port unreachable (the client gets ECONNREFUSED at once). */
export function rejectWith(t: Pick<ServicePortTarget, 'protocol' | 'family'>): string {
  return t.protocol === 'TCP' ? 'tcp-reset' : t.family === 4 ? 'icmp-port-unreachable' : 'icmp6-port-unreachable';
}

/** Comments may only carry safe characters; names from Kubernetes already are, this is belt and braces. */
export function comment(text: string): string {
  return `-m comment --comment "${text.replace(/[^A-Za-z0-9_./: -]/g, '_').slice(0, 200)}"`;
}

export function hostPrefix(ip: string, family: IpFamily): string {
  return `${ip}/${family === 4 ? 32 : 128}`;
}

function endpointAddress(ep: ChosenEndpoint, family: IpFamily): string {
  return family === 4 ? `${ep.ip}:${ep.port}` : `[${ep.ip}]:${ep.port}`;
}

/** kube-proxy prints probabilities with %0.10f; 1/(n-i) for rule i keeps shares equal. */
export function probability(n: number, i: number): string {
  return (1 / (n - i)).toFixed(10);
}

export function matchPort(clusterIP: string, t: Pick<ServicePortTarget, 'protocol' | 'family' | 'port'>): string {
  const p = t.protocol.toLowerCase();
  return `-d ${hostPrefix(clusterIP, t.family)} -p ${p} -m ${p} --dport ${t.port}`;
}

export function portLabel(t: Pick<ServicePortTarget, 'service' | 'portName' | 'port' | 'ingress' | 'externalIP'>): string {
  // An ingress or external IP's rules say so: in iptables-save they sit beside the cluster IP's of the same port.
  return `${t.service}:${t.portName === '' ? String(t.port) : t.portName}${t.ingress === true ? ' loadBalancer' : t.externalIP === true ? ' externalIP' : ''}`;
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
      lines.push(flat(`${head} -m recent --name ${recentListName(chain, ep)} --rcheck --seconds ${aff} --reap -j DNAT --to-destination ${endpointAddress(ep, fam)}`));
    }
  }
  endpoints.forEach((ep, i) => {
    const pick = i < n - 1 ? ` -m statistic --mode random --probability ${probability(n, i)}` : '';
    const remember = aff !== undefined ? ` -m recent --name ${recentListName(chain, ep)} --set` : '';
    lines.push(flat(`${head}${pick}${remember} -j DNAT --to-destination ${endpointAddress(ep, fam)}`));
  });
  return lines;
}

/** The ruleset of one family. Service chains exist even when empty, so the dispatch rules never change with endpoints. */
export function renderRuleset(targets: readonly ResolvedTarget[], family: IpFamily, layout: Layout = SIDECAR_LAYOUT, lines: (r: ResolvedTarget) => TargetLines = targetLines(layout)): Ruleset {
  const dispatch: string[] = [];
  const reject: string[] = [];
  // The refusal of each served cluster IP, once per address (several ports share one).
  const served = new Map<string, string>();
  const nat = new Map<string, readonly string[]>();
  nat.set(layout.dispatchChain, dispatch);
  for (const r of targets) {
    if (r.target.family !== family) continue;
    const l = lines(r);
    dispatch.push(l.dispatch);
    if (r.endpoints.length === 0) reject.push(r.choice === 'drop' ? dropRule(r, layout) : l.reject);
    if (l.unserved !== undefined && !served.has(r.clusterIP)) served.set(r.clusterIP, l.unserved);
    nat.set(r.chain, l.rules);
  }
  const filter = new Map<string, readonly string[]>();
  // After every port's own rule (a drop must win over the refusal of its address): the reject
  // chain is edited in that order (restore.ts editSetChain, ordered).
  for (const line of served.values()) reject.push(line);
  filter.set(layout.rejectChain, reject);
  if (served.size > 0) filter.set(unservedChain(layout), unservedChainRules(family, layout));
  return { family, filter: chains(filter), nat: chains(nat) };
}

/** The filter chain that refuses a new connection to a served cluster IP that nat did not DNAT (a port or protocol the Service does not have). */
export const unservedChain = (layout: Layout): string => `${layout.prefix}UNSERVED`;

/**
 * One rule per served cluster IP, at the end of the reject chain: a new connection still bound for
 * the cluster IP after nat is on a port or protocol no Service port has (nat OUTPUT has DNATed
 * every served one; the ports without endpoints or dropped matched their own rules before).
 */
function unservedRule(ip: string, family: IpFamily, layout: Layout): string {
  return flat(`-A ${layout.rejectChain} -d ${hostPrefix(ip, family)} ${UNSERVED_COMMENT} -j ${unservedChain(layout)}`);
}
const UNSERVED_COMMENT = comment('cluster IP: a port or protocol it does not serve');

/** TCP reset, else ICMP(v6) port unreachable, as a port without endpoints is refused. */
function unservedChainRules(family: IpFamily, layout: Layout): string[] {
  const chain = unservedChain(layout);
  return [`-A ${chain} -p tcp -j REJECT --reject-with tcp-reset`, `-A ${chain} -j REJECT --reject-with ${family === 4 ? 'icmp-port-unreachable' : 'icmp6-port-unreachable'}`];
}

/**
 * The reject chain's rule for a port whose endpoints are all elsewhere (internalTrafficPolicy Local
 * without a local one): kube-proxy drops it. Made per render, only for such ports (rare), so the
 * kept lines of every target do not carry it.
 */
function dropRule(r: ResolvedTarget, layout: Layout): string {
  return flat(`-A ${layout.rejectChain} ${matchPort(r.clusterIP, r.target)} ${comment(`${portLabel(r.target)} has no endpoints for this client`)} -j DROP`);
}

/** A table's chains as the engine's snapshot (engine.ts): the next render edits it in O(changes), counted by rule lines. */
export const chains = (m: Map<string, readonly string[]>): Snapshot<string, readonly string[]> => Snapshot.of(m, (lines) => lines.length);

/** A Service port's rule lines: its chain's DNAT rules, its dispatch rule, and its reject rule (used while it has no endpoints). */
export interface TargetLines {
  readonly rules: readonly string[];
  readonly dispatch: string;
  readonly reject: string;
  /** The refusal of its address's other ports and protocols, for a cluster IP (not an ingress or external IP). */
  readonly unserved?: string;
}

/**
 * Each resolved target's lines under `layout`, made the first time they are asked for and kept
 * while the target object lives (the render hands back the same object while a target is
 * unchanged, so a sync makes the lines of what changed only). Only the iptables back end asks:
 * the resolved targets carry no rule text (resolve.ts).
 */
export function targetLines(layout: Layout): (r: ResolvedTarget) => TargetLines {
  const memo = new WeakMap<ResolvedTarget, TargetLines>();
  return (r) => {
    let l = memo.get(r);
    if (l === undefined) {
      l = targetRules(r.target, r.clusterIP, r.chain, r.endpoints, layout);
      memo.set(r, l);
    }
    return l;
  };
}

export function targetRules(t: ServicePortTarget, clusterIP: string, chain: string, endpoints: readonly ChosenEndpoint[], layout: Layout = SIDECAR_LAYOUT): TargetLines {
  const match = matchPort(clusterIP, t);
  return {
    rules: serviceChainRules(chain, t, endpoints),
    dispatch: flat(`-A ${layout.dispatchChain} ${match} ${comment(portLabel(t))} -j ${chain}`),
    reject: flat(`-A ${layout.rejectChain} ${match} ${comment(`${portLabel(t)} has no endpoints`)} -j REJECT --reject-with ${rejectWith(t)}`),
    ...(isClusterIP(t) ? { unserved: unservedRule(clusterIP, t.family, layout) } : {}),
  };
}

/** Number of rule lines in a ruleset, for the rules-count metric. */
export function countRules(r: Ruleset): number {
  let n = 0;
  for (const table of TABLES) {
    const c = r[table];
    // A rendered table keeps its count as it changes; another program's own map is counted.
    if (c instanceof Snapshot) n += c.total;
    else for (const lines of c.values()) n += lines.length;
  }
  return n;
}
