/**
 * The node agent's IO: its host-side interfaces (`ip -batch` from host-interface.ts's plan) and its
 * rules (the shared dataplane, src/dataplane/index.ts, with the node layout, renderer and stages). Thin: every decision is in host-interface.ts and rules.ts.
 */
import { createDataplaneFor, type Dataplane, type DataplaneOptions } from '../../src/dataplane/index.js';
import { createExec, type Exec, ipJsonRows } from '../../src/dataplane/node.js';
import { parseLinks, planHostInterfaces, planRemoveAll, type ExistingLink, type HostInterface, type HostInterfacePlan } from './host-interface.js';
import { NODE_LAYOUT, NodeRenderCache, renderNodeState, type NodeRendered, type NodeState } from './rules.js';
import { nodeStages } from './stages.js';

export function createNodeDataplane(opts: Omit<DataplaneOptions, 'layout' | 'readAhead' | 'warmUp'>): Dataplane<NodeState> {
  // Per-target work kept between syncs: a one-endpoint change re-renders one Service port.
  const cache = new NodeRenderCache();
  // No element writer: the node's table has no endpoint maps (nft-rules.ts, NODE_PICKS), so it would only probe and idle.
  // No reads ahead: in the host's namespace other programs make tables while the agent starts (read-ahead.ts).
  // No warm-up: it renders the sidecar's table (nftables/tuning/warm-up.ts), not the node's.
  // The node's rules come from its own stages (stages.ts): the registry steps the running back end's.
  return createDataplaneFor<NodeState, NodeRendered>({ ...opts, layout: NODE_LAYOUT, elementWriter: false, readAhead: false, warmUp: false }, (state) => renderNodeState(state, cache), nodeStages());
}

export async function readLinks(exec: Exec): Promise<ExistingLink[]> {
  const r = await exec('ip', ['-d', '-j', 'address', 'show']);
  if (r.code !== 0) throw new Error(`ip -d -j address show failed (exit ${r.code}): ${r.stderr.trim()}`);
  return parseLinks(r.stdout);
}

/** The devices of the default routes (both families); pure parsing in parseRouteDevs. */
export async function readDefaultRouteDevs(exec: Exec): Promise<string[]> {
  const out: string[] = [];
  for (const family of ['-4', '-6']) {
    const r = await exec('ip', [family, '-j', 'route', 'show', 'default']);
    if (r.code !== 0) throw new Error(`ip ${family} -j route show default failed (exit ${r.code}): ${r.stderr.trim()}`);
    out.push(...parseRouteDevs(r.stdout));
  }
  return [...new Set(out)];
}

/** `dev` of each route in `ip -j route` output (also of multipath `nexthops`); malformed input gives []. */
export function parseRouteDevs(json: string): string[] {
  const out: string[] = [];
  for (const row of ipJsonRows(json) as { dev?: unknown; nexthops?: unknown }[]) {
    if (typeof row !== 'object' || row === null) continue;
    if (typeof row.dev === 'string') out.push(row.dev);
    if (Array.isArray(row.nexthops)) for (const h of row.nexthops as { dev?: unknown }[]) if (typeof h?.dev === 'string') out.push(h.dev);
  }
  return out;
}

async function batch(exec: Exec, lines: readonly string[]): Promise<void> {
  if (lines.length === 0) return;
  const r = await exec('ip', ['-batch', '-'], `${lines.join('\n')}\n`);
  if (r.code !== 0) throw new Error(`ip -batch failed (exit ${r.code}): ${r.stderr.trim()}\ninput:\n${lines.join('\n')}`);
}

export interface HostInterfaces {
  /** Brings the node's interfaces of ours to `wanted`; returns what it did and the conflicts it left alone. */
  sync(wanted: readonly HostInterface[], internalIPs?: readonly string[]): Promise<HostInterfacePlan & { conflicts: readonly string[]; refused: readonly string[] }>;
  /** Deletes every interface of ours (`--cleanup`). */
  removeAll(): Promise<string[]>;
}

export function createHostInterfaces(opts: { netns?: string } = {}): HostInterfaces {
  const exec = createExec(opts.netns);
  return {
    async sync(wanted, internalIPs = []) {
      const plan = planHostInterfaces(wanted, await readLinks(exec), { internalIPs, defaultRouteDevs: await readDefaultRouteDevs(exec) });
      await batch(exec, plan.lines);
      return plan;
    },
    async removeAll() {
      const lines = planRemoveAll(await readLinks(exec));
      await batch(exec, lines);
      return lines;
    },
  };
}
