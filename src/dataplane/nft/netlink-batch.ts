/**
 * The nfnetlink batch that replaces the contents of named interval maps (typeof `numgen random mod
 * M : <addr> . <port>`) in an `inet` table, encoded byte for byte. Pure: element-writer.ts hands
 * the bytes to a small C program (native/nfnl-batch.c) that only sends them and reads the ACKs.
 *
 * Why bytes and not `nft` text: an element write on a map whose data are not verdicts is not
 * validated against the whole table by the kernel, and this batch needs no cache of the table
 * (nft fetches every chain and set first), so its cost does not grow with the table
 * (docs/decisions.md, "Element writes over raw netlink").
 *
 * Per write, one transaction in the batch holds:
 *   NFT_MSG_DELSETELEM  table, set, no element list        = flush the map
 *   NFT_MSG_NEWSETELEM  table, set, elements (chunked)     = each range [from, to] as a start
 *                       element (key from, data addr . port) and an end element (key to + 1,
 *                       flag NFT_SET_ELEM_INTERVAL_END, no data), as nft 1.0.6 sends them.
 * Keys are 4 bytes big-endian (nft stores `numgen` keys after `byteorder hton`); data is the
 * address's bytes then the port as 2 bytes big-endian padded to a 4-byte register.
 *
 * Netlink and attribute headers are in host byte order (the kernel reads them as such); every
 * machine this runs on (amd64, arm64) is little-endian, and the encoder refuses any other.
 */
import { endianness } from 'node:os';
import { isIPv4, isIPv6 } from 'node:net';
import { normalizeIPv6 } from '../../annotations/ip.js';
import type { IpFamily } from '../model.js';

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
}

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
const NFT_SET_ELEM_INTERVAL_END = 1;

/** An attribute's length field is 16 bits: the element list of one message must fit it. */
const MAX_ATTR = 0xffff;

const utf8 = new TextEncoder();

/** Throws, naming the write and what is wrong, when a write cannot be encoded. Pure. */
export function checkIntervalMapWrites(writes: readonly IntervalMapWrite[]): void {
  const seen = new Set<string>();
  writes.forEach((w, i) => {
    const at = `interval map write ${i} (inet ${String(w.table)} ${String(w.map)})`;
    for (const [what, name] of [['table', w.table], ['map', w.map]] as const) {
      if (typeof name !== 'string' || name === '') throw new Error(`${at}: the ${what} name is empty; give the ${what}'s name`);
      const n = utf8.encode(name).length;
      if (n > MAX_NAME_BYTES) throw new Error(`${at}: the ${what} name is ${n} bytes long; nftables names are at most ${MAX_NAME_BYTES} bytes`);
      if (name.includes('\0')) throw new Error(`${at}: the ${what} name contains a NUL character; remove it`);
    }
    if (w.family !== 4 && w.family !== 6) throw new Error(`${at}: family ${String(w.family)} is neither 4 nor 6`);
    const key = `${w.table}\0${w.map}`;
    if (seen.has(key)) throw new Error(`${at}: the map is written twice in one batch (the second flush would drop the first's elements); merge the writes`);
    seen.add(key);
    let prevTo = -1;
    w.ranges.forEach((r, j) => {
      const range = `${at} range ${j} [${String(r.from)}-${String(r.to)}]`;
      if (!Number.isInteger(r.from) || !Number.isInteger(r.to) || r.from < 0 || r.to > MAX_KEY || r.from > r.to) {
        throw new Error(`${range}: keys must be integers with 0 <= from <= to <= ${MAX_KEY}`);
      }
      if (r.from <= prevTo) throw new Error(`${range}: overlaps or precedes the range before it (which ends at ${prevTo}); sort the ranges by key and keep them apart`);
      prevTo = r.to;
      const validIp = w.family === 4 ? isIPv4(r.ip) : isIPv6(r.ip) && !r.ip.includes('%');
      if (typeof r.ip !== 'string' || !validIp) throw new Error(`${range}: ${JSON.stringify(r.ip)} is not an IPv${w.family} address (the map is IPv${w.family})`);
      if (!Number.isInteger(r.port) || r.port < 1 || r.port > 65535) throw new Error(`${range}: port ${String(r.port)} is not an integer from 1 to 65535`);
    });
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

/** Appends netlink structures to a growing buffer; headers in host (little-endian) order. */
class Writer {
  private buf = new Uint8Array(4096);
  private view = new DataView(this.buf.buffer);
  length = 0;

  private reserve(n: number): number {
    const at = this.length;
    const need = at + ((n + 3) & ~3);
    if (need > this.buf.length) {
      const next = new Uint8Array(Math.max(need, this.buf.length * 2));
      next.set(this.buf.subarray(0, this.length));
      this.buf = next;
      this.view = new DataView(next.buffer);
    }
    this.length = need; // padding bytes are already zero
    return at;
  }

  u16(at: number, v: number): void {
    this.view.setUint16(at, v, true);
  }

  u32(at: number, v: number): void {
    this.view.setUint32(at, v, true);
  }

  /** nlmsghdr + nfgenmsg; returns the start, for end(). */
  message(type: number, flags: number, seq: number, family: number, resId: number): number {
    const at = this.reserve(20);
    this.u16(at + 4, type);
    this.u16(at + 6, flags);
    this.u32(at + 8, seq);
    // nlmsg_pid 0: to the kernel. nfgenmsg: family, version 0, res_id big-endian.
    this.buf[at + 16] = family;
    this.view.setUint16(at + 18, resId, false);
    return at;
  }

  endMessage(at: number): void {
    this.u32(at, this.length - at);
  }

  attr(type: number, value: Uint8Array): void {
    const at = this.reserve(4 + value.length);
    this.u16(at, 4 + value.length);
    this.u16(at + 2, type);
    this.buf.set(value, at + 4);
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
    return this.buf.slice(0, this.length);
  }
}

const cstring = (s: string): Uint8Array => {
  const b = utf8.encode(s);
  const out = new Uint8Array(b.length + 1);
  out.set(b);
  return out;
};

const be32 = (v: number): Uint8Array => {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, v, false);
  return b;
};

/** Element bytes per range: a start element (key + data) and an end element (key + flags). */
function rangeBytes(family: IpFamily): number {
  const key = 4 + (4 + 4 + 4);
  const data = 4 + 4 + (family === 4 ? 4 : 16) + 4;
  return 4 + key + data + (4 + key + 8);
}

/** Ranges per NEWSETELEM message, so its element list fits a 16-bit attribute length. */
export function rangesPerMessage(family: IpFamily): number {
  return Math.floor((MAX_ATTR - 4) / rangeBytes(family));
}

function chunks<T>(xs: readonly T[], n: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < xs.length; i += n) out.push(xs.slice(i, i + n));
  return out;
}

/**
 * The batch (BATCH_BEGIN, per write a flush and its element messages, BATCH_END) with sequence
 * numbers from `firstSeq` (mod 2^32), and what each message does. Every message but the batch
 * markers asks for an ACK (NLM_F_ACK), so the sender can check each one. Throws on bad input
 * (checkIntervalMapWrites). Pure.
 */
export function encodeIntervalMapBatch(writes: readonly IntervalMapWrite[], firstSeq: number): EncodedBatch {
  if (endianness() !== 'LE') throw new Error('the nfnetlink encoder writes little-endian headers; this machine is big-endian');
  if (!Number.isInteger(firstSeq) || firstSeq < 0 || firstSeq > 0xffffffff) throw new Error(`sequence number ${firstSeq} is not an integer from 0 to 4294967295`);
  checkIntervalMapWrites(writes);
  const w = new Writer();
  const messages: BatchMessage[] = [];
  let seq = firstSeq;
  const next = (kind: BatchMessage['kind'], write?: number): number => {
    const s = seq;
    messages.push(write === undefined ? { seq: s, kind } : { seq: s, kind, write });
    seq = (seq + 1) % 0x100000000;
    return s;
  };
  const type = (msg: number): number => (NFNL_SUBSYS_NFTABLES << 8) | msg;

  w.endMessage(w.message(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, next('begin'), 0, NFNL_SUBSYS_NFTABLES));
  writes.forEach((write, i) => {
    const table = cstring(write.table);
    const map = cstring(write.map);
    const flush = w.message(type(NFT_MSG_DELSETELEM), NLM_F_REQUEST | NLM_F_ACK, next('flush', i), NFPROTO_INET, 0);
    w.attr(NFTA_SET_ELEM_LIST_TABLE, table);
    w.attr(NFTA_SET_ELEM_LIST_SET, map);
    w.endMessage(flush);
    for (const part of chunks(write.ranges, rangesPerMessage(write.family))) {
      const add = w.message(type(NFT_MSG_NEWSETELEM), NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE, next('add', i), NFPROTO_INET, 0);
      w.attr(NFTA_SET_ELEM_LIST_TABLE, table);
      w.attr(NFTA_SET_ELEM_LIST_SET, map);
      const list = w.nest(NFTA_SET_ELEM_LIST_ELEMENTS);
      for (const r of part) {
        const start = w.nest(NFTA_LIST_ELEM);
        const key = w.nest(NFTA_SET_ELEM_KEY);
        w.attr(NFTA_DATA_VALUE, be32(r.from));
        w.endNest(key);
        const data = w.nest(NFTA_SET_ELEM_DATA);
        const addr = addressBytes(r.ip, write.family);
        const value = new Uint8Array(addr.length + 4);
        value.set(addr);
        value[addr.length] = r.port >> 8;
        value[addr.length + 1] = r.port & 0xff;
        w.attr(NFTA_DATA_VALUE, value);
        w.endNest(data);
        w.endNest(start);
        const end = w.nest(NFTA_LIST_ELEM);
        const endKey = w.nest(NFTA_SET_ELEM_KEY);
        w.attr(NFTA_DATA_VALUE, be32(r.to + 1));
        w.endNest(endKey);
        w.attr(NFTA_SET_ELEM_FLAGS, be32(NFT_SET_ELEM_INTERVAL_END));
        w.endNest(end);
      }
      w.endNest(list);
      w.endMessage(add);
    }
  });
  w.endMessage(w.message(NFNL_MSG_BATCH_END, NLM_F_REQUEST, next('end'), 0, NFNL_SUBSYS_NFTABLES));
  return { bytes: w.bytes(), messages };
}

/** The batch's bytes (encodeIntervalMapBatch without the message list). Pure. */
export function encodeIntervalMapWrites(writes: readonly IntervalMapWrite[], firstSeq: number): Uint8Array {
  return encodeIntervalMapBatch(writes, firstSeq).bytes;
}

/** What a message of the batch did, for an error: `flush of map inet t m` and the like. Pure. */
export function describeMessage(writes: readonly IntervalMapWrite[], messages: readonly BatchMessage[], seq: number): string {
  const m = messages.find((x) => x.seq === seq);
  if (m === undefined) return `message seq ${seq} (not one of this batch's)`;
  const w = m.write === undefined ? undefined : writes[m.write];
  if (w === undefined) return m.kind === 'begin' ? 'the batch (the kernel refused it or its commit)' : 'the end of the batch';
  return `${m.kind === 'flush' ? 'flushing' : 'adding elements to'} map inet ${w.table} ${w.map}`;
}
