/**
 * The node agent's Service cases, one row each: the state and expectations of the node agent's
 * netns test (test/node-agent/dataplane.test.ts: two nodes, backend a on node1 and b on node2, an
 * external client inside the ranged Service's source ranges and an outsider outside them). The
 * rows run on the tracer (test/unit/tracer/node-cases.test.ts) and on the kernel
 * (test/node-agent/tracer-agreement.test.ts). A new case is a new row.
 */
import type { ExternalIPTarget, LoadBalancerTarget, NodePortTarget, NodeState } from './node.js';
import { DEFAULT_MASQUERADE_MARK } from './node.js';
import type { ServicePortTarget } from './sidecar.js';
import { summarize, type L4, type Outcome, type Packet, type Path, type RejectKind } from './walk.js';

export const NET = { namespace: 'demo', name: 'net-a' };
/** The host interface's name in the fakes (the kernel test passes the one the agent made). */
export const IFACE = 'mpxhtest';
/** Addresses as the netns harness gives that test's pods (a, b, client, outsider) and nodes. */
export const POD = { a: { ipv4: '192.168.101.2', ipv6: 'fd00:101::2' }, b: { ipv4: '192.168.101.3', ipv6: 'fd00:101::3' } } as const;
export const CLIENT = { ipv4: '192.168.101.4', ipv6: 'fd00:101::4' };
export const OUTSIDER = '192.168.101.5';
export const NODES = { n1: { ipv4: '192.168.101.250', ipv6: 'fd00:101::fa', local: 'a' }, n2: { ipv4: '192.168.101.251', ipv6: 'fd00:101::fb', local: 'b' } } as const;
export type PodName = keyof typeof POD;
export type NodeName = keyof typeof NODES;
export const HTTP = 80;
/** External IPs of the external-IP rows, on the segment (announced to the row's node as ingress IPs are). */
export const EXTERNAL = { cluster: '192.168.101.235', local: '192.168.101.236', onlyA: '192.168.101.237' } as const;
export const UDP = 5353;

const ep = (ip: string, port: number) => ({ ip, port, ready: true, serving: true, terminating: false });
const LOCAL_ITP = { internalTrafficPolicy: 'Local', externalTrafficPolicy: 'Cluster', externallyAccessible: false } as const;

/** The node state of that test, for one node. */
export function nodeState(me: NodeName, iface: string = IFACE): NodeState {
  const all = (family: 4 | 6, port: number, pods: readonly PodName[] = ['a', 'b']) => pods.map((p) => ep(family === 4 ? POD[p].ipv4 : POD[p].ipv6, port));
  const local = NODES[me].local;
  const base = (service: string, family: 4 | 6, over: Partial<ServicePortTarget> = {}): ServicePortTarget => ({
    service,
    portName: '',
    protocol: 'TCP',
    clusterIP: family === 4 ? '10.96.0.10' : 'fd00:10:96::a',
    port: 80,
    family,
    network: NET,
    endpoints: all(family, HTTP),
    ...over,
  });
  const localOf = (t: ServicePortTarget) => t.endpoints.filter((e) => e.ip === POD[local].ipv4 || e.ip === POD[local].ipv6);
  const np = (t: ServicePortTarget, nodePort: number, policy: 'Cluster' | 'Local'): NodePortTarget => ({ base: t, nodePort, policy, localEndpoints: localOf(t) });
  const lb = (t: ServicePortTarget, ingressIP: string, policy: 'Cluster' | 'Local', sourceRanges?: readonly string[]): LoadBalancerTarget => ({
    base: t,
    ingressIP,
    policy,
    localEndpoints: localOf(t),
    ...(sourceRanges !== undefined ? { sourceRanges } : {}),
  });
  const ext = (t: ServicePortTarget, address: string, policy: 'Cluster' | 'Local'): ExternalIPTarget => ({ base: t, address, policy, localEndpoints: localOf(t) });
  const onlyA = base('demo/only-a', 4, { endpoints: all(4, HTTP, ['a']) });
  // internalTrafficPolicy Local on the node's own cluster-IP path: a on n1, b on n2.
  const placed = (pods: readonly PodName[]) => pods.map((p) => ({ ...ep(POD[p].ipv4, HTTP), nodeName: p === 'a' ? 'n1' : 'n2', zone: '', zoneHints: [], nodeHints: [] }));
  const itp = (service: string, clusterIP: string, pods: readonly PodName[]) => base(service, 4, { clusterIP, endpoints: placed(pods), traffic: LOCAL_ITP, place: { nodeName: me, zone: '' } });
  // trafficDistribution PreferSameNode: each endpoint hinted for its own node (and a zone the nodes do not have).
  const sameNode = base('demo/same-node', 4, {
    clusterIP: '10.96.0.13',
    endpoints: placed(['a', 'b']).map((e) => ({ ...e, zoneHints: ['z'], nodeHints: [e.nodeName] })),
    place: { nodeName: me, zone: '' },
  });
  return {
    networks: [{ network: NET, interface: iface, ipv4: NODES[me].ipv4, ipv6: NODES[me].ipv6 }],
    masqueradeMark: DEFAULT_MASQUERADE_MARK,
    clusterTargets: [
      base('demo/web', 4),
      base('demo/web', 6),
      itp('demo/itp', '10.96.0.11', ['a', 'b']),
      itp('demo/itp-a', '10.96.0.12', ['a']),
      sameNode,
      // The node's own access to an allowed external IP (state.ts makes it beside the cluster IP).
      base('demo/ext', 4, { clusterIP: EXTERNAL.cluster, externalIP: true }),
    ],
    nodePorts: [
      np(base('demo/web', 4), 30080, 'Cluster'),
      np(base('demo/web', 6), 30080, 'Cluster'),
      np(base('demo/local', 4), 30081, 'Local'),
      np(onlyA, 30082, 'Local'),
      np(base('demo/dns', 4, { protocol: 'UDP', port: 53, endpoints: all(4, UDP) }), 30053, 'Cluster'),
    ],
    loadBalancers: [
      lb(base('demo/web', 4), '192.168.101.240', 'Cluster'),
      lb(base('demo/web', 6), 'fd00:101::f0', 'Cluster'),
      lb(base('demo/local', 4), '192.168.101.241', 'Local'),
      lb(onlyA, '192.168.101.242', 'Local'),
      lb(base('demo/ranged', 4), '192.168.101.243', 'Cluster', [`${CLIENT.ipv4}/32`]),
      lb(base('demo/ranged-empty', 4, { endpoints: [] }), '192.168.101.244', 'Cluster', [`${CLIENT.ipv4}/32`]),
      lb(base('demo/sig', 4, { protocol: 'SCTP', port: 3868, endpoints: all(4, 3868) }), '192.168.101.244', 'Cluster'),
    ],
    // Allowed external IPs (state.ts checks them against the admin's CIDRs), served by externalTrafficPolicy.
    externalIPs: [ext(base('demo/ext', 4), EXTERNAL.cluster, 'Cluster'), ext(base('demo/ext-local', 4), EXTERNAL.local, 'Local'), ext(onlyA, EXTERNAL.onlyA, 'Local')],
  };
}

export type NodeExpect = { readonly reach: readonly PodName[]; readonly masquerade: boolean } | { readonly refused: RejectKind } | { readonly dropped: true };
export interface NodeRow {
  readonly name: string;
  readonly node: NodeName;
  /** `node`: a host-network process on the node itself. */
  readonly from: 'client' | 'outsider' | 'node';
  readonly protocol: L4;
  readonly dst: string | ((n: (typeof NODES)[NodeName]) => string);
  readonly port: number;
  readonly expect: NodeExpect;
}

const cluster = (...pods: PodName[]): NodeExpect => ({ reach: pods, masquerade: true });
const kept = (...pods: PodName[]): NodeExpect => ({ reach: pods, masquerade: false });
/** The rows, in the order they run; each names its node, where the packet comes from, and what must happen. */
export const NODE_CASES: readonly NodeRow[] = [
  { name: 'NodePort Cluster on node1: both backends, masqueraded', node: 'n1', from: 'client', protocol: 'tcp', dst: (n) => n.ipv4, port: 30080, expect: cluster('a', 'b') },
  { name: 'NodePort Cluster on node2: both backends, masqueraded', node: 'n2', from: 'client', protocol: 'tcp', dst: (n) => n.ipv4, port: 30080, expect: cluster('a', 'b') },
  { name: 'IPv6 NodePort', node: 'n1', from: 'client', protocol: 'tcp', dst: (n) => n.ipv6, port: 30080, expect: cluster('a', 'b') },
  { name: 'NodePort Local on node1: its local endpoint, the client address kept', node: 'n1', from: 'client', protocol: 'tcp', dst: (n) => n.ipv4, port: 30081, expect: kept('a') },
  { name: 'NodePort Local on node2: its local endpoint', node: 'n2', from: 'client', protocol: 'tcp', dst: (n) => n.ipv4, port: 30081, expect: kept('b') },
  { name: 'NodePort Local, endpoints only on node1: node1 serves', node: 'n1', from: 'client', protocol: 'tcp', dst: (n) => n.ipv4, port: 30082, expect: kept('a') },
  { name: 'NodePort Local, endpoints only on node1: node2 refuses at once', node: 'n2', from: 'client', protocol: 'tcp', dst: (n) => n.ipv4, port: 30082, expect: { refused: 'tcp-reset' } },
  { name: 'a host-network process reaches the cluster IP (IPv4)', node: 'n1', from: 'node', protocol: 'tcp', dst: '10.96.0.10', port: 80, expect: kept('a', 'b') },
  { name: 'a host-network process reaches the cluster IP (IPv6)', node: 'n1', from: 'node', protocol: 'tcp', dst: 'fd00:10:96::a', port: 80, expect: kept('a', 'b') },
  { name: 'internalTrafficPolicy Local, the node itself: node1 reaches its local endpoint only', node: 'n1', from: 'node', protocol: 'tcp', dst: '10.96.0.11', port: 80, expect: kept('a') },
  { name: 'internalTrafficPolicy Local, the node itself: node2 reaches its local endpoint only', node: 'n2', from: 'node', protocol: 'tcp', dst: '10.96.0.11', port: 80, expect: kept('b') },
  { name: 'internalTrafficPolicy Local, endpoints only on node1: node1 reaches it', node: 'n1', from: 'node', protocol: 'tcp', dst: '10.96.0.12', port: 80, expect: kept('a') },
  { name: 'internalTrafficPolicy Local, endpoints only on node1: node2 drops, as kube-proxy', node: 'n2', from: 'node', protocol: 'tcp', dst: '10.96.0.12', port: 80, expect: { dropped: true } },
  { name: 'PreferSameNode, the node itself: node1 reaches the endpoint hinted for it', node: 'n1', from: 'node', protocol: 'tcp', dst: '10.96.0.13', port: 80, expect: kept('a') },
  { name: 'PreferSameNode, the node itself: node2 reaches the endpoint hinted for it', node: 'n2', from: 'node', protocol: 'tcp', dst: '10.96.0.13', port: 80, expect: kept('b') },
  {
    name: 'a host-network process, a port the Service does not have: refused at once (IPv4)',
    node: 'n1',
    from: 'node',
    protocol: 'tcp',
    dst: '10.96.0.10',
    port: 81,
    expect: { refused: 'tcp-reset' },
  },
  {
    name: 'a host-network process, a protocol the Service does not have: port unreachable',
    node: 'n1',
    from: 'node',
    protocol: 'udp',
    dst: '10.96.0.10',
    port: 80,
    expect: { refused: 'port-unreachable' },
  },
  {
    name: 'a host-network process, a port the Service does not have: refused at once (IPv6)',
    node: 'n1',
    from: 'node',
    protocol: 'tcp',
    dst: 'fd00:10:96::a',
    port: 81,
    expect: { refused: 'tcp-reset' },
  },
  { name: 'internalTrafficPolicy Local, dropped on node2, another port of it: refused', node: 'n2', from: 'node', protocol: 'tcp', dst: '10.96.0.12', port: 81, expect: { refused: 'tcp-reset' } },
  { name: 'external IP, externalTrafficPolicy Cluster: both backends, masqueraded', node: 'n1', from: 'client', protocol: 'tcp', dst: EXTERNAL.cluster, port: 80, expect: cluster('a', 'b') },
  {
    name: 'external IP, externalTrafficPolicy Local on node2: its local endpoint, the client address kept',
    node: 'n2',
    from: 'client',
    protocol: 'tcp',
    dst: EXTERNAL.local,
    port: 80,
    expect: kept('b'),
  },
  { name: 'external IP, Local, endpoints only on node1: node2 drops, as kube-proxy', node: 'n2', from: 'client', protocol: 'tcp', dst: EXTERNAL.onlyA, port: 80, expect: { dropped: true } },
  { name: 'a host-network process reaches an allowed external IP: every endpoint', node: 'n1', from: 'node', protocol: 'tcp', dst: EXTERNAL.cluster, port: 80, expect: kept('a', 'b') },
  { name: 'UDP NodePort: both backends, masqueraded', node: 'n1', from: 'client', protocol: 'udp', dst: (n) => n.ipv4, port: 30053, expect: cluster('a', 'b') },
  { name: 'LoadBalancer Cluster: both backends, masqueraded', node: 'n1', from: 'client', protocol: 'tcp', dst: '192.168.101.240', port: 80, expect: cluster('a', 'b') },
  { name: 'LoadBalancer Cluster, the other node announcing', node: 'n2', from: 'client', protocol: 'tcp', dst: '192.168.101.240', port: 80, expect: cluster('a', 'b') },
  { name: 'LoadBalancer IPv6 ingress IP', node: 'n1', from: 'client', protocol: 'tcp', dst: 'fd00:101::f0', port: 80, expect: cluster('a', 'b') },
  { name: 'LoadBalancer Local on node1: its local endpoint, the client address kept', node: 'n1', from: 'client', protocol: 'tcp', dst: '192.168.101.241', port: 80, expect: kept('a') },
  { name: 'LoadBalancer Local on node2: its local endpoint', node: 'n2', from: 'client', protocol: 'tcp', dst: '192.168.101.241', port: 80, expect: kept('b') },
  { name: 'LoadBalancer Local, endpoints only elsewhere: dropped, as kube-proxy', node: 'n2', from: 'client', protocol: 'tcp', dst: '192.168.101.242', port: 80, expect: { dropped: true } },
  { name: 'LoadBalancer Local, endpoints only on node1: node1 serves', node: 'n1', from: 'client', protocol: 'tcp', dst: '192.168.101.242', port: 80, expect: kept('a') },
  { name: 'loadBalancerSourceRanges: the client inside is served', node: 'n1', from: 'client', protocol: 'tcp', dst: '192.168.101.243', port: 80, expect: cluster('a', 'b') },
  { name: 'loadBalancerSourceRanges: the outsider is dropped', node: 'n1', from: 'outsider', protocol: 'tcp', dst: '192.168.101.243', port: 80, expect: { dropped: true } },
  { name: 'loadBalancerSourceRanges without endpoints: the client inside is refused', node: 'n1', from: 'client', protocol: 'tcp', dst: '192.168.101.244', port: 80, expect: { refused: 'tcp-reset' } },
  { name: 'loadBalancerSourceRanges without endpoints: the outsider is dropped', node: 'n1', from: 'outsider', protocol: 'tcp', dst: '192.168.101.244', port: 80, expect: { dropped: true } },
];

/** The row's packet, from its source, and the path it takes into the node (routing: every address is out of the host interface). */
export function nodePacket(row: NodeRow, iface: string = IFACE): { pkt: Packet; path: Path } {
  const n = NODES[row.node];
  const dst = typeof row.dst === 'string' ? row.dst : row.dst(n);
  const family = dst.includes(':') ? 6 : 4;
  const src = row.from === 'node' ? (family === 4 ? n.ipv4 : n.ipv6) : row.from === 'outsider' ? OUTSIDER : family === 4 ? CLIENT.ipv4 : CLIENT.ipv6;
  const base = { family, protocol: row.protocol, src, dst, dport: row.port } as const;
  if (row.from === 'node') return { pkt: base, path: { hook: 'output', route: () => iface } };
  return { pkt: { ...base, iif: IFACE }, path: { hook: 'prerouting', local: [n.ipv4, n.ipv6], route: () => iface } };
}

export const podAt = (ip: string): string => Object.entries(POD).find(([, a]) => a.ipv4 === ip || a.ipv6 === ip)?.[0] ?? ip;

/** What a client sees, in words both halves produce. */
export function nodeObservation(outcomes: readonly Outcome[]): string {
  const s = summarize(outcomes);
  if (s.every((x) => x.verdict.kind === 'dnat')) {
    const masq = new Set(s.map((x) => x.verdict.kind === 'dnat' && x.verdict.masquerade));
    if (masq.size !== 1) return `mixed masquerade: ${JSON.stringify(s)}`;
    return `reach ${[...new Set(s.map((x) => (x.verdict.kind === 'dnat' ? podAt(x.verdict.ip) : '?')))].sort().join(',')} ${[...masq][0] === true ? 'masqueraded' : 'source kept'}`;
  }
  if (s.length !== 1) return `mixed: ${JSON.stringify(s)}`;
  return s[0]?.verdict.kind === 'reject' ? 'refused' : s[0]?.verdict.kind === 'drop' ? 'unanswered' : `untouched`;
}

/** The observation a row's expectation stands for. */
export function nodeExpected(e: NodeExpect): string {
  if ('reach' in e) return `reach ${[...e.reach].sort().join(',')} ${e.masquerade ? 'masqueraded' : 'source kept'}`;
  return 'refused' in e ? 'refused' : 'unanswered';
}
