/**
 * The source guard: the pod may send on its secondary interfaces only as itself. A `netdev` table
 * of its own with one `egress` chain per interface, which every frame leaving the device passes
 * (sockets, raw IP and AF_PACKET sockets alike, `PACKET_QDISC_BYPASS` included), drops a frame
 * whose Ethernet source is not the interface's MAC, an IPv4 or IPv6 packet whose source is not one
 * of the pod's addresses there, and an ARP packet whose sender is not. What must pass does: IPv4
 * from 0.0.0.0 and ARP probes (sender 0.0.0.0), IPv6 from `::` (duplicate address detection) and
 * from link-local addresses (neighbour discovery), and every other EtherType from the pod's MAC.
 *
 * The addresses are the pod's network-status (the same ones the controller gives the pods that
 * police ingress from it). The MAC is the interface's own when the caller can read it (what the
 * kernel sends from; a network-status that disagrees must not cut the pod off), else the
 * network-status one. An interface whose entry lists no address (a network without IPAM,
 * addressed by the app) has its source MAC checked only; one without a MAC, its addresses only. The text replaces the whole table in one transaction (created, deleted, written), so the
 * guard never lapses while it changes. Pure.
 */
import { hashName } from '../core/names.js';
import type { NetworkStatusEntry } from '../../annotations/network-status.js';
import { checkedMac } from '../../policy/mac.js';
import { cidrInterval } from './policy-intervals.js';
import { parseNftChains } from './backend.js';

export const GUARD_TABLE = 'multus_proxy_guard';
/** A kernel interface name; anything else never reaches a rule. */
const IFNAME = /^[A-Za-z0-9_.-]{1,15}$/;

/** One secondary interface as the guard sees it. */
export interface GuardInterface {
  readonly interface: string;
  readonly mac?: string;
  readonly ipv4: readonly string[];
  readonly ipv6: readonly string[];
}

/**
 * The pod's secondary interfaces from its network-status (the default network's entry is the
 * cluster network's: not guarded here). `macOf`: the interface's own MAC, where it can be read.
 */
export function guardInterfaces(status: readonly NetworkStatusEntry[], macOf?: (iface: string) => string | undefined): GuardInterface[] {
  const out = new Map<string, GuardInterface>();
  for (const e of status) {
    if (e.default || e.interface === undefined || !IFNAME.test(e.interface) || out.has(e.interface)) continue;
    const ipv4 = e.ipv4.filter((ip) => typeof cidrInterval(ip) !== 'string' && !ip.includes('/'));
    const ipv6 = e.ipv6.filter((ip) => typeof cidrInterval(ip) !== 'string' && !ip.includes('/'));
    const own = macOf?.(e.interface);
    const given = own ?? e.mac;
    const mac = given === undefined ? undefined : checkedMac(given);
    out.set(e.interface, { interface: e.interface, ...(mac !== undefined ? { mac } : {}), ipv4: [...new Set(ipv4)].sort(), ipv6: [...new Set(ipv6)].sort() });
  }
  return [...out.values()].sort((a, b) => (a.interface < b.interface ? -1 : a.interface > b.interface ? 1 : 0));
}

/** The guard chain of one interface. */
export const guardChainName = (iface: string): string => hashName('MPX-GUARD-', iface);

function chainLines(g: GuardInterface): string[] {
  const lines = [`type filter hook egress device "${g.interface}" priority 0; policy accept;`];
  if (g.mac !== undefined) lines.push(`ether saddr != ${g.mac} counter drop`);
  if (g.ipv4.length + g.ipv6.length > 0) {
    lines.push(`meta protocol ip ip saddr != { ${['0.0.0.0', ...g.ipv4].join(', ')} } counter drop`);
    lines.push(`meta protocol ip6 ip6 saddr != { ${['::', 'fe80::/10', ...g.ipv6].join(', ')} } counter drop`);
    lines.push(`meta protocol arp arp saddr ip != { ${['0.0.0.0', ...g.ipv4].join(', ')} } counter drop`);
  }
  if (g.mac !== undefined) lines.push(`meta protocol arp arp saddr ether != ${g.mac} counter drop`);
  return lines;
}

/** The rules of each guard chain as written (the hook's `type` line not counted), by chain name. */
export function guardChainCounts(list: readonly GuardInterface[]): Map<string, number> {
  return new Map(list.map((g) => [guardChainName(g.interface), chainLines(g).length - 1]));
}

/**
 * Why the guard in `listing` (`nft list table netdev multus_proxy_guard`; undefined: the table does
 * not exist) is no longer what `list` wrote, or undefined when it is: each chain with its rule
 * count, as the sidecar's main table is checked (backend.ts), and no chain of ours besides. Pure.
 */
export function guardDrift(list: readonly GuardInterface[], listing: string | undefined): string | undefined {
  if (list.length === 0) return undefined;
  if (listing === undefined) return `nftables: table netdev ${GUARD_TABLE} missing`;
  const have = parseNftChains(listing);
  const want = guardChainCounts(list);
  for (const [chain, n] of want) {
    const got = have.get(chain);
    if (got === undefined) return `nftables ${GUARD_TABLE} ${chain}: missing`;
    if (got !== n) return `nftables ${GUARD_TABLE} ${chain}: ${got} rules, ${n} written`;
  }
  for (const chain of have.keys()) if (!want.has(chain)) return `nftables ${GUARD_TABLE} ${chain}: a chain that was not written`;
  return undefined;
}

/** The `nft -f` text that makes the guard table exactly `list` (one transaction); no interface: the table goes. */
export function sourceGuardText(list: readonly GuardInterface[]): string {
  const head = `table netdev ${GUARD_TABLE}\ndelete table netdev ${GUARD_TABLE}\n`;
  if (list.length === 0) return head;
  const chains = list.map(
    (g) =>
      `\tchain ${guardChainName(g.interface)} {\n${chainLines(g)
        .map((l) => `\t\t${l}\n`)
        .join('')}\t}\n`,
  );
  return `${head}table netdev ${GUARD_TABLE} {\n${chains.join('')}}\n`;
}
