/** Random compiled policies over the peers, ports and failures of the policy cases, for the incremental-equals-scratch properties (fake and kernel). */
import type { PodPolicy, PolicyRule } from '../../../src/policy/model.js';
import { NET1, PEERS } from './policy-cases.js';

/** A random policy over the peers, ports and failures the cases use. */
export function randomPolicy(r: () => number): PodPolicy | undefined {
  if (r() < 0.1) return undefined;
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)] as T;
  const peers = Object.values(PEERS);
  const rules = (policy: string): PolicyRule[] =>
    Array.from({ length: Math.floor(r() * 3) }, (_, index) => ({
      policy,
      index,
      ...(r() < 0.7
        ? {
            peers: {
              addresses: peers.filter(() => r() < 0.4).flatMap((p) => (r() < 0.5 ? [p.ipv4] : [p.ipv4, p.ipv6])),
              blocks: r() < 0.4 ? [{ cidr: pick(['192.168.101.0/24', 'fd00:101::/64', '192.168.0.0/16']), except: r() < 0.5 ? [pick(['192.168.101.4/31', 'fd00:101::4/126'])] : [] }] : [],
            },
          }
        : {}),
      ...(r() < 0.5 ? { ports: [{ protocol: pick(['TCP', 'UDP', 'SCTP'] as const), from: 8080, to: r() < 0.5 ? 8080 : 8090 }] } : {}),
      ...(r() < 0.3 ? { peerPorts: peers.filter(() => r() < 0.5).map((p) => ({ address: p.ipv4, protocol: 'TCP' as const, port: pick([8080, 53]) })) } : {}),
    }));
  const dir = () => (r() < 0.5 ? { isolated: false, rules: [] } : { isolated: true, rules: [...rules(pick(['demo/x', 'demo/y'])), ...rules('demo/z')] });
  const failures = r() < 0.2 ? [{ policy: 'demo/y', message: 'bad', ...(r() < 0.5 ? { direction: pick(['ingress', 'egress'] as const) } : {}) }] : [];
  return {
    networks: [
      { network: NET1, interface: 'net1', ingress: dir(), egress: dir(), failures },
      ...(r() < 0.4 ? [{ network: 'demo/net-b', interface: 'net2', ingress: dir(), egress: dir(), failures: [] }] : []),
    ],
  };
}

/** The same policy with each rule's pod addresses picked again: a peer change only (rules and ipBlocks kept). */
export function withOtherPeers(policy: PodPolicy | undefined, r: () => number): PodPolicy | undefined {
  if (policy === undefined) return undefined;
  const peers = Object.values(PEERS);
  const rule = (x: PolicyRule): PolicyRule =>
    x.peers === undefined ? x : { ...x, peers: { ...x.peers, addresses: peers.filter(() => r() < 0.5).flatMap((p) => (r() < 0.5 ? [p.ipv4] : [p.ipv4, p.ipv6])) } };
  return { networks: policy.networks.map((n) => ({ ...n, ingress: { ...n.ingress, rules: n.ingress.rules.map(rule) }, egress: { ...n.egress, rules: n.egress.rules.map(rule) } })) };
}
