/**
 * One pod seen through one Service: its addresses on each of the Service's networks, its
 * resolved ports and its EndpointSlice conditions, or the reason it is left out. Pure.
 *
 * Kubernetes semantics are followed where they exist (pkg/controller/endpointslice):
 * - Succeeded/Failed pods are never endpoints; terminating pods are (with `terminating: true`).
 * - `serving` = the pod's Ready condition; `ready` = serving and not terminating, or
 *   `publishNotReadyAddresses`. `ready` is always written: DNS treats a missing value as ready.
 * - a named targetPort is resolved per pod from its container ports (name and protocol); a pod
 *   where it does not resolve is left out of that port only.
 * What differs: the pod's IP is irrelevant; its addresses come from the Multus network-status
 * entry named `<namespace>/<nad>`, every address of that network, one endpoint per pod and family.
 */
import { findNetworkStatus, parseNetworkStatus, type NetworkStatusEntry } from '../../src/annotations/network-status.js';
import { networkKey, type NetworkRef } from '../../src/annotations/service-network.js';
import { compareText } from '../../src/order.js';
import { NETWORK_STATUS_ANNOTATION } from '../../src/keys.js';
import { formatInputError, type Result } from '../../src/result.js';
import type { V1Endpoint, V1EndpointSlice, V1Pod, V1Service } from '../../src/kube/types.js';
import { OPEN_POLICY, refusedAddress, type AddressPolicy } from './address-policy.js';

export type EndpointPort = NonNullable<V1EndpointSlice['ports']>[number];
export type AddressType = 'IPv4' | 'IPv6';

/** Why a pod was left out of a network's slices; also the `reason` label of the skip metric. */
export type SkipReason = 'NetworkStatusMissing' | 'NetworkStatusInvalid' | 'NetworkNotAttached' | 'NoAddresses' | 'AddressRefused';

export interface PodSkip {
  readonly pod: string;
  readonly network: string;
  readonly reason: SkipReason;
  readonly message: string;
  /** Pending pods without network-status are normal (CNI not done yet): counted, not announced. */
  readonly expected: boolean;
}

/** The pod's endpoint on one network and family, before it is placed in a slice. */
export interface PodEndpoint {
  /** Pod name: the stable identity used to keep a pod in the same slice across changes. */
  readonly key: string;
  readonly network: NetworkRef;
  readonly addressType: AddressType;
  /** Resolved ports, sorted canonically; part of the slice grouping. */
  readonly ports: readonly EndpointPort[];
  readonly endpoint: V1Endpoint;
}

export interface PodResult {
  readonly endpoints: PodEndpoint[];
  readonly skips: PodSkip[];
}

const statusCache = new WeakMap<V1Pod, Result<NetworkStatusEntry[]>>();
/**
 * Parses by annotation text too: an informer replaces the pod object on every update (a status
 * write, a Ready flip) while its network-status rarely changes, so each text is parsed once, not
 * once per pod object. Bounded by the characters of the texts it keeps.
 */
const byText = new Map<string, Result<NetworkStatusEntry[]>>();
let byTextChars = 0;
const MAX_CACHED_STATUS_CHARS = 4 * 1024 * 1024;

/**
 * The pod's network-status, parsed once per distinct text. Called only for a pod a Service's
 * reconcile reaches, so a pod no Service selects is never parsed.
 */
function podNetworkStatus(pod: V1Pod, value: string): Result<NetworkStatusEntry[]> {
  let parsed = statusCache.get(pod) ?? byText.get(value);
  if (parsed === undefined) {
    parsed = parseNetworkStatus(value);
    if (byTextChars + value.length > MAX_CACHED_STATUS_CHARS) {
      byText.clear();
      byTextChars = 0;
    }
    byText.set(value, parsed);
    byTextChars += value.length;
  }
  statusCache.set(pod, parsed);
  return parsed;
}

export function isPodReady(pod: V1Pod): boolean {
  return (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

export function isPodTerminating(pod: V1Pod): boolean {
  return pod.metadata?.deletionTimestamp !== undefined && pod.metadata.deletionTimestamp !== null;
}

/**
 * Pods that can be endpoints at all: Pending or Running (a pod just created has no phase yet).
 * Succeeded and Failed pods are dropped as Kubernetes does; the deprecated Unknown phase too.
 */
export function isPodEligible(pod: V1Pod): boolean {
  const phase = pod.status?.phase;
  return phase === undefined || phase === 'Pending' || phase === 'Running';
}

/** Resolves a Service port's targetPort for one pod; undefined when a named port is not declared. */
export function resolveTargetPort(port: NonNullable<NonNullable<V1Service['spec']>['ports']>[number], pod: V1Pod): number | undefined {
  const target = port.targetPort;
  if (target === undefined || target === null || target === '' || target === 0) return port.port;
  if (typeof target === 'number') return target;
  if (/^[0-9]+$/.test(target)) return Number(target);
  const protocol = port.protocol ?? 'TCP';
  // Native sidecars (init containers with restartPolicy Always) serve ports too.
  const containers = [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? []).filter((c) => c.restartPolicy === 'Always')];
  for (const c of containers) {
    for (const p of c.ports ?? []) {
      if (p.name === target && (p.protocol ?? 'TCP') === protocol) return p.containerPort;
    }
  }
  return undefined;
}

function comparePorts(a: EndpointPort, b: EndpointPort): number {
  return compareText(a.name ?? '', b.name ?? '') || compareText(a.protocol ?? '', b.protocol ?? '') || (a.port ?? 0) - (b.port ?? 0);
}

/** The pod's ports for this Service, in canonical order (the grouping key depends on it). */
export function podPorts(svc: V1Service, pod: V1Pod): EndpointPort[] {
  const out: EndpointPort[] = [];
  for (const sp of svc.spec?.ports ?? []) {
    const port = resolveTargetPort(sp, pod);
    if (port === undefined) continue;
    const ep: EndpointPort = { name: sp.name ?? '', port, protocol: sp.protocol ?? 'TCP' };
    if (sp.appProtocol !== undefined) ep.appProtocol = sp.appProtocol;
    out.push(ep);
  }
  return out.sort(comparePorts);
}

function conditionsFor(svc: V1Service, pod: V1Pod): NonNullable<V1Endpoint['conditions']> {
  const serving = isPodReady(pod);
  const terminating = isPodTerminating(pod);
  const ready = svc.spec?.publishNotReadyAddresses === true || (serving && !terminating);
  return { ready, serving, terminating };
}

function baseEndpoint(svc: V1Service, pod: V1Pod, addresses: string[], zoneOf: (node: string) => string | undefined): V1Endpoint {
  const meta = pod.metadata ?? {};
  const ep: V1Endpoint = {
    addresses,
    conditions: conditionsFor(svc, pod),
    targetRef: { kind: 'Pod', namespace: meta.namespace ?? '', name: meta.name ?? '', uid: meta.uid ?? '' },
  };
  const node = pod.spec?.nodeName;
  if (node !== undefined && node !== '') {
    ep.nodeName = node;
    const zone = zoneOf(node);
    if (zone !== undefined && zone !== '') ep.zone = zone;
  }
  // Headless Services give pods with a matching subdomain a DNS name, as Kubernetes does.
  const hostname = pod.spec?.hostname;
  if (svc.spec?.clusterIP === 'None' && hostname !== undefined && hostname !== '' && pod.spec?.subdomain === svc.metadata?.name) {
    ep.hostname = hostname;
  }
  return ep;
}

/**
 * Everything one pod contributes to one Service. The caller has already checked that the pod is
 * in the Service's namespace and matches its selector.
 */
export function podEndpoints(
  svc: V1Service,
  networks: readonly NetworkRef[],
  pod: V1Pod,
  zoneOf: (node: string) => string | undefined = () => undefined,
  policy: AddressPolicy = OPEN_POLICY,
): PodResult {
  const result: PodResult = { endpoints: [], skips: [] };
  if (!isPodEligible(pod)) return result;
  const name = pod.metadata?.name ?? '';
  const object = `Pod ${pod.metadata?.namespace ?? ''}/${name}`;
  const skipAll = (reason: SkipReason, message: string, expected: boolean): PodResult => {
    for (const n of networks) result.skips.push({ pod: name, network: networkKey(n), reason, message, expected });
    return result;
  };

  const value = pod.metadata?.annotations?.[NETWORK_STATUS_ANNOTATION];
  if (value === undefined) {
    return skipAll(
      'NetworkStatusMissing',
      `${object}: no ${NETWORK_STATUS_ANNOTATION} annotation yet; Multus writes it once the pod's networks are attached`,
      pod.status?.phase === 'Pending' || pod.status?.phase === undefined,
    );
  }
  const status = podNetworkStatus(pod, value);
  if (!status.ok) return skipAll('NetworkStatusInvalid', formatInputError(object, status.error), false);

  const ports = podPorts(svc, pod);
  const place = { svc, pod, name, object, ports, zoneOf, policy };
  for (const network of networks) addNetworkEndpoints(result, place, network, status.value);
  return result;
}

/**
 * The addresses of one network-status entry that may be published, per family (those with none
 * left out), and why each other one is refused. Tenant input: an address that is never a pod's own
 * is dropped here, alone, so it neither reaches a client's rules nor makes the apiserver refuse
 * the whole slice. Shared by Service slices and policy address groups.
 */
export function publishableAddresses(entry: NetworkStatusEntry, network: string, policy: AddressPolicy): { byFamily: [AddressType, string[]][]; refused: string[] } {
  const refused: string[] = [];
  const byFamily: [AddressType, string[]][] = [];
  for (const [addressType, family, claimed] of [
    ['IPv4', 4, entry.ipv4],
    ['IPv6', 6, entry.ipv6],
  ] as const) {
    const addresses = claimed.filter((a) => {
      const why = refusedAddress(a, family, policy, network);
      if (why !== undefined) refused.push(why);
      return why === undefined;
    });
    if (addresses.length > 0) byFamily.push([addressType, [...new Set(addresses)]]);
  }
  return { byFamily, refused };
}

/** The pod's network-status parsed (once per text), or undefined when it has none. */
export function podNetworkStatusOf(pod: V1Pod): Result<NetworkStatusEntry[]> | undefined {
  const value = pod.metadata?.annotations?.[NETWORK_STATUS_ANNOTATION];
  return value === undefined ? undefined : podNetworkStatus(pod, value);
}

/** The pod's fields that every network's endpoints are built from. */
interface PodPlace {
  svc: V1Service;
  pod: V1Pod;
  name: string;
  object: string;
  ports: ReturnType<typeof podPorts>;
  zoneOf: (node: string) => string | undefined;
  policy: AddressPolicy;
}

/** One network's endpoints (one per address family) or skip, for one pod. */
function addNetworkEndpoints(result: PodResult, place: PodPlace, network: NetworkRef, entries: Parameters<typeof findNetworkStatus>[0]): void {
  const { svc, pod, name, object, ports, zoneOf, policy } = place;
  const key = networkKey(network);
  const entry = findNetworkStatus(entries, network);
  if (entry === undefined) {
    const attached = entries.map((e) => e.name).join(', ') || 'none';
    result.skips.push({
      pod: name,
      network: key,
      reason: 'NetworkNotAttached',
      message: `${object}: ${NETWORK_STATUS_ANNOTATION} has no entry named "${key}" (attached: ${attached}); attach the network with the k8s.v1.cni.cncf.io/networks annotation`,
      expected: false,
    });
    return;
  }
  if (entry.ipv4.length === 0 && entry.ipv6.length === 0) {
    result.skips.push({
      pod: name,
      network: key,
      reason: 'NoAddresses',
      message: `${object}: ${NETWORK_STATUS_ANNOTATION} entry "${key}" has no IP addresses; give the network IPAM an address range`,
      expected: false,
    });
    return;
  }
  const { byFamily, refused } = publishableAddresses(entry, key, policy);
  for (const [addressType, unique] of byFamily) result.endpoints.push({ key: name, network, addressType, ports, endpoint: baseEndpoint(svc, pod, unique, zoneOf) });
  if (refused.length > 0) {
    result.skips.push({
      pod: name,
      network: key,
      reason: 'AddressRefused',
      message: `${object}: ${NETWORK_STATUS_ANNOTATION} entry "${key}" lists addresses that are not published (${refused.join('; ')}); the pod's other addresses are kept. List only the pod's own addresses on that network (Multus writes them)`,
      expected: false,
    });
  }
}
