/**
 * The soak: hours of the blog scenario's churn on the real node, the multus-proxy
 * Service beside an ordinary Service over the same pods (kube-proxy) in the same run. The
 * scenario and its records are test/node/soak.ts's (the real-node suite runs the same module for
 * its quick soak). `npm run bench -- soak` runs 2 hours, `--quick` 3 minutes, `--minutes N` N.
 * Besides its section of docs/benchmarks.md it writes the whole record (every memory sample, failed
 * request, churn event and project Event) as JSON under bench/records/.
 */
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { imagesDir, startNode } from '../test/harness/node.js';
import { INSTALL_BOOTSTRAP, installBootstrap } from '../test/node/install.js';
import { INSTALL_NAMESPACE } from '../src/keys.js';
import { PATHS, PLAIN_SERVICE, WITNESS, runSoak, SOAK_FULL, SOAK_NS, SOAK_QUICK, tearDown, type Path, type SoakOptions, type SoakRecord } from '../test/node/soak.js';
import type { ChurnKind } from '../test/node/soak-analysis.js';
import { curlCause, histogramShare } from '../test/node/soak-analysis.js';
import { judgeMemory, MEMORY_LIMITS_MIB, MEMORY_RULE, type Verdict } from '../test/node/soak-memory.js';
import { fmt, summarize } from '../test/harness/stats.js';
import { STAGE_CAPTION, STAGE_COLUMNS, stageCells } from '../test/controller/deletion-stages.js';
import { defineBenchmark } from './lib/define.js';
import { ROOT, type BenchResult } from './lib/report.js';
import { isMain, runStandalone } from './lib/runner.js';

const TARGET = { deletionP99Ms: 50 };
const RECORDS = join(ROOT, 'bench', 'records');

/** Which build of the project's image ran. */
function projectImage(): string {
  const tar = join(imagesDir(), 'multus-proxy.tar');
  try {
    return `image ${readFileSync(`${tar}.id`, 'utf8')
      .trim()
      .replace(/^sha256:/, '')
      .slice(0, 12)}, built ${statSync(tar)
      .mtime.toISOString()
      .replace(/\.\d+Z$/, 'Z')}`;
  } catch {
    return `image of ${tar}`;
  }
}

/** The options for this run: --quick, or the full soak shortened by --minutes (the no-preStop phase at most an eighth, the warm-up at most a quarter). */
export function soakOptions(quick: boolean, minutes: number | undefined): SoakOptions {
  const base = quick ? SOAK_QUICK : SOAK_FULL;
  if (minutes === undefined) return base;
  // At least five disruptions, so a shorter run still does each kind once.
  return {
    ...base,
    minutes,
    noPreStopMinutes: Math.min(base.noPreStopMinutes, minutes / 8),
    warmupMinutes: Math.min(base.warmupMinutes, minutes / 4),
    disruptEveryMs: Math.min(base.disruptEveryMs, (minutes * 60_000) / 5),
  };
}

const KINDS: readonly ChurnKind[] = ['scale-down', 'scale-up', 'rollout restart', 'controller leader deleted', 'webhook pod deleted', "client's sidecar stopped", 'preStop added (a rollout)'];
const PATH_NAMES: readonly Path[] = ['multus-proxy', 'kube-proxy'];

export const benchmark = defineBenchmark(
  'soak',
  'hours of churn on the real node: memory per component, requests lost per event beside kube-proxy, deletion → slice write, Events of the project’s containers',
  { quick: true, full: false },
  async (ctx, quick, cleanup) => {
    const o = soakOptions(quick, ctx.minutes);
    // Read before the run: another session may rebuild the image while it runs.
    const image = projectImage();
    const node = await startNode({ log: (m) => ctx.log(`node: ${m}`) });
    let stopped = false;
    cleanup.add('real node', async () => {
      if (!stopped) await node.stop();
    });
    await installBootstrap(node).catch(async (e: unknown) => {
      // What the install's pods and Events say, before the teardown takes them away.
      for (const args of [
        ['get', 'pods', '-n', INSTALL_NAMESPACE, '-o', 'wide'],
        ['get', 'events', '-n', INSTALL_NAMESPACE, '--sort-by=.lastTimestamp'],
      ]) {
        ctx.log((await node.kubectlResult(args, { allowFail: true })).stdout);
      }
      throw e;
    });
    ctx.log(`installed (${INSTALL_BOOTSTRAP}); soak of ${o.minutes} min (${o.noPreStopMinutes} without preStop)`);
    const r: SoakRecord = await runSoak(node, o, ctx.log);
    mkdirSync(RECORDS, { recursive: true });
    const file = join(RECORDS, `soak-${quick ? 'quick-' : ''}${r.startedAt.replace(/[:.]/g, '-').replace(/-\d+Z$/, 'Z')}.json`);
    writeFileSync(file, `${JSON.stringify({ image, ...r }, null, 1)}\n`);
    ctx.log(`record: ${file}`);
    await tearDown(node, o, ctx.log);
    const left = await node.stop();
    stopped = true;
    if (left.length > 0) throw new Error(`the real node's teardown left things behind: ${left.join('; ')}`);
    return report(r, file, node.startMs, image);
  },
);

export function report(r: SoakRecord, file: string, startMs: number, image: string): BenchResult {
  const o = r.options;
  const count = (kind: ChurnKind, phase: string): number => r.churn.filter((e) => e.kind === kind && phaseName(r, e.at) === phase).length;
  const rows: string[][] = [];
  for (const p of r.phases) {
    const downs = count('scale-down', p.name);
    for (const path of PATH_NAMES) {
      const req = r.requests.find((x) => x.path === path && x.phase === p.name);
      const lostDown = r.failures.filter((f) => f.path === path && f.phase === p.name && f.after === 'scale-down').length;
      rows.push([
        p.name,
        `${path} (${PATHS[path].split('.')[0] ?? ''})`,
        String(req?.requests ?? 0),
        String(req?.failed ?? 0),
        `${lostDown} in ${downs} (${fmt(downs > 0 ? lostDown / downs : 0)} per scale-down)`,
      ]);
    }
  }
  const byKind: string[][] = [];
  for (const p of r.phases) {
    for (const kind of KINDS) {
      const n = count(kind, p.name);
      if (n === 0) continue;
      const cells = PATH_NAMES.map((path) => {
        const fs = r.failures.filter((f) => f.path === path && f.phase === p.name && f.after === kind);
        if (fs.length === 0) return '0';
        const causes = [...new Set(fs.map((f) => curlCause(f.code)))].join(', ');
        const after = summarize(fs.map((f) => f.afterMs ?? 0));
        return `${fs.length} (${causes}; ${fmt(after.min / 1000)}–${fmt(after.max / 1000)} s after)`;
      });
      byKind.push([p.name, kind, String(n), ...cells]);
    }
  }
  const mem = r.slopes.filter((s) => s.n > 0).map((s) => [s.component, `${s.pod} (${s.instance})`, String(s.n), fmt(s.firstMiB), fmt(s.lastMiB), fmt(s.maxMiB), fmt(s.mibPerHour)]);
  const del = PATH_NAMES.map((path) => {
    const d = r.deletion[path];
    const s = summarize(d.ms);
    return [
      path === 'multus-proxy' ? 'ours (multus-proxy-controller)' : "kube's (endpointslice-controller.k8s.io)",
      fmt(s.median),
      fmt(s.p90),
      fmt(s.p99),
      fmt(s.max),
      String(s.n),
      String(d.missing.length),
      String(d.neverListed.length),
    ];
  });
  const startRow = (label: string, xs: number[]): string[] => {
    const q = summarize(xs);
    return [label, fmt(q.median), fmt(q.p90), fmt(q.p99), fmt(q.max), String(q.n)];
  };
  const st = r.sidecarStarts ?? [];
  const startRows = [
    startRow(
      'container started → health port listening',
      st.flatMap((x) => (x.listenMs !== undefined ? [x.listenMs] : [])),
    ),
    startRow(
      'container started → first sync done (ready)',
      st.flatMap((x) => (x.readyMs !== undefined ? [x.readyMs] : [])),
    ),
    startRow(
      "container started → the pod's app container started (startup probe passed)",
      st.flatMap((x) => (x.appMs !== undefined ? [x.appMs] : [])),
    ),
    startRow(
      'first sync done → app container started',
      st.flatMap((x) => (x.appMs !== undefined && x.readyMs !== undefined ? [x.appMs - x.readyMs] : [])),
    ),
  ];
  const evRows = new Map<string, number>();
  const normal = new Map<string, number>();
  for (const e of r.events.filter((x) => x.type !== 'Warning')) normal.set(e.reason, (normal.get(e.reason) ?? 0) + e.count);
  for (const e of r.events.filter((x) => x.type === 'Warning')) {
    const key = [e.container, e.type, e.reason, e.probe ? `${e.probe}: ${e.cause ?? ''}` : e.message.slice(0, 80), e.podState ?? ''].join('|');
    evRows.set(key, (evRows.get(key) ?? 0) + e.count);
  }
  const unhealthy = r.events.filter((e) => e.reason === 'Unhealthy').reduce((n, e) => n + e.count, 0);
  const preStop = r.phases.find((p) => p.preStop)?.name ?? '';
  const lostPreStop = r.failures.filter((f) => f.path === 'multus-proxy' && f.phase === preStop).length;
  const reqPreStop = r.requests.find((x) => x.path === 'multus-proxy' && x.phase === preStop)?.requests ?? 0;
  const ours = summarize(r.deletion['multus-proxy'].ms);
  const rule = { ...MEMORY_RULE, warmupMinutes: o.warmupMinutes };
  const verdicts = r.memoryVerdicts ?? judgeMemory(r.memory, MEMORY_LIMITS_MIB, rule);
  const met: Record<Verdict, boolean | undefined> = { flat: true, settles: true, grows: false, 'not judged': undefined };
  const ceilingRows = verdicts.map((v) => [
    v.component,
    String(v.instances),
    v.ceiling ? fmt(v.ceiling.spanMinutes) : '',
    v.ceiling ? fmt(v.ceiling.firstThirdMaxMiB) : '',
    v.ceiling ? fmt(v.ceiling.lastThirdMaxMiB) : '',
    v.ceiling ? fmt(v.ceiling.marginMiB) : '',
    v.ceiling ? fmt(v.ceiling.maxMiB) : '',
    v.limitMiB !== undefined ? String(v.limitMiB) : '',
    v.verdict,
  ]);
  const loads = r.loadAverages.map((l) => l.load[0] ?? 0);
  const minutes = (Date.parse(r.endedAt) - Date.parse(r.startedAt)) / 60_000;
  return {
    tables: [
      {
        caption: `Requests by name from the client, ${fmt(minutes)} min of churn; a failure counts against the latest churn event issued before it:`,
        columns: ['phase', 'path (Service)', 'requests', 'failed', 'failed after a scale-down'],
        rows,
      },
      {
        caption: 'Failed requests per kind of event (the latest event before each failure); the cause is curl’s exit code:',
        columns: ['phase', 'event', 'events', 'multus-proxy failed', 'kube-proxy failed'],
        rows: byKind,
      },
      {
        caption: `Private memory (smaps_rollup Anonymous over the container's processes, as B5), MiB, sampled every ${o.sampleEveryMs / 1000} s; per container instance, after a ${o.warmupMinutes}-minute warm-up from its first sample; slope by least squares:`,
        columns: ['component', 'pod (container)', 'samples', 'first', 'last', 'max', 'MiB per hour'],
        rows: mem,
      },
      {
        caption: `Each component's samples after its instances' warm-up, pooled over instances (every leader term, every webhook pod), split by time into thirds (test/node/soak-memory.ts): settles when the last third's max ≤ the first third's max + ${rule.slopeMiBPerHour} MiB/h × the time between the thirds' middles, and the ceiling ≤ ${rule.ceilingShareOfLimit * 100} % of the container's limit; flat (judged first) when every instance followed ≥ ${rule.spanMinutes} min after warm-up grows ≤ ${rule.slopeMiBPerHour} MiB/h. MiB:`,
        columns: ['component', 'instances', 'minutes judged', 'first third max', 'last third max', 'allowed rise', 'ceiling', 'limit', 'verdict'],
        rows: ceilingRows,
      },
      {
        caption:
          "The injected sidecars' starts during the soak (the backends' and the client's after its stop), ms: containerd's startedAt, the sidecar's own log times, the app container's startedAt:",
        columns: ['', 'p50', 'p90', 'p99', 'max', 'n'],
        rows: startRows,
      },
      {
        caption:
          'Pod deletion seen (pod watch) → its endpoint terminating seen (slice watch), ms, the backends deleted by the churn; both watches in a watcher process that does nothing else (nice -5), as B9:',
        columns: ['slices', 'p50', 'p90', 'p99', 'max', 'n', 'never terminating', 'deleted before any slice listed them'],
        rows: del,
      },
      { caption: `Ours, ${STAGE_CAPTION}; only the controller pods alive at the end have logs:`, columns: STAGE_COLUMNS, rows: [stageCells(r.deletionStages ?? [])] },
      {
        caption: `Warning Events on the project's containers during the soak (the sidecar in every pod, the controller, webhook and node agent pods), summed counts; pod state from the watches (1 s event precision). Normal ones: ${[...normal].map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}:`,
        columns: ['container', 'type', 'reason', 'probe: cause / message', 'pod state', 'count'],
        rows: [...evRows].map(([k, n]) => [...k.split('|'), String(n)]),
      },
    ],
    targets: [
      { target: `multus-proxy path, preStop sleep ${o.preStopSeconds} s: 0 lost requests`, measured: `${lostPreStop} of ${reqPreStop}`, met: reqPreStop > 0 && lostPreStop === 0 },
      {
        target: `pod deletion → terminating in our slice p99 ≤ ${TARGET.deletionP99Ms} ms`,
        measured: `${fmt(ours.p99)} ms (n=${ours.n}, p50 ${fmt(ours.median)})`,
        met: ours.n > 0 && ours.p99 <= TARGET.deletionP99Ms,
      },
      { target: "0 Unhealthy events from the project's containers", measured: String(unhealthy), met: unhealthy === 0 },
      ...verdicts.map((v) => ({
        target: `${v.component}: private memory flat after warm-up (≤ ${rule.slopeMiBPerHour} MiB/h, instances followed ≥ ${rule.spanMinutes} min) or settles at a ceiling ≤ ${rule.ceilingShareOfLimit * 100} % of its limit (thirds rule)`,
        measured: `${v.verdict}: ${v.why}`,
        met: met[v.verdict],
      })),
    ],
    notes: [
      `Method: the real node of test/harness/node.ts (Kubernetes v1.34.4, kube-proxy in iptables mode), up in ${fmt(startMs / 1000)} s; multus-proxy installed with \`${INSTALL_BOOTSTRAP}\` from the project's image (${image}). ` +
        `Namespace ${SOAK_NS}, injection enabled (the backends get the sidecar, as in the blog): the blog's NAD, Service, ConfigMap + Deployment and client pod unchanged, plus Service ${PLAIN_SERVICE} with the same selector on the primary network (kube-proxy)${o.agent ? ', and the node agent serving the network' : ''}. ` +
        `Churn: every ${o.scaleEveryMs / 1000} s the Deployment alternates 4 and 2 replicas; every ${o.disruptEveryMs / 1000} s (half a step after a scale) one of: rollout restart, the controller leader's pod deleted, a webhook pod deleted, the client's sidecar stopped (crictl stop), in turn${o.witness ? `; a second client pod (${WITNESS}, the blog's pod.yml renamed) is never disrupted, so one sidecar is followed for the whole run` : ''}. ` +
        `The first ${o.noPreStopMinutes} min run nginx as the blog has it (no preStop); then the README's \`preStop: sleep ${o.preStopSeconds} s\` is added (a rollout of its own). ` +
        `Load: two curl loops in the client container, one per Service, by name through CoreDNS, \`curl -sf -m 2\`, ${o.pauseS} s apart (requests: multus-proxy ${r.totals['multus-proxy'].ok + r.totals['multus-proxy'].failed}, kube-proxy ${r.totals['kube-proxy'].ok + r.totals['kube-proxy'].failed}). ` +
        `Load average (1 min) over the run: median ${fmt(summarize(loads).median)}, max ${fmt(summarize(loads).max)}. The whole record, every sample and failure, is ${file.replace(`${ROOT}/`, '')}.`,
      leaderNote(r),
      ...(r.errors.length > 0 ? [`Errors during the run: ${r.errors.join('; ')}`] : []),
    ],
  };
}

/** The leader's own change → write histogram beside the watches' figure: what is the controller's and what the apiserver's and the watch's. */
function leaderNote(r: SoakRecord): string {
  const lines = r.controllerMetrics ?? [];
  const h = histogramShare(lines, 'multus_proxy_controller_change_to_slice_write_seconds', 0.05);
  const leader = lines[0]?.replace(/^# leader /, '') ?? '';
  if (!h) return `The leader's own change → slice write histogram could not be read at the end (${lines[0] ?? 'no lines'}).`;
  return `The leader at the end (${leader}; since its start, so after the last leader deletion) saw ${h.count} changes through to their slice write, ${h.atMost} (${fmt((100 * h.atMost) / Math.max(1, h.count))} %) within 50 ms by its own histogram (multus_proxy_controller_change_to_slice_write_seconds: from its informer's event to the write's answer); the rest of the watches' figure is the apiserver's delivery of the pod change to the controller and of the slice to the bench.`;
}

function phaseName(r: SoakRecord, at: number): string {
  return r.phases.find((p) => at >= p.from && at < p.to)?.name ?? r.phases[r.phases.length - 1]?.name ?? '';
}

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
