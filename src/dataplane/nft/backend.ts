/**
 * The nftables back end behind the seam (../backend.ts): its own table `inet multus_proxy`
 * (render.ts), written with one `nft -f -` per change, which the kernel commits as one
 * transaction. A full sync replaces the table whole; a partial one names only the Service ports
 * that changed (map elements, their chains), so it never reads or lists the table. IO only; every
 * decision is in render.ts.
 */
import type { BackendCleanup, FamilySync, RuleBackend } from '../backend.js';
import { lineContext, summarize, type Exec } from '../iptables.js';
import type { Rendered, ResolvedTarget } from '../model.js';
import { BASE_CHAINS, cleanupText, countNftRules, NFT_FAMILY, NFT_TABLE, noEndpointsSet, planNft, renderNft, servicesMap, type NftPlan, type NftRuleset, type NftTarget } from './render.js';

/** Whether the namespace holds our table (what a full sync needs to know: it replaces the table whole). */
export interface NftExisting {
  readonly table: boolean;
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

/** What the table should hold, chain by chain, after writing `r` (the base chains included). */
export function expectedChains(r: NftRuleset): Map<string, number> {
  const want = new Map<string, number>([
    [BASE_CHAINS.nat, 2],
    [BASE_CHAINS.filter, 2],
    [BASE_CHAINS.reject, 2],
  ]);
  for (const t of r.targets.values()) {
    want.set(t.chain, t.rules.length);
    for (const [name, lines] of t.endpointChains) want.set(name, lines.length);
  }
  return want;
}

/** Drift in a whole-table listing compared with what was written; undefined when it matches. Pure. */
export function compareTable(applied: NftRuleset, listing: string): string | undefined {
  const have = parseNftChains(listing);
  for (const [chain, n] of expectedChains(applied)) {
    const got = have.get(chain);
    if (got === undefined) return `nftables ${chain}: missing`;
    if (got !== n) return `nftables ${chain}: ${got} rules, ${n} written`;
  }
  for (const chain of have.keys()) if (!expectedChains(applied).has(chain)) return `nftables ${chain}: a chain of ours that was not written`;
  return undefined;
}

export function createNftBackend(exec: Exec): NftBackend {
  // Each resolved target's part, kept while the render cache keeps the target (same object when unchanged).
  const memo = new WeakMap<ResolvedTarget, NftTarget>();
  const T = `${NFT_FAMILY} ${NFT_TABLE}`;
  const list = async (what: string): Promise<string | undefined> => {
    const r = await exec('nft', ['list', ...what.split(' ')]);
    return r.code === 0 ? r.stdout : undefined;
  };
  return {
    flavor: () => Promise.resolve('nftables'),
    rules: (rendered: Rendered) => renderNft(rendered.resolution.targets, memo),
    async read() {
      const r = await exec('nft', ['list', 'tables', NFT_FAMILY]);
      if (r.code !== 0) throw new Error(`nft list tables failed (exit ${r.code}): ${summarize(r.stderr)}`);
      return { table: r.stdout.split('\n').some((l) => l.trim() === `table ${T}`) };
    },
    holdsOurs: (existing) => existing?.table === true,
    plan: (next, prev, _existing, full) => planNft(next, prev, full),
    async write(plan, next): Promise<FamilySync[]> {
      const t0 = process.hrtime.bigint();
      await nftApply(exec, plan.text);
      // One transaction for both families: reported as one unit (family 4 by convention).
      return [{ family: 4, restoreText: plan.text, changedChains: plan.changedChains, deletedChains: plan.deletedChains, restoreMs: Number(process.hrtime.bigint() - t0) / 1e6, rules: countNftRules(next) }];
    },
    async drift(applied, deep) {
      // Quick: the two hook chains as written (a deleted or flushed table, a removed hook rule).
      for (const chain of [BASE_CHAINS.nat, BASE_CHAINS.filter]) {
        const l = await list(`chain ${T} ${chain}`);
        if (l === undefined) return `nftables ${chain}: cannot be listed (chain or table missing)`;
        const n = parseNftChains(l).get(chain);
        if (n !== 2) return `nftables ${chain}: ${n ?? 0} rules, 2 written`;
      }
      // And the element counts of the maps and sets (a Service's element removed or added).
      for (const f of [4, 6] as const) {
        const mine = [...applied.targets.values()].filter((t) => t.family === f);
        const m = await list(`map ${T} ${servicesMap(f)}`);
        if (m === undefined || countElements(m) !== mine.length) return `nftables ${servicesMap(f)}: ${m === undefined ? 'missing' : countElements(m)} elements, ${mine.length} written`;
        const s = await list(`set ${T} ${noEndpointsSet(f)}`);
        const rejects = mine.filter((t) => t.reject).length;
        if (s === undefined || countElements(s) !== rejects) return `nftables ${noEndpointsSet(f)}: ${s === undefined ? 'missing' : countElements(s)} elements, ${rejects} written`;
      }
      if (!deep) return undefined;
      const table = await list(`table ${T}`);
      return table === undefined ? 'nftables: our table is missing' : compareTable(applied, table);
    },
    async cleanup(): Promise<BackendCleanup> {
      const text = cleanupText();
      try {
        await nftApply(exec, text);
        return { restoreText: { v4: text, v6: '' }, failures: [] };
      } catch (e) {
        return { restoreText: { v4: text, v6: '' }, failures: [e instanceof Error ? e.message : String(e)] };
      }
    },
    close: () => undefined,
  };
}
