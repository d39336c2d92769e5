/**
 * The iptables back end's stage of the engine (engine.ts): the shared render's served targets ->
 * the per-family rulesets (rules.ts), one step per render, as nftables/stage.ts is for nftables. It
 * lives with the iptables back end, so a program running nftables never builds these rulesets.
 * A render that says what changed since the one this stage saw last (its delta) edits the last
 * rulesets in O(changes); any other is rendered from scratch. Either way the rulesets hold
 * exactly what iptablesRules of the render's targets holds (test/sidecar/incremental.test.ts).
 */
import { Snapshot } from '../core/engine.js';
import type { Chains, IptablesRules, Ruleset } from './rulesets.js';
import type { IpFamily, Rendered, ResolvedTarget } from '../core/model.js';
import type { Layout } from '../core/names.js';
import { chains, renderRuleset, targetLines, type TargetLines } from './render.js';

/** Pure: both families' rulesets of a render's served targets, from scratch (`lines`: a memo of each target's lines). */
export function iptablesRules(targets: readonly ResolvedTarget[], layout: Layout, lines: (r: ResolvedTarget) => TargetLines = targetLines(layout)): IptablesRules {
  return { v4: renderRuleset(targets, 4, layout, lines), v6: renderRuleset(targets, 6, layout, lines) };
}

export class IptablesStage {
  private last: { readonly version: number; readonly rules: IptablesRules } | undefined;
  /** Each resolved target's rule lines, kept while the render keeps the target (the same object when unchanged). */
  private readonly lines: (r: ResolvedTarget) => TargetLines;
  constructor(readonly layout: Layout) {
    this.lines = targetLines(layout);
  }

  step(rendered: Rendered): IptablesRules {
    const { version, delta } = rendered;
    const last = this.last;
    if (last !== undefined && version === last.version) return last.rules;
    const targets = rendered.resolution.targets;
    const edited = last !== undefined && delta?.from === last.version ? this.edit(last.rules, delta.targets, targets) : undefined;
    const rules = edited ?? iptablesRules(targets, this.layout, this.lines);
    this.last = version === undefined ? undefined : { version, rules };
    return rules;
  }

  /**
   * The last rulesets with the changed targets' chains replaced (a replaced chain keeps its place,
   * as in a full render); undefined when a change is not a replacement in place (a chain or
   * dispatch rule that moved: the from-scratch render decides those).
   */
  private edit(last: IptablesRules, changes: NonNullable<Rendered['delta']>['targets'], targets: readonly ResolvedTarget[]): IptablesRules | undefined {
    const touched: Record<IpFamily, { old: ResolvedTarget; next: ResolvedTarget }[]> = { 4: [], 6: [] };
    for (const { before: old, after: next } of changes) {
      if (old === undefined || next === undefined || old.chain !== next.chain || old.target.family !== next.target.family) return undefined;
      const [was, now] = [this.lines(old), this.lines(next)];
      if (was.dispatch !== now.dispatch || was.reject !== now.reject) return undefined;
      touched[next.target.family].push({ old, next });
    }
    const ruleset = (family: IpFamily, was: Ruleset): Ruleset => {
      const edits = touched[family];
      if (edits.length === 0) return was;
      const nat = edit(
        was.nat,
        edits.map(({ next }) => [next.chain, this.lines(next).rules] as const),
      );
      // The reject chain lists the ports without endpoints: redone only when one gained its first or lost its last.
      const rejectChanged = edits.some(({ old, next }) => refusal(old) !== refusal(next));
      return { family, nat, filter: rejectChanged ? renderRuleset(targets, family, this.layout, this.lines).filter : was.filter };
    };
    return { v4: ruleset(4, last.v4), v6: ruleset(6, last.v6) };
  }
}

/** The next version of a table's chains: O(changes) on the engine's snapshot, a copy of any other map. */
function edit(was: Chains, changes: readonly (readonly [string, readonly string[]])[]): Chains {
  if (was instanceof Snapshot) return was.with(changes);
  const next = new Map(was);
  for (const [k, v] of changes) next.set(k, v);
  return chains(next);
}

/** What the reject chain holds for a target: nothing while it has endpoints, else its reject or drop rule. */
const refusal = (r: ResolvedTarget): string => (r.endpoints.length === 0 ? (r.choice === 'drop' ? 'drop' : 'reject') : '');
