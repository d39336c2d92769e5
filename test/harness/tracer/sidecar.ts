/**
 * The sidecar's rules on the fakes: a desired state goes through the project's own renderers and
 * planners (the text `iptables-restore --noflush` and `nft -f` get in a pod), full for the first
 * sync and partial after it, into a fake back end that traces packets. This file is the only one
 * of the tracer that imports the dataplane, so its imports are what to re-point when the
 * dataplane's modules move.
 */
import { render } from '../../../src/dataplane/incremental.js';
import { iptablesRules } from '../../../src/dataplane/iptables-stage.js';
import { SIDECAR_LAYOUT } from '../../../src/dataplane/names.js';
import { planRestore } from '../../../src/dataplane/restore.js';
import { planNft, renderNft, sidecarPickLayout, type NftRuleset } from '../../../src/dataplane/nft/render.js';
import { shardsAfter } from '../../../src/dataplane/nft/shards.js';
import type { DesiredState, IptablesRules } from '../../../src/dataplane/model.js';
import { FakeIptables } from './iptables.js';
import { FakeNft } from './nftables.js';
import type { Outcome, Packet } from './walk.js';

export type { DesiredState, ServicePortTarget } from '../../../src/dataplane/model.js';
export { buildDesiredState } from '../../../src/dataplane/incremental.js';

export type BackendKind = 'iptables' | 'nftables';
export const BACKENDS: readonly BackendKind[] = ['iptables', 'nftables'];

export interface FakeSidecarOptions {
  /** nftables: Service ports per table before shard tables (as the dataplane's nftPortsPerShard). */
  readonly portsPerShard?: number;
  /** nftables: Service ports up to which endpoint maps pick (as the dataplane's maxEndpointMaps). */
  readonly maxEndpointMaps?: number;
}

/** A pod's namespace with the sidecar's rules of one back end, in memory. */
export class FakeSidecar {
  private readonly ipt = { 4: new FakeIptables(4), 6: new FakeIptables(6) } as const;
  private readonly nft = new FakeNft();
  private prevIpt: IptablesRules | undefined;
  private prevNft: NftRuleset | undefined;
  /** The texts the last sync fed the fake (one per family for iptables). */
  texts: string[] = [];

  constructor(
    readonly kind: BackendKind,
    private readonly opts: FakeSidecarOptions = {},
  ) {}

  /** Renders `state` and applies it: the whole rules the first time (or when `full`), the change from the last sync after. */
  sync(state: DesiredState, full = false): void {
    const targets = render(state).resolution.targets;
    if (this.kind === 'iptables') {
      const next = iptablesRules(targets, SIDECAR_LAYOUT);
      const prev = full ? undefined : this.prevIpt;
      this.texts = ([4, 6] as const).map((f) => planRestore(f === 4 ? next.v4 : next.v6, f === 4 ? prev?.v4 : prev?.v6, undefined, full).text);
      this.texts.forEach((text, i) => text !== '' && this.ipt[i === 0 ? 4 : 6].restore(text));
      this.prevIpt = next;
      return;
    }
    const shards = shardsAfter(targets.length, this.prevNft === undefined ? undefined : (this.prevNft.shards ?? 1), this.opts.portsPerShard);
    const next = renderNft(targets, undefined, sidecarPickLayout(targets.length, this.opts.maxEndpointMaps), shards);
    const plan = planNft(next, full ? undefined : this.prevNft, full);
    this.texts = [plan.text];
    if (plan.text !== '') this.nft.apply(plan.text);
    this.prevNft = next;
  }

  /** Every way a new connection from this pod can end. */
  trace(pkt: Packet): Outcome[] {
    return this.kind === 'iptables' ? this.ipt[pkt.family].trace(pkt, 'output') : this.nft.trace(pkt, 'output');
  }

  /** Makes one outcome's connection: what it leaves (affinity) holds for the next trace. */
  connect(pkt: Packet, o: Outcome): void {
    if (this.kind === 'iptables') this.ipt[pkt.family].connect(o);
    else this.nft.connect(o);
  }
}
