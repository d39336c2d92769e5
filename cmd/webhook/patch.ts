/**
 * JSON Patch (RFC 6902) from the object the apiserver sent to the object we want, so the
 * mutation code can simply build the desired object and never hand-write patch paths.
 *
 * - Keys are escaped as JSON Pointer requires (`~` -> `~0`, `/` -> `~1`): annotation and label
 *   keys such as `kubectl.kubernetes.io/default-container` contain slashes.
 * - A missing parent is added whole (`add /metadata/labels {...}`), never as a child of a path
 *   that does not exist, which the apiserver would reject.
 * - Arrays: when the new array is the old one with elements inserted (the sidecar in front of
 *   the init containers, a volume appended), each insertion is an `add` at its index, so the
 *   patch does not rewrite elements it does not change. Same length: element by element.
 *   Anything else: the array is replaced.
 * - Cost: a subtree that is the same object on both sides (what a copy-on-write mutation
 *   leaves everywhere it did not change) is skipped without looking inside, so a patch costs
 *   what changed, not the size of the pod (a 1 MB pod with managedFields included).
 * Only JSON values are expected; a property whose value is `undefined` counts as absent.
 */
import type { PatchOperation } from './responses.js';

/** One JSON Pointer reference token. */
export function escapePointerToken(key: string): string {
  return key.replace(/~/g, '~0').replace(/\//g, '~1');
}

type JsonObject = Record<string, unknown>;

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** An own property only: a key such as `constructor` or `toString` must not find Object.prototype's. */
function own(o: JsonObject, k: string): unknown {
  return Object.prototype.hasOwnProperty.call(o, k) ? o[k] : undefined;
}

function definedKeys(o: JsonObject): string[] {
  return Object.keys(o).filter((k) => o[k] !== undefined);
}

/** Equality of JSON values (object key order and undefined-valued keys do not matter). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => jsonEqual(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = definedKeys(a);
    const kb = definedKeys(b);
    return ka.length === kb.length && ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && jsonEqual(a[k], b[k]));
  }
  return false;
}

/**
 * Indices of `to` that are insertions when `from` is a subsequence of `to` under `same`;
 * undefined when it is not.
 */
function insertionsBy(from: readonly unknown[], to: readonly unknown[], same: (a: unknown, b: unknown) => boolean): number[] | undefined {
  const inserted: number[] = [];
  let i = 0;
  for (let j = 0; j < to.length; j++) {
    if (i < from.length && same(from[i], to[j])) i++;
    else inserted.push(j);
  }
  return i === from.length ? inserted : undefined;
}

/**
 * By identity first: a copy-on-write mutation keeps the old elements themselves, so this costs
 * O(length) and never looks inside them; by value only for targets built some other way.
 */
function insertedIndices(from: readonly unknown[], to: readonly unknown[]): number[] | undefined {
  return insertionsBy(from, to, (a, b) => a === b) ?? insertionsBy(from, to, jsonEqual);
}

function diffArrays(from: readonly unknown[], to: readonly unknown[], path: string, ops: PatchOperation[]): void {
  const inserted = to.length > from.length ? insertedIndices(from, to) : undefined;
  if (inserted !== undefined) {
    // In ascending order: before inserting at j, to[0..j-1] are already in place.
    for (const j of inserted) ops.push({ op: 'add', path: `${path}/${j}`, value: to[j] });
  } else if (to.length === from.length) {
    from.forEach((x, i) => diffValues(x, to[i], `${path}/${i}`, ops));
  } else {
    ops.push({ op: 'replace', path, value: to });
  }
}

/**
 * Identical subtrees (`from === to`, which a copy-on-write mutation leaves everywhere it did not
 * change) cost O(1); objects are compared key by key through this same recursion rather than by a
 * jsonEqual of the whole subtree at every level, which made each diff O(size × depth).
 */
function diffValues(from: unknown, to: unknown, path: string, ops: PatchOperation[]): void {
  if (from === to) return;
  if (isObject(from) && isObject(to)) {
    for (const k of Object.keys(from)) {
      if (from[k] !== undefined && own(to, k) === undefined) ops.push({ op: 'remove', path: `${path}/${escapePointerToken(k)}` });
    }
    for (const k of Object.keys(to)) {
      const t = to[k];
      const f = own(from, k);
      if (t === undefined || t === f) continue;
      const p = `${path}/${escapePointerToken(k)}`;
      if (f === undefined) ops.push({ op: 'add', path: p, value: t });
      else diffValues(f, t, p, ops);
    }
  } else if (Array.isArray(from) && Array.isArray(to)) {
    diffArrays(from, to, path, ops);
  } else {
    ops.push({ op: 'replace', path, value: to });
  }
}

/** The operations that turn `original` into `mutated`; empty when they are equal. */
export function createPatch(original: unknown, mutated: unknown): PatchOperation[] {
  const ops: PatchOperation[] = [];
  diffValues(original, mutated, '', ops);
  return ops;
}
