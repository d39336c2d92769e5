/**
 * The Service cases the sidecar's rules must get right, one row each: a desired state for the
 * client pod, and probes from it with what must happen. The same rows run on the packet tracer
 * (test/unit/tracer/service-cases.test.ts, no root) and on the kernel in network namespaces
 * (test/sidecar/tracer-agreement.test.ts), which asserts the two agree. A new case is a new row.
 *
 * Addresses are those test/harness/netns.ts gives a topology whose first pod is the client and
 * the next three the backends b1..b3 (HTTP on :8080, UDP echo on :5353, on their net1 addresses).
 * Rows run in order on one namespace, so each sync after the first is a partial change.
 */
import { CLIENT_BLUE, RED, ep, target } from '../../sidecar/render-fixtures.js';
import { serviceObject, sliceObject } from '../../sidecar/state-fixtures.js';
import { buildDesiredState, parseExternalIPPolicy, type DesiredState, type ServicePortTarget } from './sidecar.js';
import { summarize, type Family, type L4, type Outcome, type Packet, type RejectKind } from './walk.js';

export const HTTP_PORT = 8080;
export const UDP_PORT = 5353;
export const CLIENT = { ipv4: '192.168.101.2', ipv6: 'fd00:101::2' } as const;
export type PodName = 'b1' | 'b2' | 'b3';
export const BACKENDS: Readonly<Record<PodName, { readonly ipv4: string; readonly ipv6: string }>> = {
  b1: { ipv4: '192.168.101.3', ipv6: 'fd00:101::3' },
  b2: { ipv4: '192.168.101.4', ipv6: 'fd00:101::4' },
  b3: { ipv4: '192.168.101.5', ipv6: 'fd00:101::5' },
};
const ALL: readonly PodName[] = ['b1', 'b2', 'b3'];

/** What must happen to a new connection. */
export type Expect =
  /** DNAT to one of these backends (their server port), in equal shares. */
  | { readonly reach: readonly PodName[] }
  /** sessionAffinity: the first connection to any of these, every later one of the client to the same. */
  | { readonly sticky: readonly PodName[] }
  /** Refused at once, answered this way. */
  | { readonly refused: RejectKind }
  /** Not ours: the packet leaves unchanged, and nobody in the topology owns its address. */
  | { readonly unanswered: true }
  /** Dropped by our rules (kube-proxy's drop: endpoints exist, none for this client). */
  | { readonly dropped: true };

export interface Probe {
  readonly protocol: L4;
  readonly dst: string;
  readonly port: number;
  readonly expect: Expect;
}

export interface ServiceCase {
  readonly name: string;
  /** The netns test (file: test name) that checks the same behaviour, or why the case is here. */
  readonly source: string;
  readonly state: () => DesiredState;
  readonly probes: readonly Probe[];
}

const WEB_V4 = '10.96.0.10';
const WEB_V6 = 'fd00:10:96::a';
const DNS_V4 = '10.96.0.53';
const LB_V4 = '192.168.101.240';
const LB_V6 = 'fd00:101::f0';

type EpState = 'ready' | 'unready' | 'terminating';
const eps = (family: Family, port: number, pods: readonly PodName[], state: (p: PodName) => EpState = () => 'ready') =>
  pods.map((p) => ep(family === 4 ? BACKENDS[p].ipv4 : BACKENDS[p].ipv6, port, state(p)));
const web = (pods: readonly PodName[], extra: Partial<ServicePortTarget> = {}, state?: (p: PodName) => EpState): ServicePortTarget =>
  target('demo/web', WEB_V4, 80, eps(4, HTTP_PORT, pods, state), { portName: 'http', ...extra });
const dns = (pods: readonly PodName[]): ServicePortTarget => target('demo/dns', DNS_V4, 53, eps(4, UDP_PORT, pods), { protocol: 'UDP', portName: 'dns' });
const client = (targets: readonly ServicePortTarget[]): DesiredState => ({ interfaces: [CLIENT_BLUE], targets });
const http = (dst: string, expect: Expect, port = 80): Probe => ({ protocol: 'tcp', dst, port, expect });
const udp = (dst: string, expect: Expect, port = 53): Probe => ({ protocol: 'udp', dst, port, expect });

/**
 * Where the client is for the traffic-policy and topology rows: node n1 in zone a; b1 runs on n1,
 * b2 and b3 on n2 in zone b (as the controller writes nodeName and zone on our slices).
 */
const PLACE = { nodeName: 'n1', zone: 'a' } as const;
const NODE_OF: Readonly<Record<PodName, { readonly nodeName: string; readonly zone: string }>> = {
  b1: { nodeName: 'n1', zone: 'a' },
  b2: { nodeName: 'n2', zone: 'b' },
  b3: { nodeName: 'n2', zone: 'b' },
};
const LOCAL_ITP = { internalTrafficPolicy: 'Local', externalTrafficPolicy: 'Cluster', externallyAccessible: false } as const;
/** Endpoints with their node and zone, and hints (per pod) when given. */
const placedEps = (family: Family, port: number, pods: readonly PodName[], state: (p: PodName) => EpState = () => 'ready', hints?: (p: PodName) => { zones?: string[]; nodes?: string[] }) =>
  pods.map((p) => {
    const h = hints?.(p);
    return { ...(eps(family, port, [p], state)[0] as ServicePortTarget['endpoints'][number]), ...NODE_OF[p], zoneHints: h?.zones ?? [], nodeHints: h?.nodes ?? [] };
  });
const placedWeb = (pods: readonly PodName[], extra: Partial<ServicePortTarget>, state?: (p: PodName) => EpState, hints?: (p: PodName) => { zones?: string[]; nodes?: string[] }): ServicePortTarget =>
  target('demo/web', WEB_V4, 80, placedEps(4, HTTP_PORT, pods, state, hints), { portName: 'http', place: PLACE, ...extra });
const placedDns = (pods: readonly PodName[], extra: Partial<ServicePortTarget>): ServicePortTarget =>
  target('demo/dns', DNS_V4, 53, placedEps(4, UDP_PORT, pods), { protocol: 'UDP', portName: 'dns', place: PLACE, ...extra });

/** internalTrafficPolicy Local from Service objects and slices (state building carries the policy and the endpoints' nodes). */
function localPolicyFromObjects(): DesiredState {
  const svc = serviceObject('demo', 'local', { networks: 'demo/blue', clusterIPs: ['10.96.0.91'], ports: [{ name: 'http', port: 80, targetPort: HTTP_PORT }] });
  svc.spec = { ...svc.spec, internalTrafficPolicy: 'Local' };
  const slice = sliceObject('demo', 'local-4', {
    service: 'local',
    network: 'demo/blue',
    family: 4,
    ports: [{ name: 'http', port: 80, targetPort: HTTP_PORT }],
    endpoints: ALL.map((p) => ({ ip: BACKENDS[p].ipv4, nodeName: NODE_OF[p].nodeName })),
  });
  const built = buildDesiredState({ interfaces: [CLIENT_BLUE], services: [svc], slices: [slice], place: PLACE });
  if (built.problems.length > 0) throw new Error(`local policy state: ${JSON.stringify(built.problems)}`);
  return built.state;
}

/** The admin's external-IP CIDRs in the external-IP rows: the client's segment's upper addresses, IPv4 and IPv6. */
const EXTERNAL_ALLOWED = ['192.168.101.224/27', 'fd00:101::e0/123'];
const EXTERNAL_V4 = '192.168.101.230';
const EXTERNAL_V6 = 'fd00:101::e6';
/** Outside the allowed CIDRs (and routed nowhere from the client). */
const EXTERNAL_OUTSIDE = '203.0.113.5';

/**
 * A Service with spec.externalIPs, internalTrafficPolicy and externalTrafficPolicy Local, from
 * Service objects: the sidecar serves the external IPs inside the admin's CIDRs (`allowed`; unset:
 * not configured) to every endpoint, as kube-proxy sends a pod's connection to an external IP
 * through the cluster endpoints whatever the policies say; its cluster IP keeps
 * internalTrafficPolicy Local.
 */
function externalIPsState(allowed: readonly string[] | undefined): DesiredState {
  const svc = serviceObject('demo', 'ext', { networks: 'demo/blue', clusterIPs: ['10.96.0.92', 'fd00:10:96::5c'], ports: [{ name: 'http', port: 80, targetPort: HTTP_PORT }] });
  svc.spec = { ...svc.spec, internalTrafficPolicy: 'Local', externalTrafficPolicy: 'Local', externalIPs: [EXTERNAL_V4, EXTERNAL_V6, EXTERNAL_OUTSIDE] };
  const slices = ([4, 6] as const).map((family) =>
    sliceObject('demo', `ext-${family}`, {
      service: 'ext',
      network: 'demo/blue',
      family,
      ports: [{ name: 'http', port: 80, targetPort: HTTP_PORT }],
      endpoints: ALL.map((p) => ({ ip: family === 4 ? BACKENDS[p].ipv4 : BACKENDS[p].ipv6, nodeName: NODE_OF[p].nodeName })),
    }),
  );
  const policy = parseExternalIPPolicy(allowed, 'allowed');
  if (!policy.ok) throw new Error(policy.error);
  const built = buildDesiredState({ interfaces: [CLIENT_BLUE], services: [svc], slices, place: PLACE, externalIPs: policy.value });
  if (built.problems.length > 0) throw new Error(`external IPs state: ${JSON.stringify(built.problems)}`);
  return built.state;
}

/** The sidecar's LoadBalancer states from Service objects (what decides which ingress IPs are short-circuited is state building). */
function loadBalancers(): DesiredState {
  const lb = (name: string, ingress: { ip: string; ipMode?: string }[], ranges?: string[]) => {
    const svc = serviceObject('demo', name, { networks: 'demo/blue', clusterIPs: ['10.96.0.90', 'fd00:10:96::5a'], ports: [{ name: 'http', port: 80, targetPort: HTTP_PORT }], type: 'LoadBalancer' });
    svc.status = { loadBalancer: { ingress } };
    if (ranges !== undefined) svc.spec = { ...svc.spec, loadBalancerSourceRanges: ranges };
    return svc;
  };
  const slices = (name: string) =>
    ([4, 6] as const).map((family) =>
      sliceObject('demo', `${name}-${family}`, {
        service: name,
        network: 'demo/blue',
        family,
        ports: [{ name: 'http', port: 80, targetPort: HTTP_PORT }],
        endpoints: ALL.map((p) => ({ ip: family === 4 ? BACKENDS[p].ipv4 : BACKENDS[p].ipv6 })),
      }),
    );
  const built = buildDesiredState({
    interfaces: [CLIENT_BLUE],
    services: [lb('lb', [{ ip: LB_V4 }, { ip: LB_V6, ipMode: 'VIP' }]), lb('proxied', [{ ip: '192.168.101.241', ipMode: 'Proxy' }]), lb('ranged', [{ ip: '192.168.101.242' }], ['203.0.113.0/24'])],
    slices: [...slices('lb'), ...slices('proxied'), ...slices('ranged')],
  });
  if (built.problems.length > 0) throw new Error(`load balancer state: ${JSON.stringify(built.problems)}`);
  return built.state;
}

const DP = 'test/sidecar/dataplane.test.ts';

/** Rows shared by the tracer and the kernel, in the order they run. */
export const SERVICE_CASES: readonly ServiceCase[] = [
  { name: 'ClusterIP TCP, three ready endpoints: each in equal shares', source: `${DP}: 300 requests to clusterIP:80`, state: () => client([web(ALL)]), probes: [http(WEB_V4, { reach: ALL })] },
  {
    name: 'an unready endpoint gets no traffic',
    source: `${DP}: an unready endpoint gets no traffic`,
    state: () => client([web(ALL, {}, (p) => (p === 'b3' ? 'unready' : 'ready'))]),
    probes: [http(WEB_V4, { reach: ['b1', 'b2'] })],
  },
  { name: 'an endpoint gone from the slice gets no traffic', source: `${DP}: removed from the slice entirely`, state: () => client([web(['b1'])]), probes: [http(WEB_V4, { reach: ['b1'] })] },
  { name: 'no endpoints: TCP refused at once with a reset', source: `${DP}: all gone: refused at once`, state: () => client([web([])]), probes: [http(WEB_V4, { refused: 'tcp-reset' })] },
  {
    name: 'only terminating, serving endpoints: they are used',
    source: `${DP}: only terminating-but-serving endpoints`,
    state: () => client([web(['b2'], {}, () => 'terminating')]),
    probes: [http(WEB_V4, { reach: ['b2'] })],
  },
  {
    name: 'ready and terminating endpoints: the ready ones only',
    source: "the renderer's endpoint choice (endpoints.ts), kube-proxy's rule",
    state: () => client([web(ALL, {}, (p) => (p === 'b1' ? 'terminating' : 'ready'))]),
    probes: [http(WEB_V4, { reach: ['b2', 'b3'] })],
  },
  {
    name: 'IPv6 cluster IP with IPv6 endpoints, beside the IPv4 one',
    source: `${DP}: IPv6 cluster IP with IPv6 endpoints`,
    state: () => client([web(ALL), target('demo/web', WEB_V6, 80, eps(6, HTTP_PORT, ALL), { portName: 'http' })]),
    probes: [http(WEB_V6, { reach: ALL }), http(WEB_V4, { reach: ALL })],
  },
  {
    name: 'IPv6 without endpoints: TCP refused with a reset',
    source: 'the reject rules of both families (rules.ts rejectWith)',
    state: () => client([web(ALL), target('demo/web', WEB_V6, 80, [], { portName: 'http' })]),
    probes: [http(WEB_V6, { refused: 'tcp-reset' })],
  },
  { name: 'UDP, three endpoints: each in equal shares', source: `${DP}: UDP: balanced`, state: () => client([web(ALL), dns(ALL)]), probes: [udp(DNS_V4, { reach: ALL })] },
  {
    name: 'UDP without endpoints: ICMP port unreachable',
    source: `${DP}: No endpoints: ICMP port unreachable`,
    state: () => client([web(ALL), dns([])]),
    probes: [udp(DNS_V4, { refused: 'port-unreachable' }), http(WEB_V4, { reach: ALL })],
  },
  {
    name: 'sessionAffinity ClientIP: every connection of the client to one endpoint',
    source: `${DP}: sessionAffinity ClientIP`,
    state: () => client([web(ALL, { affinityTimeoutSeconds: 60 }), dns([])]),
    probes: [http(WEB_V4, { sticky: ALL })],
  },
  { name: 'affinity removed: the same client spreads again', source: `${DP}: Without affinity the same client spreads again`, state: () => client([web(ALL)]), probes: [http(WEB_V4, { reach: ALL })] },
  {
    name: 'two ports on one cluster IP: each to its own target port and protocol',
    source: 'Services with several ports (runtime.test.ts: both cluster IPs)',
    state: () => client([web(ALL), target('demo/web', WEB_V4, 53, eps(4, UDP_PORT, ['b1', 'b2']), { protocol: 'UDP', portName: 'dns' })]),
    probes: [http(WEB_V4, { reach: ALL }), udp(WEB_V4, { reach: ['b1', 'b2'] })],
  },
  {
    name: 'a port or protocol the Service does not have, on its cluster IP: refused at once (TCP reset, UDP port unreachable)',
    source: "kube-proxy's nftables mode refuses them (its cluster-ips set); render.ts unservedRules, iptables/render.ts unservedRule",
    state: () => client([web(ALL), target('demo/web', WEB_V6, 80, eps(6, HTTP_PORT, ALL), { portName: 'http' })]),
    probes: [
      http(WEB_V4, { refused: 'tcp-reset' }, 81),
      udp(WEB_V4, { refused: 'port-unreachable' }, 80),
      http(WEB_V6, { refused: 'tcp-reset' }, 81),
      udp(WEB_V6, { refused: 'port-unreachable' }, 80),
      http(WEB_V4, { reach: ALL }),
      http(WEB_V6, { reach: ALL }),
    ],
  },
  {
    name: 'a cluster IP that gains a port: the new port served, the others still refused; one that loses its last port: untouched',
    source: 'partial syncs keep the refusal of the address after each port rule (restore.ts editSetChain, ordered)',
    state: () => client([web(ALL), target('demo/web', WEB_V4, 81, eps(4, HTTP_PORT, ['b2']), { portName: 'alt' }), target('demo/gone', '10.96.0.78', 80, [], { portName: 'http' })]),
    probes: [http(WEB_V4, { reach: ['b2'] }, 81), http(WEB_V4, { refused: 'tcp-reset' }, 82), http('10.96.0.78', { refused: 'tcp-reset' }, 81)],
  },
  {
    name: 'an address no Service has: untouched',
    source: `${DP}: (any address not served)`,
    state: () => client([web(ALL)]),
    probes: [http('10.96.0.99', { unanswered: true }), http('10.96.0.78', { unanswered: true }, 81)],
  },
  {
    name: 'a Service on a network the client lacks: no rules',
    source: `${DP}: a Service on a network the client lacks gets no rules`,
    state: () => client([web(ALL), target('demo/elsewhere', '10.96.0.77', 80, [ep('192.168.101.3', HTTP_PORT)], { network: RED })]),
    probes: [http('10.96.0.77', { unanswered: true }), http(WEB_V4, { reach: ALL })],
  },
  {
    name: 'LoadBalancer: ingress IPs (ipMode VIP) reached directly; ipMode Proxy and a source outside the ranges are not',
    source: `${DP}: LoadBalancer`,
    state: loadBalancers,
    probes: [
      http(LB_V4, { reach: ALL }),
      http(LB_V6, { reach: ALL }),
      http('10.96.0.90', { reach: ALL }),
      // Another port: the cluster IP refuses it; the ingress IP is the load balancer's address, where it goes on unchanged.
      http('10.96.0.90', { refused: 'tcp-reset' }, 81),
      http(LB_V4, { unanswered: true }, 81),
      http('192.168.101.241', { unanswered: true }),
      http('192.168.101.242', { unanswered: true }),
    ],
  },
  {
    name: 'spec.externalIPs inside the allowed CIDRs: served to every endpoint (as kube-proxy, whatever the traffic policies), other ports untouched; outside them: not served',
    source: "kube-proxy's external IPs for pods (through the cluster endpoints); src/external-ips.ts, re-checked in state.ts",
    state: () => externalIPsState(EXTERNAL_ALLOWED),
    probes: [
      http(EXTERNAL_V4, { reach: ALL }),
      http(EXTERNAL_V6, { reach: ALL }),
      http('10.96.0.92', { reach: ['b1'] }),
      http(EXTERNAL_V4, { unanswered: true }, 81),
      http('10.96.0.92', { refused: 'tcp-reset' }, 81),
      http(EXTERNAL_OUTSIDE, { unanswered: true }),
    ],
  },
  {
    name: 'spec.externalIPs without the admin allowing any: not served',
    source: 'docs/decisions/0163-external-ips-allowed-cidrs.md: not served by default',
    state: () => externalIPsState(undefined),
    probes: [http(EXTERNAL_V4, { unanswered: true }), http('10.96.0.92', { reach: ['b1'] })],
  },
  {
    name: "internalTrafficPolicy Local, one endpoint on the client's node: only it",
    source: "kube-proxy's CategorizeEndpoints (src/service-semantics/endpoints.ts), applied in resolve.ts",
    state: () => client([placedWeb(ALL, { traffic: LOCAL_ITP }), placedDns(ALL, { traffic: LOCAL_ITP })]),
    probes: [http(WEB_V4, { reach: ['b1'] }), udp(DNS_V4, { reach: ['b1'] })],
  },
  {
    name: 'internalTrafficPolicy Local, endpoints only on other nodes: dropped (TCP and UDP), not refused, not sent away',
    source: 'kube-proxy drops when the Service has endpoints but none local',
    state: () => client([placedWeb(['b2', 'b3'], { traffic: LOCAL_ITP }), placedDns(['b2', 'b3'], { traffic: LOCAL_ITP })]),
    probes: [http(WEB_V4, { dropped: true }), udp(DNS_V4, { dropped: true })],
  },
  {
    name: 'internalTrafficPolicy Local, no endpoints at all: refused, as without the policy',
    source: 'kube-proxy rejects a Service without any endpoint',
    state: () => client([placedWeb([], { traffic: LOCAL_ITP }), placedDns([], { traffic: LOCAL_ITP })]),
    probes: [http(WEB_V4, { refused: 'tcp-reset' }), udp(DNS_V4, { refused: 'port-unreachable' })],
  },
  {
    name: 'internalTrafficPolicy Local, the local endpoint terminating and serving: it, not the remote ready ones',
    source: "kube-proxy's CategorizeEndpoints: local serving-terminating endpoints when no local one is ready",
    state: () => client([placedWeb(ALL, { traffic: LOCAL_ITP }, (p) => (p === 'b1' ? 'terminating' : 'ready'))]),
    probes: [http(WEB_V4, { reach: ['b1'] })],
  },
  {
    name: "internalTrafficPolicy Local from Service objects: the endpoint on the client's node",
    source: "state.ts carries the policy and the slices' nodeName",
    state: localPolicyFromObjects,
    probes: [http('10.96.0.91', { reach: ['b1'] })],
  },
  {
    name: "zone hints: the endpoints hinted for the client's zone",
    source: "kube-proxy's topology step (PreferSameZone / hints for the zone)",
    state: () => client([placedWeb(ALL, {}, undefined, (p) => ({ zones: [p === 'b3' ? 'a' : 'b'] }))]),
    probes: [http(WEB_V4, { reach: ['b3'] })],
  },
  {
    name: "zone hints, none for the client's zone: every ready endpoint",
    source: 'kube-proxy falls back when no endpoint is hinted for its zone',
    state: () => client([placedWeb(ALL, {}, undefined, () => ({ zones: ['b'] }))]),
    probes: [http(WEB_V4, { reach: ALL })],
  },
  {
    name: 'zone hints on some endpoints only: every ready endpoint',
    source: 'kube-proxy uses hints only when every ready endpoint has them',
    state: () => client([placedWeb(ALL, {}, undefined, (p) => (p === 'b1' ? {} : { zones: ['a'] }))]),
    probes: [http(WEB_V4, { reach: ALL })],
  },
  {
    name: "PreferSameNode: the endpoint hinted for the client's node, over zone hints",
    source: 'kube-proxy 1.34 node hints (trafficDistribution PreferSameNode)',
    state: () => client([placedWeb(ALL, {}, undefined, (p) => ({ zones: ['a'], nodes: [p === 'b2' ? 'n1' : 'n2'] }))]),
    probes: [http(WEB_V4, { reach: ['b2'] })],
  },
];

/** Rows the kernel here cannot check, with why: the tracer's alone. */
export const TRACER_ONLY_CASES: readonly ServiceCase[] = [
  {
    name: 'SCTP ClusterIP, and SCTP without endpoints refused with port unreachable',
    source: 'no SCTP in the test kernel (socket(IPPROTO_SCTP): protocol not supported) and none in Node; the golden sample loads SCTP rules (dataplane-ops.test.ts)',
    state: () =>
      client([
        target('demo/sig', '10.96.0.40', 9999, eps(4, 9999, ['b1', 'b2']), { protocol: 'SCTP' }),
        target('demo/sig', '10.96.0.40', 2905, [], { protocol: 'SCTP', portName: 'm3ua' }),
        target('demo/sig', 'fd00:10:96::28', 9999, eps(6, 9999, ['b3']), { protocol: 'SCTP' }),
      ]),
    probes: [
      { protocol: 'sctp', dst: '10.96.0.40', port: 9999, expect: { reach: ['b1', 'b2'] } },
      { protocol: 'sctp', dst: '10.96.0.40', port: 2905, expect: { refused: 'port-unreachable' } },
      { protocol: 'sctp', dst: 'fd00:10:96::28', port: 9999, expect: { reach: ['b3'] } },
      { protocol: 'tcp', dst: '10.96.0.40', port: 9999, expect: { refused: 'tcp-reset' } },
    ],
  },
];

export const familyOfAddress = (ip: string): Family => (ip.includes(':') ? 6 : 4);

/** The probe as the traced packet, from the client's address of its family. */
export function packetOf(p: Probe): Packet {
  const family = familyOfAddress(p.dst);
  return { family, protocol: p.protocol, src: family === 4 ? CLIENT.ipv4 : CLIENT.ipv6, dst: p.dst, dport: p.port };
}

/** What a client sees, in words both halves produce: the tracer from its outcomes, the kernel test from replies. */
export type Observation = string;

export const reachText = (names: Iterable<string>): Observation => `reach ${[...new Set(names)].sort().join(',')}`;
export const stickyText = (names: Iterable<string>): Observation => `one of ${[...new Set(names)].sort().join(',')}, every time`;

/** The backend (by name) a DNAT reaches: its address and the server port of the protocol; anything else by its address. */
function nameOf(ip: string, port: number, protocol: L4): string {
  for (const [name, a] of Object.entries(BACKENDS)) if ((a.ipv4 === ip || a.ipv6 === ip) && port === (protocol === 'udp' ? UDP_PORT : protocol === 'tcp' ? HTTP_PORT : port)) return name;
  return `${ip}:${port}`;
}

/** One trace's outcomes in the words of an Observation; `shares` gets each reached backend's share. */
export function observe(outcomes: readonly Outcome[], protocol: L4, shares?: Map<string, number>): Observation {
  const s = summarize(outcomes);
  const kinds = new Set(s.map((v) => v.verdict.kind));
  if (kinds.size !== 1) return `mixed: ${JSON.stringify(s)}`;
  const v = s[0]?.verdict;
  if (v?.kind === 'dnat') {
    const names = s.map((x) => (x.verdict.kind === 'dnat' ? nameOf(x.verdict.ip, x.verdict.port, protocol) : '?'));
    s.forEach((x, i) => shares?.set(names[i] as string, (shares.get(names[i] as string) ?? 0) + x.share));
    return reachText(names);
  }
  if (v?.kind === 'reject') return 'refused';
  if (v?.kind === 'drop') return 'dropped';
  return 'unanswered';
}

/** The observation a row's expectation stands for. */
export function expected(e: Expect): Observation {
  if ('reach' in e) return reachText(e.reach);
  if ('sticky' in e) return stickyText(e.sticky);
  if ('dropped' in e) return 'dropped';
  return 'refused' in e ? 'refused' : 'unanswered';
}

/** A namespace the tracer answers for (FakeSidecar). */
export interface Traceable {
  trace(p: Packet): Outcome[];
  connect(p: Packet, o: Outcome): void;
}

/**
 * A probe on the tracer, as an Observation. For sticky expectations the first connection is made
 * (connect) and the next one traced: affinity holds when it can only reach the endpoint the first chose.
 */
export function traceProbe(f: Traceable, probe: Probe, shares?: Map<string, number>): Observation {
  const pkt = packetOf(probe);
  const first = f.trace(pkt);
  const seen = observe(first, probe.protocol, shares);
  if (!('sticky' in probe.expect)) return seen;
  const chosen = first.find((o) => o.verdict.kind === 'dnat');
  if (chosen === undefined) return seen;
  f.connect(pkt, chosen);
  const again = observe(f.trace(pkt), probe.protocol);
  const firstNames = seen.replace(/^reach /, '').split(',');
  const one = again.replace(/^reach /, '');
  return again.startsWith('reach ') && !one.includes(',') && firstNames.includes(one) ? stickyText(firstNames) : `not sticky: first ${seen}, then ${again}`;
}

/** The kind of refusal a trace answers with, if it refuses. */
export function rejectKind(outcomes: readonly Outcome[]): RejectKind | undefined {
  const v = outcomes[0]?.verdict;
  return v?.kind === 'reject' ? v.with : undefined;
}
