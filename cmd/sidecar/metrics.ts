/**
 * The sidecar's Prometheus metrics, registered on the process registry from src/metrics.ts
 * (prefix `multus_proxy_sidecar_`): the sync loop's (src/dataplane/sync-metrics.ts), drift checks
 * included.
 */
import { createRegistry, prom, type Registry } from '../../src/metrics.js';
import { createSyncMetrics, type SyncMetrics } from '../../src/dataplane/index.js';
import type { Refusal } from '../../src/cache-budget.js';

export const METRIC_PREFIX = 'multus_proxy_sidecar';

export interface SidecarMetrics extends SyncMetrics {
  readonly registry: Registry;
  /** Whether the pod annotation's current value is unusable (the last good one is in use). */
  invalidAnnotation(annotation: 'service-network' | 'network-status', invalid: boolean): void;
  /** Services on a network not served because of the per-network cap (0 when under it). */
  servicesDropped(network: string, n: number): void;
  /** The Services refused as over the per-object budget, counted by the budget they break. */
  servicesRefused(list: readonly Pick<Refusal, 'key'>[]): void;
}

const BUDGET_KEYS: readonly Refusal['key'][] = ['bytes', 'ports', 'source-ranges', 'ingress', 'networks'];

export function createSidecarMetrics(registry: Registry = createRegistry(METRIC_PREFIX, 'lean')): SidecarMetrics {
  const invalid = new prom.Gauge({
    name: `${METRIC_PREFIX}_invalid_pod_annotation`,
    help: "1 while the pod's annotation (service-network, network-status) cannot be used; the last good value is served meanwhile (an Event on the pod says why).",
    labelNames: ['annotation'],
    registers: [registry],
  });
  for (const annotation of ['service-network', 'network-status']) invalid.set({ annotation }, 0);
  const dropped = new prom.Gauge({
    name: `${METRIC_PREFIX}_services_dropped`,
    help: 'Services on a network that are not served because its Service ports pass the per-network cap (MAX_SERVICES_PER_NETWORK) and their namespace is over its fair share (an Event on the pod names the namespace).',
    labelNames: ['network'],
    registers: [registry],
  });
  const refused = new prom.Gauge({
    name: `${METRIC_PREFIX}_services_refused`,
    help: "Services not served because they are over the sidecar's budget per object (ports, source ranges, ingress IPs, networks, bytes); an Event on the pod names them.",
    labelNames: ['budget'],
    registers: [registry],
  });
  for (const budget of BUDGET_KEYS) refused.set({ budget }, 0);
  return {
    registry,
    ...createSyncMetrics(registry, METRIC_PREFIX),
    invalidAnnotation: (annotation, bad) => invalid.set({ annotation }, bad ? 1 : 0),
    servicesDropped: (network, n) => dropped.set({ network }, n),
    servicesRefused: (list) => {
      for (const budget of BUDGET_KEYS) refused.set({ budget }, list.filter((r) => r.key === budget).length);
    },
  };
}
