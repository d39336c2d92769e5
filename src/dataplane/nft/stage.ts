/**
 * The nftables back end's stage of the engine (../engine.ts): the shared render's served targets
 * -> the sidecar's table (render.ts), one step per render. A render that says what changed since
 * the one this stage saw last (its delta) edits the last table in O(changes); any other is
 * rendered from scratch. Either way the table holds exactly what renderNft of the render's
 * targets holds (test/sidecar/incremental.test.ts).
 */
import { Snapshot } from '../engine.js';
import type { Rendered, ResolvedTarget } from '../model.js';
import { renderNft, renderTarget, targetKey, type NftRuleset, type NftTarget } from './render.js';

export class NftStage {
  /** Each resolved target's part, kept while the render cache keeps the target (the same object when unchanged). */
  private readonly memo = new WeakMap<ResolvedTarget, NftTarget>();
  private last: { readonly version: number; readonly ruleset: NftRuleset } | undefined;

  private part(r: ResolvedTarget): NftTarget {
    let t = this.memo.get(r);
    if (t === undefined) {
      t = renderTarget(r);
      this.memo.set(r, t);
    }
    return t;
  }

  step(rendered: Rendered): NftRuleset {
    const { version, delta } = rendered;
    const last = this.last;
    if (last !== undefined && version === last.version) return last.ruleset;
    const edited = last !== undefined && delta?.from === last.version ? this.edit(last.ruleset, delta.targets) : undefined;
    const ruleset = edited ?? renderNft(rendered.resolution.targets, this.memo);
    this.last = version === undefined ? undefined : { version, ruleset };
    return ruleset;
  }

  /**
   * The last table with the changed targets' parts replaced; undefined when the change is not a
   * replacement in place (a chain or key that moved, a target the table did not hold: the
   * from-scratch collection decides those, first come first served).
   */
  private edit(last: NftRuleset, changes: NonNullable<Rendered['delta']>['targets']): NftRuleset | undefined {
    if (!(last.targets instanceof Snapshot)) return undefined;
    const edits: [string, NftTarget][] = [];
    for (const { before, after } of changes) {
      if (before === undefined || after === undefined || before.chain !== after.chain || targetKey(before) !== targetKey(after)) return undefined;
      if (last.targets.get(before.chain) !== this.memo.get(before)) return undefined;
      edits.push([after.chain, this.part(after)]);
    }
    return { table: last.table, targets: last.targets.with(edits) };
  }
}
