/**
 * The nfnetlink batch that replaces the contents of named interval maps (typeof `numgen random mod
 * M : <addr> . <port>`) in an `inet` table, encoded byte for byte. Pure: element-writer.ts hands
 * the bytes to a small C program (native/nfnl-batch.c) that only sends them and reads the ACKs.
 *
 * Why bytes and not `nft` text: an element write on a map whose data are not verdicts is not
 * validated against the whole table by the kernel, and this batch needs no cache of the table
 * (nft fetches every chain and set first), so its cost does not grow with the table
 * (docs/decisions/0024-nft-endpoint-maps.md).
 *
 * Per write, one transaction in the batch holds:
 *   NFT_MSG_DELSETELEM  table, set, no element list        = flush the map (not for a `fresh`
 *                       one: created empty by the transaction before, first-fill.ts)
 *   NFT_MSG_NEWSETELEM  table, set, elements (chunked)     = each range [from, to] as a start
 *                       element (key from, data addr . port) and an end element (key to + 1,
 *                       flag NFT_SET_ELEM_INTERVAL_END, no data), as nft 1.0.6 sends them.
 * Keys are 4 bytes big-endian (nft stores `numgen` keys after `byteorder hton`); data is the
 * address's bytes then the port as 2 bytes big-endian padded to a 4-byte register.
 *
 * A first sync into an empty namespace also fills the dispatch maps (`type ipv4_addr . inet_proto .
 * inet_service : verdict`, a VerdictMapWrite): NEWSETELEM messages only, each element's key the
 * concatenation address . protocol . port, each field padded to a 4-byte register, and its data the
 * verdict `goto <chain>` (NFTA_DATA_VERDICT: code NFT_GOTO, chain name).
 *
 * Netlink and attribute headers are in host byte order (the kernel reads them as such); every
 * machine this runs on (amd64, arm64) is little-endian, and the encoder refuses any other.
 */
import { endianness } from 'node:os';
import { isIPv6 } from 'node:net';
import { normalizeIPv6 } from '../../annotations/ip.js';
import type { IpFamily } from '../core/model.js';

/** One interval of the map: keys from..to (inclusive) go to ip:port. */
export interface MapRange {
  readonly from: number;
  readonly to: number;
  readonly ip: string;
  readonly port: number;
}

/** Replaces the whole contents of the named map in the `inet` table with `ranges`. */
export interface IntervalMapWrite {
  readonly table: string;
  readonly map: string;
  readonly family: IpFamily;
  readonly ranges: readonly MapRange[];
  /** The map was created empty by a transaction before this one: no flush (first-fill.ts). */
  readonly fresh?: boolean;
}

/** A dispatch element: (address, protocol, port) -> goto chain. */
export interface GotoElement {
  readonly ip: string;
  readonly protocol: 'tcp' | 'udp' | 'sctp';
  readonly port: number;
  readonly chain: string;
}

/** Adds elements to a verdict map keyed `ipvN_addr . inet_proto . inet_service` (created empty before). */
export interface VerdictMapWrite {
  readonly table: string;
  readonly map: string;
  readonly family: IpFamily;
  readonly gotos: readonly GotoElement[];
}

export type ElementWrite = IntervalMapWrite | VerdictMapWrite;

const isVerdict = (w: ElementWrite): w is VerdictMapWrite => 'gotos' in w;

/** What one message of an encoded batch does (to name a failed sequence number). */
export interface BatchMessage {
  readonly seq: number;
  readonly kind: 'begin' | 'flush' | 'add' | 'end';
  /** Index into the writes, for 'flush' and 'add'. */
  readonly write?: number;
}

export interface EncodedBatch {
  readonly bytes: Uint8Array;
  readonly messages: readonly BatchMessage[];
}

/** The largest key: ranges end at most here, so `to + 1` still fits the 4-byte key. */
export const MAX_KEY = 4294967294;
/** NFT_NAME_MAXLEN is 256 with the terminating NUL. */
export const MAX_NAME_BYTES = 255;

// Kernel constants (linux/netlink.h, linux/netfilter/nfnetlink.h, linux/netfilter/nf_tables.h).
const NLM_F_REQUEST = 0x1;
const NLM_F_ACK = 0x4;
const NLM_F_CREATE = 0x400;
const NLA_F_NESTED = 0x8000;
const NFNL_MSG_BATCH_BEGIN = 0x10;
const NFNL_MSG_BATCH_END = 0x11;
const NFNL_SUBSYS_NFTABLES = 10;
const NFPROTO_INET = 1;
const NFT_MSG_NEWSETELEM = 12;
const NFT_MSG_DELSETELEM = 14;
const NFTA_SET_ELEM_LIST_TABLE = 1;
const NFTA_SET_ELEM_LIST_SET = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS = 3;
const NFTA_LIST_ELEM = 1;
const NFTA_SET_ELEM_KEY = 1;
const NFTA_SET_ELEM_DATA = 2;
const NFTA_SET_ELEM_FLAGS = 3;
const NFTA_DATA_VALUE = 1;
const NFTA_DATA_VERDICT = 2;
const NFTA_VERDICT_CODE = 1;
const NFTA_VERDICT_CHAIN = 2;
const NFT_GOTO = -4;
const NFT_SET_ELEM_INTERVAL_END = 1;
const PROTOCOL_NUMBERS: Readonly<Record<GotoElement['protocol'], number>> = { tcp: 6, udp: 17, sctp: 132 };

/** An attribute's length field is 16 bits: the element list of one message must fit it. */
const MAX_ATTR = 0xffff;

const utf8 = new TextEncoder();

/** A string's UTF-8 length: its length when it is ASCII (every name of ours), without encoding it. */
function byteLength(s: string): number {
  for (let i = 0; i < s.length; i += 1) if (s.charCodeAt(i) > 0x7f) return utf8.encode(s).length;
  return s.length;
}

function checkName(at: string, what: string, name: unknown): void {
  if (typeof name !== 'string' || name === '') throw new Error(`${at}: the ${what} name is empty; give the ${what}'s name`);
  const n = byteLength(name);
  if (n > MAX_NAME_BYTES) throw new Error(`${at}: the ${what} name is ${n} bytes long; nftables names are at most ${MAX_NAME_BYTES} bytes`);
  if (name.includes('\0')) throw new Error(`${at}: the ${what} name contains a NUL character; remove it`);
}

const validIp = (ip: unknown, family: IpFamily): boolean => typeof ip === 'string' && (family === 4 ? dottedQuad(ip) : isIPv6(ip) && !ip.includes('%'));

/**
 * Whether `s` is an IPv4 address as net.isIPv4 takes it (four decimal octets up to 255, no leading
 * zero), by hand: a first fill checks ~100,000 addresses, and the regular expression was a third
 * of the encoder's time. The property test holds it to net.isIPv4.
 */
export function dottedQuad(s: string): boolean {
  let octets = 0;
  let digits = 0;
  let value = 0;
  for (let i = 0; i <= s.length; i += 1) {
    const c = i === s.length ? 46 : s.charCodeAt(i);
    if (c === 46) {
      if (digits === 0 || value > 255) return false;
      octets += 1;
      digits = 0;
      value = 0;
    } else if (c >= 48 && c <= 57) {
      if (digits > 0 && value === 0) return false;
      digits += 1;
      if (digits > 3) return false;
      value = value * 10 + (c - 48);
    } else return false;
  }
  return octets === 4;
}
const validPort = (port: unknown): boolean => Number.isInteger(port) && (port as number) >= 1 && (port as number) <= 65535;

function checkRanges(at: string, w: IntervalMapWrite): void {
  let prevTo = -1;
  for (let j = 0; j < w.ranges.length; j += 1) {
    const r = w.ranges[j] as MapRange;
    if (!Number.isInteger(r.from) || !Number.isInteger(r.to) || r.from < 0 || r.to > MAX_KEY || r.from > r.to) {
      throw new Error(`${at} range ${j} [${String(r.from)}-${String(r.to)}]: keys must be integers with 0 <= from <= to <= ${MAX_KEY}`);
    }
    if (r.from <= prevTo)
      throw new Error(`${at} range ${j} [${String(r.from)}-${String(r.to)}]: overlaps or precedes the range before it (which ends at ${prevTo}); sort the ranges by key and keep them apart`);
    prevTo = r.to;
    if (!validIp(r.ip, w.family)) throw new Error(`${at} range ${j} [${String(r.from)}-${String(r.to)}]: ${JSON.stringify(r.ip)} is not an IPv${w.family} address (the map is IPv${w.family})`);
    if (!validPort(r.port)) throw new Error(`${at} range ${j} [${String(r.from)}-${String(r.to)}]: port ${String(r.port)} is not an integer from 1 to 65535`);
  }
}

function checkGotos(at: string, w: VerdictMapWrite): void {
  const seen = new Set<string>();
  w.gotos.forEach((g, j) => {
    const el = `${at} element ${j}`;
    if (!validIp(g.ip, w.family)) throw new Error(`${el}: ${JSON.stringify(g.ip)} is not an IPv${w.family} address (the map is IPv${w.family})`);
    if (!Object.hasOwn(PROTOCOL_NUMBERS, g.protocol)) throw new Error(`${el}: protocol ${JSON.stringify(g.protocol)} is not one of tcp, udp, sctp`);
    if (!validPort(g.port)) throw new Error(`${el}: port ${String(g.port)} is not an integer from 1 to 65535`);
    checkName(el, 'chain', g.chain);
    const key = `${g.ip} ${g.protocol} ${g.port}`;
    if (seen.has(key)) throw new Error(`${el}: ${g.ip} . ${g.protocol} . ${g.port} is already an element of this write; one key, one verdict`);
    seen.add(key);
  });
}

/** Throws, naming the write and what is wrong, when a write cannot be encoded. Pure. */
export function checkIntervalMapWrites(writes: readonly ElementWrite[]): void {
  const seen = new Set<string>();
  writes.forEach((w, i) => {
    const at = `${isVerdict(w) ? 'verdict' : 'interval'} map write ${i} (inet ${String(w.table)} ${String(w.map)})`;
    checkName(at, 'table', w.table);
    checkName(at, 'map', w.map);
    if (w.family !== 4 && w.family !== 6) throw new Error(`${at}: family ${String(w.family)} is neither 4 nor 6`);
    const key = `${w.table}\0${w.map}`;
    if (seen.has(key)) throw new Error(`${at}: the map is written twice in one batch (the second flush would drop the first's elements); merge the writes`);
    seen.add(key);
    if (isVerdict(w)) checkGotos(at, w);
    else checkRanges(at, w);
  });
}

/** The address's bytes (network order) of a checked address. Pure. */
export function addressBytes(ip: string, family: IpFamily): Uint8Array {
  if (family === 4) return Uint8Array.from(ip.split('.').map(Number));
  const [head = '', tail] = normalizeIPv6(ip).split('::');
  const groupsOf = (s: string | undefined): number[] => (s === undefined || s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)));
  const h = groupsOf(head);
  const t = groupsOf(tail);
  const groups = [...h, ...Array<number>(8 - h.length - t.length).fill(0), ...t];
  return Uint8Array.from(groups.flatMap((g) => [g >> 8, g & 0xff]));
}

/**
 * Appends netlink structures to a growing buffer; headers in host (little-endian) order. Values
 * are written in place (no array per attribute): a first fill at 10,000 Services is ~100,000
 * ranges, and an array per value made its encoding ~10× slower.
 */
class Writer {
  private buf: Uint8Array;
  length = 0;

  constructor(size = 4096) {
    this.buf = new Uint8Array(size);
  }

  private reserve(n: number): number {
    const at = this.length;
    const need = at + ((n + 3) & ~3);
    if (need > this.buf.length) {
      const next = new Uint8Array(Math.max(need, this.buf.length * 2));
      next.set(this.buf.subarray(0, this.length));
      this.buf = next;
    }
    this.length = need; // padding bytes are already zero
    return at;
  }

  // Byte stores, not DataView calls: a first fill runs this cold, where those stay slow calls.
  u16(at: number, v: number): void {
    this.buf[at] = v & 0xff;
    this.buf[at + 1] = (v >>> 8) & 0xff;
  }

  u32(at: number, v: number): void {
    this.buf[at] = v & 0xff;
    this.buf[at + 1] = (v >>> 8) & 0xff;
    this.buf[at + 2] = (v >>> 16) & 0xff;
    this.buf[at + 3] = (v >>> 24) & 0xff;
  }

  /** nlmsghdr + nfgenmsg; returns the start, for end(). */
  message(type: number, flags: number, seq: number, family: number, resId: number): number {
    const at = this.reserve(20);
    this.u16(at + 4, type);
    this.u16(at + 6, flags);
    this.u32(at + 8, seq);
    // nlmsg_pid 0: to the kernel. nfgenmsg: family, version 0, res_id big-endian.
    this.buf[at + 16] = family;
    this.port(at + 18, resId);
    return at;
  }

  endMessage(at: number): void {
    this.u32(at, this.length - at);
  }

  /** A NUL-terminated string attribute, written in place when ASCII. */
  str(type: number, s: string): void {
    const n = byteLength(s);
    if (n !== s.length) {
      this.attr(type, cstring(s));
      return;
    }
    const at = this.reserve(5 + n);
    this.u16(at, 5 + n);
    this.u16(at + 2, type);
    for (let i = 0; i < n; i += 1) this.buf[at + 4 + i] = s.charCodeAt(i);
  }

  attr(type: number, value: Uint8Array): void {
    const at = this.reserve(4 + value.length);
    this.u16(at, 4 + value.length);
    this.u16(at + 2, type);
    this.buf.set(value, at + 4);
  }

  /** An attribute of one big-endian u32. */
  be32(type: number, v: number): void {
    const at = this.reserve(8);
    this.u16(at, 8);
    this.u16(at + 2, type);
    this.buf[at + 4] = (v >>> 24) & 0xff;
    this.buf[at + 5] = (v >>> 16) & 0xff;
    this.buf[at + 6] = (v >>> 8) & 0xff;
    this.buf[at + 7] = v & 0xff;
  }

  /** An attribute of `n` zeroed bytes; returns where its value starts. */
  value(type: number, n: number): number {
    const at = this.reserve(4 + n);
    this.u16(at, 4 + n);
    this.u16(at + 2, type);
    return at + 4;
  }

  /** A checked address's bytes at `at`. */
  address(at: number, ip: string, family: IpFamily): void {
    if (family === 6) {
      this.buf.set(addressBytes(ip, 6), at);
      return;
    }
    // IPv4 by hand: no array per address (the checked text is digits and three dots).
    let octet = 0;
    let i = at;
    for (let c = 0; c < ip.length; c += 1) {
      const ch = ip.charCodeAt(c);
      if (ch === 46) {
        this.buf[i++] = octet;
        octet = 0;
      } else octet = octet * 10 + (ch - 48);
    }
    this.buf[i] = octet;
  }

  port(at: number, port: number): void {
    this.buf[at] = (port >>> 8) & 0xff;
    this.buf[at + 1] = port & 0xff;
  }

  byte(at: number, v: number): void {
    this.buf[at] = v;
  }

  nest(type: number): number {
    const at = this.reserve(4);
    this.u16(at + 2, type | NLA_F_NESTED);
    return at;
  }

  endNest(at: number): void {
    const len = this.length - at;
    if (len > MAX_ATTR) throw new Error(`internal: a nested attribute of ${len} bytes does not fit netlink's 16-bit length`);
    this.u16(at, len);
  }

  bytes(): Uint8Array {
    return this.buf.subarray(0, this.length);
  }
}

const cstring = (s: string): Uint8Array => {
  const b = utf8.encode(s);
  const out = new Uint8Array(b.length + 1);
  out.set(b);
  return out;
};

const addrLength = (family: IpFamily): number => (family === 4 ? 4 : 16);

/** Element bytes per range: a start element (key + data) and an end element (key + flags). */
function rangeBytes(family: IpFamily): number {
  const key = 4 + (4 + 4 + 4);
  const data = 4 + 4 + addrLength(family) + 4;
  return 4 + key + data + (4 + key + 8);
}

/** Ranges per NEWSETELEM message, so its element list fits a 16-bit attribute length. */
export function rangesPerMessage(family: IpFamily): number {
  return Math.floor((MAX_ATTR - 4) / rangeBytes(family));
}

/** Element bytes of one goto element: key (address . protocol . port) and the verdict's code and chain (its bytes with the NUL). */
function gotoBytes(family: IpFamily, chainBytes: number): number {
  const key = 4 + (4 + addrLength(family) + 4 + 4);
  const data = 4 + (4 + 8 + ((4 + chainBytes + 3) & ~3));
  return 4 + key + data;
}

/** A rough size of the batch, so the buffer is allocated once for a large first fill. */
function sizeOf(writes: readonly ElementWrite[]): number {
  let n = 64;
  for (const w of writes)
    n += 128 + (isVerdict(w) ? w.gotos.length * (gotoBytes(w.family, 0) + 32) : w.ranges.length * rangeBytes(w.family) + Math.ceil(w.ranges.length / rangesPerMessage(w.family)) * 64);
  return n;
}

/**
 * The batch (BATCH_BEGIN, per write a flush unless the map is fresh and its element messages,
 * BATCH_END) with sequence numbers from `firstSeq` (mod 2^32), and what each message does. Every
 * message but the batch markers asks for an ACK (NLM_F_ACK), so the sender can check each one.
 * Throws on bad input (checkIntervalMapWrites). Pure.
 */
export function encodeIntervalMapBatch(writes: readonly ElementWrite[], firstSeq: number): EncodedBatch {
  if (endianness() !== 'LE') throw new Error('the nfnetlink encoder writes little-endian headers; this machine is big-endian');
  if (!Number.isInteger(firstSeq) || firstSeq < 0 || firstSeq > 0xffffffff) throw new Error(`sequence number ${firstSeq} is not an integer from 0 to 4294967295`);
  checkIntervalMapWrites(writes);
  const w = new Writer(sizeOf(writes));
  const messages: BatchMessage[] = [];
  let seq = firstSeq;
  const next = (kind: BatchMessage['kind'], write?: number): number => {
    const s = seq;
    messages.push(write === undefined ? { seq: s, kind } : { seq: s, kind, write });
    seq = (seq + 1) % 0x100000000;
    return s;
  };
  const type = (msg: number): number => (NFNL_SUBSYS_NFTABLES << 8) | msg;
  /** A NEWSETELEM message's head up to its element list; returns [message, list] for their ends. */
  const addHead = (table: string, map: string, i: number): [number, number] => {
    const add = w.message(type(NFT_MSG_NEWSETELEM), NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE, next('add', i), NFPROTO_INET, 0);
    w.str(NFTA_SET_ELEM_LIST_TABLE, table);
    w.str(NFTA_SET_ELEM_LIST_SET, map);
    return [add, w.nest(NFTA_SET_ELEM_LIST_ELEMENTS)];
  };

  w.endMessage(w.message(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, next('begin'), 0, NFNL_SUBSYS_NFTABLES));
  writes.forEach((write, i) => {
    const table = write.table;
    const map = write.map;
    const alen = addrLength(write.family);
    if (isVerdict(write)) {
      // Chunked by bytes: chain names differ in length.
      let open: [number, number] | undefined;
      for (const g of write.gotos) {
        if (open === undefined || w.length - open[1] + gotoBytes(write.family, byteLength(g.chain) + 1) > MAX_ATTR) {
          if (open !== undefined) {
            w.endNest(open[1]);
            w.endMessage(open[0]);
          }
          open = addHead(table, map, i);
        }
        const el = w.nest(NFTA_LIST_ELEM);
        const key = w.nest(NFTA_SET_ELEM_KEY);
        const k = w.value(NFTA_DATA_VALUE, alen + 8);
        w.address(k, g.ip, write.family);
        w.byte(k + alen, PROTOCOL_NUMBERS[g.protocol]);
        w.port(k + alen + 4, g.port);
        w.endNest(key);
        const data = w.nest(NFTA_SET_ELEM_DATA);
        const verdict = w.nest(NFTA_DATA_VERDICT);
        w.be32(NFTA_VERDICT_CODE, NFT_GOTO);
        w.str(NFTA_VERDICT_CHAIN, g.chain);
        w.endNest(verdict);
        w.endNest(data);
        w.endNest(el);
      }
      if (open !== undefined) {
        w.endNest(open[1]);
        w.endMessage(open[0]);
      }
      return;
    }
    if (write.fresh !== true) {
      const flush = w.message(type(NFT_MSG_DELSETELEM), NLM_F_REQUEST | NLM_F_ACK, next('flush', i), NFPROTO_INET, 0);
      w.str(NFTA_SET_ELEM_LIST_TABLE, table);
      w.str(NFTA_SET_ELEM_LIST_SET, map);
      w.endMessage(flush);
    }
    const per = rangesPerMessage(write.family);
    for (let start = 0; start < write.ranges.length; start += per) {
      const [add, list] = addHead(table, map, i);
      const end = Math.min(write.ranges.length, start + per);
      for (let j = start; j < end; j += 1) {
        const r = write.ranges[j] as MapRange;
        const first = w.nest(NFTA_LIST_ELEM);
        const key = w.nest(NFTA_SET_ELEM_KEY);
        w.be32(NFTA_DATA_VALUE, r.from);
        w.endNest(key);
        const data = w.nest(NFTA_SET_ELEM_DATA);
        const v = w.value(NFTA_DATA_VALUE, alen + 4);
        w.address(v, r.ip, write.family);
        w.port(v + alen, r.port);
        w.endNest(data);
        w.endNest(first);
        const last = w.nest(NFTA_LIST_ELEM);
        const endKey = w.nest(NFTA_SET_ELEM_KEY);
        w.be32(NFTA_DATA_VALUE, r.to + 1);
        w.endNest(endKey);
        w.be32(NFTA_SET_ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END);
        w.endNest(last);
      }
      w.endNest(list);
      w.endMessage(add);
    }
  });
  w.endMessage(w.message(NFNL_MSG_BATCH_END, NLM_F_REQUEST, next('end'), 0, NFNL_SUBSYS_NFTABLES));
  return { bytes: w.bytes(), messages };
}

/** The batch's bytes (encodeIntervalMapBatch without the message list). Pure. */
export function encodeIntervalMapWrites(writes: readonly ElementWrite[], firstSeq: number): Uint8Array {
  return encodeIntervalMapBatch(writes, firstSeq).bytes;
}

/** What a message of the batch did, for an error: `flush of map inet t m` and the like. Pure. */
export function describeMessage(writes: readonly ElementWrite[], messages: readonly BatchMessage[], seq: number): string {
  const m = messages.find((x) => x.seq === seq);
  if (m === undefined) return `message seq ${seq} (not one of this batch's)`;
  const w = m.write === undefined ? undefined : writes[m.write];
  if (w === undefined) return m.kind === 'begin' ? 'the batch (the kernel refused it or its commit)' : 'the end of the batch';
  return `${m.kind === 'flush' ? 'flushing' : 'adding elements to'} map inet ${w.table} ${w.map}`;
}
