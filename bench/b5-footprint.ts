/**
 * B5: the sidecar's footprint per pod. Private (anonymous) and shared (file-backed) memory from
 * /proc/<pid>/smaps_rollup, and CPU including the commands it runs, of the running sidecar: idle
 * (its pod serves a network with no Services yet) and with 1,000, 5,000 and 10,000 Services × 10
 * endpoints watched, programmed up to the per-network cap (MAX_SERVICES_PER_NETWORK, default
 * 2,000), and from 5,000 on also with the cap lifted (what it cost before the cap), against a bare `node` process sampled over the same windows
 * (started together, so both see the same machine). Private memory is what each extra pod costs:
 * the node binary's file-backed pages are shared by every pod on a node through the page cache.
 * Each phase with the default cap is measured twice, interleaved: under the machine's node with a
 * fresh bundle of the current source, and as the image runs it (its Node.js 24 binary, its
 * bundle, the injected command and environment; bench/lib/image-runtime.ts), each beside a bare
 * process of its own node, so a difference between the runtimes shows apart from the bundle.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { createServices, createSlices } from './lib/cluster.js';
import { sidecarCommand, startSidecar, startSidecarEnv, toggleFlag, TRADE_FLAG, withoutMallocEnv, type SidecarCommand, type SidecarEnv } from './lib/sidecar-env.js';
import { cpuWithChildrenMs, run, sleep, smaps, treeSum, startProcess, stopProcess, type Cleanup } from './lib/proc.js';
import { fmt, summarize, type Summary } from '../test/harness/stats.js';
import type { RunContext, TargetCheck } from './lib/report.js';
import { defineBenchmark } from './lib/define.js';
import { DEFAULT_MAX_SERVICES_PER_NETWORK } from '../src/sidecar-contract.js';
import { isMain, runStandalone } from './lib/runner.js';
import { imageSidecarCommand } from './lib/image-runtime.js';
import { parseHeapMetrics, type HeapFigures } from './lib/v8-heap.js';
import { DEPLOYMENT_MALLOC_ENV } from '../src/memory-settings.js';

const ENDPOINTS = 10;
/** Service counts of the loaded phases, runs per phase, seconds to settle after the first sync, seconds measured. */
const SIZES = {
  quick: { sizes: [1000, 5000, 10000], runs: 1, settle: 5, window: 20 },
  // 65 s: every window holds one drift check (60 s interval), so steady state is what it measures.
  full: { sizes: [1000, 5000, 10000], runs: 2, settle: 10, window: 65 },
};
const TARGET = { idlePrivateMiB: 12, privateAt1kMiB: 24, idleCpuPercent: 0.1 };

const BARE = ['-e', 'setInterval(() => {}, 1 << 30)'];
/**
 * Variants tried at 1,000 Services (one run each) as the image runs the sidecar (its Node.js 24,
 * what users run), measured side by side with the injected command: without the injected malloc
 * settings, TRADE_FLAG and SIZE_FLAG toggled (taken out if injected, else added), and these V8
 * flags added to it.
 */
const FLAG_VARIANTS: readonly (readonly string[])[] = [['--single-threaded'], ['--jitless'], ['--max-old-space-size=24']];
/** Environment added to the injected command's: the controller's and node agent's arena cap (src/memory-settings.ts), not injected. */
const ENV_VARIANTS: readonly Readonly<Record<string, string>>[] = [{ MALLOC_ARENA_MAX: DEPLOYMENT_MALLOC_ENV['MALLOC_ARENA_MAX'] ?? '2' }];
/** Adopted for Node 24 (cmd/webhook/options.ts SIDECAR_NODE_FLAGS); toggled so its saving stays visible. */
const SIZE_FLAG = '--optimize-for-size';
const VARIANTS_AT = 1000;
/** From this size on, each phase is also run with the cap lifted, to show what the cap saves. */
const UNCAPPED_FROM = 5000;
const NO_CAP = '1000000';

interface Footprint {
  readonly privateMiB: number;
  readonly sharedMiB: number;
  readonly cpuPercent: number;
}

const MIB = 2 ** 20;

/** Samples every pid once a second for `seconds`: median private and file-backed memory, CPU as % of one core over the window. */
async function sample(pids: readonly number[], seconds: number): Promise<Footprint[]> {
  const priv: number[][] = pids.map(() => []);
  const shared: number[][] = pids.map(() => []);
  const cpu = (p: number): number => treeSum(p, cpuWithChildrenMs);
  const c0 = pids.map(cpu);
  const t0 = performance.now();
  for (let s = 0; s < seconds; s++) {
    await sleep(1000);
    pids.forEach((p, i) => {
      priv[i]?.push(treeSum(p, (q) => smaps(q).anonymous));
      shared[i]?.push(treeSum(p, (q) => smaps(q).fileBacked));
    });
  }
  const elapsed = performance.now() - t0;
  return pids.map((p, i) => ({
    privateMiB: summarize(priv[i] ?? []).median / MIB,
    sharedMiB: summarize(shared[i] ?? []).median / MIB,
    cpuPercent: ((cpu(p) - (c0[i] ?? 0)) / elapsed) * 100,
  }));
}

/** The sidecar's V8 heap (MiB), from its /metrics inside the pod's namespace. */
async function heapMiB(env: SidecarEnv): Promise<HeapFigures> {
  const text = (await run('curl', ['-sf', 'http://127.0.0.1:9180/metrics'], { netns: env.pod.ns })).stdout;
  return parseHeapMetrics(text, 'multus_proxy_sidecar');
}

/** A node runtime B5 measures the sidecar under: the machine's, or the image's. */
interface Runtime {
  readonly name: string;
  readonly cmd: SidecarCommand;
}

interface Measured {
  /** From the sidecar's start to its first sync done (ms): start-up work, where a V8 flag's CPU price shows. */
  readonly firstSyncMs: number[];
  readonly heap: HeapFigures[];
  readonly sidecar: Footprint[];
  readonly bare: Footprint[];
}

interface Phase extends Measured {
  readonly label: string;
  /** The same phase under the other runtimes, by runtime name. */
  readonly others: ReadonlyMap<string, Measured>;
}

/**
 * `runs` runs of the phase for each runtime, interleaved (which goes first alternates with the run
 * and with `turn`, the phase's number); the first runtime's results are the phase's own, the
 * others' are in `others`.
 */
async function phase(ctx: RunContext, env: SidecarEnv, cleanup: Cleanup, runtimes: readonly Runtime[], runs: number, settle: number, window: number, label: string, turn = 0): Promise<Phase> {
  const by = new Map(runtimes.map((rt) => [rt.name, { firstSyncMs: [], heap: [], sidecar: [], bare: [] }]));
  for (let r = 0; r < runs; r++) {
    for (const rt of (r + turn) % 2 === 0 ? runtimes : [...runtimes].reverse()) {
      const out = by.get(rt.name);
      if (out) await measureOnce(ctx, env, cleanup, rt, settle, window, runtimes.length > 1 ? `${label} [${rt.name}]` : label, r, out);
    }
  }
  const first = by.get(runtimes[0]?.name ?? '');
  if (!first) throw new Error('B5: a phase needs a runtime');
  return { label, ...first, others: new Map([...by].filter(([name]) => name !== runtimes[0]?.name)) };
}

/** One run: a fresh sidecar and a bare process of the same node, sampled over the same window, into `out`. */
async function measureOnce(ctx: RunContext, env: SidecarEnv, cleanup: Cleanup, { cmd }: Runtime, settle: number, window: number, label: string, r: number, out: Measured): Promise<void> {
  const bare = startProcess(cmd.binary ?? 'node', BARE, { netns: env.pod.ns });
  cleanup.add('bare node', () => stopProcess(bare));
  const t0 = performance.now();
  const sidecar = startSidecar(env, cleanup, 'info', cmd);
  await sidecar.waitFor((l) => l.msg === 'first sync done; ready', 300_000, 'first sync');
  out.firstSyncMs.push(performance.now() - t0);
  await sleep(settle * 1000);
  const [s, b] = await sample([sidecar.child.pid ?? 0, bare.pid ?? 0], window);
  if (!s || !b) throw new Error('sampling failed');
  out.sidecar.push(s);
  out.bare.push(b);
  out.heap.push(await heapMiB(env));
  ctx.log(
    `${label} run ${r + 1}: sidecar private ${fmt(s.privateMiB)} MiB, shared ${fmt(s.sharedMiB)} MiB, ${fmt(s.cpuPercent)}% CPU; bare node private ${fmt(b.privateMiB)} MiB, shared ${fmt(b.sharedMiB)} MiB`,
  );
  await Promise.all([sidecar.stop(), stopProcess(bare)]);
}

/** Whether the two commands run the same bundle bytes (their last argument). */
function sameBundle(a: SidecarCommand, b: SidecarCommand): boolean {
  const hash = (c: SidecarCommand): string =>
    createHash('sha256')
      .update(readFileSync(c.argv.at(-1) ?? ''))
      .digest('hex');
  return hash(a) === hash(b);
}

const mib = (s: Summary): string => `${fmt(s.median)} MiB (${fmt(s.min)}–${fmt(s.max)})`;
const pct = (s: Summary): string => `${fmt(s.median)}% (${fmt(s.min)}–${fmt(s.max)})`;

export const benchmark = defineBenchmark(
  'b5',
  'sidecar footprint: private and shared memory, CPU; idle, 1,000, 5,000 and 10,000 Services (capped at the default 2,000 per network, and uncapped); vs bare node; the machine’s node and the image’s',
  SIZES,
  async (ctx, { sizes, runs, settle, window }, cleanup) => {
    // First, so a missing image fails the run before anything starts.
    const image = await imageSidecarCommand();
    const env = await startSidecarEnv(cleanup);
    const cmd = await sidecarCommand(cleanup);
    const machine: Runtime = { name: `node ${process.version}, machine`, cmd };
    const imaged: Runtime = { name: `node ${image.nodeVersion}, image ${image.imageId}`, cmd: image };
    const both = [machine, imaged];
    const phases: Phase[] = [await phase(ctx, env, cleanup, both, runs, settle, window, 'idle (no Services)')];
    let have = 0;
    const variants: Phase[] = [];
    const failedVariants: string[] = [];
    for (const n of sizes) {
      await createServices(env.cp.client, n, have);
      await createSlices(env.cp.client, n, ENDPOINTS, have);
      have = n;
      const size = `${n.toLocaleString('en')} Services × ${ENDPOINTS} endpoints`;
      phases.push(
        await phase(
          ctx,
          env,
          cleanup,
          both,
          runs,
          settle,
          window,
          n > DEFAULT_MAX_SERVICES_PER_NETWORK ? `${size}, ${DEFAULT_MAX_SERVICES_PER_NETWORK.toLocaleString('en')} served (default cap)` : size,
          phases.length,
        ),
      );
      if (n >= UNCAPPED_FROM) {
        // The machine's runtime only: no user runs without the cap, so the image's runtime is not repeated here (quick mode stays short).
        const uncapped: SidecarCommand = { ...cmd, env: { ...(cmd.env ?? {}), MAX_SERVICES_PER_NETWORK: NO_CAP } };
        phases.push(await phase(ctx, env, cleanup, [{ name: machine.name, cmd: uncapped }], runs, settle, window, `${size}, all served (MAX_SERVICES_PER_NETWORK=${NO_CAP})`));
      }
      if (n === VARIANTS_AT) {
        // V8 flags on top of the injected command under the image's runtime, one run each; a variant that fails (out of memory) is reported as such.
        const onImage = (c: SidecarCommand): SidecarCommand => ({ ...c, binary: image.binary ?? 'node' });
        const tried: { label: string; cmd: SidecarCommand }[] = [
          {
            label: `image's runtime, injected command ${withoutMallocEnv(image).label ?? ''}`,
            cmd: onImage({ ...withoutMallocEnv(image), env: { NODE_ENV: image.env?.['NODE_ENV'] ?? 'production' } }),
          },
          { label: `image's runtime, injected command ${toggleFlag(image, TRADE_FLAG).label ?? ''}`, cmd: onImage(toggleFlag(image, TRADE_FLAG)) },
          { label: `image's runtime, injected command ${toggleFlag(image, SIZE_FLAG).label ?? ''}`, cmd: onImage(toggleFlag(image, SIZE_FLAG)) },
          ...FLAG_VARIANTS.map((flags) => ({ label: `image's runtime, node ${flags.join(' ')} + injected flags`, cmd: onImage({ ...image, argv: [...flags, ...image.argv] }) })),
          ...ENV_VARIANTS.map((add) => ({
            label: `image's runtime, injected command with ${Object.entries(add)
              .map(([k, v]) => `${k}=${v}`)
              .join(' ')} added`,
            cmd: onImage({ ...image, env: { ...(image.env ?? {}), ...add } }),
          })),
        ];
        for (const { label, cmd: variant } of tried) {
          try {
            variants.push(await phase(ctx, env, cleanup, [{ name: imaged.name, cmd: variant }], 1, settle, Math.min(window, 20), label));
          } catch (e) {
            ctx.log(`${label}: failed: ${(e instanceof Error ? e.message : String(e)).slice(0, 200)}`);
            failedVariants.push(`${label}: the sidecar died (${/out of memory/i.test(String(e)) ? 'V8 out of memory' : 'see the log'})`);
          }
        }
      }
    }

    const sum = (f: Footprint[], k: keyof Footprint): Summary => summarize(f.map((x) => x[k]));
    const rows: string[][] = [];
    const addRows = (label: string, runtime: string, m: Measured): void => {
      rows.push([
        label,
        `sidecar (${runtime})`,
        mib(sum(m.sidecar, 'privateMiB')),
        mib(sum(m.sidecar, 'sharedMiB')),
        `${mib(summarize(m.heap.map((h) => h.used)))} of ${fmt(summarize(m.heap.map((h) => h.total)).median)}`,
        pct(sum(m.sidecar, 'cpuPercent')),
        `${fmt(summarize(m.firstSyncMs).median)} ms`,
      ]);
      rows.push(['', `bare node (${runtime})`, mib(sum(m.bare, 'privateMiB')), mib(sum(m.bare, 'sharedMiB')), '', pct(sum(m.bare, 'cpuPercent')), '']);
    };
    for (const p of phases) {
      addRows(p.label, machine.name, p);
      for (const [name, m] of p.others) addRows('', name, m);
    }
    const [idle, first] = phases;
    const idlePriv = sum(idle?.sidecar ?? [], 'privateMiB').median;
    const at1k = phases.find((p) => p.label.startsWith('1,000'));
    const priv1k = sum(at1k?.sidecar ?? [], 'privateMiB').median;
    const idleCpu = sum(idle?.sidecar ?? [], 'cpuPercent').median;
    const cpu1k = sum((at1k ?? first)?.sidecar ?? [], 'cpuPercent').median;
    const bareIdle = sum(idle?.bare ?? [], 'privateMiB').median;
    const targets: TargetCheck[] = [
      { target: `private memory ≤ ${TARGET.idlePrivateMiB} MiB idle`, measured: `${fmt(idlePriv)} MiB (bare node ${fmt(bareIdle)} MiB)`, met: idlePriv <= TARGET.idlePrivateMiB },
      { target: `private memory ≤ ${TARGET.privateAt1kMiB} MiB at 1,000 Services`, measured: `${fmt(priv1k)} MiB`, met: priv1k <= TARGET.privateAt1kMiB },
      { target: `idle CPU ≤ ${TARGET.idleCpuPercent}% of a core`, measured: `${fmt(idleCpu)}% idle; ${fmt(cpu1k)}% steady at 1,000 Services (reported)`, met: idleCpu <= TARGET.idleCpuPercent },
    ];
    // The same targets as the image runs it (what users run).
    const idleImage = idle?.others.get(imaged.name);
    const at1kImage = at1k?.others.get(imaged.name);
    const imgIdlePriv = sum(idleImage?.sidecar ?? [], 'privateMiB').median;
    const imgPriv1k = sum(at1kImage?.sidecar ?? [], 'privateMiB').median;
    const imgIdleCpu = sum(idleImage?.sidecar ?? [], 'cpuPercent').median;
    targets.push(
      {
        target: `image's runtime: private memory ≤ ${TARGET.idlePrivateMiB} MiB idle`,
        measured: `${fmt(imgIdlePriv)} MiB (bare node ${image.nodeVersion} ${fmt(sum(idleImage?.bare ?? [], 'privateMiB').median)} MiB)`,
        met: imgIdlePriv <= TARGET.idlePrivateMiB,
      },
      { target: `image's runtime: private memory ≤ ${TARGET.privateAt1kMiB} MiB at 1,000 Services`, measured: `${fmt(imgPriv1k)} MiB`, met: imgPriv1k <= TARGET.privateAt1kMiB },
      {
        target: `image's runtime: idle CPU ≤ ${TARGET.idleCpuPercent}% of a core`,
        measured: `${fmt(imgIdleCpu)}% idle; ${fmt(sum(at1kImage?.sidecar ?? [], 'cpuPercent').median)}% steady at 1,000 Services (reported)`,
        met: imgIdleCpu <= TARGET.idleCpuPercent,
      },
    );
    return {
      tables: [
        {
          caption: `Memory (median over a ${window} s window, sampled each second) and CPU over that window (% of one core, the process and the commands it ran), starting ${settle} s after the sidecar's first sync; median (min–max) over ${runs} run(s) per phase:`,
          columns: ['cluster', 'process', 'private (anonymous)', 'shared (file-backed)', 'of which V8 heap: used of reserved', 'CPU', 'start → first sync done'],
          rows,
        },
      ],
      targets,
      notes: [
        `Variants of the injected command (node ${cmd.argv.slice(0, -1).join(' ')}, ${Object.entries(cmd.env ?? {})
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')}) under the image's runtime (node ${image.nodeVersion}), one run each at ${VARIANTS_AT.toLocaleString('en')} Services, right after that phase: ` +
          [
            ...variants.map(
              (v) =>
                `${v.label}: private ${fmt(sum(v.sidecar, 'privateMiB').median)} MiB, shared ${fmt(sum(v.sidecar, 'sharedMiB').median)} MiB, CPU ${fmt(sum(v.sidecar, 'cpuPercent').median)}%, first sync done ${fmt(summarize(v.firstSyncMs).median)} ms after start`,
            ),
            ...failedVariants,
          ].join('; ') +
          `; the injected command alone at that size under the image's runtime: private ${fmt(imgPriv1k)} MiB, first sync done ${fmt(summarize(at1kImage?.firstSyncMs ?? []).median)} ms after start.`,
        `Method: the sidecar runs as ${cmd.how} in a client pod's network namespace (test harness topology, apiserver through the harness's relay), against a private kube-apiserver, with its default settings (drift check every 60 s) and LOG_LEVEL=info. ` +
          'Each run starts a fresh sidecar together with a bare `node -e "setInterval(() => {}, 1 << 30)"` and samples both over the same window, so the baseline sees the same machine. ' +
          'Memory is from /proc/<pid>/smaps_rollup: private = Anonymous, shared = Rss − Anonymous (the node binary and libraries, shared by every pod through the page cache). ' +
          'CPU is utime+stime plus cutime+cstime (the iptables and ip commands it ran and waited for) from /proc. The loaded phases have the sidecar watching and programming every Service (its pod is on their network), i.e. the largest working set it can have at that size.',
        `The image's runtime (rows \`${imaged.name}\`): ${image.how}; its node binary and bundle are copied out of buildah's storage once (cached by image id under ~/.cache/multus-proxy/image-runtime/) and run on this host in the same namespace, with the same apiserver, POD_NAME/POD_NAMESPACE, HEALTH_PORT and LOG_LEVEL as the machine's runtime; the image's bundle is ${sameBundle(cmd, image) ? 'byte-identical to' : 'not the same bytes as'} the bundle of the current source, and its bare node is the image's binary. ` +
          "Every phase with the default cap runs both runtimes, interleaved (which goes first alternates); the uncapped phases and the variants run the machine's only. The webhook's POD_ANNOTATIONS_FILE and XTABLES_LOCKFILE name paths inside the container and are left out (both runtimes watch their pod through the API; iptables-nft takes no lock).",
      ],
    };
  },
);

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
