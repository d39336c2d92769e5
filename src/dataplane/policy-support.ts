/**
 * MultiNetworkPolicy and the rule back ends: the policy enters the dataplane's desired state here,
 * and only the nftables back end enforces it (nftables/policy.ts). The iptables back end has no
 * policy chains: a sidecar on it refuses to start policy, with the setting to change, rather than
 * run open. Also what a program reports of it: the render's warnings and the drop counters by
 * policy. Pure.
 */
import type { BackendKind } from './core/seam.js';
import type { DesiredState } from './core/model.js';
import type { PodPolicy } from '../policy/model.js';
import { NFT_TABLE } from './nftables/render.js';
import { directionDroppers, policyCounterName, renderPolicy } from './nftables/policy.js';
import { CAP_WARNING_MARK } from './nftables/policy-sets.js';

/** The back ends that enforce MultiNetworkPolicy. */
export const POLICY_BACKENDS: readonly BackendKind[] = ['nftables'];

/** The state with the pod's compiled policy (undefined: none, nothing isolated). A new policy object is a change; the same object is none. */
export function withPodPolicy(state: DesiredState, policy: PodPolicy | undefined): DesiredState {
  if (state.policy === policy) return state;
  if (policy === undefined) {
    const { policy: _none, ...rest } = state;
    return rest;
  }
  return { ...state, policy };
}

/** Whether a policy isolates anything (a policy that isolates nothing needs no back end's support). */
export const policyIsolates = (policy: PodPolicy | undefined): boolean => policy?.networks.some((n) => n.ingress.isolated || n.egress.isolated || n.failures.length > 0) === true;

/**
 * Why `kind` cannot enforce `policy`, or undefined when it can (or there is nothing to enforce).
 * `setting` names the option, as the back-end choice does (e.g. `DATAPLANE_BACKEND (--backend)`).
 */
export function policyBackendRefusal(kind: BackendKind, policy: PodPolicy | undefined, setting: string): string | undefined {
  if (POLICY_BACKENDS.includes(kind) || !policyIsolates(policy)) return undefined;
  const names = [...new Set(policy?.networks.flatMap((n) => [...n.ingress.rules, ...n.egress.rules].map((r) => r.policy).concat(n.failures.map((f) => f.policy))) ?? [])].sort();
  return (
    `MultiNetworkPolicy is not supported on the ${kind} back end: ${setting} selects ${kind}, and ${names.length > 0 ? `policies ${names.join(', ')} select` : 'a policy selects'} this pod. ` +
    `Policy is not enforced and the sidecar does not start it. Fix: set ${setting} to "nftables" (or "auto" on a node whose kernel and image support nftables)`
  );
}

/** What the back end leaves out of `policy` and why (a bad address, port or interface: that rule allows nothing); none on a back end without policy. */
export function policyRenderWarnings(kind: BackendKind, policy: PodPolicy | undefined): readonly string[] {
  return kind === 'nftables' ? (renderPolicy(policy)?.warnings ?? []) : [];
}

/** The render's warnings of rules left out past the sidecar's cap on policy set elements (nftables/policy-sets.ts). */
export function policyCapWarnings(kind: BackendKind, policy: PodPolicy | undefined): readonly string[] {
  return policyRenderWarnings(kind, policy).filter((w) => w.includes(CAP_WARNING_MARK));
}

/** A named drop counter of the policy: the policy (`<namespace>/<name>`) and direction it counts. */
export interface PolicyDropCounter {
  readonly name: string;
  readonly policy: string;
  readonly direction: 'ingress' | 'egress';
}

/** The nftables table that holds the policy's named counters (`nft list counters table inet <table>`). */
export const POLICY_COUNTER_TABLE = NFT_TABLE;

/** The drop counters the back end writes for `policy`, one per (policy, direction) that isolates (decision 0230). */
export function policyDropCounters(policy: PodPolicy | undefined): PolicyDropCounter[] {
  const out = new Map<string, PolicyDropCounter>();
  for (const n of policy?.networks ?? [])
    for (const direction of ['ingress', 'egress'] as const) {
      for (const p of directionDroppers(n, direction)) out.set(policyCounterName(p, direction), { name: policyCounterName(p, direction), policy: p, direction });
    }
  return [...out.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
