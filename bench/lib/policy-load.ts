/**
 * The policy benchmark's loads (bench/policy.ts): compiled PodPolicies for one pod on one
 * secondary network, by number of peer addresses and rules, and the "naive" layout of the same
 * peers as one nftables rule each, to compare with the project's sets. Pure.
 *
 * Peer addresses are every other address from 100.64.0.0 up: single hosts that no two of which
 * are adjacent, so the renderer's interval merge (policy-intervals.ts) cannot fold them and a set
 * of N addresses holds N elements.
 */
import type { DesiredState } from '../../src/dataplane/index.js';
import type { PodPolicy, PolicyRule, PortRange } from '../../src/policy/model.js';
import { POLICY_BUDGETS } from '../../src/object-budgets.js';

export const NETWORK = { namespace: 'bench', name: 'net-a' } as const;
export const IFACE = 'net1';
export const CLIENT_IP = '10.77.0.1';
export const SERVER_IP = '10.77.0.2';
export const PREFIX_LEN = 24;
/** The UDP destination ports of the measured flows (one new flow per port). */
export const FLOW_PORTS = { from: 20000, to: 59999 } as const;
const POLICY = 'bench/egress';

/** The i-th filler peer address (i < 2^21): 100.64.0.0 + 2i. */
export function fillerAddress(i: number): string {
  const n = 2 * i;
  return `100.${64 + (n >> 16)}.${(n >> 8) & 255}.${n & 255}`;
}

/** N peer addresses, the server's last (the naive layout's worst case; a set does not care). */
export function peerAddresses(n: number, last = SERVER_IP): string[] {
  return [...Array.from({ length: n - 1 }, (_, i) => fillerAddress(i)), last];
}

/** The client pod's state without Services: its one secondary interface. */
export function baseState(): DesiredState {
  return { targets: [], interfaces: [{ network: NETWORK, interface: IFACE, ipv4: [CLIENT_IP], ipv6: [] }] };
}

const flowPorts: PortRange = { protocol: 'UDP', from: FLOW_PORTS.from, to: FLOW_PORTS.to };

/** The pod's egress isolated by one rule: these peers, the flows' UDP port range. */
export function egressPolicy(addresses: readonly string[], ports: readonly PortRange[] = [flowPorts]): PodPolicy {
  return {
    networks: [
      {
        network: `${NETWORK.namespace}/${NETWORK.name}`,
        interface: IFACE,
        ingress: { isolated: false, rules: [] },
        egress: { isolated: true, rules: [{ policy: POLICY, index: 0, peers: { addresses, blocks: [] }, ports }] },
        failures: [],
      },
    ],
  };
}

/**
 * A policy at the object budgets (src/object-budgets.ts): `rules` ingress and as many egress rules
 * (at most POLICY_BUDGETS.rules each), every rule with POLICY_BUDGETS.ports port entries and one
 * ipBlock with POLICY_BUDGETS.except excepts, and `perRule` peer addresses per rule, drawn in turn
 * from `addresses` distinct ones (so rules share addresses when perRule × rules > addresses).
 */
export function budgetPolicy(opts: { readonly rules: number; readonly perRule: number; readonly addresses: number }): PodPolicy {
  const ports: PortRange[] = Array.from({ length: POLICY_BUDGETS.ports }, (_, i) => ({ protocol: i % 2 === 0 ? 'TCP' : 'UDP', from: 1000 + 10 * i, to: 1000 + 10 * i + (i % 3) }));
  const except = Array.from({ length: POLICY_BUDGETS.except }, (_, i) => `172.16.${i * 4}.0/24`);
  const rule = (r: number): PolicyRule => ({
    policy: `bench/budget-${Math.floor(r / POLICY_BUDGETS.rules)}`,
    index: r % POLICY_BUDGETS.rules,
    peers: { addresses: Array.from({ length: opts.perRule }, (_, i) => fillerAddress((r * opts.perRule + i) % opts.addresses)), blocks: [{ cidr: '172.16.0.0/12', except }] },
    ports,
  });
  const rules = Array.from({ length: opts.rules }, (_, r) => rule(r));
  return { networks: [{ network: `${NETWORK.namespace}/${NETWORK.name}`, interface: IFACE, ingress: { isolated: true, rules }, egress: { isolated: true, rules }, failures: [] }] };
}

/**
 * The same egress policy as `egressPolicy`, written as one rule per peer in a table of its own
 * (`nft -f` text): the layout the project's sets replace. The chain has what the project's has
 * around its rules (established and related, neighbour discovery, the drop), so only the peer
 * match differs.
 */
export function naiveEgressTable(table: string, addresses: readonly string[]): string {
  const rules = addresses.map((a) => `\t\tip daddr ${a} udp dport ${FLOW_PORTS.from}-${FLOW_PORTS.to} accept\n`).join('');
  return (
    `table inet ${table} {\n` +
    `\tchain egress {\n\t\tct state established,related accept\n\t\ticmpv6 type { nd-router-solicit, nd-router-advert, nd-neighbor-solicit, nd-neighbor-advert, nd-redirect } accept\n${rules}\t\tdrop\n\t}\n` +
    `\tchain output {\n\t\ttype filter hook output priority 0; policy accept;\n\t\toifname "${IFACE}" jump egress\n\t}\n` +
    `}\n`
  );
}
