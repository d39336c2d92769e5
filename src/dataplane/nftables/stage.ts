/**
 * The nftables back end's stage of the engine (../engine.ts): the shared render's served targets
 * -> the sidecar's table (render.ts), one step per render. A render that says what changed since
 * the one this stage saw last (its delta) edits the last table in O(changes); any other is
 * rendered from scratch. Either way the table holds exactly what renderNft of the render's
 * targets holds (test/sidecar/incremental.test.ts).
 */
import { Snapshot } from '../core/engine.js';
import type { Rendered, ResolvedTarget } from '../core/model.js';
import { MAX_ENDPOINT_MAPS, renderNft, renderTarget, sidecarPickLayout, targetKey, type NftRuleset, type NftTarget, type PickLayout } from './render.js';
import { PORTS_PER_SHARD, shardsAfter } from './tuning/shards.js';
import { renderPolicy, type NftPolicy } from './policy.js';
import type { PodPolicy } from '../../policy/model.js';

export class NftStage {
  /** Each resolved target's part per layout, kept while the render cache keeps the target (the same object when unchanged). */
  private readonly memos: Record<PickLayout, WeakMap<ResolvedTarget, NftTarget>> = { map: new WeakMap(), rules: new WeakMap() };
  private last: { readonly version: number; readonly layout: PickLayout; readonly shards: number; readonly ruleset: NftRuleset } | undefined;
  /** The shard count of the last table, kept when `last` is not (its next count depends on it: shardsAfter). */
  private shards: number | undefined;
  /** The last policy rendered, by the compiled policy's identity (a new object means a change). */
  private policy: { readonly from: PodPolicy | undefined; readonly part: NftPolicy | undefined } = { from: undefined, part: undefined };

  /**
   * `maxEndpointMaps`: the Service ports up to which the table picks through endpoint maps
   * (render.ts sidecarPickLayout); `portsPerShard`: how many a table holds before they spread
   * over more tables (shards.ts); `shardsBefore`: the shard count of a table written before this
   * stage (undefined: none), which the first table's count follows (shardsAfter).
   */
  constructor(
    private readonly maxEndpointMaps: number = MAX_ENDPOINT_MAPS,
    private readonly portsPerShard: number = PORTS_PER_SHARD,
    shardsBefore?: number,
  ) {
    this.shards = shardsBefore;
  }

  private part(r: ResolvedTarget, layout: PickLayout): NftTarget {
    const memo = this.memos[layout];
    let t = memo.get(r);
    if (t === undefined) {
      t = renderTarget(r, layout);
      memo.set(r, t);
    }
    return t;
  }

  step(rendered: Rendered): NftRuleset {
    const { version, delta } = rendered;
    const last = this.last;
    if (last !== undefined && version === last.version) return last.ruleset;
    const targets = rendered.resolution.targets;
    // Crossing the bound changes every Service port's part; it also adds or removes one, which
    // edit() leaves to a from-scratch render anyway.
    const layout = sidecarPickLayout(targets.length, this.maxEndpointMaps);
    // The shard count too (a target's part does not depend on it, only which table holds it),
    // from the last one: it changes only well past a boundary (shards.ts, hysteresis).
    const shards = shardsAfter(targets.length, this.shards, this.portsPerShard);
    this.shards = shards;
    const edited = last !== undefined && last.layout === layout && last.shards === shards && delta?.from === last.version ? this.edit(last.ruleset, delta.targets, layout) : undefined;
    const ruleset = this.withPolicy(edited ?? renderNft(targets, this.memos[layout], layout, shards), rendered.policy);
    this.last = version === undefined ? undefined : { version, layout, shards, ruleset };
    return ruleset;
  }

  /** The table with the render's policy part (policy.ts), rendered again only when the policy object changed. */
  private withPolicy(ruleset: NftRuleset, policy: PodPolicy | undefined): NftRuleset {
    if (this.policy.from !== policy) this.policy = { from: policy, part: renderPolicy(policy) };
    const part = this.policy.part;
    if (part === undefined) {
      if (ruleset.policy === undefined) return ruleset;
      const { policy: _dropped, ...rest } = ruleset;
      return rest;
    }
    return ruleset.policy === part ? ruleset : { ...ruleset, policy: part };
  }

  /**
   * The last table with the changed targets' parts replaced; undefined when the change is not a
   * replacement in place (a chain or key that moved, a target the table did not hold: the
   * from-scratch collection decides those, first come first served).
   */
  private edit(last: NftRuleset, changes: NonNullable<Rendered['delta']>['targets'], layout: PickLayout): NftRuleset | undefined {
    if (!(last.targets instanceof Snapshot)) return undefined;
    const edits: [string, NftTarget][] = [];
    for (const { before, after } of changes) {
      if (before === undefined || after === undefined || before.chain !== after.chain || targetKey(before) !== targetKey(after)) return undefined;
      if (last.targets.get(before.chain) !== this.memos[layout].get(before)) return undefined;
      edits.push([after.chain, this.part(after, layout)]);
    }
    return { ...last, targets: last.targets.with(edits) };
  }
}
