/**
 * How many nftables tables (shards) the sidecar's Service ports are spread over, and which one
 * holds each. Pure.
 *
 * Why shards: the kernel finds a set by name in its table's list of sets, for every element
 * message (nf_tables_delsetelem) and for every rule that names one. With one endpoint map per
 * Service port in one table, a one-map write at 10,000 ports spent ~3 ms walking that list (p50,
 * ~0.3 ms per 1,000 sets; docs/decisions/0025-nft-shard-tables.md), and a full load was
 * O(N²). A rule can name only a set of its own table, so a shard is a whole dispatch: its own
 * nat-output hook chain, services-v4/-v6 verdict maps, and the Service-port chains and maps they
 * send to. The first shard is the root table itself, which also keeps the parts that get only
 * element changes (no-endpoints sets, filter-output hook, reject chain): one shard is exactly the
 * table of before.
 */

/**
 * Service ports per table: up to this many, one table (today's small pods keep exactly their
 * table); beyond, the smallest power of two of tables that holds at most this many each on
 * average. Powers of two, so a growing pod changes its layout (a full sync) only at 1,000,
 * 2,000, 4,000, … ports, and a shrinking one only well below them (shardsAfter). 1,000 keeps the
 * kernel's walk of a table's sets at ~0.3 ms.
 */
export const PORTS_PER_SHARD = 1_000;

/** `perShard` Infinity (or below 1) keeps one table. */
const oneTable = (perShard: number): boolean => !(perShard >= 1) || !Number.isFinite(perShard);

/** The smallest power of two S with ports ≤ S × per (per > 0). */
function powerOfTwoFor(ports: number, per: number): number {
  let s = 1;
  while (s * per < ports) s *= 2;
  return s;
}

/** The fewest tables for `ports` Service ports; `perShard` Infinity (or 0) keeps one table. */
export function shardCount(ports: number, perShard: number = PORTS_PER_SHARD): number {
  return oneTable(perShard) ? 1 : powerOfTwoFor(ports, perShard);
}

/**
 * The share of a table's PORTS_PER_SHARD that the ports must fit in before the tables halve: a pod
 * that grew past a boundary shrinks back only 25 % of a table below it (hysteresis).
 */
export const SHRINK_FILL = 0.75;

/**
 * The number of tables for `ports` Service ports after `previous` (what this returned for the
 * last table; undefined: none, then shardCount). A change of count is a full sync, so a pod
 * hovering at a boundary must not pay one per crossing: the count grows as shardCount as soon as
 * the ports exceed `previous` × perShard, and shrinks only when they fit in fewer tables filled to
 * SHRINK_FILL, to the fewest such. So it stays within [shardCount(ports), the tables filled to
 * SHRINK_FILL], at `previous` when that is inside. Pure.
 */
export function shardsAfter(ports: number, previous: number | undefined, perShard: number = PORTS_PER_SHARD): number {
  if (oneTable(perShard)) return 1;
  const fewest = powerOfTwoFor(ports, perShard);
  if (previous === undefined) return fewest;
  return Math.max(fewest, Math.min(previous, powerOfTwoFor(ports, perShard * SHRINK_FILL)));
}

/** The shard of a Service port, from its chain name (itself a hash of the Service port): FNV-1a, mod `shards`. */
export function shardOf(chain: string, shards: number): number {
  if (shards <= 1) return 0;
  let h = 0x811c9dc5;
  for (let i = 0; i < chain.length; i++) h = Math.imul(h ^ chain.charCodeAt(i), 0x01000193);
  return (h >>> 0) % shards;
}

/** Shard i's table: the root table for 0, `<root>-s<i>` after it. */
export const shardTableName = (root: string, i: number): string => (i === 0 ? root : `${root}-s${i}`);

/** Whether a table name is one of `root`'s shards (the root included); not another program's table (e.g. the node agent's multus_proxy_node). */
export const isShardTable = (root: string, name: string): boolean => name === root || new RegExp(`^${root.replace(/[^A-Za-z0-9]/g, '\\$&')}-s[1-9][0-9]*$`).test(name);

/** The tables of `root` (shards included) in `nft list tables|chains [family]` output (`table <family> <name>`, with ` {` in the second), in the order listed. */
export function shardTablesIn(listing: string, family: string, root: string): string[] {
  const out: string[] = [];
  for (const raw of listing.split('\n')) {
    const m = /^table (\S+) (\S+)(?: \{)?$/.exec(raw.trim());
    if (m?.[1] === family && m[2] !== undefined && isShardTable(root, m[2])) out.push(m[2]);
  }
  return out;
}
