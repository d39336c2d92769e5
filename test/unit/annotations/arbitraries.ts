/**
 * fast-check generators and checks shared by the annotation parser tests: valid names of each
 * kind, mutations of valid text, pathological inputs, and the shape every Result must have.
 */
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { Result } from '../../../src/result.js';

/** Moderate run counts keep the unit suite fast on a shared 2-core machine. */
export const RUNS = { numRuns: 1000 } as const;
export const FEW_RUNS = { numRuns: 300 } as const;

export const dnsLabel = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/);
/** Short labels make collisions, duplicates and dotted names more likely than long random ones. */
export const shortLabel = fc.stringMatching(/^[a-z0-9]([-a-z0-9]{0,4}[a-z0-9])?$/);
export const dnsSubdomain = fc
  .array(fc.oneof(shortLabel, dnsLabel), { minLength: 1, maxLength: 5 })
  .map((parts) => parts.join('.'))
  .filter((s) => s.length <= 253);
export const labelValue = fc.stringMatching(/^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/);
export const labelName = fc.stringMatching(/^([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$/);
export const labelKey = fc
  .tuple(
    fc.option(
      fc.array(shortLabel, { minLength: 1, maxLength: 3 }).map((p) => p.join('.')),
      { nil: undefined },
    ),
    labelName,
  )
  .map(([prefix, name]) => (prefix === undefined ? name : `${prefix}/${name}`))
  .filter((k) => k !== 'in' && k !== 'notin');
export const ifname = fc.stringMatching(/^[A-Za-z0-9_.-]{1,15}$/).filter((s) => s !== '.' && s !== '..');

export interface Ref {
  namespace: string;
  name: string;
}
// fc.record builds null-prototype objects; deepEqual against parser output wants plain ones.
export const networkRef: fc.Arbitrary<Ref> = fc.tuple(fc.oneof(shortLabel, dnsLabel), fc.oneof(shortLabel, dnsSubdomain)).map(([namespace, name]) => ({ namespace, name }));

/** Blanks that the parsers ignore around items. */
export const blanks = fc.stringMatching(/^[ \t]{0,3}$/);

/** Random edits of a text: inserted, deleted, replaced and duplicated characters. */
const edit = fc.oneof(
  fc.record({
    op: fc.constant('insert' as const),
    at: fc.nat(),
    text: fc.oneof(fc.string({ maxLength: 3 }), fc.constantFrom(',', '/', '@', '"', '[', ']', '{', '}', ':', '(', ')', '!', '=', ' ', '\\', '.', '-', '_', '\u0000', 'é', '💥')),
  }),
  fc.record({ op: fc.constant('delete' as const), at: fc.nat(), len: fc.integer({ min: 1, max: 3 }) }),
  fc.record({ op: fc.constant('duplicate' as const), at: fc.nat(), len: fc.integer({ min: 1, max: 8 }) }),
);
export function mutated(valid: fc.Arbitrary<string>): fc.Arbitrary<string> {
  return fc.tuple(valid, fc.array(edit, { minLength: 1, maxLength: 4 })).map(([text, edits]) => {
    let s = text;
    for (const e of edits) {
      const at = s.length === 0 ? 0 : e.at % (s.length + 1);
      if (e.op === 'insert') s = s.slice(0, at) + e.text + s.slice(at);
      else if (e.op === 'delete') s = s.slice(0, at) + s.slice(at + e.len);
      else s = s.slice(0, at) + s.slice(at, at + e.len) + s.slice(at);
    }
    return s;
  });
}

/** Inputs that have crashed parsers elsewhere: huge, deeply nested, prototype keys, wrong types. */
export const pathological: readonly unknown[] = [
  '',
  ' ',
  ',',
  ',,,,',
  'a'.repeat(1_000_000),
  ','.repeat(200_000),
  'a,'.repeat(100_000),
  '['.repeat(200_000),
  `${'['.repeat(5000)}${']'.repeat(5000)}`,
  `[${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}]`,
  '('.repeat(100_000),
  '[{"__proto__":{"name":"x"}}]',
  '[{"name":"a","__proto__":{"polluted":true}}]',
  '{"__proto__":[]}',
  '[{"constructor":{"prototype":{"polluted":true}},"name":"a"}]',
  '[null]',
  '[1,2,3]',
  '[[]]',
  '["a"]',
  'null',
  'true',
  '0',
  '"a"',
  '{}',
  '[{}]',
  '[{"name":null}]',
  '[{"name":1}]',
  '[{"name":"a","ips":"10.0.0.1"}]',
  '[{"name":"a","ips":[1]}]',
  '[{"name":"a","ips":[null]}]',
  '[{"name":"a","interface":7}]',
  '[{"name":"a","default":"yes"}]',
  '\u0000',
  '\uD800',
  'a in (',
  '!',
  '!=',
  '==',
  'in',
  'notin',
  'a in',
  'a notin ()',
  {
    toString(): string {
      throw new Error('toString must not be called');
    },
  },
  Symbol('s'),
  10n,
  null,
  undefined,
  42,
  {},
  [],
];

/** Every Result is either ok with a value or an error whose reason and fix say something. */
export function assertWellFormed(r: Result<unknown>, input: unknown): void {
  const shown = typeof input === 'string' ? JSON.stringify(input.slice(0, 80)) : typeof input;
  assert.equal(typeof r, 'object', `result for ${shown} is not an object`);
  if (r.ok) {
    assert.notEqual(r.value, undefined);
    return;
  }
  assert.equal(typeof r.error.key, 'string');
  assert.ok(r.error.key.length > 0, 'error key is empty');
  assert.equal(typeof r.error.value, 'string');
  assert.equal(typeof r.error.reason, 'string');
  assert.ok(r.error.reason.trim().length > 0, `empty reason for ${shown}`);
  assert.equal(typeof r.error.fix, 'string');
  assert.ok(r.error.fix.trim().length > 0, `empty fix for ${shown}`);
}

/** Unwraps an ok result, failing the test with the error otherwise. */
export function expectOk<T>(r: Result<T>): T {
  if (!r.ok) assert.fail(`expected ok, got error: ${r.error.reason}; ${r.error.fix} (value ${JSON.stringify(r.error.value).slice(0, 120)})`);
  return r.value;
}

/** Unwraps an error result, failing the test when it was ok. */
export function expectErr<T>(r: Result<T>): { key: string; value: string; reason: string; fix: string } {
  if (r.ok) assert.fail(`expected an error, got ${JSON.stringify(r.value).slice(0, 200)}`);
  return r.error;
}

/** Canonical IPv6 spelling computed independently of the code under test (WHATWG URL host serialisation). */
export function urlCanonicalIPv6(addr: string): string {
  return new URL(`http://[${addr}]/`).hostname.slice(1, -1);
}

/** No prototype was polluted by any parser run. */
export function assertNoPollution(): void {
  assert.equal((Object.prototype as Record<string, unknown>).polluted, undefined, 'Object.prototype was polluted');
  assert.equal(({} as Record<string, unknown>).name, undefined, 'Object.prototype gained a name');
}
