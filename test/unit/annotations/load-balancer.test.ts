/**
 * src/annotations/load-balancer.ts: a LoadBalancer Service's ingress IPs and source ranges, read
 * where they enter. Examples, then properties against independent models (node:net's BlockList for
 * range membership and special addresses) and arbitrary input that must never throw.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { BlockList, isIP } from 'node:net';
import fc from 'fast-check';
import { MAX_INGRESS_IPS, parseSourceRange, rangesOfFamily, readLoadBalancer, sourceAllowed, type SourceRange } from '../../../src/annotations/load-balancer.js';
import { parseIp } from '../../../src/annotations/ip.js';
import type { V1Service } from '../../../src/kube/types.js';
import { RUNS } from './arbitraries.js';

const lb = (ingress: unknown[], ranges?: unknown[]): V1Service => ({
  metadata: { namespace: 'app', name: 'lb' },
  spec: { type: 'LoadBalancer', ...(ranges !== undefined ? { loadBalancerSourceRanges: ranges as string[] } : {}) },
  status: { loadBalancer: { ingress: ingress as NonNullable<NonNullable<V1Service['status']>['loadBalancer']>['ingress'] } },
});

void describe('readLoadBalancer: examples', () => {
  void test('not a LoadBalancer: nothing, whatever its status says', () => {
    const s = lb([{ ip: '192.0.2.1' }]);
    s.spec!.type = 'NodePort';
    assert.deepEqual(readLoadBalancer(s), { vips: [], proxied: [], sourceRanges: undefined, problems: [] });
  });
  void test('VIP and unset ipMode served, Proxy kept apart, duplicates once, IPv6 normalised', () => {
    const v = readLoadBalancer(lb([{ ip: '192.0.2.1' }, { ip: '192.0.2.2', ipMode: 'Proxy' }, { ip: '192.0.2.1', ipMode: 'VIP' }, { ip: '2001:DB8:0:0::1' }, { hostname: 'x.example' }]));
    assert.deepEqual(v.vips, [
      { address: '192.0.2.1', family: 4 },
      { address: '2001:db8::1', family: 6 },
    ]);
    assert.deepEqual(v.proxied, ['192.0.2.2']);
    assert.deepEqual(v.problems, []);
  });
  void test('past MAX_INGRESS_IPS: the rest refused with the fix', () => {
    const many = Array.from({ length: MAX_INGRESS_IPS + 3 }, (_, i) => ({ ip: `192.0.2.${i + 1}` }));
    const v = readLoadBalancer(lb(many));
    assert.equal(v.vips.length, MAX_INGRESS_IPS);
    assert.equal(v.problems.length, 3);
    assert.match(v.problems[0]?.fix ?? '', /fewer addresses/);
  });
  void test('source ranges: trimmed, masked, deduplicated; a bad one named and dropped (never "every source")', () => {
    const v = readLoadBalancer(lb([], [' 10.1.2.3/8', '10.0.0.0/8', '2001:db8::1/32', 'bogus', '10.0.0.0/33']));
    assert.deepEqual(
      v.sourceRanges?.map((r) => r.cidr),
      ['10.0.0.0/8', '2001:db8::/32'],
    );
    assert.deepEqual(
      v.problems.map((p) => [p.key, p.value]),
      [
        ['spec.loadBalancerSourceRanges[3]', 'bogus'],
        ['spec.loadBalancerSourceRanges[4]', '10.0.0.0/33'],
      ],
    );
    assert.deepEqual(rangesOfFamily(v, 4), ['10.0.0.0/8']);
    assert.deepEqual(rangesOfFamily(readLoadBalancer(lb([], ['bogus'])), 4), [], 'only bad ranges: none admitted');
    assert.equal(rangesOfFamily(readLoadBalancer(lb([])), 4), undefined, 'no ranges: every source');
  });
  void test('a family the Service has no cluster IP of: refused naming both and the fix; dual-stack serves both', () => {
    const single = lb([{ ip: '2001:db8::1' }, { ip: '192.0.2.1' }]);
    single.spec = { ...single.spec, clusterIP: '10.96.0.9', clusterIPs: ['10.96.0.9'] };
    const v = readLoadBalancer(single);
    assert.deepEqual(v.vips, [{ address: '192.0.2.1', family: 4 }]);
    assert.deepEqual(
      v.problems.map((p) => [p.key, p.value]),
      [['status.loadBalancer.ingress[0].ip', '2001:db8::1']],
    );
    assert.match(v.problems[0]?.reason ?? '', /is an IPv6 address but the Service has only IPv4 cluster IPs \(spec\.ipFamilies\): it is not served/);
    assert.match(v.problems[0]?.fix ?? '', /ipFamilyPolicy: PreferDualStack or RequireDualStack/);
    const dual = lb([{ ip: '2001:db8::1' }, { ip: '192.0.2.1' }]);
    dual.spec = { ...dual.spec, clusterIPs: ['10.96.0.9', 'fd00:96::9'] };
    assert.equal(readLoadBalancer(dual).vips.length, 2);
  });
  void test("the reader's own addresses are refused", () => {
    const v = readLoadBalancer(lb([{ ip: '10.0.0.11' }, { ip: 'fd00::b' }]), new Set(['10.0.0.11', 'fd00::b']));
    assert.deepEqual(v.vips, []);
    assert.equal(v.problems.length, 2);
  });
});

/** A source range from an address and a prefix, written with host bits possibly set. */
const range4 = fc.tuple(fc.ipV4(), fc.integer({ min: 0, max: 32 })).map(([a, p]) => `${a}/${p}`);
const range6 = fc.tuple(fc.ipV6(), fc.integer({ min: 0, max: 128 })).map(([a, p]) => `${a}/${p}`);

void describe('load-balancer: properties', () => {
  void test('sourceAllowed agrees with node:net BlockList for any ranges and address', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(range4, range6), { maxLength: 5 }), fc.oneof(fc.ipV4(), fc.ipV6()), (texts, addr) => {
        const ranges = texts.map(parseSourceRange).filter((r): r is SourceRange => typeof r !== 'string');
        assert.equal(ranges.length, texts.length, 'generated ranges parse');
        const p = parseIp(addr);
        assert.ok(p.ok);
        // The model: one BlockList per written range (host bits as written), of the address's own family only
        // (a BlockList would also match IPv4 against IPv4-mapped IPv6 subnets).
        const want = texts.some((t) => {
          const [a = '', pre = ''] = t.split('/');
          if (isIP(a) !== p.value.family) return false;
          const b = new BlockList();
          b.addSubnet(a, Number(pre), p.value.family === 4 ? 'ipv4' : 'ipv6');
          return b.check(addr, p.value.family === 4 ? 'ipv4' : 'ipv6');
        });
        assert.equal(sourceAllowed(ranges, p.value.address, p.value.family), want);
      }),
      RUNS,
    );
  });
  void test('a parsed range is canonical: parsing its text again gives itself', () => {
    fc.assert(
      fc.property(fc.oneof(range4, range6), (t) => {
        const r = parseSourceRange(t);
        assert.ok(typeof r !== 'string');
        const again = parseSourceRange(r.cidr);
        assert.ok(typeof again !== 'string');
        assert.equal(again.cidr, r.cidr);
      }),
      RUNS,
    );
  });
  void test('arbitrary status and ranges: never throws; every served VIP is a plain unicast address outside `own`; every problem names its field', () => {
    const entry = fc.record(
      {
        ip: fc.option(fc.oneof(fc.ipV4(), fc.ipV6(), fc.string(), fc.constantFrom('127.0.0.1', '::1', 'fe80::1%eth0', '224.1.1.1', '0.0.0.0', '::ffff:1.2.3.4', '10.0.0.1/8')), { nil: undefined }),
        ipMode: fc.option(fc.constantFrom('VIP', 'Proxy', 'vip', ''), { nil: undefined }),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(
        fc.array(entry, { maxLength: 40 }),
        fc.option(fc.array(fc.oneof(range4, range6, fc.string()), { maxLength: 6 }), { nil: undefined }),
        fc.array(fc.ipV4(), { maxLength: 3 }),
        (ingress, ranges, ownList) => {
          const own = new Set(ownList);
          const v = readLoadBalancer(lb(ingress, ranges), own);
          assert.ok(v.vips.length + v.proxied.length <= MAX_INGRESS_IPS);
          for (const vip of v.vips) {
            const p = parseIp(vip.address);
            assert.ok(p.ok && p.value.prefix === undefined && p.value.family === vip.family && p.value.address === vip.address);
            assert.ok(!own.has(vip.address));
            assert.ok(!/^(127\.|0\.|169\.254\.|22[4-9]\.|23\d\.|::1$|fe[89ab][0-9a-f]:|ff[0-9a-f]{2}:|::ffff:)/.test(vip.address), vip.address);
          }
          for (const e of v.problems) assert.match(e.key, /^(status\.loadBalancer\.ingress\[\d+\]\.(ip|ipMode)|spec\.loadBalancerSourceRanges\[\d+\])$/);
          if (ranges !== undefined && ranges.length > 0) assert.ok(v.sourceRanges !== undefined, 'listed ranges never become "every source"');
        },
      ),
      RUNS,
    );
  });
});
