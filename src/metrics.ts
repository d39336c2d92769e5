/**
 * One prom-client registry per process. Each program registers its own metrics on it; the
 * default process metrics (RSS, CPU, event-loop lag) come along so footprint is visible too.
 */
import client from 'prom-client';

export type Registry = client.Registry;
export { client as prom };

export function createRegistry(prefix: string): client.Registry {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry, prefix: `${prefix}_` });
  return registry;
}

/** Latency buckets in seconds, fine below a millisecond (admission, rule sync) up to ten seconds. */
export const FINE_SECONDS_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];
