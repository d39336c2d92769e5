/**
 * The address groups of one MultiNetworkPolicy, planned: its peer queries with the pods each
 * selects, and the group slices that exist, in; the slices to create, update and delete out. Pure.
 * The slices follow the contract of src/policy/address-group.ts (labels, annotations, owner, one
 * address type per slice, at most `maxPerSlice` endpoints, endpoints grouped by their pods' named
 * containerPorts, one empty slice for an empty group).
 *
 * A pod is a peer on the query's network when it is not finished (Succeeded, Failed) and its
 * network-status lists addresses there that pass the same checks as for Service slices
 * (address-policy.ts); readiness does not matter (a pod that is not ready still sends). One
 * endpoint per pod and family, with every such address. The pod's MAC there (network-status
 * `mac`, tenant input: checked, lower-cased, never multicast or zero) goes beside its addresses in
 * the slice's endpoint-macs annotation; a pod without a good one is listed by address alone.
 *
 * Bounds (tenant input): a group over ADDRESS_GROUP_BUDGET.addresses, or past the policy's
 * ADDRESS_GROUP_BUDGET.policyAddresses in key order, is not written at all (its slices go), and is
 * reported: the sidecars then find no peers for it and allow none (fail-closed), never a part.
 *
 * Packing is stable: a pod stays in the slice that lists it; new pods fill slices with room; a
 * slice no group needs any more is rewritten for one that needs a new slice of its address type
 * (update, not delete + create), else deleted.
 */
import { networkKey } from '../../src/annotations/service-network.js';
import { compareText } from '../../src/order.js';
import { MAX_ENDPOINTS_PER_SLICE, MULTI_NETWORK_POLICY_KIND } from '../../src/keys.js';
import type { V1Endpoint, V1EndpointSlice, V1OwnerReference, V1Pod } from '../../src/kube/types.js';
import {
  ADDRESS_GROUP_LABEL,
  ADDRESS_GROUP_MANAGED_BY,
  ADDRESS_GROUP_POLICY_LABEL,
  addressGroupKey,
  canonicalQuery,
  ENDPOINT_MACS_ANNOTATION,
  formatEndpointMacs,
  PEER_QUERY_ANNOTATION,
  POLICY_GENERATION_ANNOTATION,
} from '../../src/policy/address-group.js';
import { namedContainerPorts } from '../../src/policy/container-ports.js';
import { checkedMac, macProblem } from '../../src/policy/mac.js';
import type { PeerQuery } from '../../src/policy/resolve.js';
import { checkPortName } from '../../src/policy/validate.js';
import { MANAGED_BY_LABEL, PROXY_NAME, PROXY_NAME_LABEL } from '../../src/keys.js';
import { OPEN_POLICY, type AddressPolicy } from './address-policy.js';
import { isPodEligible, podNetworkStatusOf, publishableAddresses, type AddressType, type EndpointPort } from './pod-endpoints.js';
import { keptInPlace, sliceGenerateName, type SliceDiff } from './plan.js';
import { sameLabels } from './slice-metadata.js';

/** How much one policy's groups may hold (every address of every endpoint counts). */
export const ADDRESS_GROUP_BUDGET = {
  /** Addresses in one group (one peer query): 100 full slices. */
  addresses: 10_000,
  /** Addresses in all the groups of one policy. */
  policyAddresses: 50_000,
} as const;

/** An EndpointSlice has at most this many ports (the apiserver's limit). */
const MAX_SLICE_PORTS = 100;

export interface GroupPolicy {
  readonly name: string;
  readonly namespace: string;
  readonly uid: string;
  readonly generation: number;
  readonly apiVersion: string;
  readonly deleting?: boolean;
}

export interface GroupQuery {
  readonly query: PeerQuery;
  /** The pods the query selects (namespace and pod selector already matched). */
  readonly pods: readonly V1Pod[];
}

export interface GroupPlanInput {
  readonly policy: GroupPolicy;
  readonly queries: readonly GroupQuery[];
  /** Every group slice of the policy (its namespace, its policy label). */
  readonly existing: readonly V1EndpointSlice[];
  readonly addressPolicy?: AddressPolicy;
  readonly maxPerSlice?: number;
  readonly budget?: { readonly addresses: number; readonly policyAddresses: number };
}

export interface OverBudgetGroup {
  readonly key: string;
  readonly query: PeerQuery;
  readonly addresses: number;
  readonly budget: 'addresses' | 'policyAddresses';
  readonly message: string;
}

export interface GroupPlan {
  readonly diff: SliceDiff;
  readonly over: readonly OverBudgetGroup[];
  /** Groups written (over-budget ones aside). */
  readonly groups: number;
  readonly endpoints: number;
  /** Pods whose network-status MAC was refused (they are listed by address alone), one message each. */
  readonly badMacs?: readonly string[];
}

/** One slice's worth of a group: one address type, one named-port signature. */
interface Part {
  readonly addressType: AddressType;
  readonly ports: readonly EndpointPort[];
  readonly endpoints: Map<string, V1Endpoint>;
}

interface Group {
  readonly key: string;
  readonly query: PeerQuery;
  readonly parts: Map<string, Part>;
  /** Each endpoint address's MAC on the network, where network-status gave a good one. */
  readonly macs: Map<string, string>;
  addresses: number;
}

/** The owner reference of every group slice: the policy (no blockOwnerDeletion, so no finalizer right is needed). */
export function groupOwner(p: GroupPolicy): V1OwnerReference {
  return { apiVersion: p.apiVersion, kind: MULTI_NETWORK_POLICY_KIND, name: p.name, uid: p.uid, controller: true };
}

export function groupLabels(policyName: string, key: string): Record<string, string> {
  return { [MANAGED_BY_LABEL]: ADDRESS_GROUP_MANAGED_BY, [ADDRESS_GROUP_LABEL]: key, [ADDRESS_GROUP_POLICY_LABEL]: policyName, [PROXY_NAME_LABEL]: PROXY_NAME };
}

/** The pod's named ports as slice ports: valid names only, each name once (a slice's port names are unique), by name. */
export function slicePorts(pod: V1Pod): EndpointPort[] {
  const seen = new Map<string, EndpointPort>();
  for (const p of namedContainerPorts(pod.spec)) {
    if (p.name === undefined || seen.has(p.name) || checkPortName(p.name) !== undefined) continue;
    if (!Number.isInteger(p.containerPort) || p.containerPort < 1 || p.containerPort > 65535) continue;
    seen.set(p.name, { name: p.name, port: p.containerPort, protocol: p.protocol ?? 'TCP' });
  }
  return [...seen.values()].sort((a, b) => compareText(a.name ?? '', b.name ?? '')).slice(0, MAX_SLICE_PORTS);
}

function portsKey(ports: readonly EndpointPort[]): string {
  return JSON.stringify([...ports].map((p) => [p.name ?? '', p.protocol ?? 'TCP', p.port ?? 0]).sort((a, b) => compareText(String(a[0]), String(b[0]))));
}

const partKey = (addressType: string, ports: readonly EndpointPort[]): string => `${addressType}|${portsKey(ports)}`;

function podKey(pod: V1Pod): string {
  return `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
}

function endpointKey(e: V1Endpoint): string {
  return `${e.targetRef?.namespace ?? ''}/${e.targetRef?.name ?? ''}`;
}

function networkRef(key: string): { namespace: string; name: string } {
  const slash = key.indexOf('/');
  return { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

/** The pods of one query as group parts. */
function buildGroup(q: GroupQuery, policy: AddressPolicy, badMacs: string[]): Group {
  const key = addressGroupKey(q.query);
  const group: Group = { key, query: q.query, parts: new Map(), macs: new Map(), addresses: 0 };
  const ref = networkRef(q.query.network);
  const network = networkKey(ref);
  for (const pod of [...q.pods].sort((a, b) => compareText(podKey(a), podKey(b)))) {
    if (!isPodEligible(pod)) continue;
    const status = podNetworkStatusOf(pod);
    if (status === undefined || !status.ok) continue;
    const entry = status.value.find((e) => e.namespace === ref.namespace && e.nad === ref.name);
    if (entry === undefined) continue;
    const ports = slicePorts(pod);
    const m = pod.metadata ?? {};
    const mac = entry.mac === undefined ? undefined : checkedMac(entry.mac);
    if (entry.mac !== undefined && mac === undefined)
      badMacs.push(
        `pod ${podKey(pod)}: network-status "mac" ${JSON.stringify(entry.mac.slice(0, 64))} on network ${network} ${macProblem(entry.mac) ?? ''}; its addresses are matched by address alone (fix: the CNI plugin must report the interface's unicast MAC)`,
      );
    for (const [addressType, addresses] of publishableAddresses(entry, network, policy).byFamily) {
      const pk = partKey(addressType, ports);
      let part = group.parts.get(pk);
      if (part === undefined) group.parts.set(pk, (part = { addressType, ports, endpoints: new Map() }));
      const e: V1Endpoint = { addresses, targetRef: { kind: 'Pod', namespace: m.namespace ?? '', name: m.name ?? '', uid: m.uid ?? '' } };
      const node = pod.spec?.nodeName;
      if (node !== undefined && node !== null && node !== '') e.nodeName = node;
      part.endpoints.set(podKey(pod), e);
      if (mac !== undefined) for (const a of addresses) group.macs.set(a, mac);
      group.addresses += addresses.length;
    }
  }
  return group;
}

function canonicalEndpoint(e: V1Endpoint): string {
  return JSON.stringify([[...e.addresses], e.nodeName ?? null, e.targetRef?.kind ?? null, e.targetRef?.namespace ?? null, e.targetRef?.name ?? null, e.targetRef?.uid ?? null]);
}

function sameEndpoints(a: readonly V1Endpoint[], b: readonly V1Endpoint[]): boolean {
  if (a.length !== b.length) return false;
  const sa = a.map(canonicalEndpoint).sort();
  const sb = b.map(canonicalEndpoint).sort();
  return sa.every((v, i) => v === sb[i]);
}

/** A slice being planned: an existing one (kept, rewritten) or a new one. */
interface Draft {
  existing?: V1EndpointSlice;
  readonly group: Group;
  readonly addressType: AddressType;
  readonly ports: readonly EndpointPort[];
  endpoints: V1Endpoint[];
}

/** The endpoint-macs annotation of a draft: its endpoints' addresses with a known MAC. */
function draftMacs(d: Draft): string | undefined {
  const out = new Map<string, string>();
  for (const e of d.endpoints)
    for (const a of e.addresses) {
      const mac = d.group.macs.get(a);
      if (mac !== undefined) out.set(a, mac);
    }
  return formatEndpointMacs(out);
}

function render(d: Draft, p: GroupPolicy): V1EndpointSlice {
  const labels = groupLabels(p.name, d.group.key);
  const macs = draftMacs(d);
  const ours: Record<string, string> = {
    [PEER_QUERY_ANNOTATION]: canonicalQuery(d.group.query),
    [POLICY_GENERATION_ANNOTATION]: String(p.generation),
    ...(macs !== undefined ? { [ENDPOINT_MACS_ANNOTATION]: macs } : {}),
  };
  const body = {
    addressType: d.addressType,
    ports: d.ports.map((x) => ({ name: x.name ?? '', port: x.port ?? 0, protocol: x.protocol ?? 'TCP' })),
    endpoints: [...d.endpoints].sort((a, b) => compareText(endpointKey(a), endpointKey(b))),
  };
  if (d.existing !== undefined) {
    // Server-owned bookkeeping is not ours to send back.
    const { managedFields: _managed, ...meta } = d.existing.metadata ?? {};
    const { [ENDPOINT_MACS_ANNOTATION]: _oldMacs, ...kept } = meta.annotations ?? {};
    return { ...d.existing, metadata: { ...meta, labels, annotations: { ...kept, ...ours }, ownerReferences: [groupOwner(p)] }, ...body };
  }
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { generateName: sliceGenerateName(p.name), namespace: p.namespace, labels, annotations: ours, ownerReferences: [groupOwner(p)] },
    ...body,
  };
}

function changed(d: Draft, p: GroupPolicy): boolean {
  const e = d.existing;
  if (e === undefined) return true;
  const m = e.metadata ?? {};
  const want = groupOwner(p);
  const refs = m.ownerReferences ?? [];
  const ref = refs[0];
  return (
    e.addressType !== d.addressType ||
    portsKey(e.ports ?? []) !== portsKey(d.ports) ||
    !sameLabels(m.labels ?? {}, groupLabels(p.name, d.group.key)) ||
    m.annotations?.[PEER_QUERY_ANNOTATION] !== canonicalQuery(d.group.query) ||
    m.annotations?.[POLICY_GENERATION_ANNOTATION] !== String(p.generation) ||
    m.annotations?.[ENDPOINT_MACS_ANNOTATION] !== draftMacs(d) ||
    refs.length !== 1 ||
    ref?.uid !== want.uid ||
    ref.name !== want.name ||
    ref.kind !== want.kind ||
    ref.apiVersion !== want.apiVersion ||
    ref.controller !== true ||
    !sameEndpoints(e.endpoints ?? [], d.endpoints)
  );
}

function byName(a: V1EndpointSlice, b: V1EndpointSlice): number {
  return compareText(a.metadata?.name ?? '', b.metadata?.name ?? '');
}

/** Existing slices no part claimed: reused by same address type (own group first), deleted at the end. */
class Pool {
  constructor(private readonly free: V1EndpointSlice[]) {}

  take(addressType: string | undefined, groupKey: string): V1EndpointSlice | undefined {
    const fits = (s: V1EndpointSlice): boolean => addressType === undefined || s.addressType === addressType;
    let i = this.free.findIndex((s) => fits(s) && s.metadata?.labels?.[ADDRESS_GROUP_LABEL] === groupKey);
    if (i < 0) i = this.free.findIndex(fits);
    return i < 0 ? undefined : this.free.splice(i, 1)[0];
  }

  rest(): V1EndpointSlice[] {
    return this.free;
  }
}

/** The drafts of one part: its existing slices keep their pods, new pods fill room, then new or reused slices. */
function planPart(g: Group, part: Part, existing: readonly V1EndpointSlice[], pool: Pool, max: number): Draft[] {
  const { kept, assigned } = keptInPlace(existing, part.endpoints, endpointKey, max);
  const drafts: Draft[] = existing.map((slice, i) => ({ existing: slice, group: g, addressType: part.addressType, ports: part.ports, endpoints: kept[i] ?? [] }));
  const remaining = [...part.endpoints.keys()].filter((k) => !assigned.has(k)).sort(compareText);
  const take = (n: number): V1Endpoint[] => remaining.splice(0, n).flatMap((k) => part.endpoints.get(k) ?? []);
  for (const d of drafts) if (remaining.length > 0 && d.endpoints.length < max) d.endpoints.push(...take(max - d.endpoints.length));
  while (remaining.length > 0) {
    const reused = pool.take(part.addressType, g.key);
    drafts.push({ ...(reused !== undefined ? { existing: reused } : {}), group: g, addressType: part.addressType, ports: part.ports, endpoints: take(max) });
  }
  return drafts;
}

function overBudget(g: Group, p: GroupPolicy, total: number, budget: NonNullable<GroupPlanInput['budget']>): OverBudgetGroup | undefined {
  const object = `${MULTI_NETWORK_POLICY_KIND} ${p.namespace}/${p.name}`;
  const scope = g.query.namespaces.kind === 'namespace' ? `namespace ${g.query.namespaces.name}` : 'the namespaces its namespaceSelector matches';
  if (g.addresses > budget.addresses) {
    return {
      key: g.key,
      query: g.query,
      addresses: g.addresses,
      budget: 'addresses',
      message: `${object}: a peer on network ${g.query.network} (pods in ${scope}) selects ${g.addresses} addresses, more than the ${budget.addresses} multus-proxy resolves for one peer; it allows none of them until the peer's selectors select fewer pods (narrow the podSelector or namespaceSelector, or use an ipBlock)`,
    };
  }
  if (total + g.addresses > budget.policyAddresses) {
    return {
      key: g.key,
      query: g.query,
      addresses: g.addresses,
      budget: 'policyAddresses',
      message: `${object}: its peers select more than the ${budget.policyAddresses} addresses multus-proxy resolves for one policy; the peer on network ${g.query.network} (pods in ${scope}, ${g.addresses} addresses) allows none of them until the policy is split or its peers select fewer pods`,
    };
  }
  return undefined;
}

export function planAddressGroups(input: GroupPlanInput): GroupPlan {
  const p = input.policy;
  const max = Math.max(1, input.maxPerSlice ?? MAX_ENDPOINTS_PER_SLICE);
  const budget = input.budget ?? ADDRESS_GROUP_BUDGET;
  const diff: SliceDiff = { create: [], update: [], delete: [] };
  if (p.deleting === true) return { diff: { ...diff, delete: [...input.existing] }, over: [], groups: 0, endpoints: 0 };
  const badMacs: string[] = [];
  const groups = input.queries.map((q) => buildGroup(q, input.addressPolicy ?? OPEN_POLICY, badMacs)).sort((a, b) => compareText(a.key, b.key));
  const over: OverBudgetGroup[] = [];
  const kept: Group[] = [];
  let total = 0;
  for (const g of groups) {
    const o = overBudget(g, p, total, budget);
    if (o !== undefined) over.push(o);
    else {
      kept.push(g);
      total += g.addresses;
    }
  }
  // Existing slices by group and part; those of no wanted part go to the pool.
  const wanted = new Map(kept.map((g) => [g.key, g]));
  const claimed = new Map<string, V1EndpointSlice[]>();
  const free: V1EndpointSlice[] = [];
  for (const s of [...input.existing].sort(byName)) {
    const g = wanted.get(s.metadata?.labels?.[ADDRESS_GROUP_LABEL] ?? '');
    const pk = `${g?.key ?? ''}\u0000${partKey(s.addressType, s.ports ?? [])}`;
    if (g === undefined || !g.parts.has(partKey(s.addressType, s.ports ?? []))) free.push(s);
    else claimed.set(pk, [...(claimed.get(pk) ?? []), s]);
  }
  const pool = new Pool(free);
  const drafts: Draft[] = [];
  let endpoints = 0;
  for (const g of kept) {
    if (g.parts.size === 0) {
      // Written, and nobody matches: one slice without endpoints (any address type will do).
      const marker = pool.take(undefined, g.key);
      drafts.push({ ...(marker !== undefined ? { existing: marker } : {}), group: g, addressType: (marker?.addressType as AddressType | undefined) ?? 'IPv4', ports: [], endpoints: [] });
      continue;
    }
    for (const [pk, part] of [...g.parts].sort((a, b) => compareText(a[0], b[0]))) {
      endpoints += part.endpoints.size;
      for (const d of planPart(g, part, claimed.get(`${g.key}\u0000${pk}`) ?? [], pool, max)) {
        if (d.endpoints.length === 0 && d.existing !== undefined) diff.delete.push(d.existing);
        else drafts.push(d);
      }
    }
  }
  for (const d of drafts) {
    if (d.existing === undefined) diff.create.push(render(d, p));
    else if (changed(d, p)) diff.update.push(render(d, p));
  }
  diff.delete.push(...pool.rest());
  return { diff, over, groups: kept.length, endpoints, ...(badMacs.length > 0 ? { badMacs: [...new Set(badMacs)] } : {}) };
}
