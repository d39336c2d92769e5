import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { formatDownwardMap, parseDownwardMap, quoteGo, unquoteGo } from '../../../src/annotations/downward-api.js';
import { NETWORK_STATUS_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../../../src/keys.js';
import { RUNS } from './arbitraries.js';

void describe('downwardAPI annotations file', () => {
  void test('reads what the kubelet writes (Go %q values, sorted keys)', () => {
    // Written by a kubelet for a pod with a network-status of one line of JSON and a multi-line value.
    const text =
      'k8s.v1.cni.cncf.io/network-status="[{\\"name\\":\\"cbr0\\",\\"interface\\":\\"eth0\\",\\"ips\\":[\\"10.244.0.5\\"]}]"\n' +
      'multi="a\\nb\\tc \\\\ \\x01 é \\u0085"\n' +
      `${SERVICE_NETWORK_ANNOTATION}="macvlan1"\n`;
    const m = parseDownwardMap(text);
    assert.deepEqual(m.problems, []);
    assert.equal(m.values[NETWORK_STATUS_ANNOTATION], '[{"name":"cbr0","interface":"eth0","ips":["10.244.0.5"]}]');
    assert.equal(m.values['multi'], 'a\nb\tc \\ \x01 é \u0085');
    assert.equal(m.values[SERVICE_NETWORK_ANNOTATION], 'macvlan1');
  });

  void test('an empty file is no annotations', () => {
    assert.deepEqual(parseDownwardMap(''), { values: {}, problems: [] });
  });

  void test('a bad line is named and the others are kept', () => {
    const m = parseDownwardMap('a="1"\nb="unterminated\nc=\\"x\nd="bad \\q escape"\ne="2"\nno-equals\n');
    assert.deepEqual(m.values, { a: '1', e: '2' });
    assert.equal(m.problems.length, 4);
    assert.match(m.problems[0] ?? '', /^line 2 \(b\): the value is not a double-quoted string$/);
    assert.match(m.problems[2] ?? '', /unknown escape \\q/);
    assert.match(m.problems[3] ?? '', /^line 6: has no key="value"$/);
  });

  void test('a key like __proto__ is a plain key', () => {
    const m = parseDownwardMap('__proto__="x"\nconstructor="y"\n');
    assert.equal(Object.getPrototypeOf(m.values), Object.prototype);
    assert.equal(Object.getOwnPropertyDescriptor(m.values, '__proto__')?.value, 'x');
    assert.equal(m.values['constructor'], 'y');
  });

  void test('property: format then parse gives the map back, for any Unicode values', () => {
    const key = fc.stringMatching(/^[a-z0-9]([a-z0-9.-]{0,20}\/)?[a-zA-Z0-9_.-]{1,20}$/);
    fc.assert(
      fc.property(fc.dictionary(key, fc.string({ unit: 'binary', maxLength: 60 })), (m) => {
        const back = parseDownwardMap(formatDownwardMap(m));
        assert.deepEqual(back.problems, []);
        assert.deepEqual(back.values, { ...m });
      }),
      RUNS,
    );
  });

  void test('property: unquote never throws, and a quoted string always comes back', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), (s) => {
        unquoteGo(s);
        unquoteGo(`"${s}"`);
        const r = unquoteGo(quoteGo(s));
        assert.ok(r.ok && r.value === s);
      }),
      RUNS,
    );
  });
});
