/**
 * The policy one sidecar enforces in its own pod, compiled: what NetworkPolicy's rules mean for this
 * pod on each of its networks, with every selector already resolved to addresses and every named
 * port to numbers. Pure data in neutral words: the resolver (src/policy) produces it, and each
 * back end renders it. Nothing here names a back end.
 */

export type PolicyProtocol = 'TCP' | 'UDP' | 'SCTP';

/** A port or a range (`port`..`endPort`) of one protocol; `from === to` for a single port. */
export interface PortRange {
  readonly protocol: PolicyProtocol;
  readonly from: number;
  readonly to: number;
}

/** An `ipBlock`: the CIDR less its `except` CIDRs (a per-peer set difference). */
export interface AddressBlock {
  readonly cidr: string;
  readonly except: readonly string[];
}

/** A rule's peers: pod addresses (each a single host) and address blocks. Either may be empty. */
export interface PeerSet {
  readonly addresses: readonly string[];
  readonly blocks: readonly AddressBlock[];
  /**
   * Ingress only (optional, additive): the MACs (canonical, unicast) of the pods behind some of
   * `addresses`, by address. Such an address matches only from one of its MACs; an address absent
   * here, and every block, matches by address alone.
   */
  readonly macs?: Readonly<Record<string, readonly string[]>>;
}

/** A named port resolved for one peer pod (egress): that peer's `containerPorts` entry. */
export interface PeerPort {
  readonly address: string;
  readonly protocol: PolicyProtocol;
  readonly port: number;
}

/**
 * One `ingress` or `egress` rule. A packet matches when its peer is in `peers` (every peer when
 * undefined) and its port is in `ports` or, for that peer, in `peerPorts` (every port and protocol
 * when both are undefined).
 */
export interface PolicyRule {
  /** `<namespace>/<name>` of the MultiNetworkPolicy, for metrics, counters and diagnose. */
  readonly policy: string;
  /** The rule's index in that policy's `ingress` or `egress` list. */
  readonly index: number;
  readonly peers?: PeerSet;
  readonly ports?: readonly PortRange[];
  readonly peerPorts?: readonly PeerPort[];
}

/** One direction on one network: isolated when any policy for it selects the pod in that direction. */
export interface DirectionPolicy {
  readonly isolated: boolean;
  /**
   * The policies (`<namespace>/<name>`) that isolate this direction, for their drop counters. Optional
   * (additive): absent, the policies named by `rules` stand for them.
   */
  readonly isolatedBy?: readonly string[];
  /** The union of every selecting policy's rules: a packet any rule matches is allowed. */
  readonly rules: readonly PolicyRule[];
}

/** A policy that selects the pod but cannot be compiled: it isolates (fail-closed) and allows nothing. */
export interface PolicyFailure {
  readonly policy: string;
  readonly message: string;
  /** The direction it isolates, when known (optional, additive); absent: both. */
  readonly direction?: 'ingress' | 'egress';
}

/** The pod's policy on one secondary network (one interface). */
export interface NetworkPolicySet {
  /** `<namespace>/<nad>`, as in `network-status`. */
  readonly network: string;
  /** The pod's interface on that network (net1, ...). */
  readonly interface: string;
  readonly ingress: DirectionPolicy;
  readonly egress: DirectionPolicy;
  readonly failures: readonly PolicyFailure[];
}

/** Everything the sidecar enforces; a network absent here is not isolated in either direction. */
export interface PodPolicy {
  readonly networks: readonly NetworkPolicySet[];
}
