/**
 * The node agent's stages, one per back end kind (the registry's names), over its own render
 * (rules.ts renderNodeState): what it hands the shared dataplane (dataplane.ts), and a whole render
 * with one back end's rules for tests, benches and the start-up probe (nft-probe.ts).
 */
import type { IptablesRules, NftRuleset } from '../../src/dataplane/node.js';
import type { ProgramStages } from '../../src/dataplane/index.js';
import { NodeIptablesStage, renderNodeState, type NodeRenderCache, type NodeRendered, type NodeState } from './rules.js';
import { NodeNftStage } from './nft-rules.js';

export function nodeStages(): ProgramStages<NodeRendered> {
  return { iptables: new NodeIptablesStage(), nftables: new NodeNftStage() };
}

/** The stages kept per cache, so a cached render also steps its stages incrementally. */
const cached = new WeakMap<NodeRenderCache, { readonly iptables: NodeIptablesStage; readonly nft: NodeNftStage }>();

/**
 * Pure: the node's render with one back end's rules beside it: with `nft` the nftables table, else
 * the iptables rulesets. With a cache only what changed is redone; the result is the same.
 */
export function renderNode(state: NodeState, cache?: NodeRenderCache, opts: { readonly nft?: boolean } = {}): NodeRendered & { readonly iptables?: IptablesRules; readonly nft?: NftRuleset } {
  let stages = cache === undefined ? undefined : cached.get(cache);
  if (stages === undefined) {
    stages = { iptables: new NodeIptablesStage(), nft: new NodeNftStage() };
    if (cache !== undefined) cached.set(cache, stages);
  }
  const r = renderNodeState(state, cache);
  return opts.nft === true ? { ...r, nft: stages.nft.step(r) } : { ...r, iptables: stages.iptables.step(r) };
}
