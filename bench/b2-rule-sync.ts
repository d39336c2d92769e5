/**
 * B2: sidecar rule sync. A full sync of N Services × 10 endpoints into a fresh network namespace
 * (what a starting sidecar does: render, read the namespace, routes, iptables-restore) against a
 * raw `iptables-restore --noflush` of the same rendered text into another fresh namespace,
 * interleaved. Then, at the largest size, one endpoint changed (a partial sync) against a raw
 * restore of the same partial text.
 */
import { performance } from 'node:perf_hooks';
import { createDataplane, type SyncResult } from '../src/dataplane/apply.js';
import { NOTHING_EXISTING, planRestore } from '../src/dataplane/restore.js';
import { render } from '../src/dataplane/incremental.js';
import { CLIENT_ADDRESS, CLIENT_INTERFACE, ENDPOINT_PREFIX_LEN, clientInterface, desiredState, endpointSlice, service } from './lib/services.js';
import { StateMemo } from '../src/dataplane/incremental.js';
import type { DesiredState } from '../src/dataplane/model.js';
import type { V1EndpointSlice } from '../src/kube/types.js';
import { createClientNetns, deleteNetns } from './lib/netns.js';
import { Cleanup, requireTool, run } from './lib/proc.js';
import { fmt, fmtRatio, fmtSummary, summarize, type Summary } from './lib/stats.js';
import type { RunContext, TargetCheck } from './lib/report.js';
import { defineBenchmark } from './lib/define.js';
import { isMain, runStandalone } from './lib/runner.js';

const ENDPOINTS = 10;

interface FullRun {
  ours: number;
  oursRestore: number;
  raw: number;
}

async function freshNetns(cleanup: Cleanup): Promise<string> {
  return createClientNetns('b2', cleanup, CLIENT_INTERFACE, CLIENT_ADDRESS, ENDPOINT_PREFIX_LEN);
}

function v4Restore(r: SyncResult): { text: string; ms: number } {
  const f = r.families.find((x) => x.family === 4);
  if (!f) throw new Error('sync result has no IPv4 family');
  return { text: f.restoreText, ms: f.restoreMs };
}

async function oursFull(services: number, cleanup: Cleanup): Promise<{ ms: number; restoreMs: number; ns: string; dp: ReturnType<typeof createDataplane> }> {
  const ns = await freshNetns(cleanup);
  const dp = createDataplane({ netns: ns, backend: 'auto' });
  const state = desiredState(services, ENDPOINTS);
  const t0 = performance.now();
  const r = await dp.sync(state, { full: true });
  const ms = performance.now() - t0;
  const v4 = v4Restore(r);
  if (!r.full || v4.text === '') throw new Error(`expected a full sync with rules, got full=${r.full}`);
  return { ms, restoreMs: v4.ms, ns, dp };
}

async function rawRestore(ns: string, text: string): Promise<number> {
  return (await run('iptables-restore', ['--noflush'], { netns: ns, input: text })).ms;
}

/** Counts our DNAT rules in a namespace: proof that what was timed really landed. */
async function countDnat(ns: string): Promise<number> {
  const out = (await run('iptables-save', ['-t', 'nat'], { netns: ns })).stdout;
  return out.split('\n').filter((l) => l.includes('-j DNAT')).length;
}

/** Runs per size (the largest gets fewer: each one loads 50,000 rules twice) and endpoint changes at the largest size. */
const SIZES = { quick: { small: 3, large: 1, changes: 5 }, full: { small: 7, large: 3, changes: 20 } };

export const benchmark = defineBenchmark('b2', 'sidecar rule sync (render + apply) vs raw iptables-restore', SIZES, async (ctx, { small, large, changes }) => {
  const runsFor = (n: number): number => (n >= 5000 ? large : small);
  await requireTool('iptables-restore', ['--version'], 'install iptables (apt-get install iptables)');
  const sizes = [100, 1000, 5000];
  const rows: string[][] = [];
  const targets: TargetCheck[] = [];
  const notes: string[] = [];
  const nsCost: number[] = [];
  let partialResult: PartialResult | undefined;

  for (const n of sizes) {
    const state = desiredState(n, ENDPOINTS);
    // The exact text ours applies to a fresh namespace, rendered once for the raw baseline.
    const rawText = planRestore(render(state).v4, undefined, NOTHING_EXISTING, true).text;
    const renderMs: number[] = [];
    const runs: FullRun[] = [];
    for (let i = 0; i < runsFor(n); i++) {
      const t0 = performance.now();
      planRestore(render(state).v4, undefined, NOTHING_EXISTING, true);
      renderMs.push(performance.now() - t0);
      const cleanup = new Cleanup();
      try {
        const one: Partial<FullRun> = {};
        // Interleaved, alternating which goes first so drift on the machine hits both alike.
        const order = i % 2 === 0 ? ['ours', 'raw'] : ['raw', 'ours'];
        for (const which of order) {
          if (which === 'ours') {
            const r = await oursFull(n, cleanup);
            one.ours = r.ms;
            one.oursRestore = r.restoreMs;
            const dnat = await countDnat(r.ns);
            if (dnat !== n * ENDPOINTS) throw new Error(`ours: expected ${n * ENDPOINTS} DNAT rules, found ${dnat}`);
            const last = i === runsFor(n) - 1 && n === sizes[sizes.length - 1];
            if (last) partialResult = await partial(ctx, r.dp, r.ns, n, changes);
            await deleteNetns(r.ns);
          } else {
            const ns = await freshNetns(cleanup);
            nsCost.push((await run('true', [], { netns: ns })).ms);
            one.raw = await rawRestore(ns, rawText);
            await deleteNetns(ns);
          }
        }
        runs.push(one as FullRun);
        ctx.log(`${n} Services run ${i + 1}: ours ${fmt(one.ours ?? NaN)} ms (restore ${fmt(one.oursRestore ?? NaN)} ms), raw ${fmt(one.raw ?? NaN)} ms`);
      } finally {
        await cleanup.run(ctx.log);
      }
    }
    const ours = summarize(runs.map((r) => r.ours));
    const raw = summarize(runs.map((r) => r.raw));
    const restore = summarize(runs.map((r) => r.oursRestore));
    const rend = summarize(renderMs);
    // Everything else ours runs: back-end detection, iptables-save ×2, route reads, the route batch.
    const other = summarize(runs.map((r, k) => r.ours - r.oursRestore - (renderMs[k] ?? 0)));
    // Ratio per interleaved pair (each pair saw the same moment of the machine), then its median.
    const pairs = summarize(runs.map((r) => r.ours / r.raw));
    const pairText = `${fmtRatio(pairs.median)} (${fmtRatio(pairs.min)}–${fmtRatio(pairs.max)})`;
    rows.push([
      `${n.toLocaleString('en')} × ${ENDPOINTS}`,
      fmtSummary(ours, 'ms'),
      fmtSummary(restore, 'ms'),
      fmtSummary(rend, 'ms'),
      fmtSummary(other, 'ms'),
      fmtSummary(raw, 'ms'),
      pairText,
    ]);
    if (n === 1000) {
      targets.push({ target: 'full sync ≤ 1.2× raw at 1,000 Services', measured: `${pairText}, median of per-run ratios`, met: pairs.median <= 1.2 });
      targets.push({ target: 'full sync ≤ 0.3 s at 1,000 Services', measured: `${fmt(ours.median / 1000)} s`, met: ours.median <= 300 });
    }
    if (n === 5000) targets.push({ target: 'full sync ≤ 1.2× raw at 5,000 Services', measured: `${pairText}, median of per-run ratios`, met: pairs.median <= 1.2 });
  }
  if (!partialResult) throw new Error('the partial-sync measurement did not run');
  const p = partialResult;
  targets.push({ target: 'one-endpoint change at 5,000 Services ≤ 50 ms', measured: `${fmt(p.ours.median)} ms (median; max ${fmt(p.ours.max)} ms)`, met: p.ours.median <= 50 });

  notes.push(
    `Method: every measurement gets a fresh network namespace with loopback and a veth \`net1\` (${CLIENT_ADDRESS}/${ENDPOINT_PREFIX_LEN}). ` +
      '"ours" is `createDataplane().sync(state, {full: true})` from src/dataplane/apply.ts, timed from the call to its return: render, back-end detection, ' +
      '`iptables-save` of both families, reading routes, one `ip -batch` for the per-cluster-IP routes, and `iptables-restore --noflush` (IPv4; IPv6 has nothing to do). ' +
      '"raw" is `iptables-restore --noflush` of the very text ours applies, alone. Both run every command under `ip netns exec` ' +
      `(that costs ${fmt(summarize(nsCost).median)} ms per command here, measured with \`true\`). Runs alternate which of the two goes first. ` +
      'The render column is the pure part (render + restore plan) timed in-process just before the run; "other commands" is the rest of ours: back-end detection, the two `iptables-save`, the two route reads and the route batch. Spread is min–max over the runs. ' +
      'The partial sync replaces one EndpointSlice object and times what the sidecar does then: its state from the informer objects (src/dataplane/incremental.ts StateMemo, which redoes only the changed Service) plus `sync(state, {full: false})`.',
  );
  return {
    tables: [
      {
        caption: `Full sync into a fresh namespace, N Services × ${ENDPOINTS} endpoints (median, min–max):`,
        columns: ['Services × endpoints', 'ours: full sync', 'of which iptables-restore', 'of which render + plan', 'of which other commands', 'raw iptables-restore, same text', 'ours / raw, per run'],
        rows,
      },
      {
        caption: `One endpoint of one Service changed, ${sizes[sizes.length - 1]?.toLocaleString('en')} Services loaded (partial sync; ${changes} changes):`,
        columns: ['change', 'ours: partial sync', 'of which iptables-restore', 'raw restore of the same text', 'ours / raw per change'],
        rows: [['1 endpoint of 1 Service', fmtSummary(p.ours, 'ms'), fmtSummary(p.restore, 'ms'), fmtSummary(p.raw, 'ms'), `${fmtRatio(p.ratio.median)} (${fmtRatio(p.ratio.min)}–${fmtRatio(p.ratio.max)})`]],
      },
    ],
    targets,
    notes,
  };
});

/** One endpoint changed at a time on the loaded namespace: ours partial sync vs raw restore of the same text. */
interface PartialResult {
  readonly ours: Summary;
  readonly restore: Summary;
  readonly raw: Summary;
  readonly ratio: Summary;
}

async function partial(ctx: RunContext, dp: ReturnType<typeof createDataplane>, ns: string, n: number, changes: number): Promise<PartialResult> {
  const ours: number[] = [];
  const restoreMs: number[] = [];
  const raw: number[] = [];
  // As the sidecar runtime does: the informers' objects go through StateMemo (src/dataplane/incremental.ts),
  // which redoes only the Services whose objects changed; building that state is timed too.
  const memo = new StateMemo();
  const services = Array.from({ length: n }, (_, i) => service(i));
  const loaded = Array.from({ length: n }, (_, i) => endpointSlice(i, ENDPOINTS));
  const stateOf = (slices: V1EndpointSlice[]): DesiredState => memo.update({ interfaces: [clientInterface], services, slices }).state;
  // Equal to the state the full sync applied: nothing to restore, but the memo is primed.
  await dp.sync(stateOf(loaded), { full: false });
  for (let g = 1; g <= changes; g++) {
    const svc = (g * 997) % n;
    const slices = loaded.map((s, i) => (i === svc ? endpointSlice(svc, ENDPOINTS, g) : s));
    const t0 = performance.now();
    const r = await dp.sync(stateOf(slices), { full: false });
    ours.push(performance.now() - t0);
    const v4 = v4Restore(r);
    restoreMs.push(v4.ms);
    if (r.full || v4.text === '') throw new Error('expected a partial sync with a restore');
    raw.push(await rawRestore(ns, v4.text));
    // Back to the loaded state so every change is one endpoint against the same namespace.
    await dp.sync(stateOf(loaded), { full: false });
  }
  const result = { ours: summarize(ours), restore: summarize(restoreMs), raw: summarize(raw), ratio: summarize(ours.map((o, i) => o / (raw[i] ?? NaN))) };
  ctx.log(`partial at ${n}: ours ${fmt(result.ours.median)} ms, raw ${fmt(result.raw.median)} ms`);
  return result;
}

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
