/**
 * The sidecar's desired-state model: what the runtime (informers) builds and what the pure
 * renderer turns into iptables-restore text and routes. Nothing here knows about Kubernetes
 * objects or processes, so rendering can be tested against golden files.
 */
import type { NetworkRef } from '../src/annotations/service-network.js';

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
}

/** The client pod's interface on one network, from its network-status. */
export interface PodInterface {
  readonly network: NetworkRef;
  readonly interface: string;
  readonly ipv4: readonly string[];
  readonly ipv6: readonly string[];
}

/**
 * Everything the renderer needs for one sync. The runtime builds it with `StateMemo`
 * (sidecar/state.ts), which recomputes only the Services whose objects changed and hands back the
 * same target objects for the rest; the renderer (RenderCache) then recognises unchanged targets by
 * identity in O(1) and, when only endpoints of a few targets changed, edits its previous result
 * instead of rendering everything again. A state built from scratch gives the same output, only
 * slower (a property test checks the two agree).
 */
export interface DesiredState {
  readonly targets: readonly ServicePortTarget[];
  readonly interfaces: readonly PodInterface[];
}
