import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { isIP } from 'node:net';
import fc from 'fast-check';
import { findNetworkStatus, parseNetworkStatus } from '../../../src/annotations/network-status.js';
import { normalizeIPv6, parseIp } from '../../../src/annotations/ip.js';
import { NETWORK_STATUS_ANNOTATION } from '../../../src/keys.js';
import { checkInterfaceName } from '../../../src/annotations/names.js';
import { assertNoPollution, assertWellFormed, expectErr, expectOk, ifname, mutated, networkRef, pathological, RUNS, urlCanonicalIPv6 } from './arbitraries.js';

/** What Multus writes for a pod on kindnet plus one macvlan network (dual stack). */
const MULTUS_SAMPLE = JSON.stringify([
  { name: 'kindnet', interface: 'eth0', ips: ['10.244.1.7', 'fd00:10:244:1::7'], mac: '0a:58:0a:f4:01:07', default: true, dns: {} },
  {
    name: 'default/macvlan-a',
    interface: 'net1',
    ips: ['192.168.50.11', 'FD00:0050:0000:0000:0000:0000:0000:0011'],
    mac: '7a:1c:2b:3d:4e:5f',
    dns: { nameservers: ['10.0.0.10'] },
    'device-info': { type: 'pci', version: '1.1.0', pci: { 'pci-address': '0000:00:1f.0' } },
  },
]);

void describe('parseNetworkStatus: examples', () => {
  void test('Multus sample: default entry kept with bare name, secondary split and normalised', () => {
    assert.deepEqual(expectOk(parseNetworkStatus(MULTUS_SAMPLE)), [
      { name: 'kindnet', interface: 'eth0', ipv4: ['10.244.1.7'], ipv6: ['fd00:10:244:1::7'], mac: '0a:58:0a:f4:01:07', default: true },
      { name: 'default/macvlan-a', namespace: 'default', nad: 'macvlan-a', interface: 'net1', ipv4: ['192.168.50.11'], ipv6: ['fd00:50::11'], mac: '7a:1c:2b:3d:4e:5f', default: false },
    ]);
  });
  void test('prefixes are tolerated and stripped; duplicates after normalisation dropped', () => {
    const [e] = expectOk(parseNetworkStatus('[{"name":"a/b","ips":["10.1.1.5/24","10.1.1.5","fd00::0005/64","FD00::5"]}]'));
    assert.deepEqual(e?.ipv4, ['10.1.1.5']);
    assert.deepEqual(e?.ipv6, ['fd00::5']);
  });
  void test('empty value and empty list: nothing attached', () => {
    assert.deepEqual(expectOk(parseNetworkStatus('')), []);
    assert.deepEqual(expectOk(parseNetworkStatus('[]')), []);
  });
  void test('entry without ips has empty families; missing default is false', () => {
    assert.deepEqual(expectOk(parseNetworkStatus('[{"name":"a/b"}]')), [{ name: 'a/b', namespace: 'a', nad: 'b', ipv4: [], ipv6: [], default: false }]);
  });
  void test('findNetworkStatus matches namespace and NAD name, first one wins, never a bare name', () => {
    const entries = expectOk(
      parseNetworkStatus('[{"name":"b","default":true,"ips":["10.0.0.1"]},{"name":"a/b","interface":"net1"},{"name":"a/b","interface":"net2"},{"name":"x/b","interface":"net3"}]'),
    );
    assert.equal(findNetworkStatus(entries, { namespace: 'a', name: 'b' })?.interface, 'net1');
    assert.equal(findNetworkStatus(entries, { namespace: 'x', name: 'b' })?.interface, 'net3');
    assert.equal(findNetworkStatus(entries, { namespace: 'a', name: 'c' }), undefined);
    assert.equal(findNetworkStatus([], { namespace: 'a', name: 'b' }), undefined);
  });

  const errors: { value: string; reason: RegExp }[] = [
    { value: 'not json', reason: /is not valid JSON/ },
    { value: '{"name":"a/b"}', reason: /is an object, expected a JSON list/ },
    { value: '[{"name":"a/b"},"x"]', reason: /entry 2 is a string, expected an object/ },
    { value: '[{"ips":["10.0.0.1"]}]', reason: /entry 1: the "name" is missing or empty/ },
    { value: '[{"name":5}]', reason: /entry 1: field "name" is a number, expected a string/ },
    { value: '[{"name":"a/b","ips":["10.0.0.1","bogus"]}]', reason: /entry 1 \(name "a\/b"\): the IP "bogus" is not an IPv4 or IPv6 address/ },
    { value: '[{"name":"ok/x"},{"name":"a/b","ips":["fd00::1/129"]}]', reason: /entry 2 \(name "a\/b"\): the IP "fd00::1\/129" has a prefix length "129" that is not a number from 0 to 128/ },
    { value: '[{"name":"a/b","ips":["10.0.0.1/"]}]', reason: /prefix length ""/ },
    { value: '[{"name":"a/b","ips":"10.0.0.1"}]', reason: /field "ips" is a string, expected a list of strings/ },
    { value: '[{"name":"a/b","default":"true"}]', reason: /field "default" is a string, expected true or false/ },
    { value: '[{"name":"a/b","interface":1}]', reason: /field "interface" is a number/ },
    // Tenant input that reaches `ip -batch` as root in the sidecar: the kernel's rule applies.
    { value: '[{"name":"a/b","interface":"net1\\nroute add 203.0.113.0/24 dev lo"}]', reason: /entry 1 \(name "a\/b"\): the "interface" .* is 36 bytes long/ },
    { value: '[{"name":"a/b","interface":"n1\\nflush"}]', reason: /the "interface" "n1\\nflush" contains a line feed|the "interface" .* contains/ },
    { value: '[{"name":"a/b","interface":"net1 up"}]', reason: /the "interface" "net1 up" contains/ },
    { value: '[{"name":"a/b","interface":"../x"}]', reason: /the "interface" "..\/x" contains '\/'|contains .*'\/'/ },
    { value: '[{"name":"a/b","interface":"averyveryverylongname"}]', reason: /the "interface" .* is 21 bytes long, more than 15/ },
    { value: '[{"name":"a/b","interface":""}]', reason: /the "interface" "" is empty/ },
    { value: '[{"name":"a/b","mac":{}}]', reason: /field "mac" is an object/ },
    { value: '[{"name":"a/b/c"}]', reason: /the name "a\/b\/c" has more than one '\/'/ },
    { value: '[{"name":"A/b"}]', reason: /the namespace "A" in the name contains the upper-case letter 'A'/ },
    { value: '[{"name":"a/"}]', reason: /the network name "" in the name is empty/ },
  ];
  for (const c of errors) {
    void test(`error: ${c.value}`, () => {
      const e = expectErr(parseNetworkStatus(c.value));
      assert.equal(e.key, NETWORK_STATUS_ANNOTATION);
      assert.equal(e.value, c.value);
      assert.match(e.reason, c.reason);
      assert.ok(e.fix.length > 20, e.fix);
    });
  }
});

void describe('IP normalisation', () => {
  void test('RFC 5952 examples', () => {
    const cases: [string, string][] = [
      ['2001:0DB8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
      ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'],
      ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'],
      ['::', '::'],
      ['::1', '::1'],
      ['1::', '1::'],
      ['::ffff:192.0.2.1', '::ffff:c000:201'],
      ['fe80::1%eth0', 'fe80::1%eth0'],
    ];
    for (const [input, want] of cases) assert.equal(normalizeIPv6(input), want, input);
  });
  void test('agrees with the WHATWG URL serialiser on any generated IPv6 address, and is idempotent', () => {
    fc.assert(
      fc.property(fc.ipV6(), (a) => {
        const n = normalizeIPv6(a);
        assert.equal(n, urlCanonicalIPv6(a), a);
        assert.equal(normalizeIPv6(n), n);
        assert.equal(isIP(n), 6);
      }),
      RUNS,
    );
  });
  void test('parseIp never throws on random text and only accepts what node:net accepts', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }), (s) => {
        const r = parseIp(s);
        if (r.ok) assert.notEqual(isIP(r.value.address.split('%')[0] ?? ''), 0);
        else assert.ok(r.error.length > 0);
      }),
      RUNS,
    );
  });
});

void describe('parseNetworkStatus: properties', () => {
  const ipEntry = fc.record({
    ref: networkRef,
    iface: ifname,
    v4: fc.array(fc.tuple(fc.ipV4(), fc.option(fc.integer({ min: 0, max: 32 }), { nil: undefined })), { maxLength: 3 }),
    v6: fc.array(fc.tuple(fc.ipV6(), fc.option(fc.integer({ min: 0, max: 128 }), { nil: undefined })), { maxLength: 3 }),
    isDefault: fc.boolean(),
  });

  void test('generated status round-trips: families split, prefixes stripped, IPv6 canonical, order kept', () => {
    fc.assert(
      fc.property(fc.array(ipEntry, { maxLength: 4 }), fc.boolean(), (entries, v6First) => {
        const text = JSON.stringify(
          entries.map((e) => {
            const v4 = e.v4.map(([a, p]) => (p === undefined ? a : `${a}/${p}`));
            const v6 = e.v6.map(([a, p]) => (p === undefined ? a : `${a}/${p}`));
            return { name: `${e.ref.namespace}/${e.ref.name}`, interface: e.iface, ips: v6First ? [...v6, ...v4] : [...v4, ...v6], default: e.isDefault };
          }),
        );
        const got = expectOk(parseNetworkStatus(text));
        assert.equal(got.length, entries.length);
        got.forEach((g, i) => {
          const e = entries[i];
          assert.ok(e);
          assert.equal(g.namespace, e.ref.namespace);
          assert.equal(g.nad, e.ref.name);
          assert.equal(g.interface, e.iface);
          assert.equal(g.default, e.isDefault);
          assert.deepEqual(g.ipv4, [...new Set(e.v4.map(([a]) => a))]);
          assert.deepEqual(g.ipv6, [...new Set(e.v6.map(([a]) => urlCanonicalIPv6(a)))]);
          assert.equal(findNetworkStatus(got, e.ref)?.nad, e.ref.name);
        });
      }),
      RUNS,
    );
  });

  void test('random strings, random JSON and mutated status never throw', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 300, unit: 'binary' }), fc.json({ maxDepth: 4 }), mutated(fc.constant(MULTUS_SAMPLE))), (s) => {
        assertWellFormed(parseNetworkStatus(s), s);
      }),
      RUNS,
    );
    assertNoPollution();
  });

  void test('an interface name the kernel would refuse is refused, with the entry named; a valid one is kept', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 24, unit: 'binary' }), (iface) => {
        const text = JSON.stringify([{ name: 'a/b', interface: iface, ips: ['10.1.1.5'] }]);
        const r = parseNetworkStatus(text);
        if (checkInterfaceName(iface) === undefined) assert.equal(expectOk(r)[0]?.interface, iface);
        else assert.match(expectErr(r).reason, /entry 1 \(name "a\/b"\): the "interface" /);
      }),
      RUNS,
    );
  });

  void test('pathological inputs never throw', () => {
    for (const v of pathological) assertWellFormed(parseNetworkStatus(v as string), v);
    assertNoPollution();
  });
});
