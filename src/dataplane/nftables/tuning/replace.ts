/**
 * A whole write of the sidecar's tables over the tables of ours it finds (a restarted sidecar
 * adopting what the last run left, a full resync, a repair after drift, a change of shard count),
 * in place and in bounded transactions, where one `nft -f` of the whole text would delete and
 * re-create every table in one transaction. Pure; backend.ts does the IO.
 *
 * Why: the one transaction holds the old rules and the new at once. At the budget (2,000 Service
 * ports of 10 endpoints) that was 73.7 MiB of kernel memory and a 135.2 MiB cgroup peak with its
 * `nft` child, past the sidecar's 128 Mi limit before its own memory
 * (docs/decisions/0196-whole-write-over-existing-tables-in-place.md).
 *
 * The transactions, in order:
 *  1. `add table` of every table written (an existing one is kept as it is);
 *  2. the Service ports' parts in chunks of at most FILL_CHUNK_ELEMENTS (endpoint ranges and
 *     rules): each set declared (an existing affinity set keeps its clients), each endpoint map
 *     declared, flushed and refilled, each chain declared, flushed and written whole. A port whose
 *     chain the old dispatch already names changes from its old rules to its new ones at the
 *     commit, never through an empty chain; a new chain is named by nothing yet;
 *  3. per table, root first: its fixed maps and sets flushed and refilled (the dispatch now names
 *     exactly the new chains, all complete), its fixed chains and the root's policy written whole
 *     (policy.ts policyInPlace: the old policy holds until this commit);
 *  4. the tables of ours it does not keep, deleted; then what the tables it keeps hold beyond the
 *     write (read back by name only, REPLACE_LISTING: no elements, no rules; the counters only
 *     where a policy was, COUNTERS_LISTING): those chains
 *     flushed, then deleted, then those sets, maps and counters, in bounded transactions (nothing
 *     names them any more: step 3 rewrote every chain and map that could).
 * Each transaction is all or nothing, and each leaves every served port answering: no dispatch
 * element can name a missing chain (the kernel refuses to delete a chain still named), and a
 * chain is complete when anything names it. The kernel holds the old rules and one chunk's new
 * ones at a time.
 */
import { FILL_CHUNK_ELEMENTS } from './first-fill.js';
import { isShardTable } from './shards.js';
import {
  elementText,
  mapDecl,
  NFT_FAMILY,
  setDecl,
  setKind,
  tableNames,
  tableParts,
  tableRef,
  type NftPlacedTarget,
  type NftPlan,
  type NftRuleset,
  type NftTablePart,
  type NftTarget,
} from '../render.js';
import { POLICY_INPUT_CHAIN, POLICY_OUTPUT_CHAIN, policyInPlace } from '../policy.js';

/**
 * The names of every chain, set and map of the namespace's `inet` tables, without elements or
 * rules (`nft -t -f -` of this): ~7 MiB in `nft` for 1,000 Service ports of 10 endpoints, where a
 * `nft list table` fetches every element (~25 MiB).
 */
export const REPLACE_LISTING = `list chains ${NFT_FAMILY}\nlist sets ${NFT_FAMILY}\nlist maps ${NFT_FAMILY}\n`;

/**
 * The named counters too (`nft -t -f -` of this): nft 1.0.6 fetches every element for it (~25 MiB
 * at 1,000 Service ports), so it is asked only where a policy was written (counters are the
 * policy's only: policy.ts).
 */
export const COUNTERS_LISTING = `list counters ${NFT_FAMILY}\n`;

/** Whether a REPLACE_LISTING output shows a policy hook chain in a table of `root`: then counters of ours may be there too. */
export function policyListed(listing: string, root: string): boolean {
  return (listedObjects(listing).get(root) ?? []).some((o) => o.kind === 'chain' && (o.name === POLICY_INPUT_CHAIN || o.name === POLICY_OUTPUT_CHAIN));
}

/** Items in order, in chunks whose weights add up to at most `max` (an item heavier than that is a chunk alone). Pure. */
export function chunkBy<T>(items: readonly T[], weigh: (item: T) => number, max: number): T[][] {
  const out: T[][] = [];
  let cur: T[] = [];
  let n = 0;
  for (const item of items) {
    const w = weigh(item);
    if (cur.length > 0 && n + w > max) {
      out.push(cur);
      cur = [];
      n = 0;
    }
    cur.push(item);
    n += w;
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

/** What one Service port weighs in a chunk: its endpoint ranges, its rules and its other chains' and sets' lines. */
function weight(t: NftTarget): number {
  let n = 1 + t.rules.length + t.sets.size;
  for (const m of t.maps.values()) n += m.endpoints.length;
  for (const l of t.ownedChains.values()) n += l.length;
  return n;
}

/** A chain over whatever is there: declared (with its hook, for a base chain), flushed, written whole. */
function chainInPlace(T: string, name: string, rules: readonly string[]): string[] {
  const hook = rules[0]?.startsWith('type ') === true ? ` { ${rules[0]} }` : '';
  const out = [`add chain ${T} ${name}${hook}`, `flush chain ${T} ${name}`];
  if (rules.length > 0) out.push(`add chain ${T} ${name} {\n${rules.map((l) => `\t${l}\n`).join('')}}`);
  return out;
}

/** One chunk of Service ports as one `nft -f` text. Pure. */
export function replaceChunkText(chunk: readonly NftPlacedTarget[]): string {
  const out: string[] = [];
  for (const { table, target: t } of chunk) {
    const T = tableRef(table);
    for (const [name, timeout] of t.sets) out.push(`add ${setDecl(name, t.family, timeout).replace(/^set /, `set ${T} `)}`);
    for (const [name, m] of t.maps) out.push(mapDecl(T, name, m), `flush map ${T} ${name}`, mapDecl(T, name, m, true));
    for (const [name, lines] of t.ownedChains) out.push(...chainInPlace(T, name, lines));
    out.push(...chainInPlace(T, t.chain, t.rules));
  }
  return out.length === 0 ? '' : `${out.join('\n')}\n`;
}

/** One table's fixed part over what is there: its maps and sets refilled, its chains written whole, the root's policy. Pure. */
function finalText(part: NftTablePart): string {
  const T = tableRef(part.table.name);
  const out: string[] = [];
  for (const s of part.table.sets) {
    const kind = setKind(s);
    const decl = s.decl.join('; ');
    const elems = part.elements.get(s.name) ?? [];
    out.push(`add ${kind} ${T} ${s.name} { ${decl}; }`, `flush ${kind} ${T} ${s.name}`);
    if (elems.length > 0) out.push(`add ${kind} ${T} ${s.name} { ${decl}; elements = { ${elems.map(elementText).join(', ')} }; }`);
  }
  for (const c of part.table.chains) out.push(...chainInPlace(T, c.name, c.rules));
  out.push(...policyInPlace(T, part.policy));
  return `${out.join('\n')}\n`;
}

/** The whole write of `next` over the tables of ours `existing` (the namespace's, read back), in place. Pure. */
export function planReplace(next: NftRuleset, existing: readonly string[], chunkElements: number = FILL_CHUNK_ELEMENTS): NftPlan {
  const parts = tableParts(next);
  const placed: NftPlacedTarget[] = [];
  for (const part of parts) for (const target of part.targets) placed.push({ table: part.table.name, target });
  const keep = new Set(tableNames(next));
  const tables = [...keep].map((t) => `add table ${tableRef(t)}\n`).join('');
  const finals = parts.map(finalText);
  return {
    // What the report shows: the tables' and fixed parts' transactions (the chunks are made as they go).
    text: tables + finals.join(''),
    full: true,
    changedChains: [...next.targets.keys()],
    deletedChains: [],
    replacedMaps: [],
    onlyReplacements: false,
    replace: {
      tables,
      chunks: chunkBy(placed, (p) => weight(p.target), chunkElements),
      finals,
      staleTables: existing.filter((t) => !keep.has(t)),
    },
  };
}

/** Chains, sets, maps and counters per table in a REPLACE_LISTING output. Pure. */
export function listedObjects(listing: string): Map<string, { kind: 'chain' | 'set' | 'map' | 'counter'; name: string }[]> {
  const out = new Map<string, { kind: 'chain' | 'set' | 'map' | 'counter'; name: string }[]>();
  let table: { kind: 'chain' | 'set' | 'map' | 'counter'; name: string }[] | undefined;
  for (const line of listing.split('\n')) {
    const t = /^table (\S+) (\S+) \{$/.exec(line);
    if (t !== null) {
      const name = t[2] as string;
      table = t[1] === NFT_FAMILY ? (out.get(name) ?? out.set(name, []).get(name)) : undefined;
      continue;
    }
    const o = /^\t(chain|set|map|counter) (\S+) \{$/.exec(line);
    if (o !== null && table !== undefined) table.push({ kind: o[1] as 'chain' | 'set' | 'map' | 'counter', name: o[2] as string });
  }
  return out;
}

/** Every name a table part writes (its fixed part, its Service ports' parts, the policy's). */
function written(part: NftTablePart): Set<string> {
  const names = new Set<string>([...part.table.sets.map((s) => s.name), ...part.table.chains.map((c) => c.name)]);
  for (const t of part.targets) for (const n of [t.chain, ...t.ownedChains.keys(), ...t.sets.keys(), ...t.maps.keys()]) names.add(n);
  const p = part.policy;
  if (p !== undefined) for (const n of [...p.hooks.keys(), ...p.chains.keys(), ...p.sets.keys(), ...p.counters]) names.add(n);
  return names;
}

/**
 * The transactions removing what the kept tables of `next` hold beyond it, from a REPLACE_LISTING
 * output: stale chains flushed, then deleted, then stale sets, maps and counters, each step in
 * transactions of at most `chunk` commands. Only tables of `root` (our shards) are looked at. Pure.
 */
export function staleTexts(listing: string, next: NftRuleset, chunk: number = FILL_CHUNK_ELEMENTS): string[] {
  const root = next.table.name;
  const listed = listedObjects(listing);
  const flushes: string[] = [];
  const chains: string[] = [];
  const others: string[] = [];
  for (const part of tableParts(next)) {
    const name = part.table.name;
    const have = listed.get(name);
    if (have === undefined || !isShardTable(root, name)) continue;
    const keep = written(part);
    const T = tableRef(name);
    for (const o of have) {
      if (keep.has(o.name)) continue;
      if (o.kind === 'chain') {
        flushes.push(`flush chain ${T} ${o.name}`);
        chains.push(`delete chain ${T} ${o.name}`);
      } else others.push(`delete ${o.kind} ${T} ${o.name}`);
    }
  }
  return [flushes, chains, others].flatMap((step) => chunkBy(step, () => 1, chunk).map((c) => `${c.join('\n')}\n`));
}
