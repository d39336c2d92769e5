/**
 * Which pods a MultiNetworkPolicy selects, and on which networks: what the webhook needs to know
 * that a pod must get the sidecar, without the rules. The same rule as the resolver (resolve.ts):
 * a policy selects the pods of its namespace that its podSelector matches, on the networks its
 * policy-for names; a policy that fails its checks selects by what could be read of it, and what
 * could not be read selects everything (fail-closed: every pod, every network). Pure.
 */
import { matchesSelector } from '../annotations/label-selector.js';
import { networkKey } from '../annotations/service-network.js';
import { compareText } from '../order.js';
import type { MultiNetworkPolicy } from './api.js';
import type { ParsedSelector } from './selector.js';
import { checkPolicy } from './validate.js';

/** What is kept of one policy to tell whom it selects. */
export interface PolicySelection {
  readonly namespace: string;
  readonly name: string;
  /** Undefined: the selector could not be read, so every pod of the namespace. */
  readonly podSelector?: ParsedSelector;
  /** `<namespace>/<nad>` keys; undefined: policy-for could not be read, so every network. */
  readonly networks?: readonly string[];
  /** Why the policy failed its checks, when it did. */
  readonly problem?: string;
}

/** The pod as selection sees it: its namespace, labels, and the networks it attaches (`<namespace>/<nad>`). */
export interface SelectablePod {
  readonly namespace: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly networks: readonly string[];
}

/** The policy that selects a pod, and the first network (in the pod's order) it selects it on. */
export interface Selected {
  readonly namespace: string;
  readonly name: string;
  readonly network: string;
  readonly problem?: string;
}

export function policySelection(policy: MultiNetworkPolicy, namespace: string = policy.metadata?.namespace ?? ''): PolicySelection {
  const name = policy.metadata?.name ?? '';
  const checked = checkPolicy(policy, namespace);
  if (checked.ok) return { namespace, name, podSelector: checked.value.podSelector, networks: (checked.value.networks ?? []).map(networkKey) };
  const p = checked.error;
  return {
    namespace,
    name,
    ...(p.podSelector !== undefined ? { podSelector: p.podSelector } : {}),
    ...(p.networks !== undefined ? { networks: p.networks.map(networkKey) } : {}),
    problem: p.message,
  };
}

/** The network of `pod` that `policy` selects it on, or undefined when it does not select the pod. */
export function selectsOn(policy: PolicySelection, pod: SelectablePod): string | undefined {
  if (policy.namespace !== pod.namespace) return undefined;
  if (policy.podSelector !== undefined && !matchesSelector(policy.podSelector, pod.labels)) return undefined;
  if (policy.networks === undefined) return pod.networks[0];
  const names = new Set(policy.networks);
  return pod.networks.find((n) => names.has(n));
}

/** The first policy by name that selects the pod (so a message names the same one each time), or undefined. */
export function selectingPolicy(policies: Iterable<PolicySelection>, pod: SelectablePod): Selected | undefined {
  let best: Selected | undefined;
  for (const p of policies) {
    if (best !== undefined && compareText(p.name, best.name) >= 0) continue;
    const network = selectsOn(p, pod);
    if (network !== undefined) best = { namespace: p.namespace, name: p.name, network, ...(p.problem !== undefined ? { problem: p.problem } : {}) };
  }
  return best;
}
