/**
 * Interval sets in the fake nftables: elements written as `first-last` (addresses or ports, alone
 * or as parts of a concatenation such as `tcp . 80-90`) and the lookup of a packet's key in them,
 * part by part, as the kernel's interval and concatenated-interval (pipapo) sets do.
 */
import { addrValue } from './addr.js';

/** A key part's value as a number, by type; undefined for a type without an order (a protocol). */
function ordered(type: string, v: string): bigint | undefined {
  if (type === 'ipv4_addr' || type === 'ipv6_addr') return addrValue(v, type === 'ipv4_addr' ? 4 : 6);
  if (type === 'inet_service') return BigInt(v);
  return undefined;
}

/** Whether `key` (canonical parts joined by ` . `) falls in the element `elem` (parts possibly `first-last`). */
export function elementCovers(types: readonly string[], elem: string, key: string): boolean {
  const es = elem.split(' . ');
  const ks = key.split(' . ');
  return types.every((t, i) => {
    const e = es[i] ?? '';
    const k = ks[i] ?? '';
    const dash = t === 'ipv6_addr' || t === 'ipv4_addr' || t === 'inet_service' ? e.indexOf('-') : -1;
    if (dash < 0) return e === k;
    const v = ordered(t, k);
    const lo = ordered(t, e.slice(0, dash));
    const hi = ordered(t, e.slice(dash + 1));
    return v !== undefined && lo !== undefined && hi !== undefined && lo <= v && v <= hi;
  });
}

/** A range element part `first-last` of an ordered type, canonical, or undefined when `v` is none. */
export function rangeText(type: string | undefined, v: string, canon: (x: string) => string): string | undefined {
  if (type !== 'ipv4_addr' && type !== 'ipv6_addr' && type !== 'inet_service') return undefined;
  const dash = v.indexOf('-');
  if (dash < 0) return undefined;
  const lo = canon(v.slice(0, dash));
  const hi = canon(v.slice(dash + 1));
  const a = ordered(type, lo);
  const b = ordered(type, hi);
  if (a === undefined || b === undefined || a > b) throw new Error(`range ${v} is empty or not of ${type}`);
  return `${lo}-${hi}`;
}

/** ICMPv6 neighbour-discovery type names as nft writes them. */
export const ICMPV6_TYPES: Readonly<Record<string, number>> = {
  'nd-router-solicit': 133,
  'nd-router-advert': 134,
  'nd-neighbor-solicit': 135,
  'nd-neighbor-advert': 136,
  'nd-redirect': 137,
};
