/**
 * Drops per MultiNetworkPolicy and direction, read from the named counters the nftables back end
 * writes (one per policy and direction, decision 0230) when Prometheus scrapes, at most once per
 * DROPS_READ_MIN_MS, no read on a sidecar that enforces nothing. The counters restart when a full
 * sync replaces the table, so the metric is a counter that may reset (rate() takes that in its
 * stride).
 *
 * Read with nfnl-counters (native/nfnl-counters.c, beside the element writer's nfnl-batch): one
 * netlink dump of the table's counters, about 2 MiB whatever the table holds. Without it (or when
 * it fails) one `nft -j list counters` of the table, which fetches the whole table first, every
 * set element included (62 MiB at 144,000 elements; decision 0299).
 */
import { execFile } from 'node:child_process';
import { dirname, join } from 'node:path';
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

/** Packets per counter name in nfnl-counters output (`<name> <packets> <bytes>` lines); anything else is skipped. Pure. */
export function counterLines(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(\S{1,256}) (\d{1,20}) \d{1,20}$/.exec(line);
    const packets = Number(m?.[2]);
    if (m?.[1] !== undefined && Number.isSafeInteger(packets)) out.set(m[1], packets);
  }
  return out;
}

/** nfnl-counters where the element writer's nfnl-batch is (the image and scripts/build-native.sh put them together); undefined without a writer. */
export const countersReaderBeside = (elementWriter: string | false): string | undefined => (elementWriter === false ? undefined : join(dirname(elementWriter), 'nfnl-counters'));

/** Packets per counter of the sidecar's table: by nfnl-counters when given and it works, else by nft. IO. */
export function counterSource(reader: string | undefined, log: Logger): () => Promise<Map<string, number>> {
  let useReader = reader !== undefined;
  return async () => {
    if (useReader && reader !== undefined)
      try {
        return counterLines((await run(reader, ['inet', POLICY_COUNTER_TABLE], { maxBuffer: 4 * 1024 * 1024 })).stdout);
      } catch (e) {
        useReader = false;
        log.warn(
          { err: e instanceof Error ? e.message : String(e), reader },
          'cannot read the policy drop counters with nfnl-counters; reading them with nft from now on (which lists the whole table: more memory per scrape)',
        );
      }
    return counterPackets((await run('nft', ['-j', 'list', 'counters', 'table', 'inet', POLICY_COUNTER_TABLE], { maxBuffer: 4 * 1024 * 1024 })).stdout);
  };
}

/** A reader of the drops of the counters `current()` names (the enforced policy's, decision 0230). */
export function policyDropReader(
  current: () => readonly PolicyDropCounter[],
  log: Logger,
  now: () => number = Date.now,
  read: () => Promise<Map<string, number>> = counterSource(undefined, log),
): () => Promise<readonly PolicyDrops[]> {
  let last: { at: number; rows: readonly PolicyDrops[] } | undefined;
  let failed = '';
  return async () => {
    const counters = current();
    if (counters.length === 0) return [];
    if (last !== undefined && now() - last.at < DROPS_READ_MIN_MS) return last.rows;
    let packets: Map<string, number>;
    try {
      packets = await read();
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
