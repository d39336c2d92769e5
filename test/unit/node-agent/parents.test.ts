/**
 * The admin's parents (Node annotation multus-proxy.k8s.cni.cncf.io/node-parents): examples, the
 * messages (Node, key, value, fix), generated annotations round-trip, mutated and pathological
 * ones never throw, and the suggested `kubectl annotate` is exact: the shell hands kubectl a value
 * that parses to the admin's other entries plus the new one, whatever the NAD's owner wrote.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fc from 'fast-check';
import { annotateParentCommand, chooseParent, parentNotConfiguredMessage, parseNodeParents } from '../../../cmd/node-agent/parents.js';
import { checkInterfaceName } from '../../../src/annotations/names.js';
import { NODE_PARENTS_ANNOTATION } from '../../../src/keys.js';
import { formatInputError } from '../../../src/result.js';
import { assertWellFormed, blanks, expectErr, expectOk, ifname, mutated, networkRef, pathological, RUNS } from '../annotations/arbitraries.js';

void describe('node-parents (Node annotation)', () => {
  void test('per-network parents; blanks and a trailing ";" are fine', () => {
    const m = expectOk(parseNodeParents(' demo/net-a = ens4 ;other/b=br-storage;'));
    assert.deepEqual(
      [...m],
      [
        ['demo/net-a', 'ens4'],
        ['other/b', 'br-storage'],
      ],
    );
    assert.deepEqual([...expectOk(parseNodeParents(''))], []);
  });
  void test('errors name the Node, the annotation, the value and the fix', () => {
    const e = expectErr(parseNodeParents('demo/net-a=ens4 ens5'));
    assert.equal(e.key, `annotation ${NODE_PARENTS_ANNOTATION}`);
    assert.match(
      formatInputError('Node worker-1', e),
      /^Node worker-1: annotation multus-proxy\.k8s\.cni\.cncf\.io\/node-parents "demo\/net-a=ens4 ens5": entry 1 \(demo\/net-a\): the interface name "ens4 ens5" contains .*; an interface name is 1 to 15 characters .*write "<namespace>\/<nad>=<interface>" entries separated by ";"/,
    );
    assert.match(expectErr(parseNodeParents('net-a=ens4')).reason, /without its namespace/);
    assert.match(expectErr(parseNodeParents('demo/a=ens4;demo/a=ens5')).reason, /network demo\/a is listed twice/);
    assert.match(expectErr(parseNodeParents('demo/a ens4')).reason, /no "="/);
    assert.match(expectErr(parseNodeParents('demo/a=')).reason, /the interface name "" is empty/);
    assert.match(expectErr(parseNodeParents('demo/a=averyveryverylongname')).reason, /more than 15/);
    assert.match(expectErr(parseNodeParents('demo/a=eth0:1')).reason, /contains/);
    assert.match(expectErr(parseNodeParents(';demo/a=ens4')).reason, /entry 1 is empty/);
  });
  void test("the admin's parent wins over the NAD's; none: not served, unless --parent-from-nad", () => {
    const admin = new Map([['demo/a', 'ens5']]);
    assert.deepEqual(chooseParent('demo/a', admin, 'ens4', false), { from: 'node', parent: 'ens5' });
    assert.deepEqual(chooseParent('demo/a', admin, 'ens4', true), { from: 'node', parent: 'ens5' });
    assert.deepEqual(chooseParent('demo/b', admin, 'ens4', false), { from: 'none' });
    assert.deepEqual(chooseParent('demo/b', admin, 'ens4', true), { from: 'nad', parent: 'ens4' });
  });
  void test("the ParentNotConfigured message names the network, the NAD's master and the exact command, keeping the admin's other entries", () => {
    const msg = parentNotConfiguredMessage('worker-1', 'demo/b', 'ens4', new Map([['demo/a', 'ens5']]));
    assert.match(msg, /^network demo\/b is not served on node worker-1: .*node-parents\. The NAD's master \(or bridge\) is "ens4"/);
    assert.ok(msg.includes(`kubectl annotate node worker-1 --overwrite ${NODE_PARENTS_ANNOTATION}='demo/a=ens5;demo/b=ens4'`), msg);
    assert.match(msg, /--parent-from-nad/);
  });
  void test('the suggested command survives the shell: a NAD master with a quote and a semicolon stays one word', () => {
    const cmd = annotateParentCommand('w1', new Map(), 'demo/b', "x';touch y");
    const args = execFileSync('sh', ['-c', `set -- ${cmd.replace(/^kubectl /, '')}; printf '%s\\n' "$@"`], { encoding: 'utf8' })
      .trimEnd()
      .split('\n');
    assert.deepEqual(args, ['annotate', 'node', 'w1', '--overwrite', `${NODE_PARENTS_ANNOTATION}=demo/b=x';touch y`]);
  });
});

/** Undoes shellQuote's `'…'` and `'\''`: what the shell gives kubectl. */
const unquote = (word: string): string => word.replace(/'((?:[^']|'\\'')*)'/g, (_, body: string) => body.replace(/'\\''/g, "'"));

void describe('node-parents: properties', () => {
  const entries = fc.uniqueArray(fc.tuple(networkRef, ifname), { maxLength: 5, selector: ([r]) => `${r.namespace}/${r.name}` });
  void test('generated annotations round-trip, with blanks and an optional trailing ";"', () => {
    fc.assert(
      fc.property(entries, blanks, fc.boolean(), (list, b, trailing) => {
        const text = list.map(([r, i]) => `${b}${r.namespace}/${r.name}${b}=${b}${i}${b}`).join(';') + (trailing && list.length > 0 ? ';' : '');
        assert.deepEqual(
          [...expectOk(parseNodeParents(text))],
          list.map(([r, i]) => [`${r.namespace}/${r.name}`, i]),
        );
      }),
      RUNS,
    );
  });
  void test("the suggested annotation value parses to the admin's other entries plus the new one", () => {
    const anyIfname = fc.string({ minLength: 1, maxLength: 15 }).filter((s) => checkInterfaceName(s) === undefined && !s.includes(';') && !s.includes('=') && s.trim() === s);
    fc.assert(
      fc.property(entries, networkRef, anyIfname, (list, r, nadParent) => {
        const admin = new Map(list.map(([x, i]) => [`${x.namespace}/${x.name}`, i]));
        const net = `${r.namespace}/${r.name}`;
        const cmd = annotateParentCommand('w1', admin, net, nadParent);
        const value = unquote(cmd.slice(cmd.indexOf(`${NODE_PARENTS_ANNOTATION}=`) + NODE_PARENTS_ANNOTATION.length + 1));
        const parsed = expectOk(parseNodeParents(value));
        assert.equal(parsed.get(net), nadParent);
        for (const [n, i] of admin) if (n !== net) assert.equal(parsed.get(n), i);
        assert.equal(parsed.size, new Set([...admin.keys(), net]).size);
      }),
      RUNS,
    );
  });
  void test('mutated and pathological annotations never throw; whatever parses holds valid interface names', () => {
    const valid = fc.constantFrom('demo/net-a=ens4; other/b=br-storage', 'demo/a=eth1;', 'x/y=mpx.0');
    const check = (text: string): void => {
      const r = parseNodeParents(text);
      if (!r.ok) assertWellFormed(r, text);
      else for (const i of r.value.values()) assert.equal(checkInterfaceName(i), undefined);
    };
    fc.assert(fc.property(mutated(valid), check), RUNS);
    for (const p of pathological) if (typeof p === 'string') check(p);
  });
});
