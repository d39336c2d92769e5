/**
 * B6: controller cold start. With N Services × 10 pods in a real kube-apiserver and no slices,
 * start the controller (in this process, on its own client) and time until every Service has its
 * slice and the controller is idle; count its API writes. Baseline: a plain script creating the
 * very same slices (the controller's own output, captured from its first run) with as many
 * requests in flight as the controller has workers. Runs alternate.
 */
import { performance } from 'node:perf_hooks';
import { createKubeClient, type KubeClient } from '../src/kube/client.js';
import { createLogger } from '../src/log.js';
import { MANAGED_BY, MANAGED_BY_LABEL } from '../src/keys.js';
import type { V1EndpointSlice } from '../src/kube/types.js';
import { parseOptions, type ControllerOptions } from '../cmd/controller/options.js';
import { startController } from '../cmd/controller/run.js';
import { backendPod } from './lib/services.js';
import { benchControlPlane, createServices, inParallel, PODS_PATH, SERVICES_PATH, SLICES_PATH, WRITE_CONCURRENCY } from './lib/cluster.js';
import { sleep } from './lib/proc.js';
import { fmt, fmtRatio, fmtSummary, ratio, summarize } from '../test/harness/stats.js';
import type { RunContext } from './lib/report.js';
import { defineBenchmark } from './lib/define.js';
import { isMain, runStandalone } from './lib/runner.js';

const PODS_PER_SERVICE = 10;
const OURS = `${MANAGED_BY_LABEL}=${MANAGED_BY}`;
const WRITE_VERBS = ['create', 'update', 'replace', 'patch', 'delete'];

function writes(client: KubeClient): Record<string, number> {
  const c = client.requestCount();
  return Object.fromEntries(WRITE_VERBS.filter((v) => (c[v] ?? 0) > 0).map((v) => [v, c[v] ?? 0]));
}

const total = (w: Record<string, number>): number => Object.values(w).reduce((a, b) => a + b, 0);

async function listOurs(client: KubeClient): Promise<V1EndpointSlice[]> {
  return (await client.list<V1EndpointSlice>(SLICES_PATH, { labelSelector: OURS })).items;
}

async function deleteAllSlices(client: KubeClient): Promise<void> {
  await client.delete(`${SLICES_PATH}?labelSelector=${encodeURIComponent(OURS)}`);
  for (let i = 0; i < 600; i++) {
    if ((await listOurs(client)).length === 0) return;
    await sleep(100);
  }
  throw new Error('slices still present 60 s after deleting them');
}

/** What a plain script would send: the controller's slice without server-set fields. */
function asCreateBody(s: V1EndpointSlice): V1EndpointSlice {
  const { name, generateName, namespace, labels, annotations, ownerReferences } = s.metadata ?? {};
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { ...(generateName ? { generateName } : { name }), namespace, labels, annotations, ownerReferences },
    addressType: s.addressType,
    ports: s.ports,
    endpoints: s.endpoints,
  };
}

interface ControllerRun {
  readonly ms: number;
  readonly writes: Record<string, number>;
  readonly slices: V1EndpointSlice[];
}

async function runController(ctx: RunContext, conn: Parameters<typeof createKubeClient>[0], opts: ControllerOptions, expected: number): Promise<ControllerRun> {
  const client = createKubeClient(conn);
  const t0 = performance.now();
  const running = await startController(client, opts, createLogger('bench-controller', 'error'));
  try {
    const deadline = Date.now() + 600_000;
    for (;;) {
      if (running.isReady() && running.idle() && (client.requestCount()['create'] ?? 0) >= expected) break;
      if (Date.now() > deadline) throw new Error(`controller did not converge in 10 min; writes so far ${JSON.stringify(writes(client))}`);
      await sleep(5);
    }
    const ms = performance.now() - t0;
    // A short grace period catches writes that would follow "converged" (there must be none).
    await sleep(1000);
    const w = writes(client);
    const slices = await listOurs(client);
    ctx.log(`controller converged in ${fmt(ms)} ms, writes ${JSON.stringify(w)}, slices ${slices.length}`);
    return { ms, writes: w, slices };
  } finally {
    await running.stop();
  }
}

/** Services (× 10 pods) and script runs; the controller gets one more cold start than the script. */
const SIZES = { quick: { services: 200, runs: 2 }, full: { services: 1000, runs: 3 } };

export const benchmark = defineBenchmark('b6', 'controller cold start to converged vs a plain script writing the same slices', SIZES, async (ctx, { services, runs }, cleanup) => {
  const cp = await benchControlPlane(cleanup);
  const admin = cp.client;
  const t0 = performance.now();
  await createServices(admin, services);
  const pods = Array.from({ length: services * PODS_PER_SERVICE }, (_, k) => backendPod(Math.floor(k / PODS_PER_SERVICE), k % PODS_PER_SERVICE, PODS_PER_SERVICE));
  await inParallel(pods, WRITE_CONCURRENCY, (p) => admin.create(PODS_PATH, p));
  ctx.log(`loaded ${services} Services and ${pods.length} pods in ${fmt((performance.now() - t0) / 1000)} s`);

  const parsed = parseOptions(['--namespace', 'bench', '--leader-elect', 'false', '--health-port', '0', '--health-host', '127.0.0.1', '--watch-nodes', 'false', '--manage-sidecar-rbac', 'false'], {});
  if (!parsed.ok || parsed.value === 'help') throw new Error(`controller options: ${parsed.ok ? 'help' : parsed.error}`);
  const opts = parsed.value;

  // First run: the controller's own output, which the baseline then writes directly.
  const first = await runController(ctx, cp.connection, opts, services);
  if (first.slices.length !== services) throw new Error(`expected ${services} slices, found ${first.slices.length}`);
  const endpoints = first.slices.reduce((n, s) => n + (s.endpoints?.length ?? 0), 0);
  if (endpoints !== services * PODS_PER_SERVICE) throw new Error(`expected ${services * PODS_PER_SERVICE} endpoints, found ${endpoints}`);
  const bodies = first.slices.map(asCreateBody);
  await deleteAllSlices(admin);

  const ours = [first];
  const script: number[] = [];
  const readThenWrite: number[] = [];
  for (let i = 0; i < runs; i++) {
    const client = createKubeClient(cp.connection);
    const s0 = performance.now();
    await inParallel(bodies, opts.workers, (b) => client.create(SLICES_PATH, b));
    script.push(performance.now() - s0);
    await deleteAllSlices(admin);
    // Second reference: the reads any writer needs (Services and pods, one list each) before the same creates.
    const client2 = createKubeClient(cp.connection);
    const r0 = performance.now();
    await client2.list(SERVICES_PATH);
    await client2.list(PODS_PATH);
    await inParallel(bodies, opts.workers, (b) => client2.create(SLICES_PATH, b));
    readThenWrite.push(performance.now() - r0);
    ctx.log(`script run ${i + 1}: ${fmt(script[script.length - 1] ?? NaN)} ms; with the two lists first ${fmt(readThenWrite[readThenWrite.length - 1] ?? NaN)} ms`);
    await deleteAllSlices(admin);
    if (i < runs - 1) {
      ours.push(await runController(ctx, cp.connection, opts, services));
      await deleteAllSlices(admin);
    }
  }

  const o = summarize(ours.map((r) => r.ms));
  const b = summarize(script);
  const writeTotals = ours.map((r) => total(r.writes));
  const maxWrites = Math.max(...writeTotals);
  const r = ratio(o, b);
  return {
    tables: [
      {
        caption: `${services.toLocaleString('en')} Services × ${PODS_PER_SERVICE} pods in a real kube-apiserver (median, min–max over ${ours.length} cold starts and ${runs} script runs, alternating):`,
        columns: ['', 'time to converged', 'API writes'],
        rows: [
          [`ours: controller cold start (${opts.workers} workers)`, fmtSummary(o, 'ms'), ours.map((x) => JSON.stringify(x.writes)).join('; ')],
          [`baseline: script creating the same ${services.toLocaleString('en')} slices (${opts.workers} in flight)`, fmtSummary(b, 'ms'), `${services} creates`],
          ['reference: the same script after listing the Services and pods', fmtSummary(summarize(readThenWrite), 'ms'), `2 lists + ${services} creates`],
          ['ours / baseline', fmtRatio(r), ''],
        ],
      },
    ],
    targets: [
      { target: '≤ 2× the script’s time', measured: fmtRatio(r), met: r <= 2 },
      { target: 'writes = slices needed, no extra', measured: `${maxWrites} writes for ${services} slices (worst run)`, met: maxWrites === services },
    ],
    notes: [
      'Method: a private kube-apiserver + etcd (test/harness/controlplane.ts). Services carry a selector and the service-network annotation; each has 10 pods whose ' +
        'network-status lists their net1 address (pods are objects only: no kubelet, so they are not Ready and their endpoints are written with ready=false; the work is the same). ' +
        "The controller runs in this process via startController() with its own client (leader election, node watch and sidecar RBAC off; `--namespace bench`), so its client's request counts are its API writes. " +
        'Timed from startController() to: caches synced, queue idle and one create per Service seen; then 1 s more is watched for stray writes. Between runs all slices are deleted (collection delete) and the deletion is awaited. ' +
        "The baseline creates the controller's own slices from its first run (same labels, owner references, endpoints) with as many requests in flight as the controller has workers, so it is the floor for the writes alone: it does not list or watch anything.",
    ],
  };
});

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
