/**
 * One prom-client registry per process. Each program registers its own metrics on it; process
 * metrics (RSS, CPU, heap; for the long-lived Deployments also event-loop lag and GC) come along
 * so footprint is visible too.
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

/**
 * `full`: prom-client's default metrics (event-loop lag sampled every 200 ms, GC observer, handles,
 * versions, ...). `lean`: only process CPU, resident and heap memory, read when scraped, with the
 * same names: no timer, no GC observer, nothing in between scrapes. The sidecar, one per pod, is lean.
 */
export type DefaultMetrics = 'full' | 'lean';

export function createRegistry(prefix: string, defaults: DefaultMetrics = 'full'): client.Registry {
  const registry = new client.Registry();
  if (defaults === 'full') {
    client.collectDefaultMetrics({ register: registry, prefix: `${prefix}_`, eventLoopMonitoringPrecision: EVENT_LOOP_MONITORING_PRECISION_MS });
  } else {
    registerLeanProcessMetrics(registry, prefix);
  }
  return registry;
}

function registerLeanProcessMetrics(registry: client.Registry, prefix: string): void {
  const gauge = (name: string, help: string, read: () => number): void => {
    new client.Gauge({
      name: `${prefix}_${name}`,
      help,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });
  };
  gauge('process_cpu_seconds_total', 'Total user and system CPU time spent in seconds.', () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1e6;
  });
  gauge('process_resident_memory_bytes', 'Resident memory size in bytes.', () => process.memoryUsage.rss());
  gauge('nodejs_heap_size_total_bytes', 'Process heap size from Node.js in bytes.', () => process.memoryUsage().heapTotal);
  gauge('nodejs_heap_size_used_bytes', 'Process heap size used from Node.js in bytes.', () => process.memoryUsage().heapUsed);
}

/** Latency buckets in seconds, fine below a millisecond (admission, rule sync) up to ten seconds. */
export const FINE_SECONDS_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
