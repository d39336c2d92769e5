/**
 * The rules the project's programs hold on the real node, as text, whichever back end each chose
 * at start (nftables where it loads, the default; iptables otherwise): iptables-save's nat table
 * followed by our own nftables table's listing. Tests look for what a rule names (an address, a
 * chain prefix), so they hold for both back ends.
 */
import { NFT_FAMILY, NFT_TABLE } from '../../src/dataplane/nftables/render.js';
import { NODE_NFT_TABLE } from '../../cmd/node-agent/nft-rules.js';
import { SIDECAR_CONTAINER_NAME } from '../../src/keys.js';
import type { RealNode } from '../harness/node.js';

/** `nft list table` of the sidecar's table (the command fails where the table is absent). */
export const SIDECAR_NFT_LIST = ['nft', 'list', 'table', NFT_FAMILY, NFT_TABLE];
/** A shell line that prints the node agent's rules of both back ends on a host, and never fails. */
export const NODE_AGENT_RULES_SH = `iptables-save | grep MPXN; nft list table ${NFT_FAMILY} ${NODE_NFT_TABLE} 2>/dev/null; true`;

/** The client pod's sidecar rules: the nat table and our nft table, as lines. */
export async function sidecarRules(node: RealNode, namespace: string, pod: string): Promise<string[]> {
  const opts = { container: SIDECAR_CONTAINER_NAME };
  const ipt = await node.exec(namespace, pod, ['iptables-save', '-t', 'nat'], opts);
  const nft = await node.exec(namespace, pod, SIDECAR_NFT_LIST, opts);
  return [ipt.stdout, nft.code === 0 ? nft.stdout : ''].join('\n').split('\n');
}
