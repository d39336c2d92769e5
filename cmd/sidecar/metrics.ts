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
  /** MultiNetworkPolicies this sidecar enforces now (0 while it refuses policy on its back end). */
  policiesEnforced(n: number): void;
  /** Where the drops per policy come from: read when the metrics are scraped (policy-drops.ts). */
  policyDrops(read: () => Promise<readonly PolicyDrops[]>): void;
  /** The source guard was found deleted or altered at a drift check, and written again (ok) or not. */
  sourceGuardRestored(ok: boolean): void;
  /** Address-group slices whose endpoint-macs annotation cannot be used now. */
  invalidGroupAnnotations(n: number): void;
}

/** Packets one policy's drop counter counted in one direction. */
export interface PolicyDrops {
  readonly policy: string;
  readonly direction: 'ingress' | 'egress';
  readonly packets: number;
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
  const enforced = new prom.Gauge({
    name: `${METRIC_PREFIX}_policies_enforced`,
    help: 'MultiNetworkPolicies that select this pod on its networks and that the sidecar enforces (0 while its rule back end cannot enforce policy: the sidecar is then not ready, and an Event says why).',
    registers: [registry],
  });
  enforced.set(0);
  let readDrops: () => Promise<readonly PolicyDrops[]> = () => Promise.resolve([]);
  new prom.Counter({
    name: `${METRIC_PREFIX}_policy_drops_total`,
    help: "Packets a MultiNetworkPolicy dropped in this pod, by policy (namespace/name) and direction (ingress, egress): the policy's named nftables counter, read on scrape; it restarts from 0 when a full sync rewrites the sidecar's table.",
    labelNames: ['policy', 'direction'],
    registers: [registry],
    async collect() {
      const rows = await readDrops();
      this.reset();
      for (const r of rows) this.inc({ policy: r.policy, direction: r.direction }, r.packets);
    },
  });
  const restores = new prom.Counter({
    name: `${METRIC_PREFIX}_source_guard_restores_total`,
    help: "Times a drift check found the pod's source guard table (netdev multus_proxy_guard) deleted or altered from inside the pod, by result: ok (written again), failed (the write failed; retried at the next check).",
    labelNames: ['result'],
    registers: [registry],
  });
  for (const result of ['ok', 'failed']) restores.inc({ result }, 0);
  const badGroups = new prom.Gauge({
    name: `${METRIC_PREFIX}_invalid_address_group_annotations`,
    help: "Address-group EndpointSlices of the pod's namespace whose multus-proxy/endpoint-macs annotation cannot be used (their addresses match by address alone); an Event on the pod names each.",
    registers: [registry],
  });
  badGroups.set(0);
  return {
    registry,
    ...createSyncMetrics(registry, METRIC_PREFIX),
    invalidAnnotation: (annotation, bad) => invalid.set({ annotation }, bad ? 1 : 0),
    servicesDropped: (network, n) => dropped.set({ network }, n),
    servicesRefused: (list) => {
      for (const budget of BUDGET_KEYS) refused.set({ budget }, list.filter((r) => r.key === budget).length);
    },
    policiesEnforced: (n) => enforced.set(n),
    policyDrops: (read) => void (readDrops = read),
    sourceGuardRestored: (ok) => restores.inc({ result: ok ? 'ok' : 'failed' }),
    invalidGroupAnnotations: (n) => badGroups.set(n),
  };
}
