import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parseNetworks, type NetworkSelection } from '../../../src/annotations/networks.js';
import { NETWORKS_ANNOTATION } from '../../../src/keys.js';
import { formatInputError } from '../../../src/result.js';
import { assertNoPollution, assertWellFormed, blanks, dnsLabel, expectErr, expectOk, ifname, mutated, networkRef, pathological, RUNS } from './arbitraries.js';

/** Test-side writer of the short form, independent of the parser. */
function shortForm(sels: readonly NetworkSelection[]): string {
  return sels.map((s) => `${s.namespace}/${s.name}${s.interface === undefined ? '' : `@${s.interface}`}`).join(',');
}

const selection: fc.Arbitrary<NetworkSelection> = fc.tuple(networkRef, fc.option(ifname, { nil: undefined })).map(([ref, i]) => (i === undefined ? { ...ref } : { ...ref, interface: i }));

const mac = fc.array(fc.integer({ min: 0, max: 255 }), { minLength: 6, maxLength: 6 }).map((b) => b.map((x) => x.toString(16).padStart(2, '0')).join(':'));
const ipText = fc.oneof(
  fc.ipV4(),
  fc.ipV6(),
  fc.tuple(fc.ipV4(), fc.integer({ min: 0, max: 32 })).map(([a, p]) => `${a}/${p}`),
  fc.tuple(fc.ipV6(), fc.integer({ min: 0, max: 128 })).map(([a, p]) => `${a}/${p}`),
);
const jsonSelection: fc.Arbitrary<NetworkSelection> = fc
  .tuple(selection, fc.option(fc.array(ipText, { maxLength: 3 }), { nil: undefined }), fc.option(mac, { nil: undefined }))
  .map(([s, ips, m]) => ({ ...s, ...(ips === undefined ? {} : { ips }), ...(m === undefined ? {} : { mac: m }) }));

void describe('parseNetworks: short form', () => {
  void test('bare names resolve to the pod namespace; ns/name and @ifname are kept', () => {
    assert.deepEqual(expectOk(parseNetworks('net-a, other/net-b@net2 ,net-c@eth1', 'pods')), [
      { namespace: 'pods', name: 'net-a' },
      { namespace: 'other', name: 'net-b', interface: 'net2' },
      { namespace: 'pods', name: 'net-c', interface: 'eth1' },
    ]);
  });
  void test('the same network twice is kept twice (two interfaces)', () => {
    assert.equal(expectOk(parseNetworks('a@net1,a@net2', 'ns')).length, 2);
  });
  void test('empty and blank values mean no networks', () => {
    assert.deepEqual(expectOk(parseNetworks('', 'ns')), []);
    assert.deepEqual(expectOk(parseNetworks('  \n', 'ns')), []);
  });
  const errors: { value: string; reason: RegExp; fix: RegExp }[] = [
    { value: 'a,', reason: /item 2 is empty/, fix: /remove the extra comma/ },
    { value: 'a@@b', reason: /item 1 \("a@@b"\) has more than one '@'/, fix: /\[namespace\/\]name\[@interface\]/ },
    { value: 'a@', reason: /interface name "" is empty/, fix: /Linux interface name/ },
    { value: 'a@averyverylongname', reason: /interface name "averyverylongname" is 17 bytes long, more than 15/, fix: /1 to 15 characters/ },
    { value: 'a@net/1', reason: /interface name "net\/1" contains '\/'/, fix: /without '\/'/ },
    { value: 'a@net 1', reason: /interface name "net 1" contains a space/, fix: /whitespace/ },
    { value: 'a@..', reason: /interface name "\.\." is "\.\."/, fix: /not "\." or "\.\."/ },
    { value: 'ok,Bad', reason: /item 2 \("Bad"\): the network name "Bad" contains the upper-case letter 'B'/, fix: /NetworkAttachmentDefinition name/ },
    { value: 'NS/a', reason: /the namespace "NS"/, fix: /a namespace is/ },
    { value: 'a/b/c@net1', reason: /more than one '\/'/, fix: /<namespace>\/<name>/ },
    { value: '{"name":"a"}', reason: /single JSON object, expected a JSON list/, fix: /wrap it in \[ \]/ },
  ];
  for (const c of errors) {
    void test(`error: ${JSON.stringify(c.value)}`, () => {
      const e = expectErr(parseNetworks(c.value, 'ns'));
      assert.equal(e.key, NETWORKS_ANNOTATION);
      assert.match(e.reason, c.reason);
      assert.match(e.fix, c.fix);
      assert.ok(formatInputError('Pod ns/p', e).includes(JSON.stringify(c.value)));
    });
  }
});

void describe('parseNetworks: JSON form', () => {
  void test('full entry, namespace defaulting, unknown fields ignored', () => {
    const value = JSON.stringify([
      { name: 'net-a', namespace: 'other', interface: 'net1', ips: ['10.1.1.5/24', 'fd00::5'], mac: '02:00:5e:10:00:01', 'default-route': ['10.1.1.1'], 'cni-args': { x: 1 } },
      { name: 'net-b' },
    ]);
    assert.deepEqual(expectOk(parseNetworks(`  ${value}\n`, 'pods')), [
      { namespace: 'other', name: 'net-a', interface: 'net1', ips: ['10.1.1.5/24', 'fd00::5'], mac: '02:00:5e:10:00:01' },
      { namespace: 'pods', name: 'net-b' },
    ]);
  });
  void test('null optional fields count as absent', () => {
    assert.deepEqual(expectOk(parseNetworks('[{"name":"a","namespace":null,"interface":null,"ips":null,"mac":null}]', 'ns')), [{ namespace: 'ns', name: 'a' }]);
  });
  void test('empty list is no networks', () => {
    assert.deepEqual(expectOk(parseNetworks('[]', 'ns')), []);
  });
  const errors: { value: string; reason: RegExp; fix: RegExp }[] = [
    { value: '[{"name":"a"', reason: /is not valid JSON/, fix: /JSON list of objects/ },
    { value: '[{"name":"a"},]', reason: /is not valid JSON/, fix: /JSON list of objects/ },
    { value: '[{"namespace":"x"}]', reason: /entry 1 has no "name"/, fix: /give every entry/ },
    { value: '[{"name":""}]', reason: /entry 1 \(name ""\) has no "name"/, fix: /give every entry/ },
    { value: '[{"name":"a"},{"name":7}]', reason: /entry 2: field "name" is a number, expected a string/, fix: /string fields/ },
    { value: '[{"name":"a","namespace":["x"]}]', reason: /entry 1 \(name "a"\): field "namespace" is a list, expected a string/, fix: /string fields/ },
    { value: '[{"name":"a","namespace":""}]', reason: /namespace "" is empty/, fix: /a namespace is/ },
    { value: '[{"name":"x/a"}]', reason: /the name "x\/a" contains '\/'/, fix: /"namespace" field/ },
    { value: '[{"name":"A_b"}]', reason: /network name "A_b" contains the upper-case letter 'A'/, fix: /NetworkAttachmentDefinition name/ },
    { value: '[{"name":"a","interface":"a very long name"}]', reason: /entry 1 \(name "a"\): the interface name "a very long name" is 16 bytes long/, fix: /Linux interface name/ },
    { value: '[{"name":"a","interface":5}]', reason: /field "interface" is a number/, fix: /string fields/ },
    { value: '[{"name":"a","ips":"10.0.0.1"}]', reason: /field "ips" is a string, expected a list of strings/, fix: /list of strings/ },
    { value: '[{"name":"a","ips":["10.0.0.1",3]}]', reason: /field "ips" item 2 is a number/, fix: /list of strings/ },
    { value: '[{"name":"a","ips":["10.0.0.300"]}]', reason: /entry 1 \(name "a"\): the IP "10.0.0.300" is not an IPv4 or IPv6 address/, fix: /IPv4 or IPv6/ },
    { value: '[{"name":"a","ips":["10.0.0.x/24"]}]', reason: /the IP "10.0.0.x\/24" has the address part "10.0.0.x", which is not/, fix: /IPv4 or IPv6/ },
    { value: '[{"name":"a","ips":["10.0.0.1/33"]}]', reason: /prefix length "33" that is not a number from 0 to 32/, fix: /IPv4 or IPv6/ },
    { value: '[{"name":"a","mac":"02:00:5e:10:00"}]', reason: /MAC address "02:00:5e:10:00" is not valid/, fix: /six hex pairs/ },
    { value: '[{"name":"a","mac":"02:00-5e:10:00:01"}]', reason: /MAC address/, fix: /six hex pairs/ },
    { value: '["a"]', reason: /entry 1 is a string, expected an object/, fix: /as an object/ },
    { value: '[null]', reason: /entry 1 is null, expected an object/, fix: /as an object/ },
    { value: '[[{"name":"a"}]]', reason: /entry 1 is a list, expected an object/, fix: /as an object/ },
    { value: '[{"__proto__":{"name":"a"}}]', reason: /entry 1 has no "name"/, fix: /give every entry/ },
  ];
  for (const c of errors) {
    void test(`error: ${c.value}`, () => {
      const e = expectErr(parseNetworks(c.value, 'ns'));
      assert.equal(e.key, NETWORKS_ANNOTATION);
      assert.equal(e.value, c.value);
      assert.match(e.reason, c.reason);
      assert.match(e.fix, c.fix);
      assertNoPollution();
    });
  }
  void test('accepted MAC spellings match Go net.ParseMAC forms', () => {
    for (const m of ['02:00:5e:10:00:01', '02-00-5E-10-00-01', '0200.5e10.0001', '02:00:5e:10:00:00:00:01']) {
      expectOk(parseNetworks(JSON.stringify([{ name: 'a', mac: m }]), 'ns'));
    }
  });
});

void describe('parseNetworks: properties', () => {
  void test('short form round-trips (explicit namespaces), with blanks around items', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(selection, blanks, blanks), { minLength: 1, maxLength: 6 }), dnsLabel, (items, podNs) => {
        const text = items.map(([s, a, b]) => `${a}${shortForm([s])}${b}`).join(',');
        assert.deepEqual(
          expectOk(parseNetworks(text, podNs)),
          items.map(([s]) => s),
        );
      }),
      RUNS,
    );
  });

  void test('short form: a bare name means the pod namespace', () => {
    fc.assert(
      fc.property(selection, dnsLabel, (s, podNs) => {
        const text = `${s.name}${s.interface === undefined ? '' : `@${s.interface}`}`;
        assert.deepEqual(expectOk(parseNetworks(text, podNs)), [{ ...s, namespace: podNs }]);
      }),
      RUNS,
    );
  });

  void test('JSON form round-trips; a missing namespace means the pod namespace', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(jsonSelection, fc.boolean()), { maxLength: 5 }), dnsLabel, (items, podNs) => {
        const text = JSON.stringify(items.map(([s, omitNs]) => (omitNs ? { ...s, namespace: undefined } : s)));
        assert.deepEqual(
          expectOk(parseNetworks(text, podNs)),
          items.map(([s, omitNs]) => (omitNs ? { ...s, namespace: podNs } : s)),
        );
      }),
      RUNS,
    );
  });

  void test('random strings and random JSON never throw', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 300, unit: 'binary' }), fc.json({ maxDepth: 4 })), (s) => {
        assertWellFormed(parseNetworks(s, 'ns'), s);
      }),
      RUNS,
    );
    assertNoPollution();
  });

  void test('mutated valid values (both forms) never throw', () => {
    const valid = fc.oneof(
      fc.array(selection, { minLength: 1, maxLength: 4 }).map(shortForm),
      fc.array(jsonSelection, { minLength: 1, maxLength: 3 }).map((s) => JSON.stringify(s)),
    );
    fc.assert(
      fc.property(mutated(valid), (s) => {
        assertWellFormed(parseNetworks(s, 'ns'), s);
      }),
      RUNS,
    );
    assertNoPollution();
  });

  void test('pathological inputs never throw', () => {
    for (const v of pathological) assertWellFormed(parseNetworks(v as string, 'ns'), v);
    assertNoPollution();
  });
});
