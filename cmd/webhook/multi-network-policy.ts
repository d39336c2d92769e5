/**
 * MultiNetworkPolicy validation at admission: the checks every consumer also runs
 * (src/policy/validate.ts), and the networks of policy-for, which must exist. Pure; the NAD
 * lookups are the caller's (handlers.ts), bounded and fail-closed like the Service's.
 */
import { POLICY_FOR_ANNOTATION } from '../../src/keys.js';
import { networkKey, type NetworkRef } from '../../src/annotations/service-network.js';
import { describePolicy, type MultiNetworkPolicy } from '../../src/policy/api.js';
import { checkPolicy } from '../../src/policy/validate.js';
import type { NadLookup } from './cluster.js';

export type PolicyDenyReason = 'invalid' | 'unknown-network' | 'network-unverified';

export type PolicyVerdict =
  | { readonly allowed: true; readonly networks: readonly NetworkRef[]; readonly warnings: readonly string[]; readonly reason: 'valid' | 'being-deleted' }
  | { readonly allowed: false; readonly reason: PolicyDenyReason; readonly code: 400 | 403; readonly message: string };

function beingDeleted(p: MultiNetworkPolicy | undefined): boolean {
  return p?.metadata?.deletionTimestamp !== undefined && p.metadata.deletionTimestamp !== null;
}

/** What validation reads: an update that leaves it as it was needs no new check. */
function checkedView(p: MultiNetworkPolicy | undefined): string {
  return JSON.stringify([p?.metadata?.annotations?.[POLICY_FOR_ANNOTATION] ?? null, p?.spec ?? null]);
}

/**
 * `old` is the stored object on UPDATE. A policy being deleted whose update leaves spec and
 * policy-for as they were (a finalizer removed) passes, so its removal is never blocked.
 */
export function validatePolicyObject(policy: MultiNetworkPolicy, namespace: string, old?: MultiNetworkPolicy): PolicyVerdict {
  if ((beingDeleted(policy) || beingDeleted(old)) && old !== undefined && checkedView(policy) === checkedView(old)) return { allowed: true, networks: [], warnings: [], reason: 'being-deleted' };
  const checked = checkPolicy(policy, namespace);
  if (!checked.ok) return { allowed: false, reason: 'invalid', code: 400, message: checked.error.message };
  return { allowed: true, networks: checked.value.networks ?? [], warnings: checked.value.warnings, reason: 'valid' };
}

/**
 * Every network of policy-for must exist: a policy for a network that is not there isolates
 * nothing, which is never what its author meant. A NAD that cannot be read now denies too (fail
 * closed: a slow lookup must not skip the check). Undefined when all exist.
 */
export function policyNetworkProblem(policy: MultiNetworkPolicy, namespace: string, lookups: readonly { ref: NetworkRef; nad: NadLookup }[]): Extract<PolicyVerdict, { allowed: false }> | undefined {
  const object = describePolicy(policy, namespace);
  const value = policy.metadata?.annotations?.[POLICY_FOR_ANNOTATION] ?? '';
  for (const { ref, nad } of lookups) {
    if (nad.state === 'missing') {
      return {
        allowed: false,
        reason: 'unknown-network',
        code: 400,
        message: `${object}: annotation ${POLICY_FOR_ANNOTATION} ${JSON.stringify(value)}: NetworkAttachmentDefinition ${networkKey(ref)} does not exist; create it first, or name an existing network ("<nad>" in the policy's namespace or "<namespace>/<nad>")`,
      };
    }
    if (nad.state === 'unknown') {
      return {
        allowed: false,
        reason: 'network-unverified',
        code: 403,
        message: `${object}: annotation ${POLICY_FOR_ANNOTATION}: NetworkAttachmentDefinition ${networkKey(ref)} could not be read just now, so whether it exists cannot be checked; try again, and if this persists check the webhook's logs and its access to NetworkAttachmentDefinitions`,
      };
    }
  }
  return undefined;
}
