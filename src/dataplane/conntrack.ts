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
 */
import type { IpFamily, Protocol, ResolvedTarget } from './model.js';
import type { Exec } from './iptables.js';

export interface ConntrackFlush {
  readonly family: IpFamily;
  readonly protocol: Protocol;
  readonly clusterIP: string;
  readonly port: number;
  /** Only entries DNATed to this endpoint address; undefined: every entry to clusterIP:port. */
  readonly endpoint?: string;
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
  return args;
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
