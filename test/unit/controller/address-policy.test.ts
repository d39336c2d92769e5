import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { OPEN_POLICY, refusedAddress } from '../../../cmd/controller/address-policy.js';
import { parseIp } from '../../../src/annotations/ip.js';
import { parseNadIpam } from '../../../src/annotations/nad-ipam.js';

void describe('address policy: what a pod may not claim', () => {
  const cases: [string, 4 | 6, RegExp | undefined][] = [
    ['10.2.128.11', 4, undefined],
    ['192.168.1.1', 4, undefined],
    ['fd00:2::11', 6, undefined],
    ['2001:db8::1', 6, undefined],
    ['127.0.0.1', 4, /loopback/],
    ['127.255.0.9', 4, /loopback/],
    ['::1', 6, /loopback/],
    ['0.0.0.0', 4, /unspecified/],
    ['::', 6, /unspecified/],
    ['169.254.10.1', 4, /link-local/],
    ['fe80::1', 6, /link-local/],
    ['224.0.0.5', 4, /multicast/],
    ['239.1.1.1', 4, /multicast/],
    ['ff02::1', 6, /multicast/],
    ['255.255.255.255', 4, /broadcast/],
    ['::ffff:10.0.0.1', 6, /IPv4-mapped/],
    ['fe80::1%net1', 6, /zone/],
  ];
  for (const [text, family, why] of cases) {
    void test(`${text}: ${why === undefined ? 'published' : String(why)}`, () => {
      const p = parseIp(text);
      assert.ok(p.ok);
      const r = refusedAddress(p.value.address, family, OPEN_POLICY);
      if (why === undefined) assert.equal(r, undefined);
      else assert.match(r ?? '', why);
    });
  }
  void test("a Node's own address is refused, the same address is fine without that Node", () => {
    assert.match(refusedAddress('10.244.0.1', 4, { nodeAddresses: new Set(['10.244.0.1']) }) ?? '', /Node's own address/);
    assert.equal(refusedAddress('10.244.0.1', 4, OPEN_POLICY), undefined);
  });
  void test("outside the network's readable IPAM range: refused on that network only, naming the NAD and the range", () => {
    const r = parseNadIpam(JSON.stringify({ type: 'macvlan', master: 'eth1', ipam: { type: 'whereabouts', range: '10.2.128.0/24' } }));
    assert.ok(r.ok && r.value.readable);
    const policy = { nodeAddresses: new Set<string>(), ipam: new Map([['ns/wb', r.value]]) };
    assert.equal(refusedAddress('10.2.128.9', 4, policy, 'ns/wb'), undefined);
    assert.equal(refusedAddress('10.9.9.9', 4, policy, 'ns/other'), undefined);
    assert.equal(refusedAddress('10.9.9.9', 4, policy, 'ns/wb'), '10.9.9.9 is outside the IPAM range of NetworkAttachmentDefinition ns/wb (whereabouts 10.2.128.0/24)');
    assert.match(refusedAddress('127.0.0.1', 4, policy, 'ns/wb') ?? '', /loopback/);
  });
  void test('property: private unicast IPv4 (10/8, 192.168/16) and ULA IPv6 are always published', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffff }), fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 7, maxLength: 7 }), (v4, v6) => {
        const a = `10.${(v4 >> 16) & 255}.${(v4 >> 8) & 255}.${v4 & 255}`;
        assert.equal(refusedAddress(a, 4, OPEN_POLICY), undefined);
        const p = parseIp(`fd00:${v6.map((g) => g.toString(16)).join(':')}`);
        assert.ok(p.ok);
        assert.equal(refusedAddress(p.value.address, 6, OPEN_POLICY), undefined);
      }),
    );
  });
  void test('property: every 127/8, 169.254/16 and 224/4 address is refused', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffff }), fc.constantFrom('127', '169.254', '224', '239'), (n, head) => {
        const parts = head.split('.');
        const tail = [(n >> 16) & 255, (n >> 8) & 255, n & 255].slice(parts.length - 1).map(String);
        assert.notEqual(refusedAddress([...parts, ...tail].join('.'), 4, OPEN_POLICY), undefined);
      }),
    );
  });
});
