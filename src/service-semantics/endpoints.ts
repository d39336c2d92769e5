/**
 * Which endpoints a client uses for one Service, as kube-proxy decides it (its endpoint
 * categorisation): pure, so the sidecar and the node agent apply exactly the same rules and the
 * rules are tested without a kernel.
 *
 * Facts this follows:
 * - Conditions as the EndpointSlice API defines them for consumers: `ready` and `serving` unset
 *   mean true, `terminating` unset means false.
 * - "Local" means the endpoint's `nodeName` is the client's node; a client that does not know its
 *   node has no local endpoints.
 * - Cluster endpoints: the ready ones, narrowed by topology hints when the hints allow it; when
 *   none is ready anywhere, the serving-and-terminating ones (topology plays no part then).
 * - Local endpoints (internalTrafficPolicy Local, or externalTrafficPolicy Local on an externally
 *   reachable Service): this node's ready ones, else this node's serving-and-terminating ones,
 *   else none. None means the traffic is dropped: there is no fall back to other nodes.
 * - Topology comes from the hints alone, never from the Service's fields: same-node hints are used
 *   when every ready endpoint has one and one names this node; otherwise same-zone hints when
 *   every ready endpoint has one and one names this zone; otherwise every ready endpoint.
 */
import type { V1Endpoint, V1Service } from '../kube/types.js';

export type TrafficPolicy = 'Cluster' | 'Local';

/** What kube-proxy's topology step chose: '' is no topology (every ready endpoint). */
export type TopologyMode = '' | 'PreferSameNode' | 'PreferSameZone';

/** The parts of a Service port that decide which endpoints are used. */
export interface TrafficSettings {
  readonly internalTrafficPolicy: TrafficPolicy;
  readonly externalTrafficPolicy: TrafficPolicy;
  /** A node port, a load-balancer ingress IP or an external IP: traffic can arrive from outside. */
  readonly externallyAccessible: boolean;
}

/** One endpoint as the rules see it; the caller's own type may carry more (it is passed through). */
export interface SemanticEndpoint {
  readonly address: string;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  readonly nodeName?: string | undefined;
  readonly zone?: string | undefined;
  readonly zoneHints: readonly string[];
  readonly nodeHints: readonly string[];
}

/** Where the client is: its node name and its node's zone ('' when unknown). */
export interface ClientPlace {
  readonly nodeName: string;
  readonly zone: string;
}

export interface CategorizeOptions {
  /**
   * Whether same-node hints are honoured (kube-proxy's PreferSameTrafficDistribution feature gate,
   * on by default since Kubernetes 1.34). Default true.
   */
  readonly preferSameNode?: boolean;
}

export interface Categorized<E extends SemanticEndpoint> {
  /** For traffic under policy Cluster; undefined when the Service never uses Cluster endpoints. */
  readonly cluster: readonly E[] | undefined;
  /** For traffic under policy Local; undefined when the Service never uses Local endpoints. */
  readonly local: readonly E[] | undefined;
  /** Every endpoint this client may reach (the union of the two, input order). */
  readonly allReachable: readonly E[];
  /** Whether any endpoint anywhere could serve (false: reject as kube-proxy does, not drop). */
  readonly hasAnyEndpoints: boolean;
  readonly topology: TopologyMode;
}

/** internalTrafficPolicy Cluster, or reachable from outside (where Cluster endpoints serve short-circuited or Cluster external traffic). */
export function usesClusterEndpoints(t: TrafficSettings): boolean {
  return t.internalTrafficPolicy !== 'Local' || t.externallyAccessible;
}

export function usesLocalEndpoints(t: TrafficSettings): boolean {
  return t.internalTrafficPolicy === 'Local' || (t.externalTrafficPolicy === 'Local' && t.externallyAccessible);
}

function isLocal(ep: SemanticEndpoint, client: ClientPlace): boolean {
  return client.nodeName !== '' && ep.nodeName === client.nodeName;
}

function servingTerminating(ep: SemanticEndpoint): boolean {
  return ep.serving && ep.terminating;
}

/** The topology kube-proxy would use for this client, from the ready endpoints' hints. */
export function topologyModeFromHints(endpoints: readonly SemanticEndpoint[], client: ClientPlace, opts: CategorizeOptions = {}): TopologyMode {
  let anyReady = false;
  let allNodeHints = true;
  let forNode = false;
  let allZoneHints = true;
  let forZone = false;
  for (const ep of endpoints) {
    if (!ep.ready) continue;
    anyReady = true;
    if (ep.nodeHints.length === 0) allNodeHints = false;
    else if (ep.nodeHints.includes(client.nodeName)) forNode = true;
    if (ep.zoneHints.length === 0) allZoneHints = false;
    else if (ep.zoneHints.includes(client.zone)) forZone = true;
  }
  if (!anyReady) return '';
  if ((opts.preferSameNode ?? true) && allNodeHints && forNode) return 'PreferSameNode';
  if (allZoneHints && forZone) return 'PreferSameZone';
  return '';
}

function availableForTopology(ep: SemanticEndpoint, mode: TopologyMode, client: ClientPlace): boolean {
  if (mode === 'PreferSameNode') return ep.nodeHints.includes(client.nodeName);
  if (mode === 'PreferSameZone') return ep.zoneHints.includes(client.zone);
  return true;
}

/** kube-proxy's endpoint categorisation for one Service port and one client. */
export function categorizeEndpoints<E extends SemanticEndpoint>(endpoints: readonly E[], traffic: TrafficSettings, client: ClientPlace, opts: CategorizeOptions = {}): Categorized<E> {
  const useCluster = usesClusterEndpoints(traffic);
  const useLocal = usesLocalEndpoints(traffic);
  if (endpoints.length === 0) {
    return { cluster: useCluster ? [] : undefined, local: useLocal ? [] : undefined, allReachable: [], hasAnyEndpoints: false, topology: '' };
  }
  let topology: TopologyMode = '';
  let cluster: E[] | undefined;
  let hasAny = false;
  if (useCluster) {
    topology = topologyModeFromHints(endpoints, client, opts);
    cluster = endpoints.filter((ep) => ep.ready && availableForTopology(ep, topology, client));
    // Topology already fell back to every endpoint when it had none to offer here, so an empty
    // list means nothing is ready anywhere: terminating endpoints that still serve stand in.
    if (cluster.length === 0) cluster = endpoints.filter(servingTerminating);
    hasAny = cluster.length > 0;
  }
  if (!useLocal) return { cluster, local: undefined, allReachable: cluster ?? [], hasAnyEndpoints: hasAny, topology };

  let localReady = false;
  let localTerminating = false;
  for (const ep of endpoints) {
    if (ep.ready) {
      hasAny = true;
      if (isLocal(ep, client)) localReady = true;
    } else if (servingTerminating(ep)) {
      hasAny = true;
      if (isLocal(ep, client)) localTerminating = true;
    }
  }
  let local: E[] = [];
  if (localReady) local = endpoints.filter((ep) => isLocal(ep, client) && ep.ready);
  else if (localTerminating) local = endpoints.filter((ep) => isLocal(ep, client) && servingTerminating(ep));

  if (cluster === undefined) return { cluster: undefined, local, allReachable: local, hasAnyEndpoints: hasAny, topology };
  const inUnion = new Set<E>([...cluster, ...local]);
  return { cluster, local, allReachable: endpoints.filter((ep) => inUnion.has(ep)), hasAnyEndpoints: hasAny, topology };
}

/** Which of the two lists a given kind of traffic uses. */
export function endpointsFor<E extends SemanticEndpoint>(c: Categorized<E>, traffic: TrafficSettings, kind: 'internal' | 'external'): readonly E[] {
  const policy = kind === 'internal' ? traffic.internalTrafficPolicy : traffic.externalTrafficPolicy;
  return (policy === 'Local' ? c.local : c.cluster) ?? [];
}

// ---------------------------------------------------------------------------------------------
// From API objects.

function policy(v: string | undefined): TrafficPolicy {
  return v === 'Local' ? 'Local' : 'Cluster';
}

/**
 * A Service's traffic settings. externalTrafficPolicy counts only where it can apply (NodePort,
 * LoadBalancer, external IPs), as the API validates it; anything but `Local` means Cluster.
 */
export function trafficSettings(svc: V1Service): TrafficSettings {
  const spec = svc.spec ?? {};
  const nodePort = (spec.ports ?? []).some((p) => (p.nodePort ?? 0) !== 0);
  const lbIngress = (svc.status?.loadBalancer?.ingress ?? []).some((i) => (i.ip ?? '') !== '');
  const externalIPs = (spec.externalIPs ?? []).length > 0;
  const externallyAccessible = nodePort || lbIngress || externalIPs || spec.type === 'NodePort' || spec.type === 'LoadBalancer';
  return {
    internalTrafficPolicy: policy(spec.internalTrafficPolicy),
    externalTrafficPolicy: externallyAccessible ? policy(spec.externalTrafficPolicy) : 'Cluster',
    externallyAccessible,
  };
}

/** An EndpointSlice endpoint read as a consumer must (unset conditions defaulted); undefined when it has no address. */
export function semanticEndpoint(e: V1Endpoint): SemanticEndpoint | undefined {
  const address = e.addresses[0];
  if (address === undefined || address === '') return undefined;
  const c = e.conditions ?? {};
  return {
    address,
    ready: c.ready ?? true,
    serving: c.serving ?? true,
    terminating: c.terminating ?? false,
    nodeName: e.nodeName ?? undefined,
    zone: e.zone ?? undefined,
    zoneHints: (e.hints?.forZones ?? []).map((z) => z.name),
    nodeHints: (e.hints?.forNodes ?? []).map((n) => n.name),
  };
}
