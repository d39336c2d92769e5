/**
 * What `diagnose` finds, as data: the pure diagnosis functions (pod.ts, service.ts) return these,
 * the renderers (render.ts) print them as text or JSON. The JSON form is this shape as it is, so
 * scripts read the same fields the text shows; `code` values are stable.
 */

/** `error`: traffic does not flow because of it; `warning`: it flows, but something is off; `ok`/`info`: for the reader. */
export type Severity = 'ok' | 'info' | 'warning' | 'error';

export interface Finding {
  readonly severity: Severity;
  /** What the finding is about, for grouping: e.g. `injection`, `sidecar`, `annotation`, `network`, `endpoints`. */
  readonly topic: string;
  /** Stable for scripts, e.g. `NamespaceNotEnabled`, `SidecarSyncFailed`, `NetworkStatusMissing`. */
  readonly code: string;
  readonly message: string;
  /** What to do about it, when there is something to do. */
  readonly fix?: string;
}

/** A Service a client pod's sidecar serves, and what it has to send traffic to. */
export interface ServedService {
  readonly service: string;
  readonly clusterIP: string;
  readonly ports: string[];
  readonly readyEndpoints: number;
  readonly endpoints: number;
}

export interface PodNetwork {
  /** `namespace/nad`. */
  readonly network: string;
  /** From network-status; undefined when Multus reported no entry for the network. */
  readonly interface?: string;
  readonly addresses: string[];
  readonly services: ServedService[];
}

export interface SidecarState {
  /** native: an init container with restartPolicy Always; regular: an ordinary container. */
  readonly mode: 'native' | 'regular';
  readonly ready: boolean;
  readonly restarts: number;
  /** e.g. `running`, `waiting: CrashLoopBackOff`, `terminated: Error (exit 1)`, `unknown` (no status yet). */
  readonly state: string;
  /** false: the latest sync Event says it fails; undefined: nothing known beyond readiness. */
  readonly synced: boolean | undefined;
}

export interface PodReport {
  readonly kind: 'Pod';
  readonly namespace: string;
  readonly name: string;
  /** `ok` when no finding is an error. */
  readonly verdict: 'ok' | 'problem';
  readonly injected: boolean;
  readonly sidecar?: SidecarState;
  readonly networks: PodNetwork[];
  /** MultiNetworkPolicy on the pod; absent when the policies could not be read. */
  readonly policy?: PodPolicyReport;
  readonly findings: Finding[];
}

/** One pod the Service selects, and whether clients reach it. */
export interface ServicePod {
  readonly pod: string;
  /** ready: in our slices and ready; not-ready: in them with ready=false; missing: in none; not-eligible: Succeeded/Failed. */
  readonly state: 'ready' | 'not-ready' | 'missing' | 'not-eligible';
  /** Addresses published for it (all networks). */
  readonly addresses: string[];
  /** Why it is missing or not ready, per network. */
  readonly reasons: { readonly network: string; readonly code: string; readonly message: string }[];
}

export interface ServiceNetwork {
  readonly network: string;
  /** Whether the NetworkAttachmentDefinition exists; `unknown` when it could not be read. */
  readonly nad: 'exists' | 'missing' | 'unknown';
  /** Whether the Service may name it (src/annotations/nad-sharing.ts). */
  readonly shared: boolean;
}

export interface ServiceReport {
  readonly kind: 'Service';
  readonly namespace: string;
  readonly name: string;
  readonly verdict: 'ok' | 'problem';
  readonly networks: ServiceNetwork[];
  /** The selector in use (spec.selector or the service-selector annotation), canonical form. */
  readonly selector?: string;
  readonly pods: ServicePod[];
  readonly readyEndpoints: number;
  readonly findings: Finding[];
}

export type Report = PodReport | ServiceReport;

export function verdictOf(findings: readonly Finding[]): 'ok' | 'problem' {
  return findings.some((f) => f.severity === 'error') ? 'problem' : 'ok';
}

/** A MultiNetworkPolicy that selects the pod: on which of its networks, in which directions. */
export interface PolicySelection {
  /** `<namespace>/<name>`. */
  readonly policy: string;
  /** The pod's networks the policy is for (`<namespace>/<nad>`); empty: it selects the pod on none of them. */
  readonly networks: string[];
  readonly ingress: boolean;
  readonly egress: boolean;
  /** Why it cannot be compiled; it then isolates and allows nothing (fail-closed). */
  readonly failure?: string;
}

/** One direction of one network: isolated or not, and by which policies. */
export interface PolicyDirection {
  readonly isolated: boolean;
  readonly by: string[];
}

export interface PolicyNetwork {
  readonly network: string;
  readonly interface: string;
  readonly ingress: PolicyDirection;
  readonly egress: PolicyDirection;
}

/** How one rule of an isolating policy judges the probe. */
export interface RuleCheck {
  /** `<namespace>/<name>`. */
  readonly policy: string;
  /** `spec.ingress[i]` or `spec.egress[i]`; absent when the policy has no rule in the direction or cannot be compiled (it allows nothing). */
  readonly rule?: string;
  readonly peer: boolean;
  readonly port: boolean;
  /** Why the peer or the port fails, one line each. */
  readonly reasons: string[];
}

/** The probe's answer on one network. */
export interface ProbeVerdict {
  readonly network: string;
  readonly direction: 'ingress' | 'egress';
  readonly peer: string;
  /** e.g. `8080/TCP`. */
  readonly port: string;
  /** allowed: a rule allows it; denied: the direction is isolated and no rule does; open: the direction is not isolated. */
  readonly result: 'allowed' | 'denied' | 'open';
  /** The first rule that allows it (policy order, then rule order). */
  readonly allowedBy?: string;
  /** Every rule of the isolating policies, when denied. */
  readonly rules: RuleCheck[];
}

export interface PodPolicyReport {
  /** Whether the pod has the sidecar that enforces policy (a container or init container named multus-proxy). */
  readonly enforced: boolean;
  readonly selectedBy: PolicySelection[];
  /** The pod's networks that a selecting policy isolates. */
  readonly networks: PolicyNetwork[];
  readonly probes: ProbeVerdict[];
}
