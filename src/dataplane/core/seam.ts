/**
 * The seam between the apply loop (apply-loop.ts) and a rule back end. The loop owns what every back
 * end shares: one operation at a time, what was applied last (forgotten on any failure), routes
 * (in before the rules that need them, out after), conntrack, timings and the result. A back end
 * owns its rules: how it reads the namespace back, plans a change, writes it in as few
 * transactions as its tool allows, checks drift and removes everything of its own.
 *
 * Today's back end is iptables (iptables-backend.ts: rules.ts renders, restore.ts plans and parses,
 * iptables.ts runs the binaries). A back end is generic in three types of its own, which the loop
 * never looks inside: `R` the rules of one render as it writes them (what "applied last" keeps),
 * `X` what it read back from the namespace, `P` a planned change.
 */
import type { Backend } from '../iptables/io.js';
import type { IpFamily, Rendered } from './model.js';

/** What a sync wrote, per transaction unit of the back end (an iptables family). */
/** What a dataplane reports as its back end: the iptables flavour in use, or nftables. */
export type BackendName = Backend | 'nftables';

/** Which rule back end a dataplane writes with (both programs' `--backend`). */
export type RuleBackendKind = 'iptables' | 'nftables';

export interface FamilySync {
  readonly family: IpFamily;
  /** The transaction's input ('' when nothing changed). */
  readonly restoreText: string;
  readonly changedChains: readonly string[];
  readonly deletedChains: readonly string[];
  readonly restoreMs: number;
  readonly rules: number;
  /** nftables: the change (endpoint-map refills only) went through the element writer, not `nft -f` (restoreText is its nft equivalent). */
  readonly elementWriter?: boolean;
  /** nftables: a first sync into an empty namespace, as the skeleton (restoreText) and then every element through the element writer (nft/first-fill.ts). */
  readonly firstFill?: boolean;
}

export interface BackendCleanup {
  /** The text applied per family ('' for a family with nothing of ours). */
  readonly restoreText: Readonly<Record<'v4' | 'v6', string>>;
  /** Every step is tried; these are the ones that failed. */
  readonly failures: readonly string[];
}

export interface RuleBackend<R, X, P> {
  /** The tool flavour in use (decided once, possibly by probing the namespace). */
  flavor(): Promise<BackendName>;
  /** The rules of one render, as this back end writes them. */
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
  write(plan: P, next: R): Promise<FamilySync[]>;
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
