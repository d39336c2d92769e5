/**
 * The sidecar's rules on the fakes: a desired state goes through the project's own renderers and
 * planners (the text `iptables-restore --noflush` and `nft -f` get in a pod), full for the first
 * sync and partial after it, into a fake back end that traces packets. This file and node.ts
 * (the node agent's renderer) are the only ones of the tracer that import the programs' code,
 * so their imports are what to re-point when the dataplane's modules move.
 */
import { render } from '../../../src/dataplane/core/incremental.js';
import { iptablesRules } from '../../../src/dataplane/iptables/stage.js';
import { SIDECAR_LAYOUT, type Layout } from '../../../src/dataplane/core/names.js';
import { planRestore } from '../../../src/dataplane/iptables/restore.js';
import { planNft, renderNft, sidecarPickLayout, type NftRuleset } from '../../../src/dataplane/nftables/render.js';
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
    if ('iptables' in next) {
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
