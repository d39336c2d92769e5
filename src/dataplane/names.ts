/**
 * Naming: the constants of the layout (see rules.ts) and the hashed names of chains and xt_recent
 * lists. A name is a pure function of what it names, so a restart, a second process or another
 * program renders the same name for the same Service port.
 */
import { createHash } from 'node:crypto';
import type { BackendEndpoint, ServicePortTarget } from './model.js';

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
