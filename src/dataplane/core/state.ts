/**
 * Pure: from the sidecar's pod, the opted-in Services and the multus-proxy EndpointSlices to the
 * DesiredState the dataplane renders. No IO, no clock: the same input always gives the same,
 * sorted output, so the rendered iptables text is stable and an unchanged state is recognisable.
 */
import { NETWORK_STATUS_ANNOTATION, PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from '../../keys.js';
import { compareText } from '../../order.js';
import { err, formatInputError, inputError, ok, type Result } from '../../result.js';
import { parseIp } from '../../annotations/ip.js';
import { readLoadBalancer, sourceAllowed } from '../../annotations/load-balancer.js';
import { networkKey, parseServiceNetwork, type NetworkRef } from '../../annotations/service-network.js';
import { servedNetworks } from '../../annotations/served-networks.js';
import { findNetworkStatus, parseNetworkStatus, type NetworkStatusEntry } from '../../annotations/network-status.js';
import { networkLabelValue } from '../../annotations/network-label.js';
import type { V1Endpoint, V1EndpointSlice, V1Pod, V1Service } from '../../kube/types.js';
import { trafficSettings, type ClientPlace } from '../../service-semantics/endpoints.js';
import { EXTERNAL_IPS_NOT_CONFIGURED, externalIPAllowed, type ExternalIPPolicy } from '../../external-ips.js';
import type { BackendEndpoint, DesiredState, IpFamily, PodInterface, Protocol, ServicePortTarget } from './model.js';
import { flat } from './flat.js';

/** Kubernetes' default sessionAffinityConfig.clientIP.timeoutSeconds (3 hours). */
export const DEFAULT_AFFINITY_TIMEOUT_SECONDS = 10800;

const PROTOCOLS: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];

const podObject = (pod: V1Pod): string => `Pod ${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;

/**
 * The networks the pod serves: its service-network annotation (a bare name is the pod's
 * namespace), else every network its Multus `networks` annotation attaches (an inherited
 * injection; src/annotations/served-networks.ts). A malformed one is an error with the parser's
 * message; the caller keeps its last good value.
 */
export function readServedNetworks(pod: V1Pod): Result<NetworkRef[], string> {
  const parsed = servedNetworks(pod.metadata?.annotations, pod.metadata?.namespace ?? '');
  return parsed.ok ? ok(parsed.value.networks) : err(formatInputError(podObject(pod), parsed.error));
}

/** The pod's Multus network-status entries; none yet (annotation absent) is not an error. */
export function readNetworkStatus(pod: V1Pod): Result<NetworkStatusEntry[], string> {
  const value = pod.metadata?.annotations?.[NETWORK_STATUS_ANNOTATION];
  if (value === undefined) return ok([]);
  const parsed = parseNetworkStatus(value);
  return parsed.ok ? parsed : err(formatInputError(podObject(pod), parsed.error));
}

/**
 * The pod's interfaces on the networks it serves, in the order it lists them. A served network
 * without a network-status entry naming an interface is not attached (yet): it gets no interface,
 * hence no targets.
 */
export function podInterfaces(served: readonly NetworkRef[], status: readonly NetworkStatusEntry[]): PodInterface[] {
  const out: PodInterface[] = [];
  for (const ref of served) {
    const entry = findNetworkStatus(status, ref);
    if (entry?.interface === undefined || entry.interface === '') continue;
    out.push({ network: { namespace: ref.namespace, name: ref.name }, interface: entry.interface, ipv4: [...entry.ipv4], ipv6: [...entry.ipv6] });
  }
  return out;
}

/** `multus-proxy/network` label values of the served networks, sorted and unique: the slice selector. */
export function networkLabelValues(served: readonly NetworkRef[]): string[] {
  return [...new Set(served.map(networkLabelValue))].sort(compareText);
}

export interface StateInput {
  readonly interfaces: readonly PodInterface[];
  readonly services: readonly V1Service[];
  readonly slices: readonly V1EndpointSlice[];
  /** Where the client is (node, zone; src/service-semantics/client-place.ts); absent: nowhere known, no endpoint is local. */
  readonly place?: ClientPlace;
  /** The admin's external-IP CIDRs (src/external-ips.ts); absent: not configured, no external IP is served. Fixed for a StateMemo's life (its constructor). */
  readonly externalIPs?: ExternalIPPolicy;
}

export interface StateOutput {
  readonly state: DesiredState;
  /** Messages about objects that could not be used (each names object, key, value and fix). */
  readonly problems: readonly string[];
}

const familyOf = (addressType: string | undefined): IpFamily | undefined => (addressType === 'IPv4' ? 4 : addressType === 'IPv6' ? 6 : undefined);

/** What an endpoint is worth when two slices list the same ip:port (briefly, while the controller moves it). */
const rank = (e: BackendEndpoint): number => (e.ready ? 2 : e.serving ? 1 : 0);

/** How one slice is used: the Service (`<namespace>/<name>`) and network key it serves, or the problem it has. */
export interface SliceInfo {
  readonly group?: string;
  readonly net?: string;
  readonly problem?: string;
}

export function sliceInfo(slice: V1EndpointSlice): SliceInfo {
  const ns = slice.metadata?.namespace ?? '';
  const svc = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
  const netValue = slice.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION];
  if (svc === undefined || netValue === undefined) return {};
  const object = `EndpointSlice ${ns}/${slice.metadata?.name ?? ''}`;
  const parsed = parseServiceNetwork(netValue, ns);
  if (!parsed.ok) return { problem: formatInputError(object, parsed.error) };
  if (parsed.value.length !== 1) {
    const why = `names ${parsed.value.length} networks`;
    return { problem: formatInputError(object, inputError(SERVICE_NETWORK_ANNOTATION, netValue, why, 'a slice is on exactly one network: "<namespace>/<nad>"')) };
  }
  const [ref] = parsed.value as [NetworkRef];
  return { group: flat(`${ns}/${svc}`), net: networkKey(ref) };
}

const sliceName = (s: V1EndpointSlice): string => `${s.metadata?.namespace ?? ''}/${s.metadata?.name ?? ''}`;

/**
 * One Service's slices by network key. Sorted by slice name, so when two slices list the same
 * ip:port with equal conditions the same one wins whatever order the informer delivered them in.
 */
export function slicesByNetwork(slices: readonly { slice: V1EndpointSlice; net: string }[]): Map<string, V1EndpointSlice[]> {
  const byNet = new Map<string, V1EndpointSlice[]>();
  const sorted = slices.length > 1 ? [...slices].sort((a, b) => compareText(sliceName(a.slice), sliceName(b.slice))) : slices;
  for (const { slice, net } of sorted) {
    const list = byNet.get(net);
    if (list === undefined) byNet.set(net, [slice]);
    else list.push(slice);
  }
  return byNet;
}

/** Endpoints of one Service port (name + protocol) in the given slices of one family, deduplicated and sorted. */
function endpointsFor(slices: readonly V1EndpointSlice[], family: IpFamily, portName: string, protocol: Protocol): BackendEndpoint[] {
  const byAddr = new Map<string, BackendEndpoint>();
  for (const slice of slices) {
    if (familyOf(slice.addressType) !== family) continue;
    const port = (slice.ports ?? []).find((p) => (p.name ?? '') === portName && (p.protocol ?? 'TCP') === protocol);
    if (port?.port === undefined) continue;
    for (const ep of slice.endpoints ?? []) {
      // Consumers use the first address only (as kube-proxy does); the controller writes one.
      const ip = parseIp(ep.addresses[0] ?? '');
      if (!ip.ok || ip.value.family !== family || ip.value.prefix !== undefined) continue;
      // Kubernetes API: nil ready and nil serving mean true, nil terminating means false.
      const ready = ep.conditions?.ready ?? true;
      const serving = ep.conditions?.serving ?? true;
      const terminating = ep.conditions?.terminating ?? false;
      const candidate: BackendEndpoint = placed(ep)
        ? {
            ip: ip.value.address,
            port: port.port,
            ready,
            serving,
            terminating,
            nodeName: ep.nodeName ?? '',
            zone: ep.zone ?? '',
            zoneHints: (ep.hints?.forZones ?? []).map((z) => z.name),
            nodeHints: (ep.hints?.forNodes ?? []).map((n) => n.name),
          }
        : { ip: ip.value.address, port: port.port, ready, serving, terminating };
      const key = `${candidate.ip}|${candidate.port}`;
      const seen = byAddr.get(key);
      if (seen === undefined || rank(candidate) > rank(seen)) byAddr.set(key, candidate);
    }
  }
  return [...byAddr.values()].sort((a, b) => compareText(a.ip, b.ip) || a.port - b.port);
}

/** Whether a slice endpoint says where it runs or carries hints: only then does it carry them into the model (two object shapes, not one per combination). */
const placed = (ep: V1Endpoint): boolean => (ep.nodeName ?? '') !== '' || (ep.zone ?? '') !== '' || ep.hints?.forZones !== undefined || ep.hints?.forNodes !== undefined;

const hinted = (e: BackendEndpoint): boolean => (e.zoneHints?.length ?? 0) > 0 || (e.nodeHints?.length ?? 0) > 0;

/** No node, no zone: no endpoint is local, zone hints are not used. */
const NOWHERE: ClientPlace = { nodeName: '', zone: '' };

/** The Service's cluster IPs with their families; empty for headless (`None`) or unallocated ones. */
function clusterIPs(svc: V1Service): Frontend[] {
  const spec = svc.spec;
  const ips = spec?.clusterIPs ?? (spec?.clusterIP !== undefined ? [spec.clusterIP] : []);
  const out: Frontend[] = [];
  for (const text of ips) {
    if (text === 'None' || text === '') continue;
    const parsed = parseIp(text);
    if (parsed.ok && parsed.value.prefix === undefined) out.push({ ip: parsed.value.address, family: parsed.value.family });
  }
  return out;
}

const hasFamily = (iface: PodInterface, family: IpFamily): boolean => (family === 4 ? iface.ipv4 : iface.ipv6).length > 0;

/** Identity of a target as one string: sorting by it gives a total, stable order. */
const targetKey = (t: ServicePortTarget): string => JSON.stringify([t.service, t.portName, t.protocol, t.port, t.family, t.clusterIP, networkKey(t.network)]);

export type Keyed = readonly [key: string, target: ServicePortTarget];

/** The targets of one Service object (appended to `out`), or the problem that keeps it from having any. */
export function serviceTargets(
  svc: V1Service,
  byNet: ReadonlyMap<string, readonly V1EndpointSlice[]> | undefined,
  ifaceByNet: ReadonlyMap<string, PodInterface>,
  out: Keyed[],
  place: ClientPlace = NOWHERE,
  externalIPs: ExternalIPPolicy = EXTERNAL_IPS_NOT_CONFIGURED,
): string | undefined {
  if (svc.metadata?.labels?.[PROXY_NAME_LABEL] !== PROXY_NAME) return undefined;
  // ClusterIP, NodePort's and LoadBalancer's cluster IP (node ports are the node agent's), and a
  // LoadBalancer's ingress IPs: headless Services need no rules at all, because DNS answers with
  // the endpoint addresses themselves and the client connects to them directly over its secondary
  // interface. ExternalName is denied by the webhook; ignore it if one slips through.
  const type = svc.spec?.type ?? 'ClusterIP';
  if (type !== 'ClusterIP' && type !== 'NodePort' && type !== 'LoadBalancer') return undefined;
  const ns = svc.metadata?.namespace ?? '';
  const name = `${ns}/${svc.metadata?.name ?? ''}`;
  const lb = type === 'LoadBalancer' ? ingressFrontends(svc, ifaceByNet) : undefined;
  const ips = [...clusterIPs(svc), ...(lb?.frontends ?? []), ...allowedExternalIPs(svc, externalIPs)];
  if (ips.length === 0) return lb?.problem;
  const netValue = svc.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION];
  if (netValue === undefined) return undefined;
  const nets = parseServiceNetwork(netValue, ns);
  if (!nets.ok) return formatInputError(`Service ${name}`, nets.error);
  const affinityTimeoutSeconds = svc.spec?.sessionAffinity === 'ClientIP' ? (svc.spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? DEFAULT_AFFINITY_TIMEOUT_SECONDS) : undefined;
  // Only a Service whose traffic policy decides anything for the client carries it; hints alone
  // need the place too (resolve.ts applies kube-proxy's categorisation to targets with a place).
  const traffic = svc.spec?.internalTrafficPolicy === 'Local' ? trafficSettings(svc) : undefined;

  for (const { ip, family, ingress, externalIP, allowed } of ips) {
    // One cluster IP leaves through one interface (its route), so it is served on one network:
    // the first of the Service's networks, in the Service's order, where the pod has an
    // interface with an address of this family (the route's source). None: no target.
    const network = nets.value.find((ref) => {
      const iface = ifaceByNet.get(networkKey(ref));
      return iface !== undefined && hasFamily(iface, family);
    });
    if (network === undefined) continue;
    // loadBalancerSourceRanges apply to in-cluster clients too (kube-proxy's firewall sees the pod's
    // address): a client outside them is not short-circuited, and its packets go the usual way, to
    // the nodes, whose rules drop them.
    if (allowed !== undefined && !allowed(ifaceByNet.get(networkKey(network)) as PodInterface)) continue;
    const netSlices = byNet?.get(networkKey(network)) ?? [];
    for (const p of svc.spec?.ports ?? []) {
      const protocol = PROTOCOLS.find((x) => x === (p.protocol ?? 'TCP'));
      if (protocol === undefined) continue;
      const portName = p.name ?? '';
      const endpoints = endpointsFor(netSlices, family, portName, protocol);
      const withPlace = traffic !== undefined || endpoints.some(hinted);
      const t: ServicePortTarget = {
        service: name,
        portName,
        protocol,
        clusterIP: ip,
        port: p.port,
        family,
        network: { namespace: network.namespace, name: network.name },
        endpoints,
        ...(affinityTimeoutSeconds !== undefined ? { affinityTimeoutSeconds } : {}),
        ...(ingress === true ? { ingress } : {}),
        ...(externalIP === true ? { externalIP } : {}),
        ...(traffic !== undefined ? { traffic } : {}),
        ...(withPlace ? { place } : {}),
      };
      out.push([targetKey(t), t]);
    }
  }
  return lb?.problem;
}

interface Frontend {
  readonly ip: string;
  readonly family: IpFamily;
  readonly ingress?: true;
  readonly externalIP?: true;
  /** Ingress IPs with loadBalancerSourceRanges: whether the client, from its interface there, is inside them. */
  readonly allowed?: (iface: PodInterface) => boolean;
}

/**
 * A LoadBalancer's ingress IPs the client reaches directly (ipMode VIP; Proxy is the load
 * balancer's to forward, as kube-proxy leaves it), checked where they enter
 * (src/annotations/load-balancer.ts), the client's own addresses refused. Problems come back as
 * one message, which the sidecar logs (the node agent raises the Event on the Service).
 */
function ingressFrontends(svc: V1Service, ifaceByNet: ReadonlyMap<string, PodInterface>): { frontends: Frontend[]; problem?: string } {
  const own = new Set<string>();
  for (const i of ifaceByNet.values()) {
    for (const [family, list] of [
      [4, i.ipv4],
      [6, i.ipv6],
    ] as const) {
      for (const a of list) {
        const p = parseIp(a);
        if (p.ok && p.value.family === family) own.add(p.value.address);
      }
    }
  }
  const view = readLoadBalancer(svc, own);
  const ranges = view.sourceRanges;
  const allowed =
    ranges === undefined
      ? undefined
      : (family: IpFamily) =>
          (iface: PodInterface): boolean => {
            // The source the route will carry: the interface's first address of the family (resolve.ts).
            for (const a of family === 4 ? iface.ipv4 : iface.ipv6) {
              const p = parseIp(a);
              if (p.ok && p.value.family === family) return sourceAllowed(ranges, p.value.address, family);
            }
            return false;
          };
  const frontends = view.vips.map((v): Frontend => ({ ip: v.address, family: v.family, ingress: true, ...(allowed !== undefined ? { allowed: allowed(v.family) } : {}) }));
  const object = `Service ${svc.metadata?.namespace ?? ''}/${svc.metadata?.name ?? ''}`;
  return view.problems.length === 0 ? { frontends } : { frontends, problem: view.problems.map((e) => formatInputError(object, e)).join('\n') };
}

/**
 * The Service's `spec.externalIPs` inside the admin's allowed CIDRs, re-checked here (a Service
 * also arrives without the webhook; src/external-ips.ts): each is served as kube-proxy serves it to
 * a pod, as one more address of the Service. Outside them, or with no list configured: none.
 */
function allowedExternalIPs(svc: V1Service, policy: ExternalIPPolicy): Frontend[] {
  if (!policy.configured) return [];
  const out: Frontend[] = [];
  const seen = new Set<string>();
  for (const text of svc.spec?.externalIPs ?? []) {
    const p = parseIp(text.trim());
    if (!p.ok || p.value.prefix !== undefined || seen.has(p.value.address) || !externalIPAllowed(policy, p.value.address)) continue;
    seen.add(p.value.address);
    out.push({ ip: p.value.address, family: p.value.family, externalIP: true });
  }
  return out;
}

export const byKey = (a: Keyed, b: Keyed): number => compareText(a[0], b[0]);

/** Service port targets and endpoints in a state (the sync loop's metrics). */
export function stateSize(state: DesiredState): { targets: number; endpoints: number } {
  return { targets: state.targets.length, endpoints: state.targets.reduce((n, t) => n + t.endpoints.length, 0) };
}

/** A canonical text of a state: equal text means the dataplane has nothing to do. */
export function stateFingerprint(state: DesiredState): string {
  return JSON.stringify(state);
}

/**
 * Whether two states are equal (the same as equal fingerprints), in O(1) per target the two
 * share by identity, which StateMemo makes the common case: a sync with nothing new costs a pass
 * of pointer comparisons instead of serialising every target.
 */
export function sameState(a: DesiredState, b: DesiredState): boolean {
  if (a === b) return true;
  if (a.targets.length !== b.targets.length) return false;
  if (a.interfaces !== b.interfaces && JSON.stringify(a.interfaces) !== JSON.stringify(b.interfaces)) return false;
  for (let i = 0; i < a.targets.length; i += 1) {
    const x = a.targets[i];
    const y = b.targets[i];
    if (x !== y && JSON.stringify(x) !== JSON.stringify(y)) return false;
  }
  return true;
}
