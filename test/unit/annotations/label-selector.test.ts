import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { formatLabelSelector, matchesSelector, parseLabelSelector, selectorFromMap, type LabelSelector, type Requirement } from '../../../src/annotations/label-selector.js';
import { SERVICE_SELECTOR_ANNOTATION } from '../../../src/keys.js';
import { formatInputError } from '../../../src/result.js';
import { assertNoPollution, assertWellFormed, expectErr, expectOk, labelKey, labelValue, mutated, pathological, RUNS } from './arbitraries.js';

const parse = (s: string): LabelSelector => expectOk(parseLabelSelector(s));

/** A small key/value universe so generated labels and selectors overlap often. */
const smallKey = fc.constantFrom('app', 'tier', 'example.com/env', 'x_y.z', 'A-1');
const smallValue = fc.constantFrom('', 'web', 'db', 'v1.2', 'Z_9');
const smallLabels = fc.dictionary(smallKey, smallValue, { maxKeys: 4 }).map((d) => ({ ...d }));

function requirementOf(key: fc.Arbitrary<string>, value: fc.Arbitrary<string>): fc.Arbitrary<Requirement> {
  return fc.oneof(
    fc.tuple(key, fc.constantFrom('In' as const, 'NotIn' as const), fc.array(value, { minLength: 1, maxLength: 4 })).map(([k, operator, values]) => ({ key: k, operator, values })),
    fc.tuple(key, fc.constantFrom('Exists' as const, 'DoesNotExist' as const)).map(([k, operator]) => ({ key: k, operator, values: [] as string[] })),
  );
}
const selector = (key: fc.Arbitrary<string>, value: fc.Arbitrary<string>): fc.Arbitrary<LabelSelector> =>
  fc.array(requirementOf(key, value), { maxLength: 5 }).map((requirements) => ({ requirements }));

/** The same selector written with blanks everywhere the grammar allows them, and `==`/`in` spellings. */
function spacedForm(sel: LabelSelector, pad: string): string {
  return sel.requirements
    .map((r) => {
      switch (r.operator) {
        case 'Exists':
          return `${pad}${r.key}${pad}`;
        case 'DoesNotExist':
          return `${pad}!${pad}${r.key}${pad}`;
        case 'In':
          return r.values.length === 1 && r.values[0] !== '' ? `${pad}${r.key}${pad}==${pad}${r.values[0]}${pad}` : `${pad}${r.key} in${pad}(${pad}${r.values.join(`${pad},${pad}`)}${pad})${pad}`;
        case 'NotIn':
          return `${pad}${r.key} notin${pad}(${pad}${r.values.join(`${pad},${pad}`)}${pad})${pad}`;
      }
    })
    .join(',');
}

void describe('parseLabelSelector: syntax', () => {
  void test('every operator', () => {
    assert.deepEqual(parse('a=b').requirements, [{ key: 'a', operator: 'In', values: ['b'] }]);
    assert.deepEqual(parse('a==b'), parse('a=b'));
    assert.deepEqual(parse('a in (b)'), parse('a=b'));
    assert.deepEqual(parse('a!=b').requirements, [{ key: 'a', operator: 'NotIn', values: ['b'] }]);
    assert.deepEqual(parse('a notin (b)'), parse('a!=b'));
    assert.deepEqual(parse('a in (x, y)').requirements, [{ key: 'a', operator: 'In', values: ['x', 'y'] }]);
    assert.deepEqual(parse('a').requirements, [{ key: 'a', operator: 'Exists', values: [] }]);
    assert.deepEqual(parse('!a').requirements, [{ key: 'a', operator: 'DoesNotExist', values: [] }]);
  });
  void test('blanks between tokens are ignored; comma means AND; order is canonical', () => {
    assert.deepEqual(parse('  tier in ( web ,db ) ,\tapp = x\n, ! canary '), parse('app=x,!canary,tier in (db,web)'));
    assert.equal(formatLabelSelector(parse('tier in (web,db,web), app==x, !canary')), 'app=x,!canary,tier in (db,web)');
  });
  void test('prefixed keys and label-value characters', () => {
    assert.deepEqual(parse('example.com/tier=Front_end.v2').requirements, [{ key: 'example.com/tier', operator: 'In', values: ['Front_end.v2'] }]);
  });
  void test('empty values, as Kubernetes accepts them', () => {
    assert.deepEqual(parse('a=').requirements, [{ key: 'a', operator: 'In', values: [''] }]);
    assert.deepEqual(parse('a!=,b').requirements, [
      { key: 'a', operator: 'NotIn', values: [''] },
      { key: 'b', operator: 'Exists', values: [] },
    ]);
    assert.deepEqual(parse('a in ()').requirements, [{ key: 'a', operator: 'In', values: [''] }]);
    assert.deepEqual(parse('a in (x,)').requirements, [{ key: 'a', operator: 'In', values: ['', 'x'] }]);
    assert.deepEqual(parse('a in (,,x)').requirements, [{ key: 'a', operator: 'In', values: ['', 'x'] }]);
  });
  void test('in/notin are ordinary words as values', () => {
    assert.deepEqual(parse('a=in').requirements, [{ key: 'a', operator: 'In', values: ['in'] }]);
    assert.deepEqual(parse('a in (notin,in)').requirements, [{ key: 'a', operator: 'In', values: ['in', 'notin'] }]);
  });
  void test('the empty or blank string selects everything', () => {
    for (const s of ['', '   ', '\t\n']) {
      const sel = parse(s);
      assert.deepEqual(sel.requirements, []);
      assert.equal(matchesSelector(sel, {}), true);
      assert.equal(matchesSelector(sel, undefined), true);
      assert.equal(formatLabelSelector(sel), '');
    }
  });
  void test('the key parameter names the annotation; default is the service-selector annotation', () => {
    assert.equal(expectErr(parseLabelSelector('a in')).key, SERVICE_SELECTOR_ANNOTATION);
    assert.equal(expectErr(parseLabelSelector('a in', 'spec.x')).key, 'spec.x');
  });
});

void describe('parseLabelSelector: errors name the bad token and a fix', () => {
  const cases: { value: string; reason: RegExp; fix: RegExp }[] = [
    { value: 'a=b,', reason: /ends with ',' at position 4/, fix: /remove the trailing comma/ },
    { value: ',a', reason: /found "," at position 1 where a label key was expected/, fix: /app=web/ },
    { value: 'a,,b', reason: /found "," at position 3 where a label key was expected/, fix: /joined by commas/ },
    { value: 'a b', reason: /found "b" at position 3 after the key "a" where an operator was expected/, fix: /app=web/ },
    { value: 'a=b c', reason: /found "c" at position 5 where ',' or the end was expected/, fix: /separate requirements with commas/ },
    { value: 'a in (b c)', reason: /found "c" at position 9 where ',' or '\)' was expected after the value "b"/, fix: /a in \(value1,value2\)/ },
    { value: 'a in (b', reason: /value list opened at position 6 has no closing '\)'/, fix: /a in \(value1,value2\)/ },
    { value: 'a in b', reason: /found "b" at position 6 where '\(' was expected after "in"/, fix: /a in \(/ },
    { value: 'a notin', reason: /found the end of the value where '\(' was expected after "notin"/, fix: /a notin \(/ },
    { value: 'a in (b,=)', reason: /found "=" at position 9 inside the value list of "a"/, fix: /a in \(/ },
    { value: 'a=(b)', reason: /found "\(" at position 3 where a value was expected after "="/, fix: /a=web/ },
    { value: 'a>1', reason: /the operator ">" at position 2 is not supported/, fix: /a in \(\.\.\.\)/ },
    { value: 'a<1', reason: /the operator "<" at position 2 is not supported/, fix: /a in/ },
    { value: '!a=b', reason: /found "=" at position 3 where ',' or the end was expected/, fix: /commas/ },
    { value: '!', reason: /found the end of the value where a label key was expected \(after '!'\)/, fix: /!canary/ },
    { value: '=b', reason: /found "=" at position 1 where a label key was expected/, fix: /app=web/ },
    { value: 'in (a)', reason: /keyword "in" at position 1 where a label key was expected/, fix: /label key before "in"/ },
    { value: 'a=b!', reason: /found "!" at position 4 where ',' or the end/, fix: /commas/ },
    { value: 'a-=b', reason: /the label key "a-" at position 1 ends with '-'/, fix: /a label key is/ },
    {
      value: 'Ex.com/a=b',
      reason: /the label key "Ex.com\/a" at position 1 has the prefix "Ex.com", which is not a DNS subdomain: it has a part "Ex" that contains the upper-case letter 'E'/,
      fix: /DNS subdomain prefix/,
    },
    { value: 'x.io/-a=b', reason: /the label key "x.io\/-a" at position 1 has the name part "-a", which starts with '-'/, fix: /a label key is/ },
    { value: 'a/b/c', reason: /contains more than one '\/'/, fix: /a label key is/ },
    { value: `${'k'.repeat(64)}`, reason: /is 64 characters long, more than 63/, fix: /a label key is/ },
    { value: 'a=b$c', reason: /the label value "b\$c" at position 3 contains '\$' at position 2/, fix: /a label value is/ },
    { value: `a=${'v'.repeat(64)}`, reason: /is 64 characters long, more than 63/, fix: /a label value is/ },
    { value: 'a=-b', reason: /the label value "-b" .* starts with '-'/, fix: /a label value is/ },
    { value: 'a in (ok,b_)', reason: /the label value "b_" at position 10 ends with '_'/, fix: /a label value is/ },
    { value: 'a=é', reason: /contains 'é'/, fix: /a label value is/ },
  ];
  for (const c of cases) {
    void test(`${JSON.stringify(c.value)} → ${c.reason.source}`, () => {
      const e = expectErr(parseLabelSelector(c.value));
      assert.equal(e.value, c.value);
      assert.match(e.reason, c.reason);
      assert.match(e.fix, c.fix);
      const msg = formatInputError('Service ns/web', e);
      assert.ok(msg.includes(`${SERVICE_SELECTOR_ANNOTATION} ${JSON.stringify(c.value)}`), msg);
    });
  }
});

void describe('matchesSelector', () => {
  void test('Kubernetes semantics by example', () => {
    const labels = { app: 'web', tier: 'front' };
    const m = (s: string, l: Record<string, string> | undefined = labels): boolean => matchesSelector(parse(s), l);
    assert.equal(m('app=web'), true);
    assert.equal(m('app=db'), false);
    assert.equal(m('app!=db'), true);
    assert.equal(m('missing!=x'), true, '!= matches an absent key');
    assert.equal(m('missing notin (x)'), true, 'notin matches an absent key');
    assert.equal(m('missing in (x)'), false);
    assert.equal(m('missing=', {}), false, 'an absent label is not the empty value');
    assert.equal(m('a=', { a: '' }), true);
    assert.equal(m('tier in (back,front)'), true);
    assert.equal(m('tier notin (back,front)'), false);
    assert.equal(m('app'), true);
    assert.equal(m('!app'), false);
    assert.equal(m('!missing'), true);
    assert.equal(m('app=web,tier=back'), false, 'comma is AND');
    // (not via m(): an undefined argument would take its default)
    assert.equal(matchesSelector(parse('app=web'), undefined), false);
    assert.equal(matchesSelector(parse('!app'), undefined), true);
    assert.equal(matchesSelector(parse('app!=web'), undefined), true);
  });
  void test('inherited properties are not labels', () => {
    assert.equal(matchesSelector(parse('toString'), {}), false);
    assert.equal(matchesSelector(parse('constructor!=x'), {}), true);
    const withProto = JSON.parse('{"__proto__":"x"}') as Record<string, string>;
    assert.equal(matchesSelector({ requirements: [{ key: '__proto__', operator: 'In', values: ['x'] }] }, withProto), true);
  });
  void test('selectorFromMap matches exactly the maps that contain it', () => {
    fc.assert(
      fc.property(smallLabels, smallLabels, (sub, extra) => {
        const sel = selectorFromMap(sub);
        assert.equal(matchesSelector(sel, { ...extra, ...sub }), true);
        const changed = Object.keys(sub)[0];
        if (changed !== undefined) assert.equal(matchesSelector(sel, { ...sub, [changed]: `${sub[changed]}x` }), false);
        assert.deepEqual(parse(formatLabelSelector(sel)), sel);
      }),
      RUNS,
    );
  });
  void test('In/NotIn and Exists/DoesNotExist are complements; requirements combine with AND', () => {
    const flip = { In: 'NotIn', NotIn: 'In', Exists: 'DoesNotExist', DoesNotExist: 'Exists' } as const;
    fc.assert(
      fc.property(requirementOf(smallKey, smallValue), selector(smallKey, smallValue), smallLabels, (r, rest, labels) => {
        const one = matchesSelector({ requirements: [r] }, labels);
        assert.equal(matchesSelector({ requirements: [{ ...r, operator: flip[r.operator] }] }, labels), !one);
        assert.equal(matchesSelector({ requirements: [r, ...rest.requirements] }, labels), one && matchesSelector(rest, labels));
      }),
      RUNS,
    );
  });
});

void describe('parseLabelSelector: properties', () => {
  void test('format → parse gives the canonical selector, and formatting is a fixed point', () => {
    fc.assert(
      fc.property(selector(labelKey, labelValue), (sel) => {
        const text = formatLabelSelector(sel);
        const back = parse(text);
        assert.equal(formatLabelSelector(back), text);
        assert.deepEqual(parse(formatLabelSelector(back)), back);
        // Canonical means the same labels match before and after.
        assert.equal(back.requirements.length, sel.requirements.length);
      }),
      RUNS,
    );
  });
  void test('blanks and alternative spellings parse to the same selector as the canonical string', () => {
    fc.assert(
      fc.property(selector(labelKey, labelValue), fc.constantFrom('', ' ', '  ', '\t', ' \n '), (sel, pad) => {
        assert.deepEqual(parse(spacedForm(sel, pad)), parse(formatLabelSelector(sel)));
      }),
      RUNS,
    );
  });
  void test('the parsed selector matches the same labels as the generated one', () => {
    fc.assert(
      fc.property(selector(smallKey, smallValue), smallLabels, (sel, labels) => {
        assert.equal(matchesSelector(parse(formatLabelSelector(sel)), labels), matchesSelector(sel, labels));
      }),
      RUNS,
    );
  });
  void test('random strings and mutated selectors never throw', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 200, unit: 'binary' }), mutated(selector(labelKey, labelValue).map(formatLabelSelector))), (s) => {
        const r = parseLabelSelector(s);
        assertWellFormed(r, s);
        if (r.ok) assert.deepEqual(parse(formatLabelSelector(r.value)), r.value, `not canonical: ${s}`);
      }),
      RUNS,
    );
  });
  void test('pathological inputs never throw', () => {
    for (const v of pathological) assertWellFormed(parseLabelSelector(v as string), v);
    assertWellFormed(parseLabelSelector(`a in (${'x,'.repeat(100_000)}x)`), 'long set');
    assertWellFormed(parseLabelSelector(Array.from({ length: 20_000 }, (_, i) => `k${i}`).join(',')), 'many requirements');
    assertNoPollution();
  });
});
