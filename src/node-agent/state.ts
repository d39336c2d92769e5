/**
 * Pure: from the opted-in Services, their EndpointSlices, the NetworkAttachmentDefinitions and this
 * node's Node object to what the node should have: its own interface and address on each network
 * it can serve (host-interface.ts, addresses.ts), and the NodeState the renderer turns into rules
 * (rules.ts). The cluster-IP targets come from the sidecar's own state builder, with the node's
 * interfaces in the pod's place, so endpoint choice and dual-network rules are the same code.
 *
 * A network is served on this node when some opted-in Service names it, its NAD exists and is
 * macvlan, ipvlan l2 or bridge with a parent, and the node has an address on it. Anything else is
 * a problem (a message for the log and a Warning Event) or an unservable NAD (Event and metric),
 * and the other networks are served regardless.
 */
import { NODE_ADDRESS_RANGE_ANNOTATION, NODE_ADDRESSES_ANNOTATION, PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from '../keys.js';
import { formatInputError } from '../result.js';
import { compareText } from '../order.js';
import { networkKey, parseServiceNetwork, type NetworkRef } from '../annotations/service-network.js';
import { parseNetworkConfig, NAD_CONFIG_KEY } from '../annotations/nad-config.js';
import { parseIp } from '../annotations/ip.js';
import type { NetworkAttachmentDefinition, V1EndpointSlice, V1Node, V1Service } from '../kube/types.js';
import { buildDesiredState } from '../dataplane/incremental.js';
import type { ServicePortTarget } from '../dataplane/model.js';
import { nodeAddressesFor } from './addresses.js';
import { hostInterfaceFor, type HostInterface } from './host-interface.js';
import type { NodeNetwork, NodePortTarget, NodeState } from './rules.js';

export interface NodeInput {
  readonly nodeName: string;
  readonly node: V1Node | undefined;
  readonly services: readonly V1Service[];
  readonly slices: readonly V1EndpointSlice[];
  readonly nads: readonly NetworkAttachmentDefinition[];
  readonly masqueradeMark: number;
}

/** A problem tied to the object it is about, so the runtime can put a Warning Event on it. */
export interface NodeProblem {
  readonly kind: 'NetworkAttachmentDefinition' | 'Node' | 'Service';
  readonly namespace?: string;
  readonly name: string;
  /** Event reason (CamelCase). */
  readonly reason: string;
  readonly message: string;
}

export interface UnservableNad {
  readonly network: string;
  readonly type: string;
  readonly reason: string;
}

/**
 * A Local NodePort Service's health on this node: how many ready endpoints it has here. Served at
 * `/services/<namespace>/<name>` on the agent's health port, and on `healthCheckNodePort` when the
 * Service has one (Kubernetes allocates it for LoadBalancer only, so a NodePort Service has one only
 * if it was set by hand).
 */
export interface HealthCheck {
  readonly service: string;
  readonly port?: number;
  readonly localEndpoints: number;
}

export interface NodePlan {
  readonly state: NodeState;
  readonly healthChecks: readonly HealthCheck[];
  readonly interfaces: readonly HostInterface[];
  readonly problems: readonly NodeProblem[];
  readonly unservable: readonly UnservableNad[];
}

const opted = (s: V1Service): boolean => s.metadata?.labels?.[PROXY_NAME_LABEL] === PROXY_NAME && s.metadata.annotations?.[SERVICE_NETWORK_ANNOTATION] !== undefined;


/** The networks opted-in Services name, sorted and unique (malformed annotations are the webhook's and the sidecar's to report). */
export function servedNetworks(services: readonly V1Service[]): NetworkRef[] {
  const out = new Map<string, NetworkRef>();
  for (const s of services) {
    if (!opted(s)) continue;
    const parsed = parseServiceNetwork(s.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] ?? '', s.metadata?.namespace ?? '');
    if (!parsed.ok) continue;
    for (const ref of parsed.value) out.set(networkKey(ref), ref);
  }
  return [...out.values()].sort((a, b) => compareText(networkKey(a), networkKey(b)));
}

function internalIPs(node: V1Node | undefined): string[] {
  return (node?.status?.addresses ?? []).filter((a) => a.type === 'InternalIP').map((a) => a.address);
}

export function planNode(input: NodeInput): NodePlan {
  const problems: NodeProblem[] = [];
  const unservable: UnservableNad[] = [];
  const interfaces: HostInterface[] = [];
  const networks: NodeNetwork[] = [];
  const nadByKey = new Map(input.nads.map((n) => [`${n.metadata?.namespace ?? ''}/${n.metadata?.name ?? ''}`, n]));
  const nodeAnnotation = input.node?.metadata?.annotations?.[NODE_ADDRESSES_ANNOTATION];
  for (const ref of servedNetworks(input.services)) {
    const key = networkKey(ref);
    const nad = nadByKey.get(key);
    if (nad === undefined) continue; // not created yet: the controller and webhook already say so
    const nadProblem = (reason: string, message: string): void => {
      problems.push({ kind: 'NetworkAttachmentDefinition', namespace: ref.namespace, name: ref.name, reason, message });
    };
    const config = parseNetworkConfig(nad.spec?.config);
    if (!config.ok) {
      nadProblem('InvalidNetworkConfig', `${formatInputError(`NetworkAttachmentDefinition ${key}`, config.error)} (the node agent serves nothing on this network until it is fixed)`);
      continue;
    }
    if (!config.value.servable) {
      unservable.push({ network: key, type: config.value.type, reason: config.value.reason });
      nadProblem('UnservableNetwork', `NetworkAttachmentDefinition ${key}: ${NAD_CONFIG_KEY} type "${config.value.type}": the node agent cannot serve NodePort or node access on it: ${config.value.reason}`);
      continue;
    }
    const addrs = nodeAddressesFor({
      network: ref,
      nodeInternalIPs: internalIPs(input.node),
      ...(nodeAnnotation !== undefined ? { nodeAnnotation } : {}),
      ...(nad.metadata?.annotations?.[NODE_ADDRESS_RANGE_ANNOTATION] !== undefined ? { rangeAnnotation: nad.metadata.annotations[NODE_ADDRESS_RANGE_ANNOTATION] } : {}),
    });
    if (!addrs.ok) {
      if (addrs.error.object === 'node') problems.push({ kind: 'Node', name: input.nodeName, reason: 'InvalidNodeAddresses', message: formatInputError(`Node ${input.nodeName}`, addrs.error.error) });
      else nadProblem('InvalidNodeAddressRange', formatInputError(`NetworkAttachmentDefinition ${key}`, addrs.error.error));
      continue;
    }
    if (addrs.value.addresses.length === 0) {
      nadProblem(
        'NoNodeAddress',
        `node ${input.nodeName} has no address on network ${key}: add "${key}=<ip>/<prefix>" to the Node annotation ${NODE_ADDRESSES_ANNOTATION}, or a range "<first>-<last>/<prefix>" to the NAD annotation ${NODE_ADDRESS_RANGE_ANNOTATION}`,
      );
      continue;
    }
    const iface = hostInterfaceFor(ref, config.value, addrs.value.addresses);
    interfaces.push(iface);
    const v4 = addrs.value.addresses.find((a) => a.family === 4)?.address;
    const v6 = addrs.value.addresses.find((a) => a.family === 6)?.address;
    networks.push({ network: ref, interface: iface.name, ...(v4 !== undefined ? { ipv4: v4 } : {}), ...(v6 !== undefined ? { ipv6: v6 } : {}) });
  }

  const podLike = networks.map((n) => ({ network: n.network, interface: n.interface, ipv4: n.ipv4 !== undefined ? [n.ipv4] : [], ipv6: n.ipv6 !== undefined ? [n.ipv6] : [] }));
  const { state } = buildDesiredState({ interfaces: podLike, services: input.services, slices: input.slices });
  const localIPs = localAddresses(input.slices, input.nodeName);
  const nodePorts = nodePortTargets(input.services, state.targets, localIPs);
  return {
    state: { clusterTargets: state.targets, nodePorts, networks, masqueradeMark: input.masqueradeMark },
    healthChecks: healthChecks(input.services, nodePorts),
    interfaces,
    problems,
    unservable,
  };
}

/** Addresses of endpoints the slices place on this node (`nodeName`), normalised. */
export function localAddresses(slices: readonly V1EndpointSlice[], nodeName: string): Set<string> {
  const out = new Set<string>();
  for (const s of slices) {
    for (const e of s.endpoints ?? []) {
      if (e.nodeName !== nodeName) continue;
      const ip = parseIp(e.addresses[0] ?? '');
      if (ip.ok) out.add(ip.value.address);
    }
  }
  return out;
}

/**
 * The NodePort frontends: every port of an opted-in NodePort Service that has a nodePort, on each
 * cluster-IP target the shared state builder made for it (one per family and network).
 */
export function nodePortTargets(services: readonly V1Service[], targets: readonly ServicePortTarget[], localIPs: ReadonlySet<string>): NodePortTarget[] {
  const bySvc = new Map<string, ServicePortTarget[]>();
  for (const t of targets) {
    const list = bySvc.get(t.service);
    if (list === undefined) bySvc.set(t.service, [t]);
    else list.push(t);
  }
  const out: NodePortTarget[] = [];
  for (const svc of services) {
    if (!opted(svc) || svc.spec?.type !== 'NodePort') continue;
    const name = `${svc.metadata?.namespace ?? ''}/${svc.metadata?.name ?? ''}`;
    const policy = svc.spec.externalTrafficPolicy === 'Local' ? 'Local' : 'Cluster';
    for (const p of svc.spec.ports ?? []) {
      if (p.nodePort === undefined) continue;
      for (const t of bySvc.get(name) ?? []) {
        if (t.portName !== (p.name ?? '') || t.protocol !== (p.protocol ?? 'TCP')) continue;
        out.push({ base: t, nodePort: p.nodePort, policy, localEndpoints: t.endpoints.filter((e) => localIPs.has(e.ip)) });
      }
    }
  }
  return out;
}

/**
 * kube-proxy's health check for `externalTrafficPolicy: Local`: an external load balancer asks
 * each node's healthCheckNodePort and sends traffic only to nodes that answer 200 (some ready
 * endpoint here). Counted over the node's served NodePort frontends of the Service.
 */
export function healthChecks(services: readonly V1Service[], nodePorts: readonly NodePortTarget[]): HealthCheck[] {
  const out: HealthCheck[] = [];
  for (const svc of services) {
    const port = svc.spec?.healthCheckNodePort;
    if (!opted(svc) || svc.spec?.type !== 'NodePort' || svc.spec.externalTrafficPolicy !== 'Local') continue;
    const name = `${svc.metadata?.namespace ?? ''}/${svc.metadata?.name ?? ''}`;
    const ips = new Set<string>();
    for (const t of nodePorts) if (t.base.service === name) for (const e of t.localEndpoints) if (e.ready) ips.add(e.ip);
    out.push({ service: name, ...(port !== undefined && port > 0 ? { port } : {}), localEndpoints: ips.size });
  }
  return out.sort((a, b) => compareText(a.service, b.service));
}
