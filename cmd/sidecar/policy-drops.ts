/**
 * Drops per MultiNetworkPolicy and direction, read from the named counters the nftables back end
 * writes (one per policy and direction, decision 0230) when Prometheus scrapes, at most once per
 * DROPS_READ_MIN_MS: one `nft -j list counters` of the sidecar's table, no read on a sidecar that
 * enforces nothing. The counters restart when a full sync replaces the table, so the metric is a
 * counter that may reset (rate() takes that in its stride).
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { POLICY_COUNTER_TABLE, type PolicyDropCounter } from '../../src/dataplane/index.js';
import type { Logger } from '../../src/log.js';
import type { PolicyDrops } from './metrics.js';

const run = promisify(execFile);

/** Scrapes closer together than this get the last read. */
export const DROPS_READ_MIN_MS = 5_000;

/** Packets per counter name in `nft -j list counters` output; names not found are absent. Pure. */
export function counterPackets(json: string): Map<string, number> {
  const out = new Map<string, number>();
  let doc: unknown;
  try {
    doc = JSON.parse(json);
  } catch {
    return out;
  }
  const items = (doc as { nftables?: unknown })?.nftables;
  if (!Array.isArray(items)) return out;
  for (const item of items) {
    const c = (item as { counter?: { name?: unknown; packets?: unknown } } | null)?.counter;
    if (c !== undefined && typeof c.name === 'string' && typeof c.packets === 'number' && Number.isSafeInteger(c.packets) && c.packets >= 0) out.set(c.name, c.packets);
  }
  return out;
}

/** A reader of the drops of the counters `current()` names (the enforced policy's, decision 0230). */
export function policyDropReader(current: () => readonly PolicyDropCounter[], log: Logger, now: () => number = Date.now): () => Promise<readonly PolicyDrops[]> {
  let last: { at: number; rows: readonly PolicyDrops[] } | undefined;
  let failed = '';
  return async () => {
    const counters = current();
    if (counters.length === 0) return [];
    if (last !== undefined && now() - last.at < DROPS_READ_MIN_MS) return last.rows;
    let packets: Map<string, number>;
    try {
      packets = counterPackets((await run('nft', ['-j', 'list', 'counters', 'table', 'inet', POLICY_COUNTER_TABLE], { maxBuffer: 4 * 1024 * 1024 })).stdout);
      failed = '';
    } catch (e) {
      const msg = e instanceof Error ? e.message : String(e);
      if (msg !== failed) log.warn({ err: msg }, 'cannot read the policy drop counters; the drops metric is behind');
      failed = msg;
      return last?.rows ?? [];
    }
    const rows = counters.filter((c) => packets.has(c.name)).map((c) => ({ policy: c.policy, direction: c.direction, packets: packets.get(c.name) ?? 0 }));
    last = { at: now(), rows };
    return rows;
  };
}
