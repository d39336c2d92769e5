/**
 * The sidecar's Prometheus metrics, registered on the process registry from src/metrics.ts
 * (prefix `multus_proxy_sidecar_`): the sync loop's (src/dataplane/sync-metrics.ts), drift checks
 * included.
 */
import { createRegistry, type Registry } from '../src/metrics.js';
import { createSyncMetrics, type SyncMetrics } from '../src/dataplane/sync-metrics.js';

export const METRIC_PREFIX = 'multus_proxy_sidecar';

export interface SidecarMetrics extends SyncMetrics {
  readonly registry: Registry;
}

export function createSidecarMetrics(registry: Registry = createRegistry(METRIC_PREFIX, 'lean')): SidecarMetrics {
  return { registry, ...createSyncMetrics(registry, METRIC_PREFIX) };
}
