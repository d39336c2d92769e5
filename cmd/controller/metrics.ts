/**
 * The controller's Prometheus metrics, on the process registry from src/metrics.ts.
 */
import { FINE_SECONDS_BUCKETS, prom, type Registry } from '../../src/metrics.js';

export interface ControllerMetrics {
  /** Reconciles by result: `unchanged` (no write), `written`, `invalid` (bad Service input), `stale` (cache behind our writes), `error`. */
  readonly reconciles: prom.Counter<'result'>;
  /** Errors by where they happened (`reconcile`, `rbac`, `event`, `leader`). */
  readonly errors: prom.Counter<'stage'>;
  readonly queueDepth: prom.Gauge;
  readonly reconcileDuration: prom.Histogram;
  /** From the informer event that changed a pod or Service to the slice write it caused. */
  readonly changeToWrite: prom.Histogram;
  /** Slice writes by verb (create, update, delete). */
  readonly sliceWrites: prom.Counter<'verb'>;
  /** Slice writes the apiserver refused as invalid (422), by verb (create, update); each is also a Warning `SliceRefused`. */
  readonly sliceWritesRefused: prom.Counter<'verb'>;
  /** Pods left out of slices by reason (counted when reported, with the same rate limit as the Event). */
  readonly podsSkipped: prom.Counter<'reason'>;
  readonly leader: prom.Gauge;
  /** Services refused whole for exceeding a per-object budget, by budget (networks, ports, bytes); each also gets a Warning `OverBudget`. */
  readonly objectsRefused: prom.Counter<'budget'>;
  /** Events not written, by why (duplicate, spam, full: src/kube/event-queue.ts). */
  readonly eventsDropped: prom.Counter<'why'>;
  /** MultiNetworkPolicy address-group reconciles by result (`unchanged`, `written`, `invalid`, `stale`, `waiting`, `error`). */
  readonly policyReconciles: prom.Counter<'result'>;
  /** Address-group EndpointSlice writes by verb (create, update, delete). */
  readonly addressGroupWrites: prom.Counter<'verb'>;
  /** Per policy (`<namespace>/<name>`): its address groups over budget, not written (its sidecars allow none of their peers); absent when none. */
  readonly policyGroupsOverBudget: prom.Gauge<'policy'>;
  /** Per policy: the pods it selects on one of its networks that run no sidecar (each gets a Warning `PolicyWithoutSidecar`); absent when none. */
  readonly policyPodsWithoutSidecar: prom.Gauge<'policy'>;
}

export function createControllerMetrics(registry: Registry): ControllerMetrics {
  const p = 'multus_proxy_controller';
  return {
    reconciles: new prom.Counter({ name: `${p}_reconciles_total`, help: 'Service reconciles by result', labelNames: ['result'], registers: [registry] }),
    errors: new prom.Counter({ name: `${p}_errors_total`, help: 'Errors by stage', labelNames: ['stage'], registers: [registry] }),
    queueDepth: new prom.Gauge({ name: `${p}_queue_depth`, help: 'Service keys waiting in the work queue', registers: [registry] }),
    reconcileDuration: new prom.Histogram({
      name: `${p}_reconcile_duration_seconds`,
      help: 'Time to reconcile one Service, writes included',
      buckets: FINE_SECONDS_BUCKETS,
      registers: [registry],
    }),
    changeToWrite: new prom.Histogram({
      name: `${p}_change_to_slice_write_seconds`,
      help: 'Latency from a pod or Service change seen by the informer to the EndpointSlice write it caused',
      buckets: FINE_SECONDS_BUCKETS,
      registers: [registry],
    }),
    sliceWrites: new prom.Counter({ name: `${p}_slice_writes_total`, help: 'EndpointSlice writes by verb', labelNames: ['verb'], registers: [registry] }),
    sliceWritesRefused: new prom.Counter({
      name: `${p}_slice_writes_refused_total`,
      help: 'EndpointSlice writes the apiserver refused as invalid (422), by verb',
      labelNames: ['verb'],
      registers: [registry],
    }),
    podsSkipped: new prom.Counter({ name: `${p}_pods_skipped_total`, help: 'Pods left out of slices, by reason', labelNames: ['reason'], registers: [registry] }),
    leader: new prom.Gauge({ name: `${p}_leader`, help: '1 while this replica holds the leader lease', registers: [registry] }),
    objectsRefused: new prom.Counter({
      name: `${p}_objects_refused_total`,
      help: 'Services refused whole for exceeding a per-object budget, by budget',
      labelNames: ['budget'],
      registers: [registry],
    }),
    eventsDropped: new prom.Counter({ name: `${p}_events_dropped_total`, help: 'Events not written, by why (duplicate, spam, full)', labelNames: ['why'], registers: [registry] }),
    policyReconciles: new prom.Counter({ name: `${p}_policy_reconciles_total`, help: 'MultiNetworkPolicy address-group reconciles by result', labelNames: ['result'], registers: [registry] }),
    addressGroupWrites: new prom.Counter({ name: `${p}_address_group_writes_total`, help: 'Address-group EndpointSlice writes by verb', labelNames: ['verb'], registers: [registry] }),
    policyGroupsOverBudget: new prom.Gauge({
      name: `${p}_policy_address_groups_over_budget`,
      help: 'Address groups of a MultiNetworkPolicy over budget and not written (its sidecars allow none of their peers)',
      labelNames: ['policy'],
      registers: [registry],
    }),
    policyPodsWithoutSidecar: new prom.Gauge({
      name: `${p}_policy_selected_pods_without_sidecar`,
      help: 'Pods a MultiNetworkPolicy selects on one of its networks that run no multus-proxy sidecar (nothing enforces it there)',
      labelNames: ['policy'],
      registers: [registry],
    }),
  };
}

/**
 * Requests this replica sent to the apiserver, by verb (get, list, watch, create, update, patch,
 * delete), read from the client at scrape time: shows apiserver load, and lets a test count the
 * writes a cut-off leader attempts.
 */
export function registerKubeRequests(registry: Registry, requestCount: () => { [verb: string]: number }): void {
  new prom.Counter({
    name: 'multus_proxy_controller_kube_requests_total',
    help: 'Requests sent to the apiserver, by verb',
    labelNames: ['verb'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [verb, n] of Object.entries(requestCount())) this.inc({ verb }, n);
    },
  });
}
