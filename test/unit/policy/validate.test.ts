/**
 * MultiNetworkPolicy validation: each denial names the object, the field, the bad value and a fix;
 * valid objects (including those written for the reference implementation) pass; label selectors
 * match as Kubernetes' do (property, against a reference written here).
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { checkPolicy, checkPortName } from '../../../src/policy/validate.js';
import { readSelector } from '../../../src/policy/selector.js';
import { matchesSelector } from '../../../src/annotations/label-selector.js';
import type { MultiNetworkPolicy, MultiNetworkPolicySpec } from '../../../src/policy/api.js';
import { POLICY_FOR_ANNOTATION } from '../../../src/keys.js';
import { POLICY_BUDGETS } from '../../../src/object-budgets.js';
import { assertNoPollution, FEW_RUNS } from '../annotations/arbitraries.js';

const mnp = (spec: unknown, annotations: Record<string, string> = { [POLICY_FOR_ANNOTATION]: 'net1' }): MultiNetworkPolicy => ({
  apiVersion: 'k8s.cni.cncf.io/v1beta2',
  kind: 'MultiNetworkPolicy',
  metadata: { name: 'p', namespace: 'ns', annotations },
  spec: spec as MultiNetworkPolicySpec,
});

function denial(spec: unknown, annotations?: Record<string, string>): { key: string; value: string; message: string } {
  const r = checkPolicy(mnp(spec, annotations));
  if (r.ok) assert.fail(`expected a denial of ${JSON.stringify(spec)}`);
  assert.ok(r.error.message.startsWith('MultiNetworkPolicy ns/p: '), r.error.message);
  assert.ok(r.error.error.fix.length > 0);
  return { key: r.error.error.key, value: r.error.error.value, message: r.error.message };
}

const peer = (p: unknown): unknown => ({ podSelector: {}, ingress: [{ from: [p] }] });
const port = (p: unknown): unknown => ({ podSelector: {}, ingress: [{ ports: [p] }] });

void describe('MultiNetworkPolicy validation', () => {
  void test('denials: ipBlock beside a selector, endPort without port or below it, bad CIDR, except outside, bad protocol, bad selectors', () => {
    const cases: [string, unknown, string, RegExp][] = [
      ['ipBlock beside podSelector', peer({ podSelector: {}, ipBlock: { cidr: '10.0.0.0/8' } }), 'spec.ingress[0].from[0].ipBlock', /beside podSelector/],
      ['ipBlock beside namespaceSelector', peer({ namespaceSelector: {}, ipBlock: { cidr: '10.0.0.0/8' } }), 'spec.ingress[0].from[0].ipBlock', /beside namespaceSelector/],
      ['empty peer', peer({}), 'spec.ingress[0].from[0]', /names no peer/],
      ['endPort without port', port({ endPort: 90 }), 'spec.ingress[0].ports[0].endPort', /without port/],
      ['endPort below port', port({ port: 90, endPort: 80 }), 'spec.ingress[0].ports[0].endPort', /from port \(90\)/],
      ['endPort with a named port', port({ port: 'http', endPort: 80 }), 'spec.ingress[0].ports[0].endPort', /named port/],
      ['port 0', port({ port: 0 }), 'spec.ingress[0].ports[0].port', /1 to 65535/],
      ['port as a quoted number', port({ port: '80' }), 'spec.ingress[0].ports[0].port', /no letter/],
      ['bad protocol', port({ protocol: 'tcp', port: 80 }), 'spec.ingress[0].ports[0].protocol', /write "TCP"/],
      ['ICMP', port({ protocol: 'ICMP' }), 'spec.ingress[0].ports[0].protocol', /not TCP, UDP or SCTP/],
      ['bad CIDR', peer({ ipBlock: { cidr: '10.0.0.300/8' } }), 'spec.ingress[0].from[0].ipBlock.cidr', /not an IPv4 or IPv6/],
      ['CIDR without a prefix', peer({ ipBlock: { cidr: '10.0.0.1' } }), 'spec.ingress[0].from[0].ipBlock.cidr', /no prefix length/],
      ['except outside the cidr', peer({ ipBlock: { cidr: '10.0.0.0/16', except: ['10.1.0.0/24'] } }), 'spec.ingress[0].from[0].ipBlock.except[0]', /not strictly inside/],
      ['except equal to the cidr', peer({ ipBlock: { cidr: '10.0.0.0/16', except: ['10.0.0.0/16'] } }), 'spec.ingress[0].from[0].ipBlock.except[0]', /not strictly inside/],
      ['except of the other family', peer({ ipBlock: { cidr: '10.0.0.0/16', except: ['fd00::/64'] } }), 'spec.ingress[0].from[0].ipBlock.except[0]', /not strictly inside/],
      ['bad operator', { podSelector: { matchExpressions: [{ key: 'a', operator: 'in', values: ['x'] }] } }, 'spec.podSelector.matchExpressions[0].operator', /case-sensitive/],
      ['In without values', { podSelector: { matchExpressions: [{ key: 'a', operator: 'In' }] } }, 'spec.podSelector.matchExpressions[0].values', /at least one value/],
      [
        'Exists with values',
        peer({ podSelector: { matchExpressions: [{ key: 'a', operator: 'Exists', values: ['x'] }] } }),
        'spec.ingress[0].from[0].podSelector.matchExpressions[0].values',
        /must be empty/,
      ],
      ['bad label key', peer({ namespaceSelector: { matchLabels: { 'bad key': 'x' } } }), 'spec.ingress[0].from[0].namespaceSelector.matchLabels', /label key/],
      ['bad label value', { podSelector: { matchLabels: { app: 'a b' } } }, 'spec.podSelector.matchLabels.app', /label value/],
      ['bad policyTypes', { podSelector: {}, policyTypes: ['ingress'] }, 'spec.policyTypes[0]', /case-sensitive/],
      ['policyTypes as a string (old CRDs allowed it)', { podSelector: {}, policyTypes: 'Ingress' }, 'spec.policyTypes', /not a list/],
      ['duplicate policyTypes', { podSelector: {}, policyTypes: ['Egress', 'Egress'] }, 'spec.policyTypes[1]', /twice/],
    ];
    for (const [name, spec, key, reason] of cases) {
      const d = denial(spec);
      assert.equal(d.key, key, name);
      assert.match(d.message, reason, name);
    }
  });

  void test('a bad policy-for is denied under the annotation key', () => {
    const d = denial({ podSelector: {} }, { [POLICY_FOR_ANNOTATION]: 'a/b/c' });
    assert.equal(d.key, POLICY_FOR_ANNOTATION);
    assert.equal(d.value, 'a/b/c');
  });

  void test('bounds: rules, peers, ports, except entries and selector terms', () => {
    const many = <T>(n: number, f: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => f(i));
    const over = (n: number): number => n + 1;
    const cases: [unknown, string][] = [
      [{ ingress: many(over(POLICY_BUDGETS.rules), () => ({})) }, 'spec.ingress'],
      [{ egress: [{ to: many(over(POLICY_BUDGETS.peers), () => ({ podSelector: {} })) }] }, 'spec.egress[0].to'],
      [{ ingress: [{ ports: many(over(POLICY_BUDGETS.ports), (i) => ({ port: i + 1 })) }] }, 'spec.ingress[0].ports'],
      [peer({ ipBlock: { cidr: '10.0.0.0/8', except: many(over(POLICY_BUDGETS.except), (i) => `10.${i}.0.0/16`) } }), 'spec.ingress[0].from[0].ipBlock.except'],
      [{ podSelector: { matchLabels: Object.fromEntries(many(over(POLICY_BUDGETS.selectorTerms), (i) => [`k${i}`, 'v'])) } }, 'spec.podSelector'],
      [{ podSelector: { matchExpressions: [{ key: 'a', operator: 'In', values: many(over(POLICY_BUDGETS.selectorValues), (i) => `v${i}`) }] } }, 'spec.podSelector.matchExpressions[0].values'],
    ];
    for (const [spec, key] of cases) assert.equal(denial(spec).key, key);
    // At the bound, allowed.
    assert.ok(checkPolicy(mnp({ ingress: many(POLICY_BUDGETS.rules, () => ({})) })).ok);
  });

  void test('valid: the reference implementation’s objects, canonical CIDRs, defaulted policyTypes, warnings', () => {
    const r = checkPolicy(
      mnp({
        podSelector: { matchLabels: { app: 'db' } },
        policyTypes: ['Ingress', 'Egress'],
        ingress: [
          {
            from: [
              { ipBlock: { cidr: '10.0.3.7/16', except: ['10.0.1.0/24'] } },
              { namespaceSelector: { matchLabels: { team: 'x' } }, podSelector: { matchExpressions: [{ key: 'role', operator: 'NotIn', values: ['a', 'a'] }] } },
            ],
            ports: [{ protocol: 'TCP', port: 6379 }, { port: 'metrics' }],
          },
        ],
        egress: [{ to: [{ ipBlock: { cidr: '2001:DB8::/64' } }], ports: [{ protocol: 'UDP', port: 32000, endPort: 32768 }] }],
      }),
    );
    assert.ok(r.ok, r.ok ? '' : r.error.message);
    assert.deepEqual(r.value.ingress[0]?.peers?.[0], { kind: 'block', block: { cidr: '10.0.0.0/16', except: ['10.0.1.0/24'] } });
    assert.deepEqual(r.value.egress[0]?.peers?.[0], { kind: 'block', block: { cidr: '2001:db8::/64', except: [] } });
    assert.deepEqual(r.value.ingress[0]?.ports, [
      { protocol: 'TCP', port: 6379 },
      { protocol: 'TCP', name: 'metrics' },
    ]);
    assert.deepEqual(r.value.egress[0]?.ports, [{ protocol: 'UDP', port: 32000, endPort: 32768 }]);
    const defaulted = checkPolicy(mnp({ podSelector: {}, egress: [{}] }));
    assert.ok(defaulted.ok);
    assert.deepEqual(defaulted.value.types, { ingress: true, egress: true });
    const ingressOnly = checkPolicy(mnp({ podSelector: {}, egress: [] }));
    assert.ok(ingressOnly.ok);
    assert.deepEqual(ingressOnly.value.types, { ingress: true, egress: false });
    const ignored = checkPolicy(mnp({ podSelector: {}, policyTypes: ['Ingress'], egress: [{}] }));
    assert.ok(ignored.ok);
    assert.deepEqual(ignored.value.egress, []);
    assert.match(ignored.value.warnings.join('\n'), /spec.egress has rules but spec.policyTypes does not list Egress/);
    const noNetworks = checkPolicy(mnp({ podSelector: {} }, {}));
    assert.ok(noNetworks.ok);
    assert.equal(noNetworks.value.networks, undefined);
    assert.match(noNetworks.value.warnings.join('\n'), /isolates nothing/);
  });

  void test('port names follow the IANA service-name rule', () => {
    for (const good of ['http', 'h2c', 'web-8080', 'a']) assert.equal(checkPortName(good), undefined, good);
    for (const bad of ['', '80', 'HTTP', '-a', 'a-', 'a--b', 'sixteen-chars-xx']) assert.notEqual(checkPortName(bad), undefined, bad);
  });

  void test('property: a selector matches exactly as Kubernetes defines matchLabels and matchExpressions', () => {
    const key = fc.constantFrom('a', 'b', 'c', 'example.com/d');
    const value = fc.constantFrom('x', 'y', 'z', '');
    const expr = fc.oneof(
      fc.record({ key, operator: fc.constantFrom('In', 'NotIn'), values: fc.array(value, { minLength: 1, maxLength: 3 }) }),
      fc.record({ key, operator: fc.constantFrom('Exists', 'DoesNotExist') }),
    );
    const selector = fc.record({ matchLabels: fc.dictionary(key, value, { maxKeys: 2 }), matchExpressions: fc.array(expr, { maxLength: 3 }) });
    const labels = fc.dictionary(key, value, { maxKeys: 4 });
    const reference = (sel: { matchLabels: Record<string, string>; matchExpressions: { key: string; operator: string; values?: string[] }[] }, l: Record<string, string>): boolean =>
      Object.entries(sel.matchLabels).every(([k, v]) => Object.hasOwn(l, k) && l[k] === v) &&
      sel.matchExpressions.every((e) => {
        const has = Object.hasOwn(l, e.key);
        if (e.operator === 'Exists') return has;
        if (e.operator === 'DoesNotExist') return !has;
        if (e.operator === 'In') return has && (e.values ?? []).includes(l[e.key] ?? '');
        return !has || !(e.values ?? []).includes(l[e.key] ?? '');
      });
    fc.assert(
      fc.property(selector, labels, (sel, l) => {
        const parsed = readSelector(sel, 'spec.podSelector');
        assert.ok(parsed.ok);
        assert.equal(matchesSelector(parsed.value, l), reference(sel, l));
      }),
      FEW_RUNS,
    );
  });

  void test('property: no object throws, and every denial is well formed', () => {
    const json = fc.letrec((tie) => ({
      v: fc.oneof(
        { depthSize: 'small' },
        fc.string({ maxLength: 8 }),
        fc.integer(),
        fc.constant(null),
        fc.array(tie('v'), { maxLength: 3 }),
        fc.dictionary(
          fc.constantFrom(
            'podSelector',
            'ingress',
            'egress',
            'from',
            'to',
            'ports',
            'port',
            'endPort',
            'protocol',
            'ipBlock',
            'cidr',
            'except',
            'matchLabels',
            'matchExpressions',
            'key',
            'operator',
            'values',
            'policyTypes',
            '__proto__',
          ),
          tie('v'),
          { maxKeys: 4 },
        ),
      ),
    })).v;
    fc.assert(
      fc.property(json, (spec) => {
        const r = checkPolicy(mnp(spec));
        if (!r.ok) assert.ok(r.error.message.length > 0 && r.error.error.fix.length > 0);
      }),
      FEW_RUNS,
    );
    assertNoPollution();
  });
});
