/**
 * UDP (and SCTP) conntrack hygiene. A UDP "connection" lives in conntrack as long as datagrams
 * keep coming, and its NAT binding with it: without a flush, a client that keeps sending would
 * keep reaching an endpoint that was removed. Two cases, as kube-proxy:
 *  - an endpoint left the chosen set of a Service port: delete entries to the cluster IP:port
 *    that were DNATed to that endpoint;
 *  - a Service port had no endpoints (or did not exist) and now has some: delete every entry to
 *    cluster IP:port, because any entry made while it had none is un-NATed and would shadow the
 *    new rules.
 * TCP needs neither: its connections to a removed endpoint fail on their own.
 *
 * Those two cases are a difference between two syncs, so they need the previous one. Where there
 * is none (the first sync of a process, the sync after a failed one, or after a flush failed),
 * the table is reconciled instead, as kube-proxy's conntrack reconciler does: list the UDP/SCTP
 * entries, and delete those whose original destination is a served Service IP:port and whose
 * reply source is not one of its endpoints now (an entry to an endpoint that left, or an un-NATed
 * one). Services gone since the last successful sync count with no endpoints. The decision
 * (`reconcileConntrack`) is pure; listing and deleting are the IO around it.
 */
import { normalizeIPv6 } from '../../annotations/ip.js';
import type { IpFamily, Protocol, ResolvedTarget } from './model.js';
import type { Exec } from './exec.js';

export interface ConntrackFlush {
  readonly family: IpFamily;
  readonly protocol: Protocol;
  readonly clusterIP: string;
  readonly port: number;
  /** Only entries DNATed to this endpoint address; undefined: every entry to clusterIP:port. */
  readonly endpoint?: string;
  /** Only entries whose reply comes from this address (reconciliation); excludes `endpoint`. */
  readonly replySrc?: string;
}

const FLUSHED: readonly Protocol[] = ['UDP', 'SCTP'];

/** Pure: the flushes a change from `prev` to `next` calls for. `prev` undefined (first sync): none, nothing is known. */
export function planConntrack(prev: readonly ResolvedTarget[] | undefined, next: readonly ResolvedTarget[]): ConntrackFlush[] {
  if (prev === undefined) return [];
  const before = new Map(prev.map((r) => [r.chain, r]));
  const out: ConntrackFlush[] = [];
  for (const r of next) {
    if (!FLUSHED.includes(r.target.protocol)) continue;
    const base = { family: r.target.family, protocol: r.target.protocol, clusterIP: r.clusterIP, port: r.target.port };
    const old = before.get(r.chain);
    const hadNone = old === undefined || old.endpoints.length === 0;
    if (hadNone) {
      if (r.endpoints.length > 0) out.push(base);
      continue;
    }
    const still = new Set(r.endpoints.map((e) => e.ip));
    for (const ip of new Set(old.endpoints.map((e) => e.ip))) if (!still.has(ip)) out.push({ ...base, endpoint: ip });
  }
  // A Service port that went away entirely: its endpoints are gone too.
  const nextChains = new Set(next.map((r) => r.chain));
  for (const old of prev) {
    if (nextChains.has(old.chain) || !FLUSHED.includes(old.target.protocol) || old.endpoints.length === 0) continue;
    out.push({ family: old.target.family, protocol: old.target.protocol, clusterIP: old.clusterIP, port: old.target.port });
  }
  return out;
}

export function conntrackArgs(f: ConntrackFlush): string[] {
  const args = ['-D', '-f', f.family === 4 ? 'ipv4' : 'ipv6', '-p', f.protocol.toLowerCase(), '--orig-dst', f.clusterIP, '--orig-port-dst', String(f.port)];
  if (f.endpoint !== undefined) args.push('--dst-nat', f.endpoint);
  if (f.replySrc !== undefined) args.push('--reply-src', f.replySrc);
  return args;
}

/** One conntrack entry, as much of it as reconciliation reads. */
export interface ConntrackEntry {
  readonly family: IpFamily;
  readonly protocol: Protocol;
  /** Original direction: where the client sent it. */
  readonly origDst: string;
  readonly origDport: number;
  /** Reply direction: who answers (the endpoint when DNATed, else the original destination). */
  readonly replySrc: string;
}

const PROTOCOLS: Readonly<Record<string, Protocol>> = { tcp: 'TCP', udp: 'UDP', sctp: 'SCTP' };

const normalize = (ip: string, family: IpFamily): string => (family === 6 ? normalizeIPv6(ip) : ip);

/**
 * Parses `conntrack -L -f <family> -p <proto>` output (default format: `udp 17 29 src=… dst=…
 * sport=… dport=… [UNREPLIED] src=… dst=… sport=… dport=… mark=0 use=1`; the first src/dst/
 * sport/dport are the original direction, the second the reply). Lines it cannot read are
 * skipped: the kernel wrote them, and one odd line must not stop the others. Pure.
 */
export function parseConntrackList(text: string, family: IpFamily): ConntrackEntry[] {
  const out: ConntrackEntry[] = [];
  for (const line of text.split('\n')) {
    const words = line.trim().split(/\s+/);
    const protocol = PROTOCOLS[words[0] ?? ''];
    if (protocol === undefined) continue;
    const seen: Record<string, string[]> = { src: [], dst: [], sport: [], dport: [] };
    for (const w of words) {
      const eq = w.indexOf('=');
      if (eq > 0) seen[w.slice(0, eq)]?.push(w.slice(eq + 1));
    }
    const origDst = seen['dst']?.[0];
    const replySrc = seen['src']?.[1];
    const origDport = Number(seen['dport']?.[0]);
    if (origDst === undefined || replySrc === undefined || !Number.isInteger(origDport)) continue;
    out.push({ family, protocol, origDst: normalize(origDst, family), origDport, replySrc: normalize(replySrc, family) });
  }
  return out;
}

/** A served Service IP:port and the addresses its entries may be NATed to now. */
export interface ConntrackService {
  readonly family: IpFamily;
  readonly protocol: Protocol;
  readonly ip: string;
  readonly port: number;
  readonly endpoints: ReadonlySet<string>;
}

const serviceKey = (family: IpFamily, protocol: Protocol, ip: string, port: number): string => `${family}|${protocol}|${ip}|${port}`;

/**
 * The UDP/SCTP Service ports to reconcile: those served now with their endpoints, and those of
 * `gone` (served at the last successful sync, not now) with none. Two targets of one IP:port
 * (one Service on two networks) share their endpoints. Pure.
 */
export function conntrackServices(current: readonly ResolvedTarget[], gone: readonly ResolvedTarget[] = []): ConntrackService[] {
  const byKey = new Map<string, { family: IpFamily; protocol: Protocol; ip: string; port: number; endpoints: Set<string> }>();
  const add = (r: ResolvedTarget, withEndpoints: boolean): void => {
    if (!FLUSHED.includes(r.target.protocol)) return;
    const key = serviceKey(r.target.family, r.target.protocol, r.clusterIP, r.target.port);
    let s = byKey.get(key);
    if (s === undefined) byKey.set(key, (s = { family: r.target.family, protocol: r.target.protocol, ip: r.clusterIP, port: r.target.port, endpoints: new Set() }));
    if (withEndpoints) for (const e of r.endpoints) s.endpoints.add(e.ip);
  };
  for (const r of current) add(r, true);
  for (const r of gone) add(r, false);
  return [...byKey.values()];
}

/** The targets of `last` whose chain is not among `current` (Service ports no longer served). Pure. */
export function goneTargets(last: readonly ResolvedTarget[] | undefined, current: readonly ResolvedTarget[]): ResolvedTarget[] {
  if (last === undefined) return [];
  const chains = new Set(current.map((r) => r.chain));
  return last.filter((r) => !chains.has(r.chain));
}

/**
 * kube-proxy's reconciliation, pure: for each entry whose original destination is one of
 * `services` and whose reply source is not one of its endpoints, one deletion by original
 * destination and reply source (deduplicated). Entries of other destinations, and TCP, are never
 * touched.
 */
export function reconcileConntrack(entries: readonly ConntrackEntry[], services: readonly ConntrackService[]): ConntrackFlush[] {
  const byKey = new Map(services.map((s) => [serviceKey(s.family, s.protocol, s.ip, s.port), s]));
  const out = new Map<string, ConntrackFlush>();
  for (const e of entries) {
    if (!FLUSHED.includes(e.protocol)) continue;
    const s = byKey.get(serviceKey(e.family, e.protocol, e.origDst, e.origDport));
    if (s === undefined || s.endpoints.has(e.replySrc)) continue;
    const key = `${serviceKey(e.family, e.protocol, e.origDst, e.origDport)}|${e.replySrc}`;
    if (!out.has(key)) out.set(key, { family: e.family, protocol: e.protocol, clusterIP: e.origDst, port: e.origDport, replySrc: e.replySrc });
  }
  return [...out.values()];
}

/**
 * Lists the entries reconciliation needs: one `conntrack -L` per family and protocol that has a
 * Service port to reconcile (none at all when every Service is TCP). Throws when a listing fails.
 */
export async function listConntrack(exec: Exec, services: readonly ConntrackService[]): Promise<ConntrackEntry[]> {
  const wanted = new Map<string, { family: IpFamily; protocol: Protocol }>();
  for (const s of services) wanted.set(`${s.family}|${s.protocol}`, { family: s.family, protocol: s.protocol });
  const out: ConntrackEntry[] = [];
  for (const { family, protocol } of wanted.values()) {
    const args = ['-L', '-f', family === 4 ? 'ipv4' : 'ipv6', '-p', protocol.toLowerCase()];
    const r = await exec('conntrack', args);
    if (r.code !== 0) throw new Error(`conntrack ${args.join(' ')}: ${r.stderr.trim()}`);
    out.push(...parseConntrackList(r.stdout, family));
  }
  return out;
}

/**
 * Runs the flushes. conntrack exits 1 when nothing matched ("0 flow entries have been deleted"),
 * which is success here. Returns the messages of real failures (the caller logs them; a failed
 * flush must not fail the sync, the rules are already right).
 */
export async function flushConntrack(exec: Exec, flushes: readonly ConntrackFlush[]): Promise<string[]> {
  const failures: string[] = [];
  for (const f of flushes) {
    const r = await exec('conntrack', conntrackArgs(f));
    if (r.code !== 0 && !/0 flow entries have been deleted/.test(r.stderr)) failures.push(`conntrack ${conntrackArgs(f).join(' ')}: ${r.stderr.trim()}`);
  }
  return failures;
}
