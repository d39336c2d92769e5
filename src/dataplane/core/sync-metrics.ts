/**
 * The metrics of a rule sync loop (scheduler.ts), for any program that runs one: syncs by kind
 * and result, their duration, failures, what is programmed, slice-change latencies, drift checks.
 * Each program registers them under its own prefix (`multus_proxy_sidecar_`, `multus_proxy_node_`).
 * The loop records through this small interface so its tests can read the numbers back.
 */
import { FINE_SECONDS_BUCKETS, prom, type Registry } from '../../metrics.js';

export type SyncKind = 'full' | 'partial' | 'skipped';
export type SyncOutcome = 'success' | 'error';

/** Slice-change latencies run from tens of milliseconds to minutes (an apiserver outage). */
const LATENCY_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export interface SyncMetrics {
  sync(kind: SyncKind, result: SyncOutcome, seconds: number): void;
  restoreFailure(): void;
  /** Failed syncs in a row (0 after a success): non-zero means the rules are behind and being retried. */
  failing(consecutive: number): void;
  /** Size of what is programmed after a successful sync. */
  programmed(targets: number, endpoints: number, rules: number | undefined): void;
  /** From the informer seeing a slice change to the rules for it being applied. */
  sliceToRules(seconds: number): void;
  /** A drift check ran (deep: with an iptables-save), and whether it found our rules changed. */
  driftCheck(deep: boolean, drift: boolean): void;
  /** From the slice's last-change-trigger-time (the pod change behind it) to the rules being applied. */
  triggerToRules(seconds: number): void;
}

/** `driftChecks: false` for a program whose loop runs none (no always-zero series). */
export function createSyncMetrics(registry: Registry, prefix: string, opts: { driftChecks?: boolean } = {}): SyncMetrics {
  const n = (s: string): string => `${prefix}_${s}`;
  const syncs = new prom.Counter({ name: n('syncs_total'), help: 'Rule syncs by kind (full, partial, skipped) and result.', labelNames: ['kind', 'result'], registers: [registry] });
  const duration = new prom.Histogram({
    name: n('sync_duration_seconds'),
    help: 'Duration of rule syncs (state, render and restore) by kind.',
    labelNames: ['kind'],
    buckets: FINE_SECONDS_BUCKETS,
    registers: [registry],
  });
  const failures = new prom.Counter({ name: n('restore_failures_total'), help: 'Failed syncs (iptables-restore, route or interface transactions).', registers: [registry] });
  const failing = new prom.Gauge({
    name: n('sync_consecutive_failures'),
    help: 'Failed syncs in a row; 0 once a sync succeeds. While non-zero the last good rules stay in place and the sync is retried with backoff.',
    registers: [registry],
  });
  const targets = new prom.Gauge({ name: n('targets'), help: 'Service port targets (cluster IP or node port x port) programmed.', registers: [registry] });
  const endpoints = new prom.Gauge({ name: n('endpoints'), help: 'Endpoints across all programmed targets.', registers: [registry] });
  const rules = new prom.Gauge({ name: n('rules'), help: 'iptables rules programmed (both families).', registers: [registry] });
  const sliceLatency = new prom.Histogram({
    name: n('slice_change_to_rules_seconds'),
    help: 'From an EndpointSlice change arriving at this program to the rules reflecting it being applied.',
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const triggerLatency = new prom.Histogram({
    name: n('trigger_to_rules_seconds'),
    help: "From an EndpointSlice's endpoints.kubernetes.io/last-change-trigger-time to the rules being applied (network programming latency).",
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const drift =
    opts.driftChecks === false
      ? undefined
      : new prom.Counter({
          name: n('drift_checks_total'),
          help: 'Checks that our rules are as written (kind quick or deep), by result (ok, drift: a full rewrite followed).',
          labelNames: ['kind', 'result'],
          registers: [registry],
        });
  if (drift !== undefined) for (const kind of ['quick', 'deep'] as const) for (const result of ['ok', 'drift'] as const) drift.inc({ kind, result }, 0);
  // Zero series, so dashboards show 0 before the first failure instead of nothing.
  for (const kind of ['full', 'partial', 'skipped'] as const) for (const result of ['success', 'error'] as const) syncs.inc({ kind, result }, 0);

  return {
    sync(kind, result, seconds) {
      syncs.inc({ kind, result });
      duration.observe({ kind }, seconds);
    },
    restoreFailure: () => failures.inc(),
    failing: (c) => failing.set(c),
    programmed(t, e, r) {
      targets.set(t);
      endpoints.set(e);
      if (r !== undefined) rules.set(r);
    },
    driftCheck: (deep, found) => drift?.inc({ kind: deep ? 'deep' : 'quick', result: found ? 'drift' : 'ok' }),
    sliceToRules: (s) => sliceLatency.observe(s),
    triggerToRules: (s) => triggerLatency.observe(s),
  };
}
