/**
 * Drift detection: has anyone else changed our rules since we wrote them? Pure comparisons of what
 * iptables lists now with what this process applied last; the IO is in core/pipeline.ts.
 *
 * Instead of rewriting everything periodically (0.3 s of CPU at 1,000 Services, 2.5 s at 5,000, in
 * every pod), as kube-proxy does with its canary chains, a cheap check runs periodically and a full
 * rewrite follows only when it finds drift:
 * - quick (every check): `-S` of each built-in chain we hook (our jumps exactly as written, once
 *   each) and of our set chains (dispatch and reject: every rule exactly as written). One listing
 *   of a chain, not a table dump; it catches a flushed or deleted table, a removed or duplicated
 *   jump, and any rule of the dispatch or reject chain removed, added or altered. A chain that is
 *   missing fails the listing, which is drift too.
 * - deep (every Nth check): one iptables-save per family, and every chain of ours with its rule
 *   count compared with what was written (a per-Service chain flushed, deleted, or given an extra
 *   rule). Counts, not text: iptables-save normalises some rules (`--probability` digits,
 *   `recent` defaults), so only the set chains, which it prints as we write them, are compared as
 *   text.
 */
import type { Ruleset } from './rulesets.js';
import { TABLES, type Layout, type TableName } from '../core/names.js';

/** One chain the quick check lists (`-t <table> -S <chain>`). */
export interface DriftProbe {
  readonly table: TableName;
  readonly chain: string;
  /** The `-A` lines of ours expected in the listing, in no particular order. */
  readonly expect: readonly string[];
  /** Hooked built-in chain: only our jumps in it are compared (other rules are foreign). */
  readonly hooked: boolean;
}

/** The quick check's listings for one family: hooked built-in chains, then our set chains that exist. */
export function quickProbes(applied: Ruleset, layout: Layout): DriftProbe[] {
  const out: DriftProbe[] = [];
  for (const table of TABLES) {
    const byChain = new Map<string, string[]>();
    for (const h of layout.hooks[table]) byChain.set(h.chain, [...(byChain.get(h.chain) ?? []), `-A ${h.chain} ${h.spec}`]);
    for (const [chain, expect] of byChain) out.push({ table, chain, expect, hooked: true });
    for (const chain of layout.setChains) {
      const lines = applied[table].get(chain);
      if (lines !== undefined) out.push({ table, chain, expect: lines, hooked: false });
    }
  }
  return out;
}

/** Compares two lists of rule lines as multisets; says what differs, briefly. */
function sameRules(what: string, have: readonly string[], want: readonly string[]): string | undefined {
  if (have.length !== want.length) return `${what}: ${have.length} rules of ours, ${want.length} written`;
  const count = new Map<string, number>();
  for (const l of want) count.set(l, (count.get(l) ?? 0) + 1);
  for (const l of have) {
    const n = count.get(l) ?? 0;
    if (n === 0) return `${what}: rule not written by us: ${l}`;
    count.set(l, n - 1);
  }
  return undefined;
}

/**
 * Drift in one quick listing (`-S` output, or undefined when the listing failed: the chain or the
 * table is gone). Returns why, or undefined when it is as written.
 */
export function compareProbe(probe: DriftProbe, listing: string | undefined, layout: Layout): string | undefined {
  const what = `${probe.table}/${probe.chain}`;
  if (listing === undefined) return `${what}: cannot be listed (chain or table missing)`;
  const lines = listing.split('\n').filter((l) => l.startsWith(`-A ${probe.chain} `));
  const ours = probe.hooked ? lines.filter((l) => / -[jg] (\S+)/.exec(l)?.[1]?.startsWith(layout.prefix) === true) : lines;
  return sameRules(what, ours, probe.expect);
}

/** Rule count per chain of ours in one table of an iptables-save text. */
function countOurs(saveText: string, layout: Layout): Map<TableName, Map<string, number>> {
  const out = new Map<TableName, Map<string, number>>(TABLES.map((t) => [t, new Map()]));
  let table: Map<string, number> | undefined;
  for (const line of saveText.split('\n')) {
    if (line.startsWith('*')) {
      table = out.get(line.slice(1).trim() as TableName);
    } else if (table !== undefined && line.startsWith(`:${layout.prefix}`)) {
      table.set(line.slice(1, line.indexOf(' ')), 0);
    } else if (table !== undefined && line.startsWith(`-A ${layout.prefix}`)) {
      const chain = line.slice(3, line.indexOf(' ', 3));
      table.set(chain, (table.get(chain) ?? 0) + 1);
    }
  }
  return out;
}

/** Deep check of one family: every chain of ours present with as many rules as written, no other chain of ours. */
export function compareSave(applied: Ruleset, saveText: string, layout: Layout): string | undefined {
  const found = countOurs(saveText, layout);
  for (const table of TABLES) {
    const have = found.get(table) ?? new Map<string, number>();
    for (const [chain, lines] of applied[table]) {
      const n = have.get(chain);
      if (n === undefined) return `${table}/${chain}: missing`;
      if (n !== lines.length) return `${table}/${chain}: ${n} rules, ${lines.length} written`;
    }
    for (const chain of have.keys()) if (!applied[table].has(chain)) return `${table}/${chain}: a chain of ours that was not written`;
  }
  return undefined;
}
