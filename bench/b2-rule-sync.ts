/**
 * B2: sidecar rule sync. A full sync of N Services × 10 endpoints into a fresh network namespace
 * (what a starting sidecar does: render, read the namespace, routes, iptables-restore) against a
 * raw `iptables-restore --noflush` of the same rendered text into another fresh namespace,
 * interleaved, each side timed by a worker inside its namespace (bench/lib/rule-sync-inside.ts:
 * a sidecar pays no `ip netns exec` per command). Then, at the largest size, one endpoint changed (a partial sync) against a raw
 * restore of the same partial text. Both rule back ends in the same run: iptables (against raw
 * `iptables-restore`) and nftables (against a raw `nft -f` of the same text).
 *
 * B2_ONLY=nft-change (with --no-write: its figures are not the full B2 section) runs only the nftables one-endpoint change at 10,000 Services, three ways
 * side by side: through the element writer (nfnl-batch from $MULTUS_PROXY_BIN_DIR) over shard
 * tables (src/dataplane/nft/shards.ts), the same in one table (the layout before shards), and
 * through `nft -f` (the writer off), each after its own full sync (the load alone is minutes of CPU for
 * the iptables rows, which this leaves out).
 *
 * B2_ONLY=nft-full (with --no-write) runs only the nftables full-sync row at B2_SERVICES (default
 * 1,000), B2_RUNS runs (default the size's): a focused look at one size's ours / raw.
 */
import { createDataplane } from '../src/dataplane/index.js';
import { NOTHING_EXISTING, planRestore } from '../src/dataplane/iptables/restore.js';
import { render } from '../src/dataplane/core/incremental.js';
import { StateFeed } from '../cmd/sidecar/state-feed.js';
import type { V1EndpointSlice } from '../src/kube/types.js';
import { iptablesRules } from '../src/dataplane/iptables/stage.js';
import { SIDECAR_LAYOUT } from '../src/dataplane/core/names.js';
import type { DesiredState } from '../src/dataplane/core/model.js';
import { CLIENT_ADDRESS, CLIENT_INTERFACE, ENDPOINT_PREFIX_LEN, NETWORK, clientInterface, desiredState, endpointSlice, service } from './lib/services.js';
import { createClientNetns, createNetns } from './lib/netns.js';
import { requireTool, run, type Cleanup } from './lib/proc.js';
import { fmt, p99Bound, summarize } from '../test/harness/stats.js';
import type { BenchResult, RunContext, TargetCheck } from './lib/report.js';
import { fullText, renderNft } from '../src/dataplane/nftables/render.js';
import { shardCount } from '../src/dataplane/nftables/tuning/shards.js';
import { NFT_TOOL, fmtPairs, partialRow, PARTIAL_COLUMNS, RULE_SYNC_COLUMNS, type PartialResult, type SyncSubject } from './lib/rule-sync.js';
import { fullSyncInside, workerNodeFlags, type SubjectRef } from './lib/rule-sync-inside.js';
import { NODE_MEMORY_FLAGS } from '../src/memory-settings.js';
import { defineBenchmark } from './lib/define.js';
import { isMain, runStandalone } from './lib/runner.js';
import os from 'node:os';
import path from 'node:path';

const ENDPOINTS = 10;

/** nfnl-batch as scripts/build-native.sh leaves it (the image has it at the sidecar's default path). */
const NFNL_BATCH = path.join(process.env['MULTUS_PROXY_BIN_DIR'] ?? path.join(os.homedir(), '.cache', 'multus-proxy', 'bin'), 'nfnl-batch');

/** The sidecar with the iptables back end, as cmd/sidecar/main.ts makes it (spare restore processes). */
const SIDECAR: SyncSubject<DesiredState> = {
  freshNetns: (cleanup) => createClientNetns('b2', cleanup, CLIENT_INTERFACE, CLIENT_ADDRESS, ENDPOINT_PREFIX_LEN),
  dataplane: (netns) => createDataplane({ netns, iptablesFlavor: 'auto', spareRestore: true, readAhead: true, warmUp: true }),
  state: (n) => desiredState(n, ENDPOINTS),
  // The exact text ours applies to a fresh namespace.
  plan: (state) => planRestore(iptablesRules(render(state).resolution.targets, SIDECAR_LAYOUT).v4, undefined, NOTHING_EXISTING, true).text,
  changes: (n) => sidecarStates(n),
};

/**
 * The nftables sidecar, as cmd/sidecar/main.ts makes it: spare `nft -f -`, endpoint changes through
 * the element writer (nfnl-batch), or (writer false) through `nft -f`. Its whole-table text is
 * applied raw with `nft -f`.
 */
const sidecarNft = (writer: boolean, nftPortsPerShard?: number): SyncSubject<DesiredState> => ({
  ...SIDECAR,
  plan: (state) => {
    const targets = render(state).resolution.targets;
    return fullText(renderNft(targets, undefined, undefined, shardCount(targets.length, nftPortsPerShard)));
  },
  ...NFT_TOOL,
  dataplane: (netns) => {
    const dp = createDataplane({
      netns,
      backendKind: 'nftables',
      elementWriter: writer ? NFNL_BATCH : false,
      spareRestore: true,
      readAhead: true,
      warmUp: true,
      ...(nftPortsPerShard === undefined ? {} : { nftPortsPerShard }),
    });
    // Each partial sync that wrote went the way this row says (a writer that is off or failed would fall back silently).
    const sync: typeof dp.sync = async (state, opts) => {
      const r = await dp.sync(state, opts);
      if (!r.full && r.changed && (r.families[0]?.via === 'element-writer') !== writer)
        throw new Error(`expected the change ${writer ? 'through the element writer' : 'through nft -f'}: ${JSON.stringify(r.families[0])}`);
      return r;
    };
    return { ...dp, sync };
  },
});

/** What the in-namespace worker (bench/lib/rule-sync-inside.ts) finds by key. */
export const SYNC_SUBJECTS: Record<'iptables' | 'nftables' | 'nftables-nft-f' | 'nftables-one-table', SyncSubject<DesiredState>> = {
  iptables: SIDECAR,
  nftables: sidecarNft(true),
  'nftables-nft-f': sidecarNft(false),
  // The layout before shard tables (one table whatever the size), for B2_ONLY=nft-change's side-by-side row.
  'nftables-one-table': sidecarNft(true, Infinity),
};
const SIDECAR_NFT = SYNC_SUBJECTS.nftables;
const inside = (key: keyof typeof SYNC_SUBJECTS): SubjectRef => ({ module: import.meta.url, key });

/** The cost of one `ip netns exec` (timed with `true`, median of 5): what B2 paid per command before it ran inside the namespace. */
async function netnsExecCost(cleanup: Cleanup): Promise<number> {
  const ns = await createNetns('b2cost', cleanup);
  const ms: number[] = [];
  for (let i = 0; i < 5; i++) ms.push((await run('true', [], { netns: ns })).ms);
  return summarize(ms).median;
}

/**
 * The sidecar's state after change g at n Services: as its runtime builds it, the informers'
 * events through its state feed (cmd/sidecar/state-feed.ts, StateMemo.step), which redoes only the
 * changed Service. Change g replaces one slice; g = 0 puts the loaded one back.
 */
function sidecarStates(n: number): (g: number) => DesiredState {
  const feed = new StateFeed(n);
  const services = Array.from({ length: n }, (_, i) => service(i));
  const loaded = Array.from({ length: n }, (_, i) => endpointSlice(i, ENDPOINTS));
  const current = [...loaded];
  const input = { served: [NETWORK], interfaces: [clientInterface], services: () => services, slices: () => current };
  let changed: number | undefined;
  const put = (i: number, next: V1EndpointSlice): void => {
    feed.slice(current[i], next);
    current[i] = next;
  };
  return (g) => {
    if (changed !== undefined) put(changed, loaded[changed] as V1EndpointSlice);
    changed = undefined;
    if (g > 0) {
      changed = (g * 997) % n;
      put(changed, endpointSlice(changed, ENDPOINTS, g));
    }
    return feed.compute(input).state;
  };
}

/** Runs per size (the largest gets fewer: each one loads 50,000 rules twice) and endpoint changes at the largest size. */
const SIZES = { quick: { small: 3, large: 1, changes: 5 }, full: { small: 7, large: 3, changes: 20 } };

export const benchmark = defineBenchmark('b2', 'sidecar rule sync (render + apply) vs raw iptables-restore', SIZES, async (ctx, { small, large, changes }, cleanup) => {
  if (process.env['B2_ONLY'] === 'nft-change') return nftChangeOnly(ctx, changes);
  if (process.env['B2_ONLY'] === 'nft-full') return nftFullOnly(ctx, small);
  const runsFor = (n: number): number => (n >= 5000 ? large : small);
  await requireTool('iptables-restore', ['--version'], 'install iptables (apt-get install iptables)');
  const sizes = [100, 1000, 5000, 10000];
  const rows: string[][] = [];
  const targets: TargetCheck[] = [];
  const notes: string[] = [];
  // What the old method paid per command and this one does not (for the notes).
  const nsCost = await netnsExecCost(cleanup);
  let partialResult: PartialResult | undefined;
  let nftPartial: PartialResult | undefined;

  for (const n of sizes) {
    const last = n === sizes[sizes.length - 1];
    // nftables first at each size, beside iptables in the same run (same machine moment).
    const q = await fullSyncInside(ctx, SIDECAR_NFT, inside('nftables'), n, runsFor(n), `nftables: ${n.toLocaleString('en')} × ${ENDPOINTS}`, last ? changes : undefined);
    rows.push(q.row);
    nftPartial = q.partial ?? nftPartial;
    if (n >= 1000)
      targets.push({ target: `nftables: full sync ≤ 1.1× raw nft -f at ${n.toLocaleString('en')} Services`, measured: `${fmtPairs(q.pairs)}, median of per-run ratios`, met: q.pairs.median <= 1.1 });
    const r = await fullSyncInside(ctx, SIDECAR, inside('iptables'), n, runsFor(n), `iptables: ${n.toLocaleString('en')} × ${ENDPOINTS}`, last ? changes : undefined);
    rows.push(r.row);
    partialResult = r.partial ?? partialResult;
    const ours = summarize(r.runs.map((x) => x.ours));
    const pairText = `${fmtPairs(r.pairs)}, median of per-run ratios`;
    if (n === 1000) {
      targets.push({ target: 'full sync ≤ 1.2× raw at 1,000 Services', measured: pairText, met: r.pairs.median <= 1.2 });
      targets.push({ target: 'full sync ≤ 0.3 s at 1,000 Services', measured: `${fmt(ours.median / 1000)} s`, met: ours.median <= 300 });
    }
    if (n === 5000) targets.push({ target: 'full sync ≤ 1.2× raw at 5,000 Services', measured: pairText, met: r.pairs.median <= 1.2 });
  }
  if (!partialResult || !nftPartial) throw new Error('the partial-sync measurement did not run');
  const np: PartialResult = nftPartial;
  const nb = p99Bound(np.ours);
  targets.push({
    target: `nftables: one-endpoint change at ${sizes[sizes.length - 1]?.toLocaleString('en')} Services p50 ≤ 5 ms, ${nb.name} ≤ 10 ms`,
    measured: `${fmt(np.ours.median)} ms (median; p99 ${fmt(np.ours.p99)}, max ${fmt(np.ours.max)} ms, n=${np.ours.n})`,
    met: np.ours.median <= 5 && nb.value <= 10,
  });
  const p = partialResult;
  targets.push({
    target: `iptables: one-endpoint change at ${sizes[sizes.length - 1]?.toLocaleString('en')} Services ≤ 50 ms (the target is set at 5,000)`,
    measured: `${fmt(p.ours.median)} ms (median; max ${fmt(p.ours.max)} ms)`,
    met: p.ours.median <= 50,
  });

  notes.push(
    `Method: every measurement gets a fresh network namespace with loopback and a veth \`net1\` (${CLIENT_ADDRESS}/${ENDPOINT_PREFIX_LEN}) and a worker process started in it ` +
      '(bench/lib/rule-sync-inside.ts: `ip netns exec <ns> node --import tsx bench/lib/rule-sync-worker.ts`), which builds the state and then times one side; its own start is not timed. ' +
      'So, as in a pod, no command of either side pays an `ip netns exec` ' +
      `(${fmt(nsCost)} ms per command here, measured with \`true\`; until 2026-11-27 B2 ran every command of ours and raw's one command under it). ` +
      '"ours" is the sidecar\'s dataplane as cmd/sidecar/main.ts makes it (`createDataplane` from src/dataplane/apply.ts with no netns option and spare restore processes; nftables with the element writer, nfnl-batch), ' +
      'made before the state is built (as the sidecar makes it before its informers list), then `sync(state, {full: true})` timed from the call to its return. ' +
      "That sync is the process's first render (cold, as a starting sidecar's). " +
      '"raw" is the rule tool alone on the very text ours applies, spawned by its own worker in its own fresh namespace: `nft -f -` (the whole table) or `iptables-restore --noflush` (IPv4). Runs alternate which of the two goes first; each side is checked to have landed every DNAT rule. ' +
      'Columns: "of which iptables-restore" is ours\'s own write (its `nft -f -`, or its IPv4 `iptables-restore`); "render + plan" is the pure part as the sync timed it (its phases: render with the start of the read-back commands before it, and the plan); ' +
      '"other commands" is the rest of ours: reading the namespace back (nftables: `nft list tables`; iptables: `iptables-save` of both families), one `ip route show table all` for both families, the `ip -batch` of the per-cluster-IP routes (beside the write), ' +
      "and on a first sync removing the other back end's rules, which since 2026-11-27 first asks whether it has any table here (one `nft list tables`, the /proc/net/ip*_tables_names files: src/dataplane/tables-present.ts) and runs no `iptables-save` in a namespace that never had iptables. Spread is min–max over the runs. " +
      "The partial sync (on the last run's loaded namespace, in its worker) replaces one EndpointSlice object and times what the sidecar does then: its state from the informer events (cmd/sidecar/state-feed.ts, StateMemo.step, which redoes only the changed Service) plus `sync(state, {full: false})`; " +
      'for nftables the write goes through the element writer, "raw" is `nft -f -` of the same refill text.',
  );
  return {
    tables: [
      {
        caption: `Full sync into a fresh namespace, N Services × ${ENDPOINTS} endpoints (median, min–max):`,
        columns: RULE_SYNC_COLUMNS,
        rows,
      },
      {
        caption: `One endpoint of one Service changed, ${sizes[sizes.length - 1]?.toLocaleString('en')} Services loaded (partial sync; ${changes} changes):`,
        columns: ['back end', ...PARTIAL_COLUMNS],
        rows: [
          ['nftables', ...partialRow(np)],
          ['iptables', ...partialRow(p)],
        ],
      },
    ],
    targets,
    notes,
  };
});

/** B2_ONLY=nft-full: the nftables full sync at one size, ours against raw `nft -f` (see the file header). */
async function nftFullOnly(ctx: RunContext, small: number): Promise<BenchResult> {
  const n = Number(process.env['B2_SERVICES'] ?? 1000);
  const runs = Number(process.env['B2_RUNS'] ?? small);
  const q = await fullSyncInside(ctx, SIDECAR_NFT, inside('nftables'), n, runs, `nftables: ${n.toLocaleString('en')} × ${ENDPOINTS}`);
  return {
    tables: [{ caption: `Full sync into a fresh namespace, ${n.toLocaleString('en')} Services × ${ENDPOINTS} endpoints (median, min–max):`, columns: RULE_SYNC_COLUMNS, rows: [q.row] }],
    targets: [{ target: `nftables: full sync ≤ 1.1× raw nft -f at ${n.toLocaleString('en')} Services`, measured: `${fmtPairs(q.pairs)}, median of per-run ratios`, met: q.pairs.median <= 1.1 }],
    notes: ['B2_ONLY=nft-full: only the nftables full-sync row (see the file header).'],
  };
}

/** The changes over SLOW_CHANGE_MS and the GC pauses against them, for a note. */
function gcText(p: PartialResult): string {
  const g = p.gc;
  if (g === undefined) return 'no GC record';
  const major = g.pauses.major;
  return `${g.slow.count} changes > ${g.slow.threshold} ms (${g.slow.withMajor} overlapping a major GC); of the slowest 1 % (${g.slowest1pct.count}) ${g.slowest1pct.withMajor} overlap a major GC, ${g.slowest1pct.withMinorOnly} a minor one only; major GC pauses while the changes ran: ${major.count} (max ${fmt(major.maxMs)} ms), in a change: ${g.windowsWithMajor}.`;
}

/** B2_ONLY=nft-change: the nftables one-endpoint change at 10,000 Services, element writer and nft -f side by side. */
async function nftChangeOnly(ctx: RunContext, sizeChanges: number): Promise<BenchResult> {
  // B2_SERVICES: a smaller table for a quick try of this mode; B2_CHANGES: more changes per row (a max nearer p99).
  const n = Number(process.env['B2_SERVICES'] ?? 10000);
  const changes = Number(process.env['B2_CHANGES'] ?? sizeChanges);
  const rows: string[][] = [];
  const partial: [string, PartialResult][] = [];
  // B2_NFT_WAYS: a comma-separated subset of the keys below (all by default).
  const only = process.env['B2_NFT_WAYS']?.split(',');
  const ways = (
    [
      ['nftables, element writer', 'nftables'],
      ['nftables, element writer, one table (no shards)', 'nftables-one-table'],
      ['nftables, nft -f (writer off)', 'nftables-nft-f'],
    ] as const
  ).filter(([, key]) => only === undefined || only.includes(key));
  for (const [label, key] of ways) {
    const q = await fullSyncInside(ctx, SYNC_SUBJECTS[key], inside(key), n, 1, `${label}: ${n.toLocaleString('en')} × ${ENDPOINTS}`, changes);
    rows.push(q.row);
    if (q.partial === undefined) throw new Error('the partial-sync measurement did not run');
    partial.push([label, q.partial]);
    const o = q.partial.ours;
    ctx.log(
      `${label}: partial sync p50 ${fmt(o.median)}, p90 ${fmt(o.p90)}, p99 ${fmt(o.p99)}, max ${fmt(o.max)} ms (n=${o.n}); the write p50 ${fmt(q.partial.restore.median)}, p99 ${fmt(q.partial.restore.p99)} ms`,
    );
  }
  const w = partial[0]?.[1];
  return {
    tables: [
      { caption: `Full sync into a fresh namespace, ${n.toLocaleString('en')} Services × ${ENDPOINTS} endpoints (one run each):`, columns: RULE_SYNC_COLUMNS, rows },
      {
        caption: `One endpoint of one Service changed, ${n.toLocaleString('en')} Services loaded (partial sync; ${changes} changes; "of which iptables-restore" is the write, by the writer or nft -f; raw is \`nft -f\` of the same refill text):`,
        columns: ['back end', ...PARTIAL_COLUMNS],
        rows: partial.map(([label, p]) => [label, ...partialRow(p)]),
      },
    ],
    targets:
      w === undefined
        ? []
        : [
            {
              target: `nftables: one-endpoint change at ${n.toLocaleString('en')} Services p50 ≤ 5 ms, ${p99Bound(w.ours).name} ≤ 10 ms (element writer)`,
              measured: `${fmt(w.ours.median)} ms (median; p99 ${fmt(w.ours.p99)}, max ${fmt(w.ours.max)} ms, n=${w.ours.n})`,
              met: w.ours.median <= 5 && p99Bound(w.ours).value <= 10,
            },
          ],
    notes: [
      'B2_ONLY=nft-change: only the nftables change rows (see the file header). The change replaces one EndpointSlice (one endpoint address moves); with the endpoint-map layout that is a refill of one map, no rule.',
      `Worker node flags (B2_NODE_FLAGS): ${workerNodeFlags().join(' ') || 'none (node defaults; the sidecar ships with `sidecar`: ' + NODE_MEMORY_FLAGS.join(' ') + ')'}.`,
      ...partial.map(([label, p]) => `${label}: ${gcText(p)}`),
    ],
  };
}

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
