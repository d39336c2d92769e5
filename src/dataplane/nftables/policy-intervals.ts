/**
 * Address intervals for the policy's peer sets: a rule's peers (pod addresses and `ipBlock`s, each
 * block less its own `except`s) as one sorted list of disjoint intervals per family, which an
 * nftables interval set holds as is. The set difference is done here, per peer, so the kernel
 * looks up one set per rule whatever the number of peers and excepts. Pure.
 */
import { bigIntToIp, ipToBigInt, parseIp } from '../../annotations/ip.js';
import type { PeerSet } from '../../policy/model.js';
import type { IpFamily } from '../core/model.js';

/** A closed interval of addresses of one family. */
export interface Interval {
  readonly lo: bigint;
  readonly hi: bigint;
}

const bits = (f: IpFamily): bigint => (f === 4 ? 32n : 128n);

/** `cidr` (or a single address) as an interval, or the reason it is not one. */
export function cidrInterval(text: string): { family: IpFamily; interval: Interval } | string {
  const p = parseIp(text);
  if (!p.ok) return `${JSON.stringify(text)} ${p.error}`;
  if (p.value.address.includes('%')) return `${JSON.stringify(text)} has a zone, which a peer cannot have`;
  const f = p.value.family;
  const n = ipToBigInt(p.value.address, f);
  const host = bits(f) - BigInt(p.value.prefix ?? Number(bits(f)));
  const size = 1n << host;
  const lo = (n >> host) << host;
  return { family: f, interval: { lo, hi: lo + size - 1n } };
}

/** Sorted, disjoint, adjacent ones joined. */
export function mergeIntervals(list: readonly Interval[]): Interval[] {
  const sorted = [...list].sort((a, b) => (a.lo < b.lo ? -1 : a.lo > b.lo ? 1 : 0));
  const out: Interval[] = [];
  for (const i of sorted) {
    const last = out[out.length - 1];
    if (last !== undefined && i.lo <= last.hi + 1n) out[out.length - 1] = { lo: last.lo, hi: i.hi > last.hi ? i.hi : last.hi };
    else out.push(i);
  }
  return out;
}

/** `from` less every interval of `cut` (both sorted and disjoint, as mergeIntervals makes them). */
export function subtractIntervals(from: readonly Interval[], cut: readonly Interval[]): Interval[] {
  const out: Interval[] = [];
  for (const i of from) {
    let lo = i.lo;
    for (const c of cut) {
      if (c.hi < lo || c.lo > i.hi) continue;
      if (c.lo > lo) out.push({ lo, hi: c.lo - 1n });
      lo = c.hi + 1n;
      if (lo > i.hi) break;
    }
    if (lo <= i.hi) out.push({ lo, hi: i.hi });
  }
  return out;
}

/** The allowed peers of one rule, per family; or the first bad value (then the rule allows nothing: fail-closed). */
export function peerIntervals(peers: PeerSet): { readonly ok: true; readonly byFamily: Readonly<Record<IpFamily, Interval[]>> } | { readonly ok: false; readonly reason: string } {
  const parts: Record<IpFamily, Interval[]> = { 4: [], 6: [] };
  for (const a of peers.addresses) {
    const r = cidrInterval(a);
    if (typeof r === 'string') return { ok: false, reason: `peer address ${r}` };
    if (r.interval.lo !== r.interval.hi) return { ok: false, reason: `peer address ${JSON.stringify(a)} is a range, expected one address` };
    parts[r.family].push(r.interval);
  }
  for (const b of peers.blocks) {
    const r = cidrInterval(b.cidr);
    if (typeof r === 'string') return { ok: false, reason: `ipBlock cidr ${r}` };
    const cut: Interval[] = [];
    for (const e of b.except) {
      const x = cidrInterval(e);
      if (typeof x === 'string') return { ok: false, reason: `ipBlock ${b.cidr} except ${x}` };
      // An except of the other family takes nothing from this block.
      if (x.family === r.family) cut.push(x.interval);
    }
    parts[r.family].push(...subtractIntervals([r.interval], mergeIntervals(cut)));
  }
  return { ok: true, byFamily: { 4: mergeIntervals(parts[4]), 6: mergeIntervals(parts[6]) } };
}

/**
 * Whether a rule's peers of family `f` are single addresses only (no ipBlock of that family adds a
 * range): then a plain hash set holds them, one element per address, and a peer change is an
 * element added or deleted.
 */
export function hostsOnly(peers: PeerSet, f: IpFamily): boolean {
  return peers.blocks.every((b) => {
    const r = cidrInterval(b.cidr);
    return typeof r === 'string' || r.family !== f;
  });
}

/** Dotted-quad IPv4 in its canonical form (no leading zeros): the common peer, read without a BigInt. */
const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;

/**
 * A rule's pod addresses per family, each once, sorted, in canonical text (one set element each);
 * or the first bad value, as peerIntervals words it. Linear in the addresses; an IPv4 address in
 * canonical form is taken as it is, anything else goes through cidrInterval.
 */
export function peerHosts(addresses: readonly string[]): { readonly ok: true; readonly byFamily: Readonly<Record<IpFamily, string[]>> } | { readonly ok: false; readonly reason: string } {
  const v4 = new Map<number, string>();
  const v6 = new Map<bigint, string>();
  for (const a of addresses) {
    const m = IPV4.exec(a);
    if (m !== null) {
      v4.set(((Number(m[1]) * 256 + Number(m[2])) * 256 + Number(m[3])) * 256 + Number(m[4]), a);
      continue;
    }
    const r = cidrInterval(a);
    if (typeof r === 'string') return { ok: false, reason: `peer address ${r}` };
    if (r.interval.lo !== r.interval.hi) return { ok: false, reason: `peer address ${JSON.stringify(a)} is a range, expected one address` };
    if (r.family === 4) v4.set(Number(r.interval.lo), intervalText(r.interval, 4));
    else v6.set(r.interval.lo, intervalText(r.interval, 6));
  }
  return {
    ok: true,
    byFamily: { 4: [...v4].sort((x, y) => x[0] - y[0]).map(([, t]) => t), 6: [...v6].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0)).map(([, t]) => t) },
  };
}

/** An interval as an nft set element: one address, or `first-last`. */
export function intervalText(i: Interval, f: IpFamily): string {
  return i.lo === i.hi ? bigIntToIp(i.lo, f) : `${bigIntToIp(i.lo, f)}-${bigIntToIp(i.hi, f)}`;
}
