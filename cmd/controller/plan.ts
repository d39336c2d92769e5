/**
 * The heart of the controller, pure: one Service, its selected pods and our existing slices in,
 * the slices to create, update and delete out.
 *
 * Slices are grouped by (network, address family, resolved port set): a slice has one address
 * type and one port list, and pods where a named targetPort resolves differently cannot share one.
 *
 * Packing is stable, in the spirit of the built-in EndpointSlice controller, so that one pod
 * change touches one slice:
 * 1. every existing slice of a group keeps the pods it already lists that are still desired;
 * 2. new pods go first into slices that are being written anyway, then in chunks of at most
 *    `maxPerSlice`; a final partial chunk goes into an unchanged slice with room before a new
 *    slice is created (one update instead of one create);
 * 3. a slice that no longer matches any group (ports or network changed) is rewritten for a group
 *    of the same network and family that needs a new slice (update, not delete + create);
 *    otherwise, and when it ends up empty, it is deleted.
 * Comparison is semantic (order-independent where order carries no meaning, server-set fields
 * ignored), so a converged Service plans no write at all.
 */
import { networkKey, type NetworkRef } from '../../src/annotations/service-network.js';
import { compareText } from '../../src/order.js';
import { formatTriggerTime } from '../../src/annotations/trigger-time.js';
import { LAST_CHANGE_TRIGGER_TIME_ANNOTATION, MANAGED_BY, MANAGED_BY_LABEL, MAX_ENDPOINTS_PER_SLICE, SERVICE_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import type { V1Endpoint, V1EndpointSlice, V1OwnerReference, V1Pod, V1Service } from '../../src/kube/types.js';
import type { AddressPolicy } from './address-policy.js';
import { podEndpoints, type AddressType, type EndpointPort, type PodEndpoint, type PodSkip } from './pod-endpoints.js';
import { sameLabels, sliceLabels, triggerTimeMs } from './slice-metadata.js';
import { hintMode, planHints, type HintEvent, type ZoneCapacity } from './topology-hints.js';

export { sliceLabels };

export interface PlanInput {
  readonly service: V1Service;
  readonly networks: readonly NetworkRef[];
  /** Pods of the Service's namespace that match its selector. */
  readonly pods: readonly V1Pod[];
  /** Our slices for this Service (managed-by and service-name labels). */
  readonly existing: readonly V1EndpointSlice[];
  readonly zoneOf?: (node: string) => string | undefined;
  /** What may be published (the nodes' own addresses); special addresses are always refused. */
  readonly addressPolicy?: AddressPolicy;
  readonly maxPerSlice?: number;
  /** Zone CPU shares for `topology-mode: Auto` (topology-hints.ts); without it, Auto writes no hints. */
  readonly zoneCapacity?: ZoneCapacity;
}

export interface SliceDiff {
  readonly create: V1EndpointSlice[];
  /** Full objects carrying the existing resourceVersion (PUT, optimistic concurrency). */
  readonly update: V1EndpointSlice[];
  readonly delete: V1EndpointSlice[];
}

export interface Plan {
  readonly diff: SliceDiff;
  readonly skips: PodSkip[];
  /** Endpoints across all desired slices (pods × networks × families). */
  readonly endpoints: number;
  /** `topology-mode: Auto` only: per network and family, whether hints are on or why not. */
  readonly hintEvents: { readonly network: string; readonly event: HintEvent }[];
}

export function isEmptyDiff(d: SliceDiff): boolean {
  return d.create.length === 0 && d.update.length === 0 && d.delete.length === 0;
}

/** Nothing to serve: delete every slice we have for the Service. */
export function planDeleteAll(existing: readonly V1EndpointSlice[]): SliceDiff {
  return { create: [], update: [], delete: [...existing] };
}

// ---------------------------------------------------------------------------------------------
// Canonical forms used for grouping and comparison.

function canonicalPort(p: EndpointPort): EndpointPort {
  const out: EndpointPort = { name: p.name ?? '', port: p.port ?? 0, protocol: p.protocol ?? 'TCP' };
  if (p.appProtocol !== undefined && p.appProtocol !== null) out.appProtocol = p.appProtocol;
  return out;
}

function portsKey(ports: readonly EndpointPort[]): string {
  const canon = ports.map(canonicalPort).map((p) => [p.name, p.protocol, p.port, p.appProtocol ?? null]);
  canon.sort((a, b) => compareText(JSON.stringify(a), JSON.stringify(b)));
  return JSON.stringify(canon);
}

function groupKey(network: string, addressType: string, ports: readonly EndpointPort[]): string {
  return `${network}|${addressType}|${portsKey(ports)}`;
}

function endpointKey(e: V1Endpoint): string {
  return e.targetRef?.name ?? e.addresses[0] ?? '';
}

/** The fields of an endpoint that carry meaning for us (topology hints included); server defaults ignored. */
function canonicalEndpoint(e: V1Endpoint): string {
  return JSON.stringify([
    e.addresses,
    e.conditions?.ready ?? null,
    e.conditions?.serving ?? null,
    e.conditions?.terminating ?? null,
    e.hostname ?? null,
    e.nodeName ?? null,
    e.zone ?? null,
    e.targetRef?.kind ?? null,
    e.targetRef?.namespace ?? null,
    e.targetRef?.name ?? null,
    e.targetRef?.uid ?? null,
    (e.hints?.forZones ?? []).map((z) => z.name),
    (e.hints?.forNodes ?? []).map((n) => n.name),
  ]);
}

function sameEndpoints(a: readonly V1Endpoint[], b: readonly V1Endpoint[]): boolean {
  if (a.length !== b.length) return false;
  const sa = a.map(canonicalEndpoint).sort();
  const sb = b.map(canonicalEndpoint).sort();
  return sa.every((v, i) => v === sb[i]);
}

function sortEndpoints(eps: V1Endpoint[]): V1Endpoint[] {
  return eps.sort((x, y) => compareText(endpointKey(x), endpointKey(y)));
}

// ---------------------------------------------------------------------------------------------
// What our slices must carry besides endpoints.

export function ownerReference(svc: V1Service): V1OwnerReference {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    name: svc.metadata?.name ?? '',
    uid: svc.metadata?.uid ?? '',
    controller: true,
    blockOwnerDeletion: true,
  };
}

/** The label selector that lists exactly our slices of one Service. */
export function ourSlicesSelector(serviceName?: string): string {
  const base = `${MANAGED_BY_LABEL}=${MANAGED_BY}`;
  return serviceName === undefined ? base : `${base},${SERVICE_NAME_LABEL}=${serviceName}`;
}

/** `<service>-`, cut so that the name with the server's 5-character suffix stays a DNS label. */
export function sliceGenerateName(service: string): string {
  return `${service.slice(0, 57)}-`;
}

function metadataMatches(slice: V1EndpointSlice, svc: V1Service, network: NetworkRef): boolean {
  if (!sameLabels(slice.metadata?.labels ?? {}, sliceLabels(svc, network))) return false;
  if (slice.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] !== networkKey(network)) return false;
  const want = ownerReference(svc);
  const refs = slice.metadata?.ownerReferences ?? [];
  const controllers = refs.filter((r) => r.controller === true);
  const ref = controllers[0];
  return (
    controllers.length === 1 && ref !== undefined && ref.apiVersion === want.apiVersion && ref.kind === want.kind && ref.name === want.name && ref.uid === want.uid && ref.blockOwnerDeletion === true
  );
}

interface Group {
  readonly key: string;
  readonly network: NetworkRef;
  readonly addressType: AddressType;
  readonly ports: readonly EndpointPort[];
  readonly endpoints: Map<string, V1Endpoint>;
}

/** A slice being planned: an existing one (kept, rewritten or emptied) or a new one. */
interface Draft {
  readonly existing?: V1EndpointSlice;
  group: Group;
  endpoints: V1Endpoint[];
}

function existingGroupKey(slice: V1EndpointSlice): string {
  const network = slice.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] ?? '';
  return groupKey(network, slice.addressType, slice.ports ?? []);
}

function draftChanged(d: Draft, svc: V1Service): boolean {
  const e = d.existing;
  if (e === undefined) return true;
  if (existingGroupKey(e) !== d.group.key) return true;
  if (!metadataMatches(e, svc, d.group.network)) return true;
  return !sameEndpoints(e.endpoints ?? [], d.endpoints);
}

/** Annotations of a slice being written: the network, and the trigger time when one is known (else none, as upstream). */
function sliceAnnotations(current: Readonly<Record<string, string>>, network: NetworkRef, triggerMs: number | undefined): Record<string, string> {
  const out: Record<string, string> = { ...current, [SERVICE_NETWORK_ANNOTATION]: networkKey(network) };
  if (triggerMs === undefined) delete out[LAST_CHANGE_TRIGGER_TIME_ANNOTATION];
  else out[LAST_CHANGE_TRIGGER_TIME_ANNOTATION] = formatTriggerTime(triggerMs);
  return out;
}

function renderSlice(d: Draft, svc: V1Service, triggerMs: number | undefined): V1EndpointSlice {
  const g = d.group;
  const ports = g.ports.map(canonicalPort);
  const endpoints = sortEndpoints([...d.endpoints]);
  if (d.existing !== undefined) {
    // Server-owned bookkeeping is not ours to send back.
    const { managedFields: _managed, ...meta } = d.existing.metadata ?? {};
    return {
      ...d.existing,
      metadata: {
        ...meta,
        labels: sliceLabels(svc, g.network),
        annotations: sliceAnnotations(meta.annotations ?? {}, g.network, triggerMs),
        ownerReferences: [ownerReference(svc)],
      },
      addressType: g.addressType,
      ports,
      endpoints,
    };
  }
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      generateName: sliceGenerateName(svc.metadata?.name ?? 'service'),
      namespace: svc.metadata?.namespace ?? '',
      labels: sliceLabels(svc, g.network),
      annotations: sliceAnnotations({}, g.network, triggerMs),
      ownerReferences: [ownerReference(svc)],
    },
    addressType: g.addressType,
    ports,
    endpoints,
  };
}

function buildGroups(input: PlanInput): { groups: Map<string, Group>; skips: PodSkip[] } {
  const groups = new Map<string, Group>();
  const skips: PodSkip[] = [];
  const add = (pe: PodEndpoint): void => {
    const key = groupKey(networkKey(pe.network), pe.addressType, pe.ports);
    let g = groups.get(key);
    if (g === undefined) {
      g = { key, network: pe.network, addressType: pe.addressType, ports: pe.ports, endpoints: new Map() };
      groups.set(key, g);
    }
    g.endpoints.set(pe.key, pe.endpoint);
  };
  const pods = [...input.pods].sort((a, b) => compareText(a.metadata?.name ?? '', b.metadata?.name ?? ''));
  for (const pod of pods) {
    const r = podEndpoints(input.service, input.networks, pod, input.zoneOf, input.addressPolicy);
    r.endpoints.forEach(add);
    skips.push(...r.skips);
  }
  return { groups, skips };
}

const NO_CAPACITY: ZoneCapacity = { ok: false, reason: 'Insufficient Node information: the controller does not read Nodes (--watch-nodes=false)' };

/**
 * Sets each endpoint's topology hints (topology-hints.ts), per network and address family across
 * port groups, as upstream does per address family.
 */
function addHints(input: PlanInput, groups: Map<string, Group>): Plan['hintEvents'] {
  const mode = hintMode(input.service);
  // The planned endpoints are built fresh, without hints: nothing to do (the common case).
  if (mode.kind === 'none') return [];
  const byFamily = new Map<string, Group[]>();
  for (const key of [...groups.keys()].sort()) {
    const g = groups.get(key);
    if (g === undefined) continue;
    const fk = `${networkKey(g.network)}|${g.addressType}`;
    byFamily.set(fk, [...(byFamily.get(fk) ?? []), g]);
  }
  const events: Plan['hintEvents'][number][] = [];
  for (const list of byFamily.values()) {
    const first = list[0];
    if (first === undefined) continue;
    const entries = list.flatMap((g) => [...g.endpoints].map(([k, e]) => ({ g, k, e })));
    entries.sort((a, b) => compareText(a.k, b.k));
    const r = planHints(
      mode,
      entries.map((x) => x.e),
      input.zoneCapacity ?? NO_CAPACITY,
      first.addressType,
    );
    r.endpoints.forEach((e, i) => {
      const x = entries[i];
      if (x !== undefined) x.g.endpoints.set(x.k, e);
    });
    if (r.event !== undefined) events.push({ network: networkKey(first.network), event: r.event });
  }
  return events;
}

function byName(a: V1EndpointSlice, b: V1EndpointSlice): number {
  return compareText(a.metadata?.name ?? '', b.metadata?.name ?? '');
}

/**
 * Stable packing's first step: each existing slice keeps the wanted endpoints it already lists
 * (their wanted form; each endpoint once; at most `max`). Shared with address groups (group-plan.ts).
 */
export function keptInPlace(
  existing: readonly V1EndpointSlice[],
  wanted: ReadonlyMap<string, V1Endpoint>,
  keyOf: (e: V1Endpoint) => string,
  max: number,
): { kept: V1Endpoint[][]; assigned: Set<string> } {
  const assigned = new Set<string>();
  const kept = existing.map((slice) => {
    const out: V1Endpoint[] = [];
    for (const e of slice.endpoints ?? []) {
      const k = keyOf(e);
      const want = wanted.get(k);
      if (want === undefined || assigned.has(k) || out.length >= max) continue;
      out.push(want);
      assigned.add(k);
    }
    return out;
  });
  return { kept, assigned };
}

/** Plans one group's slices; consumes reusable orphans from `orphans` when it needs new slices. */
function planGroup(g: Group, existing: readonly V1EndpointSlice[], orphans: V1EndpointSlice[], svc: V1Service, max: number): Draft[] {
  // 1. Keep every pod where it already is.
  const { kept, assigned } = keptInPlace(existing, g.endpoints, endpointKey, max);
  const drafts: Draft[] = existing.map((slice, i) => ({ existing: slice, group: g, endpoints: kept[i] ?? [] }));
  const remaining = [...g.endpoints.keys()].filter((k) => !assigned.has(k)).sort();
  const take = (n: number): V1Endpoint[] =>
    remaining
      .splice(0, n)
      .map((k) => g.endpoints.get(k))
      .filter((e): e is V1Endpoint => e !== undefined);

  // 2a. Fill slices that are written anyway.
  for (const d of drafts) {
    if (remaining.length === 0) break;
    if (draftChanged(d, svc) && d.endpoints.length < max) d.endpoints.push(...take(max - d.endpoints.length));
  }
  // 2b. Whole chunks, then a partial chunk into an unchanged slice with room if one fits it.
  while (remaining.length > 0) {
    if (remaining.length < max) {
      const room = drafts.find((d) => !draftChanged(d, svc) && d.endpoints.length > 0 && d.endpoints.length + remaining.length <= max);
      if (room !== undefined) {
        room.endpoints.push(...take(remaining.length));
        break;
      }
    }
    // 3. Reuse an orphan of the same network and family (addressType is immutable).
    const i = orphans.findIndex((o) => o.addressType === g.addressType && o.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] === networkKey(g.network));
    const orphan = i >= 0 ? orphans.splice(i, 1)[0] : undefined;
    drafts.push({ ...(orphan !== undefined ? { existing: orphan } : {}), group: g, endpoints: take(max) });
  }
  return drafts;
}

export function planSlices(input: PlanInput): Plan {
  const max = Math.max(1, input.maxPerSlice ?? MAX_ENDPOINTS_PER_SLICE);
  const svc = input.service;
  const { groups, skips } = buildGroups(input);
  const hintEvents = addHints(input, groups);

  const byGroup = new Map<string, V1EndpointSlice[]>();
  const orphans: V1EndpointSlice[] = [];
  for (const s of [...input.existing].sort(byName)) {
    const key = existingGroupKey(s);
    const list = byGroup.get(key);
    if (!groups.has(key)) orphans.push(s);
    else if (list === undefined) byGroup.set(key, [s]);
    else list.push(s);
  }

  const diff: SliceDiff = { create: [], update: [], delete: [] };
  const triggerMs = triggerTimeMs(svc, input.pods, input.existing);
  // Upstream: a Service pending deletion gets no new slices (the garbage collector would race
  // deleting them as they are created); its existing ones are still updated and deleted.
  const deleting = svc.metadata?.deletionTimestamp !== undefined && svc.metadata.deletionTimestamp !== null;
  let endpoints = 0;
  for (const key of [...groups.keys()].sort()) {
    const g = groups.get(key);
    if (g === undefined) continue;
    endpoints += g.endpoints.size;
    for (const d of planGroup(g, byGroup.get(key) ?? [], orphans, svc, max)) {
      if (d.endpoints.length === 0) {
        if (d.existing !== undefined) diff.delete.push(d.existing);
      } else if (d.existing === undefined) {
        if (!deleting) diff.create.push(renderSlice(d, svc, triggerMs));
      } else if (draftChanged(d, svc)) {
        diff.update.push(renderSlice(d, svc, triggerMs));
      }
    }
  }
  diff.delete.push(...orphans);
  return { diff, skips, endpoints, hintEvents };
}
