/**
 * The webhook's memory under the soak's kind of load, without the real node.
 * The 2-hour soak saw the webhook pod that lived the whole run grow 30.2 → 36.5 MiB private
 * (2.37 MiB/h). Here the webhook program (a fresh bundle, scripts/build.mjs --only webhook) runs
 * with the Deployment's arguments and the ConfigMap's config.yaml (deploy/base) against a private
 * kube-apiserver + etcd (its lookups: Namespace, NAD, version, node agent DaemonSet are real),
 * and the bench plays the apiserver and the kubelet at a much higher rate than the soak:
 * - pod CREATE AdmissionReviews (a realistic pod in an injection-enabled namespace, a new uid and
 *   name each) over a few HTTPS keep-alive connections, all of them dropped and opened again
 *   every `reconnectEveryS` (the apiserver closes idle ones; a restarted apiserver opens new ones);
 * - the kubelet's probes, /healthz and /readyz?wait=4, each on a new TLS connection as the kubelet
 *   makes them.
 * Side by side in one run, all on the image's Node.js 24: as deployed before (plain
 * `node /app/dist/webhook.js`, what the soak ran), with the malloc settings of the other
 * Deployments, with their V8 flags, and with both (src/memory-settings.ts). Sampled every few seconds: private (Anonymous) from
 * smaps_rollup, the V8 heap and its spaces from /metrics; two heap snapshots (after the window and
 * a few minutes later) say what the retained heap holds more of.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { loadAll } from 'js-yaml';
import { createCA, createServingCert } from '../cmd/certs/pki.js';
import { apiPath } from '../src/kube/paths.js';
import { INJECTION_ENABLED, INJECTION_LABEL } from '../src/keys.js';
import { DEPLOYMENT_MALLOC_ENV, NODE_MEMORY_FLAGS } from '../src/memory-settings.js';
import { PATHS } from '../cmd/webhook/server.js';
import { METRIC_PREFIX } from '../cmd/webhook/metrics.js';
import { freePort } from '../test/harness/controlplane.js';
import { benchControlPlane } from './lib/cluster.js';
import { admissionReview, realisticPod } from './lib/pods.js';
import { buildBundle } from './lib/sidecar-env.js';
import { imageSidecarCommand } from './lib/image-runtime.js';
import { growth, signalSnapshot, totalBytes, type HeapGroup } from './lib/heap-snapshot.js';
import { gcSeconds, heapSpaces, parseHeapMetrics } from './lib/v8-heap.js';
import { cpuMs, sleep, smaps, startProcess, stopProcess, waitForLine } from './lib/proc.js';
import { fmt } from '../test/harness/stats.js';
import { slope as slopeOf } from '../test/node/soak-analysis.js';
import { ROOT, type TargetCheck } from './lib/report.js';
import { defineBenchmark } from './lib/define.js';
import { isMain, runStandalone } from './lib/runner.js';

/**
 * Rates per webhook. The soak gave each of its two webhooks about 0.05–0.1 pod admissions per
 * second (2 pods every 20 s plus rollouts) and 0.3 probe connections per second (readiness every
 * 5 s, liveness every 10 s): here `admitPerS` is a few hundred times that, the probes ten times.
 */
const SIZES = {
  quick: { warmupMinutes: 1, minutes: 4, snapshotMinutes: 2, admitPerS: 20, connections: 4, reconnectEveryS: 30, probesPerS: 3, sampleEveryS: 5 },
  full: { warmupMinutes: 3, minutes: 20, snapshotMinutes: 4, admitPerS: 20, connections: 4, reconnectEveryS: 30, probesPerS: 3, sampleEveryS: 10 },
};
type Size = (typeof SIZES)['full'];

const MIB = 2 ** 20;
const TARGET_SLOPE_MIB_PER_H = 1;
const NAMESPACE = 'shop';
const NAD = 'storage-net';

interface Settings {
  readonly label: string;
  readonly flags: readonly string[];
  readonly env: Readonly<Record<string, string>>;
}
/** What deploy/base/webhook-deployment.yaml runs: `node /app/dist/webhook.js`, no flags, the image's environment. */
const DEPLOYED: Settings = { label: 'as deployed (plain node)', flags: [], env: {} };
const mallocText = Object.entries(DEPLOYMENT_MALLOC_ENV)
  .map(([k, v]) => `${k}=${v}`)
  .join(' ');
/** The node agent's settings (src/memory-settings.ts), and each half alone: which one does what. */
const SETTINGS: Settings = { label: `node ${NODE_MEMORY_FLAGS.join(' ')}, ${mallocText}`, flags: NODE_MEMORY_FLAGS, env: DEPLOYMENT_MALLOC_ENV };
const MALLOC_ONLY: Settings = { label: `malloc only: ${mallocText}`, flags: [], env: DEPLOYMENT_MALLOC_ENV };
const FLAGS_ONLY: Settings = { label: `V8 flags only: node ${NODE_MEMORY_FLAGS.join(' ')}`, flags: NODE_MEMORY_FLAGS, env: {} };

interface Sample {
  readonly s: number;
  readonly privateMiB: number;
  readonly heapUsedMiB: number;
  readonly heapTotalMiB: number;
  /** V8 heap spaces, MiB in use (code space is the JIT's). */
  readonly spaces: Record<string, number>;
  readonly cpuMs: number;
  readonly gcS: number;
}

interface Webhook {
  readonly name: string;
  readonly pid: number;
  readonly port: number;
  readonly dir: string;
  readonly samples: Sample[];
  exited(): string | undefined;
}

/** The config.yaml of the shipped ConfigMap, as the Deployment mounts it. */
function shippedConfig(): string {
  const docs = loadAll(readFileSync(path.join(ROOT, 'deploy', 'base', 'webhook-config.yaml'), 'utf8')) as { data?: Record<string, string> }[];
  const text = docs.find((d) => d.data?.['config.yaml'] !== undefined)?.data?.['config.yaml'];
  if (text === undefined) throw new Error('deploy/base/webhook-config.yaml has no config.yaml');
  return text;
}

/** One HTTPS request; resolves with the status and body (rejects on a socket error). */
function request(port: number, ca: string, p: string, agent: https.Agent | false, body?: Buffer): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path: p,
        method: body ? 'POST' : 'GET',
        agent,
        ca,
        servername: 'multus-proxy-webhook.multus-proxy-system.svc',
        headers: body ? { 'content-type': 'application/json', 'content-length': body.length } : {},
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

interface Load {
  readonly admitted: number;
  readonly probes: number;
  readonly reconnects: number;
  readonly errors: Map<string, number>;
  stop(): Promise<void>;
}

/** The apiserver's and kubelet's traffic to one webhook, until stopped. */
function startLoad(w: Webhook, ca: string, size: Size): Load {
  const state = { admitted: 0, probes: 0, reconnects: 0, errors: new Map<string, number>(), stopped: false };
  const fail = (why: string): void => void state.errors.set(why.slice(0, 120), (state.errors.get(why.slice(0, 120)) ?? 0) + 1);
  const newAgent = (): https.Agent => new https.Agent({ keepAlive: true, maxSockets: size.connections, maxFreeSockets: size.connections, ca });
  let agent = newAgent();
  let seq = 0;
  const admit = async (): Promise<void> => {
    const i = seq++;
    const pod = realisticPod({ name: `shop-7d9f8b6c5-${i.toString(36)}`, namespace: NAMESPACE });
    const body = Buffer.from(JSON.stringify(admissionReview(pod, `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`)));
    const r = await request(w.port, ca, PATHS.mutatePods, agent, body);
    if (r.status !== 200 || !r.text.includes('"patch":')) throw new Error(`HTTP ${r.status}: ${r.text.slice(0, 200)}`);
    state.admitted += 1;
  };
  const probe = async (p: string): Promise<void> => {
    const r = await request(w.port, ca, p, false);
    if (r.status !== 200) throw new Error(`${p}: HTTP ${r.status}`);
    state.probes += 1;
  };
  const loops: Promise<void>[] = [];
  // Open loop: a late answer does not slow the next request (as the apiserver's admissions).
  const every = (perS: number, fn: () => Promise<void>): Promise<void> =>
    (async () => {
      const t0 = performance.now();
      for (let n = 0; !state.stopped; n++) {
        await sleep(Math.max(0, t0 + (n * 1000) / perS - performance.now()));
        void fn().catch((e: unknown) => fail((e as Error).message));
      }
    })();
  loops.push(every(size.admitPerS, admit));
  loops.push(every((size.probesPerS * 2) / 3, () => probe('/readyz?wait=4')));
  loops.push(every(size.probesPerS / 3, () => probe('/healthz')));
  loops.push(
    every(1 / size.reconnectEveryS, async () => {
      const old = agent;
      agent = newAgent();
      // New requests go to new connections; the old ones close once their answers are in (as the
      // apiserver drops idle connections), not under a request in flight.
      setTimeout(() => old.destroy(), 5_000);
      state.reconnects += 1;
    }),
  );
  return {
    get admitted() {
      return state.admitted;
    },
    get probes() {
      return state.probes;
    },
    get reconnects() {
      return state.reconnects;
    },
    errors: state.errors,
    async stop() {
      state.stopped = true;
      await Promise.all(loops);
      agent.destroy();
    },
  };
}

export const benchmark = defineBenchmark(
  'webhook-memory',
  'the webhook’s private memory under admissions over keep-alive, reconnects and probes, against a real apiserver; as deployed and with the memory settings, side by side',
  SIZES,
  async (ctx, size: Size, cleanup) => {
    const minutes = ctx.minutes ?? size.minutes;
    const image = await imageSidecarCommand();
    const bundle = await buildBundle(cleanup, 'webhook');
    if (bundle === undefined) throw new Error('webhook-memory: scripts/build.mjs is needed to bundle the webhook');
    const cp = await benchControlPlane(cleanup);
    await cp.createNamespace(NAMESPACE, { [INJECTION_LABEL]: INJECTION_ENABLED });
    await cp.client.create(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', NAMESPACE), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name: NAD, namespace: NAMESPACE },
      spec: { config: JSON.stringify({ cniVersion: '0.4.0', type: 'macvlan', master: 'eth1', mode: 'bridge' }) },
    });
    const dir = mkdtempSync(path.join(os.tmpdir(), 'mp-webhook-mem-'));
    cleanup.add('webhook dir', () => rmSync(dir, { recursive: true, force: true }));
    const ca = createCA({ commonName: 'bench-ca' });
    const serving = createServingCert(ca, { service: 'multus-proxy-webhook', namespace: 'multus-proxy-system', ips: ['127.0.0.1'] });
    mkdirSync(path.join(dir, 'tls'));
    mkdirSync(path.join(dir, 'config'));
    writeFileSync(path.join(dir, 'tls', 'tls.crt'), serving.certPem);
    writeFileSync(path.join(dir, 'tls', 'tls.key'), serving.keyPem);
    writeFileSync(path.join(dir, 'config', 'config.yaml'), shippedConfig());
    writeFileSync(path.join(dir, 'config', 'sidecarImage'), 'docker.io/library/multus-proxy:bench');
    const imageEnv = Object.fromEntries(
      (JSON.parse(readFileSync(path.join(path.dirname(image.binary ?? ''), 'env.json'), 'utf8')) as string[]).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    );
    // The image's runtime only: it is what the pods run (the machine's Node 20 is not shipped).
    const runtime = { name: `node ${image.nodeVersion} (image ${image.imageId})`, binary: image.binary ?? 'node', env: imageEnv };
    const variants = [DEPLOYED, MALLOC_ONLY, FLAGS_ONLY, SETTINGS].map((settings) => ({ runtime, settings }));

    const webhooks: Webhook[] = [];
    for (const [i, v] of variants.entries()) {
      const snapDir = path.join(dir, `snap-${i}`);
      mkdirSync(snapDir);
      const port = await freePort();
      const args = [
        ...v.settings.flags,
        '--heapsnapshot-signal=SIGUSR2',
        `--diagnostic-dir=${snapDir}`,
        bundle,
        `--config=${path.join(dir, 'config', 'config.yaml')}`,
        `--tls-cert-file=${path.join(dir, 'tls', 'tls.crt')}`,
        `--tls-key-file=${path.join(dir, 'tls', 'tls.key')}`,
        `--port=${port}`,
        '--host=127.0.0.1',
        `--kubeconfig=${cp.kubeconfigPath}`,
      ];
      // Only what the container has: the image's environment, the Deployment's POD_NAMESPACE, the settings.
      const env = { PATH: process.env['PATH'] ?? '/usr/bin:/bin', ...v.runtime.env, POD_NAMESPACE: 'multus-proxy-system', ...v.settings.env };
      const child = startProcess(v.runtime.binary, args, { cwd: dir, env });
      cleanup.add(`webhook ${i}`, () => stopProcess(child));
      await waitForLine(child, /webhook listening/, 60_000);
      const pid = child.pid ?? 0;
      webhooks.push({
        name: `${v.runtime.name}, ${v.settings.label}`,
        pid,
        port,
        dir: snapDir,
        samples: [],
        exited: () => (child.exitCode !== null || child.signalCode !== null ? `exited (${child.exitCode ?? child.signalCode}): ${child.output().slice(-1500)}` : undefined),
      });
    }
    ctx.log(`webhooks listening: ${webhooks.map((w) => `${w.name} pid ${w.pid}`).join('; ')}`);
    const loads = webhooks.map((w) => startLoad(w, ca.certPem, size));
    cleanup.add('load', async () => {
      for (const l of loads) await l.stop();
    });

    const t0 = performance.now();
    const elapsed = (): number => (performance.now() - t0) / 1000;
    const warmupS = size.warmupMinutes * 60;
    const windowEndS = warmupS + minutes * 60;
    const sampleAll = async (): Promise<void> => {
      for (const w of webhooks) {
        const why = w.exited();
        if (why !== undefined) throw new Error(`webhook-memory: ${w.name} ${why}`);
        const text = await request(w.port, ca.certPem, '/metrics', false).then(
          (r) => r.text,
          () => '',
        );
        const h = parseHeapMetrics(text, METRIC_PREFIX);
        w.samples.push({
          s: elapsed(),
          privateMiB: smaps(w.pid).anonymous / MIB,
          heapUsedMiB: h.used,
          heapTotalMiB: h.total,
          spaces: heapSpaces(text, METRIC_PREFIX),
          cpuMs: cpuMs(w.pid),
          gcS: gcSeconds(text, METRIC_PREFIX),
        });
      }
      ctx.log(
        `${fmt(elapsed())} s, load ${fmt(os.loadavg()[0] ?? 0)}: ${webhooks.map((w, i) => `#${i} ${fmt(w.samples.at(-1)?.privateMiB ?? NaN)}/${fmt(w.samples.at(-1)?.heapTotalMiB ?? NaN)} MiB (${loads[i]?.admitted ?? 0} admitted)`).join('; ')}`,
      );
    };
    const loadAvg: number[] = [];
    for (let next = 0; elapsed() < windowEndS; next += size.sampleEveryS) {
      await sleep(Math.max(0, next * 1000 - elapsed() * 1000));
      loadAvg.push(os.loadavg()[0] ?? 0);
      await sampleAll();
    }
    const first = new Map<Webhook, Map<string, HeapGroup>>();
    for (const w of webhooks) first.set(w, await signalSnapshot(w.pid, w.dir, w.name));
    const firstAt = elapsed();
    await sleep(size.snapshotMinutes * 60_000);
    const last = new Map<Webhook, Map<string, HeapGroup>>();
    for (const w of webhooks) last.set(w, await signalSnapshot(w.pid, w.dir, w.name));
    const gapMin = (elapsed() - firstAt) / 60;
    for (const l of loads) await l.stop();

    const rows: string[][] = [];
    const spaceRows: string[][] = [];
    const targets: TargetCheck[] = [];
    const notes: string[] = [];
    for (const [i, w] of webhooks.entries()) {
      const win = w.samples.filter((s) => s.s >= warmupS);
      const mid = ((win[0]?.s ?? 0) + (win.at(-1)?.s ?? 0)) / 2;
      const perH = (xs: readonly Sample[], y: (s: Sample) => number): number => slopeOf(xs.map((s) => ({ x: s.s / 3600, y: y(s) })));
      const priv = (s: Sample): number => s.privateMiB;
      const second = win.filter((s) => s.s >= mid);
      const load = loads[i];
      const spanS = (win.at(-1)?.s ?? 0) - (win[0]?.s ?? 0);
      const admittedPerH = ((load?.admitted ?? 0) / elapsed()) * 3600;
      rows.push([
        w.name,
        `${fmt(w.samples[0]?.privateMiB ?? NaN)} → ${fmt(win[0]?.privateMiB ?? NaN)} → ${fmt(win.at(-1)?.privateMiB ?? NaN)} (max ${fmt(Math.max(...win.map(priv)))})`,
        `${fmt(Math.min(...second.map(priv)))}–${fmt(Math.max(...second.map(priv)))}`,
        `${fmt(perH(win, priv))} (${fmt(
          perH(
            win.filter((s) => s.s < mid),
            priv,
          ),
        )} / ${fmt(perH(second, priv))})`,
        `${fmt(((perH(win, priv) / admittedPerH) * 1e6) / 1024)}`,
        `${fmt(win[0]?.heapUsedMiB ?? NaN)} of ${fmt(win[0]?.heapTotalMiB ?? NaN)} → ${fmt(win.at(-1)?.heapUsedMiB ?? NaN)} of ${fmt(win.at(-1)?.heapTotalMiB ?? NaN)}`,
        `${fmt((win[0]?.privateMiB ?? NaN) - (win[0]?.heapTotalMiB ?? NaN))} → ${fmt((win.at(-1)?.privateMiB ?? NaN) - (win.at(-1)?.heapTotalMiB ?? NaN))}`,
        `${fmt(totalBytes(first.get(w) ?? new Map()) / MIB)} → ${fmt(totalBytes(last.get(w) ?? new Map()) / MIB)}`,
        `${fmt(spanS > 0 ? (((win.at(-1)?.cpuMs ?? 0) - (win[0]?.cpuMs ?? 0)) / (spanS * 1000)) * 100 : NaN)}%`,
      ]);
      const names = Object.keys(win.at(-1)?.spaces ?? {});
      spaceRows.push([w.name, names.map((n) => `${n.replace(/_space$/, '')} ${fmt(win[0]?.spaces[n] ?? NaN)} → ${fmt(win.at(-1)?.spaces[n] ?? NaN)}`).join('; ')]);
      targets.push({
        target: `${w.name}: private memory slope after warm-up ≤ ${TARGET_SLOPE_MIB_PER_H} MiB/h at ${size.admitPerS} admissions/s`,
        measured: `${fmt(perH(win, priv))} MiB/h over ${minutes} min (second half ${fmt(perH(second, priv))})`,
        met: perH(win, priv) <= TARGET_SLOPE_MIB_PER_H,
      });
      const grown = growth(first.get(w) ?? new Map(), last.get(w) ?? new Map()).slice(0, 6);
      notes.push(
        `${w.name}: ${load?.admitted ?? 0} admissions, ${load?.probes ?? 0} probes, ${load?.reconnects ?? 0} reconnects${load && load.errors.size > 0 ? `, errors ${[...load.errors].map(([m, n]) => `${n}× ${m}`).join('; ')}` : ', no errors'}; retained heap groups that grew most in the ${fmt(gapMin)} min between the snapshots: ${grown.map((g) => `${g.key} ${g.before.count}→${g.after.count}, ${fmt(g.before.bytes / 1024)}→${fmt(g.after.bytes / 1024)} KiB`).join('; ') || 'none'}.`,
      );
    }
    return {
      tables: [
        {
          caption: `${size.warmupMinutes} min warm-up, ${minutes} min window, sampled every ${size.sampleEveryS} s; private = Anonymous from smaps_rollup, MiB:`,
          columns: [
            'webhook',
            'private: start → window start → end (max)',
            'private over the second half: min–max',
            'private slope MiB/h (first half / second half)',
            'KiB per 1,000 admissions',
            'V8 heap used of reserved: window start → end',
            'private − V8 reserved (off-heap): start → end',
            'retained heap MiB (snapshots)',
            'CPU, % of a core',
          ],
          rows,
        },
        { caption: 'V8 heap spaces in use, MiB (window start → end; code is the JIT’s):', columns: ['webhook', 'spaces'], rows: spaceRows },
      ],
      targets,
      notes: [
        ...notes,
        `Method: a private kube-apiserver + etcd; namespace ${NAMESPACE} labelled ${INJECTION_LABEL}=${INJECTION_ENABLED} with NAD ${NAD}; the webhook is a fresh bundle of cmd/webhook/main.ts with the Deployment's arguments, the ConfigMap's config.yaml and POD_NAMESPACE, reading the apiserver as admin. Per webhook: ${size.admitPerS} pod CREATE AdmissionReviews/s (bench/lib/pods.ts realisticPod, ~20 KB, new uid and name each; every answer checked for its patch) open-loop over ${size.connections} keep-alive connections, all dropped and reopened every ${size.reconnectEveryS} s; ${size.probesPerS} probes/s (/readyz?wait=4 and /healthz, 2:1) each on a new TLS connection. The soak gave each webhook ~0.05–0.1 admissions/s and 0.3 probes/s. Heap snapshots (--heapsnapshot-signal, after a full GC) after the window and ${fmt(gapMin)} min later. Load average (1 min) over the window: median ${fmt([...loadAvg].sort((a, b) => a - b)[Math.floor(loadAvg.length / 2)] ?? NaN)}, max ${fmt(Math.max(...loadAvg))}.`,
      ],
    };
  },
);

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
