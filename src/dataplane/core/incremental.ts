/**
 * The shared stages of the incremental engine (engine.ts states the one invariant they keep):
 *
 *  1. state     StateMemo.update(input)  = buildDesiredState(input)   (redoes only changed Services;
 *               StateMemo.step(events)                                 step takes the informers' events:
 *                                                                      no pass over the inputs at all)
 *  2. render    render(state, cache)     = render(state)              (reuses per-target work; patches
 *                                                                      the last render when only the
 *                                                                      endpoints of a few targets changed)
 *     A cached render has a version; a patched one carries its delta: the served targets, by chain,
 *     that changed since the render it patched. It holds no back end's rules: each back end's stage
 *     steps on that delta (the iptables rulesets, iptables/stage.ts; the nftables table, nftables/stage.ts),
 *     so a program builds only the rules of the back end it runs.
 *  3. conntrack conntrackStep(render, applied) = conntrackScope(applied, render)  (the delta's pairs)
 *
 * Every incremental path returns exactly what its from-scratch form on the right would return for
 * the same input (test/sidecar/incremental.test.ts, for both back ends, after random event
 * sequences). What makes the state and render steps cheap is object identity: inputs are never
 * mutated (the informers replace an object on every change), so an object seen last time is
 * unchanged; and an output equal to the previous one is the previous object, so the next stage
 * recognises "unchanged" with `===`. Equal-but-new objects are allowed and only cost time: every
 * path falls back to comparing fields, never to trusting a new object.
 *
 * ONE LIMIT. A step that changes more than CHANGE_LIMIT units (Services for the state, targets for
 * the render) is done from scratch: past that, editing in place costs more than redoing.
 */
import { compareText } from '../../order.js';
import { networkKey } from '../../annotations/service-network.js';
import type { V1EndpointSlice, V1Service } from '../../kube/types.js';
import { planRoutes } from './routes.js';
import type { Change } from './engine.js';
import { SIDECAR_LAYOUT, type Layout } from './names.js';
import { flat } from './flat.js';
import { resolveTargets, sameNetwork, targetWork, type TargetWork, type WorkMemo } from './resolve.js';
import { byKey, serviceTargets, sliceInfo, slicesByNetwork, type Keyed, type SliceInfo, type StateInput, type StateOutput } from './state.js';
import type { DesiredState, PodInterface, Rendered, ResolvedTarget, ServicePortTarget } from './model.js';
import type { ClientPlace } from '../../service-semantics/endpoints.js';
import { EXTERNAL_IPS_NOT_CONFIGURED, type ExternalIPPolicy } from '../../external-ips.js';

/** Up to this many changed units per step, a step edits its last result; more: from scratch. */
export const CHANGE_LIMIT = 64;

// ---------------------------------------------------------------------------------------------
// 1. State

/** What one Service name (`<namespace>/<name>`) contributes: its targets, sorted by key, and problems. */
interface ServiceEntry {
  readonly targets: readonly Keyed[];
  readonly problems: readonly string[];
}

/**
 * buildDesiredState with memory: `update(input)` returns exactly what `buildDesiredState(input)`
 * would (a property test holds it to that), but redoes only the Services whose inputs changed.
 * Inputs are compared by object identity: the informers replace an object on every change and
 * never mutate one, so an object seen last time is unchanged, and one not seen is new. A
 * changed Service, or any slice added to, removed from or replaced in its group, recomputes that
 * Service alone; a change of the pod's interfaces recomputes all. Targets that come out equal to
 * the previous ones are the previous objects, so the renderer's memo (RenderCache) and the sync
 * loop's comparison see them unchanged in O(1). Per update this costs one pass of pointer
 * lookups over the input lists (each object seen is stamped with the update's number; the stamps
 * are searched for a missing object only when fewer were seen than last time) plus the work for
 * what changed: a changed name finds its Service objects and slices in an index, its old targets
 * by binary search, and the problems are kept per object. `step(events)` skips the pass: the
 * informers' events say which objects came and went (the sidecar's feed, cmd/sidecar/state-feed.ts),
 * so a one-slice change at 10,000 Services costs ~0.15 ms of CPU where update's pass over the
 * lists cost ~4 (bench/state-stage.ts). What stays O(Services) per step is a pointer copy of the
 * sorted target array (the previous state keeps its own) and the splices into it.
 */
export class StateMemo {
  /** Each update's number: an input object seen in this update carries it (no new Map per update). */
  private gen = 0;
  private readonly serviceSeen = new Map<V1Service, Seen<string>>();
  private readonly sliceSeen = new Map<V1EndpointSlice, Seen<SliceInfo>>();
  /**
   * Service name -> its Service objects, and its slices, as last seen: a changed name finds its
   * inputs without a pass. Short arrays in the order added, not Sets: nearly every name has one
   * of each, and a one-item Set costs ~180 bytes of heap (B5: 0.3 MiB at 1,000 Services).
   */
  private readonly servicesByKey = new Map<string, readonly V1Service[]>();
  private readonly slicesByGroup = new Map<string, readonly V1EndpointSlice[]>();
  private readonly sliceProblems = new Map<V1EndpointSlice, string>();
  private readonly entries = new Map<string, ServiceEntry>();
  /** Names whose entry has problems. */
  private readonly entryProblems = new Set<string>();
  private sorted: Keyed[] = [];
  /** The targets of `sorted`, kept beside it: the output copies it (pointers) instead of mapping every entry. */
  private targets: ServicePortTarget[] = [];
  private output: StateOutput | undefined;
  private interfacesText: string | undefined;
  private ifaceByNet = new Map<string, PodInterface>();
  private interfaces: readonly PodInterface[] = [];
  private place: ClientPlace | undefined;

  /** `externalIPs`: the admin's allowed CIDRs for them (fixed for the process; none configured: none served). */
  constructor(private readonly externalIPs: ExternalIPPolicy = EXTERNAL_IPS_NOT_CONFIGURED) {}

  /**
   * What the passes did, for tests and probes: `visited` counts input objects looked at by a pass
   * over a list (update's stamps), `recomputed` the Service names whose targets were redone. A step
   * of a one-slice change visits nothing and recomputes one name, whatever the Service count
   * (test/sidecar/state-events.test.ts holds it to that).
   */
  readonly work = { visited: 0, recomputed: 0 };

  /** The state of whole input lists: one pass of pointer lookups over them, then the changed names. */
  update(input: StateInput): StateOutput {
    const gen = (this.gen += 1);
    const u = this.begin(input.interfaces, input.place);
    this.work.visited += input.slices.length + input.services.length;
    stamp(input.slices, this.sliceSeen, gen, sliceInfo, u.slice);
    stamp(input.services, this.serviceSeen, gen, serviceName, u.service);
    return this.finish(u, input.services);
  }

  /**
   * The state after `changes`, the informers' events since the last update or step, in the order
   * they came (each `before` is the object this memo last saw under that key, as an informer's
   * update and delete give it): O(changes), no pass over the inputs. Equals buildDesiredState of
   * the lists those events leave (incremental.test.ts). Two Service objects of one name (never
   * from an informer) resolve in the order they were added. Undefined, and nothing changed, when
   * a `before` is not an object this memo holds (events missed or out of order): then the caller
   * hands over the whole lists (update).
   */
  step(changes: StateChanges): StateOutput | undefined {
    for (const c of changes.slices) if (c.before !== undefined && !this.sliceSeen.has(c.before)) return undefined;
    for (const c of changes.services) if (c.before !== undefined && !this.serviceSeen.has(c.before)) return undefined;
    const gen = (this.gen += 1);
    const u = this.begin(changes.interfaces, changes.place);
    for (const c of changes.slices) move(c, this.sliceSeen, gen, sliceInfo, u.slice);
    for (const c of changes.services) move(c, this.serviceSeen, gen, serviceName, u.service);
    return this.finish(u, undefined);
  }

  /** A step's bookkeeping: the names to redo, and the index updates as objects come and go. */
  private begin(interfaces: readonly PodInterface[], place: ClientPlace | undefined): Pending {
    let all = false;
    if (place?.nodeName !== this.place?.nodeName || place?.zone !== this.place?.zone) {
      // The client's place decides endpoints of every Service with a traffic policy or hints.
      all = true;
      this.place = place;
    }
    const interfacesText = JSON.stringify(interfaces);
    if (interfacesText !== this.interfacesText) {
      // Which network each Service is served on depends on the interfaces: recompute everything.
      all = true;
      this.interfacesText = interfacesText;
      this.ifaceByNet = new Map(interfaces.map((i) => [networkKey(i.network), i]));
      this.interfaces = [...interfaces].sort((a, b) => compareText(networkKey(a.network), networkKey(b.network)));
    }
    const dirty = new Set<string>();
    const group = <T>(index: Map<string, readonly T[]>, key: string, item: T, add: boolean): void => {
      dirty.add(key);
      const list = index.get(key);
      if (add) index.set(key, list === undefined ? [item] : [...list, item]);
      else if (list !== undefined) {
        const rest = list.filter((x) => x !== item);
        if (rest.length === 0) index.delete(key);
        else index.set(key, rest);
      }
    };
    const u: Pending = {
      all,
      dirty,
      // A slice with a problem belongs to no Service: only the problems list changes.
      problemsChanged: false,
      slice: (s, info, added) => {
        if (info.problem !== undefined) {
          if (added) this.sliceProblems.set(s, info.problem);
          else this.sliceProblems.delete(s);
          u.problemsChanged = true;
        }
        if (info.group !== undefined) group(this.slicesByGroup, info.group, s, added);
      },
      service: (svc, key, added) => group(this.servicesByKey, key, svc, added),
    };
    return u;
  }

  private finish({ all, dirty, problemsChanged }: Pending, inputServices: readonly V1Service[] | undefined): StateOutput {
    const changed = all ? new Set([...this.entries.keys(), ...this.servicesByKey.keys()]) : dirty;
    if (!all && changed.size === 0 && this.output !== undefined) {
      if (problemsChanged) this.output = { state: this.output.state, problems: this.problems() };
      return this.output;
    }
    const many = all || changed.size > CHANGE_LIMIT;
    const added: Keyed[] = [];
    for (const key of changed) {
      const old = this.entries.get(key);
      const targets: Keyed[] = [];
      const entryProblems: string[] = [];
      this.work.recomputed += 1;
      const services = this.servicesOf(key, inputServices);
      const byNet = services.length > 0 ? slicesByNetwork(this.slicesOf(key)) : undefined;
      for (const svc of services) {
        const problem = serviceTargets(svc, byNet, this.ifaceByNet, targets, this.place, this.externalIPs);
        if (problem !== undefined) entryProblems.push(problem);
      }
      targets.sort(byKey);
      if (!many) {
        const [at, n] = serviceRange(this.sorted, key);
        this.sorted.splice(at, n);
        this.targets.splice(at, n);
      }
      if (entryProblems.length > 0) this.entryProblems.add(key);
      else this.entryProblems.delete(key);
      if (targets.length === 0 && entryProblems.length === 0) {
        this.entries.delete(key);
        continue;
      }
      // Equal to last time: keep the old objects, so everything downstream sees "unchanged" by identity.
      const same = old !== undefined && JSON.stringify(old.targets) === JSON.stringify(targets);
      const entry = { targets: same ? old.targets : targets, problems: entryProblems };
      this.entries.set(key, entry);
      if (!many) added.push(...entry.targets);
    }

    if (many) {
      this.sorted = [];
      for (const e of this.entries.values()) for (const k of e.targets) this.sorted.push(k);
      this.sorted.sort(byKey);
      this.targets = this.sorted.map(([, t]) => t);
    } else
      for (const k of added) {
        const at = insertionPoint(this.sorted, k[0]);
        this.sorted.splice(at, 0, k);
        this.targets.splice(at, 0, k[1]);
      }
    // A copy: the previous state (the renderer's last input) must keep its own array.
    this.output = { state: { targets: this.targets.slice(), interfaces: this.interfaces }, problems: this.problems() };
    return this.output;
  }

  /** Every problem, sorted: the slices' and the Services'. */
  private problems(): string[] {
    const problems = [...this.sliceProblems.values()];
    for (const key of this.entryProblems) problems.push(...(this.entries.get(key)?.problems ?? []));
    return problems.sort(compareText);
  }

  /** The Service objects named `key`, in input order (so duplicates resolve as they always did); a step's: as added. */
  private servicesOf(key: string, services: readonly V1Service[] | undefined): V1Service[] {
    const list = this.servicesByKey.get(key);
    if (list === undefined) return [];
    // Two objects of one name (never from an informer): their order is the input's, found by a pass.
    return list.length === 1 || services === undefined ? [...list] : services.filter((s) => list.includes(s));
  }

  private slicesOf(key: string): { slice: V1EndpointSlice; net: string }[] {
    const out: { slice: V1EndpointSlice; net: string }[] = [];
    for (const slice of this.slicesByGroup.get(key) ?? []) {
      const net = this.sliceSeen.get(slice)?.info.net;
      if (net !== undefined) out.push({ slice, net });
    }
    return out;
  }
}

/**
 * One pass of pointer lookups over `list`: an object seen before gets `gen`; a new one is read
 * (`read`) and handed to `moved` as added. The objects not in `list` (moved as removed) are looked
 * for only when fewer objects came than are kept.
 */
function stamp<T, I>(list: readonly T[], seen: Map<T, Seen<I>>, gen: number, read: (item: T) => I, moved: (item: T, info: I, added: boolean) => void): void {
  let count = 0;
  for (const item of list) {
    const was = seen.get(item);
    if (was !== undefined) {
      if (was.gen !== gen) count += 1;
      was.gen = gen;
      continue;
    }
    count += 1;
    const info = read(item);
    seen.set(item, { info, gen });
    moved(item, info, true);
  }
  if (count < seen.size)
    for (const [item, was] of seen) {
      if (was.gen === gen) continue;
      seen.delete(item);
      moved(item, was.info, false);
    }
}

/** One event of a step: `before` leaves (if this memo saw it), `after` comes. */
function move<T, I>(c: Change<T>, seen: Map<T, Seen<I>>, gen: number, read: (item: T) => I, moved: (item: T, info: I, added: boolean) => void): void {
  if (c.before === c.after) return;
  if (c.before !== undefined) {
    const was = seen.get(c.before);
    if (was !== undefined) {
      seen.delete(c.before);
      moved(c.before, was.info, false);
    }
  }
  if (c.after !== undefined && !seen.has(c.after)) {
    const info = read(c.after);
    seen.set(c.after, { info, gen });
    moved(c.after, info, true);
  }
}

const serviceName = (svc: V1Service): string => flat(`${svc.metadata?.namespace ?? ''}/${svc.metadata?.name ?? ''}`);

/** What a step of the state stage is made of (StateMemo.begin / finish). */
interface Pending {
  readonly all: boolean;
  readonly dirty: Set<string>;
  problemsChanged: boolean;
  readonly slice: (s: V1EndpointSlice, info: SliceInfo, added: boolean) => void;
  readonly service: (svc: V1Service, key: string, added: boolean) => void;
}

/** The informers' events since the state stage's last step, one per object key: the input of StateMemo.step. */
export interface StateChanges {
  readonly interfaces: readonly PodInterface[];
  /** Where the client is (node, zone); absent: nowhere known, no endpoint is local. */
  readonly place?: ClientPlace;
  readonly services: readonly Change<V1Service>[];
  readonly slices: readonly Change<V1EndpointSlice>[];
}

interface Seen<I> {
  readonly info: I;
  /** The last update that saw the object. */
  gen: number;
}

/** Where the targets of Service `key` sit in `list` (sorted by key) and how many: their keys share one prefix (state.ts targetKey). */
function serviceRange(list: readonly Keyed[], key: string): [number, number] {
  const prefix = `${JSON.stringify([key]).slice(0, -1)},`;
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareText((list[mid] as Keyed)[0], prefix) < 0) lo = mid + 1;
    else hi = mid;
  }
  let end = lo;
  while (end < list.length && (list[end] as Keyed)[0].startsWith(prefix)) end += 1;
  return [lo, end - lo];
}

/** First index in `list` (sorted by key) whose key is greater than `key`: equal keys keep their arrival order. */
function insertionPoint(list: readonly Keyed[], key: string): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (compareText((list[mid] as Keyed)[0], key) <= 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * Pure: the desired state of the inputs. The same inputs, in any order, give the same, sorted
 * state; problems (one per bad object) come sorted too.
 */
export function buildDesiredState(input: StateInput): StateOutput {
  return new StateMemo(input.externalIPs).update(input);
}

// ---------------------------------------------------------------------------------------------
// 2. Render

/**
 * Memo of per-target work between renders: with 5,000 Services re-deriving every chain would
 * cost more than the one-chain restore itself. Entries are keyed by the target's identity and reused when the target's fields
 * and endpoints compare equal (field by field, no fingerprint strings: building and hashing those
 * cost more than the work saved). Entries not used by a render are dropped at the next one.
 */
export class RenderCache implements WorkMemo {
  /** The layout every render with this cache uses (its work holds chain names and rule lines). */
  constructor(readonly layout: Layout = SIDECAR_LAYOUT) {}
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
  return (
    a.portName === b.portName && a.protocol === b.protocol && a.family === b.family && a.clusterIP === b.clusterIP && a.port === b.port && a.ingress === b.ingress && a.externalIP === b.externalIP
  );
}

function sameTarget(a: ServicePortTarget, b: ServicePortTarget): boolean {
  if (a === b) return true;
  if (a.affinityTimeoutSeconds !== b.affinityTimeoutSeconds) return false;
  if (!samePlace(a, b)) return false;
  if (a.endpoints === b.endpoints) return true;
  if (a.endpoints.length !== b.endpoints.length) return false;
  for (let i = 0; i < a.endpoints.length; i += 1) {
    const x = a.endpoints[i];
    const y = b.endpoints[i];
    if (x === y) continue;
    if (x === undefined || y === undefined) return false;
    if (x.ip !== y.ip || x.port !== y.port || x.ready !== y.ready || x.serving !== y.serving || x.terminating !== y.terminating) return false;
    if (x.nodeName !== y.nodeName || x.zone !== y.zone || !sameList(x.zoneHints, y.zoneHints) || !sameList(x.nodeHints, y.nodeHints)) return false;
  }
  return true;
}

/** The client's place and the Service's traffic policies, which decide endpoints with them. */
function samePlace(a: ServicePortTarget, b: ServicePortTarget): boolean {
  const p = a.place;
  const q = b.place;
  if (p !== q && (p?.nodeName !== q?.nodeName || p?.zone !== q?.zone)) return false;
  const x = a.traffic;
  const y = b.traffic;
  return x === y || (x?.internalTrafficPolicy === y?.internalTrafficPolicy && x?.externalTrafficPolicy === y?.externalTrafficPolicy && x?.externallyAccessible === y?.externallyAccessible);
}

function sameList(a: readonly string[] | undefined, b: readonly string[] | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i += 1) if (a[i] !== b[i]) return false;
  return true;
}
/**
 * The shared render of a state, under `layout` (a cache's own layout when given one: the sidecar's
 * by default): its served targets (each with its rule lines) and routes. The rulesets and tables
 * are the back ends' stages' (iptables/stage.ts, nftables/stage.ts).
 */
export function render(state: DesiredState, cache?: RenderCache, layout: Layout = cache?.layout ?? SIDECAR_LAYOUT): Rendered {
  if (cache !== undefined && cache.layout !== layout) throw new Error(`render: the cache is for layout ${cache.layout.prefix}, not ${layout.prefix}`);
  const patched = cache === undefined ? undefined : patchRender(state, cache);
  if (patched !== undefined) return patched;
  const resolution = resolveTargets(state, cache, layout);
  const rendered: Rendered = {
    resolution,
    routes: planRoutes(resolution.targets),
    ...(state.policy !== undefined ? { policy: state.policy } : {}),
    ...(cache !== undefined ? { version: nextVersion() } : {}),
  };
  if (cache?.positions !== undefined) cache.last = { state, rendered, index: cache.positions };
  return rendered;
}

let versions = 0;
/** Render versions are unique in the process, so a stage never takes one cache's delta for another's. */
const nextVersion = (): number => (versions += 1);

interface LastRender {
  readonly state: DesiredState;
  readonly rendered: Rendered;
  /** Position of each served target of `state` in `rendered.resolution.targets` (edited in place by patches). */
  readonly index: Map<ServicePortTarget, number>;
}

/** Everything but the endpoints is the same, so every decision of resolveTargets comes out the same. */
function endpointsOnly(a: ServicePortTarget, b: ServicePortTarget): boolean {
  return sameIdentity(a, b) && a.service === b.service && sameNetwork(a.network, b.network) && a.affinityTimeoutSeconds === b.affinityTimeoutSeconds;
}

/**
 * The render of `state` made by editing the cache's last render, when `state` differs from that
 * render's input only in the endpoints of a few targets (by identity: the runtime hands over the
 * same object for an unchanged Service port, state.ts StateMemo): the common partial sync,
 * one Service's endpoints changed. Then the order, the skip decisions, the dispatch rules and the
 * routes are all the same as last time, and only the changed targets are redone (the back ends'
 * stages then redo only their chains, from the delta); at 5,000 Services that is well under a
 * millisecond against a full render's ~10. Undefined: render in full. The
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
    if (++redone > CHANGE_LIMIT) return undefined;
    const work = targetWork(to, cache.layout);
    // New warnings would change the resolution's list: leave that to a full render.
    if (!work.ok || work.warnings.length > 0) return undefined;
    changes.push({ from, to, work });
  }
  const prev = last.rendered;
  if (changes.length === 0 && prev.policy === state.policy) {
    cache.last = { ...last, state };
    return prev;
  }
  const index = last.index;
  const targets = [...prev.resolution.targets];
  const touched: { old: ResolvedTarget; next: ResolvedTarget }[] = [];
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
    const next: ResolvedTarget = { ...old, target: to, endpoints: work.endpoints, choice: work.choice };
    work.resolved = next;
    targets[pos] = next;
    index.set(to, pos);
    touched.push({ old, next });
  }
  // A policy change alone is a new version with no target changed (the stages keep every target's part).
  const rendered: Rendered = {
    resolution: { targets, skipped: prev.resolution.skipped, warnings: prev.resolution.warnings },
    routes: prev.routes,
    ...(state.policy !== undefined ? { policy: state.policy } : {}),
    version: nextVersion(),
    ...(prev.version !== undefined ? { delta: { from: prev.version, targets: inOrder(touched, index) } } : {}),
  };
  cache.last = { state, rendered, index };
  return rendered;
}

/** The changes in the order of the targets (as conntrackScope would list them). */
function inOrder(touched: readonly { old: ResolvedTarget; next: ResolvedTarget }[], index: Map<ServicePortTarget, number>): Change<ResolvedTarget>[] {
  const all = touched.map(({ old, next }) => ({ pos: index.get(next.target) ?? 0, change: { before: old, after: next } }));
  return all.sort((a, b) => a.pos - b.pos).map((c) => c.change);
}

// ---------------------------------------------------------------------------------------------
// 3. Conntrack

/**
 * What planConntrack (conntrack.ts) needs to look at: when the served targets are the same chains in the same
 * order (an endpoint change), only the pairs that are not the very same object, since an
 * unchanged target calls for no flush; otherwise everything. Saves two passes with maps over
 * 5,000 targets on every endpoint change.
 */
export function conntrackScope(prev: readonly ResolvedTarget[] | undefined, next: readonly ResolvedTarget[]): [readonly ResolvedTarget[] | undefined, readonly ResolvedTarget[]] {
  if (prev === undefined || prev.length !== next.length) return [prev, next];
  const before: ResolvedTarget[] = [];
  const after: ResolvedTarget[] = [];
  for (let i = 0; i < next.length; i += 1) {
    const a = prev[i] as ResolvedTarget;
    const b = next[i] as ResolvedTarget;
    if (a === b) continue;
    if (a.chain !== b.chain) return [prev, next];
    before.push(a);
    after.push(b);
  }
  return [before, after];
}

/**
 * The conntrack stage's step: the targets planConntrack must look at after render `rendered`,
 * when the sync before it applied render `version` with `targets`. The engine's delta when the
 * render follows that one (O(changes)), else conntrackScope's pass over all. Equals
 * conntrackScope(targets, rendered's targets) either way (a property test holds it to that).
 */
export function conntrackStep(rendered: Rendered, version: number | undefined, targets: readonly ResolvedTarget[]): [readonly ResolvedTarget[] | undefined, readonly ResolvedTarget[]] {
  const { delta } = rendered;
  if (version !== undefined && rendered.version === version) return [[], []];
  const scratch = (): [readonly ResolvedTarget[] | undefined, readonly ResolvedTarget[]] => conntrackScope(targets, rendered.resolution.targets);
  if (delta === undefined || version === undefined || delta.from !== version) return scratch();
  const before: ResolvedTarget[] = [];
  const after: ResolvedTarget[] = [];
  for (const c of delta.targets) {
    // Not a replacement in place (a delta never says so today): leave it to the pass over all.
    if (c.before === undefined || c.after === undefined || c.before.chain !== c.after.chain) return scratch();
    before.push(c.before);
    after.push(c.after);
  }
  return [before, after];
}
