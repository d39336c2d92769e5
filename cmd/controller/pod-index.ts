/**
 * Both directions of the pod ↔ Service selector match, by lookup instead of by scan:
 * - `PodIndex`: a Service's pods. Pods per namespace, with an inverted index of their labels
 *   (key → value → pod names). A selector's `in`/`=` or exists requirement names a few posting
 *   sets; the smallest requirement's pods are the candidates, and `matchesSelector` decides.
 * - `SelectorIndex`: a pod's Services. Each Service's selector is filed under one of its
 *   requirements (its anchor: `key=value` pairs, or a key for an exists requirement); a pod's
 *   candidates are the selectors filed under its own labels, plus those with no anchor
 *   (only `!=`, `notin`, `!key`), and again `matchesSelector` decides.
 *
 * With 1,000 Services × 10 pods in one namespace, a scan is 10 million matches each way on a cold
 * start; the lookups are about one per pod. Candidates are always verified with the real matcher,
 * so an extra candidate costs a match but never adds a wrong answer; a missing one would drop a
 * right answer, which is what the property tests compare against a scan. Both keep their own copy
 * of what they indexed (labels, selector), so an update removes exactly the old entries even if
 * someone mutated the old object.
 */
import { matchesSelector, type LabelSelector } from '../../src/annotations/label-selector.js';
import type { V1Pod } from '../../src/kube/types.js';

type Labels = Readonly<Record<string, string>>;

/** key → value → names. */
type Postings = Map<string, Map<string, Set<string>>>;

function post(p: Postings, key: string, value: string, name: string): void {
  let values = p.get(key);
  if (values === undefined) {
    values = new Map();
    p.set(key, values);
  }
  let names = values.get(value);
  if (names === undefined) {
    names = new Set();
    values.set(value, names);
  }
  names.add(name);
}

function unpost(p: Postings, key: string, value: string, name: string): void {
  const values = p.get(key);
  const names = values?.get(value);
  if (values === undefined || names === undefined) return;
  names.delete(name);
  if (names.size > 0) return;
  values.delete(value);
  if (values.size === 0) p.delete(key);
}

/** A label map as data: own entries only, `null`/absent as empty (null prototype: `__proto__` stays a key). */
function copyLabels(labels: Record<string, string> | undefined | null): Labels {
  const out = Object.create(null) as Record<string, string>;
  if (labels === undefined || labels === null) return out;
  for (const k of Object.keys(labels)) out[k] = labels[k] ?? '';
  return out;
}

function sameLabels(a: Labels, b: Record<string, string> | undefined | null): boolean {
  const bk = b === undefined || b === null ? [] : Object.keys(b);
  const ak = Object.keys(a);
  if (ak.length !== bk.length) return false;
  for (const k of bk) if (!Object.hasOwn(a, k) || a[k] !== b?.[k]) return false;
  return true;
}

// ---- pods by label ---------------------------------------------------------------------------

interface PodEntry {
  readonly pod: V1Pod;
  readonly labels: Labels;
}

interface NamespacePods {
  readonly pods: Map<string, PodEntry>;
  readonly labels: Postings;
}

export class PodIndex {
  private readonly namespaces = new Map<string, NamespacePods>();

  /** Adds or replaces the pod (by namespace and name), re-indexing its labels when they changed. */
  set(pod: V1Pod): void {
    const ns = pod.metadata?.namespace ?? '';
    const name = pod.metadata?.name ?? '';
    let n = this.namespaces.get(ns);
    if (n === undefined) {
      n = { pods: new Map(), labels: new Map() };
      this.namespaces.set(ns, n);
    }
    const old = n.pods.get(name);
    const raw = pod.metadata?.labels;
    if (old !== undefined && sameLabels(old.labels, raw)) {
      n.pods.set(name, { pod, labels: old.labels });
      return;
    }
    if (old !== undefined) for (const k of Object.keys(old.labels)) unpost(n.labels, k, old.labels[k] ?? '', name);
    const labels = copyLabels(raw);
    for (const k of Object.keys(labels)) post(n.labels, k, labels[k] ?? '', name);
    n.pods.set(name, { pod, labels });
  }

  delete(namespace: string, name: string): void {
    const n = this.namespaces.get(namespace);
    const old = n?.pods.get(name);
    if (n === undefined || old === undefined) return;
    for (const k of Object.keys(old.labels)) unpost(n.labels, k, old.labels[k] ?? '', name);
    n.pods.delete(name);
    if (n.pods.size === 0) this.namespaces.delete(namespace);
  }

  get(namespace: string, name: string): V1Pod | undefined {
    return this.namespaces.get(namespace)?.pods.get(name)?.pod;
  }

  /** Namespaces that hold at least one pod. */
  namespaceNames(): string[] {
    return [...this.namespaces.keys()];
  }

  /** Every pod of the namespace, in no particular order. */
  inNamespace(namespace: string): V1Pod[] {
    const n = this.namespaces.get(namespace);
    return n === undefined ? [] : [...n.pods.values()].map((e) => e.pod);
  }

  size(): number {
    let total = 0;
    for (const n of this.namespaces.values()) total += n.pods.size;
    return total;
  }

  /** The pods of the namespace that the selector matches, in no particular order. */
  select(namespace: string, sel: LabelSelector): V1Pod[] {
    const n = this.namespaces.get(namespace);
    if (n === undefined) return [];
    const candidates = smallestPostings(n.labels, sel);
    const out: V1Pod[] = [];
    if (candidates === undefined) {
      // Only `!=`, `notin`, `!key` (or nothing): every pod may match, so look at every pod.
      for (const e of n.pods.values()) if (matchesSelector(sel, e.labels)) out.push(e.pod);
      return out;
    }
    for (const names of candidates) {
      for (const name of names) {
        const e = n.pods.get(name);
        if (e !== undefined && matchesSelector(sel, e.labels)) out.push(e.pod);
      }
    }
    return out;
  }
}

/**
 * The posting sets of the selector's most selective positive requirement (`in`/`=`: the sets of
 * its values; exists: every set of the key), or undefined when it has none. A pod has one value
 * per key, so the sets of one requirement never overlap: no pod is listed twice.
 */
function smallestPostings(p: Postings, sel: LabelSelector): Set<string>[] | undefined {
  let best: Set<string>[] | undefined;
  let bestSize = Infinity;
  for (const r of sel.requirements) {
    if (r.operator !== 'In' && r.operator !== 'Exists') continue;
    const values = p.get(r.key);
    if (values === undefined) return []; // nobody has the key: nothing can match
    const sets: Set<string>[] = [];
    let size = 0;
    if (r.operator === 'In') {
      for (const v of r.values) {
        const s = values.get(v);
        if (s !== undefined) {
          sets.push(s);
          size += s.size;
        }
      }
    } else {
      for (const s of values.values()) {
        sets.push(s);
        size += s.size;
      }
    }
    if (size < bestSize) {
      best = sets;
      bestSize = size;
      if (size === 0) break;
    }
  }
  return best;
}

// ---- selectors by anchor ---------------------------------------------------------------------

interface SelectorEntry {
  readonly selector: LabelSelector;
  readonly anchor: Anchor;
}

/** Where a selector is filed: under `key=value` pairs, under a key, or nowhere (always a candidate). */
type Anchor = { readonly kind: 'values'; readonly key: string; readonly values: readonly string[] } | { readonly kind: 'key'; readonly key: string } | { readonly kind: 'none' };

interface NamespaceSelectors {
  readonly entries: Map<string, SelectorEntry>;
  readonly byValue: Postings;
  readonly byKey: Map<string, Set<string>>;
  readonly unanchored: Set<string>;
}

/** The `in`/`=` requirement with the fewest values, else an exists requirement, else none. */
function anchorOf(sel: LabelSelector): Anchor {
  let anchor: Anchor = { kind: 'none' };
  for (const r of sel.requirements) {
    if (r.operator === 'In' && (anchor.kind !== 'values' || r.values.length < anchor.values.length)) anchor = { kind: 'values', key: r.key, values: [...r.values] };
    else if (r.operator === 'Exists' && anchor.kind === 'none') anchor = { kind: 'key', key: r.key };
  }
  return anchor;
}

function copySelector(sel: LabelSelector): LabelSelector {
  return { requirements: sel.requirements.map((r) => ({ key: r.key, operator: r.operator, values: [...r.values] })) };
}

function collectMatches(n: NamespaceSelectors, names: Iterable<string> | undefined, labels: Record<string, string> | undefined, out: string[]): void {
  if (names === undefined) return;
  for (const name of names) {
    const e = n.entries.get(name);
    if (e !== undefined && matchesSelector(e.selector, labels)) out.push(name);
  }
}

/** Named selectors per namespace (the Services that select pods), looked up by a pod's labels. */
export class SelectorIndex {
  private readonly namespaces = new Map<string, NamespaceSelectors>();

  /** Files the selector under `name`, replacing what was there; `undefined` removes it. */
  set(namespace: string, name: string, sel: LabelSelector | undefined): void {
    this.delete(namespace, name);
    if (sel === undefined) return;
    let n = this.namespaces.get(namespace);
    if (n === undefined) {
      n = { entries: new Map(), byValue: new Map(), byKey: new Map(), unanchored: new Set() };
      this.namespaces.set(namespace, n);
    }
    const selector = copySelector(sel);
    const anchor = anchorOf(selector);
    n.entries.set(name, { selector, anchor });
    if (anchor.kind === 'values') for (const v of anchor.values) post(n.byValue, anchor.key, v, name);
    else if (anchor.kind === 'key') {
      let names = n.byKey.get(anchor.key);
      if (names === undefined) {
        names = new Set();
        n.byKey.set(anchor.key, names);
      }
      names.add(name);
    } else n.unanchored.add(name);
  }

  delete(namespace: string, name: string): void {
    const n = this.namespaces.get(namespace);
    const e = n?.entries.get(name);
    if (n === undefined || e === undefined) return;
    const a = e.anchor;
    if (a.kind === 'values') for (const v of a.values) unpost(n.byValue, a.key, v, name);
    else if (a.kind === 'key') {
      const names = n.byKey.get(a.key);
      names?.delete(name);
      if (names?.size === 0) n.byKey.delete(a.key);
    } else n.unanchored.delete(name);
    n.entries.delete(name);
    if (n.entries.size === 0) this.namespaces.delete(namespace);
  }

  /** Names of the namespace's selectors that match the labels, each once, in no particular order. */
  matching(namespace: string, labels: Record<string, string> | undefined): string[] {
    const n = this.namespaces.get(namespace);
    if (n === undefined) return [];
    const out: string[] = [];
    collectMatches(n, n.unanchored, labels, out);
    if (labels !== undefined && labels !== null) {
      // Each selector is filed once, and a pod has one value per key: no name comes up twice.
      for (const k of Object.keys(labels)) {
        collectMatches(n, n.byKey.get(k), labels, out);
        collectMatches(n, n.byValue.get(k)?.get(labels[k] ?? ''), labels, out);
      }
    }
    return out;
  }
}
