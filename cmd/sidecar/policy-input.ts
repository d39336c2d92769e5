/**
 * The sidecar's own pod as MultiNetworkPolicy sees it, and the policy it enforces:
 * - the pod: its namespace, its labels (the downwardAPI labels file), its named containerPorts
 *   (POD_CONTAINER_PORTS) and its secondary networks with their interfaces and addresses (its
 *   network-status, as the Service rules read it);
 * - PolicyInput keeps the compiled PodPolicy (src/policy/resolve.ts) and computes it again only
 *   after a policy, a group, the labels or the networks changed; a result equal to the last is
 *   the last object, so the dataplane sees no change (a new object is one: withPodPolicy);
 * - unwrittenGroups: the selecting policies whose address groups the controller has not written
 *   for their current generation, for the first sync's hold (runtime.ts).
 * Pure but for the memo.
 */
import { createHash } from 'node:crypto';
import { matchesSelector } from '../../src/annotations/label-selector.js';
import { networkKey } from '../../src/annotations/service-network.js';
import type { NetworkStatusEntry } from '../../src/annotations/network-status.js';
import type { V1EndpointSlice } from '../../src/kube/types.js';
import { addressGroupView, policyPeerQueries, type AddressGroupView } from '../../src/policy/address-group.js';
import type { MultiNetworkPolicy } from '../../src/policy/api.js';
import type { PodPolicy } from '../../src/policy/model.js';
import { resolvePodPolicy, type ContainerPort, type PodNetwork, type SelectedPod } from '../../src/policy/resolve.js';
import { checkPolicy } from '../../src/policy/validate.js';

/** The pod's secondary networks for the resolver: each network-status entry of a `<namespace>/<nad>` with an interface. */
export function podNetworks(status: readonly NetworkStatusEntry[]): PodNetwork[] {
  const out: PodNetwork[] = [];
  for (const e of status) {
    if (e.default || e.namespace === undefined || e.nad === undefined || e.interface === undefined || e.interface === '') continue;
    out.push({ network: `${e.namespace}/${e.nad}`, interface: e.interface, addresses: [...e.ipv4, ...e.ipv6] });
  }
  return out;
}

/** A selecting policy whose address groups are not all written for its generation. */
export interface UnwrittenPolicy {
  /** `<namespace>/<name>`. */
  readonly policy: string;
  readonly generation: number | undefined;
  readonly missing: number;
  readonly queries: number;
}

/**
 * The policies that select `pod` (in its namespace, podSelector matching, for one of its networks)
 * with a peer query whose group is not written for the policy's metadata.generation. A policy that
 * fails its checks needs no group (it allows nothing) and is not listed.
 */
export function unwrittenGroups(pod: SelectedPod, policies: readonly MultiNetworkPolicy[], view: AddressGroupView): UnwrittenPolicy[] {
  const out: UnwrittenPolicy[] = [];
  const nets = new Set(pod.networks.map((n) => n.network));
  for (const p of policies) {
    if ((p.metadata?.namespace ?? '') !== pod.namespace) continue;
    const checked = checkPolicy(p, pod.namespace);
    if (!checked.ok || !matchesSelector(checked.value.podSelector, pod.labels)) continue;
    if (!(checked.value.networks ?? []).some((r) => nets.has(networkKey(r)))) continue;
    const queries = policyPeerQueries(checked.value);
    const generation = p.metadata?.generation;
    const missing = queries.filter((q) => !view.written(q, generation)).length;
    if (missing > 0) out.push({ policy: checked.value.key, generation, missing, queries: queries.length });
  }
  return out.sort((a, b) => (a.policy < b.policy ? -1 : a.policy > b.policy ? 1 : 0));
}

const digest = (text: string): string => createHash('sha256').update(text).digest('base64');

/** What a compute reads. */
export interface PolicySources {
  readonly status: readonly NetworkStatusEntry[];
  readonly policies: () => readonly MultiNetworkPolicy[];
  readonly groups: () => readonly V1EndpointSlice[];
}

export class PolicyInput {
  private labels: Readonly<Record<string, string>> = {};
  private dirty = true;
  private networksText = '';
  private current: PodPolicy | undefined;
  /** A digest of the last result's JSON, not the text: at the budgets that text is megabytes, kept for nothing but this comparison. */
  private currentDigest = digest('undefined');

  constructor(
    private readonly namespace: string,
    private readonly containerPorts: readonly ContainerPort[],
  ) {}

  /** The pod's labels were read; true when they changed. */
  setLabels(labels: Readonly<Record<string, string>>): boolean {
    if (JSON.stringify(labels) === JSON.stringify(this.labels)) return false;
    this.labels = labels;
    this.dirty = true;
    return true;
  }

  /** A policy or an address group changed. */
  changed(): void {
    this.dirty = true;
  }

  pod(status: readonly NetworkStatusEntry[]): SelectedPod {
    return { namespace: this.namespace, labels: this.labels, networks: podNetworks(status), containerPorts: this.containerPorts };
  }

  /** The compiled policy (undefined: nothing selects the pod on its networks); the same object while nothing it depends on changed. */
  compute(src: PolicySources): PodPolicy | undefined {
    const pod = this.pod(src.status);
    const networksText = JSON.stringify(pod.networks);
    if (!this.dirty && networksText === this.networksText) return this.current;
    this.dirty = false;
    this.networksText = networksText;
    const policies = src.policies();
    const resolved = policies.length === 0 ? undefined : resolvePodPolicy(pod, policies, addressGroupView(src.groups()).lookup);
    const next = resolved === undefined || resolved.networks.length === 0 ? undefined : resolved;
    const d = digest(JSON.stringify(next) ?? 'undefined');
    if (d !== this.currentDigest) {
      this.current = next;
      this.currentDigest = d;
    }
    return this.current;
  }
}
