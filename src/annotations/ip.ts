/**
 * IP and MAC address checks for the Multus annotations. IPv6 addresses are normalised to one
 * spelling (RFC 5952: lower case, leading zeros dropped, the longest run of two or more zero groups
 * compressed to `::`, the first run on a tie) so that string equality is address equality across
 * what Multus, users and the Kubernetes API write.
 */
import { isIP } from 'node:net';
import { err, ok, type Result } from '../result.js';

export interface ParsedIp {
  /** Normalised address without prefix (IPv6 zone, if any, kept after '%'). */
  address: string;
  family: 4 | 6;
  /** The `/prefix` length when one was written. */
  prefix?: number;
}

/** Longest textual IP with prefix is well under this; longer input is rejected before any work. */
const MAX_IP_TEXT = 128;

/** Normalises an address that `isIP` accepted as IPv6. */
export function normalizeIPv6(text: string): string {
  const pct = text.indexOf('%');
  const zone = pct >= 0 ? text.slice(pct) : '';
  let addr = (pct >= 0 ? text.slice(0, pct) : text).toLowerCase();
  // An embedded dotted IPv4 tail (e.g. ::ffff:192.0.2.1) becomes two hex groups.
  const lastColon = addr.lastIndexOf(':');
  const tail = addr.slice(lastColon + 1);
  if (tail.includes('.')) {
    const o = tail.split('.').map(Number);
    const hi = (((o[0] ?? 0) << 8) | (o[1] ?? 0)).toString(16);
    const lo = (((o[2] ?? 0) << 8) | (o[3] ?? 0)).toString(16);
    addr = `${addr.slice(0, lastColon + 1)}${hi}:${lo}`;
  }
  const [headText = '', tailText] = addr.split('::');
  const head = headText === '' ? [] : headText.split(':');
  const rest = tailText === undefined || tailText === '' ? [] : tailText.split(':');
  const groups = [...head, ...Array<string>(Math.max(0, 8 - head.length - rest.length)).fill('0'), ...rest].map((g) => parseInt(g, 16));
  // Find the longest run of zero groups (length >= 2), the first one on a tie.
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < groups.length;) {
    if (groups[i] !== 0) {
      i += 1;
      continue;
    }
    let j = i;
    while (j < groups.length && groups[j] === 0) j += 1;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':') + zone;
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}${zone}`;
}

/**
 * Parses `address` or `address/prefix`. Reasons are short phrases ("is not an IP address") that
 * the caller prefixes with the entry they came from.
 */
export function parseIp(text: string): Result<ParsedIp, string> {
  if (text.length === 0) return err('is empty, expected an IP address');
  if (text.length > MAX_IP_TEXT) return err(`is ${text.length} characters long, too long for an IP address`);
  const slash = text.indexOf('/');
  const address = slash >= 0 ? text.slice(0, slash) : text;
  const prefixText = slash >= 0 ? text.slice(slash + 1) : undefined;
  const family = isIP(address);
  if (family !== 4 && family !== 6) {
    return err(prefixText === undefined ? 'is not an IPv4 or IPv6 address' : `has the address part ${JSON.stringify(address)}, which is not an IPv4 or IPv6 address`);
  }
  if (prefixText === undefined) return ok({ address: family === 6 ? normalizeIPv6(address) : address, family });
  const max = family === 4 ? 32 : 128;
  if (!/^[0-9]{1,3}$/.test(prefixText) || Number(prefixText) > max) {
    return err(`has a prefix length ${JSON.stringify(prefixText)} that is not a number from 0 to ${max}`);
  }
  return ok({ address: family === 6 ? normalizeIPv6(address) : address, family, prefix: Number(prefixText) });
}

/** A parsed (normalised) address as a number, for range arithmetic. */
export function ipToBigInt(address: string, family: 4 | 6): bigint {
  if (family === 4) return address.split('.').reduce((n, o) => (n << 8n) | BigInt(Number(o) & 255), 0n);
  const [head = '', tail] = address.split('::');
  const h = head === '' ? [] : head.split(':');
  const t = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = [...h, ...Array<string>(Math.max(0, 8 - h.length - t.length)).fill('0'), ...t];
  return groups.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16) & 0xffff), 0n);
}

/** The inverse of ipToBigInt: a number as a normalised address. */
export function bigIntToIp(n: bigint, family: 4 | 6): string {
  if (family === 4) return [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 255n)).join('.');
  const groups: string[] = [];
  for (let s = 112n; s >= 0n; s -= 16n) groups.push(((n >> s) & 0xffffn).toString(16));
  // Canonical (RFC 5952) spelling via parseIp's normaliser.
  const parsed = parseIp(groups.join(':'));
  return parsed.ok ? parsed.value.address : groups.join(':');
}

/**
 * Whether a MAC address has a form Go's net.ParseMAC (used by Multus) accepts: 6, 8 or 20 bytes
 * as hex pairs separated by ':' or '-', or as dotted groups of four hex digits.
 */
export function isMac(text: string): boolean {
  if (text.length > 60) return false;
  const pairs = /^[0-9A-Fa-f]{2}(?:([:-])[0-9A-Fa-f]{2})*$/.exec(text);
  if (pairs !== null) {
    const sep = pairs[1];
    const bytes = sep === undefined ? 1 : text.split(sep).length;
    // All separators must be the same character.
    if (sep !== undefined && text.replaceAll(sep, '').length !== bytes * 2) return false;
    return bytes === 6 || bytes === 8 || bytes === 20;
  }
  if (/^[0-9A-Fa-f]{4}(?:\.[0-9A-Fa-f]{4})*$/.test(text)) {
    const groups = text.split('.').length;
    return groups === 3 || groups === 4 || groups === 10;
  }
  return false;
}
