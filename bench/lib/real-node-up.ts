/** The real node up with the project installed as the README says (bootstrap overlay), for the benchmarks that run there (B3-real, policy-real). */
import { startNode, type RealNode } from '../../test/harness/node.js';
import { INSTALL_BOOTSTRAP, installBootstrap } from '../../test/node/install.js';
import type { Cleanup } from './proc.js';
import { requireTool } from './proc.js';
import type { RunContext } from './report.js';

export interface InstalledNode {
  readonly node: RealNode;
  /** Stops the node now (the cleanup then leaves it); what the node's stop returns. */
  readonly stop: () => ReturnType<RealNode['stop']>;
}

export async function installedNode(ctx: RunContext, cleanup: Cleanup): Promise<InstalledNode> {
  await requireTool('nft', ['--version'], 'install nftables (Debian package nftables)');
  await requireTool('nsenter', ['--version'], 'install util-linux');
  const t0 = Date.now();
  // No skip: a node that cannot start fails the benchmark with the harness's message.
  const node = await startNode({ log: (m) => ctx.log(`node: ${m}`) });
  let stopped = false;
  cleanup.add('real node', async () => {
    if (!stopped) await node.stop();
  });
  ctx.log(`real node up in ${node.startMs} ms`);
  await installBootstrap(node);
  ctx.log(`installed (${INSTALL_BOOTSTRAP}) after ${Date.now() - t0} ms`);
  return {
    node,
    stop: () => {
      stopped = true;
      return node.stop();
    },
  };
}
