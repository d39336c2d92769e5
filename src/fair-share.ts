/**
 * Max-min fair division of one capacity (a network's targets in a client) between namespaces.
 * Pure; shared by the sidecar (src/service-cap.ts) and the node agent.
 *
 * Any namespace allowed on a network can add Services to it, and each Service port costs rules and
 * memory in every client there. A first-come or name order lets the namespace that sorts first
 * push every other one out; max-min does not: a namespace whose demand is at most the equal share
 * keeps everything, and only the namespaces above the level the capacity allows lose, and only
 * their own items.
 *
 * - `own` (the client's own namespace) is served first, up to the whole capacity;
 * - the rest is divided at the water level L: the largest whole number with
 *   sum(min(demand, L)) <= the rest. A namespace whose demand is at most L keeps all; one above
 *   it keeps its items first-fit, in its own order (`rank`), within L;
 * - items of weight 0 cost nothing and are always kept.
 * The result depends on demands and each namespace's own ranking only, never on how namespace
 * names sort against each other; the kept weight is at most `cap`.
 */

export interface ShareItem<T> {
  readonly item: T;
  readonly namespace: string;
  /** What it costs (targets); 0 is free. */
  readonly weight: number;
  /** Order inside its namespace (lower first); ties keep input order. */
  readonly rank: string;
}

export interface NamespaceOver<T> {
  readonly namespace: string;
  /** What the namespace asked for and what it was allowed (its share). */
  readonly demand: number;
  readonly share: number;
  /** Its items left out, in its rank order. */
  readonly dropped: readonly T[];
}

export interface ShareResult<T> {
  readonly kept: ReadonlySet<T>;
  /** Total demand. */
  readonly demand: number;
  /** Namespaces that lost items, sorted by name (for messages; the choice never depends on it). */
  readonly over: readonly NamespaceOver<T>[];
}

/** The largest whole L with sum(min(d, L)) <= capacity (Infinity when every demand fits). */
export function waterLevel(demands: readonly number[], capacity: number): number {
  const total = demands.reduce((a, b) => a + b, 0);
  if (total <= capacity) return Infinity;
  const sorted = [...demands].sort((a, b) => a - b);
  let left = capacity;
  for (let i = 0; i < sorted.length; i += 1) {
    const d = sorted[i] as number;
    const rest = sorted.length - i;
    // Every remaining namespace asks at least d: can all of them get d?
    if (d * rest > left) return Math.floor(left / rest);
    left -= d;
  }
  return Infinity;
}

export function fairShare<T>(items: readonly ShareItem<T>[], cap: number, own?: string): ShareResult<T> {
  const byNs = new Map<string, ShareItem<T>[]>();
  let demand = 0;
  for (const it of items) {
    demand += it.weight;
    const list = byNs.get(it.namespace);
    if (list === undefined) byNs.set(it.namespace, [it]);
    else list.push(it);
  }
  const kept = new Set<T>();
  if (demand <= cap) {
    for (const it of items) kept.add(it.item);
    return { kept, demand, over: [] };
  }
  const over: NamespaceOver<T>[] = [];
  const fill = (namespace: string, list: ShareItem<T>[], share: number): number => {
    let used = 0;
    const dropped: T[] = [];
    const ordered = list.map((it, i) => ({ it, i })).sort((a, b) => (a.it.rank < b.it.rank ? -1 : a.it.rank > b.it.rank ? 1 : a.i - b.i));
    for (const { it } of ordered) {
      if (used + it.weight <= share) {
        used += it.weight;
        kept.add(it.item);
      } else dropped.push(it.item);
    }
    if (dropped.length > 0) over.push({ namespace, demand: list.reduce((a, it) => a + it.weight, 0), share, dropped });
    return used;
  };
  let rest = cap;
  const ownList = own === undefined ? undefined : byNs.get(own);
  if (own !== undefined && ownList !== undefined) {
    rest -= fill(own, ownList, cap);
    byNs.delete(own);
  }
  const others = [...byNs];
  const level = waterLevel(
    others.map(([, list]) => list.reduce((a, it) => a + it.weight, 0)),
    rest,
  );
  for (const [ns, list] of others) fill(ns, list, level);
  over.sort((a, b) => (a.namespace < b.namespace ? -1 : a.namespace > b.namespace ? 1 : 0));
  return { kept, demand, over };
}
