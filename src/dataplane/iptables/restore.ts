/**
 * Restore plan and parse: the `iptables-restore --noflush` text that moves a namespace from what it
 * has to a rendered ruleset (full or partial), the text that removes everything of ours, and the
 * parse of iptables-save output into what is ours. Pure.
 *
 * Two tables, and iptables-restore commits each separately: filter goes first, so a Service that
 * loses its last endpoint rejects before its DNAT rules go (rules.ts explains why every mix of
 * old and new is safe).
 */
import { SIDECAR_LAYOUT, TABLES, type Layout, type TableName } from '../core/names.js';
import type { Ruleset } from './rulesets.js';
import { changedEntries } from '../core/engine.js';

/** Ours as found in a namespace (from iptables-save), per table. */
export interface ExistingTable {
  /** Chains whose name starts with our prefix. */
  readonly chains: readonly string[];
  /** Rules in a hooked built-in chain that jump to one of our chains, as `<CHAIN> <spec>` (the text after `-A `). */
  readonly jumps: readonly string[];
}
export type Existing = Readonly<Record<TableName, ExistingTable>>;
export const NOTHING_EXISTING: Existing = { filter: { chains: [], jumps: [] }, nat: { chains: [], jumps: [] } };

export interface RestorePlan {
  /** The restore input; '' when there is nothing to do. */
  readonly text: string;
  readonly full: boolean;
  /** `table/chain` declared (created or flushed) and refilled. */
  readonly changedChains: readonly string[];
  /** `table/chain` deleted. */
  readonly deletedChains: readonly string[];
  /** The same change as restores run one after another, each a bounded transaction (steps.ts); absent: `text` in one. */
  readonly steps?: readonly string[];
}

function sameLines(a: readonly string[], b: readonly string[]): boolean {
  return a === b || (a.length === b.length && a.every((l, i) => l === b[i]));
}

/**
 * Which chains a sync must rewrite. Full (start-up, after drift or a failure, or when the
 * previous state is unknown): every chain of ours is declared (which under --noflush flushes just
 * that chain) and refilled, chains of ours that should not exist are deleted, and the OUTPUT jumps
 * are repaired to exactly one. Partial: only Service chains whose lines differ from what was
 * applied last are rewritten, chains that disappeared are deleted, and the dispatch and reject
 * chains get single-rule `-D`/`-A` edits; everything else in the namespace is not even mentioned.
 * So an endpoint change is one chain rewrite, and a Service coming or going is one chain plus one
 * rule, whatever the number of Services.
 */
export function planRestore(next: Ruleset, prev: Ruleset | undefined, existing: Existing | undefined, full: boolean, layout: Layout = SIDECAR_LAYOUT): RestorePlan {
  const isFull = full || prev === undefined;
  const have = existing ?? NOTHING_EXISTING;
  // One flat list of lines, joined once: at 5,000 Services the text is several MB.
  const out: string[] = [];
  const changedChains: string[] = [];
  const deletedChains: string[] = [];
  for (const table of TABLES) {
    const want = next[table];
    const rewrite: string[] = [];
    const head: string[] = [];
    const removeRules: string[] = [];
    const appendRules: string[] = [];
    const gone = isFull ? have[table].chains.filter((c) => !want.has(c)) : [];
    if (isFull) rewrite.push(...want.keys());
    // Partial: only the chains that differ (engine.ts: two versions of one render's chains cost the change, not the table).
    else
      for (const [chain, { before: old, after: lines }] of changedEntries(prev?.[table], want, sameLines)) {
        if (lines === undefined) gone.push(chain);
        else if (old !== undefined && layout.setChains.has(chain)) {
          // A Service came or went: edit its one rule instead of rewriting a chain of 5,000.
          const edits = editSetChain(old, lines, chain === layout.rejectChain);
          removeRules.push(...edits.remove);
          appendRules.push(...edits.append);
          changedChains.push(`${table}/${chain}`);
        } else rewrite.push(chain);
      }
    if (isFull) head.push(...jumpRepairs(have[table], table, layout));
    if (rewrite.length + head.length + gone.length + removeRules.length + appendRules.length === 0) continue;
    out.push(`*${table}`);
    for (const chain of rewrite) out.push(`:${chain} - [0:0]`);
    // Declaring a stale chain flushes it; its only reference (a dispatch rule) is deleted or
    // rewritten below in the same transaction; then it can be deleted.
    for (const chain of gone) out.push(`:${chain} - [0:0]`);
    for (const l of head) out.push(l);
    for (const l of removeRules) out.push(l);
    for (const chain of rewrite) {
      for (const l of want.get(chain) ?? []) out.push(l);
      changedChains.push(`${table}/${chain}`);
    }
    // After the rewritten chains: an appended dispatch rule may jump to a chain created above.
    for (const l of appendRules) out.push(l);
    for (const chain of gone) {
      out.push(`-X ${chain}`);
      deletedChains.push(`${table}/${chain}`);
    }
    out.push('COMMIT');
  }
  return { text: out.length === 0 ? '' : `${out.join('\n')}\n`, full: isFull, changedChains, deletedChains };
}

/** Exactly one of each canonical jump of a table: keep the first one that is, delete every other jump to ours, insert the missing. */
export function jumpRepairs(have: ExistingTable, table: TableName, layout: Layout): string[] {
  const out: string[] = [];
  const canonical = layout.hooks[table].map((h) => `${h.chain} ${h.spec}`);
  const kept = new Set<string>();
  for (const jump of have.jumps) {
    if (canonical.includes(jump) && !kept.has(jump)) kept.add(jump);
    else out.push(`-D ${jump}`);
  }
  for (const h of layout.hooks[table]) if (!kept.has(`${h.chain} ${h.spec}`)) out.push(`-I ${h.chain} 1 ${h.spec}`);
  return out;
}

/**
 * `-D`/`-A` lines turning the rules `old` into `next` (both `-A CHAIN spec` lines). `ordered`: the
 * chain is groups of rules whose order within a group does not matter but whose group order does
 * (the reject chain: each port's own rule before the refusal of its address, render.ts); then a
 * new rule that comes before a kept one is inserted at its place in `next` (`-I CHAIN k`) and the
 * rest appended, so the chain holds `next` in its order.
 */
export function editSetChain(old: readonly string[], next: readonly string[], ordered = false): { remove: string[]; append: string[] } {
  const before = new Set(old);
  const after = new Set(next);
  const added = next.filter((l) => !before.has(l));
  const remove = old.filter((l) => !after.has(l)).map((l) => `-D ${l.slice('-A '.length)}`);
  if (!ordered || added.length === 0) return { remove, append: added };
  let lastKept = -1;
  next.forEach((l, i) => {
    if (before.has(l)) lastKept = i;
  });
  // After the removals the chain is the kept rules in next's order: inserting each new one at its
  // index in next, in that order, gives next exactly.
  const inserted: string[] = [];
  const append: string[] = [];
  next.forEach((l, i) => {
    if (before.has(l)) return;
    if (i < lastKept) {
      const spec = l.slice('-A '.length);
      const space = spec.indexOf(' ');
      inserted.push(`-I ${spec.slice(0, space)} ${i + 1}${spec.slice(space)}`);
    } else append.push(l);
  });
  return { remove, append: [...inserted, ...append] };
}

/** Restore input that removes everything of ours that `existing` lists (jumps first, then chains). */
export function planCleanup(existing: Existing): string {
  const sections: string[] = [];
  for (const table of TABLES) {
    const { chains, jumps } = existing[table];
    if (chains.length === 0 && jumps.length === 0) continue;
    sections.push([`*${table}`, ...chains.map((c) => `:${c} - [0:0]`), ...jumps.map((j) => `-D ${j}`), ...chains.map((c) => `-X ${c}`), 'COMMIT'].join('\n'));
  }
  return sections.length === 0 ? '' : `${sections.join('\n')}\n`;
}

/** Parses iptables-save output into what is ours per table. Pure, for both back ends. */
export function parseExisting(saveText: string, layout: Layout = SIDECAR_LAYOUT): Existing {
  const result: Record<TableName, { chains: string[]; jumps: string[] }> = { filter: { chains: [], jumps: [] }, nat: { chains: [], jumps: [] } };
  let table: TableName | undefined;
  for (const raw of saveText.split('\n')) {
    const line = raw.trim();
    if (line.startsWith('*')) {
      const name = line.slice(1);
      table = name === 'filter' || name === 'nat' ? name : undefined;
      continue;
    }
    if (table === undefined) continue;
    if (line.startsWith(`:${layout.prefix}`)) {
      result[table].chains.push(line.slice(1).split(' ')[0] ?? '');
    } else {
      const spec = ourJump(line, layout);
      if (spec !== undefined) result[table].jumps.push(spec);
    }
  }
  return result;
}

/**
 * `<CHAIN> <spec>` of a rule in one of the layout's hooked built-in chains (`-A CHAIN ...`, as -S
 * and iptables-save print it) that jumps to one of our chains; undefined for any other line.
 */
export function ourJump(line: string, layout: Layout = SIDECAR_LAYOUT): string | undefined {
  if (!line.startsWith('-A ')) return undefined;
  const rule = line.slice('-A '.length).trim();
  const chain = rule.split(' ')[0] ?? '';
  if (!hookedChains(layout).has(chain)) return undefined;
  const target = / -[jg] (\S+)/.exec(` ${rule.slice(chain.length)}`)?.[1];
  return target !== undefined && target.startsWith(layout.prefix) ? rule : undefined;
}

/** The built-in chains a layout jumps from, any table. */
export function hookedChains(layout: Layout): Set<string> {
  return new Set(TABLES.flatMap((t) => layout.hooks[t].map((h) => h.chain)));
}

/**
 * What is ours when this process applied `prev` itself: its chains (only we create chains with our
 * prefix, and a failure forgets `prev`), plus the jumps as listed now (`-S OUTPUT` and the other
 * hooked chains: ~7 ms each where a whole iptables-save of 1,000 Services takes ~200 ms).
 */
export function existingFromApplied(prev: Ruleset, outputLines: Readonly<Record<TableName, string>>, layout: Layout = SIDECAR_LAYOUT): Existing {
  const table = (t: TableName): ExistingTable => ({
    chains: [...prev[t].keys()],
    jumps: outputLines[t]
      .split('\n')
      .map((l) => ourJump(l.trim(), layout))
      .filter((j): j is string => j !== undefined),
  });
  return { filter: table('filter'), nat: table('nat') };
}
