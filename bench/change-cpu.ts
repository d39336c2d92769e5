/**
 * The sidecar's own CPU for a one-endpoint change at N Services × 10 endpoints, per stage, for
 * both rule back ends in the same run (the change target at 10,000 Services leaves no
 * room for passes over every target). Not a numbered benchmark: an in-process probe, run by hand,
 * whose figures are in docs/benchmarks.md ("Sidecar CPU per change"). No namespace, no process:
 * the stages a sync runs in-process, through the back ends' own `rules` and `plan` (the seam
 * apply-loop.ts calls), with a warm engine, one changed EndpointSlice per round:
 *
 *   state     the sidecar's state feed (cmd/sidecar/state-feed.ts) after one slice event
 *   render    the shared render (resolution, routes) with its cache
 *   rules     the back end's rules of that render
 *   plan      the back end's partial plan against the previous rules
 *   conntrack the flushes the change calls for
 *   count     the rules-count metric the sync reports
 *
 *   node --import tsx bench/change-cpu.ts [services=10000] [rounds=60] [back ends=iptables,nftables]
 *
 * The third argument names the back ends run (e.g. `nftables` alone, for a before/after of one
 * back end: run this file in both source trees, one after the other).
 */
import { createIptablesBackend } from '../src/dataplane/iptables/backend.js';
import { createNftBackend } from '../src/dataplane/nftables/backend.js';
import { conntrackStep, render, RenderCache } from '../src/dataplane/core/incremental.js';
import { StateFeed } from '../cmd/sidecar/state-feed.js';
import { planConntrack } from '../src/dataplane/core/conntrack.js';
import { countRules } from '../src/dataplane/iptables/render.js';
import { countNftRules, type NftRuleset } from '../src/dataplane/nftables/render.js';
import type { Exec } from '../src/dataplane/core/exec.js';
import type { Rendered } from '../src/dataplane/core/model.js';
import { SIDECAR_LAYOUT } from '../src/dataplane/core/names.js';
import { clientInterface, endpointSlice, NETWORK, service } from './lib/services.js';
import { fmt, summarize } from '../test/harness/stats.js';

const ENDPOINTS = 10;
const STAGES = ['state', 'render', 'rules', 'plan', 'conntrack', 'count'] as const;
type Stage = (typeof STAGES)[number];

/** The back ends are asked only for their pure parts here: any command would be a bug of the probe. */
const noExec: Exec = () => Promise.reject(new Error('change-cpu: the probe runs no command'));

interface Subject {
  readonly name: string;
  /** rules + plan + count of one render against the previous rules; returns the new rules. */
  step(rendered: Rendered, prev: unknown, time: (s: Stage, fn: () => unknown) => unknown): unknown;
}

function iptablesSubject(): Subject {
  const be = createIptablesBackend(noExec, { flavor: 'nft', families: [4, 6], layout: SIDECAR_LAYOUT });
  return {
    name: 'iptables',
    step(rendered, prev, time) {
      const next = time('rules', () => be.rules(rendered)) as ReturnType<typeof be.rules>;
      time('plan', () => be.plan(next, prev as typeof next | undefined, undefined, prev === undefined));
      time('count', () => countRules(next.v4) + countRules(next.v6));
      return next;
    },
  };
}

function nftSubject(): Subject {
  const be = createNftBackend(noExec);
  return {
    name: 'nftables',
    step(rendered, prev, time) {
      const next = time('rules', () => be.rules(rendered)) as NftRuleset;
      time('plan', () => be.plan(next, prev as NftRuleset | undefined, undefined, prev === undefined));
      time('count', () => countNftRules(next));
      return next;
    },
  };
}

/** The stages' samples of the counted rounds, and round 0's (the full first sync) render and rules CPU. */
function run(subject: Subject, n: number, rounds: number): { samples: Record<Stage, number[]>; full: number } {
  const feed = new StateFeed(n);
  const cache = new RenderCache();
  const services = Array.from({ length: n }, (_, i) => service(i));
  const slices = Array.from({ length: n }, (_, i) => endpointSlice(i, ENDPOINTS));
  const samples = Object.fromEntries(STAGES.map((s) => [s, [] as number[]])) as Record<Stage, number[]>;
  let recording = false;
  let first = true;
  let full = 0;
  const time = (s: Stage, fn: () => unknown): unknown => {
    // CPU time, not wall time: the machine is shared, and a descheduled stage would look slow.
    const t0 = process.cpuUsage();
    const out = fn();
    const d = process.cpuUsage(t0);
    if (recording) samples[s].push((d.user + d.system) / 1e3);
    else if (first && (s === 'render' || s === 'rules')) full += (d.user + d.system) / 1e3;
    return out;
  };
  let prevRules: unknown;
  let prevRendered: Rendered | undefined;
  // Round 0 is the full first sync; rounds 1-5 warm the JIT and are not counted.
  for (let g = 0; g <= rounds + 5; g += 1) {
    recording = g > 5;
    if (g > 0) {
      const i = (g * 997) % n;
      const next = endpointSlice(i, ENDPOINTS, g);
      feed.slice(slices[i], next);
      slices[i] = next;
    }
    const input = { served: [NETWORK], interfaces: [clientInterface], services: () => services, slices: () => slices };
    const state = (time('state', () => feed.compute(input)) as ReturnType<StateFeed['compute']>).state;
    const rendered = time('render', () => render(state, cache)) as Rendered;
    prevRules = subject.step(rendered, prevRules, time);
    const before = prevRendered;
    // As the apply loop (apply-loop.ts): the engine's conntrack step against the render applied last.
    time('conntrack', () => (before === undefined ? [] : planConntrack(...conntrackStep(rendered, before.version, before.resolution.targets))));
    prevRendered = rendered;
    first = false;
  }
  return { samples, full };
}

const n = Number(process.argv[2] ?? 10000);
const rounds = Number(process.argv[3] ?? 60);
process.stdout.write(`one-endpoint change at ${n.toLocaleString('en')} Services × ${ENDPOINTS}, ${rounds} rounds per back end, CPU ms of this process (p50 / p90 / max)\n`);
process.stdout.write(`| back end | ${STAGES.join(' | ')} | total min | total p50 | total p90 |\n|---|${STAGES.map(() => '---|').join('')}---|---|---|\n`);
const chosen = (process.argv[4] ?? 'iptables,nftables').split(',');
const unknown = chosen.filter((b) => b !== 'iptables' && b !== 'nftables');
if (unknown.length > 0) throw new Error(`change-cpu: unknown back end ${unknown.join(', ')} in argument 3: give iptables, nftables or both, comma-separated`);
const makers = [iptablesSubject, nftSubject].filter((_, i) => chosen.includes(i === 0 ? 'iptables' : 'nftables'));
// Interleaved twice so the back ends see the same machine moments.
const subjects = [...makers, ...makers];
const merged = new Map<string, Record<Stage, number[]>>();
const fulls = new Map<string, number[]>();
for (const make of subjects) {
  const s = make();
  const { samples: r, full } = run(s, n, Math.ceil(rounds / 2));
  fulls.set(s.name, [...(fulls.get(s.name) ?? []), full]);
  const m = merged.get(s.name);
  if (m === undefined) merged.set(s.name, r);
  else for (const st of STAGES) m[st].push(...r[st]);
}
for (const [name, r] of merged) {
  const totals = r.state.map((_, i) => STAGES.reduce((sum, st) => sum + (r[st][i] ?? 0), 0));
  const cell = (xs: number[]): string => {
    const s = summarize(xs);
    return `${fmt(s.median)} / ${fmt(s.p90)} / ${fmt(s.max)}`;
  };
  const t = summarize(totals);
  process.stdout.write(`| ${name} | ${STAGES.map((st) => cell(r[st])).join(' | ')} | ${fmt(t.min)} | ${fmt(t.median)} | ${fmt(t.p90)} |\n`);
}
for (const [name, f] of fulls) process.stdout.write(`${name}: the full first sync's render + rules, CPU ms, per run: ${f.map(fmt).join(', ')}\n`);
process.stdout.write(
  `node ${process.version}, load average ${(await import('node:os'))
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}\n`,
);
