/**
 * Naming: the constants of the layout (see rules.ts) and the hashed names of chains and xt_recent
 * lists. A name is a pure function of what it names, so a restart, a second process or another
 * program renders the same name for the same Service port.
 */
import * as crypto from 'node:crypto';
import { flat } from './flat.js';
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

/** A jump of ours from a built-in chain: `-A <chain> <spec>`, kept exactly once by full syncs. */
export interface Hook {
  readonly chain: string;
  readonly spec: string;
}

/**
 * Where a program's rules live, so one restore planner serves both programs: the sidecar (nat and
 * filter OUTPUT in the pod) and the node agent (PREROUTING, OUTPUT, POSTROUTING, INPUT, FORWARD
 * in the node's namespace, with its own prefix). Everything with `prefix` is ours, everything
 * else is never touched.
 */
export interface Layout {
  /** Every chain of ours starts with it. */
  readonly prefix: string;
  /** Our jumps per table, in the order a full sync inserts them. */
  readonly hooks: Readonly<Record<TableName, readonly Hook[]>>;
  /** Chains edited rule by rule in partial syncs (their rules are independent of their order). */
  readonly setChains: ReadonlySet<string>;
  /** Routing protocol number marking our routes. */
  readonly routeProto: number;
  /** nat chain with one rule per served cluster IP port, jumping to that port's chain. */
  readonly dispatchChain: string;
  /** filter chain rejecting the ports that have no endpoints. */
  readonly rejectChain: string;
  /** Prefix of the per-port chains (followed by 16 base32 characters). */
  readonly serviceChainPrefix: string;
  /** The program's table in the nftables back end (`inet <name>`). */
  readonly nftTable: string;
}

/** The sidecar's layout: one jump from nat OUTPUT, one from filter OUTPUT. */
export const SIDECAR_LAYOUT: Layout = {
  prefix: CHAIN_PREFIX,
  hooks: { nat: [{ chain: 'OUTPUT', spec: JUMP_SPEC.nat }], filter: [{ chain: 'OUTPUT', spec: JUMP_SPEC.filter }] },
  setChains: new Set([DISPATCH_CHAIN, REJECT_CHAIN]),
  // Unassigned in /etc/iproute2/rt_protos.
  routeProto: 241,
  dispatchChain: DISPATCH_CHAIN,
  rejectChain: REJECT_CHAIN,
  serviceChainPrefix: SERVICE_CHAIN_PREFIX,
  nftTable: 'multus_proxy',
};

const BASE32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
const BASE32_CODES: readonly number[] = Array.from(BASE32, (c) => c.charCodeAt(0));

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
  // base32 of the digest's first 80 bits, read from its hex text: 20 hex digits, 4 groups of 20
  // bits, 4 characters each (the same as base32() of its first 10 bytes).
  const hex = sha256Hex(parts.join('\u0000'));
  const codes = new Array<number>(16);
  for (let g = 0; g < 4; g += 1) {
    let v = 0;
    for (let i = g * 5; i < g * 5 + 5; i += 1) v = (v << 4) | hexDigit(hex.charCodeAt(i));
    for (let c = 0; c < 4; c += 1) codes[g * 4 + c] = BASE32_CODES[(v >>> (15 - 5 * c)) & 31] as number;
  }
  return flat(prefix + String.fromCharCode(...codes));
}

/** A lower-case hex digit's value ('0'-'9' are 48-57, 'a'-'f' 97-102). */
const hexDigit = (c: number): number => (c <= 57 ? c - 48 : c - 87);

/**
 * One-shot `crypto.hash` where Node has it (20.12+, the image's 24): no Hash object per call, ~27 %
 * less CPU per name (a first sync at 5,000 Services names 10,000 chains and maps; 13 % of its
 * render went to hashing, docs/decisions/0021-dataplane-backend-seam.md). Hex text, not a Buffer: no ArrayBuffer per name,
 * half the CPU again (20,000 names at 10,000 Services). The same digest either way.
 */
const sha256Hex: (text: string) => string =
  typeof (crypto as { hash?: unknown }).hash === 'function' ? (text) => crypto.hash('sha256', text, 'hex') : (text) => crypto.createHash('sha256').update(text).digest('hex');

/** The nat chain of one Service port: a function of (service, port name, protocol, family, cluster IP); `clusterIP` the normalised one when it differs from the target's. */
export function serviceChainName(
  t: Pick<ServicePortTarget, 'service' | 'portName' | 'protocol' | 'family' | 'clusterIP'>,
  prefix: string = SERVICE_CHAIN_PREFIX,
  clusterIP: string = t.clusterIP,
): string {
  return hashName(prefix, t.service, t.portName, t.protocol, t.family, clusterIP);
}

/**
 * The xt_recent list of one endpoint of one Service chain (valid: [A-Z0-9-], ~20 chars, unique),
 * with the chain's own program prefix (`MPX-` for the sidecar's, `MPXN-` for the node agent's).
 */
export function recentListName(chain: string, ep: Pick<BackendEndpoint, 'ip' | 'port'>): string {
  const dash = chain.indexOf('-');
  return hashName(dash > 0 ? chain.slice(0, dash + 1) : CHAIN_PREFIX, chain, ep.ip, ep.port);
}
