/**
 * B4: dataplane cost. HTTP requests/s from a client namespace, whose rules the sidecar's
 * dataplane programmed (1,000 Services × 10 endpoints loaded), to a backend namespace over a veth
 * "secondary network": through the cluster IP (DNAT, random endpoint choice) against the same
 * load sent to one backend address directly, keep-alive and one connection per request,
 * interleaved. wrk (C) generates the load inside the client namespace.
 */
import { createDataplane } from '../src/dataplane/index.js';
import { CLIENT_ADDRESS, ENDPOINT_PREFIX_LEN, SERVICE_PORT, TARGET_PORT, clusterIP, desiredState, endpointIP } from './lib/services.js';
import { requireTool, run } from './lib/proc.js';
import { createTrafficPair } from './lib/traffic-pair.js';
import { fmt } from '../test/harness/stats.js';
import { interleavedPairs, pairsTable, wrk } from './lib/wrk.js';
import type { TargetCheck } from './lib/report.js';
import { defineBenchmark } from './lib/define.js';
import { isMain, runStandalone } from './lib/runner.js';

const SERVICES = 1000;
const ENDPOINTS = 10;
/** The measured Service is the last one the dispatch chain matches: the worst case for its linear scan. */
const MEASURED = SERVICES - 1;

/** Seconds per wrk run and interleaved pairs per mode. */
const SIZES = { quick: { seconds: 2, runs: 3 }, full: { seconds: 5, runs: 7 } };

export const benchmark = defineBenchmark('b4', 'dataplane: HTTP through the cluster IP vs the backend address directly', SIZES, async (ctx, { seconds, runs }, cleanup) => {
  await requireTool('wrk', ['--version'], 'install wrk (apt-get install wrk)');
  const connections = 16;
  const backendIPs = Array.from({ length: ENDPOINTS }, (_, j) => endpointIP(MEASURED, j, ENDPOINTS));
  const { client } = await createTrafficPair('b4', cleanup, backendIPs);

  const dp = createDataplane({ netns: client, iptablesFlavor: 'auto' });
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
    const { target, row } = await interleavedPairs({
      ns: client,
      ours: viaService,
      base: direct,
      seconds,
      runs,
      connections,
      close: mode.close,
      // Each run starts from an empty connection table in the client namespace.
      before: async () => {
        await run('conntrack', ['-F'], { netns: client, check: false });
      },
      logPair: (i, o, b) => ctx.log(`${mode.name} run ${i + 1}: cluster IP ${fmt(o.rps)} req/s, direct ${fmt(b.rps)} req/s`),
    });
    rows.push(row(mode.name));
    targets.push(target(`${mode.name}: cluster IP / direct`, mode.target));
  }
  return {
    tables: [pairsTable({ runs, seconds, connections }, { ours: 'via cluster IP', base: 'direct to backend IP', short: 'cluster IP' }, rows)],
    targets,
    notes: [
      `Method: client and backend are two network namespaces joined by a veth pair (the "secondary network", ${CLIENT_ADDRESS}/${ENDPOINT_PREFIX_LEN} on the client). ` +
        `The client namespace's rules come from the sidecar's own dataplane (\`createDataplane().sync\`) for ${SERVICES.toLocaleString('en')} Services × ${ENDPOINTS} endpoints; ` +
        `the measured Service is the last one in the dispatch chain (worst case for its linear match), and its ${ENDPOINTS} endpoints are addresses of the backend namespace, ` +
        'where one Node.js HTTP server answers on all of them. The baseline sends the same load from the same client namespace (so it crosses the same filter-table reject chain for new connections) to one backend address directly. ' +
        'Only new connections traverse nat; keep-alive requests ride conntrack, but every packet of a DNATed flow is still rewritten (address and checksum) both ways. ' +
        "wrk, the server and the kernel share the machine's 2 cores and the single Node.js server is the bottleneck, so any extra kernel work per packet shows up in req/s; the ratio is what counts. " +
        "Both namespaces get conntrack TIME_WAIT 1 s, a wide ephemeral port range and tcp_tw_reuse, and the client's conntrack table is flushed before every run: " +
        'without that, one-connection-per-request runs collapsed to a few hundred req/s on both paths after ~100,000 connections.',
    ],
  };
});

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
