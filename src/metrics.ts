/**
 * One prom-client registry per process. Each program registers its own metrics on it; the
 * default process metrics (RSS, CPU, event-loop lag) come along so footprint is visible too.
 */
import client from 'prom-client';

export type Registry = client.Registry;
export { client as prom };

/**
 * How often (ms) the event-loop-delay histogram samples. prom-client's default, 10 ms, wakes an
 * otherwise idle process 100 times a second: that alone was 0.4% of a core, most of the sidecar's
 * idle CPU (B5 in docs/benchmarks.md); at 200 ms a bare node with the default metrics uses 0.1%.
 * The cost: a stall shorter than 200 ms is seen only if it covers a sample (in proportion to its
 * length); a stall of 200 ms or more is always seen, and those are the ones worth alerting on.
 */
export const EVENT_LOOP_MONITORING_PRECISION_MS = 200;

export function createRegistry(prefix: string): client.Registry {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry, prefix: `${prefix}_`, eventLoopMonitoringPrecision: EVENT_LOOP_MONITORING_PRECISION_MS });
  return registry;
}

/** Latency buckets in seconds, fine below a millisecond (admission, rule sync) up to ten seconds. */
export const FINE_SECONDS_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];
