/**
 * MultiNetworkPolicy cases as a truth table: a compiled PodPolicy for the policed pod `p`, and
 * probes between `p` and its peers (a, b, c on net1; d on net2), each expected to pass or not.
 * The tracer (policy.test.ts) and the kernel (test/sidecar/policy-agreement.test.ts) answer the
 * same rows. Addresses are the netns harness's (test/harness/netns.ts: pods numbered from .2 in
 * the order they are added: p, a, b, c, d).
 */
import type { NetworkPolicySet, PodPolicy, PolicyRule } from '../../../src/policy/model.js';
import type { Family, L4, Packet, Path } from './walk.js';

export type PeerName = 'a' | 'b' | 'c' | 'd';
export const POLICED = { net1: { ipv4: '192.168.101.2', ipv6: 'fd00:101::2' }, net2: { ipv4: '192.168.102.2', ipv6: 'fd00:102::2' } } as const;
/** Each peer's address on the network it talks to `p` over. */
export const PEERS: Readonly<Record<PeerName, { readonly iface: 'net1' | 'net2'; readonly ipv4: string; readonly ipv6: string }>> = {
  a: { iface: 'net1', ipv4: '192.168.101.3', ipv6: 'fd00:101::3' },
  b: { iface: 'net1', ipv4: '192.168.101.4', ipv6: 'fd00:101::4' },
  c: { iface: 'net1', ipv4: '192.168.101.5', ipv6: 'fd00:101::5' },
  d: { iface: 'net2', ipv4: '192.168.102.6', ipv6: 'fd00:102::6' },
};
export const NET1 = 'demo/net-a';
export const NET2 = 'demo/net-b';
export const TCP_PORT = 8080;
export const UDP_PORT = 5353;

export interface PolicyProbe {
  /** ingress: the peer connects to p; egress: p connects to the peer. */
  readonly dir: 'ingress' | 'egress';
  readonly peer: PeerName;
  readonly family: Family;
  readonly protocol: L4;
  /** What the probe is: a new connection (default), the reply of one p made, an ICMP error related to one, or neighbour discovery (ICMPv6 135). Only `new` runs on the kernel as its own probe. */
  readonly kind?: 'new' | 'established' | 'related' | 'nd';
  readonly pass: boolean;
}

export interface PolicyCase {
  readonly name: string;
  readonly policy: PodPolicy;
  readonly probes: readonly PolicyProbe[];
}

const port = (protocol: 'TCP' | 'UDP', from: number, to = from) => ({ protocol, from, to });
const open = { isolated: false, rules: [] } as const;
const rule = (policy: string, r: Omit<PolicyRule, 'policy' | 'index'> = {}, index = 0): PolicyRule => ({ policy, index, ...r });
function net1(over: Partial<NetworkPolicySet>): NetworkPolicySet {
  return { network: NET1, interface: 'net1', ingress: open, egress: open, failures: [], ...over };
}
const addrs = (...peers: PeerName[]): string[] => peers.flatMap((p) => [PEERS[p].ipv4, PEERS[p].ipv6]);
const probe = (dir: PolicyProbe['dir'], peer: PeerName, pass: boolean, protocol: L4 = 'tcp', family: Family = 4, kind?: PolicyProbe['kind']): PolicyProbe => ({
  dir,
  peer,
  family,
  protocol,
  pass,
  ...(kind !== undefined ? { kind } : {}),
});

export const POLICY_CASES: readonly PolicyCase[] = [
  {
    name: 'ingress from one pod on one port (both families)',
    policy: { networks: [net1({ ingress: { isolated: true, rules: [rule('demo/web', { peers: { addresses: addrs('a'), blocks: [] }, ports: [port('TCP', TCP_PORT)] })] } })] },
    probes: [
      probe('ingress', 'a', true),
      probe('ingress', 'a', true, 'tcp', 6),
      probe('ingress', 'a', false, 'udp'),
      probe('ingress', 'b', false),
      probe('ingress', 'b', false, 'tcp', 6),
      probe('egress', 'b', true),
    ],
  },
  {
    name: 'ipBlock less its except; the block is IPv4 only',
    policy: { networks: [net1({ ingress: { isolated: true, rules: [rule('demo/blocks', { peers: { addresses: [], blocks: [{ cidr: '192.168.101.0/24', except: ['192.168.101.4/32'] }] } })] } })] },
    probes: [probe('ingress', 'a', true), probe('ingress', 'c', true, 'udp'), probe('ingress', 'b', false), probe('ingress', 'b', false, 'udp'), probe('ingress', 'a', false, 'tcp', 6)],
  },
  {
    name: "except is per peer: another peer's except does not take a pod address away",
    policy: {
      networks: [net1({ ingress: { isolated: true, rules: [rule('demo/per-peer', { peers: { addresses: [PEERS.b.ipv4], blocks: [{ cidr: '192.168.101.0/28', except: ['192.168.101.4/30'] }] } })] } })],
    },
    probes: [probe('ingress', 'a', true), probe('ingress', 'b', true), probe('ingress', 'c', false)],
  },
  {
    name: 'a port range of one protocol, from every peer',
    policy: { networks: [net1({ ingress: { isolated: true, rules: [rule('demo/range', { ports: [port('UDP', 5000, 5400)] })] } })] },
    probes: [probe('ingress', 'a', true, 'udp'), probe('ingress', 'a', true, 'udp', 6), probe('ingress', 'a', false), probe('ingress', 'c', false, 'tcp', 6)],
  },
  {
    name: 'egress to named ports resolved per peer',
    policy: {
      networks: [
        net1({
          egress: {
            isolated: true,
            rules: [
              rule('demo/named', {
                peers: { addresses: addrs('a', 'b'), blocks: [] },
                peerPorts: [
                  { address: PEERS.a.ipv4, protocol: 'TCP', port: TCP_PORT },
                  { address: PEERS.a.ipv6, protocol: 'TCP', port: TCP_PORT },
                  { address: PEERS.b.ipv4, protocol: 'UDP', port: UDP_PORT },
                ],
              }),
            ],
          },
        }),
      ],
    },
    probes: [
      probe('egress', 'a', true),
      probe('egress', 'a', true, 'tcp', 6),
      probe('egress', 'a', false, 'udp'),
      probe('egress', 'b', true, 'udp'),
      probe('egress', 'b', false),
      probe('egress', 'c', false),
    ],
  },
  {
    name: 'both directions isolated: neighbour discovery and the replies of allowed connections pass',
    policy: {
      networks: [net1({ ingress: { isolated: true, rules: [], isolatedBy: ['demo/deny'] }, egress: { isolated: true, rules: [rule('demo/to-a', { peers: { addresses: addrs('a'), blocks: [] } })] } })],
    },
    probes: [
      probe('egress', 'a', true, 'tcp', 6),
      probe('egress', 'a', true, 'udp', 6),
      probe('egress', 'a', true),
      probe('ingress', 'a', false, 'tcp', 6),
      probe('egress', 'b', false, 'tcp', 6),
      probe('ingress', 'a', true, 'tcp', 6, 'nd'),
      probe('egress', 'b', true, 'tcp', 6, 'nd'),
      probe('ingress', 'a', true, 'tcp', 4, 'established'),
      probe('ingress', 'a', true, 'udp', 6, 'related'),
    ],
  },
  {
    name: 'isolation only on the policy network',
    policy: { networks: [net1({ ingress: { isolated: true, rules: [], isolatedBy: ['demo/deny'] } }), { network: NET2, interface: 'net2', ingress: open, egress: open, failures: [] }] },
    probes: [probe('ingress', 'a', false), probe('ingress', 'd', true), probe('ingress', 'd', true, 'udp', 6), probe('egress', 'd', true)],
  },
  {
    name: 'a union of two policies',
    policy: {
      networks: [
        net1({
          ingress: {
            isolated: true,
            rules: [
              rule('demo/x', { peers: { addresses: addrs('a'), blocks: [] }, ports: [port('TCP', TCP_PORT)] }),
              rule('demo/y', { peers: { addresses: addrs('b'), blocks: [] }, ports: [port('UDP', UDP_PORT)] }),
            ],
          },
        }),
      ],
    },
    probes: [probe('ingress', 'a', true), probe('ingress', 'b', true, 'udp'), probe('ingress', 'a', false, 'udp'), probe('ingress', 'b', false), probe('ingress', 'c', false)],
  },
  {
    name: 'a failed policy isolates and allows nothing; the others still allow',
    policy: {
      networks: [
        net1({
          ingress: { isolated: true, rules: [rule('demo/ok', { peers: { addresses: addrs('a'), blocks: [] } }), rule('demo/broken', {})] },
          failures: [{ policy: 'demo/broken', message: 'a selector that cannot be parsed', direction: 'ingress' }],
        }),
      ],
    },
    probes: [probe('ingress', 'a', true), probe('ingress', 'b', false), probe('egress', 'b', true)],
  },
  {
    name: 'a failure without a direction isolates both',
    policy: { networks: [net1({ failures: [{ policy: 'demo/broken', message: 'cannot be compiled' }] })] },
    probes: [probe('ingress', 'a', false), probe('egress', 'a', false, 'udp'), probe('egress', 'a', false, 'tcp', 6)],
  },
  {
    name: 'port ranges at their ends: the last port of one admitted, the port below another dropped',
    policy: { networks: [net1({ ingress: { isolated: true, rules: [rule('demo/ends', { ports: [port('UDP', UDP_PORT - 1, UDP_PORT), port('TCP', TCP_PORT + 1, TCP_PORT + 2)] })] } })] },
    probes: [probe('ingress', 'a', true, 'udp'), probe('ingress', 'b', true, 'udp', 6), probe('ingress', 'a', false), probe('ingress', 'c', false, 'tcp', 6)],
  },
];

/** The packet and path of a probe, as the tracer takes them. */
export function policyPacket(p: PolicyProbe): { pkt: Packet; path: Path } {
  const peer = PEERS[p.peer];
  const mine = POLICED[peer.iface];
  const peerAddr = p.family === 4 ? peer.ipv4 : peer.ipv6;
  const myAddr = p.family === 4 ? mine.ipv4 : mine.ipv6;
  const kind = p.kind ?? 'new';
  const base = { family: p.family, protocol: p.protocol, dport: p.protocol === 'tcp' ? TCP_PORT : UDP_PORT } as const;
  const extra: Partial<Packet> = kind === 'nd' ? { protocol: 'icmpv6', icmpv6Type: 135 } : kind === 'new' ? {} : { ct: kind };
  if (p.dir === 'ingress') {
    const local = [POLICED.net1.ipv4, POLICED.net1.ipv6, POLICED.net2.ipv4, POLICED.net2.ipv6];
    return { pkt: { ...base, src: peerAddr, dst: myAddr, iif: peer.iface, ...extra }, path: { hook: 'prerouting', local } };
  }
  const route = (dst: string): string => Object.values(PEERS).find((x) => x.ipv4 === dst || x.ipv6 === dst)?.iface ?? 'eth0';
  return { pkt: { ...base, src: myAddr, dst: peerAddr, ...extra }, path: { hook: 'output', route } };
}

export const probeName = (p: PolicyProbe): string => `${p.dir} ${p.dir === 'ingress' ? `${p.peer} -> p` : `p -> ${p.peer}`} ${p.protocol}/IPv${p.family}${p.kind !== undefined ? ` (${p.kind})` : ''}`;
