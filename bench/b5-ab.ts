/**
 * B5's one figure, before and after a change: the sidecar's private memory at N Services × 10
 * endpoints (default 1,000) with one rule back end, for two source trees in the same run. Each
 * tree's sidecar is bundled by its own scripts/build.mjs and run as B5 runs it (the injected node
 * flags and malloc settings, the machine's node), one after the other against the same apiserver
 * and Services, in alternating order when run more than once; memory is B5's (smaps_rollup
 * Anonymous of the sidecar and its children, once a second over the window). Not a numbered
 * benchmark: figures go in docs/benchmarks.md by hand.
 *
 *   node --import tsx bench/b5-ab.ts <before tree> <after tree> [services=1000] [backend=nftables] [runs=1]
 */
import os from 'node:os';
import { createServices, createSlices } from './lib/cluster.js';
import { startSidecar, startSidecarEnv, treeSidecarCommand, type SidecarCommand, type SidecarEnv } from './lib/sidecar-env.js';
import { sleep, smaps, treeSum, withCleanup, type Cleanup } from './lib/proc.js';
import { isMain } from './lib/runner.js';
import { fmt, summarize } from '../test/harness/stats.js';

const ENDPOINTS = 10;
const SETTLE_S = 5;
const WINDOW_S = 20;
const MIB = 2 ** 20;

/**
 * One sidecar of `cmd` in `env` (its Services already loaded) with `backend` forced, as the
 * webhook's ConfigMap would (auto picks nftables wherever it loads): its private memory in MiB,
 * sampled once a second over the window after it settled, and the back end it ran.
 */
export async function sidecarPrivateMiB(env: SidecarEnv, cleanup: Cleanup, cmd: SidecarCommand, backend: string): Promise<{ samples: number[]; ran: string }> {
  const sidecar = startSidecar(env, cleanup, 'info', { ...cmd, env: { ...cmd.env, DATAPLANE_BACKEND: backend } });
  const starting = sidecar.waitFor((l) => l.msg === 'multus-proxy sidecar starting', 300_000, 'start-up line');
  await sidecar.waitFor((l) => l.msg === 'first sync done; ready', 300_000, 'first sync');
  // The start-up line names nftables, or the iptables back end by its flavor (nft or legacy).
  const ran = String((await starting)['backend']);
  if ((ran === 'nftables') !== (backend === 'nftables')) throw new Error(`b5-ab: ${cmd.how}: the sidecar ran back end ${ran}, not ${backend}`);
  await sleep(SETTLE_S * 1000);
  const pid = sidecar.child.pid ?? 0;
  const samples: number[] = [];
  for (let s = 0; s < WINDOW_S; s++) {
    await sleep(1000);
    samples.push(treeSum(pid, (q) => smaps(q).anonymous) / MIB);
  }
  await sidecar.stop();
  return { samples, ran };
}

/** The Services and slices B5 loads: n Services × ENDPOINTS endpoints. */
export async function loadB5(env: SidecarEnv, n: number): Promise<void> {
  await createServices(env.cp.client, n);
  await createSlices(env.cp.client, n, ENDPOINTS);
}

if (isMain(import.meta.url)) {
  const [before, after] = [process.argv[2], process.argv[3]];
  if (before === undefined || after === undefined) throw new Error('b5-ab: give two source trees: node --import tsx bench/b5-ab.ts <before tree> <after tree> [services] [backend] [runs]');
  const n = Number(process.argv[4] ?? 1000);
  const backend = process.argv[5] ?? 'nftables';
  const runs = Number(process.argv[6] ?? 1);
  await withCleanup(
    (m) => process.stderr.write(`${m}\n`),
    async (cleanup) => {
      const trees = [before, after];
      const cmds = await Promise.all(trees.map((t) => treeSidecarCommand(cleanup, t, backend)));
      const env = await startSidecarEnv(cleanup);
      await loadB5(env, n);
      const got = new Map<string, number[]>(trees.map((t) => [t, []]));
      for (let r = 0; r < runs; r++) {
        for (const i of r % 2 === 0 ? [0, 1] : [1, 0]) {
          const tree = trees[i] as string;
          const { samples, ran } = await sidecarPrivateMiB(env, cleanup, cmds[i] as SidecarCommand, backend);
          got.get(tree)?.push(...samples);
          const st = summarize(samples);
          process.stdout.write(`${tree} run ${r + 1} (back end ${ran}): private min ${fmt(st.min)} / median ${fmt(st.median)} / max ${fmt(st.max)} MiB over ${WINDOW_S} s\n`);
        }
      }
      for (const [tree, xs] of got) {
        const st = summarize(xs);
        process.stdout.write(`${tree}: private MiB at ${n.toLocaleString('en')} Services (${backend}), ${xs.length} samples: min ${fmt(st.min)}, median ${fmt(st.median)}\n`);
      }
      process.stdout.write(
        `node ${process.version}, load average ${os
          .loadavg()
          .map((l) => l.toFixed(1))
          .join(' ')}\n`,
      );
    },
  );
}
