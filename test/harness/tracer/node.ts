/**
 * The node agent's rules on the fakes: a node state goes through the agent's own renderer
 * (cmd/node-agent/rules.ts, nft-rules.ts) and the shared planners into a fake back end. Its
 * import of the agent is the one to re-point when the agent's modules move.
 */
import { NODE_LAYOUT, type NodeState } from '../../../cmd/node-agent/rules.js';
import { renderNode } from '../../../cmd/node-agent/stages.js';
import { FakeDataplane, type BackendKind } from './sidecar.js';

export type { ExternalIPTarget, LoadBalancerTarget, NodePortTarget, NodeState } from '../../../cmd/node-agent/rules.js';
export { DEFAULT_MASQUERADE_MARK } from '../../../cmd/node-agent/rules.js';

/** A node's namespace with the agent's rules of one back end, in memory. */
export class FakeNode extends FakeDataplane<NodeState> {
  constructor(kind: BackendKind) {
    super(
      kind,
      (state) => {
        const r = renderNode(state, undefined, { nft: kind === 'nftables' });
        if (r.nft !== undefined) return { nft: r.nft };
        if (r.iptables !== undefined) return { iptables: r.iptables };
        throw new Error(`renderNode gave no ${kind} rules`);
      },
      NODE_LAYOUT,
    );
  }
}
