import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { addressFromRange, nodeAddressesFor, parseAddressRanges, parseNodeAddresses } from '../../../cmd/node-agent/addresses.js';
import { bigIntToIp, ipToBigInt } from '../../../src/annotations/ip.js';
import { formatInputError } from '../../../src/result.js';
import { assertWellFormed, expectErr, expectOk, mutated, pathological, RUNS } from '../annotations/arbitraries.js';

const NET = { namespace: 'demo', name: 'net-a' };

void describe('node-addresses (Node annotation)', () => {
  void test('per-network addresses, one per family, normalised', () => {
    const m = expectOk(parseNodeAddresses('demo/net-a=192.168.101.250/24, FD00:101::00FA/64; other/b=10.20.0.5/16;'));
    assert.deepEqual(m.get('demo/net-a'), [
      { family: 4, address: '192.168.101.250', prefix: 24 },
      { family: 6, address: 'fd00:101::fa', prefix: 64 },
    ]);
    assert.deepEqual(m.get('other/b'), [{ family: 4, address: '10.20.0.5', prefix: 16 }]);
  });
  void test('errors name the annotation, the value and the fix', () => {
    const e = expectErr(parseNodeAddresses('net-a=192.168.101.250/24'));
    assert.equal(e.key, 'annotation multus-proxy.k8s.cni.cncf.io/node-addresses');
    assert.match(e.reason, /without its namespace/);
    assert.match(
      formatInputError('Node worker-1', e),
      /^Node worker-1: annotation multus-proxy.k8s.cni.cncf.io\/node-addresses "net-a=192.168.101.250\/24": .*; write "<namespace>\/<nad>=<ip>\/<prefix>/,
    );
    assert.match(expectErr(parseNodeAddresses('demo/net-a=192.168.101.250')).reason, /no prefix length/);
    assert.match(expectErr(parseNodeAddresses('demo/net-a=192.168.101.0/24')).reason, /network address/);
    assert.match(expectErr(parseNodeAddresses('demo/net-a=192.168.101.255/24')).reason, /broadcast address/);
    assert.match(expectErr(parseNodeAddresses('demo/net-a=10.0.0.1/8,10.0.0.2/8')).reason, /two IPv4 addresses/);
    assert.match(expectErr(parseNodeAddresses('demo/a=10.0.0.1/8;demo/a=10.0.0.2/8')).reason, /listed twice/);
    assert.match(expectErr(parseNodeAddresses('demo/a 10.0.0.1/8')).reason, /no "="/);
    assert.match(expectErr(parseNodeAddresses('demo/a=fe80::1%eth0/64')).reason, /not an IPv4 or IPv6|zone/);
    assert.match(expectErr(parseNodeAddresses(';demo/a=10.0.0.1/8')).reason, /entry 1 is empty/);
  });
});

void describe('node-address-range (NAD annotation)', () => {
  void test('ranges per family', () => {
    const r = expectOk(parseAddressRanges('192.168.101.200-192.168.101.231/24, fd00:101::200-fd00:101::21f/64'));
    assert.equal(r.length, 2);
    assert.equal(r[0]?.last !== undefined && r[0].first !== undefined ? r[0].last - r[0].first : -1n, 31n);
    assert.equal(r[1]?.family, 6);
  });
  void test('worked example from docs/node-agent.md: nodes 10.0.0.11 and 10.0.0.12', () => {
    const [v4, v6] = expectOk(parseAddressRanges('192.168.101.200-192.168.101.231/24, fd00:101::200-fd00:101::21f/64'));
    assert.ok(v4 !== undefined && v6 !== undefined);
    // 11 mod 32 = 11 -> .211; 12 -> .212; the IPv6 range uses the IPv4 InternalIP when the node has no IPv6 one.
    assert.deepEqual(addressFromRange(v4, ['10.0.0.11']), { family: 4, address: '192.168.101.211', prefix: 24 });
    assert.deepEqual(addressFromRange(v4, ['10.0.0.12']), { family: 4, address: '192.168.101.212', prefix: 24 });
    assert.deepEqual(addressFromRange(v6, ['10.0.0.12']), { family: 6, address: 'fd00:101::20c', prefix: 64 });
    assert.deepEqual(addressFromRange(v6, ['10.0.0.12', 'fd00:10::1f']), { family: 6, address: 'fd00:101::21f', prefix: 64 });
    assert.equal(addressFromRange(v4, []), undefined);
  });
  void test('errors', () => {
    assert.match(expectErr(parseAddressRanges('192.168.101.231-192.168.101.200/24')).reason, /starts after it ends/);
    assert.match(expectErr(parseAddressRanges('192.168.101.200-192.168.102.10/24')).reason, /not in one \/24 subnet/);
    assert.match(expectErr(parseAddressRanges('10.0.0.1-10.2.0.1/8')).reason, /more than 65536/);
    assert.match(expectErr(parseAddressRanges('192.168.101.0-192.168.101.10/24')).reason, /network address/);
    assert.match(expectErr(parseAddressRanges('10.0.0.1-10.0.0.2/8,10.0.0.3-10.0.0.4/8')).reason, /two IPv4 ranges/);
    assert.match(expectErr(parseAddressRanges('10.0.0.1/8')).reason, /not "<first>-<last>\/<prefix>"/);
    assert.match(expectErr(parseAddressRanges('10.0.0.1-fd00::1/24')).reason, /mixes/);
  });
  void test('the Node annotation wins over the range; neither: none', () => {
    const both = nodeAddressesFor({ network: NET, nodeAnnotation: 'demo/net-a=192.168.101.9/24', rangeAnnotation: '192.168.101.200-192.168.101.231/24', nodeInternalIPs: ['10.0.0.11'] });
    assert.ok(both.ok && both.value.from === 'node' && both.value.addresses[0]?.address === '192.168.101.9');
    const other = nodeAddressesFor({ network: NET, nodeAnnotation: 'demo/other=192.168.101.9/24', rangeAnnotation: '192.168.101.200-192.168.101.231/24', nodeInternalIPs: ['10.0.0.11'] });
    assert.ok(other.ok && other.value.from === 'range' && other.value.addresses[0]?.address === '192.168.101.211');
    const none = nodeAddressesFor({ network: NET, nodeInternalIPs: [] });
    assert.ok(none.ok && none.value.from === 'none');
    const bad = nodeAddressesFor({ network: NET, rangeAnnotation: 'nope', nodeInternalIPs: [] });
    assert.ok(!bad.ok && bad.error.object === 'nad');
  });
});

void describe('addresses: properties', () => {
  void test('ip <-> bigint round trip', () => {
    fc.assert(
      fc.property(fc.ipV4(), (ip) => assert.equal(bigIntToIp(ipToBigInt(ip, 4), 4), ip)),
      RUNS,
    );
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 128n) - 1n }), (n) => assert.equal(ipToBigInt(bigIntToIp(n, 6), 6), n)),
      RUNS,
    );
  });
  void test('a range address is always inside the range, and distinct nodes of one /24 get distinct addresses in a 256-range', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 254 }), fc.integer({ min: 1, max: 254 }), fc.ipV4(), (a, b, other) => {
        const [r] = expectOk(parseAddressRanges('172.16.0.1-172.16.1.0/23'));
        assert.ok(r !== undefined);
        const x = addressFromRange(r, [`10.1.2.${a}`]);
        const y = addressFromRange(r, [`10.1.2.${b}`]);
        if (a !== b) assert.notEqual(x?.address, y?.address);
        const z = addressFromRange(r, [other]);
        assert.ok(z !== undefined && ipToBigInt(z.address, 4) >= r.first && ipToBigInt(z.address, 4) <= r.last);
      }),
      RUNS,
    );
  });
  void test('mutated and pathological annotations never throw', () => {
    const valid = fc.constantFrom('demo/net-a=192.168.101.250/24,fd00:101::fa/64; other/b=10.20.0.5/16', '192.168.101.200-192.168.101.231/24, fd00:101::200-fd00:101::21f/64');
    fc.assert(
      fc.property(mutated(valid), (text) => {
        const a = parseNodeAddresses(text);
        if (!a.ok) assertWellFormed(a, text);
        const b = parseAddressRanges(text);
        if (!b.ok) assertWellFormed(b, text);
      }),
      RUNS,
    );
    for (const p of pathological) {
      if (typeof p !== 'string') continue;
      const a = parseNodeAddresses(p);
      if (!a.ok) assertWellFormed(a, p);
      const b = parseAddressRanges(p);
      if (!b.ok) assertWellFormed(b, p);
    }
  });
});
