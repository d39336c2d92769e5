/**
 * The dataplane's incremental engine: every stage of a sync is one keyed map from key to value
 * (Service -> targets, chain -> resolved target, chain -> rule lines, chain -> nftables part), and
 * a step of a stage takes what changed in its input, by key, to what changed in its output, by key.
 *
 * ONE INVARIANT. After any sequence of steps, a stage's output holds exactly the entries its
 * from-scratch function gives for the same input, and `changedEntries(before, after)` is exactly
 * the keys whose value differs between two of its outputs (test/sidecar/incremental.test.ts holds
 * every stage, for both rule back ends, to that over random event sequences).
 *
 * What makes a step cost the change and not the table is this module's `Snapshot`: an immutable
 * map that shares its contents with the version it was made from. A step makes the next version
 * in O(changes), the planner reads the difference between what was applied and what is wanted in
 * O(changes), and the versions a sync keeps (what was applied last) are never changed under it.
 */

/** One key's change between two versions: `before` undefined is an addition, `after` undefined a removal. */
export interface Change<V> {
  readonly before: V | undefined;
  readonly after: V | undefined;
}

const GONE: unique symbol = Symbol('gone');

/** Each base Map gets a number: a snapshot names the base it was folded from by it, without keeping that Map alive. */
let bases = 0;
const nextBase = (): number => (bases += 1);

/**
 * An immutable map made of a shared `base` (never changed once made) and a small overlay of the
 * keys changed since. `with` makes the next version by copying the overlay only; once the overlay
 * outgrows √size (at least 32) it is folded into a new base, so lookups stay O(1) and the fold's
 * O(size) comes once per √size changes. Iteration order is a Map's: a replaced key keeps its
 * place, a new key comes last.
 */
export class Snapshot<K, V> implements ReadonlyMap<K, V> {
  private constructor(
    private readonly base: ReadonlyMap<K, V>,
    private readonly overlay: ReadonlyMap<K, V | typeof GONE>,
    readonly size: number,
    /** Σ measure(value): kept by every step, so a count over the whole map costs nothing. */
    readonly total: number,
    private readonly measure: (v: V) => number,
    /** The base's number (see `bases`): what touchedSince compares. */
    private readonly baseId: number,
    /**
     * A base made by a fold: the number of the base it was folded from and the keys the fold moved
     * in, so the difference from a version of that base still costs the change (touchedSince).
     */
    private readonly folded: { readonly from: number; readonly keys: readonly K[] } | undefined,
  ) {}

  /** A snapshot owning `entries` (a Map passed in is adopted, not copied: the caller must not change it). */
  static of<K, V>(entries: Map<K, V> | Iterable<readonly [K, V]>, measure: (v: V) => number = () => 0): Snapshot<K, V> {
    const base: Map<K, V> = entries instanceof Map ? entries : new Map(entries);
    let total = 0;
    base.forEach((v) => void (total += measure(v)));
    return new Snapshot<K, V>(base, new Map<K, V | typeof GONE>(), base.size, total, measure, nextBase(), undefined);
  }

  get(k: K): V | undefined {
    const o = this.overlay.get(k);
    if (o !== undefined) return o === GONE ? undefined : o;
    return this.base.get(k);
  }

  has(k: K): boolean {
    const o = this.overlay.get(k);
    if (o !== undefined) return o !== GONE;
    return this.base.has(k);
  }

  /** The next version: each `[key, value]` sets the key, `[key, undefined]` removes it. O(overlay + changes). */
  with(changes: Iterable<readonly [K, V | undefined]>): Snapshot<K, V> {
    const overlay = new Map(this.overlay);
    let { size, total } = this;
    // What a key holds so far in this step (a key may come twice in `changes`).
    const now = (k: K): V | typeof GONE | undefined => (overlay.has(k) ? overlay.get(k) : this.base.has(k) ? this.base.get(k) : GONE);
    for (const [k, v] of changes) {
      const cur = now(k);
      const present = cur !== GONE;
      const had = cur === GONE ? undefined : cur;
      if (had !== undefined) total -= this.measure(had);
      if (v === undefined) {
        if (!present) continue;
        size -= 1;
        if (this.base.has(k)) overlay.set(k, GONE);
        else overlay.delete(k);
        continue;
      }
      // A Map puts a key deleted and added again last: only a new base can say that (rare: a render replaces in place).
      if (overlay.get(k) === GONE) return this.rebuilt(changes);
      if (!present) size += 1;
      total += this.measure(v);
      overlay.set(k, v);
    }
    const next = new Snapshot(this.base, overlay, size, total, this.measure, this.baseId, this.folded);
    return overlay.size > Math.max(32, Math.sqrt(size)) ? Snapshot.fold(next) : next;
  }

  private rebuilt(changes: Iterable<readonly [K, V | undefined]>): Snapshot<K, V> {
    const m = new Map<K, V>(this.entries());
    for (const [k, v] of changes) {
      if (v === undefined) m.delete(k);
      else m.set(k, v);
    }
    return Snapshot.of(m, this.measure);
  }

  /**
   * The same entries on a new base: a copy of the base (the engine's own Map copy, ~10x faster than
   * one through entries()) with the overlay applied, which keeps entries()'s order (a replaced key
   * keeps its place, a GONE key is one of the base's, a new key comes last in overlay order).
   */
  private static fold<K, V>(s: Snapshot<K, V>): Snapshot<K, V> {
    const base = new Map<K, V>(s.base);
    for (const [k, o] of s.overlay) {
      if (o === GONE) base.delete(k);
      else base.set(k, o);
    }
    return new Snapshot<K, V>(base, new Map<K, V | typeof GONE>(), s.size, s.total, s.measure, nextBase(), { from: s.baseId, keys: [...s.overlay.keys()] });
  }

  *entries(): MapIterator<[K, V]> {
    for (const [k, v] of this.base) {
      const o = this.overlay.get(k);
      if (o === undefined) yield [k, v];
      else if (o !== GONE) yield [k, o];
    }
    for (const [k, o] of this.overlay) if (o !== GONE && !this.base.has(k)) yield [k, o];
  }

  // Without an overlay (a from-scratch render, a fold) the base's own iterators: no generator
  // and no [key, value] pair per entry (a first sync at 10,000 Services walks the table thrice).
  keys(): MapIterator<K> {
    return this.overlay.size === 0 ? this.base.keys() : this.keysOf();
  }

  values(): MapIterator<V> {
    return this.overlay.size === 0 ? this.base.values() : this.valuesOf();
  }

  private *keysOf(): MapIterator<K> {
    for (const [k] of this.entries()) yield k;
  }

  private *valuesOf(): MapIterator<V> {
    for (const [, v] of this.entries()) yield v;
  }

  [Symbol.iterator](): MapIterator<[K, V]> {
    return this.entries();
  }

  forEach(fn: (value: V, key: K, map: ReadonlyMap<K, V>) => void): void {
    for (const [k, v] of this.entries()) fn(v, k, this);
  }

  /**
   * The keys whose value may differ from `other`'s: the two overlays' keys when both share a base,
   * and also the fold's keys when one's base was folded from the other's (a sync's next version
   * after a fold, against the applied one: without this, one change in √size would diff the whole
   * map, B2's p99 at 10,000 Services). Undefined when the bases are further apart.
   */
  touchedSince(other: Snapshot<K, V>): Iterable<K> | undefined {
    const fold = other.baseId === this.baseId ? [] : this.folded?.from === other.baseId ? this.folded.keys : other.folded?.from === this.baseId ? other.folded.keys : undefined;
    if (fold === undefined) return undefined;
    const keys = new Set(this.overlay.keys());
    for (const k of other.overlay.keys()) keys.add(k);
    for (const k of fold) keys.add(k);
    return keys;
  }
}

/**
 * What differs from `before` to `after`, by key (values compared with `same`, identity by
 * default), sorted by key so the order does not depend on how the versions were made. Two
 * versions of one Snapshot cost the keys changed between them; anything else costs both sizes.
 */
export function changedEntries<K extends string, V>(before: ReadonlyMap<K, V> | undefined, after: ReadonlyMap<K, V>, same: (a: V, b: V) => boolean = (a, b) => a === b): [K, Change<V>][] {
  const out: [K, Change<V>][] = [];
  const look = (k: K): void => {
    const b = before?.get(k);
    const a = after.get(k);
    if (b === undefined && a === undefined) return;
    if (b !== undefined && a !== undefined && same(b, a)) return;
    out.push([k, { before: b, after: a }]);
  };
  const touched = before instanceof Snapshot && after instanceof Snapshot ? (after as Snapshot<K, V>).touchedSince(before as Snapshot<K, V>) : undefined;
  if (touched !== undefined) for (const k of touched) look(k);
  else {
    for (const k of after.keys()) look(k);
    if (before !== undefined) for (const k of before.keys()) if (!after.has(k)) look(k);
  }
  return out.sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
}
