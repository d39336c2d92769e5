/**
 * B1: pod-injection admission over HTTPS keep-alive on loopback. A realistic pod (3 containers,
 * managedFields, ~20 KB) at fixed rates and at maximum throughput, against a no-op express
 * webhook answering `allowed: true`, both as separate processes with the same certificate,
 * interleaved. Then a ~1 MB pod, one request at a time.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createCA, createServingCert } from '../cmd/certs/pki.js';
import { admissionReview, podOfSize } from './lib/pods.js';
import { fixedRate, keepAliveAgent, maxThroughput, timedRequest, type LoadResult, type Target } from './lib/loadgen.js';
import { cpuMs, type Cleanup, treeSum, startProcess, stopProcess, waitForLine } from './lib/proc.js';
import { fmt, fmtRatio, fmtSummary, summarize, type Summary } from '../test/harness/stats.js';
import type { TargetCheck } from './lib/report.js';
import { defineBenchmark } from './lib/define.js';
import { isMain, runStandalone } from './lib/runner.js';
import { WEBHOOK_SERVER } from './servers/webhook-admission.js';

interface Server {
  readonly name: string;
  readonly pid: number;
  readonly target: Target;
  readonly bigTarget: Target;
}

interface ServerSpec {
  readonly name: string;
  readonly script: string;
  readonly path: string;
  /** Text every successful answer contains. */
  readonly expect: string;
}

const NOOP: ServerSpec = { name: 'no-op express', script: 'bench/servers/noop-admission.ts', path: '/mutate', expect: '"allowed":true' };

async function startServer(spec: ServerSpec, certDir: string, body: Buffer, bigBody: Buffer, ca: string, cleanup: Cleanup): Promise<Server> {
  // BENCH_CPU_PROF=<dir>: the servers write V8 CPU profiles there when they stop.
  const prof = process.env['BENCH_CPU_PROF'] ? ['--cpu-prof', '--cpu-prof-dir', process.env['BENCH_CPU_PROF']] : [];
  const child = startProcess('node', [...prof, '--import', 'tsx', spec.script], {
    env: { ...process.env, TLS_CERT_FILE: path.join(certDir, 'tls.crt'), TLS_KEY_FILE: path.join(certDir, 'tls.key'), LOG_LEVEL: 'warn' },
  });
  cleanup.add(spec.name, () => stopProcess(child));
  const m = await waitForLine(child, /LISTENING (\d+)/);
  const port = Number(m[1]);
  const base = { port, path: spec.path, ca, expect: spec.expect };
  return { name: spec.name, pid: child.pid ?? 0, target: { ...base, body }, bigTarget: { ...base, body: bigBody } };
}

/** CPU time of the server process (and any child it has) in ms. */
const serverCpu = (s: Server): number => treeSum(s.pid, cpuMs);

interface Sample {
  readonly p50: number;
  readonly p99: number;
  readonly rps: number;
  /** Server CPU per request, µs. */
  readonly cpuUs: number;
}

async function measure(s: Server, load: () => Promise<LoadResult>): Promise<Sample> {
  const c0 = serverCpu(s);
  const r = await load();
  const cpu = serverCpu(s) - c0;
  if (r.errors > 0) throw new Error(`${s.name}: ${r.errors} of ${r.sent} requests failed; first: ${r.firstError ?? ''}`);
  return { p50: r.latency.median, p99: r.latency.p99, rps: r.rps, cpuUs: (cpu * 1000) / Math.max(1, r.completed) };
}

function cellsFor(samples: readonly Sample[]): { p50: Summary; p99: Summary; rps: Summary; cpu: Summary } {
  return {
    p50: summarize(samples.map((x) => x.p50)),
    p99: summarize(samples.map((x) => x.p99)),
    rps: summarize(samples.map((x) => x.rps)),
    cpu: summarize(samples.map((x) => x.cpuUs)),
  };
}

const range = (s: Summary, unit: string): string => `${fmt(s.median)} ${unit} (${fmt(s.min)}–${fmt(s.max)})`;

/** Seconds per load case, interleaved runs per case, and 1 MB requests per server. */
const SIZES = { quick: { seconds: 2, runs: 2, bigRuns: 5 }, full: { seconds: 5, runs: 3, bigRuns: 20 } };
const rates = [500, 1000, 2000];

export const benchmark = defineBenchmark('b1', 'admission: pod injection over HTTPS keep-alive vs a no-op webhook', SIZES, async (ctx, { seconds, runs, bigRuns }, cleanup) => {
  const certDir = mkdtempSync(path.join(os.tmpdir(), 'mp-bench-b1-'));
  cleanup.add('cert dir', () => rmSync(certDir, { recursive: true, force: true }));
  const ca = createCA({ commonName: 'bench-ca' });
  const serving = createServingCert(ca, { service: 'multus-proxy-webhook', namespace: 'multus-proxy-system', ips: ['127.0.0.1'] });
  writeFileSync(path.join(certDir, 'tls.crt'), serving.certPem);
  writeFileSync(path.join(certDir, 'tls.key'), serving.keyPem);
  const pod = podOfSize(20_000);
  const big = podOfSize(1 << 20);
  const body = Buffer.from(JSON.stringify(admissionReview(pod)));
  const bigBody = Buffer.from(JSON.stringify(admissionReview(big)));
  const podBytes = JSON.stringify(pod).length;
  const bigBytes = JSON.stringify(big).length;

  const servers = [await startServer(WEBHOOK_SERVER, certDir, body, bigBody, ca.certPem, cleanup), await startServer(NOOP, certDir, body, bigBody, ca.certPem, cleanup)];
  const [ours, noop] = servers as [Server, Server];
  for (const s of servers) await maxThroughput(s.target, ctx.quick ? 1 : 2); // warm-up (JIT, TLS sessions)

  const samples = new Map<string, Sample[]>();
  const push = (key: string, x: Sample): void => {
    samples.set(key, [...(samples.get(key) ?? []), x]);
  };
  const cases = [
    ...rates.map((r) => ({ key: `${r}`, label: `${r} req/s`, load: (t: Target) => fixedRate(t, r, seconds) })),
    { key: 'max', label: 'max (16 connections)', load: (t: Target) => maxThroughput(t, seconds, 16) },
  ];
  for (let i = 0; i < runs; i++) {
    for (const c of cases) {
      const order = i % 2 === 0 ? [ours, noop] : [noop, ours];
      for (const s of order) push(`${s.name}|${c.key}`, await measure(s, () => c.load(s.target)));
      const o = samples.get(`${ours.name}|${c.key}`)?.at(-1);
      const n = samples.get(`${noop.name}|${c.key}`)?.at(-1);
      ctx.log(
        `run ${i + 1} ${c.label}: ours p50 ${fmt(o?.p50 ?? NaN)} p99 ${fmt(o?.p99 ?? NaN)} ms ${fmt(o?.rps ?? NaN)}/s; no-op p50 ${fmt(n?.p50 ?? NaN)} p99 ${fmt(n?.p99 ?? NaN)} ms ${fmt(n?.rps ?? NaN)}/s`,
      );
    }
  }

  // The 1 MB pod: one request at a time on one keep-alive connection, interleaved.
  const big1: number[] = [];
  const big0: number[] = [];
  const agents = new Map(servers.map((s) => [s.name, keepAliveAgent(s.bigTarget)]));
  for (let i = 0; i < bigRuns + 1; i++) {
    for (const s of i % 2 === 0 ? [ours, noop] : [noop, ours]) {
      const ms = await timedRequest(s.bigTarget, agents.get(s.name));
      if (i > 0) (s === ours ? big1 : big0).push(ms); // the first of each is a warm-up
    }
  }
  for (const a of agents.values()) a.destroy();

  const rows: string[][] = [];
  const targets: TargetCheck[] = [];
  for (const c of cases) {
    const o = cellsFor(samples.get(`${ours.name}|${c.key}`) ?? []);
    const n = cellsFor(samples.get(`${noop.name}|${c.key}`) ?? []);
    rows.push([c.label, 'ours', range(o.p50, 'ms'), range(o.p99, 'ms'), range(o.rps, '/s'), range(o.cpu, 'µs')]);
    rows.push(['', 'no-op', range(n.p50, 'ms'), range(n.p99, 'ms'), range(n.rps, '/s'), range(n.cpu, 'µs')]);
    if (c.key === '1000') {
      targets.push({ target: 'p99 ≤ 5 ms at 1,000 req/s', measured: `${fmt(o.p99.median)} ms`, met: o.p99.median <= 5 });
      const r = o.p99.median / n.p99.median;
      targets.push({ target: "p99 ≤ 2× the no-op's at 1,000 req/s", measured: `${fmtRatio(r)} (${fmt(o.p99.median)} vs ${fmt(n.p99.median)} ms)`, met: r <= 2 });
    }
  }
  const b1 = summarize(big1);
  const b0 = summarize(big0);
  targets.push({ target: 'a 1 MB pod injected in ≤ 50 ms', measured: `${fmt(b1.median)} ms median, ${fmt(b1.max)} ms max`, met: b1.median <= 50 });
  return {
    tables: [
      {
        caption: `Pod of ${(podBytes / 1000).toFixed(1)} KB (AdmissionReview ${(body.length / 1000).toFixed(1)} KB); ${runs} runs of ${seconds} s per case, median (min–max) over the runs of each run's p50/p99; "server CPU" is the server process's CPU time per request:`,
        columns: ['load', 'server', 'p50', 'p99', 'req/s', 'server CPU / request'],
        rows,
      },
      {
        caption: `Pod of ${(bigBytes / 1e6).toFixed(2)} MB, one request at a time on a keep-alive connection (${bigRuns} each, interleaved):`,
        columns: ['server', 'latency'],
        rows: [
          ['ours (injected)', fmtSummary(b1, 'ms')],
          ['no-op', fmtSummary(b0, 'ms')],
        ],
      },
    ],
    targets,
    notes: [
      `Method: ours is ${WEBHOOK_SERVER.description}; the no-op is bench/servers/noop-admission.ts (express.json, answers allowed: true). Each runs as its own node process on 127.0.0.1, both with LOG_LEVEL=warn (the webhook's one info line per injection is not counted), ` +
        'with the same certificate (cmd/certs/pki.ts); answers are checked (ours must carry a patch, the no-op allowed: true); any failed request fails the benchmark. ' +
        'The load generator (bench/lib/loadgen.ts, node:https keep-alive, up to 32 connections) runs in the benchmark process: fixed rates are open-loop ' +
        '(latency counted from when each request was due, so queueing is charged); "max" keeps 16 requests in flight. The machine has 2 cores shared by the load generator, ' +
        'the server and everything else running, so p99 at high rates mostly measures scheduling; server CPU per request is the steadier figure.',
    ],
  };
});

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
