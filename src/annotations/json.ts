/**
 * Safe reading of JSON annotations written by other programs (Multus, users): parse without
 * throwing, and read fields only as own properties with their type checked, so `__proto__` keys,
 * nulls, numbers where strings belong and deep nesting can never crash a parser or pollute a
 * prototype.
 */
import { err, inputError, ok, type InputError, type Result } from '../result.js';

export type JsonObject = Record<string, unknown>;

/** `JSON.parse` that reports failures (syntax errors, stack exhaustion on deep nesting) as a reason. */
export function parseJson(text: string): Result<unknown, string> {
  try {
    return ok(JSON.parse(text) as unknown);
  } catch (e) {
    const detail = e instanceof Error ? e.message : String(e);
    return err(`is not valid JSON (${detail.length > 120 ? `${detail.slice(0, 120)}…` : detail})`);
  }
}

/** Names a JSON value's kind for messages: "null", "a list", "an object", "a number"… */
export function jsonKind(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  switch (typeof v) {
    case 'object':
      return 'an object';
    case 'string':
      return 'a string';
    case 'number':
      return 'a number';
    case 'boolean':
      return 'a boolean';
    default:
      return typeof v;
  }
}

export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** An own property (never one inherited through the prototype chain). */
export function ownField(obj: JsonObject, name: string): unknown {
  return Object.hasOwn(obj, name) ? obj[name] : undefined;
}

/** What is wrong with a field, for a message; the caller adds which entry it is in. */
export type FieldResult<T> = Result<T, string>;

/** An optional string field: absent or null gives `undefined`; any other non-string is an error. */
export function optionalString(obj: JsonObject, name: string): FieldResult<string | undefined> {
  const v = ownField(obj, name);
  if (v === undefined || v === null) return ok(undefined);
  if (typeof v !== 'string') return err(`field "${name}" is ${jsonKind(v)}, expected a string`);
  return ok(v);
}

/** An optional list of strings: absent or null gives `undefined`. */
export function optionalStringList(obj: JsonObject, name: string): FieldResult<string[] | undefined> {
  const v = ownField(obj, name);
  if (v === undefined || v === null) return ok(undefined);
  if (!Array.isArray(v)) return err(`field "${name}" is ${jsonKind(v)}, expected a list of strings`);
  const out: string[] = [];
  for (const [i, item] of (v as unknown[]).entries()) {
    if (typeof item !== 'string') return err(`field "${name}" item ${i + 1} is ${jsonKind(item)}, expected a string`);
    out.push(item);
  }
  return ok(out);
}

/** An optional boolean: absent or null gives `undefined`. */
export function optionalBoolean(obj: JsonObject, name: string): FieldResult<boolean | undefined> {
  const v = ownField(obj, name);
  if (v === undefined || v === null) return ok(undefined);
  if (typeof v !== 'boolean') return err(`field "${name}" is ${jsonKind(v)}, expected true or false`);
  return ok(v);
}

/**
 * The error for an annotation value that is not a string at all (possible when a caller passes a
 * field straight from decoded JSON). Never calls the value's own toString, which could throw.
 */
export function notAStringError(key: string, value: unknown, fix: string): InputError {
  const kind = jsonKind(value);
  const shown = typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint' ? String(value) : kind;
  return inputError(key, shown, `must be a string, not ${kind}`, fix);
}
