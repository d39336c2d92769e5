/**
 * B12: memory under churn, without the real node. The real-node soak saw the
 * client's sidecar grow ~2.8 MiB per 10 minutes and the controller leader 26 → 33 MiB in 19
 * minutes on the real node. Here the same programs (fresh bundles of the current source) run for
 * a stated time against a private kube-apiserver + etcd while a Deployment-like churn scales a
 * Service's pods between 4 and 2 every few seconds (bench/lib/deployment-churn.ts), and every
 * minute or two one disruption: an apiserver restart (every watch breaks and resumes), an etcd
 * compaction then a restart (watches resume at a compacted resourceVersion: 410, relist), or a
 * rollout restart (every pod replaced). Each component runs under both runtimes side by side,
 * the machine's node and the image's (its Node.js 24 binary, bench/lib/image-runtime.ts), as
 * shipped (src/memory-settings.ts), and under the image's also without those settings:
 * - the sidecar, with the injected flags and environment, in a client pod's namespace serving the
 *   Service's network (one per runtime, both seeing the same Service and slices);
 * - the controller, as deployed (leader election on), one per runtime, each in its own namespace
 *   with its own copy of the churn;
 * - the node agent, in a node namespace of the harness topology, serving the Service (NodePort).
 * Sampled every few seconds: private (anonymous) memory of the process from smaps_rollup and its
 * V8 heap from /metrics. Two V8 heap snapshots (`--heapsnapshot-signal`), after the warm-up and at
 * the end, count what is retained, by constructor: what grows is named, apart from garbage a lazy
 * collector has not swept yet.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { apiPath } from '../src/kube/paths.js';
import { networkKey } from '../src/annotations/service-network.js';
import { SIDECAR_MALLOC_ENV, SIDECAR_NODE_FLAGS } from '../cmd/webhook/options.js';
import { CONTROLLER_NODE_FLAGS, DEPLOYMENT_MALLOC_ENV, NODE_MEMORY_FLAGS } from '../src/memory-settings.js';
import { createTopology } from '../test/harness/netns.js';
import { startApiserverRelay } from '../test/harness/apiserver-relay.js';
import { freePort } from '../test/harness/controlplane.js';
import { benchControlPlane, createPod } from './lib/cluster.js';
import { BENCH_NAMESPACE, NETWORK, clientPod } from './lib/services.js';
import { benchNad, benchNode } from './lib/node.js';
import { buildBundle, logged, startSidecar, type SidecarProcess } from './lib/sidecar-env.js';
import { imageSidecarCommand } from './lib/image-runtime.js';
import { startScaleChurn, type ScaleChurn } from './lib/deployment-churn.js';
import { growth, signalSnapshot, totalBytes, type HeapGroup } from './lib/heap-snapshot.js';
import { gcSeconds, parseHeapMetrics, type HeapFigures } from './lib/v8-heap.js';
import { cpuWithChildrenMs, run, sleep, smaps, startProcess, treeSum } from './lib/proc.js';
import { fmt } from '../test/harness/stats.js';
import { slope as slopeOf } from '../test/node/soak-analysis.js';
import { ROOT, type TargetCheck } from './lib/report.js';
import { defineBenchmark } from './lib/define.js';
import { isMain, runStandalone } from './lib/runner.js';

/**
 * Minutes of warm-up, then of the window whose samples give the slope; then a heap snapshot of
 * each component, `snapshotMinutes` more of churn, and a second snapshot. The snapshots come
 * after the window because writing one allocates tens of MiB that the process keeps for a while.
 */
const SIZES = {
  quick: { warmupMinutes: 2, minutes: 6, snapshotMinutes: 3, stepMs: 2_000, disruptEveryS: 60, sampleEveryS: 10 },
  full: { warmupMinutes: 5, minutes: 30, snapshotMinutes: 5, stepMs: 2_000, disruptEveryS: 120, sampleEveryS: 15 },
};
type Size = (typeof SIZES)['full'];

const MIB = 2 ** 20;
/**
 * Lease timing for the controllers: a renew deadline longer than an apiserver restart takes on a
 * loaded machine, so the leader keeps leading (a leader that cannot renew exits, as it must).
 */
const LEASE = ['--lease-duration', '90s', '--renew-deadline', '60s', '--retry-period', '2s'];
const gone = (child: { exitCode: number | null; signalCode: string | null; output(): string }): string | undefined =>
  child.exitCode !== null || child.signalCode !== null ? `exited (${child.exitCode ?? child.signalCode}): ${child.output().slice(-2000)}` : undefined;
/** What the issue asks of a component after warm-up: at most 1 MiB per hour. */
const TARGET_SLOPE_MIB_PER_H = 1;

interface Runtime {
  readonly name: string;
  /** The node binary. */
  readonly binary: string;
  readonly version: string;
}

/** How a component is started: node flags ahead of the bundle, and environment added. */
interface Settings {
  readonly flags: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}
type ComponentName = 'controller' | 'sidecar' | 'node agent';

/**
 * One column of the comparison: a runtime and the settings each component runs with (undefined:
 * that component is not run in this variant, it would repeat another's).
 */
interface Variant {
  readonly runtime: Runtime;
  readonly label: string;
  settings(component: ComponentName): Settings | undefined;
}

/** What the webhook injects and the manifests run (src/memory-settings.ts). */
const SHIPPED: Record<ComponentName, Settings> = {
  sidecar: { flags: SIDECAR_NODE_FLAGS, env: SIDECAR_MALLOC_ENV },
  controller: { flags: CONTROLLER_NODE_FLAGS, env: DEPLOYMENT_MALLOC_ENV },
  'node agent': { flags: NODE_MEMORY_FLAGS, env: DEPLOYMENT_MALLOC_ENV },
};
/** Without any of them: plain `node <bundle>`, glibc's defaults (what they save stays visible). */
const PLAIN: Settings = { flags: [], env: {} };
/** The sidecar with the Deployments' allocator setting too (adopted only if it pays there). */
const SIDECAR_WITH_ARENAS: Settings = { flags: SIDECAR_NODE_FLAGS, env: { ...SIDECAR_MALLOC_ENV, MALLOC_ARENA_MAX: DEPLOYMENT_MALLOC_ENV['MALLOC_ARENA_MAX'] ?? '2' } };

interface Component {
  readonly name: string;
  readonly runtime: Runtime;
  /** The variant's label (settings). */
  readonly label: string;
  /** CPU ms used so far, the process and the commands it ran. */
  cpuMs(): number;
  readonly pid: number;
  /** Its last output when it has exited, else undefined. */
  exited(): string | undefined;
  /** Its V8 heap and GC seconds so far, from /metrics. */
  metrics(): Promise<HeapFigures & { gcS: number }>;
  readonly snapshots: string;
}

interface Sample {
  readonly s: number;
  /** CPU ms so far (process and children). */
  readonly cpuMs: number;
  /** GC pause seconds so far from /metrics (NaN where the metrics are lean: the sidecar). */
  readonly gcS: number;
  readonly privateMiB: number;
  readonly heapUsedMiB: number;
  readonly heapTotalMiB: number;
}

/** Private memory not in V8's reserved heap: malloc, thread stacks, code ranges (MiB). */
const offHeap = (s: Sample | undefined): number => (s === undefined ? NaN : s.privateMiB - s.heapTotalMiB);

const metricsOver = async (netns: string | undefined, port: number): Promise<string> => (await run('curl', ['-sf', `http://127.0.0.1:${port}/metrics`], netns !== undefined ? { netns } : {})).stdout;

export const benchmark = defineBenchmark(
  'b12',
  'memory under churn: sidecar, controller and node agent over time, pods scaling every few seconds, watches broken and relisted; the machine’s node and the image’s',
  SIZES,
  async (ctx, size: Size, cleanup) => {
    const image = await imageSidecarCommand();
    const machine: Runtime = { name: `node ${process.version} (machine)`, binary: process.execPath, version: process.version };
    const imageRt: Runtime = { name: `node ${image.nodeVersion} (image ${image.imageId})`, binary: image.binary ?? 'node', version: image.nodeVersion };
    // Side by side: as shipped under both runtimes; under the image's (what users run) also without
    // the memory settings, and the sidecar with the Deployments' arena cap.
    const variants: Variant[] = [
      { runtime: machine, label: 'as shipped', settings: (c) => SHIPPED[c] },
      { runtime: imageRt, label: 'as shipped', settings: (c) => SHIPPED[c] },
      { runtime: imageRt, label: 'without', settings: () => PLAIN },
      { runtime: imageRt, label: 'arena cap', settings: (c) => (c === 'sidecar' ? SIDECAR_WITH_ARENAS : undefined) },
    ];
    /** What a component runs with, as the table says it. */
    const describe = (s: Settings): string => [s.flags.length > 0 ? `node ${s.flags.join(' ')}` : 'plain node', ...Object.entries(s.env).map(([k, v]) => `${k}=${v}`)].join(' ');
    const minutes = ctx.minutes ?? size.minutes;
    const cp = await benchControlPlane(cleanup);
    const topo = await createTopology();
    cleanup.add('topology', () => topo.teardown());
    const relay = await startApiserverRelay(topo, cp.server, cp.dir);
    cleanup.add('apiserver relay', () => relay.close());
    const bundles = { sidecar: await buildBundle(cleanup, 'sidecar'), controller: await buildBundle(cleanup, 'controller'), agent: await buildBundle(cleanup, 'node-agent') };
    if (!bundles.sidecar || !bundles.controller || !bundles.agent) throw new Error('B12: scripts/build.mjs is needed to bundle the programs');
    const diag = mkdtempSync(path.join(os.tmpdir(), 'mp-b12-'));
    cleanup.add('snapshot dir', () => rmSync(diag, { recursive: true, force: true }));
    const diagFlags = (name: string): string[] => {
      const dir = path.join(diag, name.replace(/[^a-z0-9]+/gi, '-'));
      return ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${dir}`];
    };
    const dirOf = (flags: string[]): string => {
      const d = (flags[1] ?? '').slice('--diagnostic-dir='.length);
      rmSync(d, { recursive: true, force: true });
      mkdirSync(d, { recursive: true });
      return d;
    };
    const components: Component[] = [];
    const problems = new Map<string, number>();
    // Writes fail while the apiserver restarts (connection refused): counted by message, not fatal.
    const onError = (e: unknown): void => {
      const m = (e instanceof Error ? e.message : String(e)).replace(/127\.0\.0\.1:\d+/g, 'apiserver').slice(0, 160);
      problems.set(m, (problems.get(m) ?? 0) + 1);
    };

    // One churn namespace per controller; the sidecars and agents serve the first one's network (bench/net-a).
    const controllerVariants = variants.filter((v) => v.settings('controller') !== undefined);
    const namespaces = controllerVariants.map((_, i) => (i === 0 ? BENCH_NAMESPACE : `churn-${String.fromCharCode(98 + i - 1)}`));
    for (const ns of namespaces.slice(1)) await cp.createNamespace(ns);
    await cp.client.create(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', BENCH_NAMESPACE), benchNad('eth1')).catch(onError);
    const cpuOf = (pid: number) => (): number => treeSum(pid, cpuWithChildrenMs);
    const readMetrics = async (netns: string | undefined, port: number, prefix: string): Promise<HeapFigures & { gcS: number }> => {
      const text = await metricsOver(netns, port);
      return { ...parseHeapMetrics(text, prefix), gcS: gcSeconds(text, prefix) };
    };

    for (const [i, v] of controllerVariants.entries()) {
      const rt = v.runtime;
      const set = v.settings('controller') ?? SHIPPED.controller;
      const ns = namespaces[i] ?? BENCH_NAMESPACE;
      const name = `controller (${ns})`;
      const flags = diagFlags(`${name}-${rt.version}-${i}`);
      const port = await freePort();
      const argv = [
        ...flags,
        ...set.flags,
        bundles.controller,
        '--kubeconfig',
        cp.kubeconfigPath,
        '--namespace',
        ns,
        '--lease-namespace',
        ns,
        '--lease-name',
        'multus-proxy-controller',
        '--identity',
        `b12-${i}`,
        ...LEASE,
        '--health-port',
        String(port),
        '--health-host',
        '127.0.0.1',
      ];
      const proc = logged(
        startProcess(rt.binary, argv, { cwd: ROOT, env: { ...process.env, NODE_ENV: 'production', LOG_LEVEL: 'info', ...set.env } }),
        `${rt.name} ${path.basename(bundles.controller)}`,
        name,
        cleanup,
      );
      await proc.waitFor((l) => l.msg === 'controller started', 120_000, 'controller start');
      const pid = proc.child.pid ?? 0;
      components.push({
        name: 'controller',
        runtime: rt,
        label: `${v.label}: ${describe(set)}`,
        pid,
        cpuMs: cpuOf(pid),
        exited: () => gone(proc.child),
        snapshots: dirOf(flags),
        metrics: () => readMetrics(undefined, port, 'multus_proxy_controller'),
      });
    }
    for (const [i, v] of variants.entries()) {
      const rt = v.runtime;
      const set = v.settings('sidecar');
      if (set === undefined) continue;
      const podName = `client${i}`;
      const pod = await topo.addPod(podName);
      await relay.attach(pod);
      await createPod(cp.client, clientPod(podName, pod.net1.ipv4));
      const flags = diagFlags(`sidecar-${rt.version}-${i}`);
      const sidecar: SidecarProcess = startSidecar({ cp, pod, podName }, cleanup, 'info', { binary: rt.binary, argv: [...flags, ...set.flags, bundles.sidecar], env: set.env, how: rt.name });
      await sidecar.waitFor((l) => l.msg === 'first sync done; ready', 120_000, 'first sync');
      const pid = sidecar.child.pid ?? 0;
      components.push({
        name: 'sidecar',
        runtime: rt,
        label: `${v.label}: ${describe(set)}`,
        pid,
        cpuMs: cpuOf(pid),
        exited: () => gone(sidecar.child),
        snapshots: dirOf(flags),
        metrics: () => readMetrics(pod.ns, 9180, 'multus_proxy_sidecar'),
      });
    }
    for (const [i, v] of variants.entries()) {
      const rt = v.runtime;
      const set = v.settings('node agent');
      if (set === undefined) continue;
      const node = await topo.addNode(`node${i}`);
      await relay.attach(node);
      const nodeName = `b12-node-${i}`;
      const nodeObj = benchNode(node.parent);
      await cp.client.create(apiPath('', 'v1', 'nodes'), { ...nodeObj, metadata: { ...nodeObj.metadata, name: nodeName } });
      const flags = diagFlags(`node-agent-${rt.version}-${i}`);
      const env = { ...process.env, NODE_ENV: 'production', NODE_NAME: nodeName, KUBECONFIG: cp.kubeconfigPath, HEALTH_PORT: '19191', LOG_LEVEL: 'info', ...set.env };
      const child = startProcess('setpriv', ['--bounding-set=-all,+net_admin,+net_raw', '--', rt.binary, ...flags, ...set.flags, bundles.agent], { netns: node.ns, cwd: ROOT, env });
      const agent = logged(child, rt.name, `node agent ${i}`, cleanup);
      await agent.waitFor((l) => l.msg === 'first sync done; ready', 120_000, 'first sync');
      const pid = child.pid ?? 0;
      components.push({
        name: 'node agent',
        runtime: rt,
        label: `${v.label}: ${describe(set)}`,
        pid,
        cpuMs: cpuOf(pid),
        exited: () => gone(child),
        snapshots: dirOf(flags),
        metrics: () => readMetrics(node.ns, 19191, 'multus_proxy_node'),
      });
    }

    const churns: ScaleChurn[] = [];
    for (const [i, ns] of namespaces.entries()) {
      churns.push(
        await startScaleChurn(cp.client, { namespace: ns, network: 'net-a', networkKey: `${ns}/net-a`, high: 4, low: 2, stepMs: size.stepMs, addressBase: 110 + i, nodeName: 'b12-node-0', onError }),
      );
    }
    cleanup.add('churn', async () => {
      for (const c of churns) await c.stop();
    });
    ctx.log(`churn started: ${components.length} components (${components.map((c) => `${c.name} ${c.runtime.version} pid ${c.pid}`).join(', ')})`);

    const samples = new Map<Component, Sample[]>(components.map((c) => [c, []]));
    const disruptions = ['apiserver restart', 'etcd compaction, then apiserver restart', 'rollout restart'] as const;
    const done: string[] = [];
    const t0 = performance.now();
    const elapsed = (): number => (performance.now() - t0) / 1000;
    let nextDisrupt = size.disruptEveryS;
    let nextSample = 0;
    const warmupS = size.warmupMinutes * 60;
    const windowEndS = warmupS + minutes * 60;
    /** Churns (with disruptions, sampling until the window ends) until `untilS`. */
    const churnUntil = async (untilS: number): Promise<void> => {
      while (elapsed() < untilS) {
        if (elapsed() >= nextSample && elapsed() < windowEndS) {
          nextSample += size.sampleEveryS;
          for (const c of components) {
            const why = c.exited();
            if (why !== undefined) throw new Error(`B12: the ${c.name} (${c.runtime.name}) ${why}`);
            const m = await c.metrics().catch(() => ({ used: NaN, total: NaN, gcS: NaN }));
            samples.get(c)?.push({ s: elapsed(), cpuMs: c.cpuMs(), gcS: m.gcS, privateMiB: smaps(c.pid).anonymous / MIB, heapUsedMiB: m.used, heapTotalMiB: m.total });
          }
          // One line per round (private/reserved MiB each), so a long run's course can be read while it runs.
          ctx.log(
            `sample ${fmt(elapsed())} s: ${components
              .map((c) => {
                const x = samples.get(c)?.at(-1);
                return `${c.name}|${c.runtime.version}|${c.label.split(':')[0] ?? ''} ${fmt(x?.privateMiB ?? NaN)}/${fmt(x?.heapTotalMiB ?? NaN)}`;
              })
              .join('; ')}`,
          );
        }
        if (elapsed() >= nextDisrupt) {
          const what = disruptions[done.length % disruptions.length] ?? 'apiserver restart';
          nextDisrupt += size.disruptEveryS;
          if (what === 'rollout restart') await Promise.all(churns.map((c) => c.replaceAll().catch(onError)));
          else {
            if (what.startsWith('etcd')) await cp.compactEtcd();
            await cp.restartApiserver();
          }
          done.push(what);
          ctx.log(`${fmt(elapsed())} s: ${what}; ${churns.map((c) => c.steps()).join('/')} scale steps`);
        }
        await sleep(500);
      }
    };
    await churnUntil(windowEndS);
    const first = new Map<Component, Map<string, HeapGroup>>();
    for (const c of components) first.set(c, await signalSnapshot(c.pid, c.snapshots, `${c.name} (${c.runtime.name})`));
    const firstAt = elapsed();
    ctx.log(`window over at ${fmt(firstAt)} s: first heap snapshots taken`);
    await churnUntil(windowEndS + size.snapshotMinutes * 60);
    const last = new Map<Component, Map<string, HeapGroup>>();
    for (const c of components) last.set(c, await signalSnapshot(c.pid, c.snapshots, `${c.name} (${c.runtime.name})`));
    const snapshotGapMin = (elapsed() - firstAt) / 60;
    const steps = churns.map((c) => c.steps());
    for (const c of churns) await c.stop();

    const rows: string[][] = [];
    const targets: TargetCheck[] = [];
    const notes: string[] = [];
    const from = warmupS;
    for (const c of components) {
      const all = samples.get(c) ?? [];
      const win = all.filter((s) => s.s >= from);
      const half = win.length > 0 ? ((win[0]?.s ?? 0) + (win.at(-1)?.s ?? 0)) / 2 : 0;
      const slope = (pick: readonly Sample[]): number => slopeOf(pick.map((s) => ({ x: s.s, y: s.privateMiB }))) * 3600;
      const whole = slope(win);
      const retainedBefore = totalBytes(first.get(c) ?? new Map()) / MIB;
      const retainedAfter = totalBytes(last.get(c) ?? new Map()) / MIB;
      const priv = win.map((s) => s.privateMiB);
      const secondHalf = win.filter((s) => s.s >= half);
      const spanS = (win.at(-1)?.s ?? 0) - (win[0]?.s ?? 0);
      const cpuPercent = spanS > 0 ? (((win.at(-1)?.cpuMs ?? NaN) - (win[0]?.cpuMs ?? NaN)) / (spanS * 1000)) * 100 : NaN;
      const gcPercent = spanS > 0 ? (((win.at(-1)?.gcS ?? NaN) - (win[0]?.gcS ?? NaN)) / spanS) * 100 : NaN;
      rows.push([
        c.name,
        `${c.runtime.name}, ${c.label}`,
        `${fmt(win[0]?.privateMiB ?? NaN)} → ${fmt(win.at(-1)?.privateMiB ?? NaN)} (max ${fmt(Math.max(...priv))}; ${fmt(all[0]?.privateMiB ?? NaN)} at start)`,
        `${fmt(Math.min(...secondHalf.map((s) => s.privateMiB)))}–${fmt(Math.max(...secondHalf.map((s) => s.privateMiB)))}`,
        `${fmt(whole)} (${fmt(slope(win.filter((s) => s.s < half)))} / ${fmt(slope(secondHalf))})`,
        `${fmt(cpuPercent)}%${Number.isNaN(gcPercent) ? '' : ` (GC ${fmt(gcPercent)}%)`}`,
        `${fmt(win[0]?.heapUsedMiB ?? NaN)} of ${fmt(win[0]?.heapTotalMiB ?? NaN)} → ${fmt(win.at(-1)?.heapUsedMiB ?? NaN)} of ${fmt(win.at(-1)?.heapTotalMiB ?? NaN)}`,
        `${fmt(offHeap(win[0]))} → ${fmt(offHeap(win.at(-1)))}`,
        `${fmt(retainedBefore)} → ${fmt(retainedAfter)}`,
      ]);
      targets.push({
        target: `${c.name}, ${c.runtime.name}, ${c.label}: private memory slope after warm-up ≤ ${TARGET_SLOPE_MIB_PER_H} MiB/h`,
        measured: `${fmt(whole)} MiB/h over ${minutes} min (second half ${fmt(slope(secondHalf))})`,
        met: whole <= TARGET_SLOPE_MIB_PER_H,
      });
      const grown = growth(first.get(c) ?? new Map(), last.get(c) ?? new Map()).slice(0, 6);
      notes.push(
        `${c.name} (${c.runtime.name}, ${c.label}), retained heap groups that grew most in the ${fmt(snapshotGapMin)} min between the snapshots: ${grown.map((g) => `${g.key} ${g.before.count}→${g.after.count} objects, ${fmt(g.before.bytes / 1024)}→${fmt(g.after.bytes / 1024)} KiB`).join('; ') || 'none'}.`,
      );
    }
    return {
      tables: [
        {
          caption: `${size.warmupMinutes} min warm-up, ${minutes} min window, ${fmt(snapshotGapMin)} min between the snapshots (${steps.join(' and ')} scale steps in all, ${done.length} disruptions: ${[...new Set(done)].join(', ')}); private = Anonymous of the process from smaps_rollup, sampled every ${size.sampleEveryS} s in the window:`,
          columns: [
            'component',
            'runtime',
            'private MiB: window start → end (max; at start)',
            'private MiB over the second half: min–max',
            'private slope MiB/h over the window (first half / second half)',
            'CPU, % of a core over the window (GC pauses, where /metrics has them)',
            'V8 heap MiB used of reserved (from /metrics): window start → end',
            'private − V8 reserved MiB (off-heap): start → end',
            'retained heap MiB (snapshot after the window → second snapshot)',
          ],
          rows,
        },
      ],
      targets,
      notes: [
        ...notes,
        ...(problems.size > 0 ? [`Churn writes that failed (most while the apiserver restarted): ${[...problems].map(([m, n]) => `${n}× ${m}`).join('; ')}.`] : []),
        `Method: a private kube-apiserver + etcd; ${namespaces.length} namespaces (${namespaces.join(', ')}) each with a Service \`web\` (NodePort, network net-a of its namespace) whose pods scale 4 → 2 → 4 every ${size.stepMs / 1000} s: scale-down deletes with the grace period and a second later writes Ready=False and deletes with grace 0; scale-up creates pods with a new address and writes them Running and Ready. Each component runs once per variant (runtime and settings; as shipped: the sidecar node ${SIDECAR_NODE_FLAGS.join(' ')} with ${Object.entries(
          SIDECAR_MALLOC_ENV,
        )
          .map(([k, v]) => `${k}=${v}`)
          .join(
            ' ',
          )} as injected, the controller ${describe(SHIPPED.controller)} and the node agent ${describe(SHIPPED['node agent'])} as their manifests run them): one controller per variant (leader election on, its namespace only, fresh bundle of cmd/controller/main.ts) writes its namespace's slices; the sidecars (fresh bundle, in client pod namespaces of the harness topology) and the node agents (in node namespaces, NET_ADMIN and NET_RAW only) serve ${networkKey(NETWORK)}. CPU is utime+stime of the process and its children from /proc over the window; GC pauses are prom-client's nodejs_gc_duration_seconds (the sidecar's lean metrics have none). Every ${size.disruptEveryS} s one disruption in turn: ${disruptions.join('; ')}. Heap snapshots (--heapsnapshot-signal=SIGUSR2, taken after a full GC) after the window and ${size.snapshotMinutes} min of churn later, grouped by constructor (bench/lib/heap-snapshot.ts). The image's runtime is its node binary copied out of the image (${image.how.split(':')[1]?.trim() ?? image.imageId}), running the same fresh bundles.`,
      ],
    };
  },
);

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
