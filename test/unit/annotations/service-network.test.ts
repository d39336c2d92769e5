import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { formatServiceNetwork, networkKey, parseServiceNetwork, type NetworkRef } from '../../../src/annotations/service-network.js';
import { SERVICE_NETWORK_ANNOTATION } from '../../../src/keys.js';
import { formatInputError } from '../../../src/result.js';
import { assertWellFormed, blanks, dnsLabel, expectErr, expectOk, mutated, networkRef, pathological, RUNS, shortLabel } from './arbitraries.js';

void describe('parseServiceNetwork: syntax', () => {
  void test('bare name resolves to the default namespace', () => {
    assert.deepEqual(expectOk(parseServiceNetwork('net-a', 'team')), [{ namespace: 'team', name: 'net-a' }]);
  });
  void test('namespace/name keeps the explicit namespace', () => {
    assert.deepEqual(expectOk(parseServiceNetwork('other/net-a', 'team')), [{ namespace: 'other', name: 'net-a' }]);
  });
  void test('comma list with blanks around items, order kept', () => {
    assert.deepEqual(expectOk(parseServiceNetwork('  b , x/a,\tc  ', 'ns')), [
      { namespace: 'ns', name: 'b' },
      { namespace: 'x', name: 'a' },
      { namespace: 'ns', name: 'c' },
    ]);
  });
  void test('duplicates are dropped, first occurrence kept, bare and explicit spellings count as one', () => {
    assert.deepEqual(expectOk(parseServiceNetwork('a,ns/a,b,a', 'ns')), [
      { namespace: 'ns', name: 'a' },
      { namespace: 'ns', name: 'b' },
    ]);
  });
  void test('a NAD name may be a dotted subdomain up to 253 characters', () => {
    const long = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`;
    assert.equal(long.length, 253);
    assert.deepEqual(expectOk(parseServiceNetwork(`ns/${long}`, 'x')), [{ namespace: 'ns', name: long }]);
    const e = expectErr(parseServiceNetwork(`ns/${long}e`, 'x'));
    assert.match(e.reason, /254 characters long, more than 253/);
  });
  void test('the key parameter names the annotation in errors; default is the service-network annotation', () => {
    assert.equal(expectErr(parseServiceNetwork('', 'ns')).key, SERVICE_NETWORK_ANNOTATION);
    assert.equal(expectErr(parseServiceNetwork('', 'ns', 'spec.networks')).key, 'spec.networks');
  });
  void test('networkKey and formatServiceNetwork write the explicit form', () => {
    assert.equal(networkKey({ namespace: 'a', name: 'b' }), 'a/b');
    assert.equal(
      formatServiceNetwork([
        { namespace: 'a', name: 'b' },
        { namespace: 'c', name: 'd.e' },
      ]),
      'a/b,c/d.e',
    );
    assert.equal(formatServiceNetwork([]), '');
  });
});

void describe('parseServiceNetwork: errors name the bad part and a fix', () => {
  const cases: { value: string; ns?: string; reason: RegExp; fix: RegExp }[] = [
    { value: '', reason: /is empty/, fix: /at least one/ },
    { value: '   ', reason: /is empty/, fix: /at least one/ },
    { value: 'a,', reason: /item 2 of 2 is empty/, fix: /remove the extra comma/ },
    { value: ',a', reason: /item 1 of 2 is empty/, fix: /remove the extra comma/ },
    { value: 'a,,b', reason: /item 2 of 3 is empty/, fix: /remove the extra comma/ },
    { value: 'a/b/c', reason: /item 1 \("a\/b\/c"\) has more than one '\/'/, fix: /<namespace>\/<name>/ },
    { value: '/net', reason: /empty namespace/, fix: /namespace before '\/'/ },
    { value: 'ns/', reason: /network name "" is empty/, fix: /NetworkAttachmentDefinition name is/ },
    { value: 'Net-A', reason: /network name "Net-A" contains the upper-case letter 'N' at position 1/, fix: /lower-case/ },
    { value: 'ok,net_a', reason: /item 2 of 2 \("net_a"\): the network name "net_a" contains '_' at position 4/, fix: /lower-case/ },
    { value: '-net', reason: /starts with '-'/, fix: /starting and ending/ },
    { value: 'net.', reason: /empty part between dots/, fix: /dot-separated/ },
    { value: 'Team/net', reason: /the namespace "Team" contains the upper-case letter 'T'/, fix: /a namespace is at most 63/ },
    { value: 'a.b/net', reason: /the namespace "a.b" contains '.'/, fix: /a namespace is/ },
    { value: `${'n'.repeat(64)}/net`, reason: /namespace "n{64}" is 64 characters long, more than 63/, fix: /at most 63/ },
    { value: 'ns/ net', reason: /contains a space at position 1/, fix: /lower-case/ },
    { value: 'net', ns: '', reason: /no namespace, and the object's own namespace "" is empty/, fix: /"<namespace>\/net"/ },
  ];
  for (const c of cases) {
    void test(`${JSON.stringify(c.value)} → ${c.reason.source}`, () => {
      const e = expectErr(parseServiceNetwork(c.value, c.ns ?? 'ns'));
      assert.match(e.reason, c.reason);
      assert.match(e.fix, c.fix);
      assert.equal(e.value, c.value);
      const msg = formatInputError('Service ns/web', e);
      assert.ok(msg.startsWith(`Service ns/web: ${SERVICE_NETWORK_ANNOTATION} ${JSON.stringify(c.value)}: `), msg);
    });
  }
});

void describe('parseServiceNetwork: properties', () => {
  const uniqueRefs = fc.uniqueArray(networkRef, { minLength: 1, maxLength: 6, selector: networkKey });

  void test('format → parse returns the same refs, whatever the default namespace', () => {
    fc.assert(
      fc.property(uniqueRefs, dnsLabel, (refs, ns) => {
        assert.deepEqual(expectOk(parseServiceNetwork(formatServiceNetwork(refs), ns)), refs);
      }),
      RUNS,
    );
  });

  void test('bare items resolve to the default namespace; blanks around items do not matter; duplicates collapse', () => {
    const item = fc.record({ ref: networkRef, bare: fc.boolean(), before: blanks, after: blanks });
    fc.assert(
      fc.property(fc.array(item, { minLength: 1, maxLength: 8 }), shortLabel, (items, ns) => {
        const text = items.map((i) => `${i.before}${i.bare ? i.ref.name : networkKey(i.ref)}${i.after}`).join(',');
        const expected: NetworkRef[] = [];
        for (const i of items) {
          const r = { namespace: i.bare ? ns : i.ref.namespace, name: i.ref.name };
          if (!expected.some((e) => networkKey(e) === networkKey(r))) expected.push(r);
        }
        assert.deepEqual(expectOk(parseServiceNetwork(text, ns)), expected);
      }),
      RUNS,
    );
  });

  void test('random strings never throw and give ok or a well-formed error', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300, unit: 'binary' }), (s) => {
        assertWellFormed(parseServiceNetwork(s, 'ns'), s);
      }),
      RUNS,
    );
  });

  void test('mutated valid values never throw; an ok result only holds valid names', () => {
    const valid = fc.uniqueArray(networkRef, { minLength: 1, maxLength: 4, selector: networkKey }).map(formatServiceNetwork);
    fc.assert(
      fc.property(mutated(valid), (s) => {
        const r = parseServiceNetwork(s, 'ns');
        assertWellFormed(r, s);
        if (r.ok) {
          for (const ref of r.value) {
            assert.match(ref.namespace, /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);
            assert.match(ref.name, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/);
          }
        }
      }),
      RUNS,
    );
  });

  void test('pathological inputs never throw', () => {
    for (const v of pathological) assertWellFormed(parseServiceNetwork(v as string, 'ns'), v);
  });
});
