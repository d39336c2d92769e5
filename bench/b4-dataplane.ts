/**
 * B4: dataplane cost. HTTP requests/s from a client namespace, whose rules the sidecar's
 * dataplane programmed (1,000 Services × 10 endpoints loaded), to a backend namespace over a veth
 * "secondary network": through the cluster IP (DNAT, random endpoint choice) against the same
 * load sent to one backend address directly, keep-alive and one connection per request,
 * interleaved. wrk (C) generates the load inside the client namespace.
 */
import { createDataplane } from '../src/dataplane/apply.js';
import { CLIENT_ADDRESS, CLIENT_INTERFACE, ENDPOINT_PREFIX_LEN, SERVICE_PORT, TARGET_PORT, clusterIP, desiredState, endpointIP } from './lib/services.js';
import { createNetns } from './lib/netns.js';
import { requireTool, run, startProcess, stopProcess, waitForLine } from './lib/proc.js';
import { fmt, fmtRatio, summarize } from './lib/stats.js';
import type { TargetCheck } from './lib/report.js';
import { defineBenchmark } from './lib/define.js';
import { isMain, runStandalone } from './lib/runner.js';

const SERVICES = 1000;
const ENDPOINTS = 10;
/** The measured Service is the last one the dispatch chain matches: the worst case for its linear scan. */
const MEASURED = SERVICES - 1;

export interface WrkResult {
  readonly rps: number;
  readonly p50ms: number;
  readonly p99ms: number;
  readonly errors: number;
}

function toMs(v: string, unit: string): number {
  const n = Number(v);
  return unit === 'us' ? n / 1000 : unit === 's' ? n * 1000 : n;
}

/** Parses `wrk --latency` output. */
export function parseWrk(out: string): WrkResult {
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
  if (!rps?.[1]) throw new Error(`cannot read wrk output: ${out.slice(0, 500)}`);
  const pct = (p: string): number => {
    const m = new RegExp(`^\\s+${p}%\\s+([\\d.]+)(us|ms|s)`, 'm').exec(out);
    return m?.[1] && m[2] ? toMs(m[1], m[2]) : NaN;
  };
  const errs = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(out);
  const errors = (errs ? [1, 2, 3, 4].reduce((s, i) => s + Number(errs[i]), 0) : 0) + (non2xx?.[1] ? Number(non2xx[1]) : 0);
  return { rps: Number(rps[1]), p50ms: pct('50'), p99ms: pct('99'), errors };
}

async function wrk(ns: string, url: string, seconds: number, connections: number, close: boolean): Promise<WrkResult> {
  const args = ['-t1', `-c${connections}`, `-d${seconds}s`, '--latency', ...(close ? ['-H', 'Connection: close'] : []), url];
  return parseWrk((await run('wrk', args, { netns: ns })).stdout);
}

/** Seconds per wrk run and interleaved pairs per mode. */
const SIZES = { quick: { seconds: 2, runs: 3 }, full: { seconds: 5, runs: 7 } };

export const benchmark = defineBenchmark('b4', 'dataplane: HTTP through the cluster IP vs the backend address directly', SIZES, async (ctx, { seconds, runs }, cleanup) => {
  await requireTool('wrk', ['--version'], 'install wrk (apt-get install wrk)');
  const connections = 16;
  const client = await createNetns('b4c', cleanup);
  const backend = await createNetns('b4b', cleanup);
  await run('ip', ['-n', client, 'link', 'add', CLIENT_INTERFACE, 'type', 'veth', 'peer', 'name', CLIENT_INTERFACE, 'netns', backend]);
  await run('ip', ['-n', client, 'addr', 'add', `${CLIENT_ADDRESS}/${ENDPOINT_PREFIX_LEN}`, 'dev', CLIENT_INTERFACE]);
  await run('ip', ['-n', client, 'link', 'set', CLIENT_INTERFACE, 'up']);
  const backendIPs = Array.from({ length: ENDPOINTS }, (_, j) => endpointIP(MEASURED, j, ENDPOINTS));
  for (const ip of backendIPs) await run('ip', ['-n', backend, 'addr', 'add', `${ip}/${ENDPOINT_PREFIX_LEN}`, 'dev', CLIENT_INTERFACE]);
  await run('ip', ['-n', backend, 'link', 'set', CLIENT_INTERFACE, 'up']);
  // Tens of thousands of short connections per run: without this, conntrack entries in TIME_WAIT
  // (120 s) and the ephemeral port range run out after a few runs and both sides collapse to a
  // few hundred req/s (seen in an earlier run). These settings are per namespace: ours only.
  await requireTool('conntrack', ['--version'], 'install conntrack (apt-get install conntrack)');
  for (const [ns, key, value] of [
    [client, 'net.netfilter.nf_conntrack_tcp_timeout_time_wait', '1'],
    [client, 'net.ipv4.ip_local_port_range', '1024 65000'],
    [client, 'net.ipv4.tcp_tw_reuse', '1'],
    [backend, 'net.ipv4.tcp_max_tw_buckets', '1024'],
  ] as const) {
    await run('sysctl', ['-qw', `${key}=${value}`], { netns: ns });
  }

  const server = startProcess('node', ['--import', 'tsx', 'bench/servers/http-backend.ts'], { netns: backend, env: { ...process.env, PORT: String(TARGET_PORT) } });
  cleanup.add('backend server', () => stopProcess(server));
  await waitForLine(server, /LISTENING (\d+)/);

  const dp = createDataplane({ netns: client, backend: 'auto' });
  const sync = await dp.sync(desiredState(SERVICES, ENDPOINTS), { full: true });
  ctx.log(`programmed ${SERVICES} Services in ${fmt(sync.durationMs)} ms`);

  const viaService = `http://${clusterIP(MEASURED)}:${SERVICE_PORT}/`;
  const direct = `http://${backendIPs[0] ?? ''}:${TARGET_PORT}/`;
  // Warm-up: JIT of the server, ARP, conntrack.
  await wrk(client, viaService, 1, connections, false);
  await wrk(client, direct, 1, connections, false);

  const rows: string[][] = [];
  const targets: TargetCheck[] = [];
  for (const mode of [
    { name: 'keep-alive', close: false, target: 0.97 },
    { name: 'one connection per request', close: true, target: 0.9 },
  ]) {
    const ours: WrkResult[] = [];
    const base: WrkResult[] = [];
    for (let i = 0; i < runs; i++) {
      const pair = i % 2 === 0 ? ([viaService, direct] as const) : ([direct, viaService] as const);
      for (const url of pair) {
        // Each run starts from an empty connection table in the client namespace.
        await run('conntrack', ['-F'], { netns: client, check: false });
        const r = await wrk(client, url, seconds, connections, mode.close);
        if (r.errors > 0) throw new Error(`wrk ${url} (${mode.name}): ${r.errors} errors`);
        (url === viaService ? ours : base).push(r);
      }
      ctx.log(`${mode.name} run ${i + 1}: cluster IP ${fmt(ours[ours.length - 1]?.rps ?? NaN)} req/s, direct ${fmt(base[base.length - 1]?.rps ?? NaN)} req/s`);
    }
    // Ratio per interleaved pair, then the median of those: each pair saw the same machine load.
    const ratios = summarize(ours.map((o, i) => o.rps / (base[i]?.rps ?? NaN)));
    const o = summarize(ours.map((r) => r.rps));
    const b = summarize(base.map((r) => r.rps));
    const op50 = summarize(ours.map((r) => r.p50ms));
    const bp50 = summarize(base.map((r) => r.p50ms));
    const op99 = summarize(ours.map((r) => r.p99ms));
    const bp99 = summarize(base.map((r) => r.p99ms));
    rows.push([
      mode.name,
      `${fmt(o.median)} (${fmt(o.min)}–${fmt(o.max)})`,
      `${fmt(b.median)} (${fmt(b.min)}–${fmt(b.max)})`,
      `${fmtRatio(ratios.median)} (${fmtRatio(ratios.min)}–${fmtRatio(ratios.max)})`,
      `${fmt(op50.median)} / ${fmt(op99.median)} ms`,
      `${fmt(bp50.median)} / ${fmt(bp99.median)} ms`,
    ]);
    targets.push({ target: `${mode.name}: cluster IP / direct ≥ ${mode.target}`, measured: `${ratios.median.toFixed(3)} (median of ${runs} pairs; min ${ratios.min.toFixed(3)}, max ${ratios.max.toFixed(3)})`, met: ratios.median >= mode.target });
  }
  return {
    tables: [
      {
        caption: `${runs} interleaved pairs of ${seconds} s wrk runs (1 thread, ${connections} connections) per mode; median (min–max):`,
        columns: ['mode', 'via cluster IP, req/s', 'direct to backend IP, req/s', 'ratio (per pair)', 'cluster IP p50 / p99', 'direct p50 / p99'],
        rows,
      },
    ],
    targets,
    notes: [
      `Method: client and backend are two network namespaces joined by a veth pair (the "secondary network", ${CLIENT_ADDRESS}/${ENDPOINT_PREFIX_LEN} on the client). ` +
        `The client namespace's rules come from the sidecar's own dataplane (\`createDataplane().sync\`) for ${SERVICES.toLocaleString('en')} Services × ${ENDPOINTS} endpoints; ` +
        `the measured Service is the last one in the dispatch chain (worst case for its linear match), and its ${ENDPOINTS} endpoints are addresses of the backend namespace, ` +
        'where one Node.js HTTP server answers on all of them. The baseline sends the same load from the same client namespace (so it crosses the same filter-table reject chain for new connections) to one backend address directly. ' +
        'Only new connections traverse nat; keep-alive requests ride conntrack, but every packet of a DNATed flow is still rewritten (address and checksum) both ways. ' +
        'wrk, the server and the kernel share the machine\'s 2 cores and the single Node.js server is the bottleneck, so any extra kernel work per packet shows up in req/s; the ratio is what counts. ' +
        'Both namespaces get conntrack TIME_WAIT 1 s, a wide ephemeral port range and tcp_tw_reuse, and the client\'s conntrack table is flushed before every run: ' +
        'without that, one-connection-per-request runs collapsed to a few hundred req/s on both paths after ~100,000 connections.',
    ],
  };
});

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
