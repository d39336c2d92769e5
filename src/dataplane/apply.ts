/**
 * The one object the sidecar runtime calls: `sync(state, {full})` and `cleanup()`.
 *
 * Per sync: render (pure, memoized per target) -> plan per family (partial: against what this
 * object applied last; full: against iptables-save at start-up, after a failure and after drift
 * was found, or against its own memory plus `-S OUTPUT` when asked for one) -> routes added -> one `iptables-restore
 * --noflush` per family (the two side by side) -> routes removed -> conntrack flushes. Routes go in
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
import { existsSync } from 'node:fs';
import type { Logger } from '../log.js';
import type { DesiredState, IpFamily, Rendered, ResolvedTarget, Route, Ruleset } from './model.js';
import { SIDECAR_LAYOUT, type Layout } from './names.js';
import { existingFromApplied, NOTHING_EXISTING, planCleanup, planRestore, type Existing } from './restore.js';
import { countRules } from './rules.js';
import { conntrackScope, render, RenderCache } from './incremental.js';
import { createExec, detectBackend, nftRestoreBinary, readExisting, readOutputChains, restore, save, type Backend } from './iptables.js';
import { compareProbe, compareSave, quickProbes } from './drift.js';
import { applyRoutes, diffRoutes, readRoutes } from './routes.js';
import { conntrackServices, flushConntrack, goneTargets, listConntrack, planConntrack, reconcileConntrack, type ConntrackFlush } from './conntrack.js';

export interface DataplaneOptions {
  /** 'auto' (default): legacy only if the namespace already has legacy rules, else nft. */
  readonly backend?: Backend | 'auto';
  /** Test hook: run every command under `ip netns exec <netns>`. Production leaves it unset. */
  readonly netns?: string;
  readonly logger?: Logger;
  /**
   * Whether to program IPv6. Default: whether the kernel has IPv6 at all (/proc/net/if_inet6). On
   * a kernel booted with ipv6.disable=1 every ip6tables-restore fails, and such a pod can have no
   * IPv6 Service anyway, so the family is left out instead of failing every sync.
   */
  readonly ipv6?: boolean;
  /** Where the rules live (default: the sidecar's, nat and filter OUTPUT with prefix MPX-). */
  readonly layout?: Layout;
  /**
   * Keep a spare restore process per family started ahead (nft back end only; iptables.ts), so
   * a change skips a process start. For long-running programs; close() lets the spares go.
   */
  readonly spareRestore?: boolean;
}

export function kernelHasIPv6(): boolean {
  return existsSync('/proc/net/if_inet6');
}

export interface FamilySync {
  readonly family: IpFamily;
  /** The restore input applied ('' when nothing changed). */
  readonly restoreText: string;
  readonly changedChains: readonly string[];
  readonly deletedChains: readonly string[];
  readonly restoreMs: number;
  readonly rules: number;
}

export interface SyncResult {
  readonly full: boolean;
  /** False when nothing had to change (no restore, no route, no flush ran). */
  readonly changed: boolean;
  readonly backend: Backend;
  readonly families: readonly FamilySync[];
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
  readonly restoreText: Readonly<Record<'v4' | 'v6', string>>;
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
  backend(): Promise<Backend>;
  /** Lets spare processes go (spareRestore); the dataplane still works after it, without spares. */
  close(): void;
}

interface Applied {
  readonly v4: Ruleset;
  readonly v6: Ruleset;
  readonly routes: readonly Route[];
  readonly targets: readonly ResolvedTarget[];
}

function ms(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e6;
}

export function createDataplane(opts: DataplaneOptions = {}): Dataplane {
  const cache = new RenderCache();
  return createDataplaneFor<DesiredState>(opts, (state) => render(state, cache));
}

/**
 * The same apply loop for any program's state: `renderState` turns it into rulesets, routes and
 * resolved targets (the node agent renders NodePorts and the node's cluster-IP access this way).
 */
export function createDataplaneFor<S>(opts: DataplaneOptions, renderState: (state: S) => Rendered): Dataplane<S> {
  const exec = createExec(opts.netns, opts.spareRestore === true ? nftRestoreBinary : undefined);
  const layout = opts.layout ?? SIDECAR_LAYOUT;
  const proto = layout.routeProto;
  let backendChoice: Promise<Backend> | undefined;
  let applied: Applied | undefined;
  /** The targets of the last successful sync; unlike `applied`, kept across failures (conntrack). */
  let lastTargets: readonly ResolvedTarget[] | undefined;
  /** A conntrack listing or flush failed: the next sync reconciles conntrack from the kernel. */
  let reconcileDue = false;
  let running: Promise<unknown> = Promise.resolve();
  const FAMILIES: readonly IpFamily[] = (opts.ipv6 ?? kernelHasIPv6()) ? [4, 6] : [4];

  // Known synchronously once decided, so a sync can start its read-back processes before rendering.
  let known: Backend | undefined = opts.backend === 'nft' || opts.backend === 'legacy' ? opts.backend : undefined;
  const backend = (): Promise<Backend> => {
    backendChoice ??= known !== undefined ? Promise.resolve(known) : detectBackend(exec).then((b) => (known = b));
    return backendChoice;
  };

  /** One operation at a time: two interleaved restores could each see a stale "applied". */
  function serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = running.then(fn, fn);
    // Settle to undefined, not to the result: a resolved `running` would keep the last SyncResult
    // (its restore text: 1.4 MiB at 1,000 Services) alive until the next operation.
    running = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  }

  async function doSync(state: S, full: boolean): Promise<SyncResult> {
    const start = process.hrtime.bigint();
    const prev = applied;
    const isFull = full || prev === undefined;
    // Forget what was applied until this sync succeeds: any failure below forces a full sync next.
    applied = undefined;
    // Back-end detection and read-back run in child processes while rendering uses this one's
    // CPU. Without a previous state of ours (start-up, after a failure) read everything back; with
    // one, only the OUTPUT chains (a full sync asked for while our state is known must not pay a whole save).
    const choosing = backend();
    const read = (be: Backend, f: IpFamily): Promise<Existing> =>
      prev === undefined ? readExisting(exec, be, f, layout) : readOutputChains(exec, be, f, layout).then((o) => existingFromApplied(f === 4 ? prev.v4 : prev.v6, o, layout));
    const readAll = (be: Backend): Promise<[Existing, Existing, Route[]]> =>
      Promise.all([read(be, 4), FAMILIES.includes(6) ? read(be, 6) : Promise.resolve(NOTHING_EXISTING), readRoutes(exec, proto)]);
    const reading = isFull ? (known !== undefined ? readAll(known) : choosing.then(readAll)) : undefined;
    reading?.catch(() => undefined); // rejections are handled by the await below, after rendering
    const rendered = renderState(state);
    const be = await choosing;
    const renderMs = ms(start);
    const tRead = process.hrtime.bigint();
    let existing: Record<IpFamily, Existing | undefined> = { 4: undefined, 6: undefined };
    let currentRoutes: readonly Route[] = prev?.routes ?? [];
    if (reading !== undefined) {
      const [e4, e6, routes] = await reading;
      existing = { 4: e4, 6: e6 };
      currentRoutes = routes;
    }
    const readMs = ms(tRead);
    const plans = FAMILIES.map((f) => ({
      family: f,
      plan: planRestore(f === 4 ? rendered.v4 : rendered.v6, f === 4 ? prev?.v4 : prev?.v6, existing[f], isFull, layout),
    }));
    // A patched render (incremental.ts) hands back the very routes array when no route changed.
    const routePlan = !isFull && rendered.routes === prev?.routes ? { replace: [], remove: [] } : diffRoutes(currentRoutes, rendered.routes);
    // Without the previous sync's targets (or after a flush failed), conntrack is reconciled
    // from the kernel after the restores; otherwise the difference says what to flush.
    const reconcile = prev === undefined || reconcileDue;
    const planned = reconcile ? [] : planConntrack(...conntrackScope(prev.targets, rendered.resolution.targets));

    // New routes go in before the rules that need them, so no connection to a new cluster IP
    // picks eth0's source address. Only when the namespace holds nothing of ours (a first start)
    // is nobody served yet, and then they go in side by side with the restores. A restarted
    // sidecar finds its chains (it leaves them in place on exit) and adopts them: routes first.
    const tRoutes = process.hrtime.bigint();
    const adopting = [existing[4], existing[6]].some((e) => e !== undefined && (e.nat.chains.length > 0 || e.filter.chains.length > 0));
    const routesFirst = prev !== undefined || adopting;
    if (routesFirst) await applyRoutes(exec, routePlan.replace, 'replace', proto);
    let routesMs = ms(tRoutes);
    const tRestore = process.hrtime.bigint();
    // The two families are independent (separate tables, separate binaries): apply them side by
    // side, and wait for both before reporting, so no restore still runs when the next sync starts.
    const settled = await Promise.allSettled([
      routesFirst ? Promise.resolve() : applyRoutes(exec, routePlan.replace, 'replace', proto),
      ...plans.map(async ({ family, plan }): Promise<FamilySync> => {
        const t0 = process.hrtime.bigint();
        await restore(exec, be, family, plan.text);
        return {
          family,
          restoreText: plan.text,
          changedChains: plan.changedChains,
          deletedChains: plan.deletedChains,
          restoreMs: ms(t0),
          rules: countRules(family === 4 ? rendered.v4 : rendered.v6),
        };
      }),
    ]);
    const families: FamilySync[] = [];
    for (const r of settled) {
      if (r.status === 'rejected') {
        opts.logger?.error({ err: r.reason as unknown, full: isFull }, 'dataplane sync failed; the next sync will be a full one');
        throw r.reason;
      }
      if (r.value !== undefined) families.push(r.value);
    }
    const restoreMs = ms(tRestore);
    const tRemove = process.hrtime.bigint();
    await applyRoutes(exec, routePlan.remove, 'remove', proto);
    routesMs += ms(tRemove);
    const tConntrack = process.hrtime.bigint();
    const conntrackProblems: string[] = [];
    let flushes: readonly ConntrackFlush[] = planned;
    if (reconcile) {
      // Listed after the restores: an entry made before them may be stale, one made after is right.
      const services = conntrackServices(rendered.resolution.targets, goneTargets(lastTargets, rendered.resolution.targets)).filter((c) => FAMILIES.includes(c.family));
      try {
        flushes = reconcileConntrack(await listConntrack(exec, services), services);
      } catch (e) {
        conntrackProblems.push(`conntrack not reconciled (retried next sync): ${e instanceof Error ? e.message : String(e)}`);
      }
    }
    conntrackProblems.push(...(await flushConntrack(exec, flushes)));
    reconcileDue = conntrackProblems.length > 0;
    const warnings = [...rendered.resolution.warnings, ...conntrackProblems];
    const conntrackMs = ms(tConntrack);
    applied = { v4: rendered.v4, v6: rendered.v6, routes: rendered.routes, targets: rendered.resolution.targets };
    lastTargets = rendered.resolution.targets;
    const served = { ready: 0, terminating: 0, none: 0 };
    for (const r of rendered.resolution.targets) served[r.choice] += 1;
    return {
      full: isFull,
      changed: families.some((f) => f.restoreText !== '') || routePlan.replace.length + routePlan.remove.length + flushes.length > 0,
      backend: be,
      families,
      routesReplaced: routePlan.replace.length,
      routesRemoved: routePlan.remove.length,
      conntrackFlushes: flushes.length,
      skipped: rendered.resolution.skipped,
      warnings,
      durationMs: ms(start),
      phases: { renderMs, readMs, routesMs, restoreMs, conntrackMs },
      rules: families.reduce((n, f) => n + f.rules, 0),
      served,
    };
  }

  /** Removes everything of ours. Every step is tried even when an earlier one fails (SIGTERM gets one chance). */
  async function doCleanup(): Promise<CleanupResult> {
    const be = await backend();
    applied = undefined;
    const text = { v4: '', v6: '' };
    const failures: string[] = [];
    for (const family of FAMILIES) {
      try {
        const t = planCleanup(await readExisting(exec, be, family, layout));
        text[family === 4 ? 'v4' : 'v6'] = t;
        await restore(exec, be, family, t);
      } catch (e) {
        failures.push(e instanceof Error ? e.message : String(e));
      }
    }
    let routesRemoved = 0;
    try {
      const routes = await readRoutes(exec, proto);
      await applyRoutes(exec, routes, 'remove', proto);
      routesRemoved = routes.length;
    } catch (e) {
      failures.push(e instanceof Error ? e.message : String(e));
    }
    if (failures.length > 0) throw new Error(`cleanup incomplete: ${failures.join('; ')}`);
    return { restoreText: text, routesRemoved };
  }

  async function doCheckDrift(deep: boolean): Promise<string | undefined> {
    const prev = applied;
    if (prev === undefined) return undefined;
    const be = await backend();
    const found = async (): Promise<string | undefined> => {
      const routes = await readRoutes(exec, proto);
      const routeDiff = diffRoutes(routes, prev.routes);
      if (routeDiff.replace.length + routeDiff.remove.length > 0) return `routes: ${routeDiff.replace.length} missing or changed, ${routeDiff.remove.length} not ours to keep`;
      for (const family of FAMILIES) {
        const rules = family === 4 ? prev.v4 : prev.v6;
        const bin = `${family === 4 ? 'iptables' : 'ip6tables'}-${be}`;
        const probes = quickProbes(rules, layout);
        const listings = await Promise.all(probes.map((p) => exec(bin, ['--wait', '5', '-t', p.table, '-S', p.chain]).then((r) => (r.code === 0 ? r.stdout : undefined))));
        for (const [i, probe] of probes.entries()) {
          const why = compareProbe(probe, listings[i], layout);
          if (why !== undefined) return `IPv${family} ${why}`;
        }
        if (deep) {
          const why = compareSave(rules, await save(exec, be, family), layout);
          if (why !== undefined) return `IPv${family} ${why}`;
        }
      }
      return undefined;
    };
    const why = await found();
    // Forget what was applied: the next sync reads the namespace back and rewrites all of ours.
    if (why !== undefined && applied === prev) applied = undefined;
    return why;
  }

  // Decide the back end now, while the runtime's informers are still listing: the first sync can
  // then start reading the namespace back before it renders.
  void backend();

  return {
    sync: (state, o) => serial(() => doSync(state, o.full)),
    checkDrift: (o) => serial(() => doCheckDrift(o.deep)),
    cleanup: () => serial(doCleanup),
    backend,
    close: () => exec.close(),
  };
}
