/**
 * Rule sync against raw `iptables-restore`, for any program's dataplane (B2: the sidecar's, B8:
 * the node agent's). A full sync of a state into a fresh network namespace against a raw
 * `iptables-restore --noflush` of the very text it applies, into another fresh namespace,
 * interleaved; then one-endpoint changes on the loaded namespace (partial syncs) against a raw
 * restore of the same partial text.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { performance } from 'node:perf_hooks';
import type { Dataplane, SyncResult } from '../../src/dataplane/index.js';
import { deleteNetns } from './netns.js';
import { Cleanup, run } from './proc.js';
import { fmt, fmtRatio, fmtSummary, summarize, type Summary } from '../../test/harness/stats.js';
import type { RunContext } from './report.js';
import { splitTables } from '../../src/dataplane/nftables/backend.js';
import { isShardTable } from '../../src/dataplane/nftables/tuning/shards.js';
import { gcOverlap, watchGc, windowGc, type GcOverlapSummary } from './gc-overlap.js';

/** What is synced and how: the same for the sidecar and the node agent. */
export interface SyncSubject<S> {
  /** A fresh namespace as the program finds it (registered with the cleanup). */
  freshNetns(cleanup: Cleanup): Promise<string>;
  /** undefined: the namespace this process runs in (a worker inside it, rule-sync-inside.ts). */
  dataplane(netns: string | undefined): Dataplane<S>;
  /** The state with `services` loaded. */
  state(services: number): S;
  /** The pure part, render + restore plan for a fresh namespace: the IPv4 text ours applies there. */
  plan(state: S): string;
  /** The rule tool's own run of a text (default: `iptables-restore --noflush`), in ms. */
  readonly raw?: (ns: string | undefined, text: string) => Promise<number>;
  /** DNAT rules in a namespace, and in a text (default: iptables's): proof that what was timed landed. */
  readonly countLanded?: (ns: string | undefined) => Promise<number>;
  readonly countText?: (text: string) => number;
  /** The state after change g at `services` (g = 0: the loaded one), for partial syncs run inside the namespace. */
  readonly changes?: (services: number) => (g: number) => S;
}

/** The nftables back end's raw tool and counts, for a subject that syncs with it into table `inet <table>`. */
export function nftTool(table: string): Pick<SyncSubject<unknown>, 'raw' | 'countLanded' | 'countText'> {
  return {
    raw: async (ns, text) => (await run('nft', ['-f', '-'], { netns: ns, input: text })).ms,
    // The table and its shards (src/dataplane/nft/shards.ts), if any.
    countLanded: async (ns) => {
      const tables = [...splitTables((await run('nft', ['list', 'ruleset', 'inet'], { netns: ns })).stdout)].filter(([name]) => isShardTable(table, name));
      return tables.reduce((n, [, text]) => n + text.split('\n').filter((l) => l.includes(' dnat ')).length, 0);
    },
    countText: (text) => text.split('\n').filter((l) => l.includes(' dnat ')).length,
  };
}

/** The sidecar's. */
export const NFT_TOOL = nftTool('multus_proxy');

export interface FullRun {
  readonly ours: number;
  readonly oursRestore: number;
  readonly raw: number;
  readonly render: number;
}

export interface SizeResult {
  readonly runs: readonly FullRun[];
  /** Median of the per-run ratios ours/raw (each pair saw the same moment of the machine). */
  readonly pairs: Summary;
  readonly row: string[];
}

export function v4Restore(r: SyncResult): { text: string; ms: number } {
  const f = r.families.find((x) => x.family === 4);
  if (!f) throw new Error('sync result has no IPv4 family');
  return { text: f.text, ms: f.writeMs };
}

export async function rawRestore(ns: string | undefined, text: string): Promise<number> {
  return (await run('iptables-restore', ['--noflush'], { netns: ns, input: text })).ms;
}

const dnatLines = (text: string): number => text.split('\n').filter((l) => l.includes('-j DNAT')).length;

/** Counts DNAT rules in a namespace: proof that what was timed really landed. */
export async function countDnat(ns: string | undefined): Promise<number> {
  return dnatLines((await run('iptables-save', ['-t', 'nat'], { netns: ns })).stdout);
}

export const RULE_SYNC_COLUMNS = [
  'Services × endpoints',
  'ours: full sync',
  'of which iptables-restore',
  'of which render + plan',
  'of which other commands',
  'raw iptables-restore, same text',
  'ours / raw, per run',
];

/**
 * `runs` interleaved full syncs of `services` (ours, then raw, alternating which goes first). After
 * the last run, `onLoaded` gets ours's loaded namespace and dataplane (for the partial syncs).
 * `nsCost` collects the cost of one `ip netns exec` (timed with `true`).
 */
export async function fullSyncVsRaw<S>(
  ctx: RunContext,
  subject: SyncSubject<S>,
  services: number,
  runs: number,
  label: string,
  nsCost: number[],
  onLoaded?: (dp: Dataplane<S>, ns: string) => Promise<void>,
): Promise<SizeResult> {
  const state = subject.state(services);
  const rawText = subject.plan(state);
  const out: FullRun[] = [];
  for (let i = 0; i < runs; i++) {
    const cleanup = new Cleanup();
    try {
      let ours: Omit<FullRun, 'raw'> = { ours: NaN, oursRestore: NaN, render: NaN };
      let raw = NaN;
      for (const which of i % 2 === 0 ? ['ours', 'raw'] : ['raw', 'ours']) {
        const ns = await subject.freshNetns(cleanup);
        if (which === 'ours') {
          const dp = subject.dataplane(ns);
          ours = await timeFullSync(subject, dp, state, ns, rawText);
          if (i === runs - 1 && onLoaded) await onLoaded(dp, ns);
        } else {
          nsCost.push((await run('true', [], { netns: ns })).ms);
          raw = await timeRaw(subject, ns, rawText);
        }
        await deleteNetns(ns);
      }
      out.push({ ...ours, raw });
      logRun(ctx, services, i, out[out.length - 1]);
    } finally {
      await cleanup.run(ctx.log);
    }
  }
  return sizeResult(label, out);
}

/** Ours: one full sync into a fresh namespace (`ns`; undefined: this process's), checked to have landed the DNAT rules of `text` (the raw text, or made when asked). */
export async function timeFullSync<S>(subject: SyncSubject<S>, dp: Dataplane<S>, state: S, ns: string | undefined, text: string | (() => string)): Promise<Omit<FullRun, 'raw'>> {
  const s0 = performance.now();
  const r = await dp.sync(state, { full: true });
  const ours = performance.now() - s0;
  const v4 = v4Restore(r);
  if (!r.full || v4.text === '') throw new Error(`expected a full sync with rules, got full=${r.full}`);
  await checkLanded(subject, ns, typeof text === 'string' ? text : text(), 'ours');
  // Render + plan as the sync timed them (its first render runs cold, as a starting program's does).
  return { ours, oursRestore: v4.ms, render: r.phases.renderMs };
}

/** Raw: the rule tool alone on `text`, checked to have landed. */
export async function timeRaw<S>(subject: SyncSubject<S>, ns: string | undefined, text: string): Promise<number> {
  const ms = await (subject.raw ?? rawRestore)(ns, text);
  await checkLanded(subject, ns, text, 'raw');
  return ms;
}

async function checkLanded<S>(subject: SyncSubject<S>, ns: string | undefined, text: string, who: string): Promise<void> {
  const expected = (subject.countText ?? dnatLines)(text);
  const dnat = await (subject.countLanded ?? countDnat)(ns);
  if (dnat !== expected) throw new Error(`${who}: expected ${expected} DNAT rules, found ${dnat}`);
}

export function logRun(ctx: RunContext, services: number, i: number, r: FullRun | undefined): void {
  if (r !== undefined) ctx.log(`${services} Services run ${i + 1}: ours ${fmt(r.ours)} ms (restore ${fmt(r.oursRestore)} ms), raw ${fmt(r.raw)} ms`);
}

/** The table row and per-run ratios of one size. */
export function sizeResult(label: string, out: readonly FullRun[]): SizeResult {
  const pairs = summarize(out.map((r) => r.ours / r.raw));
  const row = [
    label,
    fmtSummary(summarize(out.map((r) => r.ours)), 'ms'),
    fmtSummary(summarize(out.map((r) => r.oursRestore)), 'ms'),
    fmtSummary(summarize(out.map((r) => r.render)), 'ms'),
    // Everything else ours runs: back-end detection, reading the namespace, routes, removing the other back end's rules.
    fmtSummary(summarize(out.map((r) => r.ours - r.oursRestore - r.render)), 'ms'),
    fmtSummary(summarize(out.map((r) => r.raw)), 'ms'),
    fmtPairs(pairs),
  ];
  return { runs: out, pairs, row };
}

export const fmtPairs = (s: Summary): string => `${fmtRatio(s.median)} (${fmtRatio(s.min)}–${fmtRatio(s.max)})`;

export interface PartialResult {
  readonly ours: Summary;
  /** The pure part: the program's state from the changed objects. */
  readonly state: Summary;
  /** The dataplane's own pure part (render + restore plan), from its phases. */
  readonly render: Summary;
  readonly restore: Summary;
  readonly raw: Summary;
  readonly ratio: Summary;
  /** GC pauses against the changes' windows (a PerformanceObserver in the timing process). */
  readonly gc?: GcOverlapSummary;
  /** The slowest changes, each with its stages and the GC pause time inside it (ms). */
  readonly slowest?: readonly SlowChange[];
}

export interface SlowChange {
  readonly g: number;
  readonly ours: number;
  readonly state: number;
  readonly render: number;
  readonly restore: number;
  readonly gcMajor: number;
  readonly gcMinor: number;
  readonly gcOther: number;
}

/** A change over this is counted as slow (the one-endpoint change's p99 target). */
export const SLOW_CHANGE_MS = 10;

export const PARTIAL_COLUMNS = [
  'change',
  'ours: partial sync',
  'of which state from the objects',
  'of which render + plan',
  'of which iptables-restore',
  'raw restore of the same text',
  'ours / raw per change',
];

export function partialRow(p: PartialResult): string[] {
  return ['1 endpoint of 1 Service', fmtSummary(p.ours, 'ms'), fmtSummary(p.state, 'ms'), fmtSummary(p.render, 'ms'), fmtSummary(p.restore, 'ms'), fmtSummary(p.raw, 'ms'), fmtPairs(p.ratio)];
}

/**
 * One endpoint changed at a time on the loaded namespace: ours (building the state from the
 * changed objects, as the program does, plus `sync(state, {full: false})`) against a raw restore
 * of the same partial text. `stateAfter(g)` is the state after change g; g = 0 is the loaded state,
 * restored after each change so every change is one endpoint against the same namespace.
 */
/** How long each measured change waits after the previous write (see partialVsRaw). */
export const SETTLE_MS = 100;

export async function partialVsRaw<S>(
  ctx: RunContext,
  dp: Dataplane<S>,
  ns: string | undefined,
  changes: number,
  stateAfter: (generation: number) => S,
  rawRun: (ns: string | undefined, text: string) => Promise<number> = rawRestore,
): Promise<PartialResult> {
  const ours: number[] = [];
  const stateMs: number[] = [];
  const renderMs: number[] = [];
  const restoreMs: number[] = [];
  const raw: number[] = [];
  const windows: { start: number; end: number }[] = [];
  // Equal to the state the full sync applied: nothing to restore, but any memo is primed.
  await dp.sync(stateAfter(0), { full: false });
  const gcWatch = watchGc();
  for (let g = 1; g <= changes; g++) {
    // Each change finds the sidecar idle, as a slice event does between changes: its spare
    // processes (nft -f, iptables-nft-restore, nfnl-batch) started after the previous write are
    // ready. Back to back, a change would also time the start of the process the revert just used
    // (~10 ms under `ip netns exec`); the sync loop coalesces changes that close anyway.
    await delay(SETTLE_MS);
    const t0 = performance.now();
    const state = stateAfter(g);
    stateMs.push(performance.now() - t0);
    const r = await dp.sync(state, { full: false });
    const t1 = performance.now();
    ours.push(t1 - t0);
    windows.push({ start: t0, end: t1 });
    renderMs.push(r.phases.renderMs);
    const v4 = v4Restore(r);
    restoreMs.push(v4.ms);
    if (r.full || v4.text === '') throw new Error('expected a partial sync with a restore');
    raw.push(await rawRun(ns, v4.text));
    await dp.sync(stateAfter(0), { full: false });
  }
  const pauses = await gcWatch.stop();
  const gc = gcOverlap(windows, pauses, SLOW_CHANGE_MS);
  const perChange = windowGc(windows, pauses);
  const slowest = ours
    .map((o, i): SlowChange => ({
      g: i + 1,
      ours: o,
      state: stateMs[i] ?? NaN,
      render: renderMs[i] ?? NaN,
      restore: restoreMs[i] ?? NaN,
      gcMajor: perChange[i]?.major ?? 0,
      gcMinor: perChange[i]?.minor ?? 0,
      gcOther: perChange[i]?.other ?? 0,
    }))
    .sort((a, b) => b.ours - a.ours)
    .slice(0, Math.max(10, Math.ceil(changes / 100)));
  const result = {
    ours: summarize(ours),
    state: summarize(stateMs),
    render: summarize(renderMs),
    restore: summarize(restoreMs),
    raw: summarize(raw),
    ratio: summarize(ours.map((o, i) => o / (raw[i] ?? NaN))),
    gc,
    slowest,
  };
  ctx.log(`partial: ours ${fmt(result.ours.median)} ms, raw ${fmt(result.raw.median)} ms`);
  ctx.log(
    `partial: ${gc.slow.count} changes > ${SLOW_CHANGE_MS} ms (${gc.slow.withMajor} overlap a major GC); slowest 1 % (${gc.slowest1pct.count}): ${gc.slowest1pct.withMajor} overlap a major GC, ${gc.slowest1pct.withMinorOnly} a minor only; ${gc.windowsWithMajor} changes overlap a major GC`,
  );
  for (const [k, v] of Object.entries(gc.pauses)) if (v.count > 0) ctx.log(`partial: GC ${k}: ${v.count} pauses, ${fmt(v.totalMs)} ms in all, max ${fmt(v.maxMs)} ms`);
  for (const c of slowest)
    ctx.log(
      `partial: slow change ${c.g}: ${fmt(c.ours)} ms (state ${fmt(c.state)}, render + plan ${fmt(c.render)}, write ${fmt(c.restore)}; GC inside: major ${fmt(c.gcMajor)}, minor ${fmt(c.gcMinor)}, other ${fmt(c.gcOther)})`,
    );
  return result;
}
