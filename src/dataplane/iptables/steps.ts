/**
 * A full restore over the chains of ours a namespace holds (a restarted sidecar adopting what the
 * last run left, a full resync, a repair after drift) as several `iptables-restore --noflush`
 * runs, each a bounded transaction, where one run would rewrite every chain at once. Pure; the
 * backend runs the steps in order.
 *
 * Why: one transaction holds the old rules and the new at once, beside its `iptables-restore`
 * child. At the budget (2,000 Service ports of 10 endpoints) the restarted sidecar reached its
 * 128 Mi limit that way (docs/decisions/0196-whole-write-over-existing-tables-in-place.md).
 *
 * The steps, in order (each table section of a step commits on its own, filter before nat):
 *  1. the chains `next` has that the namespace does not, declared empty (nothing names them yet);
 *  2. every other chain of `next` but the set chains (dispatch, reject), declared and refilled,
 *     at most `bound` rule lines a step: declaring a chain that exists flushes it, and its new
 *     rules land in the same transaction, so a chain the old dispatch names goes from its old
 *     rules to its new ones at one commit, never through an empty chain;
 *  3. the set chains rewritten whole and the hooks' jumps repaired: from here the namespace
 *     dispatches exactly as `next`, to chains that are complete;
 *  4. the chains of ours `next` does not have, flushed, then deleted, at most `bound` a step
 *     (nothing of `next` names them any more).
 */
import { TABLES, type Layout, type TableName } from '../core/names.js';
import type { Ruleset } from './rulesets.js';
import { jumpRepairs, type Existing, type RestorePlan } from './restore.js';

/** Rule lines (and chain declarations) per step: the size of the first nftables fill's chunks (FILL_CHUNK_ELEMENTS). */
export const RESTORE_STEP_LINES = 2_000;

/** Lines per table, as one restore text (empty tables left out); '' when there is nothing. */
function stepText(sections: Readonly<Record<TableName, readonly string[]>>): string {
  const out: string[] = [];
  for (const table of TABLES) if (sections[table].length > 0) out.push(`*${table}`, ...sections[table], 'COMMIT');
  return out.length === 0 ? '' : `${out.join('\n')}\n`;
}

const empty = (): Record<TableName, string[]> => ({ filter: [], nat: [] });

/** The full change from `have` to `next` in bounded steps (see above). `full` plans only: the caller decides when. Pure. */
export function planRestoreSteps(next: Ruleset, have: Existing, layout: Layout, bound: number = RESTORE_STEP_LINES): RestorePlan {
  const steps: string[] = [];
  const changedChains: string[] = [];
  const deletedChains: string[] = [];
  // 1. New chains, empty.
  const fresh = empty();
  for (const table of TABLES) {
    const had = new Set(have[table].chains);
    for (const chain of next[table].keys()) if (!had.has(chain)) fresh[table].push(`:${chain} - [0:0]`);
  }
  steps.push(stepText(fresh));
  // 2. Every chain but the set chains, declared and refilled, a bounded number of lines a step.
  let cur = empty();
  let lines = 0;
  const close = (): void => {
    steps.push(stepText(cur));
    cur = empty();
    lines = 0;
  };
  for (const table of TABLES)
    for (const [chain, rules] of next[table]) {
      if (layout.setChains.has(chain)) continue;
      if (lines > 0 && lines + rules.length + 1 > bound) close();
      cur[table].push(`:${chain} - [0:0]`, ...rules);
      lines += rules.length + 1;
      changedChains.push(`${table}/${chain}`);
    }
  close();
  // 3. The set chains and the hooks' jumps.
  const last = empty();
  for (const table of TABLES) {
    const sets = [...next[table]].filter(([chain]) => layout.setChains.has(chain));
    for (const [chain] of sets) last[table].push(`:${chain} - [0:0]`);
    last[table].push(...jumpRepairs(have[table], table, layout));
    for (const [chain, rules] of sets) {
      last[table].push(...rules);
      changedChains.push(`${table}/${chain}`);
    }
  }
  steps.push(stepText(last));
  // 4. What `next` does not have: flushed, then deleted.
  for (const op of ['flush', 'delete'] as const) {
    let part = empty();
    let n = 0;
    for (const table of TABLES)
      for (const chain of have[table].chains) {
        if (next[table].has(chain)) continue;
        if (n >= bound) {
          steps.push(stepText(part));
          part = empty();
          n = 0;
        }
        part[table].push(op === 'flush' ? `:${chain} - [0:0]` : `-X ${chain}`);
        n += 1;
        if (op === 'delete') deletedChains.push(`${table}/${chain}`);
      }
    steps.push(stepText(part));
  }
  const kept = steps.filter((t) => t !== '');
  return { text: kept.join(''), full: true, changedChains, deletedChains, steps: kept };
}
