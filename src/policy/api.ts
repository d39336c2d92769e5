/**
 * The MultiNetworkPolicy API as it is written (`k8s.cni.cncf.io/v1beta1` and `v1beta2`), field for
 * field: NetworkPolicy's shape under another group, with the networks in the annotation
 * `k8s.v1.cni.cncf.io/policy-for`. v1beta2 adds `endPort`; the two versions are otherwise the same,
 * so one type reads both. Everything here is tenant input, typed as it may arrive: the validator
 * (validate.ts) checks it before anything uses it.
 */
import { MULTI_NETWORK_POLICY_KIND, POLICY_FOR_ANNOTATION } from '../keys.js';
import { parseServiceNetwork, type NetworkRef } from '../annotations/service-network.js';
import type { Result } from '../result.js';

export type LabelSelectorOperator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

/** metav1.LabelSelectorRequirement. */
export interface LabelSelectorRequirement {
  readonly key: string;
  readonly operator: LabelSelectorOperator;
  readonly values?: readonly string[];
}

/** metav1.LabelSelector: every `matchLabels` pair and every expression must hold; empty selects all. */
export interface LabelSelector {
  readonly matchLabels?: Readonly<Record<string, string>>;
  readonly matchExpressions?: readonly LabelSelectorRequirement[];
}

export type MultiPolicyType = 'Ingress' | 'Egress';

export type Protocol = 'TCP' | 'UDP' | 'SCTP';

export interface MultiNetworkPolicyPort {
  /** TCP when absent. */
  readonly protocol?: Protocol;
  /** A number or a named port (an IANA service name); every port when absent. */
  readonly port?: number | string;
  /** v1beta2: the last port of a range that starts at a numeric `port`. */
  readonly endPort?: number;
}

export interface IPBlock {
  readonly cidr: string;
  /** CIDRs inside `cidr` that this peer does not cover. */
  readonly except?: readonly string[];
}

/**
 * A peer: pods (`podSelector`, `namespaceSelector` or both) or an `ipBlock`, never both kinds.
 * `podSelector` alone means pods of the policy's own namespace.
 */
export interface MultiNetworkPolicyPeer {
  readonly podSelector?: LabelSelector;
  readonly namespaceSelector?: LabelSelector;
  readonly ipBlock?: IPBlock;
}

export interface MultiNetworkPolicyIngressRule {
  readonly ports?: readonly MultiNetworkPolicyPort[];
  readonly from?: readonly MultiNetworkPolicyPeer[];
}

export interface MultiNetworkPolicyEgressRule {
  readonly ports?: readonly MultiNetworkPolicyPort[];
  readonly to?: readonly MultiNetworkPolicyPeer[];
}

export interface MultiNetworkPolicySpec {
  /** The pods of the policy's namespace it applies to (all of them when empty). */
  readonly podSelector?: LabelSelector;
  readonly ingress?: readonly MultiNetworkPolicyIngressRule[];
  readonly egress?: readonly MultiNetworkPolicyEgressRule[];
  /** When absent: Ingress, plus Egress when `egress` has a rule (NetworkPolicy's defaulting). */
  readonly policyTypes?: readonly MultiPolicyType[];
}

export interface MultiNetworkPolicy {
  readonly apiVersion?: string;
  readonly kind?: typeof MULTI_NETWORK_POLICY_KIND;
  readonly metadata?: {
    readonly name?: string;
    readonly generateName?: string;
    readonly namespace?: string;
    readonly uid?: string;
    /** Bumped by the apiserver on each spec change: address groups say which one they were written for. */
    readonly generation?: number;
    readonly labels?: Readonly<Record<string, string>>;
    readonly annotations?: Readonly<Record<string, string>>;
    readonly deletionTimestamp?: string | Date;
  };
  readonly spec?: MultiNetworkPolicySpec;
}

/** `MultiNetworkPolicy <namespace>/<name>`, the object in every message. */
export function describePolicy(policy: MultiNetworkPolicy, namespace: string = policy.metadata?.namespace ?? ''): string {
  return `${MULTI_NETWORK_POLICY_KIND} ${namespace}/${policy.metadata?.name ?? policy.metadata?.generateName ?? '(no name)'}`;
}

/** `<namespace>/<name>`, as PolicyRule.policy and PolicyFailure.policy carry it. */
export function policyKey(policy: MultiNetworkPolicy, namespace: string = policy.metadata?.namespace ?? ''): string {
  return `${namespace}/${policy.metadata?.name ?? ''}`;
}

/**
 * The networks of `k8s.v1.cni.cncf.io/policy-for`: `<nad>`, `<namespace>/<nad>` or a comma list,
 * a bare name in the policy's namespace, blanks around items ignored, duplicates dropped (the
 * syntax of the service-network annotation, so one parser serves both). Undefined when the
 * annotation is absent: such a policy is for no network and isolates nothing, as with the
 * reference implementation. Linear in the value.
 */
export function policyNetworks(policy: MultiNetworkPolicy, namespace: string = policy.metadata?.namespace ?? ''): Result<NetworkRef[]> | undefined {
  const value = policy.metadata?.annotations?.[POLICY_FOR_ANNOTATION];
  if (value === undefined) return undefined;
  return parseServiceNetwork(value, namespace, POLICY_FOR_ANNOTATION);
}
