/**
 * One endpoint change at B3-real's scale (a few Services, 2 -> 3 -> 2 endpoints), through
 * the sidecar's real path in a quiet client namespace: the state feed after a slice event, then
 * the nftables dataplane's partial sync (render, plan, the element write through nfnl-batch and
 * its spare process), then this process left idle until the next change. Not a numbered benchmark:
 * a probe run by hand, figures in docs/benchmarks.md ("Sidecar CPU per change").
 *
 * Per change, this thread's own CPU (schedstat: V8's helper threads left out) and wall time:
 *   state   the sidecar's state feed (cmd/sidecar/state-feed.ts) after the slice event
 *   sync    Dataplane.sync({ full: false }) to its resolve: the write done
 *   after   the idle gap after it (IDLE_MS): what the sync left for later (the next spare's spawn)
 * and, per change, the mean CPU of the whole process tree (every thread of this process, the
 * senders, reaped or live; /proc stat ticks, so only the mean over many rounds means anything).
 *
 *   node --import tsx bench/change-small.ts [rounds=60] [root ...]
 *
 * Each root is a source tree (default: this one); with two (e.g. /work/main and this worktree),
 * they are alternated round by round in this one process, so both see the same machine moments.
 * Needs root (netns) and nfnl-batch in $MULTUS_PROXY_BIN_DIR or ~/.cache/multus-proxy/bin.
 */
import { readFileSync } from 'node:fs';
import { mainThreadCpuMs } from '../src/cpu-wait.js';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { createClientNetns } from './lib/netns.js';
import { sleep, withCleanup } from './lib/proc.js';
import { fmt, summarize } from '../test/harness/stats.js';
import { clientInterface, CLIENT_ADDRESS, CLIENT_INTERFACE, ENDPOINT_PREFIX_LEN, endpointSlice, NETWORK, service } from './lib/services.js';
import type { V1EndpointSlice } from '../src/kube/types.js';
import type * as Apply from '../src/dataplane/index.js';
import type * as Feed from '../cmd/sidecar/state-feed.js';

const SERVICES = 2;
const IDLE_MS = 40;
const STAGES = ['state', 'sync', 'after'] as const;
type Stage = (typeof STAGES)[number];

/**
 * This thread's CPU in ms (src/cpu-wait.ts). The kernel brings it up to date when the thread is
 * switched out (or at a tick), so a stage that starts right after another without sleeping may get
 * part of the previous one's time; each round ends asleep, so the round's total is exact.
 */
const threadMs = (): number => {
  const ms = mainThreadCpuMs();
  if (ms === undefined) throw new Error('change-small: no /proc/self/task/<pid>/schedstat (Linux with schedstats)');
  return ms;
};

const TICK_MS = 10; // USER_HZ 100: /proc/<pid>/stat counts CPU in 10 ms ticks
/** utime + stime (+ the reaped children's) of a /proc/<pid>/stat, in ms; 0 if it is gone. */
function statMs(pid: number | 'self', reaped: boolean): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
    // Fields after "comm": index 11, 12 are utime, stime; 13, 14 cutime, cstime.
    const at = (i: number): number => Number(f[i] ?? 0);
    return (at(11) + at(12) + (reaped ? at(13) + at(14) : 0)) * TICK_MS;
  } catch {
    return 0;
  }
}
/** The CPU of this process (every thread), its reaped children and its live ones (a serving sender), ms. */
function treeMs(): number {
  const live = readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, 'utf8')
    .split(' ')
    .filter((x) => x !== '')
    .map(Number);
  return statMs('self', true) + live.reduce((sum, pid) => sum + statMs(pid, true), 0);
}

const rounds = Number(process.argv[2] ?? 60);
const roots = process.argv.length > 3 ? process.argv.slice(3) : [path.resolve(import.meta.dirname, '..')];
const binary = path.join(process.env['MULTUS_PROXY_BIN_DIR'] || path.join(os.homedir(), '.cache/multus-proxy/bin'), 'nfnl-batch');

interface Subject {
  readonly root: string;
  readonly dp: Apply.Dataplane;
  readonly feed: Feed.StateFeed;
  readonly slices: V1EndpointSlice[];
  readonly cpu: Record<Stage, number[]>;
  readonly wall: Record<Stage, number[]>;
  /** The process tree's CPU over the counted rounds (treeMs), summed: tick-granular per round. */
  tree: number;
}

const services = Array.from({ length: SERVICES }, (_, i) => service(i));
const input = (slices: V1EndpointSlice[]): Feed.FeedInput => ({ served: [NETWORK], interfaces: [clientInterface], services: () => services, slices: () => slices });

await withCleanup(
  (m) => process.stderr.write(`${m}\n`),
  async (cleanup) => {
    const subjects: Subject[] = [];
    for (const root of roots) {
      const apply = (await import(pathToFileURL(path.join(root, 'src/dataplane/apply.ts')).href)) as typeof Apply;
      const feedMod = (await import(pathToFileURL(path.join(root, 'cmd/sidecar/state-feed.ts')).href)) as typeof Feed;
      const ns = await createClientNetns('chsmall', cleanup, CLIENT_INTERFACE, CLIENT_ADDRESS, ENDPOINT_PREFIX_LEN);
      const dp = apply.createDataplane({ backendKind: 'nftables', netns: ns, spareRestore: true, elementWriter: binary, ipv6: false });
      cleanup.add(`dataplane ${root}`, () => dp.close());
      const feed = new feedMod.StateFeed(SERVICES);
      const slices = Array.from({ length: SERVICES }, (_, i) => endpointSlice(i, 2));
      await dp.sync(feed.compute(input(slices)).state, { full: true });
      const empty = (): Record<Stage, number[]> => Object.fromEntries(STAGES.map((s) => [s, [] as number[]])) as Record<Stage, number[]>;
      subjects.push({ root, dp, feed, slices, cpu: empty(), wall: empty(), tree: 0 });
    }
    // The element writer starts after the first sync (apply.ts): let its probe and spare settle.
    await sleep(500);
    const warm = 5;
    for (let g = 1; g <= rounds + warm; g += 1) {
      for (const s of subjects) {
        // B3's Deployment: 2 -> 3 -> 2 endpoints of one Service, one change per round.
        const i = g % SERVICES;
        const next = endpointSlice(i, (s.slices[i]?.endpoints.length ?? 2) === 2 ? 3 : 2);
        const t = (stage: Stage, c0: number, w0: bigint): void => {
          if (g <= warm) return;
          s.cpu[stage].push(threadMs() - c0);
          s.wall[stage].push(Number(process.hrtime.bigint() - w0) / 1e6);
        };
        const tree0 = treeMs();
        let c = threadMs();
        let w = process.hrtime.bigint();
        s.feed.slice(s.slices[i], next);
        s.slices[i] = next;
        const state = s.feed.compute(input(s.slices)).state;
        t('state', c, w);
        c = threadMs();
        w = process.hrtime.bigint();
        const r = await s.dp.sync(state, { full: false });
        t('sync', c, w);
        if (r.full || !r.changed || r.families[0]?.via !== 'element-writer')
          throw new Error(`change-small: round ${g} of ${s.root} was ${r.full ? 'a full sync' : !r.changed ? 'no change' : 'written by nft -f'}; expected a partial sync through the element writer`);
        c = threadMs();
        w = process.hrtime.bigint();
        await sleep(IDLE_MS);
        t('after', c, w);
        if (g > warm) s.tree += treeMs() - tree0;
      }
    }
    process.stdout.write(
      `one endpoint change (${SERVICES} Services, 2 <-> 3 endpoints, nftables + nfnl-batch, netns), ${rounds} rounds, alternated; main thread CPU ms and wall ms (p50 / p90 / max)\n`,
    );
    process.stdout.write(`| tree | ${STAGES.map((s) => `${s} CPU`).join(' | ')} | total CPU p50 | sync wall | tree CPU mean |\n|---|${STAGES.map(() => '---|').join('')}---|---|---|\n`);
    const cell = (xs: number[]): string => {
      const m = summarize(xs);
      return `${fmt(m.median)} / ${fmt(m.p90)} / ${fmt(m.max)}`;
    };
    for (const s of subjects) {
      const totals = s.cpu.state.map((_, k) => STAGES.reduce((sum, st) => sum + (s.cpu[st][k] ?? 0), 0));
      process.stdout.write(`| ${s.root} | ${STAGES.map((st) => cell(s.cpu[st])).join(' | ')} | ${fmt(summarize(totals).median)} | ${cell(s.wall.sync)} | ${fmt(s.tree / rounds)} |\n`);
    }
    process.stdout.write(
      `node ${process.version}, load average ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}\n`,
    );
  },
);
