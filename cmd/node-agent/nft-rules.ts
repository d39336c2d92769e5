/**
 * The node agent's rules for the nftables back end: the same decisions as rules.ts (its
 * FrontendRules and the cluster-IP ResolvedTargets), written as one table of our own, `inet
 * multus_proxy_node`, from the shared parts (src/dataplane/nftables/render.ts). Pure; golden files in
 * test/golden/nft-node.
 *
 *   map services-v4/-v6     cluster IP . proto . port : goto <Service-port chain>   (the node's own access)
 *   map frontends-v4/-v6    node address . proto . nodePort, ingress IP . proto . port : goto <frontend chain>
 *                           (with loadBalancerSourceRanges: goto MPXN-SRC-<hash>, which sends the admitted sources on)
 *   set no-endpoints-v4/-v6 refused at once (TCP reset / port unreachable)
 *   set drop-v4/-v6         dropped (a Local ingress IP whose endpoints are all on other nodes, as kube-proxy)
 *   map firewall-v4/-v6     ingress IP . proto . port : jump MPXN-FW-<hash> (admitted sources return, the rest drop)
 *   chain nat-prerouting    hook prerouting -100: frontends
 *   chain nat-output        hook output -100: services
 *   chain nat-postrouting   hook postrouting 100: the masquerade mark -> masquerade
 *   chain filter-input/-output/-forward  hook 0: new connections -> refuse; forward also accepts
 *                           DNATed traffic in and out of our interfaces
 *   chain MPXN-NP-/MPXN-LB-<hash>  Cluster: set the masquerade mark, then the DNAT picks (the sidecar's);
 *                           Local: the picks over this node's endpoints
 *
 * The forward accepts are the iptables layout's, but in nftables an accept ends only this table's
 * chain: another table's drop (a FORWARD policy of DROP) still drops the packet (docs/decisions/0033-node-agent-dataplane.md).
 */
import { compareText } from '../../src/order.js';
import type { IpFamily, ResolvedTarget, Stage } from '../../src/dataplane/index.js';
import {
  hashName,
  addressSet,
  clusterIPsSet,
  unservedRules,
  collectTargets,
  FAMILIES,
  ipKw,
  keyMatch,
  keySet,
  noEndpointsSet,
  REJECT_CHAIN,
  REJECT_RULES,
  renderPicks,
  renderTarget,
  servicesMap,
  targetKey,
  verdictMap,
  type NftElement,
  type PickLayout,
  type NftRuleset,
  type NftTable,
  type NftTarget,
} from '../../src/dataplane/node.js';
import { NODE_NFT_TABLE, type FrontendRules, type NodeNetwork, type NodeRendered } from './rules.js';

export { NODE_NFT_TABLE } from './rules.js';

/** The node agent picks with one DNAT rule per endpoint, not interval maps: it shares the host's namespace (render.ts, PickLayout). */
const NODE_PICKS: PickLayout = 'rules';

export const frontendsMap = (f: IpFamily): string => `frontends-v${f}`;
export const dropSet = (f: IpFamily): string => `drop-v${f}`;
export const firewallMap = (f: IpFamily): string => `firewall-v${f}`;
const REFUSE_CHAIN = 'refuse';

const hex = (n: number): string => `0x${n.toString(16)}`;

/** The fixed part: maps, sets and hook chains (the forward accepts and the mark follow the node's state). */
export function nodeTable(networks: readonly NodeNetwork[], masqueradeMark: number): NftTable {
  const m = hex(masqueradeMark);
  const forward: string[] = [];
  for (const n of [...networks].sort((a, b) => compareText(a.interface, b.interface))) {
    if (n.ipv4 === undefined && n.ipv6 === undefined) continue;
    forward.push(`iifname "${n.interface}" ct status dnat accept`, `oifname "${n.interface}" ct status dnat accept`);
  }
  const refuse = `ct state new jump ${REFUSE_CHAIN}`;
  return {
    name: NODE_NFT_TABLE,
    sets: FAMILIES.flatMap((f) => [
      verdictMap(servicesMap(f), f),
      verdictMap(frontendsMap(f), f),
      keySet(noEndpointsSet(f), f),
      keySet(dropSet(f), f),
      verdictMap(firewallMap(f), f),
      addressSet(clusterIPsSet(f), f),
    ]),
    chains: [
      { name: REJECT_CHAIN, rules: REJECT_RULES },
      {
        name: REFUSE_CHAIN,
        rules: [
          ...FAMILIES.map((f) => `${keyMatch(f)} @${noEndpointsSet(f)} goto ${REJECT_CHAIN}`),
          // Counted, so a dropped connection can be told from a lost one (`nft list table`).
          ...FAMILIES.map((f) => `${keyMatch(f)} @${dropSet(f)} counter drop`),
          ...FAMILIES.map((f) => `${keyMatch(f)} vmap @${firewallMap(f)}`),
          // Last: a served cluster IP on a port or protocol it does not have (the iptables back end's MPXN-REJECT does the same).
          ...unservedRules(),
        ],
      },
      { name: 'nat-prerouting', rules: ['type nat hook prerouting priority -100; policy accept;', ...FAMILIES.map((f) => `${keyMatch(f)} vmap @${frontendsMap(f)}`)] },
      { name: 'nat-output', rules: ['type nat hook output priority -100; policy accept;', ...FAMILIES.map((f) => `${keyMatch(f)} vmap @${servicesMap(f)}`)] },
      { name: 'nat-postrouting', rules: ['type nat hook postrouting priority 100; policy accept;', `meta mark & ${m} == ${m} masquerade`] },
      { name: 'filter-input', rules: ['type filter hook input priority 0; policy accept;', refuse] },
      { name: 'filter-output', rules: ['type filter hook output priority 0; policy accept;', refuse] },
      { name: 'filter-forward', rules: ['type filter hook forward priority 0; policy accept;', refuse, ...forward] },
    ],
  };
}

/** One frontend's part: its chain (mark, picks), its source-range and firewall chains, its elements. Pure. */
export function frontendTarget(fr: FrontendRules, masqueradeMark: number): NftTarget {
  const r = fr.resolved;
  const f = r.target.family;
  const key = targetKey(r);
  const picks = renderPicks(r, fr.facts.masquerade ? [`meta mark set meta mark | ${hex(masqueradeMark)}`] : [], NODE_PICKS);
  const owned = new Map(picks.ownedChains);
  const elements: NftElement[] = [];
  const ranges = fr.facts.sourceRanges;
  const refusal = fr.facts.refusal;
  if (ranges === undefined) {
    elements.push({ set: frontendsMap(f), key, value: `goto ${r.chain}` });
    if (refusal !== undefined) elements.push({ set: refusal === 'drop' ? dropSet(f) : noEndpointsSet(f), key });
  } else {
    // Only admitted sources are DNATed; the rest keep the ingress IP and meet the firewall chain in filter.
    const sources = hashName('MPXN-SRC-', r.chain);
    owned.set(
      sources,
      ranges.map((c) => `${ipKw(f)} saddr ${c} goto ${r.chain}`),
    );
    elements.push({ set: frontendsMap(f), key, value: `goto ${sources}` });
    const fw = hashName('MPXN-FW-', r.chain);
    const admitted = refusal === undefined ? 'return' : refusal === 'drop' ? 'drop' : `goto ${REJECT_CHAIN}`;
    owned.set(fw, [...ranges.map((c) => `${ipKw(f)} saddr ${c} ${admitted}`), 'counter drop']);
    elements.push({ set: firewallMap(f), key, value: `jump ${fw}` });
  }
  return { family: f, key, chain: r.chain, rules: picks.rules, ownedChains: owned, sets: picks.sets, maps: picks.maps, elements };
}

/** What renderNodeNft keeps between renders: each part by the object it came from (the same object when unchanged). */
export interface NodeNftMemo {
  readonly cluster: WeakMap<ResolvedTarget, NftTarget>;
  readonly frontends: WeakMap<FrontendRules, NftTarget>;
}

export const newNodeNftMemo = (): NodeNftMemo => ({ cluster: new WeakMap(), frontends: new WeakMap() });

/** The node's table: cluster-IP targets as the sidecar's, then the frontends. */
export function renderNodeNft(
  clusterTargets: readonly ResolvedTarget[],
  frontends: readonly FrontendRules[],
  networks: readonly NodeNetwork[],
  masqueradeMark: number,
  memo: NodeNftMemo = newNodeNftMemo(),
): NftRuleset {
  function* parts(): Generator<NftTarget> {
    for (const r of clusterTargets) {
      let t = memo.cluster.get(r);
      if (t === undefined) memo.cluster.set(r, (t = renderTarget(r, NODE_PICKS)));
      yield t;
    }
    for (const fr of frontends) {
      let t = memo.frontends.get(fr);
      if (t === undefined) memo.frontends.set(fr, (t = frontendTarget(fr, masqueradeMark)));
      yield t;
    }
  }
  return collectTargets(nodeTable(networks, masqueradeMark), parts());
}

/** The nftables back end's stage for the node: its table from the node's render, each part kept while its object lives. */
export class NodeNftStage implements Stage<NftRuleset, NodeRendered> {
  private readonly memo = newNodeNftMemo();
  step(r: NodeRendered): NftRuleset {
    return renderNodeNft(r.cluster.resolution.targets, r.frontends, r.state.networks, r.state.masqueradeMark, this.memo);
  }
}
