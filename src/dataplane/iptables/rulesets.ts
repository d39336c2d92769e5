/**
 * The iptables back end's rules of one render, as its stage (stage.ts) makes them from the shared
 * render and restore.ts plans them: chains per table, a ruleset per family.
 */
import type { IpFamily } from '../core/model.js';

/** Chains of one table: name -> its rule lines (`-A NAME ...`), in output order. */
export type Chains = ReadonlyMap<string, readonly string[]>;

export interface Ruleset {
  readonly family: IpFamily;
  readonly filter: Chains;
  readonly nat: Chains;
}

/** The iptables back end's rules of one render: a ruleset per family. */
export interface IptablesRules {
  readonly v4: Ruleset;
  readonly v6: Ruleset;
}
