/**
 * Kubernetes label-selector strings, as `kubectl -l` and the `labelSelector` query parameter take
 * them, for the `k8s.v1.cni.cncf.io/service-selector` annotation.
 *
 * Grammar (requirements joined by ',' mean AND; blanks between tokens are ignored):
 *   key            the label exists
 *   !key           the label does not exist
 *   key=value      key==value      key!=value      (value may be empty: `key=`)
 *   key in (v1,v2)   key notin (v1,v2)             (empty items are empty values, as in Kubernetes)
 * Keys are qualified names (`app`, `example.com/tier`); values are label values. `in`/`notin` are
 * keywords where a key or operator is expected, but ordinary words as values. The `>`/`<` numeric
 * operators of the Kubernetes parser are not supported (the Operator type has no place for them).
 *
 * The empty (or all-blank) string is the selector that selects everything, as in Kubernetes. It is
 * the caller's decision whether that is allowed: on the service-selector annotation, selecting
 * every pod of the namespace is rarely meant, so the webhook may reject it.
 *
 * Parsed selectors are canonical: requirements sorted by key, values sorted and deduplicated, so two
 * spellings of the same selector compare equal, and `formatLabelSelector` writes the one string.
 */
import { SERVICE_SELECTOR_ANNOTATION } from '../keys.js';
import { err, inputError, ok, showValue, type Result } from '../result.js';
import { checkLabelKey, checkLabelValue, LABEL_KEY_RULE, LABEL_VALUE_RULE } from './names.js';
import { notAStringError } from './json.js';
import { compareText } from '../order.js';

export type Operator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
export interface Requirement {
  key: string;
  operator: Operator;
  values: string[];
}
export interface LabelSelector {
  requirements: Requirement[];
}

const SYNTAX = 'write requirements like "app=web", "tier!=db", "env in (prod,staging)", "env notin (dev)", "app" or "!canary", joined by commas';

// ---- lexer -------------------------------------------------------------------------------------

type TokenKind = 'id' | '!' | '!=' | '=' | '==' | '(' | ')' | ',' | '>' | '<' | 'end';
interface Token {
  kind: TokenKind;
  text: string;
  /** 1-based character offset in the value, for messages. */
  pos: number;
}

const isBlank = (c: string): boolean => c === ' ' || c === '\t' || c === '\n' || c === '\r';
const isSpecial = (c: string): boolean => c === '!' || c === '=' || c === '>' || c === '<' || c === '(' || c === ')' || c === ',';

/** Splits as Kubernetes' lexer does: identifiers run until a blank or one of `!=<>(),`. */
function lex(value: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < value.length) {
    const c = value[i] ?? '';
    if (isBlank(c)) {
      i += 1;
      continue;
    }
    if (isSpecial(c)) {
      const two = value.slice(i, i + 2);
      if (two === '!=' || two === '==') {
        tokens.push({ kind: two, text: two, pos: i + 1 });
        i += 2;
      } else {
        tokens.push({ kind: c as TokenKind, text: c, pos: i + 1 });
        i += 1;
      }
      continue;
    }
    let j = i;
    while (j < value.length && !isBlank(value[j] ?? '') && !isSpecial(value[j] ?? '')) j += 1;
    tokens.push({ kind: 'id', text: value.slice(i, j), pos: i + 1 });
    i = j;
  }
  tokens.push({ kind: 'end', text: '', pos: value.length + 1 });
  return tokens;
}

// ---- parser ------------------------------------------------------------------------------------

interface Problem {
  reason: string;
  fix: string;
}

function describe(t: Token): string {
  return t.kind === 'end' ? 'the end of the value' : `${showValue(t.text)} at position ${t.pos}`;
}

class Parser {
  private i = 0;
  constructor(private readonly tokens: Token[]) {}

  private peek(): Token {
    // The token list always ends with 'end', and the index never passes it.
    return this.tokens[this.i] ?? { kind: 'end', text: '', pos: 0 };
  }

  private next(): Token {
    const t = this.peek();
    if (t.kind !== 'end') this.i += 1;
    return t;
  }

  parse(): Result<Requirement[], Problem> {
    const reqs: Requirement[] = [];
    for (;;) {
      const r = this.requirement();
      if (!r.ok) return r;
      reqs.push(r.value);
      const t = this.next();
      if (t.kind === 'end') return ok(reqs);
      if (t.kind !== ',') {
        return err({ reason: `found ${describe(t)} where ',' or the end was expected`, fix: `separate requirements with commas; ${SYNTAX}` });
      }
      if (this.peek().kind === 'end') {
        return err({ reason: `the value ends with ',' at position ${t.pos}`, fix: 'remove the trailing comma or add a requirement after it' });
      }
    }
  }

  private key(negated: boolean): Result<string, Problem> {
    const t = this.next();
    if (t.kind !== 'id') {
      const where = negated ? "after '!'" : 'at the start of a requirement';
      return err({ reason: `found ${describe(t)} where a label key was expected (${where})`, fix: SYNTAX });
    }
    if (t.text === 'in' || t.text === 'notin') {
      return err({ reason: `found the keyword ${showValue(t.text)} at position ${t.pos} where a label key was expected`, fix: `write the label key before "${t.text}"; ${SYNTAX}` });
    }
    const why = checkLabelKey(t.text);
    if (why !== undefined) return err({ reason: `the label key ${showValue(t.text)} at position ${t.pos} ${why}`, fix: `a label key is ${LABEL_KEY_RULE}` });
    return ok(t.text);
  }

  private value(t: Token): Result<string, Problem> {
    const why = checkLabelValue(t.text);
    if (why !== undefined) return err({ reason: `the label value ${showValue(t.text)} at position ${t.pos} ${why}`, fix: `a label value is ${LABEL_VALUE_RULE}` });
    return ok(t.text);
  }

  private requirement(): Result<Requirement, Problem> {
    const negated = this.peek().kind === '!';
    if (negated) this.next();
    const key = this.key(negated);
    if (!key.ok) return key;
    if (negated) return ok({ key: key.value, operator: 'DoesNotExist', values: [] });
    const op = this.peek();
    switch (op.kind) {
      case ',':
      case 'end':
        return ok({ key: key.value, operator: 'Exists', values: [] });
      case '=':
      case '==':
      case '!=': {
        this.next();
        const operator: Operator = op.kind === '!=' ? 'NotIn' : 'In';
        const v = this.peek();
        // `key=` is an empty value, as in Kubernetes.
        if (v.kind === ',' || v.kind === 'end') return ok({ key: key.value, operator, values: [''] });
        if (v.kind !== 'id') {
          return err({ reason: `found ${describe(v)} where a value was expected after ${showValue(op.text)}`, fix: `write one label value after "${op.text}", e.g. "${key.value}${op.text}web"` });
        }
        this.next();
        const value = this.value(v);
        if (!value.ok) return value;
        return ok({ key: key.value, operator, values: [value.value] });
      }
      case '>':
      case '<':
        return err({ reason: `the operator ${showValue(op.text)} at position ${op.pos} is not supported here`, fix: `use "${key.value} in (...)" with the accepted values listed` });
      case 'id':
        if (op.text === 'in' || op.text === 'notin') {
          this.next();
          return this.setRequirement(key.value, op.text === 'in' ? 'In' : 'NotIn', op.text);
        }
        return err({ reason: `found ${describe(op)} after the key ${showValue(key.value)} where an operator was expected`, fix: SYNTAX });
      default:
        return err({ reason: `found ${describe(op)} after the key ${showValue(key.value)} where an operator was expected`, fix: SYNTAX });
    }
  }

  private setRequirement(key: string, operator: Operator, word: string): Result<Requirement, Problem> {
    const example = `write e.g. "${key} ${word} (value1,value2)"`;
    const open = this.next();
    if (open.kind !== '(') return err({ reason: `found ${describe(open)} where '(' was expected after "${word}"`, fix: example });
    const values: string[] = [];
    let current: string | undefined;
    for (;;) {
      const t = this.next();
      if (t.kind === 'id') {
        if (current !== undefined) return err({ reason: `found ${describe(t)} where ',' or ')' was expected after the value ${showValue(current)}`, fix: `separate values with commas; ${example}` });
        const v = this.value(t);
        if (!v.ok) return v;
        current = v.value;
      } else if (t.kind === ',' || t.kind === ')') {
        // An empty item is the empty value, as in Kubernetes (`()`, `(a,)`, `(,a)`).
        values.push(current ?? '');
        current = undefined;
        if (t.kind === ')') return ok({ key, operator, values });
      } else if (t.kind === 'end') {
        return err({ reason: `the value list opened at position ${open.pos} has no closing ')'`, fix: example });
      } else {
        return err({ reason: `found ${describe(t)} inside the value list of ${showValue(key)}`, fix: example });
      }
    }
  }
}

// ---- canonical form ----------------------------------------------------------------------------

function canonicalRequirement(r: Requirement): Requirement {
  const values = r.operator === 'In' || r.operator === 'NotIn' ? [...new Set(r.values)].sort(compareText) : [];
  return { key: r.key, operator: r.operator, values };
}

function formatRequirement(r: Requirement): string {
  switch (r.operator) {
    case 'Exists':
      return r.key;
    case 'DoesNotExist':
      return `!${r.key}`;
    case 'In':
      return r.values.length === 1 ? `${r.key}=${r.values[0] ?? ''}` : `${r.key} in (${r.values.join(',')})`;
    case 'NotIn':
      return r.values.length === 1 ? `${r.key}!=${r.values[0] ?? ''}` : `${r.key} notin (${r.values.join(',')})`;
  }
}

/** Sorted by key, then by their written form, so equal selectors have equal requirement lists. */
function canonical(reqs: readonly Requirement[]): Requirement[] {
  return reqs
    .map(canonicalRequirement)
    .map((r) => ({ r, text: formatRequirement(r) }))
    .sort((a, b) => compareText(a.r.key, b.r.key) || compareText(a.text, b.text))
    .map(({ r }) => r);
}

// ---- API ---------------------------------------------------------------------------------------

export function parseLabelSelector(value: string, key: string = SERVICE_SELECTOR_ANNOTATION): Result<LabelSelector> {
  if (typeof value !== 'string') {
    return err(notAStringError(key, value, SYNTAX));
  }
  const tokens = lex(value);
  if (tokens.length === 1) return ok({ requirements: [] });
  const parsed = new Parser(tokens).parse();
  if (!parsed.ok) return err(inputError(key, value, parsed.error.reason, parsed.error.fix));
  return ok({ requirements: canonical(parsed.value) });
}

/** `spec.selector`-style map: every key must equal its value. Keys are taken as they are. */
export function selectorFromMap(map: Record<string, string>): LabelSelector {
  return { requirements: canonical(Object.keys(map).map((k) => ({ key: k, operator: 'In' as const, values: [map[k] ?? ''] }))) };
}

/**
 * Kubernetes semantics: `!=`/`notin` also match when the label is absent; the empty selector matches all.
 *
 * Hot: the controller calls this for every candidate pod of every Service. Plain loops and no
 * closure per call: esbuild's `keepNames` (tsx, the bundle) wraps every function expression with
 * `__name()`, which made a per-call closure cost ten times the matching itself.
 */
export function matchesSelector(sel: LabelSelector, labels: Record<string, string> | undefined): boolean {
  for (const r of sel.requirements) {
    if (!matchesRequirement(r, labels)) return false;
  }
  return true;
}

function matchesRequirement(r: Requirement, labels: Record<string, string> | undefined): boolean {
  // `null` too: JSON from the API may carry it where the type says undefined.
  const present = labels !== undefined && labels !== null && Object.hasOwn(labels, r.key);
  switch (r.operator) {
    case 'Exists':
      return present;
    case 'DoesNotExist':
      return !present;
    case 'In':
      return present && r.values.includes(labels[r.key] ?? '');
    case 'NotIn':
      return !present || !r.values.includes(labels[r.key] ?? '');
  }
}

/**
 * The canonical string: requirements sorted, values sorted and deduplicated, single values written
 * with `=`/`!=`. For a selector whose keys and values are valid, it parses back to the canonical
 * form of `sel` (equal to `sel` when `sel` came from `parseLabelSelector` or `selectorFromMap`).
 */
export function formatLabelSelector(sel: LabelSelector): string {
  return canonical(sel.requirements).map(formatRequirement).join(',');
}
