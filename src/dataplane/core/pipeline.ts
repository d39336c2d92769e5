/**
 * The pipeline: the one object a program's runtime calls (`sync(state, {full})`, `checkDrift`,
 * `cleanup()`), around one rule back end (seam.ts) that the registry made (../create.ts).
 *
 * Per sync: render (pure, memoized per target) -> the rule back end's plan (backend.ts; for
 * iptables, per family: partial against what this object applied last; full against iptables-save
 * at start-up, after a failure and after drift was found, or against its own memory plus `-S
 * OUTPUT` when asked for one) -> routes added -> the back end's write (iptables: one
 * `iptables-restore --noflush` per family, side by side) -> routes removed -> conntrack flushes. Routes go in
 * before the rules that need them and out after the rules that used them, so a cluster IP never
 * has DNAT without its source-address route (at start-up, when nothing is served yet, routes and
 * restores run side by side).
 *
 * After any failure the applied state is forgotten, so the next sync is a full one that
 * re-reads the namespace and repairs whatever is there. Such a sync (and the first one, and one
 * after a conntrack flush failed) cannot know which UDP/SCTP entries went stale, so it reconciles
 * conntrack against the current endpoints instead (conntrack.ts). The first sync of a process is such a
 * full one too: it adopts what an earlier run of the sidecar left (the sidecar exits without
 * removing its rules), rewriting our chains in one transaction per table, deleting the ones no
 * longer wanted, and correcting our routes (`proto 241`) by difference, so a restart drops
 * nothing. `cleanup()` removes everything of ours (the `--cleanup` mode).
 */
import type { Logger } from '../../log.js';
import type { DesiredState, IpFamily, Rendered, ResolvedTarget, Route } from './model.js';
import { conntrackStep } from './incremental.js';
import type { BackendFlavor, WriteReport, RuleBackend } from './seam.js';
import type { DataplaneExec } from './exec.js';
import { applyRoutes, diffRoutes, readRoutes, type RoutePlan } from './routes.js';
import { conntrackServices, flushConntrack, goneTargets, listConntrack, planConntrack, reconcileConntrack, type ConntrackFlush } from './conntrack.js';

export interface SyncResult {
  readonly full: boolean;
  /** False when nothing had to change (no restore, no route, no flush ran). */
  readonly changed: boolean;
  readonly backend: BackendFlavor;
  readonly families: readonly WriteReport[];
  readonly routesReplaced: number;
  readonly routesRemoved: number;
  readonly conntrackFlushes: number;
  /** Targets not served, with why (network missing, bad input). */
  readonly skipped: Rendered['resolution']['skipped'];
  /** Non-fatal problems (bad endpoints dropped, conntrack flush failures). */
  readonly warnings: readonly string[];
  readonly durationMs: number;
  /** Where the time went, in ms: render+plan (pure), reading the namespace back, routes, restores, conntrack. */
  readonly phases: { readonly renderMs: number; readonly readMs: number; readonly routesMs: number; readonly restoreMs: number; readonly conntrackMs: number };
  /** Rules of ours in the namespace after the sync, both families (the runtime's rules-count metric). */
  readonly rules: number;
  /** Served Service ports, by choice of endpoints, for metrics. */
  readonly served: { readonly ready: number; readonly terminating: number; readonly none: number };
}

export interface CleanupResult {
  readonly text: Readonly<Record<'v4' | 'v6', string>>;
  readonly routesRemoved: number;
}

export interface Dataplane<S = DesiredState> {
  sync(state: S, opts: { full: boolean }): Promise<SyncResult>;
  /**
   * Whether our rules and routes are still as this object last wrote them (drift.ts): undefined
   * when they are (or nothing was written yet), else why not, and then the next sync is a full one
   * that reads the namespace back. `deep` adds an iptables-save per family (rule counts of every chain).
   */
  checkDrift(opts: { deep: boolean }): Promise<string | undefined>;
  cleanup(): Promise<CleanupResult>;
  backend(): Promise<BackendFlavor>;
  /** Lets spare processes go (spareRestore); the dataplane still works after it, without spares. */
  close(): void;
}

/** A failure that only says the other back end's tool is not installed (then it never ran here). */
const MISSING_TOOL = /exit 127|ENOENT/;

/** What the last successful sync applied; R is the back end's rules. */
interface Applied<R> {
  readonly rules: R;
  readonly routes: readonly Route[];
  readonly targets: readonly ResolvedTarget[];
  /** The render it came from (engine.ts: a render whose delta starts there changed only those targets). */
  readonly version: number | undefined;
}

function ms(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e6;
}

export interface PipelineParts<R, X, P> {
  readonly exec: DataplaneExec;
  readonly rules: RuleBackend<R, X, P>;
  /** The other back ends: whatever they left is removed after this process's first successful write. */
  readonly others: readonly Pick<RuleBackend<unknown, unknown, unknown>, 'cleanup' | 'present'>[];
  readonly families: readonly IpFamily[];
  readonly routeProto: number;
  readonly logger?: Logger;
}

/** What one sync has when its render and plan are done, before anything is written. */
interface Planned<R, P> {
  readonly start: bigint;
  readonly prev: Applied<R> | undefined;
  readonly isFull: boolean;
  readonly rendered: Rendered;
  readonly next: R;
  readonly plan: P;
  readonly routePlan: RoutePlan;
  readonly routesFirst: boolean;
  readonly flavor: BackendFlavor;
  readonly othersPresent: Promise<boolean[]> | undefined;
  readonly renderMs: number;
  readonly readMs: number;
}

/** The pipeline around one rule back end: routes, conntrack and the serial order are the same for every back end. */
export class Pipeline<S, R, X, P> implements Dataplane<S> {
  private readonly be: RuleBackend<R, X, P>;
  /** The other back ends' rules are still to be removed (until one first sync removed them). */
  private othersDue: boolean;
  private applied: Applied<R> | undefined;
  /** The targets of the last successful sync; unlike `applied`, kept across failures (conntrack). */
  private lastTargets: readonly ResolvedTarget[] | undefined;
  /** A conntrack listing or flush failed: the next sync reconciles conntrack from the kernel. */
  private reconcileDue = false;
  private running: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly parts: PipelineParts<R, X, P>,
    private readonly renderState: (state: S) => Rendered,
  ) {
    this.be = parts.rules;
    this.othersDue = parts.others.length > 0;
    // Decide the back end now, while the runtime's informers are still listing: the first sync can
    // then start reading the namespace back before it renders.
    void this.be.flavor();
  }

  sync(state: S, o: { full: boolean }): Promise<SyncResult> {
    return this.serial(() => this.doSync(state, o.full));
  }

  checkDrift(o: { deep: boolean }): Promise<string | undefined> {
    return this.serial(() => this.doCheckDrift(o.deep));
  }

  cleanup(): Promise<CleanupResult> {
    return this.serial(() => this.doCleanup());
  }

  backend(): Promise<BackendFlavor> {
    return this.be.flavor();
  }

  close(): void {
    this.be.close();
    this.parts.exec.close();
  }

  /** One operation at a time: two interleaved restores could each see a stale "applied". */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    // Kept reads (read-ahead.ts) live for one operation and are dropped here, once, when it
    // settles: between operations anyone may have changed the namespace (a drift check must see
    // it). Inside one, the reads after its write are the other back ends' table listings, which
    // look for tables that write never adds or removes (read-ahead.ts).
    const op = (): Promise<T> => fn().finally(() => this.parts.exec.drop());
    const next = this.running.then(op, op);
    // Settle to undefined, not to the result: a resolved `running` would keep the last SyncResult
    // (its restore text: 1.4 MiB at 1,000 Services) alive until the next operation.
    this.running = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  }

  /** Routes of ours to add, then to remove after the rules changed. */
  private planRoutes(rendered: Rendered, prev: Applied<R> | undefined, isFull: boolean, current: readonly Route[]): RoutePlan {
    // A patched render (incremental.ts) hands back the very routes array when no route changed.
    return !isFull && rendered.routes === prev?.routes ? { replace: [], remove: [] } : diffRoutes(current, rendered.routes);
  }

  /** Conntrack after the rules changed: flush by difference, or reconcile from the kernel. */
  private async settleConntrack(rendered: Rendered, prev: Applied<R> | undefined): Promise<{ flushes: number; problems: string[] }> {
    // Without the previous sync's targets (or after a flush failed), conntrack is reconciled
    // from the kernel after the rules changed; otherwise the difference says what to flush.
    const { exec, families } = this.parts;
    const targets = rendered.resolution.targets;
    const problems: string[] = [];
    let flushes: readonly ConntrackFlush[] = [];
    if (prev === undefined || this.reconcileDue) {
      // Listed after the restores: an entry made before them may be stale, one made after is right.
      const services = conntrackServices(targets, goneTargets(this.lastTargets, targets)).filter((c) => families.includes(c.family));
      try {
        flushes = reconcileConntrack(await listConntrack(exec, services), services);
      } catch (e) {
        problems.push(`conntrack not reconciled (retried next sync): ${e instanceof Error ? e.message : String(e)}`);
      }
    } else {
      flushes = planConntrack(...conntrackStep(rendered, prev.version, prev.targets));
    }
    problems.push(...(await flushConntrack(exec, flushes)));
    this.reconcileDue = problems.length > 0;
    return { flushes: flushes.length, problems };
  }

  /** The pure part of a sync (render and plan), with the read-back processes started before it so they run beside it. */
  private async renderAndPlan(state: S, full: boolean): Promise<Planned<R, P>> {
    const { exec, routeProto: proto } = this.parts;
    const start = process.hrtime.bigint();
    const prev = this.applied;
    const isFull = full || prev === undefined;
    // Forget what was applied until this sync succeeds: any failure below forces a full sync next.
    this.applied = undefined;
    // Back-end choice and read-back run in child processes while rendering uses this one's CPU.
    const choosing = this.be.flavor();
    const reading = isFull ? Promise.all([this.be.read(prev?.rules), readRoutes(exec, proto)]) : undefined;
    reading?.catch(() => undefined); // rejections are handled by the await below, after rendering
    // Which other back ends left anything, asked now beside rendering (one listing of the tables, two
    // /proc reads: tables-present.ts), so a pod that never ran them pays no save after the write.
    // Only this program writes rules of ours, so none appear before the write.
    const othersPresent = this.othersDue ? Promise.all(this.parts.others.map((o) => o.present().catch(() => true))) : undefined;
    const rendered = this.renderState(state);
    const next = this.be.rules(rendered);
    const flavor = await choosing;
    const renderedMs = ms(start);
    const tRead = process.hrtime.bigint();
    let existing: X | undefined;
    let currentRoutes: readonly Route[] = prev?.routes ?? [];
    if (reading !== undefined) [existing, currentRoutes] = await reading;
    const readMs = ms(tRead);
    const tPlan = process.hrtime.bigint();
    const plan = this.be.plan(next, prev?.rules, existing, isFull);
    const routePlan = this.planRoutes(rendered, prev, isFull, currentRoutes);
    // New routes go in before the rules that need them, so no connection to a new cluster IP
    // picks eth0's source address. Only when the namespace holds nothing of ours (a first start)
    // is nobody served yet, and then they go in side by side with the rules. A restarted
    // sidecar finds its rules (it leaves them in place on exit) and adopts them: routes first.
    const routesFirst = prev !== undefined || this.be.holdsOurs(existing);
    // The pure part: rendering (with the read-back processes' start before it) and the plan.
    return { start, prev, isFull, rendered, next, plan, routePlan, routesFirst, flavor, othersPresent, renderMs: renderedMs + ms(tPlan), readMs };
  }

  /** The rules, and beside them the new routes unless those went first; throws the first failure once both settled. */
  private async write(p: Planned<R, P>): Promise<WriteReport[]> {
    const { exec, routeProto: proto, logger } = this.parts;
    // Wait for both before reporting, so nothing still runs when the next sync starts.
    // The write first: its process (nft -f, the longest) starts before the route batch's spawn.
    const [written, routed] = await Promise.allSettled([this.be.write(p.plan, p.next), p.routesFirst ? Promise.resolve() : applyRoutes(exec, p.routePlan.replace, 'replace', proto)]);
    for (const r of [routed, written]) {
      if (r.status === 'rejected') {
        logger?.error({ err: r.reason as unknown, full: p.isFull }, 'dataplane sync failed; the next sync will be a full one');
        throw r.reason;
      }
    }
    return written.status === 'fulfilled' ? written.value : [];
  }

  /**
   * Switching back ends: ours are in now, so the other back end's rules (which would also DNAT
   * the same cluster IPs, or reject them) can go. A tool that is missing or fails is a warning and
   * is tried again at the next start; it never fails the sync.
   */
  private async removeOthers(othersPresent: Promise<boolean[]> | undefined): Promise<string[]> {
    const problems: string[] = [];
    if (!this.othersDue) return problems;
    this.othersDue = false;
    const present = await othersPresent;
    for (const [i, other] of this.parts.others.entries()) {
      if (present?.[i] === false) continue;
      const { failures } = await other.cleanup();
      problems.push(...failures.filter((f) => !MISSING_TOOL.test(f)).map((f) => `the other back end's rules not removed: ${f}`));
    }
    return problems;
  }

  private async doSync(state: S, full: boolean): Promise<SyncResult> {
    const p = await this.renderAndPlan(state, full);
    const { exec, routeProto: proto } = this.parts;
    const tRoutes = process.hrtime.bigint();
    if (p.routesFirst) await applyRoutes(exec, p.routePlan.replace, 'replace', proto);
    const routesFirstMs = ms(tRoutes);
    const tRestore = process.hrtime.bigint();
    const families = await this.write(p);
    const switchProblems = await this.removeOthers(p.othersPresent);
    const restoreMs = ms(tRestore);
    const tRemove = process.hrtime.bigint();
    await applyRoutes(exec, p.routePlan.remove, 'remove', proto);
    const routesMs = routesFirstMs + ms(tRemove);
    const tConntrack = process.hrtime.bigint();
    const conntrack = await this.settleConntrack(p.rendered, p.prev);
    const conntrackMs = ms(tConntrack);
    const { rendered } = p;
    this.applied = { rules: p.next, routes: rendered.routes, targets: rendered.resolution.targets, version: rendered.version };
    this.lastTargets = rendered.resolution.targets;
    return syncResult(p, families, { switchProblems, conntrack, routesMs, restoreMs, conntrackMs });
  }

  /** Removes everything of ours. Every step is tried even when an earlier one fails (SIGTERM gets one chance). */
  private async doCleanup(): Promise<CleanupResult> {
    const { exec, routeProto: proto } = this.parts;
    this.applied = undefined;
    const { text, failures: ruleFailures } = await this.be.cleanup();
    const failures = [...ruleFailures];
    // The other back end's rules too (a missing tool means it never ran here).
    for (const other of this.parts.others) failures.push(...(await other.cleanup()).failures.filter((f) => !MISSING_TOOL.test(f)));
    let routesRemoved = 0;
    try {
      const routes = await readRoutes(exec, proto);
      await applyRoutes(exec, routes, 'remove', proto);
      routesRemoved = routes.length;
    } catch (e) {
      failures.push(e instanceof Error ? e.message : String(e));
    }
    if (failures.length > 0) throw new Error(`cleanup incomplete: ${failures.join('; ')}`);
    return { text, routesRemoved };
  }

  private async doCheckDrift(deep: boolean): Promise<string | undefined> {
    const prev = this.applied;
    if (prev === undefined) return undefined;
    const routes = await readRoutes(this.parts.exec, this.parts.routeProto);
    const routeDiff = diffRoutes(routes, prev.routes);
    const why =
      routeDiff.replace.length + routeDiff.remove.length > 0
        ? `routes: ${routeDiff.replace.length} missing or changed, ${routeDiff.remove.length} not ours to keep`
        : await this.be.drift(prev.rules, deep);
    // Forget what was applied: the next sync reads the namespace back and rewrites all of ours.
    if (why !== undefined && this.applied === prev) this.applied = undefined;
    return why;
  }
}

/** A sync's report from its plan, what it wrote and the times of its steps. Pure. */
function syncResult<R, P>(
  p: Planned<R, P>,
  families: readonly WriteReport[],
  after: { switchProblems: readonly string[]; conntrack: { flushes: number; problems: readonly string[] }; routesMs: number; restoreMs: number; conntrackMs: number },
): SyncResult {
  const { rendered, routePlan } = p;
  const served = { ready: 0, terminating: 0, none: 0 };
  // 'none' counts the ports with no endpoint for this client, refused or dropped alike.
  for (const r of rendered.resolution.targets) served[r.choice === 'drop' ? 'none' : r.choice] += 1;
  return {
    full: p.isFull,
    changed: families.some((f) => f.text !== '') || routePlan.replace.length + routePlan.remove.length + after.conntrack.flushes > 0,
    backend: p.flavor,
    families,
    routesReplaced: routePlan.replace.length,
    routesRemoved: routePlan.remove.length,
    conntrackFlushes: after.conntrack.flushes,
    skipped: rendered.resolution.skipped,
    warnings: [...rendered.resolution.warnings, ...after.switchProblems, ...after.conntrack.problems],
    durationMs: ms(p.start),
    phases: { renderMs: p.renderMs, readMs: p.readMs, routesMs: after.routesMs, restoreMs: after.restoreMs, conntrackMs: after.conntrackMs },
    rules: families.reduce((n, f) => n + f.rules, 0),
    served,
  };
}

/** The pipeline as a plain object, so wrappers may spread it (tuning/with-warm-up.ts, benches). */
export function createPipeline<S, R, X, P>(parts: PipelineParts<R, X, P>, renderState: (state: S) => Rendered): Dataplane<S> {
  const p = new Pipeline(parts, renderState);
  return { sync: (state, o) => p.sync(state, o), checkDrift: (o) => p.checkDrift(o), cleanup: () => p.cleanup(), backend: () => p.backend(), close: () => p.close() };
}
