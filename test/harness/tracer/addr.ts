/** Addresses for the fakes: family, canonical text, and prefix membership. */
import { isIPv4, isIPv6 } from 'node:net';
import type { Family } from './walk.js';

/** The address as a number, or undefined when `text` is no address of `family`. */
export function addrValue(text: string, family: Family): bigint | undefined {
  if (family === 4) {
    if (!isIPv4(text)) return undefined;
    return text.split('.').reduce((v, o) => (v << 8n) | BigInt(Number(o)), 0n);
  }
  if (!isIPv6(text) || text.includes('%') || text.includes('.')) return undefined;
  const [head = '', tail] = text.split('::');
  const groups = (s: string | undefined): string[] => (s === undefined || s === '' ? [] : s.split(':'));
  const h = groups(head);
  const t = groups(tail);
  const all = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return all.reduce((v, g) => (v << 16n) | BigInt(parseInt(g, 16)), 0n);
}

export const familyOf = (text: string): Family | undefined => (isIPv4(text) ? 4 : isIPv6(text) ? 6 : undefined);

/** One canonical text per address (IPv6 compressed, lower case, as the WHATWG URL parser writes it), so keys compare as strings. */
export function canonical(text: string, family: Family): string {
  if (addrValue(text, family) === undefined) throw new Error(`${JSON.stringify(text)} is not an IPv${family} address`);
  return family === 4 ? text : new URL(`http://[${text}]/`).hostname.slice(1, -1);
}

export interface Prefix {
  readonly family: Family;
  readonly base: bigint;
  readonly bits: number;
}

/** `a.b.c.d[/n]` or `x::y[/n]`; throws on anything else. */
export function parsePrefix(text: string): Prefix {
  const [ip = '', len] = text.split('/');
  const family = familyOf(ip);
  if (family === undefined) throw new Error(`${JSON.stringify(text)} is not an address or prefix`);
  const max = family === 4 ? 32 : 128;
  const bits = len === undefined ? max : Number(len);
  if (!Number.isInteger(bits) || bits < 0 || bits > max || (len !== undefined && !/^\d+$/.test(len))) throw new Error(`${JSON.stringify(text)}: bad prefix length`);
  return { family, base: addrValue(ip, family) as bigint, bits };
}

export function inPrefix(p: Prefix, ip: string, family: Family): boolean {
  if (p.family !== family) return false;
  const v = addrValue(ip, family);
  if (v === undefined) return false;
  const shift = BigInt((family === 4 ? 32 : 128) - p.bits);
  return v >> shift === p.base >> shift;
}

/** `ip:port` or `[ip6]:port` (a DNAT destination); throws on anything else. */
export function parseHostPort(text: string, family: Family): { ip: string; port: number } {
  const m = family === 4 ? /^([0-9.]+):(\d+)$/.exec(text) : /^\[([0-9a-fA-F:]+)\]:(\d+)$/.exec(text);
  const port = Number(m?.[2]);
  if (m === null || addrValue(m[1] as string, family) === undefined || !(port >= 1 && port <= 65535)) throw new Error(`${JSON.stringify(text)} is not an IPv${family} address:port`);
  return { ip: canonical(m[1] as string, family), port };
}
