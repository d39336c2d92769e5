/**
 * Ingress peers bound to their MACs: the pod addresses of a rule whose MACs are known, as
 * `address . mac` elements of a concatenated set per family (the rule matches `ip saddr . ether
 * saddr`), and the rest of the peers (addresses without a MAC, every ipBlock) left to the address
 * interval set. A pod that claims another pod's address keeps its own MAC, so its packets miss the
 * pair. Each MAC is checked again here (the model is built from cluster input): a bad one leaves
 * its pair out, so that address allows nothing by it. Pure.
 */
import { canonicalMac } from '../../policy/mac.js';
import type { PeerSet } from '../../policy/model.js';
import type { IpFamily } from '../core/model.js';
import { intervalText, peerIntervals } from './policy-intervals.js';

export interface BoundPeers {
  /** The peers the address set still matches by address alone. */
  readonly unbound: PeerSet;
  /** `address . mac` elements per family, sorted. */
  readonly pairs: Readonly<Record<IpFamily, string[]>>;
  readonly warnings: readonly string[];
}

export const pairType = (f: IpFamily): string => `type ${f === 4 ? 'ipv4_addr' : 'ipv6_addr'} . ether_addr`;

export function boundPeers(peers: PeerSet): BoundPeers {
  const pairs: Record<IpFamily, string[]> = { 4: [], 6: [] };
  const warnings: string[] = [];
  const macs = peers.macs ?? {};
  const unbound: string[] = [];
  for (const address of peers.addresses) {
    const list = macs[address];
    if (list === undefined || list.length === 0) {
      unbound.push(address);
      continue;
    }
    const r = peerIntervals({ addresses: [address], blocks: [] });
    const f: IpFamily = r.ok && r.byFamily[6].length > 0 ? 6 : 4;
    const one = r.ok ? r.byFamily[f][0] : undefined;
    // A bad address is the interval set's to refuse (with the rule's reason), as without MACs.
    if (one === undefined) {
      unbound.push(address);
      continue;
    }
    for (const mac of list) {
      if (canonicalMac(mac) === undefined) warnings.push(`peer ${address}: MAC ${JSON.stringify(mac)} is not a canonical unicast MAC; that pair is left out`);
      else pairs[f].push(`${intervalText(one, f)} . ${mac}`);
    }
  }
  for (const f of [4, 6] as const) pairs[f] = [...new Set(pairs[f])].sort();
  return { unbound: { addresses: unbound, blocks: peers.blocks }, pairs, warnings };
}
