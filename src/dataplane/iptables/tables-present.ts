/**
 * Whether an iptables flavour has any table of ours (nat, filter) in this network namespace, asked
 * without iptables-save: a starting program removes the other back end's rules, and on a pod that
 * never ran it, four saves (two flavours × two families) find nothing.
 *
 * - iptables-nft keeps its tables as nftables tables `ip nat`, `ip6 filter`, …: one listing of the
 *   namespace's tables (TABLES_LISTING) names them all (iptables-nft-save dumps exactly those).
 * - legacy: the kernel lists the namespace's xtables in /proc/net/ip_tables_names and
 *   ip6_tables_names (iptables-legacy-save dumps exactly those; no file: the module is not loaded,
 *   so no legacy table can exist).
 *
 * Each answer is true when unsure (a tool missing or failing): then the caller saves as before. A
 * table that exists without rules of ours still says true; the save then finds nothing to remove.
 */
import { TABLES_LISTING, type Exec, type ReadNetnsFile } from '../core/exec.js';
import type { IptablesFlavor } from './io.js';
import type { IpFamily } from '../core/model.js';
import { TABLES } from '../core/names.js';

const NFT_FAMILY: Readonly<Record<IpFamily, string>> = { 4: 'ip', 6: 'ip6' };
const LEGACY_NAMES: Readonly<Record<IpFamily, string>> = { 4: '/proc/net/ip_tables_names', 6: '/proc/net/ip6_tables_names' };

/** The families of `families` with a table of ours in TABLES_LISTING output. Pure. */
export function nftFlavourFamilies(listing: string, families: readonly IpFamily[]): IpFamily[] {
  // `nft list chains` opens each table's block on its line: `table <family> <name> {`.
  const tables = new Set(listing.split('\n').map((l) => l.trim().replace(/ \{$/, '')));
  return families.filter((f) => TABLES.some((t) => tables.has(`table ${NFT_FAMILY[f]} ${t}`)));
}

/** Whether a *_tables_names file (one table name a line) names a table of ours. Pure. */
export function legacyNamesHoldOurs(names: string | undefined): boolean {
  return names !== undefined && names.split('\n').some((l) => (TABLES as readonly string[]).includes(l.trim()));
}

/**
 * The families (of `families`) in which the flavour may hold rules of ours: those with a table of
 * ours, or all of them when that cannot be told.
 */
export async function familiesWithTables(exec: Exec, read: ReadNetnsFile, flavour: IptablesFlavor, families: readonly IpFamily[]): Promise<IpFamily[]> {
  try {
    if (flavour === 'nft') {
      const r = await exec('nft', TABLES_LISTING);
      return r.code === 0 ? nftFlavourFamilies(r.stdout, families) : [...families];
    }
    const names = await Promise.all(families.map((f) => read(LEGACY_NAMES[f])));
    return families.filter((_, i) => legacyNamesHoldOurs(names[i]));
  } catch {
    return [...families];
  }
}
