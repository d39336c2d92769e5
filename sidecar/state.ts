/**
 * Pure: from the sidecar's pod, the opted-in Services and the multus-proxy EndpointSlices to the
 * DesiredState the dataplane renders. No IO, no clock: the same input always gives the same,
 * sorted output, so the rendered iptables text is stable and an unchanged state is recognisable.
 */
import { NETWORK_STATUS_ANNOTATION, PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from '../src/keys.js';
import { err, formatInputError, inputError, ok, type Result } from '../src/result.js';
import { parseIp } from '../src/annotations/ip.js';
import { networkKey, parseServiceNetwork, type NetworkRef } from '../src/annotations/service-network.js';
import { findNetworkStatus, parseNetworkStatus, type NetworkStatusEntry } from '../src/annotations/network-status.js';
import { networkLabelValue } from '../src/annotations/network-label.js';
import type { V1EndpointSlice, V1Pod, V1Service } from '../src/kube/types.js';
import type { BackendEndpoint, DesiredState, IpFamily, PodInterface, Protocol, ServicePortTarget } from './model.js';

/** Kubernetes' default sessionAffinityConfig.clientIP.timeoutSeconds (3 hours). */
export const DEFAULT_AFFINITY_TIMEOUT_SECONDS = 10800;

const PROTOCOLS: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];

const podObject = (pod: V1Pod): string => `Pod ${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;

/**
 * The networks the pod asks to be served (its service-network annotation; a bare name is the
 * pod's namespace). No annotation: nothing to serve. A malformed one is an error with the
 * parser's message; the caller keeps its last good value.
 */
export function readServedNetworks(pod: V1Pod): Result<NetworkRef[], string> {
  const value = pod.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION];
  if (value === undefined) return ok([]);
  const parsed = parseServiceNetwork(value, pod.metadata?.namespace ?? '');
  return parsed.ok ? parsed : err(formatInputError(podObject(pod), parsed.error));
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
  return [...new Set(served.map(networkLabelValue))].sort(compare);
}

export interface StateInput {
  readonly interfaces: readonly PodInterface[];
  readonly services: readonly V1Service[];
  readonly slices: readonly V1EndpointSlice[];
}

export interface StateOutput {
  readonly state: DesiredState;
  /** Messages about objects that could not be used (each names object, key, value and fix). */
  readonly problems: readonly string[];
}

/** Plain code-point order: locale-independent, so two machines render the same text. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

const familyOf = (addressType: string | undefined): IpFamily | undefined => (addressType === 'IPv4' ? 4 : addressType === 'IPv6' ? 6 : undefined);

/** What an endpoint is worth when two slices list the same ip:port (briefly, while the controller moves it). */
const rank = (e: BackendEndpoint): number => (e.ready ? 2 : e.serving ? 1 : 0);

/** Slices grouped by `<namespace>/<service>` then by network key, so each Service looks up only its own. */
type SliceIndex = Map<string, Map<string, V1EndpointSlice[]>>;

function indexSlices(slices: readonly V1EndpointSlice[], problems: string[]): SliceIndex {
  const index: SliceIndex = new Map();
  for (const slice of slices) {
    const ns = slice.metadata?.namespace ?? '';
    const svc = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
    const netValue = slice.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION];
    if (svc === undefined || netValue === undefined) continue;
    const object = `EndpointSlice ${ns}/${slice.metadata?.name ?? ''}`;
    const parsed = parseServiceNetwork(netValue, ns);
    if (!parsed.ok) {
      problems.push(formatInputError(object, parsed.error));
      continue;
    }
    if (parsed.value.length !== 1) {
      const why = `names ${parsed.value.length} networks`;
      problems.push(formatInputError(object, inputError(SERVICE_NETWORK_ANNOTATION, netValue, why, 'a slice is on exactly one network: "<namespace>/<nad>"')));
      continue;
    }
    const [ref] = parsed.value as [NetworkRef];
    const byNet = index.get(`${ns}/${svc}`) ?? new Map<string, V1EndpointSlice[]>();
    index.set(`${ns}/${svc}`, byNet);
    const list = byNet.get(networkKey(ref)) ?? [];
    byNet.set(networkKey(ref), list);
    list.push(slice);
  }
  return index;
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
      const candidate: BackendEndpoint = {
        ip: ip.value.address,
        port: port.port,
        ready,
        serving: ep.conditions?.serving ?? true,
        terminating: ep.conditions?.terminating ?? false,
      };
      const key = `${candidate.ip}|${candidate.port}`;
      const seen = byAddr.get(key);
      if (seen === undefined || rank(candidate) > rank(seen)) byAddr.set(key, candidate);
    }
  }
  return [...byAddr.values()].sort((a, b) => compare(a.ip, b.ip) || a.port - b.port);
}

/** The Service's cluster IPs with their families; empty for headless (`None`) or unallocated ones. */
function clusterIPs(svc: V1Service): { ip: string; family: IpFamily }[] {
  const spec = svc.spec;
  const ips = spec?.clusterIPs ?? (spec?.clusterIP !== undefined ? [spec.clusterIP] : []);
  const out: { ip: string; family: IpFamily }[] = [];
  for (const text of ips) {
    if (text === 'None' || text === '') continue;
    const parsed = parseIp(text);
    if (parsed.ok && parsed.value.prefix === undefined) out.push({ ip: parsed.value.address, family: parsed.value.family });
  }
  return out;
}

const hasFamily = (iface: PodInterface, family: IpFamily): boolean => (family === 4 ? iface.ipv4 : iface.ipv6).length > 0;

/** Identity of a target as one string: sorting by it gives a total, stable order. */
const targetKey = (t: ServicePortTarget): string =>
  JSON.stringify([t.service, t.portName, t.protocol, t.port, t.family, t.clusterIP, networkKey(t.network)]);

export function buildDesiredState(input: StateInput): StateOutput {
  const problems: string[] = [];
  const slices = indexSlices(input.slices, problems);
  const ifaceByNet = new Map(input.interfaces.map((i) => [networkKey(i.network), i]));
  const targets: ServicePortTarget[] = [];

  for (const svc of input.services) {
    if (svc.metadata?.labels?.[PROXY_NAME_LABEL] !== PROXY_NAME) continue;
    // ClusterIP only: headless Services need no rules at all, because DNS answers with the
    // endpoint addresses themselves and the client connects to them directly over its secondary
    // interface. Other types are denied by the webhook; ignore them if one slips through.
    if ((svc.spec?.type ?? 'ClusterIP') !== 'ClusterIP') continue;
    const ips = clusterIPs(svc);
    if (ips.length === 0) continue;
    const ns = svc.metadata?.namespace ?? '';
    const name = `${ns}/${svc.metadata?.name ?? ''}`;
    const netValue = svc.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION];
    if (netValue === undefined) continue;
    const nets = parseServiceNetwork(netValue, ns);
    if (!nets.ok) {
      problems.push(formatInputError(`Service ${name}`, nets.error));
      continue;
    }
    const affinityTimeoutSeconds =
      svc.spec?.sessionAffinity === 'ClientIP' ? (svc.spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? DEFAULT_AFFINITY_TIMEOUT_SECONDS) : undefined;
    const byNet = slices.get(name);

    for (const { ip, family } of ips) {
      // One cluster IP leaves through one interface (its route), so it is served on one network:
      // the first of the Service's networks, in the Service's order, where the pod has an
      // interface with an address of this family (the route's source). None: no target.
      const network = nets.value.find((ref) => {
        const iface = ifaceByNet.get(networkKey(ref));
        return iface !== undefined && hasFamily(iface, family);
      });
      if (network === undefined) continue;
      const netSlices = byNet?.get(networkKey(network)) ?? [];
      for (const p of svc.spec?.ports ?? []) {
        const protocol = PROTOCOLS.find((x) => x === (p.protocol ?? 'TCP'));
        if (protocol === undefined) continue;
        const portName = p.name ?? '';
        targets.push({
          service: name,
          portName,
          protocol,
          clusterIP: ip,
          port: p.port,
          family,
          network: { namespace: network.namespace, name: network.name },
          endpoints: endpointsFor(netSlices, family, portName, protocol),
          ...(affinityTimeoutSeconds !== undefined ? { affinityTimeoutSeconds } : {}),
        });
      }
    }
  }

  const keyed = targets.map((t) => [targetKey(t), t] as const).sort((a, b) => compare(a[0], b[0]));
  const interfaces = [...input.interfaces].sort((a, b) => compare(networkKey(a.network), networkKey(b.network)));
  return { state: { targets: keyed.map(([, t]) => t), interfaces }, problems };
}

/** A canonical text of a state: equal text means the dataplane has nothing to do. */
export function stateFingerprint(state: DesiredState): string {
  return JSON.stringify(state);
}
