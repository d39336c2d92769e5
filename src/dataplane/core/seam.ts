/**
 * The seam between the shared pipeline (pipeline.ts) and a rule back end (../iptables/,
 * ../nftables/), and the registry's contract (../registry.ts). The pipeline owns what every back
 * end shares: one operation at a time, what was applied last (forgotten on any failure), routes
 * (in before the rules that need them, out after), conntrack, timings and the result. A back end
 * owns its rules: its stage (the shared render -> its rules), how it reads the namespace back,
 * plans a change, writes it in as few transactions as its tool allows, checks drift and removes
 * everything of its own.
 *
 * A back end is generic in three types of its own, which the pipeline never looks inside: `R` the
 * rules of one render as it writes them (what "applied last" keeps), `X` what it read back from
 * the namespace, `P` a planned change. Nothing here names a back end's types.
 */
import type { Logger } from '../../log.js';
import type { DataplaneExec, ReadNetnsFile } from './exec.js';
import type { IpFamily, Rendered } from './model.js';
import type { Layout } from './names.js';
import type { BackendFlavor, DataplaneOptions } from './options.js';

export type { BackendFlavor, BackendKind } from './options.js';

/**
 * A back end's stage of the engine: one render in, this back end's rules of it out. Each back end
 * brings its own for the sidecar's render (../iptables/stage.ts, ../nftables/stage.ts); a program
 * with rules of its own (the node agent) implements one per back end, over its own render `Rd`.
 */
export interface Stage<R, Rd extends Rendered = Rendered> {
  step(rendered: Rd): R;
}

/** What one write did, per transaction unit of the back end (an iptables family; nftables' one batch). */
export interface WriteReport {
  readonly family: IpFamily;
  /** The transaction's input in the back end's own language ('' when nothing changed). */
  readonly text: string;
  readonly changedChains: readonly string[];
  readonly deletedChains: readonly string[];
  readonly writeMs: number;
  readonly rules: number;
  /** How the back end wrote it, when not through its usual tool (nftables: 'element-writer', 'first-fill'). */
  readonly via?: string;
}

export interface BackendCleanup {
  /** The text applied per family ('' for a family with nothing of ours). */
  readonly text: Readonly<Record<'v4' | 'v6', string>>;
  /** Every step is tried; these are the ones that failed. */
  readonly failures: readonly string[];
}

export interface RuleBackend<R, X, P> {
  /** The tool flavour in use (decided once, possibly by probing the namespace). */
  flavor(): Promise<BackendFlavor>;
  /** The rules of one render, as this back end writes them (its stage's step). */
  rules(rendered: Rendered): R;
  /**
   * What is ours in the namespace now. With `prev` (what this process applied last and nothing
   * failed since) a back end may read only what others could have changed; without it, all of
   * ours. Started before rendering, so it runs beside it.
   */
  read(prev: R | undefined): Promise<X>;
  /** Whether the namespace holds rules of ours (a restarted program adopting them). */
  holdsOurs(existing: X | undefined): boolean;
  /** The change from `prev` (partial) or from `existing` (full) to `next`. Pure. */
  plan(next: R, prev: R | undefined, existing: X | undefined, full: boolean): P;
  /** Writes a plan; one result per transaction unit, after all of them settled (the first failure is thrown). */
  write(plan: P, next: R): Promise<WriteReport[]>;
  /** Why our rules are no longer `applied`, or undefined. `deep` reads more (every chain's rules). */
  drift(applied: R, deep: boolean): Promise<string | undefined>;
  /** Removes every rule of ours, trying every step. */
  cleanup(): Promise<BackendCleanup>;
  /**
   * Whether the namespace may hold rules of this back end, asked cheaply (no full read; true when
   * unsure): a program that switched back ends skips cleanup() of one that never ran here.
   */
  present(): Promise<boolean>;
  /** Lets spare processes go. */
  close(): void;
}

/** What another back end left behind: removed after a switch (only cleanup and the cheap presence check). */
export type Leftovers = Pick<RuleBackend<unknown, unknown, unknown>, 'cleanup' | 'present'>;

/** What a back end is made from: one dataplane's exec, families, layout and options. */
export interface BackendContext {
  readonly exec: DataplaneExec;
  readonly families: readonly IpFamily[];
  readonly layout: Layout;
  readonly readFile: ReadNetnsFile;
  readonly options: DataplaneOptions;
  readonly logger?: Logger;
}

/**
 * One entry of the registry (../registry.ts): how a back end is made by name, as a map from name to
 * factory, so shared code never asks which one it is.
 */
export interface BackendFactory {
  /**
   * The back end that writes, after starting what its first sync will want early (spare
   * processes, reads ahead, helpers); `stage` replaces its own (the sidecar's) where a program
   * renders its own rules.
   */
  make(ctx: BackendContext, stage?: Stage<unknown>): RuleBackend<unknown, unknown, unknown>;
  /** Its rules as another back end's leftovers (a pod that switched back ends). */
  leftovers(ctx: BackendContext): readonly Leftovers[];
  /** The first sync's render warmed up while the program's informers list, where this back end has one and the options ask. */
  warmUp?(ctx: BackendContext): (() => void) | undefined;
}
