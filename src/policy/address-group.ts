/**
 * Address groups: the peers of MultiNetworkPolicies, resolved by the controller (which reads every
 * pod's network-status anyway) and read by the sidecars (which read no pod). A group answers one
 * resolver question (a PeerQuery: one network, one namespace scope, one pod selector) with the
 * pods it selects: their addresses on that network and their named containerPorts.
 *
 * A group is stored as EndpointSlices in the policy's namespace, so every consumer keeps the
 * watch, RBAC, sharding and budgets it already has for Services:
 * - labels: managed-by `multus-proxy-address-groups` (never the Services' value, so the Service
 *   reconciler does not take them for orphans), `multus-proxy/address-group: <key>`,
 *   `multus-proxy/policy: <policy name>`, and `service.kubernetes.io/service-proxy-name:
 *   multus-proxy`, which keeps kube-proxy's slice watch off them; no `kubernetes.io/service-name`;
 * - annotations: the query itself (canonical JSON, to check against the key) and the policy's
 *   `metadata.generation` the slices were written for (a sidecar holds its first policy sync until
 *   it sees it);
 * - one address type per slice, at most 100 endpoints; endpoints of pods with the same named
 *   containerPorts share a slice, whose `ports` are those named ports (as Kubernetes' EndpointSlice
 *   controller groups pods by resolved named target ports);
 * - annotation `multus-proxy/endpoint-macs` (optional): JSON `{ "<address>": "<mac>" }`, each
 *   endpoint address of the slice mapped to its pod's MAC on the network (canonical, unicast), when
 *   network-status gave one; a sidecar binds that peer address to that MAC on ingress, and matches
 *   an address without one by address alone;
 * - an empty group is one slice without endpoints, so "written, and nobody matches" differs from
 *   "not written yet";
 * - owner reference to the MultiNetworkPolicy, so the group goes with it.
 *
 * Pure: keys, the queries a policy needs, and the lookup a sidecar builds from the slices it sees.
 */
import { createHash } from 'node:crypto';
import { networkKey } from '../annotations/service-network.js';
import { compareText } from '../order.js';
import { canonicalMac } from './mac.js';
import { formatInputError, inputError, type InputError } from '../result.js';
import type { V1EndpointSlice } from '../kube/types.js';
import type { ContainerPort, NamespaceScope, PeerLookup, PeerPod, PeerQuery } from './resolve.js';
import type { ParsedSelector } from './selector.js';
import type { CheckedPolicy } from './validate.js';

export const ADDRESS_GROUP_MANAGED_BY = 'multus-proxy-address-groups';
/** Label: the group's key (addressGroupKey of its query). */
export const ADDRESS_GROUP_LABEL = 'multus-proxy/address-group';
/** Label: the name of the MultiNetworkPolicy the group was written for (its namespace is the slice's). */
export const ADDRESS_GROUP_POLICY_LABEL = 'multus-proxy/policy';
/** Annotation: the query, as canonicalQuery writes it. */
export const PEER_QUERY_ANNOTATION = 'multus-proxy/peer-query';
/** Annotation: the policy's metadata.generation the group was written for. */
export const POLICY_GENERATION_ANNOTATION = 'multus-proxy/policy-generation';
/** Annotation: the endpoints' MACs on the network, by address (formatEndpointMacs). */
export const ENDPOINT_MACS_ANNOTATION = 'multus-proxy/endpoint-macs';
/** The longest endpoint-macs text a consumer reads (100 endpoints of a few addresses each fit many times over). */
export const MAX_ENDPOINT_MACS_BYTES = 64 * 1024;

/** The annotation's text for address -> MAC pairs (sorted by address), or undefined when there are none. */
export function formatEndpointMacs(macs: ReadonlyMap<string, string>): string | undefined {
  if (macs.size === 0) return undefined;
  return JSON.stringify(Object.fromEntries([...macs].sort((a, b) => compareText(a[0], b[0]))));
}

/** What a consumer does with an address-group slice's endpoint-macs annotation: the pairs it uses, and why it could not use all of it. */
export interface EndpointMacs {
  readonly macs: Map<string, string>;
  /** The first thing wrong with the annotation (key, shortened value, reason, fix); undefined when it is good or absent. */
  readonly problem?: InputError;
}

const MACS_FIX =
  'the controller writes it as JSON {"<address>": "<mac>"} with only the slice\'s own endpoint addresses and lower-case MACs: delete the annotation (or the slice) so the controller writes it again, and find what else writes EndpointSlices of this group';

/**
 * The address -> MAC pairs of a slice's annotation, kept only for `addresses` (the slice's own
 * endpoint addresses) and canonical MACs; anything else is left out (that address then matches by
 * address alone, as one whose MAC is unknown) and named in `problem`. Linear in the text, bounded
 * by MAX_ENDPOINT_MACS_BYTES.
 */
export function readEndpointMacs(text: string | undefined, addresses: ReadonlySet<string>): EndpointMacs {
  const macs = new Map<string, string>();
  if (text === undefined) return { macs };
  const bad = (value: string, reason: string): EndpointMacs => ({ macs, problem: inputError(`annotation ${ENDPOINT_MACS_ANNOTATION}`, value, reason, MACS_FIX) });
  if (text.length > MAX_ENDPOINT_MACS_BYTES) return bad(text, `is ${text.length} characters, more than the ${MAX_ENDPOINT_MACS_BYTES} read, so no MAC of it is used`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return bad(text, 'is not JSON, so no MAC of it is used');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return bad(text, 'is not a JSON object, so no MAC of it is used');
  let problem: InputError | undefined;
  for (const [address, mac] of Object.entries(value as Record<string, unknown>)) {
    const m = typeof mac === 'string' ? canonicalMac(mac) : undefined;
    if (addresses.has(address) && m !== undefined) {
      macs.set(address, m);
      continue;
    }
    problem ??= bad(
      text,
      !addresses.has(address)
        ? `names ${JSON.stringify(address)}, which is not an endpoint address of the slice (left out)`
        : `gives ${JSON.stringify(address)} the MAC ${JSON.stringify(mac)}, which is not six lower-case hexadecimal octets of a unicast address (the address matches by address alone)`,
    ).problem;
  }
  return { macs, ...(problem !== undefined ? { problem } : {}) };
}

/** The pairs of readEndpointMacs alone. */
export function parseEndpointMacs(text: string | undefined, addresses: ReadonlySet<string>): Map<string, string> {
  return readEndpointMacs(text, addresses).macs;
}

/** The endpoint addresses of a slice, which its endpoint-macs may name. */
export function sliceAddresses(slice: V1EndpointSlice): Set<string> {
  return new Set((slice.endpoints ?? []).flatMap((e) => e.addresses ?? []));
}

/** What is wrong with a slice's endpoint-macs annotation, naming the slice, the key, the value and the fix; undefined when nothing is. */
export function endpointMacsProblem(slice: V1EndpointSlice): string | undefined {
  const p = readEndpointMacs(slice.metadata?.annotations?.[ENDPOINT_MACS_ANNOTATION], sliceAddresses(slice)).problem;
  return p === undefined ? undefined : formatInputError(`EndpointSlice ${slice.metadata?.namespace ?? ''}/${slice.metadata?.name ?? ''}`, p);
}

/** Requirements sorted, values sorted: two selectors that select the same pods by the same terms read the same. */
function canonicalSelector(s: ParsedSelector): unknown {
  const reqs = s.requirements.map((r) => ({ key: r.key, operator: r.operator, values: [...r.values].sort(compareText) }));
  reqs.sort((a, b) => compareText(`${a.key}\u0000${a.operator}\u0000${a.values.join('\u0000')}`, `${b.key}\u0000${b.operator}\u0000${b.values.join('\u0000')}`));
  return reqs.map((r) => [r.key, r.operator, r.values]);
}

function canonicalScope(n: NamespaceScope): unknown {
  return n.kind === 'namespace' ? { namespace: n.name } : { namespaceSelector: canonicalSelector(n.selector) };
}

/** The query as one stable JSON text: the group's identity. */
export function canonicalQuery(q: PeerQuery): string {
  return JSON.stringify({ policy: q.policy, network: q.network, ...(canonicalScope(q.namespaces) as object), pods: canonicalSelector(q.pods) });
}

/** A label value (40 hex characters) naming the group of `q`. */
export function addressGroupKey(q: PeerQuery): string {
  return hashKey(canonicalQuery(q));
}

const EVERY: ParsedSelector = { requirements: [] };

/**
 * Every query the resolver can ask for `policy` (resolvePodPolicy, for any selected pod): per
 * network it is for, each pod peer of each rule, and every pod of the network when an egress
 * rule with a named port has no peer list or an ipBlock peer (named ports of the pods the
 * blocks cover). Deduplicated by key, in key order.
 */
export function policyPeerQueries(policy: CheckedPolicy): PeerQuery[] {
  const out = new Map<string, PeerQuery>();
  const add = (q: PeerQuery): void => void out.set(addressGroupKey(q), q);
  for (const ref of policy.networks ?? []) {
    const network = networkKey(ref);
    for (const [rules, egress] of [
      [policy.ingress, false],
      [policy.egress, true],
    ] as const) {
      for (const rule of rules) {
        for (const peer of rule.peers ?? []) {
          if (peer.kind !== 'pods') continue;
          add({
            policy: policy.key,
            network,
            namespaces: peer.namespaceSelector === undefined ? { kind: 'namespace', name: policy.namespace } : { kind: 'selector', selector: peer.namespaceSelector },
            pods: peer.podSelector,
          });
        }
        const named = egress && (rule.ports ?? []).some((p) => p.name !== undefined);
        if (named && (rule.peers === undefined || rule.peers.some((p) => p.kind === 'block'))) add({ policy: policy.key, network, namespaces: { kind: 'selector', selector: EVERY }, pods: EVERY });
      }
    }
  }
  return [...out.entries()].sort((a, b) => compareText(a[0], b[0])).map(([, q]) => q);
}

/** What a sidecar knows of the groups in its namespace, from the slices it watches. */
export interface AddressGroupView {
  /** The pods of the group that answers `q`; none when the group is not (yet) written. */
  readonly lookup: PeerLookup;
  /** Whether the group of `q` is written, for at least `generation` of its policy when given. */
  written(q: PeerQuery, generation?: number): boolean;
}

function slicePorts(slice: V1EndpointSlice): ContainerPort[] {
  const out: ContainerPort[] = [];
  for (const p of slice.ports ?? []) {
    if (typeof p.name !== 'string' || p.name === '' || typeof p.port !== 'number') continue;
    out.push({ name: p.name, containerPort: p.port, ...(typeof p.protocol === 'string' ? { protocol: p.protocol } : {}) });
  }
  return out;
}

function hashKey(canonical: string): string {
  return createHash('sha256').update(canonical).digest('hex').slice(0, 40);
}

/**
 * The view of a set of address-group slices (those of one namespace). A slice whose query
 * annotation does not hash to its key is ignored: the key is what a sidecar asks by. The slices of
 * one group may be of different generations while the controller rewrites them; `written` takes
 * the oldest, so a sidecar waiting for a generation waits for every slice of the group.
 */
export function addressGroupView(slices: readonly V1EndpointSlice[]): AddressGroupView {
  const pods = new Map<string, PeerPod[]>();
  const generations = new Map<string, number>();
  for (const slice of slices) {
    const key = slice.metadata?.labels?.[ADDRESS_GROUP_LABEL];
    const query = slice.metadata?.annotations?.[PEER_QUERY_ANNOTATION];
    if (key === undefined || query === undefined || hashKey(query) !== key) continue;
    const ports = slicePorts(slice);
    const list = pods.get(key) ?? [];
    const endpoints = slice.endpoints ?? [];
    const macs = parseEndpointMacs(slice.metadata?.annotations?.[ENDPOINT_MACS_ANNOTATION], sliceAddresses(slice));
    for (const e of endpoints) {
      const addresses = [...(e.addresses ?? [])];
      const bound = addresses.flatMap((a): [string, string][] => {
        const m = macs.get(a);
        return m === undefined ? [] : [[a, m]];
      });
      list.push({ addresses, containerPorts: ports, ...(bound.length > 0 ? { macs: Object.fromEntries(bound) } : {}) });
    }
    pods.set(key, list);
    const g = Number(slice.metadata?.annotations?.[POLICY_GENERATION_ANNOTATION] ?? 'NaN');
    const generation = Number.isSafeInteger(g) ? g : 0;
    generations.set(key, Math.min(generation, generations.get(key) ?? generation));
  }
  return {
    lookup: (q) => pods.get(addressGroupKey(q)) ?? [],
    written: (q, generation) => {
      const g = generations.get(addressGroupKey(q));
      return g !== undefined && (generation === undefined || g >= generation);
    },
  };
}
