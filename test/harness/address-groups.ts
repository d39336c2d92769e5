/**
 * Address groups as the controller writes them (src/policy/address-group.ts), from a table of pods
 * instead of a pod cache: for tests of consumers (diagnose, the sidecar) that need the groups of a
 * policy without running the controller. One slice per group, address family and set of named
 * ports; an empty group is one slice without endpoints.
 */
import { matchesSelector } from '../../src/annotations/label-selector.js';
import { isIP } from 'node:net';
import {
  ADDRESS_GROUP_LABEL,
  ADDRESS_GROUP_MANAGED_BY,
  ADDRESS_GROUP_POLICY_LABEL,
  addressGroupKey,
  canonicalQuery,
  PEER_QUERY_ANNOTATION,
  policyPeerQueries,
  POLICY_GENERATION_ANNOTATION,
} from '../../src/policy/address-group.js';
import type { MultiNetworkPolicy } from '../../src/policy/api.js';
import type { ContainerPort, PeerQuery } from '../../src/policy/resolve.js';
import { checkPolicy } from '../../src/policy/validate.js';
import { MANAGED_BY_LABEL, PROXY_NAME, PROXY_NAME_LABEL } from '../../src/keys.js';
import type { V1EndpointSlice } from '../../src/kube/types.js';

/** A pod of the world the groups are computed from. */
export interface GroupPod {
  readonly namespace: string;
  readonly labels: Readonly<Record<string, string>>;
  /** `<namespace>/<nad>` to addresses. */
  readonly networks: Readonly<Record<string, readonly string[]>>;
  readonly containerPorts?: readonly ContainerPort[];
}

function members(q: PeerQuery, world: readonly GroupPod[], namespaceLabels: Readonly<Record<string, Readonly<Record<string, string>>>>): GroupPod[] {
  return world.filter(
    (p) =>
      (q.namespaces.kind === 'namespace' ? p.namespace === q.namespaces.name : matchesSelector(q.namespaces.selector, { ...namespaceLabels[p.namespace] })) &&
      matchesSelector(q.pods, { ...p.labels }) &&
      (p.networks[q.network] ?? []).length > 0,
  );
}

/** One slice of the group that answers `q` for a policy, as the controller labels and annotates it. */
export function groupSlice(
  policy: { readonly namespace: string; readonly name: string; readonly generation: number },
  q: PeerQuery,
  sliceName: string,
  family: 4 | 6,
  addresses: readonly string[],
  ports: readonly ContainerPort[] = [],
): V1EndpointSlice {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: sliceName,
      namespace: policy.namespace,
      labels: { [MANAGED_BY_LABEL]: ADDRESS_GROUP_MANAGED_BY, [ADDRESS_GROUP_LABEL]: addressGroupKey(q), [ADDRESS_GROUP_POLICY_LABEL]: policy.name, [PROXY_NAME_LABEL]: PROXY_NAME },
      annotations: { [PEER_QUERY_ANNOTATION]: canonicalQuery(q), [POLICY_GENERATION_ANNOTATION]: String(policy.generation) },
    },
    addressType: family === 4 ? 'IPv4' : 'IPv6',
    endpoints: addresses.map((a) => ({ addresses: [a] })),
    ports: ports.map((p) => ({ name: p.name ?? '', port: p.containerPort, protocol: p.protocol ?? 'TCP' })),
  };
}

/** The slices of every group `policy` needs (none when it does not compile), named `<policy>-<n>`. */
export function addressGroupSlices(policy: MultiNetworkPolicy, world: readonly GroupPod[], namespaceLabels: Readonly<Record<string, Readonly<Record<string, string>>>> = {}): V1EndpointSlice[] {
  const ns = policy.metadata?.namespace ?? '';
  const name = policy.metadata?.name ?? '';
  const checked = checkPolicy(policy, ns);
  if (!checked.ok) return [];
  const out: V1EndpointSlice[] = [];
  for (const q of policyPeerQueries(checked.value)) {
    const buckets = new Map<string, { family: 4 | 6; ports: readonly ContainerPort[]; addresses: string[] }>();
    for (const pod of members(q, world, namespaceLabels)) {
      const ports = (pod.containerPorts ?? []).filter((p) => p.name !== undefined);
      for (const a of pod.networks[q.network] ?? []) {
        const family = isIP(a) === 6 ? 6 : 4;
        const b = `${family} ${JSON.stringify(ports)}`;
        const bucket = buckets.get(b) ?? { family, ports, addresses: [] };
        bucket.addresses.push(a);
        buckets.set(b, bucket);
      }
    }
    if (buckets.size === 0) buckets.set('empty', { family: 4, ports: [], addresses: [] });
    for (const bucket of buckets.values())
      out.push(groupSlice({ namespace: ns, name, generation: policy.metadata?.generation ?? 1 }, q, `${name}-${out.length}`, bucket.family, bucket.addresses, bucket.ports));
  }
  return out;
}
