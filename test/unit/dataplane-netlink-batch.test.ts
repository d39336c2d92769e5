/**
 * The nfnetlink batch encoder (src/dataplane/nft/netlink-batch.ts): its bytes against a golden
 * hex dump (test/golden/nft-netlink), a property over random range sets (a decoder written here,
 * from the kernel's layout, reads back exactly the writes given, with every length and alignment
 * consistent), and the refusals of bad input. The kernel's own reading of the bytes is checked by
 * test/sidecar/nft-element-writer.test.ts. Regenerate the golden with UPDATE_GOLDEN=1.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { golden } from '../harness/golden.js';
import { writeFailure } from '../../src/dataplane/nftables/tuning/element-writer.js';
import { isIPv4 } from 'node:net';
import {
  MAX_KEY,
  dottedQuad,
  encodeIntervalMapBatch,
  encodeIntervalMapWrites,
  rangesPerMessage,
  type GotoElement,
  type IntervalMapWrite,
  type MapRange,
  type VerdictMapWrite,
} from '../../src/dataplane/nftables/netlink-batch.js';

/** A netlink attribute as the kernel parses it (NLA_F_NESTED: a list of attributes). */
interface Attr {
  readonly type: number;
  readonly value?: Uint8Array;
  readonly children?: readonly Attr[];
}

interface Msg {
  readonly type: number;
  readonly flags: number;
  readonly seq: number;
  readonly pid: number;
  readonly family: number;
  readonly resId: number;
  readonly attrs: readonly Attr[];
}

const align = (n: number): number => (n + 3) & ~3;

function attrs(b: Uint8Array, start: number, end: number): Attr[] {
  const v = new DataView(b.buffer, b.byteOffset);
  const out: Attr[] = [];
  let at = start;
  while (at < end) {
    assert.ok(end - at >= 4, `attribute header at ${at} cut off at ${end}`);
    const len = v.getUint16(at, true);
    const type = v.getUint16(at + 2, true);
    assert.ok(len >= 4 && at + len <= end, `attribute at ${at} has length ${len}, past ${end}`);
    const body = b.subarray(at + 4, at + len);
    for (let p = at + len; p < Math.min(align(at + len), end); p++) assert.equal(b[p], 0, `padding byte ${p} is not zero`);
    if ((type & 0x8000) !== 0) out.push({ type: type & 0x3fff, children: attrs(b, at + 4, at + len) });
    else out.push({ type, value: body });
    at = align(at + len);
  }
  assert.equal(at, end, 'attributes end exactly where their parent does');
  return out;
}

function decode(b: Uint8Array): Msg[] {
  const v = new DataView(b.buffer, b.byteOffset);
  const out: Msg[] = [];
  let at = 0;
  while (at < b.length) {
    const len = v.getUint32(at, true);
    assert.ok(len >= 20 && at + len <= b.length && len % 4 === 0, `message at ${at} has length ${len}`);
    out.push({
      type: v.getUint16(at + 4, true),
      flags: v.getUint16(at + 6, true),
      seq: v.getUint32(at + 8, true),
      pid: v.getUint32(at + 12, true),
      family: b[at + 16] ?? -1,
      resId: v.getUint16(at + 18, false),
      attrs: attrs(b, at + 20, at + len),
    });
    assert.equal(b[at + 17], 0, 'nfgenmsg version is NFNETLINK_V0');
    at += len;
  }
  return out;
}

const one = (xs: readonly Attr[], type: number): Attr => {
  const found = xs.filter((a) => a.type === type);
  assert.equal(found.length, 1, `exactly one attribute of type ${type}`);
  return found[0] as Attr;
};
const text = (a: Attr): string => {
  const v = a.value ?? new Uint8Array();
  assert.equal(v[v.length - 1], 0, 'names end with NUL');
  return Buffer.from(v.subarray(0, v.length - 1)).toString('utf8');
};
const be32 = (a: Attr): number => {
  assert.equal(a.value?.length, 4);
  return Buffer.from(a.value ?? []).readUInt32BE(0);
};
const value = (a: Attr): Uint8Array => one(a.children ?? [], 1).value ?? new Uint8Array();

/** An address's bytes as text, compared through WHATWG URL's canonical form (independent of the encoder). */
function addressText(bytes: Uint8Array): string {
  if (bytes.length === 4) return [...bytes].join('.');
  const groups = [];
  for (let i = 0; i < 16; i += 2) groups.push((((bytes[i] ?? 0) << 8) | (bytes[i + 1] ?? 0)).toString(16));
  return canonical6(groups.join(':'));
}
const canonical6 = (ip: string): string => new URL(`http://[${ip}]/`).hostname;

/** The writes the batch carries, read back: flush + element messages per map, in order. */
function writesOf(msgs: readonly Msg[]): IntervalMapWrite[] {
  const out: { table: string; map: string; family: 4 | 6; ranges: MapRange[] }[] = [];
  for (const m of msgs.slice(1, -1)) {
    assert.equal(m.family, 1, 'NFPROTO_INET');
    assert.equal(m.pid, 0);
    assert.equal(m.resId, 0);
    const table = text(one(m.attrs, 1));
    const map = text(one(m.attrs, 2));
    if (m.type === ((10 << 8) | 14)) {
      assert.equal(m.attrs.length, 2, 'a flush carries no element list');
      assert.equal(m.flags, 0x1 | 0x4, 'REQUEST | ACK');
      out.push({ table, map, family: 4, ranges: [] });
      continue;
    }
    assert.equal(m.type, (10 << 8) | 12, 'NFT_MSG_NEWSETELEM');
    assert.equal(m.flags, 0x1 | 0x4 | 0x400, 'REQUEST | ACK | CREATE');
    const w = out[out.length - 1];
    assert.ok(w !== undefined && w.table === table && w.map === map, 'elements follow their map flush');
    const elems = one(m.attrs, 3).children ?? [];
    assert.ok(elems.length > 0, 'no empty element list');
    for (let i = 0; i < elems.length; i += 2) {
      const start = elems[i]?.children ?? [];
      const end = elems[i + 1]?.children ?? [];
      assert.equal(start.length, 2, 'a start element: key and data, no flags');
      const data = value(one(start, 2));
      assert.equal(end.length, 2, 'an end element: key and flags, no data');
      assert.equal(be32(one(end, 3)), 1, 'NFT_SET_ELEM_INTERVAL_END');
      const addr = data.subarray(0, data.length - 4);
      w.family = addr.length === 4 ? 4 : 6;
      assert.deepEqual([...data.subarray(data.length - 2)], [0, 0], 'the port register is padded with zeros');
      w.ranges.push({
        from: be32({ type: 1, value: value(one(start, 1)) }),
        to: be32({ type: 1, value: value(one(end, 1)) }) - 1,
        ip: addressText(addr),
        port: Buffer.from(data).readUInt16BE(data.length - 4),
      });
    }
  }
  return out;
}

/** xxd-like dump, one block per message, for the golden file. */
function dump(bytes: Uint8Array, kinds: readonly string[]): string {
  const lines: string[] = [];
  const msgs = decode(bytes);
  let at = 0;
  msgs.forEach((m, i) => {
    const len = new DataView(bytes.buffer, bytes.byteOffset).getUint32(at, true);
    lines.push(`# message ${i}: seq ${m.seq}, ${kinds[i] ?? '?'}, type 0x${m.type.toString(16)}, flags 0x${m.flags.toString(16)}, ${len} bytes`);
    for (let o = at; o < at + len; o += 16) {
      const row = [...bytes.subarray(o, Math.min(o + 16, at + len))].map((x) => x.toString(16).padStart(2, '0'));
      lines.push(`${o.toString(16).padStart(6, '0')}: ${row.join(' ')}`);
    }
    at += len;
  });
  return `${lines.join('\n')}\n`;
}

const SAMPLE: IntervalMapWrite[] = [
  {
    table: 'multus_proxy',
    map: 'MPX-EPS-ABCDEF',
    family: 4,
    ranges: [
      { from: 0, to: 1431655764, ip: '10.1.0.1', port: 80 },
      { from: 1431655765, to: 2863311529, ip: '10.1.0.2', port: 8080 },
      { from: 2863311530, to: MAX_KEY, ip: '10.1.0.3', port: 65535 },
    ],
  },
  { table: 'multus_proxy', map: 'MPX-EPS-V6', family: 6, ranges: [{ from: 0, to: MAX_KEY, ip: 'fd00:101::1:2', port: 443 }] },
  { table: 'multus_proxy', map: 'MPX-EPS-EMPTY', family: 4, ranges: [] },
];

void describe('nfnetlink interval-map batch: bytes', () => {
  void test('golden: three maps (IPv4 three endpoints, IPv6 one, one emptied)', () => {
    const b = encodeIntervalMapBatch(SAMPLE, 4294967294);
    golden(
      'nft-netlink',
      'replace-maps.hex',
      dump(
        b.bytes,
        b.messages.map((m) => (m.write === undefined ? m.kind : `${m.kind} ${SAMPLE[m.write]?.map}`)),
      ),
    );
    assert.deepEqual(
      b.messages.map((m) => m.seq),
      [4294967294, 4294967295, 0, 1, 2, 3, 4],
      'sequence numbers wrap at 2^32',
    );
    assert.deepEqual(encodeIntervalMapWrites(SAMPLE, 4294967294), b.bytes);
  });

  void test('an empty batch is BATCH_BEGIN and BATCH_END for the nftables subsystem', () => {
    const msgs = decode(encodeIntervalMapWrites([], 7));
    assert.deepEqual(
      msgs.map((m) => [m.type, m.flags, m.seq, m.family, m.resId, m.attrs.length]),
      [
        [0x10, 1, 7, 0, 10, 0],
        [0x11, 1, 8, 0, 10, 0],
      ],
    );
  });

  void test('a map with more ranges than one message holds is split, every list within 16-bit lengths', () => {
    for (const family of [4, 6] as const) {
      const n = rangesPerMessage(family) * 2 + 1;
      const ranges = Array.from({ length: n }, (_, i) => ({ from: i * 2, to: i * 2 + 1, ip: family === 4 ? '192.0.2.1' : '2001:db8::1', port: 1 + i }));
      const msgs = decode(encodeIntervalMapWrites([{ table: 't', map: 'm', family, ranges }], 1));
      assert.equal(msgs.length, 2 + 1 + 3, `IPv${family}: begin, flush, three element messages, end`);
      assert.deepEqual(writesOf(msgs), [{ table: 't', map: 'm', family, ranges: ranges.map((r) => ({ ...r, ip: family === 4 ? r.ip : canonical6(r.ip) })) }]);
    }
  });
});

/** Sorted, non-overlapping ranges: either arbitrary ones or the plan's equal shares of M = 2^32 - 1. */
const rangeKeys = fc.oneof(
  fc.uniqueArray(fc.integer({ min: 0, max: MAX_KEY }), { maxLength: 40 }).map((ks) => {
    const s = [...ks].sort((a, b) => a - b);
    const out: [number, number][] = [];
    for (let i = 0; i < s.length; i += 2) out.push([s[i] as number, s[i + 1] ?? (s[i] as number)]);
    return out;
  }),
  fc.integer({ min: 1, max: 300 }).map((n) => Array.from({ length: n }, (_, i): [number, number] => [Math.floor((i * 4294967295) / n), Math.floor(((i + 1) * 4294967295) / n) - 1])),
);

const write = fc
  .record({
    family: fc.constantFrom(4 as const, 6 as const),
    keys: rangeKeys,
    map: fc.stringMatching(/^[A-Za-z0-9_-]{1,40}$/),
    seed: fc.array(fc.tuple(fc.ipV4(), fc.ipV6(), fc.integer({ min: 1, max: 65535 })), { minLength: 1, maxLength: 5 }),
  })
  .map(({ family, keys, map, seed }): IntervalMapWrite => ({
    table: 'multus_proxy',
    map,
    family,
    ranges: keys.map(([from, to], i) => {
      const [ip4, ip6, port] = seed[i % seed.length] as [string, string, number];
      return { from, to, ip: family === 4 ? ip4 : ip6, port };
    }),
  }));

void describe('nfnetlink interval-map batch: property', () => {
  void test('random range sets decode back to the writes given, every message framed and acknowledged', () => {
    fc.assert(
      fc.property(fc.uniqueArray(write, { maxLength: 6, selector: (w) => w.map }), fc.integer({ min: 0, max: 0xffffffff }), (writes, firstSeq) => {
        const b = encodeIntervalMapBatch(writes, firstSeq);
        const msgs = decode(b.bytes);
        assert.equal(msgs[0]?.type, 0x10);
        assert.equal(msgs[msgs.length - 1]?.type, 0x11);
        assert.deepEqual(
          msgs.map((m) => m.seq),
          msgs.map((_, i) => (firstSeq + i) % 0x100000000),
        );
        assert.deepEqual(
          b.messages.map((m) => m.seq),
          msgs.map((m) => m.seq),
        );
        const expect = writes.map((w) => ({ ...w, family: w.ranges.length === 0 ? 4 : w.family, ranges: w.ranges.map((r) => ({ ...r, ip: w.family === 6 ? canonical6(r.ip) : r.ip })) }));
        assert.deepEqual(writesOf(msgs), expect);
      }),
      { numRuns: 300 },
    );
  });

  void test('overlapping or unsorted ranges are refused, naming the map and both ranges', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: MAX_KEY - 1 }), fc.integer({ min: 0, max: 1000 }), (from, back) => {
        const to = Math.min(MAX_KEY, from + 10);
        const second = { from: Math.max(0, to - back), to: MAX_KEY, ip: '10.0.0.2', port: 80 };
        assert.throws(
          () => encodeIntervalMapWrites([{ table: 't', map: 'M', family: 4, ranges: [{ from, to, ip: '10.0.0.1', port: 80 }, second] }], 1),
          new RegExp(`interval map write 0 \\(inet t M\\) range 1 \\[${second.from}-${MAX_KEY}\\]: overlaps or precedes the range before it \\(which ends at ${to}\\)`),
        );
      }),
    );
  });
});

void describe('nfnetlink interval-map batch: bad input', () => {
  const w = (patch: Partial<IntervalMapWrite>, range: Partial<MapRange> = {}): IntervalMapWrite[] => [
    { table: 't', map: 'm', family: 4, ranges: [{ from: 0, to: 10, ip: '10.0.0.1', port: 80, ...range }], ...patch },
  ];
  const cases: [string, IntervalMapWrite[], RegExp][] = [
    ['key past the largest', w({}, { to: MAX_KEY + 1 }), /range 0 \[0-4294967295\]: keys must be integers with 0 <= from <= to <= 4294967294/],
    ['from after to', w({}, { from: 11 }), /range 0 \[11-10\]: keys must be integers/],
    ['negative key', w({}, { from: -1 }), /range 0 \[-1-10\]: keys must be integers/],
    ['fractional key', w({}, { to: 1.5 }), /keys must be integers/],
    ['IPv6 address in an IPv4 map', w({}, { ip: 'fd00::1' }), /"fd00::1" is not an IPv4 address \(the map is IPv4\)/],
    ['IPv4 address in an IPv6 map', w({ family: 6 }), /"10.0.0.1" is not an IPv6 address/],
    ['zone in an IPv6 address', w({ family: 6 }, { ip: 'fe80::1%eth0' }), /"fe80::1%eth0" is not an IPv6 address/],
    ['not an address', w({}, { ip: '10.0.0.256' }), /"10.0.0.256" is not an IPv4 address/],
    ['port 0', w({}, { port: 0 }), /port 0 is not an integer from 1 to 65535/],
    ['port too large', w({}, { port: 65536 }), /port 65536 is not an integer from 1 to 65535/],
    ['empty map name', w({ map: '' }), /the map name is empty/],
    ['long table name', w({ table: 'x'.repeat(256) }), /the table name is 256 bytes long; nftables names are at most 255 bytes/],
    ['multi-byte name over the limit', w({ map: 'é'.repeat(128) }), /the map name is 256 bytes long/],
    ['NUL in a name', w({ map: 'a\0b' }), /the map name contains a NUL character/],
    ['bad family', w({ family: 5 as 4 }), /family 5 is neither 4 nor 6/],
    ['a map twice', [...w({}), ...w({})], /interval map write 1 \(inet t m\): the map is written twice in one batch/],
  ];
  for (const [name, writes, message] of cases) void test(name, () => assert.throws(() => encodeIntervalMapWrites(writes, 1), message));
  void test('names of 255 bytes and the widest keys are accepted', () => {
    assert.doesNotThrow(() => encodeIntervalMapWrites(w({ table: 'x'.repeat(255), map: 'y'.repeat(255) }, { from: 0, to: MAX_KEY }), 1));
  });
  void test('a bad sequence number is refused', () => {
    assert.throws(() => encodeIntervalMapWrites([], 2 ** 32), /sequence number 4294967296 is not an integer from 0 to 4294967295/);
    assert.throws(() => encodeIntervalMapWrites([], -1), /sequence number -1/);
  });
});

void describe('a failed batch, named by its messages (element-writer.ts)', () => {
  const b = encodeIntervalMapBatch(SAMPLE, 10);
  void test('each "message seq N" of nfnl-batch becomes what that message did', () => {
    const e = writeFailure(SAMPLE, b.messages, { code: 1, stderr: 'message seq 13: No such file or directory\nmessage seq 14: No such file or directory\n' });
    assert.equal(
      e.message,
      'nfnl-batch failed, nothing of the batch applied: flushing map inet multus_proxy MPX-EPS-V6: No such file or directory; adding elements to map inet multus_proxy MPX-EPS-V6: No such file or directory',
    );
    assert.match(
      writeFailure(SAMPLE, b.messages, { code: 1, stderr: 'message seq 10: Operation not permitted\n' }).message,
      /the batch \(the kernel refused it or its commit\): Operation not permitted/,
    );
    assert.match(writeFailure(SAMPLE, b.messages, { code: 1, stderr: 'message seq 99: Invalid argument\n' }).message, /message seq 99 \(not one of this batch's\): Invalid argument/);
  });
  void test('a failure that names no message does not claim the batch was not applied', () => {
    const e = writeFailure(SAMPLE, b.messages, { code: 1, stderr: "answers lost (receive buffer overrun, 3 of 5 read): the batch's outcome is unknown\n" });
    assert.equal(e.message, "nfnl-batch failed (exit 1): answers lost (receive buffer overrun, 3 of 5 read): the batch's outcome is unknown");
  });
});

/** Goto elements read back from NEWSETELEM messages of a verdict map (first-fill.ts's dispatch writes). */
function gotosOf(msgs: readonly Msg[]): { table: string; map: string; gotos: GotoElement[] }[] {
  const names: Record<number, GotoElement['protocol']> = { 6: 'tcp', 17: 'udp', 132: 'sctp' };
  const out: { table: string; map: string; gotos: GotoElement[] }[] = [];
  for (const m of msgs.slice(1, -1)) {
    assert.equal(m.type, (10 << 8) | 12, 'NFT_MSG_NEWSETELEM only: a fresh map is not flushed');
    const table = text(one(m.attrs, 1));
    const map = text(one(m.attrs, 2));
    let w = out[out.length - 1];
    if (w === undefined || w.table !== table || w.map !== map) out.push((w = { table, map, gotos: [] }));
    for (const el of one(m.attrs, 3).children ?? []) {
      const parts = el.children ?? [];
      assert.equal(parts.length, 2, 'a goto element: key and data');
      const key = value(one(parts, 1));
      assert.ok(key.length === 12 || key.length === 24, 'address . protocol . port, each in a 4-byte register');
      const alen = key.length - 8;
      assert.deepEqual([...key.subarray(alen + 1, alen + 4), ...key.subarray(alen + 6)], [0, 0, 0, 0, 0], 'registers padded with zeros');
      const verdict = one(one(parts, 2).children ?? [], 2).children ?? [];
      assert.equal(be32(one(verdict, 1)), 0xfffffffc, 'NFT_GOTO');
      w.gotos.push({ ip: addressText(key.subarray(0, alen)), protocol: names[key[alen] ?? 0] ?? 'tcp', port: Buffer.from(key).readUInt16BE(alen + 4), chain: text(one(verdict, 2)) });
    }
  }
  return out;
}

void describe('nfnetlink batch: a first fill (fresh interval maps, goto elements)', () => {
  const gotoArb = (family: 4 | 6) =>
    fc.record({
      ip: family === 4 ? fc.ipV4() : fc.ipV6(),
      protocol: fc.constantFrom('tcp' as const, 'udp' as const, 'sctp' as const),
      port: fc.integer({ min: 1, max: 65535 }),
      chain: fc.stringMatching(/^MPX-SVC-[A-Z0-9]{1,60}$/),
    });
  void test('random goto elements decode back as given, chunked within 16-bit lengths (property)', () => {
    fc.assert(
      fc.property(
        fc
          .constantFrom(4 as const, 6 as const)
          .chain((family) => fc.tuple(fc.constant(family), fc.uniqueArray(gotoArb(family), { maxLength: 2000, selector: (g) => `${g.ip} ${g.protocol} ${g.port}` }))),
        ([family, gotos]) => {
          const write: VerdictMapWrite = { table: 'multus_proxy-s3', map: `services-v${family}`, family, gotos };
          const msgs = decode(encodeIntervalMapWrites([write], 1));
          const got = gotosOf(msgs);
          if (gotos.length === 0) return assert.equal(msgs.length, 2, 'no element: begin and end only');
          assert.equal(got.length, 1);
          assert.deepEqual(
            got[0]?.gotos,
            gotos.map((g) => ({ ...g, ip: family === 6 ? canonical6(g.ip) : g.ip })),
          );
        },
      ),
      { numRuns: 60 },
    );
  });

  void test('3,000 goto elements span several messages, each list within 16 bits, and read back whole', () => {
    const gotos: GotoElement[] = Array.from({ length: 3000 }, (_, i) => ({ ip: `10.96.${i >> 8}.${i & 255}`, protocol: 'tcp', port: 80, chain: `MPX-SVC-${'X'.repeat(i % 40)}${i}` }));
    const msgs = decode(encodeIntervalMapWrites([{ table: 't', map: 'services-v4', family: 4, gotos }], 1));
    assert.ok(msgs.length > 4, `${msgs.length - 2} element messages`);
    assert.deepEqual(gotosOf(msgs)[0]?.gotos, gotos);
  });

  void test('a fresh interval map gets no flush', () => {
    const msgs = decode(encodeIntervalMapWrites([{ ...(SAMPLE[0] as IntervalMapWrite), fresh: true }], 1));
    assert.deepEqual(
      msgs.map((m) => m.type),
      [0x10, (10 << 8) | 12, 0x11],
    );
  });

  void test('bad goto elements are refused, naming the write, the element and the fix', () => {
    const g = (patch: Partial<GotoElement>): VerdictMapWrite[] => [{ table: 't', map: 'services-v4', family: 4, gotos: [{ ip: '10.96.0.1', protocol: 'tcp', port: 80, chain: 'C', ...patch }] }];
    const cases: [string, VerdictMapWrite[], RegExp][] = [
      ['IPv6 in an IPv4 map', g({ ip: 'fd00::1' }), /verdict map write 0 \(inet t services-v4\) element 0: "fd00::1" is not an IPv4 address/],
      ['leading zero', g({ ip: '10.96.0.01' }), /"10.96.0.01" is not an IPv4 address/],
      ['protocol', g({ protocol: 'icmp' as 'tcp' }), /protocol "icmp" is not one of tcp, udp, sctp/],
      ['port', g({ port: 0 }), /port 0 is not an integer from 1 to 65535/],
      ['empty chain', g({ chain: '' }), /the chain name is empty/],
      ['chain too long', g({ chain: 'c'.repeat(256) }), /the chain name is 256 bytes long/],
    ];
    for (const [name, writes, message] of cases) assert.throws(() => encodeIntervalMapWrites(writes, 1), message, name);
    const twice = g({});
    assert.throws(
      () => encodeIntervalMapWrites([{ ...(twice[0] as VerdictMapWrite), gotos: [...(twice[0] as VerdictMapWrite).gotos, ...(twice[0] as VerdictMapWrite).gotos] }], 1),
      /element 1: 10.96.0.1 . tcp . 80 is already an element of this write/,
    );
  });

  void test('dottedQuad is net.isIPv4 (property)', () => {
    const quadish = fc.array(fc.constantFrom('0', '1', '2', '5', '9', '.', '25', '255', '256', '00', '01', 'a', ' '), { maxLength: 12 }).map((xs) => xs.join(''));
    fc.assert(
      fc.property(fc.oneof(fc.ipV4(), fc.ipV4Extended(), quadish, fc.string()), (s) => assert.equal(dottedQuad(s), isIPv4(s), JSON.stringify(s))),
      { numRuns: 5000 },
    );
  });
});
