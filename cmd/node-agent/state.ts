/**
 * Pure: from the opted-in Services, their EndpointSlices, the NetworkAttachmentDefinitions and this
 * node's Node object to what the node should have: its own interface and address on each network
 * it can serve (host-interface.ts, addresses.ts), and the NodeState the renderer turns into rules
 * (rules.ts). The cluster-IP targets come from the sidecar's own state builder (StateMemo), with
 * the node's interfaces in the pod's place, so endpoint choice and dual-network rules are the same
 * code. The runtime keeps a NodePlanner, which redoes only what changed; planNode is its
 * from-scratch form.
 *
 * A network is served on this node when some opted-in Service names it, its NAD exists and is
 * macvlan, ipvlan l2 or bridge, and the admin's Node annotations give the node an address and a
 * parent on it (parents.ts; the NAD's master only under --parent-from-nad). Anything else is
 * a problem (a message for the log and a Warning Event) or an unservable NAD (Event and metric),
 * and the other networks are served regardless. Services over budget, on a network not shared with
 * them, or past their namespace's share of a network are left out first (admission.ts).
 */
import { NODE_ADDRESS_RANGE_ANNOTATION, NODE_ADDRESSES_ANNOTATION, NODE_PARENTS_ANNOTATION, PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { formatInputError } from '../../src/result.js';
import { compareText } from '../../src/order.js';
import { networkKey, parseServiceNetwork, type NetworkRef } from '../../src/annotations/service-network.js';
import { parseNetworkConfig, NAD_CONFIG_KEY } from '../../src/annotations/nad-config.js';
import { parseIp } from '../../src/annotations/ip.js';
import type { NetworkAttachmentDefinition, V1EndpointSlice, V1Node, V1Service } from '../../src/kube/types.js';
import { StateMemo, type ServicePortTarget } from '../../src/dataplane/index.js';
import { EXTERNAL_IPS_NOT_CONFIGURED, externalIPAllowed, type ExternalIPPolicy } from '../../src/external-ips.js';
import { nodeAddressesFor } from './addresses.js';
import { chooseParent, parentNotConfiguredMessage, parentOverriddenMessage, parseNodeParents } from './parents.js';
import { hostInterfaceFor, type HostInterface } from './host-interface.js';
import { asPodInterfaces, type ExternalIPTarget, type LoadBalancerTarget, type NodeNetwork, type NodePortTarget, type NodeState } from './rules.js';
import { rangesOfFamily, readLoadBalancer } from '../../src/annotations/load-balancer.js';
import { ServiceCap } from '../../src/service-cap.js';
import { DEFAULT_MAX_SERVICES_PER_NETWORK, ZONE_LABEL } from '../../src/sidecar-contract.js';
import { admitServices, type ServiceRefusal } from './admission.js';
import { refusalOf } from './slim.js';
import type { ClientPlace } from '../../src/service-semantics/endpoints.js';

export interface NodeInput {
  readonly nodeName: string;
  readonly node: V1Node | undefined;
  readonly services: readonly V1Service[];
  readonly slices: readonly V1EndpointSlice[];
  readonly nads: readonly NetworkAttachmentDefinition[];
  readonly masqueradeMark: number;
  /** `--parent-from-nad` (upgrades): where the Node names no parent, use the NAD's. Default off. */
  readonly parentFromNad?: boolean;
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
  /** Networks whose NAD the agent can serve, with its CNI type: the unservable gauge's zeros. */
  readonly servable: readonly { readonly network: string; readonly type: string }[];
  /** Networks not served because the admin named no parent for them (`ns/nad`), for the metric. */
  readonly parentNotConfigured: readonly string[];
  /** Services left out before planning (admission.ts), also among `problems`; for the metric. */
  readonly refused: readonly ServiceRefusal[];
}

const opted = (s: V1Service): boolean => s.metadata?.labels?.[PROXY_NAME_LABEL] === PROXY_NAME && s.metadata.annotations?.[SERVICE_NETWORK_ANNOTATION] !== undefined;

/** The networks one opted-in Service names (none when not opted in or malformed: the webhook's and the sidecar's to report). */
function serviceNetworks(s: V1Service): readonly NetworkRef[] {
  if (!opted(s)) return [];
  const parsed = parseServiceNetwork(s.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] ?? '', s.metadata?.namespace ?? '');
  return parsed.ok ? parsed.value : [];
}

/** The networks opted-in Services name, sorted and unique. */
export function servedNetworks(services: readonly V1Service[], networksOf: (s: V1Service) => readonly NetworkRef[] = serviceNetworks): NetworkRef[] {
  const out = new Map<string, NetworkRef>();
  for (const s of services) for (const ref of networksOf(s)) out.set(networkKey(ref), ref);
  return [...out.values()].sort((a, b) => compareText(networkKey(a), networkKey(b)));
}

function internalIPs(node: V1Node | undefined): string[] {
  return (node?.status?.addresses ?? []).filter((a) => a.type === 'InternalIP').map((a) => a.address);
}

type NetworkPlan = Pick<NodePlan, 'interfaces' | 'problems' | 'unservable' | 'servable' | 'parentNotConfigured'> & { readonly networks: readonly NodeNetwork[] };

/** The node's side of each served network: its interface and addresses, or why it is not served. A handful of NADs: redone every sync. */
function planNetworks(refs: readonly NetworkRef[], input: NodeInput): NetworkPlan {
  const problems: NodeProblem[] = [];
  const unservable: UnservableNad[] = [];
  const servable: { network: string; type: string }[] = [];
  const interfaces: HostInterface[] = [];
  const networks: NodeNetwork[] = [];
  const parentNotConfigured: string[] = [];
  const nadByKey = new Map(input.nads.map((n) => [`${n.metadata?.namespace ?? ''}/${n.metadata?.name ?? ''}`, n]));
  const nodeAnnotation = input.node?.metadata?.annotations?.[NODE_ADDRESSES_ANNOTATION];
  const nodeProblem = (reason: string, message: string): void => {
    problems.push({ kind: 'Node', name: input.nodeName, reason, message });
  };
  // The parents are the admin's (a Node annotation); a malformed one serves no network here (fail closed).
  const parents = parseNodeParents(input.node?.metadata?.annotations?.[NODE_PARENTS_ANNOTATION] ?? '');
  if (!parents.ok && refs.length > 0) nodeProblem('InvalidNodeParents', formatInputError(`Node ${input.nodeName}`, parents.error));
  for (const ref of refs) {
    const key = networkKey(ref);
    const nad = nadByKey.get(key);
    if (nad === undefined) continue; // not created yet: the controller and webhook already say so
    const nadProblem = (reason: string, message: string): void => {
      problems.push({ kind: 'NetworkAttachmentDefinition', namespace: ref.namespace, name: ref.name, reason, message });
    };
    const overBudget = refusalOf(nad);
    if (overBudget !== undefined) {
      nadProblem('NadOverBudget', overBudget.message);
      continue;
    }
    const config = parseNetworkConfig(nad.spec?.config);
    if (!config.ok) {
      nadProblem('InvalidNetworkConfig', `${formatInputError(`NetworkAttachmentDefinition ${key}`, config.error)} (the node agent serves nothing on this network until it is fixed)`);
      continue;
    }
    if (!config.value.servable) {
      unservable.push({ network: key, type: config.value.type, reason: config.value.reason });
      nadProblem(
        'UnservableNetwork',
        `NetworkAttachmentDefinition ${key}: ${NAD_CONFIG_KEY} type "${config.value.type}": the node agent cannot serve NodePort or node access on it: ${config.value.reason}`,
      );
      continue;
    }
    servable.push({ network: key, type: config.value.plugin });
    // The node's address on a network is the admin's (a Node annotation). A NAD is its owner's, a
    // tenant's: its range annotation once put any address and prefix on the host.
    if (nad.metadata?.annotations?.[NODE_ADDRESS_RANGE_ANNOTATION] !== undefined) {
      nadProblem(
        'NodeAddressRangeIgnored',
        `NetworkAttachmentDefinition ${key}: the annotation ${NODE_ADDRESS_RANGE_ANNOTATION} is ignored: a NAD's owner may not choose addresses on the nodes. The cluster admin gives each node its address with the Node annotation ${NODE_ADDRESSES_ANNOTATION} ("${key}=<ip>/<prefix>")`,
      );
    }
    const addrs = nodeAddressesFor({
      network: ref,
      nodeInternalIPs: internalIPs(input.node),
      ...(nodeAnnotation !== undefined ? { nodeAnnotation } : {}),
    });
    if (!addrs.ok) {
      if (addrs.error.object === 'node') nodeProblem('InvalidNodeAddresses', formatInputError(`Node ${input.nodeName}`, addrs.error.error));
      else nadProblem('InvalidNodeAddressRange', formatInputError(`NetworkAttachmentDefinition ${key}`, addrs.error.error));
      continue;
    }
    if (addrs.value.addresses.length === 0) {
      nadProblem('NoNodeAddress', `node ${input.nodeName} has no address on network ${key}: the cluster admin adds "${key}=<ip>/<prefix>" to the Node annotation ${NODE_ADDRESSES_ANNOTATION}`);
      continue;
    }
    if (!parents.ok) continue;
    const parent = chooseParent(key, parents.value, config.value.parent, input.parentFromNad === true);
    if (parent.from === 'none') {
      parentNotConfigured.push(key);
      nodeProblem('ParentNotConfigured', parentNotConfiguredMessage(input.nodeName, key, config.value.parent, parents.value));
      continue;
    }
    if (parent.parent !== config.value.parent) nodeProblem('ParentOverridden', parentOverriddenMessage(input.nodeName, key, config.value.parent, parent.parent));
    const iface = hostInterfaceFor(ref, { ...config.value, parent: parent.parent }, addrs.value.addresses);
    interfaces.push(iface);
    const v4 = addrs.value.addresses.find((a) => a.family === 4)?.address;
    const v6 = addrs.value.addresses.find((a) => a.family === 6)?.address;
    networks.push({ network: ref, interface: iface.name, ...(v4 !== undefined ? { ipv4: v4 } : {}), ...(v6 !== undefined ? { ipv6: v6 } : {}) });
  }
  return { interfaces, networks, problems, unservable, servable, parentNotConfigured };
}

/** What one NodePort or LoadBalancer Service object contributes, and what it was computed from. */
interface NodePortEntry {
  readonly targets: readonly ServicePortTarget[];
  readonly local: ReadonlySet<string> | undefined;
  /** The node's own addresses the ingress IPs were checked against. */
  readonly own: string;
  readonly nodePorts: readonly NodePortTarget[];
  readonly loadBalancers: readonly LoadBalancerTarget[];
  readonly externalIPs: readonly ExternalIPTarget[];
  readonly problems: readonly NodeProblem[];
  readonly health: HealthCheck | undefined;
}

/** How one slice counts for NodePort Local: its Service (`<namespace>/<name>`) and its endpoints on this node. */
interface SliceLocal {
  readonly group: string | undefined;
  readonly local: readonly string[];
}

const NONE: readonly ServicePortTarget[] = [];

const sameItems = <T>(a: readonly T[], b: readonly T[]): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * planNode with memory, the node's StateMemo: `update(input)` returns what `planNode(input)`
 * would (test/unit/node-agent/incremental.test.ts holds it to that after random event sequences)
 * but redoes only the Services whose objects or slices changed. Inputs are compared by identity
 * (the informers replace an object on every change and never mutate one). The cluster-IP targets
 * are the sidecar's StateMemo; a changed network plan (Node, NADs, the set of named networks)
 * reaches it as changed interfaces, which redoes every Service; NodePorts and Local health are
 * per Service object, redone when the object, its targets or its slices' local endpoints change.
 * Outputs equal to last time's are last time's objects, so NodeRenderCache sees "unchanged" by `===`.
 */
export class NodePlanner {
  private readonly clusterState: StateMemo;
  private nodeName: string | undefined;
  /** Each Service object's networks as its annotation names them, parsed once per object. */
  private parsed = new WeakMap<V1Service, readonly NetworkRef[]>();
  private slices = new Map<V1EndpointSlice, SliceLocal>();
  private localByGroup = new Map<string, ReadonlySet<string>>();
  private entries = new Map<V1Service, NodePortEntry>();
  private networks: { readonly text: string; readonly value: readonly NodeNetwork[] } | undefined;
  private nodePorts: readonly NodePortTarget[] = [];
  private loadBalancers: readonly LoadBalancerTarget[] = [];
  private externalIPTargets: readonly ExternalIPTarget[] = [];
  private readonly cap: ServiceCap;

  /**
   * `maxTargetsPerNetwork`: the sidecars' budget per network, shared between namespaces (admission.ts).
   * `externalIPs`: the admin's CIDRs for spec.externalIPs (src/external-ips.ts); not configured: none is served.
   */
  constructor(
    maxTargetsPerNetwork = DEFAULT_MAX_SERVICES_PER_NETWORK,
    private readonly externalIPs: ExternalIPPolicy = EXTERNAL_IPS_NOT_CONFIGURED,
  ) {
    this.cap = new ServiceCap(maxTargetsPerNetwork);
    this.clusterState = new StateMemo(externalIPs);
  }

  update(full: NodeInput): NodePlan {
    const parsed = (s: V1Service): readonly NetworkRef[] => {
      let refs = this.parsed.get(s);
      if (refs === undefined) {
        refs = serviceNetworks(s);
        this.parsed.set(s, refs);
      }
      return refs;
    };
    const admission = admitServices(full.services, full.slices, full.nads, parsed, this.cap);
    const input: NodeInput = { ...full, services: admission.services, slices: admission.slices };
    if (input.nodeName !== this.nodeName) {
      // Which endpoints are local depends on it: forget everything.
      this.nodeName = input.nodeName;
      this.slices = new Map();
      this.localByGroup = new Map();
      this.entries = new Map();
    }
    // The networks each admitted Service may use (admission.ts: shared ones only).
    const refs = servedNetworks(input.services, (s) => admission.networksOf.get(s) ?? []);
    const plan = planNetworks(refs, input);
    const text = JSON.stringify(plan.networks);
    if (this.networks?.text !== text) this.networks = { text, value: plan.networks };
    const networks = this.networks.value;

    const own = ownAddresses(input.node, networks);
    const ownText = [...own].sort(compareText).join(',');
    const { state } = this.clusterState.update({ interfaces: asPodInterfaces(networks), services: input.services, slices: input.slices, place: nodePlace(input) });
    this.updateLocal(input.slices, input.nodeName);
    // Only cluster-IP targets are bases of frontends; ingress-IP and external-IP targets are the
    // node's own access to those addresses (nat OUTPUT), never on an address of the node's own.
    const bySvc = new Map<string, ServicePortTarget[]>();
    let hijack = false;
    for (const t of state.targets) {
      if (t.ingress === true || t.externalIP === true) {
        if (own.has(t.clusterIP)) hijack = true;
        continue;
      }
      const list = bySvc.get(t.service);
      if (list === undefined) bySvc.set(t.service, [t]);
      else list.push(t);
    }
    const clusterTargets = hijack ? state.targets.filter((t) => (t.ingress !== true && t.externalIP !== true) || !own.has(t.clusterIP)) : state.targets;
    const entries = new Map<V1Service, NodePortEntry>();
    const nodePorts: NodePortTarget[] = [];
    const loadBalancers: LoadBalancerTarget[] = [];
    const externalIPs: ExternalIPTarget[] = [];
    const health: HealthCheck[] = [];
    const problems: NodeProblem[] = [...admission.refused, ...plan.problems];
    for (const svc of input.services) {
      const type = svc.spec?.type;
      if (!opted(svc) || (type !== 'NodePort' && type !== 'LoadBalancer' && (svc.spec?.externalIPs ?? []).length === 0)) continue;
      const name = serviceName(svc);
      const targets = bySvc.get(name) ?? NONE;
      const entry = this.entryFor(svc, targets, this.localByGroup.get(name), own, ownText, entries.get(svc));
      entries.set(svc, entry);
      nodePorts.push(...entry.nodePorts);
      loadBalancers.push(...entry.loadBalancers);
      externalIPs.push(...entry.externalIPs);
      problems.push(...entry.problems);
      if (entry.health !== undefined) health.push(entry.health);
    }
    this.entries = entries;
    if (!sameItems(nodePorts, this.nodePorts)) this.nodePorts = nodePorts;
    if (!sameItems(loadBalancers, this.loadBalancers)) this.loadBalancers = loadBalancers;
    if (!sameItems(externalIPs, this.externalIPTargets)) this.externalIPTargets = externalIPs;
    return {
      state: { clusterTargets, nodePorts: this.nodePorts, loadBalancers: this.loadBalancers, externalIPs: this.externalIPTargets, networks, masqueradeMark: input.masqueradeMark },
      healthChecks: health.sort((a, b) => compareText(a.service, b.service)),
      interfaces: plan.interfaces,
      problems,
      unservable: plan.unservable,
      servable: plan.servable,
      parentNotConfigured: plan.parentNotConfigured,
      refused: admission.refused,
    };
  }

  /** A NodePort or LoadBalancer Service's frontends: the last entry kept while its targets, local endpoints and the node's addresses are the same. */
  private entryFor(
    svc: V1Service,
    targets: readonly ServicePortTarget[],
    local: ReadonlySet<string> | undefined,
    own: ReadonlySet<string>,
    ownText: string,
    earlier: NodePortEntry | undefined,
  ): NodePortEntry {
    let entry = this.entries.get(svc) ?? earlier;
    if (entry === undefined || entry.local !== local || entry.own !== ownText || !sameItems(entry.targets, targets)) {
      const localIPs = local ?? new Set();
      const made = serviceNodePorts(svc, targets, localIPs);
      const lb = serviceLoadBalancers(svc, targets, localIPs, own);
      const ext = serviceExternalIPs(svc, targets, localIPs, own, this.externalIPs);
      entry = {
        targets,
        local,
        own: ownText,
        nodePorts: entry !== undefined && JSON.stringify(entry.nodePorts) === JSON.stringify(made) ? entry.nodePorts : made,
        loadBalancers: entry !== undefined && JSON.stringify(entry.loadBalancers) === JSON.stringify(lb.targets) ? entry.loadBalancers : lb.targets,
        externalIPs: entry !== undefined && JSON.stringify(entry.externalIPs) === JSON.stringify(ext) ? entry.externalIPs : ext,
        problems: lb.problems,
        health: healthCheck(svc, targets, localIPs),
      };
    }
    return entry;
  }

  /** Brings localByGroup to the slices: only the Services whose slices were added, replaced or removed are redone. */
  private updateLocal(input: readonly V1EndpointSlice[], nodeName: string): void {
    const dirty = new Set<string>();
    const slices = new Map<V1EndpointSlice, SliceLocal>();
    for (const s of input) {
      let info = this.slices.get(s);
      if (info === undefined) {
        info = sliceLocal(s, nodeName);
        if (info.group !== undefined) dirty.add(info.group);
      }
      slices.set(s, info);
    }
    for (const [s, info] of this.slices) if (info.group !== undefined && !slices.has(s)) dirty.add(info.group);
    this.slices = slices;
    if (dirty.size === 0) return;
    const local = new Map<string, Set<string>>();
    for (const group of dirty) local.set(group, new Set());
    for (const info of slices.values()) if (info.group !== undefined) for (const ip of info.local) local.get(info.group)?.add(ip);
    for (const [group, ips] of local) {
      const had = this.localByGroup.get(group);
      if (ips.size === 0) this.localByGroup.delete(group);
      else if (had === undefined || had.size !== ips.size || [...ips].some((ip) => !had.has(ip))) this.localByGroup.set(group, ips);
    }
  }
}

export function planNode(input: NodeInput, maxTargetsPerNetwork?: number): NodePlan {
  return new NodePlanner(maxTargetsPerNetwork).update(input);
}

const serviceName = (svc: V1Service): string => `${svc.metadata?.namespace ?? ''}/${svc.metadata?.name ?? ''}`;

/** The node's own place (its name, its Node's zone label): its cluster-IP path is internal traffic (internalTrafficPolicy Local, hints). */
function nodePlace(input: NodeInput): ClientPlace {
  return { nodeName: input.nodeName, zone: input.node?.metadata?.labels?.[ZONE_LABEL] ?? '' };
}

/** The slice's Service and the addresses of its endpoints on this node (`nodeName`), normalised. */
function sliceLocal(slice: V1EndpointSlice, nodeName: string): SliceLocal {
  const svc = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
  const local: string[] = [];
  for (const e of slice.endpoints ?? []) {
    if (e.nodeName !== nodeName) continue;
    const ip = parseIp(e.addresses[0] ?? '');
    if (ip.ok) local.push(ip.value.address);
  }
  return { group: svc === undefined ? undefined : `${slice.metadata?.namespace ?? ''}/${svc}`, local };
}

/**
 * One NodePort Service's frontends: every port that has a nodePort, on each cluster-IP target the
 * shared state builder made for it (one per family and network). Local endpoints are those the
 * Service's own slices place on this node.
 */
function serviceNodePorts(svc: V1Service, targets: readonly ServicePortTarget[], localIPs: ReadonlySet<string>): NodePortTarget[] {
  const policy = svc.spec?.externalTrafficPolicy === 'Local' ? 'Local' : 'Cluster';
  const out: NodePortTarget[] = [];
  for (const p of svc.spec?.ports ?? []) {
    if (p.nodePort === undefined) continue;
    for (const t of targets) {
      if (t.portName !== (p.name ?? '') || t.protocol !== (p.protocol ?? 'TCP')) continue;
      out.push({ base: t, nodePort: p.nodePort, policy, localEndpoints: t.endpoints.filter((e) => localIPs.has(e.ip)) });
    }
  }
  return out;
}

/**
 * One LoadBalancer Service's ingress-IP frontends: every port, on each cluster-IP target of the
 * ingress IP's family (one per family and network), for each ingress IP with ipMode VIP (Proxy:
 * the load balancer forwards to the nodes itself, so the address is left alone, as kube-proxy
 * does). A node port is served beside it unless allocateLoadBalancerNodePorts is false (then the
 * ports have no nodePort). Bad ingress IPs and source ranges are Warning Events on the Service.
 */
function serviceLoadBalancers(
  svc: V1Service,
  targets: readonly ServicePortTarget[],
  localIPs: ReadonlySet<string>,
  own: ReadonlySet<string>,
): { targets: LoadBalancerTarget[]; problems: NodeProblem[] } {
  if (svc.spec?.type !== 'LoadBalancer') return { targets: [], problems: [] };
  const view = readLoadBalancer(svc, own);
  const ns = svc.metadata?.namespace ?? '';
  const name = svc.metadata?.name ?? '';
  const problems = view.problems.map((e): NodeProblem => ({ kind: 'Service', namespace: ns, name, reason: 'LoadBalancerInputRefused', message: formatInputError(`Service ${ns}/${name}`, e) }));
  const policy = svc.spec.externalTrafficPolicy === 'Local' ? 'Local' : 'Cluster';
  const out: LoadBalancerTarget[] = [];
  for (const vip of view.vips) {
    const sourceRanges = rangesOfFamily(view, vip.family);
    for (const t of targets) {
      if (t.family !== vip.family) continue;
      out.push({ base: t, ingressIP: vip.address, policy, localEndpoints: t.endpoints.filter((e) => localIPs.has(e.ip)), ...(sourceRanges !== undefined ? { sourceRanges } : {}) });
    }
  }
  return { targets: out, problems };
}

/**
 * One Service's external-IP frontends: every port, on each cluster-IP target of the address's
 * family, for each of its spec.externalIPs inside the admin's CIDRs (re-checked here: a Service
 * also arrives without the webhook) and not an address of the node's own.
 */
function serviceExternalIPs(svc: V1Service, targets: readonly ServicePortTarget[], localIPs: ReadonlySet<string>, own: ReadonlySet<string>, policy: ExternalIPPolicy): ExternalIPTarget[] {
  if (!policy.configured) return [];
  const ext = svc.spec?.externalTrafficPolicy === 'Local' ? 'Local' : 'Cluster';
  const out: ExternalIPTarget[] = [];
  const seen = new Set<string>();
  for (const text of svc.spec?.externalIPs ?? []) {
    const p = parseIp(text.trim());
    if (!p.ok || p.value.prefix !== undefined || seen.has(p.value.address) || own.has(p.value.address) || !externalIPAllowed(policy, p.value.address)) continue;
    seen.add(p.value.address);
    for (const t of targets) {
      if (t.family !== p.value.family) continue;
      out.push({ base: t, address: p.value.address, policy: ext, localEndpoints: t.endpoints.filter((e) => localIPs.has(e.ip)) });
    }
  }
  return out;
}

/** Every address the node holds: its Node status addresses and its own addresses on the served networks. */
function ownAddresses(node: V1Node | undefined, networks: readonly NodeNetwork[]): Set<string> {
  const out = new Set<string>();
  const add = (text: string | undefined): void => {
    const p = parseIp(text ?? '');
    if (p.ok) out.add(p.value.address);
  };
  for (const a of node?.status?.addresses ?? []) add(a.address);
  for (const n of networks) {
    add(n.ipv4);
    add(n.ipv6);
  }
  return out;
}

/**
 * kube-proxy's health check for `externalTrafficPolicy: Local`: an external load balancer asks
 * each node's healthCheckNodePort and sends traffic only to nodes that answer 200 (some ready
 * endpoint here). Counted over the Service's cluster-IP targets on this node (the endpoints its
 * node ports and ingress IPs send to), so it holds without node ports too.
 */
function healthCheck(svc: V1Service, targets: readonly ServicePortTarget[], localIPs: ReadonlySet<string>): HealthCheck | undefined {
  if (svc.spec?.externalTrafficPolicy !== 'Local') return undefined;
  const port = svc.spec.healthCheckNodePort;
  const ips = new Set<string>();
  for (const t of targets) for (const e of t.endpoints) if (e.ready && localIPs.has(e.ip)) ips.add(e.ip);
  return { service: serviceName(svc), ...(port !== undefined && port > 0 ? { port } : {}), localEndpoints: ips.size };
}
