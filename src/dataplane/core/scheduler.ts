/**
 * When to sync, separate from what to sync: the one sync loop of every program that programs
 * rules (the sidecar, the node agent). Events only mark the state dirty; this loop turns bursts
 * of them into few syncs:
 * - coalesced: sync starts are bounded by a token bucket: up to `syncBurst` (default 2) may start
 *   back to back, then one per `minSyncIntervalMs`; never while one runs. A lone change, or one
 *   right after another (a pod turning ready, then another leaving), starts a sync at once, while
 *   a storm of events still gets one sync per interval (kube-proxy's BoundedFrequencyRunner had
 *   the same allowance);
 * - skipped: a partial sync whose desired state equals the last applied one does nothing;
 * - full: the first sync (it adopts what a previous run left), the first one after a failure
 *   (the namespace may be in any state then), and one after a drift check found our rules changed
 *   from outside;
 * - checked: every `driftCheckIntervalMs` a cheap check compares our rules with what was written
 *   (src/dataplane/drift.ts; every `DEEP_CHECK_EVERY`th check also counts every chain's rules),
 *   instead of rewriting everything periodically (the sidecar). The check is due by time, not by
 *   idleness: when it falls due during a sync it runs right after that sync, ahead of the next
 *   one, so steady churn cannot starve it (only a full sync, which repairs anyway, replaces it);
 * - or resynced: with `fullResyncIntervalMs`, a full sync that long after the last one (the node
 *   agent, whose host interfaces and addresses no rule check covers);
 * - retried: a failed sync is retried with exponential backoff from `retryMinMs` to `retryMaxMs`.
 * Liveness is false while one sync has run longer than `stuckAfterMs` (a hung restore).
 */
import type { Logger } from '../../log.js';
export { sliceTriggerMs } from '../../annotations/trigger-time.js';
import type { SyncKind, SyncMetrics } from './sync-metrics.js';

export interface SyncLoopOptions {
  readonly minSyncIntervalMs: number;
  /** Syncs that may start back to back before `minSyncIntervalMs` applies (default SYNC_BURST). */
  readonly syncBurst?: number;
  /** How often to run the program's drift check (`SyncLoopDeps.checkDrift`); unset: none. */
  readonly driftCheckIntervalMs?: number;
  /** A full sync this long after the last full one; unset: none (drift checks instead). */
  readonly fullResyncIntervalMs?: number;
  readonly retryMinMs: number;
  readonly retryMaxMs: number;
  readonly stuckAfterMs: number;
}

/** What a dataplane reports after a successful sync; all optional (counts feed metrics). */
export interface ApplyReport {
  readonly rules?: number;
  /** False when the dataplane found nothing to change (its own text comparison): counted as skipped. */
  readonly changed?: boolean;
}

export interface SyncLoopDeps<S> {
  /** The desired state from the current caches (called at the start of every sync). */
  compute(): S;
  /** Applies it; throws on failure. `full` means rewrite everything, not only what changed. */
  apply(state: S, opts: { full: boolean }): Promise<ApplyReport | void>;
  /** Whether two states are equal, so a partial sync of the last applied one is skipped; unset: never skipped here (the dataplane may still report `changed: false`). */
  same?(a: S, b: S): boolean;
  /** Service port targets and endpoints in a state, for the metrics. */
  size(state: S): { targets: number; endpoints: number };
  /** Why the rules are no longer as last applied (then a full sync follows), or undefined. */
  checkDrift?(opts: { deep: boolean }): Promise<string | undefined>;
  readonly metrics: SyncMetrics;
  readonly log: Logger;
  readonly now?: () => number;
  /** After a failed sync (its error, `failures` in a row), and after the first success that follows failures (undefined, 0): so the program can say so (an Event). */
  onOutcome?(error: unknown, failures: number): void;
}

export interface SyncLoop {
  /** Starts the loop with a full sync. */
  start(): void;
  markDirty(): void;
  /** A slice changed (observed at `observedMs`, triggered at `triggerMs` if the slice says): for latency metrics. */
  noteSliceChange(key: string, observedMs: number, triggerMs?: number): void;
  /** True once a sync has succeeded. */
  synced(): boolean;
  /** Resolves after the first successful sync. */
  readonly firstSync: Promise<void>;
  live(): boolean;
  /** Stops scheduling and waits for a running sync to finish. */
  stop(): Promise<void>;
}

interface PendingChange {
  readonly observedMs: number;
  readonly triggerMs: number | undefined;
}

/** Every this many drift checks, one is deep (an iptables-save per family): 10 minutes by default. */
export const DEEP_CHECK_EVERY = 10;

/** Default burst allowance: a change right after another is applied at once, a third waits. */
export const SYNC_BURST = 2;

/** The sync starts still allowed at `at` (a token bucket that refills one token per interval). */
export interface SyncBudget {
  readonly tokens: number;
  readonly at: number;
}

export function fullBudget(burst: number): SyncBudget {
  return { tokens: burst, at: -Infinity };
}

/** Tokens available at `now`: one more per `intervalMs` since `b.at`, at most `burst`. Pure. */
export function budgetAt(b: SyncBudget, now: number, intervalMs: number, burst: number): number {
  if (intervalMs <= 0) return burst;
  return Math.min(burst, b.tokens + Math.max(0, now - b.at) / intervalMs);
}

/** How long a sync wanted at `now` must wait for a token (0: start at once). Pure. */
export function budgetDelayMs(b: SyncBudget, now: number, intervalMs: number, burst: number): number {
  const t = budgetAt(b, now, intervalMs, burst);
  return t >= 1 ? 0 : Math.ceil((1 - t) * intervalMs);
}

/** The budget after a sync started at `now`. Pure. */
export function spendBudget(b: SyncBudget, now: number, intervalMs: number, burst: number): SyncBudget {
  return { tokens: Math.max(0, budgetAt(b, now, intervalMs, burst) - 1), at: now };
}

/** Exponential backoff: min, 2·min, 4·min, … capped at max. */
export function backoffMs(failures: number, min: number, max: number): number {
  return Math.min(max, min * 2 ** Math.min(30, Math.max(0, failures - 1)));
}

/**
 * Runs `f` after `delayMs`; with no wait due, in this turn's check phase (setImmediate) rather
 * than by a 0 ms timer, which Node clamps to 1 ms: that millisecond was on every change's path.
 * Changes delivered in the same poll phase still share one sync. Returns the cancel.
 */
export function startSoon(f: () => void, delayMs: number): () => void {
  if (delayMs <= 0) {
    const i = setImmediate(f);
    return () => clearImmediate(i);
  }
  const t = setTimeout(f, delayMs);
  return () => clearTimeout(t);
}

export function createSyncLoop<S>(opts: SyncLoopOptions, deps: SyncLoopDeps<S>): SyncLoop {
  const now = deps.now ?? Date.now;
  let started = false;
  let stopped = false;
  let dirty = false;
  let fullPending = true;
  let running: Promise<void> | undefined;
  let runStartedMs = 0;
  const burst = Math.max(1, opts.syncBurst ?? SYNC_BURST);
  let budget = fullBudget(burst);
  /** Cancels the sync that is armed to start (a timer, or an immediate when no wait is due). */
  let timer: (() => void) | undefined;
  let checkTimer: NodeJS.Timeout | undefined;
  let resyncTimer: NodeJS.Timeout | undefined;
  let failures = 0;
  let retryAtMs = 0;
  let lastApplied: S | undefined;
  let everSynced = false;
  // Slice changes not yet reflected in applied rules; the first observation of each slice counts.
  let pending = new Map<string, PendingChange>();
  let resolveFirst: () => void = () => {};
  const firstSync = new Promise<void>((resolve) => (resolveFirst = resolve));

  /** What runs when nothing is running: a due drift check first, then a sync. */
  function next(): void {
    if (running !== undefined || stopped) return;
    if (checkDue) {
      checkDue = false;
      // A full sync about to run (or retrying) rewrites everything; it re-arms the check on success.
      if (fullPending) return schedule();
      timer?.();
      timer = undefined;
      checks += 1;
      const deep = checks % DEEP_CHECK_EVERY === 0;
      running = runCheck(deep).finally(() => {
        running = undefined;
        armCheck();
        next();
      });
      return;
    }
    schedule();
  }

  function schedule(): void {
    if (!started || stopped || running !== undefined || timer !== undefined) return;
    if (!dirty && !fullPending) return;
    const t = now();
    const delay = Math.max(budgetDelayMs(budget, t, opts.minSyncIntervalMs, burst), failures > 0 ? retryAtMs - t : 0);
    timer = startSoon(() => {
      timer = undefined;
      running = runOnce().finally(() => {
        running = undefined;
        next();
      });
    }, delay);
  }

  let checks = 0;
  /** The drift check fell due and has not run yet (it runs as soon as nothing else does). */
  let checkDue = false;
  function armCheck(): void {
    clearTimeout(checkTimer);
    checkTimer = undefined;
    checkDue = false;
    if (deps.checkDrift === undefined || opts.driftCheckIntervalMs === undefined || stopped) return;
    checkTimer = setTimeout(() => {
      checkTimer = undefined;
      // Due now. A partial sync does not cover it (it writes only what changed), so a running
      // sync only defers it to its end, and a sync waiting for its budget waits behind it.
      checkDue = true;
      next();
    }, opts.driftCheckIntervalMs);
    // The check alone must not keep a process alive (the health server and informers do).
    checkTimer.unref();
  }

  function armResync(): void {
    clearTimeout(resyncTimer);
    const interval = opts.fullResyncIntervalMs;
    if (interval === undefined || stopped) return;
    resyncTimer = setTimeout(() => {
      resyncTimer = undefined;
      fullPending = true;
      schedule();
    }, interval);
    resyncTimer.unref();
  }

  async function runCheck(deep: boolean): Promise<void> {
    runStartedMs = now();
    try {
      const why = await deps.checkDrift?.({ deep });
      deps.metrics.driftCheck(deep, why !== undefined);
      if (why !== undefined) {
        deps.log.warn({ drift: why, deep }, 'our rules were changed from outside; rewriting them all');
        fullPending = true;
      }
    } catch (e) {
      deps.metrics.driftCheck(deep, true);
      deps.log.warn({ err: e, deep }, 'drift check failed; rewriting the rules to be sure');
      fullPending = true;
    }
  }

  function observeLatencies(changes: Map<string, PendingChange>): void {
    const t = now();
    for (const c of changes.values()) {
      deps.metrics.sliceToRules(Math.max(0, t - c.observedMs) / 1000);
      if (c.triggerMs !== undefined) deps.metrics.triggerToRules(Math.max(0, t - c.triggerMs) / 1000);
    }
  }

  async function runOnce(): Promise<void> {
    const full = fullPending;
    fullPending = false;
    dirty = false;
    const changes = pending;
    pending = new Map();
    runStartedMs = now();
    budget = spendBudget(budget, runStartedMs, opts.minSyncIntervalMs, burst);
    let kind: SyncKind = full ? 'full' : 'partial';
    try {
      const state = deps.compute();
      if (!full && lastApplied !== undefined && deps.same?.(state, lastApplied) === true) {
        kind = 'skipped';
      } else {
        // Forget the last state first: if apply fails half-way, nothing may be skipped as "unchanged".
        lastApplied = undefined;
        const report = await deps.apply(state, { full });
        lastApplied = state;
        if (!full && report?.changed === false) kind = 'skipped';
        const { targets, endpoints } = deps.size(state);
        deps.metrics.programmed(targets, endpoints, report?.rules);
        deps.log.debug({ kind, targets, endpoints, ms: now() - runStartedMs }, 'rules synced');
      }
      deps.metrics.sync(kind, 'success', (now() - runStartedMs) / 1000);
      observeLatencies(changes);
      const failedBefore = failures;
      failures = 0;
      deps.metrics.failing(0);
      if (failedBefore > 0) deps.onOutcome?.(undefined, 0);
      if (full) {
        armCheck();
        armResync();
      }
      if (!everSynced) {
        everSynced = true;
        resolveFirst();
      }
    } catch (e) {
      failures += 1;
      const waitMs = backoffMs(failures, opts.retryMinMs, opts.retryMaxMs);
      retryAtMs = now() + waitMs;
      fullPending = true;
      // Keep the unapplied changes (earliest observation wins) for the latency of the retry.
      for (const [k, c] of changes) if (!pending.has(k)) pending.set(k, c);
      deps.metrics.sync(kind, 'error', (now() - runStartedMs) / 1000);
      deps.metrics.restoreFailure();
      deps.metrics.failing(failures);
      deps.onOutcome?.(e, failures);
      deps.log.error({ err: e, kind, failures, retryInMs: waitMs }, 'rule sync failed; retrying with a full sync');
    }
  }

  return {
    start() {
      if (started) return;
      started = true;
      schedule();
    },
    markDirty() {
      dirty = true;
      schedule();
    },
    noteSliceChange(key, observedMs, triggerMs) {
      if (!pending.has(key)) pending.set(key, { observedMs, triggerMs });
    },
    synced: () => everSynced,
    firstSync,
    live: () => running === undefined || now() - runStartedMs <= opts.stuckAfterMs,
    async stop() {
      stopped = true;
      timer?.();
      clearTimeout(checkTimer);
      clearTimeout(resyncTimer);
      timer = undefined;
      checkTimer = resyncTimer = undefined;
      await running;
    },
  };
}
