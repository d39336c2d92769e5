/**
 * Informer transforms for the sidecar's policy caches (as slim.ts for Services): keep only what
 * the resolver reads, and refuse an object over the budget where it enters the cache.
 *
 * - MultiNetworkPolicy: identity, `metadata.generation` (the hold compares address groups with
 *   it), the policy-for annotation, and the spec whole (the resolver reads all of it; its parts are
 *   bounded by src/object-budgets.ts POLICY_BUDGETS, checked by checkPolicy). One whose kept form
 *   is over MAX_POLICY_BYTES is cached as a stub whose spec cannot be read: the resolver then
 *   treats it as selecting every pod of its namespace on its networks in both directions and
 *   allowing nothing (fail-closed), and `policyRefusalOf` says why.
 * - Address-group slices: the group's labels and annotations (src/policy/address-group.ts),
 *   addressType, ports and endpoint addresses. One over MAX_GROUP_SLICE_BYTES, or with more than
 *   MAX_GROUP_SLICE_ENDPOINTS endpoints, is cached without its query: its group reads as not
 *   written, so the peers it would allow stay out (fail-closed).
 */
import { ADDRESS_GROUP_LABEL, ADDRESS_GROUP_POLICY_LABEL, ENDPOINT_MACS_ANNOTATION, PEER_QUERY_ANNOTATION, POLICY_GENERATION_ANNOTATION } from '../../src/policy/address-group.js';
import { POLICY_FOR_ANNOTATION } from '../../src/keys.js';
import { slimOverBudget, type Refusal } from '../../src/cache-budget.js';
import { slimMeta } from '../../src/kube/slim-meta.js';
import type { V1EndpointSlice, V1ObjectMeta } from '../../src/kube/types.js';
import { describePolicy, type MultiNetworkPolicy, type MultiNetworkPolicySpec } from '../../src/policy/api.js';

/** Kept bytes of one policy: far above a policy at every count budget with ordinary names. */
export const MAX_POLICY_BYTES = 256 * 1024;
/** Kept bytes of one address-group slice (100 endpoints and a query with long selectors). */
export const MAX_GROUP_SLICE_BYTES = 256 * 1024;
/** The contract writes at most 100 endpoints per slice; ten times that is refused unread. */
export const MAX_GROUP_SLICE_ENDPOINTS = 1_000;

const POLICY_ANNOTATIONS: readonly string[] = [POLICY_FOR_ANNOTATION];
const GROUP_LABELS: readonly string[] = [ADDRESS_GROUP_LABEL, ADDRESS_GROUP_POLICY_LABEL];
const GROUP_ANNOTATIONS: readonly string[] = [PEER_QUERY_ANNOTATION, POLICY_GENERATION_ANNOTATION, ENDPOINT_MACS_ANNOTATION];
/** A spec the checker refuses (not an object): the stub of a refused policy fails closed. */
const UNREADABLE_SPEC = 'refused: over the sidecar budget' as unknown as MultiNetworkPolicySpec;

/** A policy as the informer caches it (the API object's metadata type, which the resolver reads too). */
export type CachedPolicy = Omit<MultiNetworkPolicy, 'metadata'> & { readonly metadata?: V1ObjectMeta };

const refusals = new WeakMap<MultiNetworkPolicy, Refusal>();
/** Why a cached policy is a stub (over budget); undefined: it is the policy as written. */
export const policyRefusalOf = (p: MultiNetworkPolicy): Refusal | undefined => refusals.get(p);

export function slimPolicy(p: CachedPolicy): CachedPolicy {
  const m = p.metadata;
  const metadata: V1ObjectMeta = { ...slimMeta(m, [], POLICY_ANNOTATIONS), generation: m?.generation };
  const slim: CachedPolicy = { apiVersion: p.apiVersion, kind: p.kind, metadata, spec: p.spec };
  const bytes = JSON.stringify(slim).length;
  if (bytes <= MAX_POLICY_BYTES) return slim;
  const stub: CachedPolicy = { apiVersion: p.apiVersion, kind: p.kind, metadata, spec: UNREADABLE_SPEC };
  refusals.set(stub, {
    key: 'bytes',
    message: `${describePolicy(p)} is ${bytes} bytes in the fields the sidecar reads, more than the ${MAX_POLICY_BYTES} it keeps per policy, so it isolates the pods it may select and allows them nothing: remove peers, ports or selector values, or split the policy`,
  });
  return stub;
}

export function slimAddressGroupSlice(s: V1EndpointSlice): V1EndpointSlice {
  const endpoints = s.endpoints ?? [];
  const slim: V1EndpointSlice = {
    metadata: slimMeta(s.metadata, GROUP_LABELS, GROUP_ANNOTATIONS),
    addressType: s.addressType,
    ports: s.ports?.map((p) => ({ name: p.name, protocol: p.protocol, port: p.port })),
    endpoints: endpoints.length > MAX_GROUP_SLICE_ENDPOINTS ? [] : endpoints.map((e) => ({ addresses: e.addresses })),
  };
  if (endpoints.length <= MAX_GROUP_SLICE_ENDPOINTS && slimOverBudget('EndpointSlice', slim, MAX_GROUP_SLICE_BYTES, 'sidecar') === undefined) return slim;
  // Without its query the view ignores it (src/policy/address-group.ts addressGroupView).
  return { metadata: slimMeta(s.metadata, GROUP_LABELS, []), addressType: s.addressType, ports: undefined, endpoints: [] };
}
