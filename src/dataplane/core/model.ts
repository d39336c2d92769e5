/**
 * The dataplane's model, shared by every program that programs a pod's network namespace (the
 * sidecar, the node agent): the desired state (what state.ts builds from Kubernetes objects), the
 * resolved targets (what resolve.ts decides) and the shared render every back end's stage starts
 * from. Nothing here knows about Kubernetes objects, processes or any back end's rules, so rendering
 * can be tested against golden files.
 */
import type { NetworkRef } from '../../annotations/service-network.js';
import type { Change } from './engine.js';
import type { ClientPlace, TrafficSettings } from '../../service-semantics/endpoints.js';
import type { PodPolicy } from '../../policy/model.js';

export type IpFamily = 4 | 6;
export type Protocol = 'TCP' | 'UDP' | 'SCTP';

/** One backend address of one Service port, with the EndpointSlice conditions. */
export interface BackendEndpoint {
  readonly ip: string;
  /** The port on the backend (targetPort, already resolved by the controller). */
  readonly port: number;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  /** Where the endpoint runs and its hints, from the slice: set only when the slice says. */
  readonly nodeName?: string;
  readonly zone?: string;
  readonly zoneHints?: readonly string[];
  readonly nodeHints?: readonly string[];
}

/** One port of one Service on one network and one address family: the unit that gets a chain. */
export interface ServicePortTarget {
  /** `namespace/name` of the Service. */
  readonly service: string;
  /** The Service port's name ('' when unnamed). */
  readonly portName: string;
  readonly protocol: Protocol;
  /** The Service's cluster IP of this family (one target per cluster IP). */
  readonly clusterIP: string;
  readonly port: number;
  readonly family: IpFamily;
  /** The network the endpoints are on; the pod must have an interface on it. */
  readonly network: NetworkRef;
  /** All endpoints the slices list for this port and family; the renderer picks ready / serving+terminating. */
  readonly endpoints: readonly BackendEndpoint[];
  /** sessionAffinity ClientIP timeout in seconds, or undefined when affinity is None. */
  readonly affinityTimeoutSeconds?: number;
  /**
   * Set when `clusterIP` is one of a LoadBalancer Service's ingress IPs (`status.loadBalancer.ingress`,
   * ipMode VIP) rather than a cluster IP: the client reaches it directly, as kube-proxy short-circuits
   * in-cluster traffic to a load balancer's address. Absent for cluster IPs.
   */
  readonly ingress?: true;
  /**
   * Set when `clusterIP` is one of the Service's `spec.externalIPs` the admin's allowed CIDRs admit
   * (src/external-ips.ts): served to the client as kube-proxy serves it to a pod, through the
   * cluster endpoints, as an ingress IP. Absent for cluster IPs.
   */
  readonly externalIP?: true;
  /** The Service's traffic policies; absent: Cluster for both, as a Service that sets neither. */
  readonly traffic?: TrafficSettings;
  /**
   * Where the client is. Set when the choice of endpoints depends on it (internalTrafficPolicy
   * Local, or endpoints with hints): then resolve.ts applies kube-proxy's categorisation, else
   * every ready endpoint is used as before. On the target, not the state, so a target's work stays
   * a function of the target alone (the render's memo is keyed by target).
   */
  readonly place?: ClientPlace;
}

/** The client pod's interface on one network, from its network-status. */
export interface PodInterface {
  readonly network: NetworkRef;
  readonly interface: string;
  readonly ipv4: readonly string[];
  readonly ipv6: readonly string[];
}

/**
 * Everything the renderer needs for one sync. A runtime builds it with `StateMemo`
 * (incremental.ts), which recomputes only the Services whose objects changed and hands back the same
 * target objects for the rest; the renderer (incremental.ts) then recognises unchanged targets by
 * identity in O(1) and, when only endpoints of a few targets changed, edits its previous result
 * instead of rendering everything again. A state built from scratch gives the same output, only
 * slower (a property test checks the two agree).
 */
export interface DesiredState {
  readonly targets: readonly ServicePortTarget[];
  readonly interfaces: readonly PodInterface[];
  /** The pod's compiled MultiNetworkPolicy (policy-state.ts withPodPolicy); absent: nothing isolated. A new object means a change. */
  readonly policy?: PodPolicy;
}

// ---------------------------------------------------------------------------------------------
// Resolution: which targets are served, through which interface, to which endpoints

export interface ChosenEndpoint {
  readonly ip: string;
  readonly port: number;
}

/** A target the pod serves, with everything rendering needs decided. */
export interface ResolvedTarget {
  readonly target: ServicePortTarget;
  /** Normalised cluster IP. */
  readonly clusterIP: string;
  readonly chain: string;
  readonly interface: string;
  /** The pod's address on that interface: the source of every connection to the cluster IP. */
  readonly source: string;
  /** Endpoints that get traffic (ready; else serving+terminating), sorted, deduplicated. */
  readonly endpoints: readonly ChosenEndpoint[];
  /**
   * Which rule picked them, for logs, metrics and the empty case: 'none' (no endpoint anywhere)
   * is refused at once; 'drop' (endpoints exist, none for this client, as internalTrafficPolicy
   * Local without a local one) is dropped, as kube-proxy does.
   */
  readonly choice: 'ready' | 'terminating' | 'none' | 'drop';
  readonly affinitySeconds?: number;
  /** Its cluster IP's route (the first target of a cluster IP decides). */
  readonly route: Route;
}

export interface SkippedTarget {
  /** `namespace/name:port/PROTO (clusterIP)` */
  readonly target: string;
  readonly reason: string;
  /** 'info' for normal situations (the pod is not on that network), 'warn' for bad input. */
  readonly level: 'info' | 'warn';
}

export interface Route {
  readonly family: IpFamily;
  /** Cluster IP (normalised), routed as /32 or /128. */
  readonly dst: string;
  readonly dev: string;
  readonly src: string;
}

export interface Resolution {
  readonly targets: readonly ResolvedTarget[];
  readonly skipped: readonly SkippedTarget[];
  /** Endpoints dropped for bad input, as messages. */
  readonly warnings: readonly string[];
}

// ---------------------------------------------------------------------------------------------
// Rendered: what the rules of one sync are

/**
 * The shared render: what every back end's stage (seam.ts Stage) starts from. It holds no back
 * end's rules: each back end's stage makes them (../iptables/stage.ts, ../nftables/stage.ts, or a
 * program's own).
 */
export interface Rendered {
  readonly resolution: Resolution;
  readonly routes: readonly Route[];
  /** The state's policy, passed through as is (each back end's stage renders it, or refuses it: ../policy-support.ts). */
  readonly policy?: PodPolicy;
  /** Set by a render with a cache (incremental.ts): this render's version, unique in the process. */
  readonly version?: number;
  /**
   * The engine's step (engine.ts): the served targets, by chain, that changed since render
   * `from` of the same cache (an unchanged one is the very object it was). Absent: this render
   * was made from scratch, and so is every stage after it.
   */
  readonly delta?: RenderDelta;
}

export interface RenderDelta {
  readonly from: number;
  readonly targets: readonly Change<ResolvedTarget>[];
}
