/**
 * The incremental engine: render() with memory of the previous render.
 */
import { renderRuleset, planRoutes } from './rules.js';
import { resolveTargets, sameNetwork, targetWork, type TargetWork, type WorkMemo } from './resolve.js';
import type { DesiredState, IpFamily, Rendered, ResolvedTarget, Ruleset, ServicePortTarget } from './model.js';

/**
 * Memo of per-target work between renders. The runtime rebuilds its DesiredState from scratch on
 * every sync; with 5,000 Services re-deriving every chain would cost more than the one-chain
 * restore itself. Entries are keyed by the target's identity and reused when the target's fields
 * and endpoints compare equal (field by field, no fingerprint strings: building and hashing those
 * cost more than the work saved). Entries not used by a render are dropped at the next one.
 */
export class RenderCache implements WorkMemo {
  // service -> entries of its ports (a handful), so no composite key string is built and hashed.
  private old = new Map<string, CacheEntry[]>();
  private current = new Map<string, CacheEntry[]>();
  private count = 0;
  get(t: ServicePortTarget): TargetWork | undefined {
    const current = this.current.get(t.service);
    const seen = find(current, t);
    if (seen !== undefined) return sameTarget(seen.target, t) ? seen.work : undefined;
    const hit = find(this.old.get(t.service), t);
    if (hit === undefined || !sameTarget(hit.target, t)) return undefined;
    // Carry the entry over as it is (its target is equal to this one).
    if (current === undefined) this.current.set(t.service, [hit]);
    else current.push(hit);
    this.count += 1;
    return hit.work;
  }
  set(t: ServicePortTarget, work: TargetWork): void {
    const list = this.current.get(t.service);
    const entry = { target: t, work };
    if (list === undefined) this.current.set(t.service, [entry]);
    else {
      const i = list.findIndex((e) => sameIdentity(e.target, t));
      if (i >= 0) {
        list[i] = entry;
        return;
      }
      list.push(entry);
    }
    this.count += 1;
  }
  /** Called once per full render, before it: what the previous render did not use is forgotten. */
  rotate(): void {
    this.old = this.current;
    this.current = new Map();
    this.count = 0;
    this.last = undefined;
  }
  /** The last render and its input, which the next one may patch (see patchRender). */
  last: LastRender | undefined;
  positions: Map<ServicePortTarget, number> | undefined;
  /** Entries used or made by the last render. */
  get size(): number {
    return this.count;
  }
}

interface CacheEntry {
  readonly target: ServicePortTarget;
  readonly work: TargetWork;
}

function find(list: readonly CacheEntry[] | undefined, t: ServicePortTarget): CacheEntry | undefined {
  if (list === undefined) return undefined;
  for (const e of list) if (sameIdentity(e.target, t)) return e;
  return undefined;
}

function sameIdentity(a: ServicePortTarget, b: ServicePortTarget): boolean {
  return a.portName === b.portName && a.protocol === b.protocol && a.family === b.family && a.clusterIP === b.clusterIP && a.port === b.port;
}

function sameTarget(a: ServicePortTarget, b: ServicePortTarget): boolean {
  if (a === b) return true;
  if (a.affinityTimeoutSeconds !== b.affinityTimeoutSeconds) return false;
  if (a.endpoints === b.endpoints) return true;
  if (a.endpoints.length !== b.endpoints.length) return false;
  for (let i = 0; i < a.endpoints.length; i += 1) {
    const x = a.endpoints[i];
    const y = b.endpoints[i];
    if (x === y) continue;
    if (x === undefined || y === undefined) return false;
    if (x.ip !== y.ip || x.port !== y.port || x.ready !== y.ready || x.serving !== y.serving || x.terminating !== y.terminating) return false;
  }
  return true;
}
export function render(state: DesiredState, cache?: RenderCache): Rendered {
  const patched = cache === undefined ? undefined : patchRender(state, cache);
  if (patched !== undefined) return patched;
  const resolution = resolveTargets(state, cache);
  const rendered = {
    resolution,
    v4: renderRuleset(resolution.targets, 4),
    v6: renderRuleset(resolution.targets, 6),
    routes: planRoutes(resolution.targets),
  };
  if (cache?.positions !== undefined) cache.last = { state, rendered, index: cache.positions };
  return rendered;
}

interface LastRender {
  readonly state: DesiredState;
  readonly rendered: Rendered;
  /** Position of each served target of `state` in `rendered.resolution.targets` (edited in place by patches). */
  readonly index: Map<ServicePortTarget, number>;
}

/** Up to this many changed targets, a render patches the last one instead of redoing every target. */
const PATCH_LIMIT = 64;

/** Everything but the endpoints is the same, so every decision of resolveTargets comes out the same. */
function endpointsOnly(a: ServicePortTarget, b: ServicePortTarget): boolean {
  return sameIdentity(a, b) && a.service === b.service && sameNetwork(a.network, b.network) && a.affinityTimeoutSeconds === b.affinityTimeoutSeconds;
}

/**
 * The render of `state` made by editing the cache's last render, when `state` differs from that
 * render's input only in the endpoints of a few targets (by identity: the runtime hands over the
 * same object for an unchanged Service port, state.ts StateMemo): the common partial sync,
 * one Service's endpoints changed. Then the order, the skip decisions, the dispatch rules and the
 * routes are all the same as last time, and only the changed targets' chains (and the reject
 * chain, if one of them gained its first or lost its last endpoint) are redone; at 5,000 Services
 * that is well under a millisecond against a full render's ~10. Undefined: render in full. The
 * result equals a full render's (a property test holds it to that).
 */
function patchRender(state: DesiredState, cache: RenderCache): Rendered | undefined {
  const last = cache.last;
  if (last === undefined || last.rendered.resolution.warnings.length > 0) return undefined;
  const before = last.state.targets;
  if (state.targets.length !== before.length) return undefined;
  if (state.interfaces !== last.state.interfaces && JSON.stringify(state.interfaces) !== JSON.stringify(last.state.interfaces)) return undefined;
  const changes: { from: ServicePortTarget; to: ServicePortTarget; work: (TargetWork & { ok: true }) | undefined }[] = [];
  let redone = 0;
  for (let i = 0; i < before.length; i += 1) {
    const to = state.targets[i] as ServicePortTarget;
    const from = before[i] as ServicePortTarget;
    if (to === from) continue;
    if (!endpointsOnly(to, from)) return undefined;
    // A new but equal object: last time's work stands (as in a full render, via the cache).
    if (sameTarget(from, to)) {
      changes.push({ from, to, work: undefined });
      continue;
    }
    if (++redone > PATCH_LIMIT) return undefined;
    const work = targetWork(to);
    // New warnings would change the resolution's list: leave that to a full render.
    if (!work.ok || work.warnings.length > 0) return undefined;
    changes.push({ from, to, work });
  }
  const prev = last.rendered;
  if (changes.length === 0) {
    cache.last = { ...last, state };
    return prev;
  }
  const index = last.index;
  const targets = [...prev.resolution.targets];
  const touched: Record<IpFamily, { old: ResolvedTarget; next: ResolvedTarget }[]> = { 4: [], 6: [] };
  for (const { from, to, work } of changes) {
    const pos = index.get(from);
    index.delete(from);
    // Not served last time (no interface, a duplicate port): not served now either, for the same reason.
    if (pos === undefined) {
      if (work !== undefined) cache.set(to, work);
      continue;
    }
    if (work === undefined) {
      // Same resolved object as before (its `target` is the equal old object, as a full render keeps it).
      index.set(to, pos);
      continue;
    }
    cache.set(to, work);
    const old = targets[pos] as ResolvedTarget;
    const next: ResolvedTarget = { ...old, target: to, endpoints: work.endpoints, choice: work.choice, rules: work.rules };
    work.resolved = next;
    targets[pos] = next;
    index.set(to, pos);
    touched[to.family].push({ old, next });
  }
  const ruleset = (family: IpFamily, was: Ruleset): Ruleset => {
    const edits = touched[family];
    if (edits.length === 0) return was;
    // A copy keeps the insertion order, and set() on a present key keeps its place: same order as a full render.
    const nat = new Map(was.nat);
    for (const { next } of edits) nat.set(next.chain, next.rules);
    const rejectChanged = edits.some(({ old, next }) => (old.endpoints.length === 0) !== (next.endpoints.length === 0));
    return { family, nat, filter: rejectChanged ? renderRuleset(targets, family).filter : was.filter };
  };
  const rendered: Rendered = {
    resolution: { targets, skipped: prev.resolution.skipped, warnings: prev.resolution.warnings },
    v4: ruleset(4, prev.v4),
    v6: ruleset(6, prev.v6),
    routes: prev.routes,
  };
  cache.last = { state, rendered, index };
  return rendered;
}
