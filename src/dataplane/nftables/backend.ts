/**
 * The nftables back end behind the seam (../core/seam.ts): its own table `inet multus_proxy`
 * (render.ts), written with one `nft -f -` per change, which the kernel commits as one
 * transaction. A full sync replaces the table whole; a partial one names only the Service ports
 * that changed (map elements, their chains), so it never reads or lists the table. A change that
 * is only endpoint-map refills goes through the element writer (element-writer.ts: one netlink
 * batch, no nft) when there is one; if it has none or the write fails, through `nft -f` as any
 * other change (the text replaces those maps' contents whole, so it is right whatever the failed
 * write left). The sidecar's first sync into a namespace without our tables goes in bounded
 * transactions: each table's skeleton by `nft -f`, then the elements in chunks, through the
 * element writer or as `nft -f` text (first-fill.ts). Past PORTS_PER_SHARD Service ports the table is spread over shard tables
 * (shards.ts): each write, listing and drift check names the table that holds the part, and a
 * full sync and cleanup remove every table of ours they do not keep. IO only; every decision is
 * in render.ts.
 */
import type { BackendCleanup, RuleBackend, Stage, WriteReport } from '../core/seam.js';
import { lineContext, summarize, type Exec } from '../core/exec.js';
import type { Rendered } from '../core/model.js';
import type { Logger } from '../../log.js';
import type { ElementWriterHandle } from './tuning/element-writer.js';
import { NftStage } from './stage.js';
import { TABLES_LISTING } from '../core/exec.js';
import {
  cleanupText,
  countNftRules,
  fullText,
  ENDPOINT_MAP_PREFIX,
  NFT_FAMILY,
  NFT_TABLE,
  planNft,
  tableNames,
  tableParts,
  wholeTableDue,
  type NftFirstFill,
  type NftPlan,
  type NftReplace,
  type NftRuleset,
  type NftTablePart,
} from './render.js';
import { fillChunkText, planFirstFill } from './tuning/first-fill.js';
import { shardTablesIn } from './tuning/shards.js';
import { COUNTERS_LISTING, planReplace, policyListed, REPLACE_LISTING, replaceChunkText, staleTexts } from './tuning/replace.js';
import { policyChainCounts } from './policy.js';

/** Whether the namespace holds our table (what a full sync needs to know: it replaces the table whole). */
export interface NftExisting {
  readonly table: boolean;
  /** Our tables present: the root and its shards (shards.ts); a full sync removes those it no longer has. */
  readonly tables: readonly string[];
}

export type NftBackend = RuleBackend<NftRuleset, NftExisting, NftPlan>;

/** An `nft -f` run that failed, with the offending input line when nft named one. */
export class NftError extends Error {
  constructor(
    readonly stderr: string,
    readonly line: number | undefined,
    readonly context: readonly string[],
  ) {
    super(`nft -f failed: ${summarize(stderr)}${line !== undefined ? ` at input line ${line}: ${context.join(' | ')}` : ''}`);
    this.name = 'NftError';
  }
}

/** nft names failures as `/dev/stdin:LINE:COL-COL: Error: ...`. */
export function nftFailedLine(stderr: string): number | undefined {
  const m = /^[^:\n]*:(\d+):\d+(?:-\d+)?: Error/m.exec(stderr);
  return m?.[1] === undefined ? undefined : Number(m[1]);
}

export async function nftApply(exec: Exec, text: string): Promise<void> {
  if (text === '') return;
  const r = await exec('nft', ['-f', '-'], text);
  if (r.code !== 0) {
    const line = nftFailedLine(r.stderr);
    throw new NftError(r.stderr, line, lineContext(text, line));
  }
}

/** Chain name -> rule count, per chain of `nft list table` output (base chains' hook lines not counted). */
export function parseNftChains(listing: string): Map<string, number> {
  const out = new Map<string, number>();
  let chain: string | undefined;
  for (const raw of listing.split('\n')) {
    const line = raw.trim();
    const open = /^chain (\S+) \{$/.exec(line);
    if (open?.[1] !== undefined) {
      chain = open[1];
      out.set(chain, 0);
    } else if (line === '}') chain = undefined;
    else if (chain !== undefined && line !== '' && !line.startsWith('type ')) out.set(chain, (out.get(chain) ?? 0) + 1);
  }
  return out;
}

/** Elements of one map or set in `nft list map|set` output (`elements = { a, b, ... }`, possibly over lines). */
export function countElements(listing: string): number {
  const m = /elements = \{([^}]*)\}/s.exec(listing);
  if (m?.[1] === undefined) return 0;
  // Elements are separated by ", " (a map's own "{ ... }" never appears in our element keys).
  return m[1].split(',').filter((e) => e.trim() !== '').length;
}

/** Elements per map of a whole-table listing (`map <name> { ... }` blocks). */
export function parseNftMaps(listing: string): Map<string, number> {
  const out = new Map<string, number>();
  // A map block ends at the first line that is only `}` (element lists close on their own line's `}`).
  for (const m of listing.matchAll(/^\s*map (\S+) \{\n(.*?)^\s*\}$/gms)) if (m[1] !== undefined) out.set(m[1], countElements(m[2] ?? ''));
  return out;
}

/** A chain's rule count as `nft list` shows it: a hook chain's `type ...` line is not a rule. */
const ruleCount = (rules: readonly string[]): number => rules.filter((l) => !l.startsWith('type ')).length;

/** What one table should hold, chain by chain, after writing it (the fixed chains included). */
export function expectedChains(part: NftTablePart): Map<string, number> {
  const want = new Map<string, number>(part.table.chains.map((c) => [c.name, ruleCount(c.rules)]));
  for (const t of part.targets) {
    want.set(t.chain, t.rules.length);
    for (const [name, lines] of t.ownedChains) want.set(name, lines.length);
  }
  for (const [name, n] of policyChainCounts(part.policy)) want.set(name, n);
  return want;
}

/** `nft list` output of one or more tables, by table name (a block from `table <family> <name> {` to the `}` closing it). */
export function splitTables(listing: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of listing.matchAll(/^table \S+ (\S+) \{.*?^\}$/gms)) if (m[1] !== undefined) out.set(m[1], m[0]);
  return out;
}

/** Drift in a listing of our tables (`nft list table` of each, together) compared with what was written; undefined when it matches. Pure. */
export function compareTable(applied: NftRuleset, listing: string): string | undefined {
  const tables = splitTables(listing);
  for (const part of tableParts(applied)) {
    const l = tables.get(part.table.name);
    const drift = l === undefined ? `nftables: table ${part.table.name} missing` : comparePart(part, l);
    if (drift !== undefined) return drift;
  }
  return undefined;
}

/** Drift in one table's listing. */
function comparePart(part: NftTablePart, listing: string): string | undefined {
  const have = parseNftChains(listing);
  const chains = expectedChains(part);
  for (const [chain, n] of chains) {
    const got = have.get(chain);
    if (got === undefined) return `nftables ${chain}: missing`;
    if (got !== n) return `nftables ${chain}: ${got} rules, ${n} written`;
  }
  for (const chain of have.keys()) if (!chains.has(chain)) return `nftables ${chain}: a chain of ours that was not written`;
  // Endpoint maps, by element count (as the fixed maps and sets; one element per endpoint's range).
  const maps = parseNftMaps(listing);
  const want = new Set<string>();
  for (const t of part.targets)
    for (const [name, m] of t.maps) {
      want.add(name);
      const got = maps.get(name);
      if (got === undefined) return `nftables ${name}: missing`;
      if (got !== m.endpoints.length) return `nftables ${name}: ${got} elements, ${m.endpoints.length} written`;
    }
  for (const name of maps.keys()) if (name.startsWith(ENDPOINT_MAP_PREFIX) && !want.has(name)) return `nftables ${name}: a map of ours that was not written`;
  return undefined;
}

/**
 * The back end for one table of ours: the sidecar's (its stage renders it from the resolved
 * targets) or another program's, whose own stage makes it (the node agent).
 */
export interface NftBackendOptions {
  /** The element writer being started (createElementWriter), undefined when it cannot be used. */
  readonly elementWriter?: Promise<ElementWriterHandle | undefined>;
  readonly logger?: Pick<Logger, 'warn'>;
  /** The sidecar's table: endpoint maps up to this many Service ports (render.ts MAX_ENDPOINT_MAPS). */
  readonly maxEndpointMaps?: number;
  /** The sidecar's table: Service ports per table before they spread over shard tables (shards.ts PORTS_PER_SHARD; Infinity: one table). */
  readonly portsPerShard?: number;
  /** The sidecar's table: the shard count it was last written with, which the next count follows (shards.ts shardsAfter; unset: none). */
  readonly shardsBefore?: number;
  /** The program's own stage (the node agent's table); default: the sidecar's (stage.ts). */
  readonly stage?: Stage<NftRuleset>;
}

/** A table only its program's stage can make: a clear failure if none was given. */
const missingStage = (table: string): Stage<NftRuleset> => ({
  step: () => {
    throw new Error(`the nftables table ${table} is rendered by its program, and it passed no stage`);
  },
});

/**
 * The skeletons, then the elements in chunks (first-fill.ts), each chunk through the writer while
 * it works, else as `add map` text by `nft -f`; whether the writer wrote every chunk. A failure
 * removes what the fill wrote, so the retry is a first fill again (bounded), never one
 * whole-table transaction; the sidecar is not ready before that, so nothing served is lost.
 */
async function firstFill(exec: Exec, opts: NftBackendOptions, fill: NftFirstFill, tables: readonly string[]): Promise<boolean> {
  let writer = fill.chunks.length > 0 ? await opts.elementWriter : undefined;
  let all = writer !== undefined;
  try {
    for (const skeleton of fill.skeletons) await nftApply(exec, skeleton);
    for (const chunk of fill.chunks) {
      if (writer !== undefined)
        try {
          await writer.write(chunk.writes);
          continue;
        } catch (e) {
          // A refused batch applied nothing: this chunk and the rest go as text.
          opts.logger?.warn(`nftables element writer failed on the first sync's elements, writing them with nft -f: ${e instanceof Error ? e.message : String(e)}`);
          writer = undefined;
          all = false;
        }
      await nftApply(exec, fillChunkText(chunk));
    }
  } catch (e) {
    await nftApply(exec, cleanupText(tables[0], tables)).catch(() => undefined);
    throw e;
  }
  return all;
}

/**
 * A whole write over the tables of ours found, in place, in bounded transactions (replace.ts);
 * how it went. If a transaction fails (a table of ours that is not as any version of this program
 * writes it: a set of another type under one of our names), the tables are written whole in one
 * transaction instead, as before the bounded write: right whatever the failed step left, at the
 * cost of holding the old and the new rules at once.
 */
async function replaceInPlace(exec: Exec, opts: NftBackendOptions, r: NftReplace, next: NftRuleset): Promise<'replace' | 'replace-whole'> {
  try {
    await nftApply(exec, r.tables);
    for (const chunk of r.chunks) await nftApply(exec, replaceChunkText(chunk));
    for (const text of r.finals) await nftApply(exec, text);
    if (r.staleTables[0] !== undefined) await nftApply(exec, cleanupText(r.staleTables[0], r.staleTables));
    const list = async (what: string): Promise<string> => {
      const l = await exec('nft', ['-t', '-f', '-'], what);
      if (l.code !== 0) throw new Error(`nft list failed (exit ${l.code}): ${summarize(l.stderr)}`);
      return l.stdout;
    };
    const names = await list(REPLACE_LISTING);
    const counters = policyListed(names, next.table.name) ? await list(COUNTERS_LISTING) : '';
    for (const text of staleTexts(names + counters, next)) await nftApply(exec, text);
    return 'replace';
  } catch (e) {
    opts.logger?.warn(`nftables: the write in place over our tables failed, writing them whole in one transaction: ${e instanceof Error ? e.message : String(e)}`);
    await nftApply(exec, fullText(next, r.staleTables));
    return 'replace-whole';
  }
}

/** One sync's write: the first fill, the element writer for map replacements, or one `nft -f`. */
async function writeNft(exec: Exec, opts: NftBackendOptions, plan: NftPlan, next: NftRuleset): Promise<WriteReport[]> {
  const t0 = process.hrtime.bigint();
  let via: WriteReport['via'];
  if (plan.fill !== undefined) {
    via = (await firstFill(exec, opts, plan.fill, tableNames(next))) ? 'first-fill' : 'first-fill-text';
  } else if (plan.replace !== undefined) {
    via = await replaceInPlace(exec, opts, plan.replace, next);
  } else {
    const written = plan.onlyReplacements && (await throughWriter(await opts.elementWriter, plan.replacedMaps, opts.logger));
    if (!written) await nftApply(exec, plan.text);
    if (written) via = 'element-writer';
  }
  // One transaction for both families (or one first fill): reported as one unit (family 4 by convention).
  return [
    {
      family: 4,
      text: plan.text,
      changedChains: plan.changedChains,
      deletedChains: plan.deletedChains,
      writeMs: Number(process.hrtime.bigint() - t0) / 1e6,
      rules: countNftRules(next),
      ...(via !== undefined ? { via } : {}),
    },
  ];
}

export function createNftBackend(exec: Exec, table: string = NFT_TABLE, opts: NftBackendOptions = {}): NftBackend {
  // The engine's nftables stage: a render's delta edits the last table (stage.ts); another
  // program's table (the node agent's) comes from that program's stage.
  const stage: Stage<NftRuleset> = opts.stage ?? (table === NFT_TABLE ? new NftStage(opts.maxEndpointMaps, opts.portsPerShard, opts.shardsBefore) : missingStage(table));
  const list = async (what: string): Promise<string | undefined> => {
    const r = await exec('nft', ['list', ...what.split(' ')]);
    return r.code === 0 ? r.stdout : undefined;
  };
  const read = async (): Promise<NftExisting> => {
    // Every family's tables: the same listing tables-present.ts asks for, run once (read-ahead.ts).
    const r = await exec('nft', TABLES_LISTING);
    if (r.code !== 0) throw new Error(`nft list chains failed (exit ${r.code}): ${summarize(r.stderr)}`);
    const tables = shardTablesIn(r.stdout, NFT_FAMILY, table);
    return { table: tables.length > 0, tables };
  };
  return {
    flavor: () => Promise.resolve('nftables'),
    rules: (rendered: Rendered) => stage.step(rendered),
    read,
    // Unsure (nft missing or failing) is present: cleanup() then runs and says why it failed.
    present: () =>
      read().then(
        (e) => e.table,
        () => true,
      ),
    holdsOurs: (existing) => existing?.table === true,
    plan: (next, prev, existing, full) => {
      // The sidecar's table into a namespace with nothing of ours (read back, not assumed): a first
      // fill in bounded transactions; over tables of ours (read back, or the ones this process
      // wrote), in place, in bounded transactions too. Another program's table (the node agent's,
      // in the host's namespace, with no readiness to hold its users) is written whole.
      const bounded = table === NFT_TABLE && opts.stage === undefined && wholeTableDue(next, prev, full);
      const fill = bounded && existing?.table === false ? planFirstFill(next) : undefined;
      const found = existing === undefined ? (prev === undefined ? undefined : tableNames(prev)) : existing.table ? existing.tables : undefined;
      const replace = bounded && fill === undefined && found !== undefined ? planReplace(next, found) : undefined;
      return fill ?? replace ?? planNft(next, prev, full, existing?.tables);
    },
    write: (plan, next) => writeNft(exec, opts, plan, next),
    drift: (applied, deep) => nftDrift(applied, deep, list, read),
    async cleanup(): Promise<BackendCleanup> {
      // Every table of ours: the root and whatever shards the namespace holds (unknown after a restart).
      const shards = await read().then(
        (e) => e.tables,
        () => [],
      );
      const text = cleanupText(table, shards);
      try {
        await nftApply(exec, text);
        return { text: { v4: text, v6: '' }, failures: [] };
      } catch (e) {
        return { text: { v4: text, v6: '' }, failures: [e instanceof Error ? e.message : String(e)] };
      }
    },
    close: () => void opts.elementWriter?.then((w) => w?.close()),
  };
}

/**
 * Why our tables are no longer `applied`: quick, the hook chains' rule counts and the maps' and
 * sets' element counts; `deep`, also no table of ours beyond those written and every rule.
 */
async function nftDrift(applied: NftRuleset, deep: boolean, list: (what: string) => Promise<string | undefined>, read: () => Promise<NftExisting>): Promise<string | undefined> {
  const parts = tableParts(applied);
  for (const { table: fixed, elements } of parts) {
    const T = `${NFT_FAMILY} ${fixed.name}`;
    // One table's name in the message when there are shards.
    const at = parts.length > 1 ? ` (${fixed.name})` : '';
    // Quick: the hook chains as written (a deleted or flushed table, a removed hook rule).
    for (const chain of fixed.chains.filter((c) => c.rules[0]?.startsWith('type ') === true)) {
      const l = await list(`chain ${T} ${chain.name}`);
      if (l === undefined) return `nftables ${chain.name}${at}: cannot be listed (chain or table missing)`;
      const n = parseNftChains(l).get(chain.name) ?? 0;
      if (n !== ruleCount(chain.rules)) return `nftables ${chain.name}${at}: ${n} rules, ${ruleCount(chain.rules)} written`;
    }
    // And the element counts of the maps and sets (a Service's element removed or added).
    for (const set of fixed.sets) {
      const want = elements.get(set.name)?.length ?? 0;
      const kind = set.decl.some((l) => l.includes(' : ')) ? 'map' : 'set';
      const m = await list(`${kind} ${T} ${set.name}`);
      if (m === undefined || countElements(m) !== want) return `nftables ${set.name}${at}: ${m === undefined ? 'missing' : countElements(m)} elements, ${want} written`;
    }
  }
  if (!deep) return undefined;
  // No table of ours beyond those written (one left by more shards would still hook and DNAT).
  const written = new Set(parts.map((p) => p.table.name));
  const extra = (await read()).tables.find((t) => !written.has(t));
  if (extra !== undefined) return `nftables: table ${extra} of ours was not written`;
  const listings: string[] = [];
  for (const { table: fixed } of parts) {
    const l = await list(`table ${NFT_FAMILY} ${fixed.name}`);
    if (l === undefined) return parts.length > 1 ? `nftables: our table ${fixed.name} is missing` : 'nftables: our table is missing';
    listings.push(l);
  }
  return compareTable(applied, listings.join('\n'));
}

/** Endpoint-map refills through the element writer, when there is one; whether it wrote them (else the caller writes the same change with nft -f). */
async function throughWriter(writer: ElementWriterHandle | undefined, maps: NonNullable<NftPlan['replacedMaps']>, logger: Pick<Logger, 'warn'> | undefined): Promise<boolean> {
  if (writer === undefined) return false;
  try {
    await writer.write(maps);
    return true;
  } catch (e) {
    logger?.warn(`nftables element writer failed, writing the same change with nft -f: ${e instanceof Error ? e.message : String(e)}`);
    return false;
  }
}
