/**
 * How a Service port without session affinity picks its endpoint in the nftables back end: one
 * static rule `dnat to numgen random mod M map @<its endpoint map>`, where the map gives each of
 * the N endpoints an equal range of [0, M). An endpoint change then rewrites only the map's
 * elements, which the kernel does not validate (a rule change makes it validate the whole table:
 * docs/decisions/0024-nft-endpoint-maps.md). Pure.
 */
import type { ChosenEndpoint } from '../core/model.js';

/**
 * The modulus: the largest that numgen (a u32) takes, so the ranges' sizes differ by at most one
 * in 2^32 whatever N, and the rule never changes when N does. An interval's end is stored as
 * `to + 1`, which still fits in 32 bits.
 */
export const PICK_MODULUS = 4294967295;

/** One endpoint's share of the numgen values: from..to inclusive. */
export interface PickRange {
  readonly from: number;
  readonly to: number;
}

/** An endpoint map's element: a range of numgen values to an endpoint's address and port. */
export interface EndpointRange extends PickRange {
  readonly ip: string;
  readonly port: number;
}

/** N equal ranges covering 0..m-1 exactly, in order: [floor(i·m/n), floor((i+1)·m/n) - 1]. n ≥ 1, n ≤ m. */
export function equalRanges(n: number, m: number = PICK_MODULUS): PickRange[] {
  if (!Number.isInteger(n) || n < 1 || n > m) throw new Error(`equalRanges: ${n} endpoints cannot split ${m} values (need 1 <= n <= ${m})`);
  const out: PickRange[] = [];
  // i·m < 2^53 for any n a Service can have, so the products are exact.
  for (let i = 0; i < n; i += 1) out.push({ from: Math.floor((i * m) / n), to: Math.floor(((i + 1) * m) / n) - 1 });
  return out;
}

/**
 * The `from-to : ` head of each of n equal ranges, made once per n and shared: every map of n
 * endpoints starts its elements with the same texts, and a first sync at 1,000 Services × 10
 * would otherwise format 20,000 numbers (~10× slower for the map elements' text). Counts past
 * HEADS_KEPT are made each time (a count that large is rare; keeping it would hold its strings).
 */
export function rangeHeads(n: number): readonly string[] {
  let h = heads.get(n);
  if (h === undefined) {
    h = equalRanges(n).map((r) => `${r.from}-${r.to} : `);
    if (n <= HEADS_KEPT) heads.set(n, h);
  }
  return h;
}
const heads = new Map<number, readonly string[]>();
const HEADS_KEPT = 1024;

/** The endpoint map's elements for these endpoints, in their order. */
export function endpointRanges(endpoints: readonly ChosenEndpoint[]): EndpointRange[] {
  return equalRanges(endpoints.length).map((r, i) => {
    const ep = endpoints[i] as ChosenEndpoint;
    return { from: r.from, to: r.to, ip: ep.ip, port: ep.port };
  });
}
