/**
 * The sidecar's environment contract: the settings, the environment variable (and flag) of each,
 * and the health port. Two programs hold to it: the webhook writes these variables into the
 * container it injects, the sidecar reads them (cmd/sidecar/options.ts). Keeping it here, not in
 * either program, is what lets neither import the other.
 */

import type { ExternalIPPolicy } from './external-ips.js';

export type IptablesBackend = 'auto' | 'nft' | 'legacy';

/** Which rule back end the sidecar writes with; auto is nftables where the probe table loads, else iptables (docs/decisions/0022-auto-prefers-nftables.md). */
export type RuleBackendChoice = 'auto' | 'iptables' | 'nftables';
export const RULE_BACKENDS: readonly RuleBackendChoice[] = ['auto', 'iptables', 'nftables'];

/**
 * The source guard (cmd/sidecar/source-guard.ts): enforce, or off where the cluster admin exempts
 * the pod (the webhook's sourceGuard settings, docs/decisions/0300-source-guard-exemption-by-cluster-admin.md).
 */
export type SourceGuardMode = 'enforce' | 'off';
export const SOURCE_GUARD_MODES: readonly SourceGuardMode[] = ['enforce', 'off'];

export interface SidecarOptions {
  /** The pod this sidecar runs in (downward API). */
  readonly podName: string;
  readonly podNamespace: string;
  /** Explicit kubeconfig; undefined means $KUBECONFIG, then in-cluster (see src/kube/config.ts). */
  readonly kubeconfig: string | undefined;
  readonly healthPort: number;
  readonly healthHost: string;
  /** Syncs start at most this often; events in between are coalesced into the next sync. */
  readonly minSyncIntervalMs: number;
  /** Our rules are checked against what was written this often; a full rewrite follows only on drift. */
  readonly driftCheckIntervalMs: number;
  /** Backoff after a failed sync: doubles from min to max. */
  readonly retryMinMs: number;
  readonly retryMaxMs: number;
  /** Liveness turns false when one sync has been running longer than this. */
  readonly stuckAfterMs: number;
  readonly iptablesBackend: IptablesBackend;
  /** iptables or nftables; whichever starts removes the other's rules. */
  readonly backend: RuleBackendChoice;
  /**
   * The pod's annotations as the kubelet writes them into a downwardAPI volume (`metadata.annotations`);
   * the webhook mounts it, so the sidecar needs no right to read pods. Unset: it watches its pod.
   */
  readonly annotationsFile: string | undefined;
  /**
   * At most this many Service ports (targets) are served per network; past it, the network is
   * shared max-min between namespaces, the pod's own first (src/service-cap.ts), with an
   * Event naming the namespace over its share and a metric. Bounds the sidecar's memory whatever
   * a tenant creates on a shared network.
   */
  readonly maxServicesPerNetwork: number;
  /**
   * The nftables element writer's sender, nfnl-batch (src/dataplane/nft/element-writer.ts): its
   * path (default where the image puts it), or false (`off`): endpoint changes go through nft text.
   * Development runs point it at what scripts/build-native.sh builds.
   */
  readonly elementWriter: string | false;
  /**
   * The node this pod runs on (downward API `spec.nodeName`), for internalTrafficPolicy Local and
   * same-node hints; '' when unknown (then no endpoint counts as local).
   */
  readonly nodeName: string;
  /**
   * The zone of that node, for zone hints; '' when unknown (then zone hints are not used, as
   * kube-proxy on a node without the zone label). The webhook fills it from the pod's
   * `topology.kubernetes.io/zone` label (set by the PodTopologyLabels admission plugin where the
   * cluster enables it); docs/decisions/0161-sidecar-node-and-zone.md.
   */
  readonly nodeZone: string;
  /**
   * The CIDRs the cluster admin allows external IPs from (src/external-ips.ts), which the sidecar
   * re-checks before serving one; not configured (no variable): none is served.
   */
  readonly externalIPs: ExternalIPPolicy;
  /**
   * This pod's labels from the downwardAPI volume (metadata.labels), for the MultiNetworkPolicies
   * that select it; unset: no policy selects the pod by label.
   */
  readonly podLabelsFile?: string;
  /**
   * This pod's named containerPorts (immutable after creation, so the webhook writes them once, as
   * JSON `[{"name","containerPort","protocol"}]`), for named ports in ingress rules.
   */
  readonly podContainerPorts?: readonly { readonly name?: string; readonly containerPort: number; readonly protocol?: string }[];
  /**
   * How long the first sync waits for the address groups of the policies that select the pod to be
   * written for their current generation; then it goes ahead without them (fail-closed) and says so.
   */
  readonly policyHoldMs: number;
  /** How often the sidecar asks again whether the MultiNetworkPolicy API is served, while it is not (its CRD is optional). */
  readonly policyApiRetryMs: number;
  /** The source guard: the webhook always sets it from the admin's settings; unset (a sidecar run by hand): enforce. */
  readonly sourceGuard: SourceGuardMode;
}

/** Environment variable and flag for each setting (the webhook sets the variables). */
export const OPTION_SOURCES = {
  podName: { env: 'POD_NAME', flag: 'pod-name' },
  podNamespace: { env: 'POD_NAMESPACE', flag: 'pod-namespace' },
  kubeconfig: { env: 'KUBECONFIG', flag: 'kubeconfig' },
  healthPort: { env: 'HEALTH_PORT', flag: 'health-port' },
  healthHost: { env: 'HEALTH_HOST', flag: 'health-host' },
  minSyncIntervalMs: { env: 'MIN_SYNC_INTERVAL_MS', flag: 'min-sync-interval-ms' },
  driftCheckIntervalMs: { env: 'DRIFT_CHECK_INTERVAL_MS', flag: 'drift-check-interval-ms' },
  retryMinMs: { env: 'SYNC_RETRY_MIN_MS', flag: 'sync-retry-min-ms' },
  retryMaxMs: { env: 'SYNC_RETRY_MAX_MS', flag: 'sync-retry-max-ms' },
  stuckAfterMs: { env: 'SYNC_STUCK_AFTER_MS', flag: 'sync-stuck-after-ms' },
  iptablesBackend: { env: 'IPTABLES_BACKEND', flag: 'iptables-backend' },
  backend: { env: 'DATAPLANE_BACKEND', flag: 'backend' },
  annotationsFile: { env: 'POD_ANNOTATIONS_FILE', flag: 'pod-annotations-file' },
  maxServicesPerNetwork: { env: 'MAX_SERVICES_PER_NETWORK', flag: 'max-services-per-network' },
  elementWriter: { env: 'ELEMENT_WRITER', flag: 'element-writer' },
  nodeName: { env: 'NODE_NAME', flag: 'node-name' },
  nodeZone: { env: 'NODE_ZONE', flag: 'node-zone' },
  externalIPsAllowedCIDRs: { env: 'EXTERNAL_IPS_ALLOWED_CIDRS', flag: 'external-ips-allowed-cidrs' },
  podLabelsFile: { env: 'POD_LABELS_FILE', flag: 'pod-labels-file' },
  podContainerPorts: { env: 'POD_CONTAINER_PORTS', flag: 'pod-container-ports' },
  policyHoldMs: { env: 'POLICY_HOLD_MS', flag: 'policy-hold-ms' },
  policyApiRetryMs: { env: 'POLICY_API_RETRY_MS', flag: 'policy-api-retry-ms' },
  sourceGuard: { env: 'SOURCE_GUARD', flag: 'source-guard' },
} as const satisfies Record<Exclude<keyof SidecarOptions, 'externalIPs'> | 'externalIPsAllowedCIDRs', { env: string; flag: string }>;

/** The node label the zone comes from (and the pod label PodTopologyLabels copies it to). */
export const ZONE_LABEL = 'topology.kubernetes.io/zone';

/** Where the webhook mounts the downwardAPI volume, and the file of the annotations in it. */
export const POD_INFO_DIR = '/etc/multus-proxy/podinfo';
export const POD_ANNOTATIONS_FILE = `${POD_INFO_DIR}/annotations`;
export const POD_LABELS_FILE = `${POD_INFO_DIR}/labels`;

/** The default of maxServicesPerNetwork (the webhook injects its own setting, the same by default). */
export const DEFAULT_MAX_SERVICES_PER_NETWORK = 2_000;

/** The default of policyHoldMs: the controller writes a new policy's groups within a second or two; this covers its restart. */
export const DEFAULT_POLICY_HOLD_MS = 15_000;

/** The default of policyApiRetryMs. */
export const DEFAULT_POLICY_API_RETRY_MS = 30_000;

/** Port of /healthz, /readyz and /metrics; the webhook's probes point here. */
export const DEFAULT_HEALTH_PORT = 9180;

/**
 * The Events the sidecar writes on its own pod (cmd/sidecar/problems.ts, cmd/sidecar/runtime.ts); the
 * controller's `diagnose` command reads them to say whether a sidecar is synced.
 */
export const EVENT_COMPONENT = 'multus-proxy-sidecar';
export const REASON_INVALID_ANNOTATION = 'SidecarInvalidAnnotation';
export const REASON_SYNC_FAILED = 'SidecarSyncFailed';
export const REASON_SYNC_RECOVERED = 'SidecarSyncRecovered';
export const REASON_SERVICE_CAP_REACHED = 'ServiceCapReached';
/** An address-group slice's endpoint-macs annotation cannot be used (its addresses match by address alone). */
export const REASON_INVALID_GROUP_ANNOTATION = 'AddressGroupInvalidAnnotation';
/** A Service over the sidecar's budget per object (src/cache-budget.ts) is not served. */
export const REASON_SERVICE_OVER_BUDGET = 'ServiceOverBudget';
/** The first sync went ahead without a selecting policy's address groups (fail-closed: no peers from them). */
export const REASON_POLICY_GROUPS_MISSING = 'PolicyAddressGroupsMissing';
/** A policy selects the pod and the rule back end cannot enforce policy: the sidecar stays not ready. */
export const REASON_POLICY_BACKEND_REFUSED = 'PolicyBackendUnsupported';
/** Rules of the pod's policies are left out past the sidecar's cap on policy set elements (fail-closed: they allow nothing). */
export const REASON_POLICY_CAP_REACHED = 'PolicyCapReached';
