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

/** The scheduler's state and steps: when a sync or a drift check runs, and what follows its outcome. */
class SyncScheduler<S> {
  private readonly now: () => number;
  private readonly burst: number;
  private started = false;
  private stopped = false;
  private dirty = false;
  private fullPending = true;
  private running: Promise<void> | undefined;
  private runStartedMs = 0;
  private budget: SyncBudget;
  /** Cancels the sync that is armed to start (a timer, or an immediate when no wait is due). */
  private timer: (() => void) | undefined;
  private checkTimer: NodeJS.Timeout | undefined;
  private resyncTimer: NodeJS.Timeout | undefined;
  private failures = 0;
  private retryAtMs = 0;
  private lastApplied: S | undefined;
  private everSynced = false;
  private checks = 0;
  /** The drift check fell due and has not run yet (it runs as soon as nothing else does). */
  private checkDue = false;
  /** Slice changes not yet reflected in applied rules; the first observation of each slice counts. */
  private pending = new Map<string, PendingChange>();
  private resolveFirst: () => void = () => {};
  readonly firstSync = new Promise<void>((resolve) => (this.resolveFirst = resolve));

  constructor(
    private readonly opts: SyncLoopOptions,
    private readonly deps: SyncLoopDeps<S>,
  ) {
    this.now = deps.now ?? Date.now;
    this.burst = Math.max(1, opts.syncBurst ?? SYNC_BURST);
    this.budget = fullBudget(this.burst);
  }

  start(): void {
    if (this.started) return;
    this.started = true;
    this.schedule();
  }

  markDirty(): void {
    this.dirty = true;
    this.schedule();
  }

  noteSliceChange(key: string, observedMs: number, triggerMs?: number): void {
    if (!this.pending.has(key)) this.pending.set(key, { observedMs, triggerMs });
  }

  synced(): boolean {
    return this.everSynced;
  }

  live(): boolean {
    return this.running === undefined || this.now() - this.runStartedMs <= this.opts.stuckAfterMs;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.();
    clearTimeout(this.checkTimer);
    clearTimeout(this.resyncTimer);
    this.timer = undefined;
    this.checkTimer = this.resyncTimer = undefined;
    await this.running;
  }

  /** What runs when nothing is running: a due drift check first, then a sync. */
  private next(): void {
    if (this.running !== undefined || this.stopped) return;
    if (!this.checkDue) return this.schedule();
    this.checkDue = false;
    // A full sync about to run (or retrying) rewrites everything; it re-arms the check on success.
    if (this.fullPending) return this.schedule();
    this.timer?.();
    this.timer = undefined;
    this.checks += 1;
    const deep = this.checks % DEEP_CHECK_EVERY === 0;
    this.running = this.runCheck(deep).finally(() => {
      this.running = undefined;
      this.armCheck();
      this.next();
    });
  }

  private schedule(): void {
    if (!this.started || this.stopped || this.running !== undefined || this.timer !== undefined) return;
    if (!this.dirty && !this.fullPending) return;
    const t = this.now();
    const delay = Math.max(budgetDelayMs(this.budget, t, this.opts.minSyncIntervalMs, this.burst), this.failures > 0 ? this.retryAtMs - t : 0);
    this.timer = startSoon(() => {
      this.timer = undefined;
      this.running = this.runOnce().finally(() => {
        this.running = undefined;
        this.next();
      });
    }, delay);
  }

  private armCheck(): void {
    clearTimeout(this.checkTimer);
    this.checkTimer = undefined;
    this.checkDue = false;
    if (this.deps.checkDrift === undefined || this.opts.driftCheckIntervalMs === undefined || this.stopped) return;
    this.checkTimer = setTimeout(() => {
      this.checkTimer = undefined;
      // Due now. A partial sync does not cover it (it writes only what changed), so a running
      // sync only defers it to its end, and a sync waiting for its budget waits behind it.
      this.checkDue = true;
      this.next();
    }, this.opts.driftCheckIntervalMs);
    // The check alone must not keep a process alive (the health server and informers do).
    this.checkTimer.unref();
  }

  private armResync(): void {
    clearTimeout(this.resyncTimer);
    const interval = this.opts.fullResyncIntervalMs;
    if (interval === undefined || this.stopped) return;
    this.resyncTimer = setTimeout(() => {
      this.resyncTimer = undefined;
      this.fullPending = true;
      this.schedule();
    }, interval);
    this.resyncTimer.unref();
  }

  private async runCheck(deep: boolean): Promise<void> {
    const { deps } = this;
    this.runStartedMs = this.now();
    try {
      const why = await deps.checkDrift?.({ deep });
      deps.metrics.driftCheck(deep, why !== undefined);
      if (why !== undefined) {
        deps.log.warn({ drift: why, deep }, 'our rules were changed from outside; rewriting them all');
        this.fullPending = true;
      }
    } catch (e) {
      deps.metrics.driftCheck(deep, true);
      deps.log.warn({ err: e, deep }, 'drift check failed; rewriting the rules to be sure');
      this.fullPending = true;
    }
  }

  private observeLatencies(changes: Map<string, PendingChange>): void {
    const t = this.now();
    for (const c of changes.values()) {
      this.deps.metrics.sliceToRules(Math.max(0, t - c.observedMs) / 1000);
      if (c.triggerMs !== undefined) this.deps.metrics.triggerToRules(Math.max(0, t - c.triggerMs) / 1000);
    }
  }

  private async runOnce(): Promise<void> {
    const full = this.fullPending;
    this.fullPending = false;
    this.dirty = false;
    const changes = this.pending;
    this.pending = new Map();
    this.runStartedMs = this.now();
    this.budget = spendBudget(this.budget, this.runStartedMs, this.opts.minSyncIntervalMs, this.burst);
    const kind: { value: SyncKind } = { value: full ? 'full' : 'partial' };
    try {
      await this.applyOnce(full, kind);
      this.succeeded(full, kind.value, changes);
    } catch (e) {
      this.failed(e, kind.value, changes);
    }
  }

  /** Computes the state and applies it, unless a partial sync finds it unchanged (then `kind` becomes skipped). */
  private async applyOnce(full: boolean, kind: { value: SyncKind }): Promise<void> {
    const { deps } = this;
    const state = deps.compute();
    if (!full && this.lastApplied !== undefined && deps.same?.(state, this.lastApplied) === true) {
      kind.value = 'skipped';
      return;
    }
    // Forget the last state first: if apply fails half-way, nothing may be skipped as "unchanged".
    this.lastApplied = undefined;
    const report = await deps.apply(state, { full });
    this.lastApplied = state;
    if (!full && report?.changed === false) kind.value = 'skipped';
    const { targets, endpoints } = deps.size(state);
    deps.metrics.programmed(targets, endpoints, report?.rules);
    deps.log.debug({ kind: kind.value, targets, endpoints, ms: this.now() - this.runStartedMs }, 'rules synced');
  }

  private succeeded(full: boolean, kind: SyncKind, changes: Map<string, PendingChange>): void {
    const { deps } = this;
    deps.metrics.sync(kind, 'success', (this.now() - this.runStartedMs) / 1000);
    this.observeLatencies(changes);
    const failedBefore = this.failures;
    this.failures = 0;
    deps.metrics.failing(0);
    if (failedBefore > 0) deps.onOutcome?.(undefined, 0);
    if (full) {
      this.armCheck();
      this.armResync();
    }
    if (!this.everSynced) {
      this.everSynced = true;
      this.resolveFirst();
    }
  }

  private failed(e: unknown, kind: SyncKind, changes: Map<string, PendingChange>): void {
    const { deps } = this;
    this.failures += 1;
    const waitMs = backoffMs(this.failures, this.opts.retryMinMs, this.opts.retryMaxMs);
    this.retryAtMs = this.now() + waitMs;
    this.fullPending = true;
    // Keep the unapplied changes (earliest observation wins) for the latency of the retry.
    for (const [k, c] of changes) if (!this.pending.has(k)) this.pending.set(k, c);
    deps.metrics.sync(kind, 'error', (this.now() - this.runStartedMs) / 1000);
    deps.metrics.restoreFailure();
    deps.metrics.failing(this.failures);
    deps.onOutcome?.(e, this.failures);
    deps.log.error({ err: e, kind, failures: this.failures, retryInMs: waitMs }, 'rule sync failed; retrying with a full sync');
  }
}

export function createSyncLoop<S>(opts: SyncLoopOptions, deps: SyncLoopDeps<S>): SyncLoop {
  const s = new SyncScheduler(opts, deps);
  return {
    start: () => s.start(),
    markDirty: () => s.markDirty(),
    noteSliceChange: (key, observedMs, triggerMs) => s.noteSliceChange(key, observedMs, triggerMs),
    synced: () => s.synced(),
    firstSync: s.firstSync,
    live: () => s.live(),
    stop: () => s.stop(),
  };
}
