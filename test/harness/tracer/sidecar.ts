/**
 * The sidecar's rules on the fakes: a desired state goes through the project's own renderers and
 * planners (the text `iptables-restore --noflush` and `nft -f` get in a pod), full for the first
 * sync and partial after it, into a fake back end that traces packets. This file and node.ts
 * (the node agent's renderer) are the only ones of the tracer that import the programs' code,
 * so their imports are what to re-point when the dataplane's modules move.
 */
import { render } from '../../../src/dataplane/core/incremental.js';
import { iptablesRules } from '../../../src/dataplane/iptables/stage.js';
import { SIDECAR_LAYOUT, type Layout, type TableName } from '../../../src/dataplane/core/names.js';
import { hookedChains, ourJump, planRestore, type ExistingTable } from '../../../src/dataplane/iptables/restore.js';
import { planRestoreSteps } from '../../../src/dataplane/iptables/steps.js';
import { cleanupText, planNft, renderNft, sidecarPickLayout, tableNames, type NftRuleset } from '../../../src/dataplane/nftables/render.js';
import { planReplace, replaceChunkText, staleTexts } from '../../../src/dataplane/nftables/tuning/replace.js';
import { shardsAfter } from '../../../src/dataplane/nftables/tuning/shards.js';
import { renderPolicy } from '../../../src/dataplane/nftables/policy.js';
import type { DesiredState } from '../../../src/dataplane/core/model.js';
import type { IptablesRules } from '../../../src/dataplane/iptables/rulesets.js';
import { FakeIptables } from './iptables.js';
import { FakeNft } from './nftables.js';
import type { Outcome, Packet, Path } from './walk.js';

export type { DesiredState, ServicePortTarget } from '../../../src/dataplane/core/model.js';
export { buildDesiredState } from '../../../src/dataplane/core/incremental.js';
export { parseExternalIPPolicy } from '../../../src/external-ips.js';

export type BackendKind = 'iptables' | 'nftables';
export const BACKENDS: readonly BackendKind[] = ['iptables', 'nftables'];

export interface FakeSidecarOptions {
  /** nftables: Service ports per table before shard tables (as the dataplane's nftPortsPerShard). */
  readonly portsPerShard?: number;
  /** nftables: Service ports up to which endpoint maps pick (as the dataplane's maxEndpointMaps). */
  readonly maxEndpointMaps?: number;
}

/** One sync's rules of one back end, as a program's renderer makes them. */
export type RenderedRules = { readonly iptables: IptablesRules } | { readonly nft: NftRuleset };

/**
 * A namespace with a program's rules of one back end, in memory: each sync renders the state with
 * the program's renderer and applies the planner's text (whole the first time or when `full`,
 * the change from the last sync after) to the fake.
 */
export class FakeDataplane<S> {
  private readonly ipt = { 4: new FakeIptables(4), 6: new FakeIptables(6) } as const;
  private readonly nft = new FakeNft();
  private prev: RenderedRules | undefined;
  /** The texts the last sync fed the fake (one per family for iptables). */
  texts: string[] = [];

  constructor(
    readonly kind: BackendKind,
    private readonly rules: (state: S, prev: RenderedRules | undefined) => RenderedRules,
    private readonly layout: Layout,
  ) {}

  sync(state: S, full = false): void {
    const next = this.rules(state, this.prev);
    const prev = full ? undefined : this.prev;
    // A full sync over the sidecar's own rules (a restart, a resync) goes in bounded steps, as the back ends write it.
    if (full && this.prev !== undefined && this.layout === SIDECAR_LAYOUT) this.syncInSteps(next, this.prev);
    else if ('iptables' in next) {
      const was = prev !== undefined && 'iptables' in prev ? prev.iptables : undefined;
      this.texts = ([4, 6] as const).map((f) => planRestore(f === 4 ? next.iptables.v4 : next.iptables.v6, f === 4 ? was?.v4 : was?.v6, undefined, was === undefined, this.layout).text);
      this.texts.forEach((text, i) => text !== '' && this.ipt[i === 0 ? 4 : 6].restore(text));
    } else {
      const plan = planNft(next.nft, prev !== undefined && 'nft' in prev ? prev.nft : undefined, full);
      this.texts = [plan.text];
      if (plan.text !== '') this.nft.apply(plan.text);
    }
    this.prev = next;
  }

  /** The full sync over rules of ours: iptables/steps.ts per family, nftables/tuning/replace.ts (its stale names from the fake's listing). */
  private syncInSteps(next: RenderedRules, prev: RenderedRules): void {
    this.texts = [];
    const run = (apply: (text: string) => void, text: string): void => {
      if (text === '') return;
      this.texts.push(text);
      apply(text);
    };
    if ('iptables' in next) {
      for (const f of [4, 6] as const) {
        const ipt = this.ipt[f];
        const have = (table: TableName): ExistingTable => {
          const chains = ipt.listing(table);
          const jumps = [...hookedChains(this.layout)].flatMap((c) => (chains.get(c) ?? []).map((spec) => ourJump(`-A ${c} ${spec}`, this.layout)).filter((j): j is string => j !== undefined));
          return { chains: [...chains.keys()].filter((c) => c.startsWith(this.layout.prefix)), jumps };
        };
        const plan = planRestoreSteps(f === 4 ? next.iptables.v4 : next.iptables.v6, { filter: have('filter'), nat: have('nat') }, this.layout);
        for (const text of plan.steps ?? []) run((t) => ipt.restore(t), text);
      }
      return;
    }
    const r = planReplace(next.nft, 'nft' in prev ? tableNames(prev.nft) : []).replace;
    if (r === undefined) throw new Error('planReplace made no replacement');
    const apply = (t: string): void => this.nft.apply(t);
    for (const text of [r.tables, ...r.chunks.map(replaceChunkText), ...r.finals]) run(apply, text);
    if (r.staleTables[0] !== undefined) run(apply, cleanupText(r.staleTables[0], r.staleTables));
    for (const text of staleTexts(this.nft.listNames(), next.nft)) run(apply, text);
  }

  /** Every way a new connection on `path` (default: from a process in the namespace) can end. */
  trace(pkt: Packet, path?: Path): Outcome[] {
    return this.kind === 'iptables' ? this.ipt[pkt.family].trace(pkt, path) : this.nft.trace(pkt, path);
  }

  /** Makes one outcome's connection: what it leaves (affinity) holds for the next trace. */
  connect(pkt: Packet, o: Outcome): void {
    if (this.kind === 'iptables') this.ipt[pkt.family].connect(o);
    else this.nft.connect(o);
  }
}

/** A pod's namespace with the sidecar's rules of one back end, in memory. */
export class FakeSidecar extends FakeDataplane<DesiredState> {
  constructor(kind: BackendKind, opts: FakeSidecarOptions = {}) {
    super(kind, (state, prev) => sidecarRules(kind, state, prev, opts), SIDECAR_LAYOUT);
  }
}

function sidecarRules(kind: BackendKind, state: DesiredState, prev: RenderedRules | undefined, opts: FakeSidecarOptions): RenderedRules {
  const targets = render(state).resolution.targets;
  if (kind === 'iptables') return { iptables: iptablesRules(targets, SIDECAR_LAYOUT) };
  const was = prev !== undefined && 'nft' in prev ? prev.nft : undefined;
  const shards = shardsAfter(targets.length, was === undefined ? undefined : (was.shards ?? 1), opts.portsPerShard);
  const nft = renderNft(targets, undefined, sidecarPickLayout(targets.length, opts.maxEndpointMaps), shards);
  // The pod's MultiNetworkPolicy, as the nftables stage adds it (nftables/stage.ts).
  const policy = renderPolicy(state.policy);
  return { nft: policy === undefined ? nft : { ...nft, policy } };
}
