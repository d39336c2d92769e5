/**
 * What the sidecar says about its syncs: each sync's outcome logged with the run-queue wait before
 * and during it, and each problem (a skipped target, a warning, a Service over the cap) once while
 * it lasts, not on every sync: a bad Service stays bad until someone fixes it, and one line per
 * sync would bury everything else.
 */
import type { Logger } from '../../src/log.js';
import type { Dataplane, SyncResult } from '../../src/dataplane/index.js';
import type { ApplyReport } from '../../src/dataplane/index.js';
import { snapshotWait, waitBetween } from '../../src/cpu-wait.js';

export type LogOnce = (group: string, messages: readonly { level: 'info' | 'warn'; msg: string }[]) => void;

/** Logs each message of a group once while it lasts. */
export function onceLogger(log: Logger): LogOnce {
  const seen = new Map<string, Set<string>>();
  return (group, messages) => {
    const before = seen.get(group) ?? new Set<string>();
    const now = new Set<string>();
    for (const m of messages) {
      now.add(m.msg);
      if (!before.has(m.msg)) log[m.level]({ problem: m.msg }, m.msg);
    }
    seen.set(group, now);
  };
}

type Waits = { cpuWaitBeforeMs?: number; cpuWaitMs?: number };

/** The dataplane's sync, timed against the run queue (src/cpu-wait.ts) and logged when it changed something. */
export class SyncReporter {
  /** Run-queue wait taken at the end of the last sync. */
  private lastWait = snapshotWait();

  constructor(
    private readonly dataplane: Pick<Dataplane, 'sync'>,
    private readonly log: Logger,
    private readonly logOnce: LogOnce,
  ) {}

  /** The sync with the run-queue wait before it (since the last sync ended) and during it, logged with it. */
  readonly syncAndWait = async (state: Parameters<Dataplane['sync']>[0], opts: { full: boolean }): Promise<ApplyReport> => {
    const start = snapshotWait();
    const r = await this.dataplane.sync(state, opts);
    const end = snapshotWait();
    const waits = start.size > 0 ? { cpuWaitBeforeMs: waitBetween(this.lastWait, start), cpuWaitMs: waitBetween(start, end) } : {};
    this.lastWait = end;
    return this.report(r, waits);
  };

  private report(r: SyncResult, waits: Waits): ApplyReport {
    this.logOnce(
      'skipped',
      r.skipped.map((t) => ({ level: t.level, msg: `${t.target}: ${t.reason}` })),
    );
    this.logOnce(
      'warnings',
      r.warnings.map((w) => ({ level: 'warn', msg: w })),
    );
    if (r.changed) {
      const restored = r.families.filter((f) => f.text !== '');
      this.log.info(
        {
          full: r.full,
          backend: r.backend,
          ms: Math.round(r.durationMs),
          chains: restored.flatMap((f) => f.changedChains).length,
          routesReplaced: r.routesReplaced,
          routesRemoved: r.routesRemoved,
          conntrackFlushes: r.conntrackFlushes,
          served: r.served,
          ...waits,
        },
        'rules applied',
      );
    }
    return { rules: r.families.reduce((n, f) => n + f.rules, 0), changed: r.changed };
  }
}
