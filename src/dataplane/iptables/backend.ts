/**
 * The iptables back end behind the seam (core/seam.ts): one `iptables-restore --noflush` per family
 * (nft or legacy flavour), planned by restore.ts from rules.ts's rulesets, read back with
 * iptables-save or `-S` of the hooked chains, drift by drift.ts. The behaviour is the one create.ts
 * had before the seam; this module only arranges those calls.
 */
import type { BackendCleanup, RuleBackend, Stage, WriteReport } from '../core/seam.js';
import { compareProbe, compareSave, quickProbes } from './drift.js';
import { detectFlavor, readExisting, readOutputChains, restore, save, type IptablesFlavor } from './io.js';
import { type Exec } from '../core/exec.js';
import type { IpFamily, Rendered } from '../core/model.js';
import type { IptablesRules, Ruleset } from './rulesets.js';
import { IptablesStage } from './stage.js';
import { SIDECAR_LAYOUT, type Layout } from '../core/names.js';
import { existingFromApplied, NOTHING_EXISTING, planCleanup, planRestore, type Existing, type RestorePlan } from './restore.js';
import { countRules } from './render.js';
import { planRestoreSteps } from './steps.js';
import { familiesWithTables } from './tables-present.js';
import { fileReader, type ReadNetnsFile } from '../core/exec.js';

export type { IptablesRules } from './rulesets.js';
export type IptablesExisting = Readonly<Record<IpFamily, Existing>>;
export type IptablesPlan = readonly { readonly family: IpFamily; readonly plan: RestorePlan }[];

export interface IptablesBackendOptions {
  /** 'auto': legacy only if the namespace already has legacy rules, else nft. */
  readonly flavor: IptablesFlavor | 'auto';
  readonly families: readonly IpFamily[];
  readonly layout: Layout;
  /** Reads the namespace's /proc/net files (tables-present.ts; default: `cat` through the exec). */
  readonly readFile?: ReadNetnsFile;
  /** The program's own stage (the node agent's rules); default: the sidecar's (stage.ts). */
  readonly stage?: Stage<IptablesRules>;
}

/** A layout whose rules only its program's stage can make: a clear failure if none was given. */
const missingStage = (prefix: string): Stage<IptablesRules> => ({
  step: () => {
    throw new Error(`the iptables rules of layout ${prefix} are rendered by its program, and it passed no stage`);
  },
});

export type IptablesBackend = RuleBackend<IptablesRules, IptablesExisting, IptablesPlan>;

const ms = (start: bigint): number => Number(process.hrtime.bigint() - start) / 1e6;

export function createIptablesBackend(exec: Exec, opts: IptablesBackendOptions): IptablesBackend {
  const { families, layout } = opts;
  // Known synchronously once decided, so a sync can start its read-back processes before rendering.
  let known: IptablesFlavor | undefined = opts.flavor === 'auto' ? undefined : opts.flavor;
  let choice: Promise<IptablesFlavor> | undefined;
  const readFile = opts.readFile ?? fileReader(exec);
  /** The families in which this flavour may hold rules of ours (no save where it has no table). */
  const withTables = (be: IptablesFlavor): Promise<IpFamily[]> => familiesWithTables(exec, readFile, be, families);
  // No legacy table at all: nft, without the two legacy saves detectFlavor would run.
  const detect = async (): Promise<IptablesFlavor> => ((await withTables('legacy')).length === 0 ? 'nft' : detectFlavor(exec));
  const flavor = (): Promise<IptablesFlavor> => {
    choice ??= known !== undefined ? Promise.resolve(known) : detect().then((b) => (known = b));
    return choice;
  };
  const of = (r: IptablesRules, f: IpFamily): Ruleset => (f === 4 ? r.v4 : r.v6);
  // The engine's iptables stage: a render's delta edits the last rulesets (stage.ts); another
  // layout's rules (the node agent's) hold more than the shared render's targets: its program's stage.
  const stage: Stage<IptablesRules> = opts.stage ?? (layout === SIDECAR_LAYOUT ? new IptablesStage(layout) : missingStage(layout.prefix));

  const readAll = async (be: IptablesFlavor, prev: IptablesRules | undefined): Promise<IptablesExisting> => {
    // Without a previous state of ours (start-up, after a failure) read everything back; with
    // one, only the hooked chains (a full sync asked for while our state is known must not pay a whole save).
    const read = (f: IpFamily): Promise<Existing> =>
      prev === undefined ? readExisting(exec, be, f, layout) : readOutputChains(exec, be, f, layout).then((o) => existingFromApplied(of(prev, f), o, layout));
    const [e4, e6] = await Promise.all([read(4), families.includes(6) ? read(6) : Promise.resolve(NOTHING_EXISTING)]);
    return { 4: e4, 6: e6 };
  };

  return {
    flavor,
    rules: (rendered: Rendered) => stage.step(rendered),
    read: (prev) => (known !== undefined ? readAll(known, prev) : flavor().then((be) => readAll(be, prev))),
    holdsOurs: (existing) => existing !== undefined && [existing[4], existing[6]].some((e) => e.nat.chains.length > 0 || e.filter.chains.length > 0),
    plan: (next, prev, existing, full) =>
      families.map((family) => ({ family, plan: planFamily(of(next, family), prev === undefined ? undefined : of(prev, family), existing?.[family], full, layout, opts.stage === undefined) })),
    async write(plan, next) {
      const be = await flavor();
      // The two families are independent (separate tables, separate binaries): apply them side by
      // side, and wait for both before reporting, so no restore still runs when the next sync starts.
      const settled = await Promise.allSettled(
        plan.map(async ({ family, plan: p }): Promise<WriteReport> => {
          const t0 = process.hrtime.bigint();
          for (const text of p.steps ?? [p.text]) await restore(exec, be, family, text);
          return { family, text: p.text, changedChains: p.changedChains, deletedChains: p.deletedChains, writeMs: ms(t0), rules: countRules(of(next, family)) };
        }),
      );
      const out: WriteReport[] = [];
      for (const r of settled) {
        if (r.status === 'rejected') throw r.reason;
        out.push(r.value);
      }
      return out;
    },
    drift: async (applied, deep) => iptablesDrift(exec, await flavor(), families, layout, (f) => of(applied, f), deep),
    // Started at once when the flavour is known (a fixed one), so its command runs beside rendering.
    present: () => (known !== undefined ? withTables(known) : flavor().then(withTables)).then((f) => f.length > 0),
    async cleanup(): Promise<BackendCleanup> {
      const be = await flavor();
      const text = { v4: '', v6: '' };
      const failures: string[] = [];
      for (const family of await withTables(be)) {
        try {
          const t = planCleanup(await readExisting(exec, be, family, layout));
          text[family === 4 ? 'v4' : 'v6'] = t;
          await restore(exec, be, family, t);
        } catch (e) {
          failures.push(e instanceof Error ? e.message : String(e));
        }
      }
      return { text, failures };
    },
    // The exec (and its spare restore processes) belongs to the apply loop (core/pipeline.ts), which closes it.
    close: () => undefined,
  };
}

/**
 * One family's restore plan. The sidecar's full restore over chains of ours (a restart, a resync)
 * goes in bounded steps (steps.ts); into a namespace with none, and another program's rules
 * (its own stage), in one.
 */
function planFamily(next: Ruleset, prev: Ruleset | undefined, have: Existing | undefined, full: boolean, layout: Layout, sidecarStage: boolean): RestorePlan {
  const over = have !== undefined && have.nat.chains.length + have.filter.chains.length > 0;
  if ((full || prev === undefined) && over && sidecarStage && layout === SIDECAR_LAYOUT) return planRestoreSteps(next, have, layout);
  return planRestore(next, prev, have, full, layout);
}

/** Why our rules are no longer `rules` of each family: quick probes of our chains, `deep` also a whole save. */
async function iptablesDrift(exec: Exec, be: IptablesFlavor, families: readonly IpFamily[], layout: Layout, rulesOf: (f: IpFamily) => Ruleset, deep: boolean): Promise<string | undefined> {
  for (const family of families) {
    const rules = rulesOf(family);
    const bin = `${family === 4 ? 'iptables' : 'ip6tables'}-${be}`;
    const probes = quickProbes(rules, layout);
    const listings = await Promise.all(probes.map((p) => exec(bin, ['--wait', '5', '-t', p.table, '-S', p.chain]).then((r) => (r.code === 0 ? r.stdout : undefined))));
    for (const [i, probe] of probes.entries()) {
      const why = compareProbe(probe, listings[i], layout);
      if (why !== undefined) return `IPv${family} ${why}`;
    }
    if (deep) {
      const why = compareSave(rules, await save(exec, be, family), layout);
      if (why !== undefined) return `IPv${family} ${why}`;
    }
  }
  return undefined;
}
