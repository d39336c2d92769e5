/**
 * Which endpoint addresses of a Service became ready, or stopped being ready, with each
 * EndpointSlice watch event: the "slice event that carries the change" a proxy acts on. Pure; the
 * caller timestamps events on receipt.
 */
import type { V1EndpointSlice } from '../../src/kube/types.js';

export interface SliceChange {
  readonly service: string;
  /** The slice's manager (`endpointslice.kubernetes.io/managed-by`). */
  readonly manager: string;
  readonly added: readonly string[];
  readonly removed: readonly string[];
}

const SERVICE_LABEL = 'kubernetes.io/service-name';
const MANAGED_BY_LABEL = 'endpointslice.kubernetes.io/managed-by';

/** Addresses of endpoints a proxy sends new connections to: ready (an absent condition counts as ready, as the API says). */
export function readyAddresses(slice: V1EndpointSlice): string[] {
  return (slice.endpoints ?? []).filter((e) => e.conditions?.ready !== false).flatMap((e) => e.addresses);
}

/** Keeps each slice's ready addresses and reports, per event, what changed for its Service and manager. */
export class SliceTracker {
  private readonly slices = new Map<string, { service: string; manager: string; ready: readonly string[] }>();

  private union(service: string, manager: string): Set<string> {
    const out = new Set<string>();
    for (const s of this.slices.values()) if (s.service === service && s.manager === manager) for (const a of s.ready) out.add(a);
    return out;
  }

  /** One watch event (ADDED, MODIFIED, DELETED; BOOKMARK is ignored). */
  event(type: string, slice: V1EndpointSlice): SliceChange | undefined {
    const name = `${slice.metadata?.namespace ?? ''}/${slice.metadata?.name ?? ''}`;
    const labels = slice.metadata?.labels ?? {};
    const service = labels[SERVICE_LABEL];
    const manager = labels[MANAGED_BY_LABEL] ?? '';
    if (service === undefined || type === 'BOOKMARK') return undefined;
    const before = this.union(service, manager);
    if (type === 'DELETED') this.slices.delete(name);
    else this.slices.set(name, { service, manager, ready: readyAddresses(slice) });
    const after = this.union(service, manager);
    const added = [...after].filter((a) => !before.has(a));
    const removed = [...before].filter((a) => !after.has(a));
    return added.length + removed.length > 0 ? { service, manager, added, removed } : undefined;
  }

  ready(service: string, manager: string): string[] {
    return [...this.union(service, manager)].sort();
  }
}

/** A dataplane sync as the sidecar logs it at info level (`rules applied`): when it ended and how long it took (ms since the epoch, ms). */
export interface AppliedSync {
  readonly end: number;
  readonly ms: number;
  readonly full: boolean;
  /** The rule back end that wrote it (`iptables`, `nftables`), when the line names one. */
  readonly backend?: string;
  /** Run-queue wait of the sidecar (main thread and child processes) during the sync, and of its main thread since the sync before (src/cpu-wait.ts), when logged. */
  readonly cpuWaitMs?: number;
  readonly cpuWaitBeforeMs?: number;
}

/** The sidecar's `rules applied` lines (pino JSON: time, ms, full, backend). Other lines are ignored. */
export function appliedSyncs(log: string): AppliedSync[] {
  const out: AppliedSync[] = [];
  for (const line of log.split('\n')) {
    if (!line.includes('"rules applied"')) continue;
    try {
      const o = JSON.parse(line) as { msg?: string; ms?: unknown; full?: unknown; time?: unknown; backend?: unknown; cpuWaitMs?: unknown; cpuWaitBeforeMs?: unknown };
      if (o.msg === 'rules applied' && typeof o.ms === 'number' && typeof o.time === 'number')
        out.push({
          end: o.time,
          ms: o.ms,
          full: o.full === true,
          ...(typeof o.backend === 'string' ? { backend: o.backend } : {}),
          ...(typeof o.cpuWaitMs === 'number' ? { cpuWaitMs: o.cpuWaitMs } : {}),
          ...(typeof o.cpuWaitBeforeMs === 'number' ? { cpuWaitBeforeMs: o.cpuWaitBeforeMs } : {}),
        });
    } catch {
      // not a JSON line
    }
  }
  return out;
}

/** Where one change's time went, in ms: event → sync start (waiting), sync start → rule in place, rule in place → sync end. */
export interface Breakdown {
  readonly waiting: number;
  readonly toRule: number;
  readonly afterRule: number;
}

/**
 * Splits event → rule (both ms since the epoch) at the start of the sync that put the rule in
 * place: the last one started by the rule time (`slackMs` for clock rounding: pino logs whole
 * milliseconds, the sync's own ms is rounded) that ended no earlier than `lagMs` before it. Why
 * the lag: the rule time is when the bench read nft monitor's line, and a writer that answers at
 * its commit (nfnl-batch's "ok") lets the sync end before the monitor's report is read, by
 * milliseconds on a loaded machine; then `afterRule` is negative.
 */
export function breakdown(eventAt: number, ruleAt: number, syncs: readonly AppliedSync[], slackMs = 2, lagMs = 50): Breakdown | undefined {
  const s = syncOfRule(ruleAt, syncs, slackMs, lagMs);
  if (s === undefined) return undefined;
  const start = s.end - s.ms;
  return { waiting: start - eventAt, toRule: ruleAt - start, afterRule: s.end - ruleAt };
}

/** The sync that put a rule seen at `ruleAt` in place (see `breakdown`), if the log has it. */
export function syncOfRule(ruleAt: number, syncs: readonly AppliedSync[], slackMs = 2, lagMs = 50): AppliedSync | undefined {
  return syncs.findLast((x) => x.end - x.ms - slackMs <= ruleAt && ruleAt <= x.end + Math.max(slackMs, lagMs));
}

/**
 * The earliest moment a rule is known to be in place, from two upper bounds of its commit: when
 * the bench read nft monitor's report (`ruleAt`), and the end of the matched sync as the sidecar
 * logged it, which comes after the kernel acknowledged the commit (+1 ms: pino logs whole
 * milliseconds, rounded down). The matched sync is the committing one or a later one (syncs run
 * one at a time), so its end is never before the commit.
 */
export function ruleBound(ruleAt: number, syncs: readonly AppliedSync[]): { readonly at: number; readonly by: 'nft monitor' | 'sync end' } {
  const s = syncOfRule(ruleAt, syncs);
  return s !== undefined && s.end + 1 < ruleAt ? { at: s.end + 1, by: 'sync end' } : { at: ruleAt, by: 'nft monitor' };
}
