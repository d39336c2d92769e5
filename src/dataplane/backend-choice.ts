/**
 * Which rule back end a program runs, decided once at start (both programs' `--backend`):
 * - `iptables` or `nftables` forces it. Forced nftables is probed first (nftables/probe.ts), and a
 *   namespace that cannot hold the table stops the start with what nft said and the fix, instead
 *   of failing every sync later.
 * - `auto` takes AUTO_PREFERS where it works: nftables where the probe table loads (one verdict-map
 *   lookup per new connection whatever the number of Services, B10), iptables elsewhere, with the
 *   reason in the start-up log (docs/decisions/0022-auto-prefers-nftables.md).
 * Whichever runs, its first sync removes the other's rules (core/pipeline.ts).
 */
import type { BackendKind } from './core/seam.js';

export const AUTO_PREFERS: BackendKind = 'nftables';

export interface BackendChoice {
  readonly kind: BackendKind;
  /** Why, for the start-up log line. */
  readonly why: string;
}

/** A forced nftables back end that this namespace cannot hold. */
export class NftablesUnsupportedError extends Error {
  constructor(
    readonly setting: string,
    readonly probe: string,
  ) {
    super(
      `${setting} is "nftables", but this network namespace cannot hold the nftables table: ${probe}. Fix: set it to "iptables" (or "auto"), or run on a node whose kernel has nf_tables with NAT and whose image has nft 1.0 or later`,
    );
    this.name = 'NftablesUnsupportedError';
  }
}

/**
 * The choice. `probe` resolves to undefined when nftables works here, else why not; it runs only
 * when the answer depends on it. `setting` names the option in the error (e.g. `DATAPLANE_BACKEND (--backend)`).
 */
export async function chooseRuleBackend(requested: BackendKind | 'auto', probe: () => Promise<string | undefined>, setting: string, prefers: BackendKind = AUTO_PREFERS): Promise<BackendChoice> {
  if (requested === 'iptables') return { kind: 'iptables', why: `${setting} is iptables` };
  if (requested === 'nftables') {
    const why = await probe();
    if (why !== undefined) throw new NftablesUnsupportedError(setting, why);
    return { kind: 'nftables', why: `${setting} is nftables; the probe table loads here` };
  }
  if (prefers === 'iptables') return { kind: 'iptables', why: 'auto: iptables preferred' };
  const why = await probe();
  return why === undefined ? { kind: 'nftables', why: 'auto: the nftables probe table loads here' } : { kind: 'iptables', why: `auto: nftables cannot be used here (${why})` };
}
