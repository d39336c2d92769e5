import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { checkDns1123Label, checkDns1123Subdomain, checkInterfaceName, checkLabelKey, checkLabelValue } from '../../../src/annotations/names.js';
import { dnsLabel, dnsSubdomain, labelKey, labelValue, mutated, RUNS } from './arbitraries.js';

// The Kubernetes validation regular expressions (k8s.io/apimachinery/pkg/util/validation), used as
// an independent oracle for the character-scanning checks.
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

const oracle = {
  label: (s: string) => s.length <= 63 && DNS1123_LABEL.test(s),
  subdomain: (s: string) => s.length <= 253 && DNS1123_SUBDOMAIN.test(s),
  value: (s: string) => s.length <= 63 && LABEL_VALUE.test(s),
  key: (s: string) => {
    const parts = s.split('/');
    if (parts.length > 2) return false;
    const [a = '', b] = parts;
    const name = b ?? a;
    const prefixOk = b === undefined || (a.length <= 253 && DNS1123_SUBDOMAIN.test(a));
    return prefixOk && name.length <= 63 && QUALIFIED_NAME.test(name);
  },
};

/** Strings near the boundary: valid names of every kind, mutated, plus short random text. */
const nameLike = fc.oneof(dnsLabel, dnsSubdomain, labelValue, labelKey, mutated(fc.oneof(dnsLabel, dnsSubdomain, labelKey)), fc.string({ maxLength: 20 }));

void describe('name checks agree with the Kubernetes regular expressions', () => {
  void test('DNS-1123 label', () => {
    fc.assert(
      fc.property(nameLike, (s) => assert.equal(checkDns1123Label(s) === undefined, oracle.label(s), s)),
      RUNS,
    );
  });
  void test('DNS-1123 subdomain', () => {
    fc.assert(
      fc.property(nameLike, (s) => assert.equal(checkDns1123Subdomain(s) === undefined, oracle.subdomain(s), s)),
      RUNS,
    );
  });
  void test('label value', () => {
    fc.assert(
      fc.property(nameLike, (s) => assert.equal(checkLabelValue(s) === undefined, oracle.value(s), s)),
      RUNS,
    );
  });
  void test('label key', () => {
    fc.assert(
      fc.property(nameLike, (s) => assert.equal(checkLabelKey(s) === undefined, oracle.key(s), s)),
      RUNS,
    );
  });
  void test('length limits exactly at the boundary', () => {
    assert.equal(checkDns1123Label('a'.repeat(63)), undefined);
    assert.match(checkDns1123Label('a'.repeat(64)) ?? '', /64 characters long, more than 63/);
    assert.equal(checkLabelValue('A'.repeat(63)), undefined);
    assert.match(checkLabelValue('A'.repeat(64)) ?? '', /more than 63/);
    assert.equal(checkLabelValue(''), undefined);
    assert.match(checkLabelKey('') ?? '', /is empty/);
  });
  void test('reasons point at the first bad character, invisible ones by code point', () => {
    assert.equal(checkDns1123Label('ab_c'), "contains '_' at position 3");
    assert.equal(checkDns1123Label('aBc'), "contains the upper-case letter 'B' at position 2");
    assert.equal(checkDns1123Label('a\u0000'), 'contains the invisible character U+0000 at position 2');
    assert.equal(checkDns1123Label('a\uD800'), 'contains the invisible character U+D800 at position 2');
    assert.equal(checkDns1123Label('😀a'), "contains '😀' at position 1");
    assert.equal(checkDns1123Subdomain('a..b'), 'has an empty part between dots (part 2)');
    assert.equal(checkDns1123Subdomain('a.-b'), `has a part "-b" that starts with '-'; it must start with a lower-case letter or digit`);
  });
});

void describe('interface names (Linux dev_valid_name)', () => {
  void test('examples', () => {
    for (const ok of ['net1', 'eth0', 'a', 'x'.repeat(15), 'vlan.100', 'a-b_c', 'é'.repeat(7)]) assert.equal(checkInterfaceName(ok), undefined, ok);
    const bad: [string, RegExp][] = [
      ['', /is empty/],
      ['.', /is "\."/],
      ['..', /is "\.\."/],
      ['x'.repeat(16), /16 bytes long, more than 15/],
      ['é'.repeat(8), /16 bytes long/],
      ['a/b', /contains '\/'/],
      ['a:b', /contains ':'/],
      ['a b', /contains a space/],
      ['a\tb', /contains the invisible character U\+0009/],
    ];
    for (const [name, why] of bad) assert.match(checkInterfaceName(name) ?? 'accepted', why, name);
  });
  void test('agrees with a byte-length and character oracle', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 20 }), (s) => {
        const want = s.length > 0 && s !== '.' && s !== '..' && Buffer.byteLength(s) <= 15 && !/[/:\s\0]/u.test(s);
        assert.equal(checkInterfaceName(s) === undefined, want, JSON.stringify(s));
      }),
      RUNS,
    );
  });
});
