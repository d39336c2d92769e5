import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { describeIpam, ipamAllows, MAX_IPAM_RANGES, parseNadIpam, type NadIpam, type ReadableIpam } from '../../../src/annotations/nad-ipam.js';
import { parseIp } from '../../../src/annotations/ip.js';
import { formatInputError } from '../../../src/result.js';
import { assertNoPollution, assertWellFormed, expectErr, expectOk, mutated, pathological, FEW_RUNS, RUNS } from './arbitraries.js';

const cfg = (ipam: unknown, list = false): string => {
  const main = { cniVersion: '0.4.0', type: 'macvlan', master: 'eth1', ipam };
  return JSON.stringify(list ? { cniVersion: '1.0.0', plugins: [main, { type: 'tuning' }] } : main);
};
const readable = (r: NadIpam): ReadableIpam => {
  if (!r.readable) assert.fail(`expected a readable range, got: ${r.why}`);
  return r;
};
const allows = (ipam: ReadableIpam, text: string): boolean => {
  const p = parseIp(text);
  assert.ok(p.ok);
  return ipamAllows(ipam, p.value.address, p.value.family);
};

void describe('parseNadIpam: examples', () => {
  void test('whereabouts: range, range_start/range_end, exclude', () => {
    const w = readable(expectOk(parseNadIpam(cfg({ type: 'whereabouts', range: '10.2.128.0/24', range_start: '10.2.128.10', range_end: '10.2.128.100', exclude: ['10.2.128.50/31', '10.2.128.77'] }))));
    assert.equal(w.plugin, 'whereabouts');
    assert.deepEqual(
      ['10.2.128.9', '10.2.128.10', '10.2.128.49', '10.2.128.50', '10.2.128.51', '10.2.128.52', '10.2.128.77', '10.2.128.100', '10.2.128.101', '10.2.129.20'].map((a) => allows(w, a)),
      [false, true, true, false, false, true, false, true, false, false],
    );
    assert.equal(describeIpam(w), 'whereabouts 10.2.128.0/24 from 10.2.128.10 to 10.2.128.100 except 10.2.128.50/31, 10.2.128.77');
  });
  void test('whereabouts: the first-last/prefix form, ipRanges for both families, a conflist', () => {
    const short = readable(expectOk(parseNadIpam(cfg({ type: 'whereabouts', range: '10.1.1.10-10.1.1.20/24' }))));
    assert.deepEqual(
      ['10.1.1.9', '10.1.1.10', '10.1.1.20', '10.1.1.21'].map((a) => allows(short, a)),
      [false, true, true, false],
    );
    const dual = readable(expectOk(parseNadIpam(cfg({ type: 'whereabouts', ipRanges: [{ range: '10.1.1.0/24' }, { range: 'fd00:2::/64', exclude: ['fd00:2::/120'] }] }, true))));
    assert.deepEqual(
      ['10.1.1.5', '10.1.2.5', 'fd00:2::1:1', 'fd00:2::11', 'fd00:3::1', '::ffff:10.1.1.5'].map((a) => allows(dual, a)),
      [true, false, true, false, false, false],
    );
  });
  void test('host-local: ranges sets and the older top-level subnet', () => {
    const h = readable(expectOk(parseNadIpam(cfg({ type: 'host-local', ranges: [[{ subnet: '10.1.0.0/16', rangeStart: '10.1.2.0', rangeEnd: '10.1.2.255' }], [{ subnet: 'fd00:1::/64' }]] }))));
    assert.deepEqual(
      ['10.1.2.7', '10.1.3.7', 'fd00:1::7', 'fd00:9::7'].map((a) => allows(h, a)),
      [true, false, true, false],
    );
    const old = readable(expectOk(parseNadIpam(cfg({ type: 'host-local', subnet: '192.168.5.0/24', rangeStart: '192.168.5.100' }))));
    assert.deepEqual(
      ['192.168.5.99', '192.168.5.100', '192.168.5.255'].map((a) => allows(old, a)),
      [false, true, true],
    );
  });
  void test('static: the subnets of its addresses; without addresses no range', () => {
    const s = readable(expectOk(parseNadIpam(cfg({ type: 'static', addresses: [{ address: '10.10.0.5/24', gateway: '10.10.0.1' }, { address: '2001:db8::5/64' }] }))));
    assert.deepEqual(
      ['10.10.0.200', '10.10.1.5', '2001:db8::ff', '2001:db9::5'].map((a) => allows(s, a)),
      [true, false, true, false],
    );
    assert.equal(expectOk(parseNadIpam(cfg({ type: 'static' }))).readable, false);
  });
  void test('no range to read: other IPAM types, no ipam, file configs', () => {
    for (const config of [cfg({ type: 'dhcp' }), cfg({ type: 'calico-ipam' }), JSON.stringify({ type: 'macvlan', master: 'eth1' }), '', undefined, cfg({ subnet: '10.0.0.0/8' })]) {
      const r = expectOk(parseNadIpam(config));
      assert.equal(r.readable, false, String(config));
      if (!r.readable) assert.ok(r.why.length > 10);
    }
  });
  void test('malformed configs: the message names the key, the value and the fix', () => {
    const cases: [unknown, string, RegExp][] = [
      [{ type: 'whereabouts', range: '10.2.128.0' }, 'spec.config "ipam" "range"', /no prefix length/],
      [{ type: 'whereabouts', range: 'ten/8' }, 'spec.config "ipam" "range"', /not an IPv4 or IPv6/],
      [{ type: 'whereabouts', range: '10.2.128.0/24', range_start: '10.3.0.1' }, 'spec.config "ipam" "range_start"', /outside the range 10.2.128.0\/24/],
      [{ type: 'whereabouts', range: '10.2.128.0/24', range_start: '10.2.128.9', range_end: '10.2.128.8' }, 'spec.config "ipam" "range_end"', /comes before/],
      [{ type: 'whereabouts', range: '10.2.128.0/24', exclude: 'x' }, 'spec.config "ipam" "exclude"', /expected a list/],
      [{ type: 'whereabouts', range: '10.2.128.0/24', exclude: ['fd00::/64'] }, 'spec.config "ipam" "exclude" item 1', /IPv6/],
      [{ type: 'whereabouts' }, 'spec.config "ipam" "range"', /missing/],
      [{ type: 'whereabouts', ipRanges: [{}] }, 'spec.config "ipam" "ipRanges" item 1 "range"', /missing/],
      [{ type: 'host-local', ranges: [[{ subnet: 7 }]] }, 'spec.config "ipam" "ranges" item 1 item 1 "subnet"', /a number/],
      [{ type: 'host-local', ranges: [{ subnet: '10.0.0.0/8' }] }, 'spec.config "ipam" "ranges" item 1', /expected a list of ranges/],
      [{ type: 'static', addresses: [{ address: '10.1.1.1' }] }, 'spec.config "ipam" "addresses" item 1 "address"', /no prefix length/],
      ['dhcp', 'spec.config "ipam"', /a string, expected an object/],
    ];
    for (const [ipam, key, reason] of cases) {
      const e = expectErr(parseNadIpam(cfg(ipam)));
      assert.equal(e.key, key, JSON.stringify(ipam));
      assert.match(e.reason, reason);
      assert.ok(e.fix.startsWith('write'), e.fix);
    }
    const text = formatInputError('NetworkAttachmentDefinition ns/macvlan1', expectErr(parseNadIpam(cfg({ type: 'whereabouts', range: '10.2.128.0' }))));
    assert.match(text, /^NetworkAttachmentDefinition ns\/macvlan1: spec.config "ipam" "range" "10.2.128.0": has no prefix length; write "range" as a CIDR/);
  });
  void test('sizes are bounded', () => {
    const many = Array.from({ length: MAX_IPAM_RANGES + 1 }, (_, i) => ({ range: `10.${i}.0.0/16` }));
    assert.match(expectErr(parseNadIpam(cfg({ type: 'whereabouts', ipRanges: many }))).reason, /more than 64/);
    assert.equal(readable(expectOk(parseNadIpam(cfg({ type: 'whereabouts', ipRanges: many.slice(1) })))).ranges.length, 64);
    const excludes = Array.from({ length: 300 }, (_, i) => `10.0.${i % 256}.${Math.floor(i / 256)}`);
    assert.match(expectErr(parseNadIpam(cfg({ type: 'whereabouts', range: '10.0.0.0/16', exclude: excludes }))).reason, /more than 256/);
    const long = readable(expectOk(parseNadIpam(cfg({ type: 'whereabouts', ipRanges: many.slice(1) }))));
    assert.match(describeIpam(long), /10\.4\.0\.0\/16 and 60 more ranges$/);
  });
});

// ---- properties --------------------------------------------------------------------------------

/** A range generated from numbers, so the expected membership is computed apart from the parser. */
interface GenRange {
  family: 4 | 6;
  first: bigint;
  last: bigint;
  exclude: [bigint, bigint][];
  json: Record<string, unknown>;
}

const BITS = { 4: 32n, 6: 128n } as const;
function text(n: bigint, family: 4 | 6): string {
  if (family === 4) return [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 255n)).join('.');
  return Array.from({ length: 8 }, (_, i) => ((n >> BigInt((7 - i) * 16)) & 0xffffn).toString(16)).join(':');
}
const bigintBits = (b: bigint): fc.Arbitrary<bigint> => fc.bigInt({ min: 0n, max: (1n << b) - 1n });

const genRange: fc.Arbitrary<GenRange> = fc
  .constantFrom<4 | 6>(4, 6)
  .chain((family) =>
    fc.record({
      family: fc.constant(family),
      base: bigintBits(BITS[family]),
      prefix: fc.integer({ min: family === 4 ? 16 : 104, max: Number(BITS[family]) }),
      a: fc.bigInt({ min: 0n, max: (1n << 16n) - 1n }),
      b: fc.bigInt({ min: 0n, max: (1n << 16n) - 1n }),
      bounds: fc.constantFrom('none', 'start', 'end', 'both', 'short'),
      excludes: fc.array(fc.record({ at: fc.bigInt({ min: 0n, max: (1n << 16n) - 1n }), prefix: fc.integer({ min: 0, max: 4 }) }), { maxLength: 3 }),
      plugin: fc.constantFrom('whereabouts', 'host-local'),
    }),
  )
  .map(({ family, base, prefix, a, b, bounds, excludes, plugin }) => {
    const host = BITS[family] - BigInt(prefix);
    const size = 1n << host;
    const net = (base >> host) << host;
    const [lo, hi] = [a % size, b % size].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0)) as [bigint, bigint];
    const first = bounds === 'start' || bounds === 'both' || bounds === 'short' ? net + lo : net;
    const last = bounds === 'end' || bounds === 'both' || bounds === 'short' ? net + hi : net + size - 1n;
    const cidr = `${text(base, family)}/${prefix}`;
    const json: Record<string, unknown> = {};
    const exclude: [bigint, bigint][] = [];
    if (plugin === 'whereabouts') {
      json['range'] = bounds === 'short' ? `${text(first, family)}-${text(last, family)}/${prefix}` : cidr;
      if (bounds === 'start' || bounds === 'both') json['range_start'] = text(first, family);
      if (bounds === 'end' || bounds === 'both') json['range_end'] = text(last, family);
      const ex: string[] = [];
      for (const e of excludes) {
        const eh = BigInt(Math.min(e.prefix, Number(host)));
        const start = ((net + (e.at % size)) >> eh) << eh;
        exclude.push([start, start + (1n << eh) - 1n]);
        ex.push(`${text(start, family)}/${Number(BITS[family] - eh)}`);
      }
      if (ex.length > 0) json['exclude'] = ex;
    } else {
      json['subnet'] = cidr;
      if (bounds !== 'none' && bounds !== 'end') json['rangeStart'] = text(first, family);
      if (bounds !== 'none' && bounds !== 'start') json['rangeEnd'] = text(last, family);
    }
    return { family, first, last, exclude, json: { plugin, ...json } };
  });

const genConfig = fc.record({ ranges: fc.array(genRange, { minLength: 1, maxLength: 4 }), list: fc.boolean() }).map(({ ranges, list }) => {
  const wb = ranges.filter((r) => r.json['plugin'] === 'whereabouts');
  const useWhereabouts = wb.length > 0;
  const chosen = useWhereabouts ? wb : ranges;
  const strip = (r: GenRange): Record<string, unknown> => Object.fromEntries(Object.entries(r.json).filter(([k]) => k !== 'plugin'));
  const ipam = useWhereabouts ? { type: 'whereabouts', ipRanges: chosen.map(strip) } : { type: 'host-local', ranges: [chosen.map(strip)] };
  return { text: cfg(ipam, list), ranges: chosen };
});

function modelAllows(ranges: readonly GenRange[], n: bigint, family: 4 | 6): boolean {
  return ranges.some((r) => r.family === family && r.first <= n && n <= r.last && !r.exclude.some(([s, e]) => s <= n && n <= e));
}

void describe('parseNadIpam: properties', () => {
  void test('generated ranges: an address is allowed exactly when the model says so (IPv4 and IPv6, near every bound)', () => {
    fc.assert(
      fc.property(genConfig, fc.array(fc.tuple(fc.nat(), fc.integer({ min: -2, max: 2 }), fc.boolean()), { minLength: 1, maxLength: 8 }), ({ text: config, ranges }, probes) => {
        const ipam = readable(expectOk(parseNadIpam(config)));
        assert.equal(ipam.ranges.length, ranges.length);
        for (const [i, delta, atEnd] of probes) {
          const r = ranges[i % ranges.length] as GenRange;
          const bounds = [r.first, r.last, ...r.exclude.flat()];
          const pick = bounds[i % bounds.length] as bigint;
          const n = (atEnd ? r.last : pick) + BigInt(delta);
          if (n < 0n || n >= 1n << BITS[r.family]) continue;
          const p = parseIp(text(n, r.family));
          assert.ok(p.ok);
          assert.equal(ipamAllows(ipam, p.value.address, r.family), modelAllows(ranges, n, r.family), `${p.value.address} in ${config}`);
        }
      }),
      RUNS,
    );
  });
  void test('mutated configs never throw; every result is well formed', () => {
    fc.assert(
      fc.property(mutated(genConfig.map((c) => c.text)), (config) => {
        const r = parseNadIpam(config);
        if (!r.ok) assertWellFormed(r, config);
        else if (r.value.readable) assert.ok(r.value.ranges.length > 0 && r.value.ranges.length <= MAX_IPAM_RANGES);
      }),
      RUNS,
    );
  });
  void test('arbitrary JSON as the ipam never throws', () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.constantFrom('whereabouts', 'host-local', 'static', undefined), (v, type) => {
        const ipam = type !== undefined && typeof v === 'object' && v !== null && !Array.isArray(v) ? { ...v, type } : v;
        const r = parseNadIpam(cfg(ipam));
        if (!r.ok) assertWellFormed(r, ipam);
      }),
      FEW_RUNS,
    );
  });
  void test('pathological inputs', () => {
    for (const input of pathological) {
      const r = parseNadIpam(input);
      if (!r.ok) assertWellFormed(r, input);
      if (typeof input === 'bigint' || typeof input === 'symbol') continue;
      const inIpam = parseNadIpam(
        typeof input === 'string' ? cfg({ type: 'whereabouts', range: input, exclude: [input] }) : cfg({ type: 'host-local', ranges: [[{ subnet: '10.0.0.0/8', rangeStart: input }]] }),
      );
      if (!inIpam.ok) assertWellFormed(inIpam, input);
    }
    assert.equal(expectOk(parseNadIpam('{"type":"macvlan","__proto__":{"ipam":{"type":"whereabouts","range":"10.0.0.0/8"}}}')).readable, false);
    assertNoPollution();
  });
});
