/**
 * B10: first-packet cost. New connections per second (one HTTP request per connection, wrk) from
 * a client namespace whose rules the sidecar's dataplane programmed for N Services, through the
 * cluster IP of the Service its rules match last (iptables: the end of the dispatch chain's
 * linear scan) against directly to one of that Service's backend addresses, interleaved; at
 * 1,000, 10,000 and 30,000 Services, for both rule back ends in the same run. Only a connection's
 * first packet traverses nat, so what grows with N here is the dispatch: one verdict-map lookup
 * (nftables) or N rules (iptables).
 *
 * B10_ONLY=shards (with --no-write) measures instead the price of nftables shard tables
 * (src/dataplane/nft/shards.ts) at 1,000 Services: the same table over 1, 16 and 64 tables (each
 * its own nat-output hook, so a new connection that matches no Service does S lookups), cells
 * round-robin as above.
 */
import { createDataplane } from '../src/dataplane/index.js';
import type { BackendKind } from '../src/dataplane/core/seam.js';
import { CLIENT_ADDRESS, CLIENT_INTERFACE, ENDPOINT_PREFIX_LEN, SERVICE_PORT, TARGET_PORT, clusterIP, desiredState, endpointIP } from './lib/services.js';
import { requireTool, run } from './lib/proc.js';
import { createTrafficPair } from './lib/traffic-pair.js';
import { fmt, fmtRatio, summarize } from '../test/harness/stats.js';
import { wrk, type WrkResult } from './lib/wrk.js';
import type { TargetCheck } from './lib/report.js';
import { defineBenchmark } from './lib/define.js';
import { isMain, runStandalone } from './lib/runner.js';

/** Two endpoints: a random choice between them (numgen / statistic) on every new connection, and a fast load of 30,000 Services. */
const ENDPOINTS = 2;
const SIZES_N = [1000, 10000, 30000];
const CONNECTIONS = 16;
const SIZES = { quick: { seconds: 2, runs: 3 }, full: { seconds: 5, runs: 5 } };
const BACKENDS: readonly BackendKind[] = ['nftables', 'iptables'];
/** B10_ONLY=shards: the table counts compared (1 = the layout before shards). */
const SHARD_CELLS = [1, 16, 64];

interface Cell {
  readonly n: number;
  readonly rules: BackendKind;
  /** B10_ONLY=shards: the number of tables the Services are spread over. */
  readonly shards?: number;
  readonly via: readonly WrkResult[];
  readonly direct: readonly WrkResult[];
  readonly syncMs: number;
}

export const benchmark = defineBenchmark(
  'b10',
  'first-packet cost: new connections/s through a cluster IP vs direct, 1,000 / 10,000 / 30,000 Services, nftables and iptables',
  SIZES,
  async (ctx, { seconds, runs }, cleanup) => {
    await requireTool('wrk', ['--version'], 'install wrk (apt-get install wrk)');
    await requireTool('nft', ['--version'], 'install nftables (apt-get install nftables)');
    // One client/backend pair per size and back end, all programmed first, then measured round-robin
    // (every cell in every round: the same machine moments). The measured Service of each size is its
    // last one, its endpoints addresses of that cell's backend namespace.
    const cells: (Cell & { readonly client: string; readonly via: WrkResult[]; readonly direct: WrkResult[] })[] = [];
    const shardsOnly = process.env['B10_ONLY'] === 'shards';
    const plan: { n: number; rules: BackendKind; shards?: number }[] = shardsOnly
      ? SHARD_CELLS.map((shards) => ({ n: 1000, rules: 'nftables', shards }))
      : SIZES_N.flatMap((n) => BACKENDS.map((rules) => ({ n, rules })));
    for (const { n, rules, shards } of plan) {
      const { client } = await createTrafficPair(
        `b10${rules[0] ?? ''}${n}${shards ?? ''}`,
        cleanup,
        Array.from({ length: ENDPOINTS }, (_, j) => endpointIP(n - 1, j, ENDPOINTS)),
      );
      // S tables of ceil(n / S) Service ports each (shards.ts rounds up to a power of two).
      const dp = createDataplane({ netns: client, backendKind: rules, ...(shards === undefined ? {} : { nftPortsPerShard: shards === 1 ? Infinity : Math.ceil(n / shards) }) });
      const sync = await dp.sync(desiredState(n, ENDPOINTS), { full: true });
      dp.close();
      if (sync.backend !== (rules === 'iptables' ? 'nft' : 'nftables')) throw new Error(`expected the ${rules} back end, got ${sync.backend}`);
      if (shards !== undefined) {
        const tables = (await run('nft', ['list', 'tables', 'inet'], { netns: client })).stdout.split('\n').filter((l) => l.startsWith('table inet multus_proxy')).length;
        if (tables !== shards) throw new Error(`expected ${shards} tables, found ${tables}`);
      }
      ctx.log(`${rules}${shards === undefined ? '' : ` over ${shards} tables`}: programmed ${n} Services in ${fmt(sync.durationMs)} ms`);
      cells.push({ n, rules, ...(shards === undefined ? {} : { shards }), client, via: [], direct: [], syncMs: sync.durationMs });
    }
    const urls = (n: number): { via: string; direct: string } => ({ via: `http://${clusterIP(n - 1)}:${SERVICE_PORT}/`, direct: `http://${endpointIP(n - 1, 0, ENDPOINTS)}:${TARGET_PORT}/` });
    for (const c of cells) await wrk(c.client, urls(c.n).via, 1, CONNECTIONS, true); // warm-up: ARP, the servers' JIT
    for (let i = 0; i < runs; i++) {
      for (const c of cells) {
        const { via, direct } = urls(c.n);
        for (const url of i % 2 === 0 ? [via, direct] : [direct, via]) {
          await run('conntrack', ['-F'], { netns: c.client, check: false });
          const r = await wrk(c.client, url, seconds, CONNECTIONS, true);
          if (r.errors > 0) throw new Error(`wrk ${url} (${c.rules}, ${c.n} Services): ${r.errors} errors`);
          (url === via ? c.via : c.direct).push(r);
        }
        ctx.log(`${c.rules} ${c.n} run ${i + 1}: cluster IP ${fmt(c.via[i]?.rps ?? NaN)} conn/s, direct ${fmt(c.direct[i]?.rps ?? NaN)} conn/s`);
      }
    }

    const median = (rs: readonly WrkResult[]): number => summarize(rs.map((r) => r.rps)).median;
    const perPair = (c: Cell): number => summarize(c.via.map((r, i) => r.rps / (c.direct[i]?.rps ?? NaN))).median;
    const spread = (rs: readonly WrkResult[]): string => {
      const s = summarize(rs.map((r) => r.rps));
      return `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`;
    };
    const cellOf = (rules: BackendKind, n: number): Cell | undefined => cells.find((c) => c.rules === rules && c.n === n);
    const rows = cells.map((c) => {
      const first = cellOf(c.rules, SIZES_N[0] ?? 0);
      return [
        c.shards === undefined ? c.rules : `${c.rules}, ${c.shards} table${c.shards > 1 ? 's' : ''}`,
        c.n.toLocaleString('en'),
        spread(c.via),
        spread(c.direct),
        fmtRatio(perPair(c)),
        first === undefined ? '' : `${fmtRatio(median(c.via) / median(first.via))}${shardsOnly ? `; direct ${fmtRatio(median(c.direct) / median(first.direct))}` : ''}`,
        `${fmt(summarize(c.via.map((r) => r.p50ms)).median)} / ${fmt(summarize(c.via.map((r) => r.p99ms)).median)} ms`,
        `${fmt(c.syncMs / 1000)} s`,
      ];
    });
    const targets: TargetCheck[] = [];
    for (const rules of shardsOnly ? [] : BACKENDS) {
      const small = cellOf(rules, SIZES_N[0] ?? 0);
      const large = cellOf(rules, SIZES_N[SIZES_N.length - 1] ?? 0);
      if (small === undefined || large === undefined) continue;
      const ratio = median(large.via) / median(small.via);
      const normalised = perPair(large) / perPair(small);
      targets.push({
        target: `${rules}: new-connection rate through the cluster IP at 30,000 Services ≥ 0.9 × at 1,000${rules === 'iptables' ? ' (the nftables target, shown for comparison)' : ''}`,
        measured: `${ratio.toFixed(3)} (${fmt(median(large.via))} / ${fmt(median(small.via))} conn/s); against direct in the same pairs: ${normalised.toFixed(3)}`,
        met: ratio >= 0.9,
      });
    }
    return {
      tables: [
        {
          caption: `${runs} interleaved pairs of ${seconds} s wrk runs per cell (1 thread, ${CONNECTIONS} connections, \`Connection: close\`: one TCP connection per request), ${ENDPOINTS} endpoints per Service; median (min–max):`,
          columns: [
            'back end',
            'Services',
            'via cluster IP, conn/s',
            'direct, conn/s',
            'cluster IP / direct (per pair)',
            shardsOnly ? "rate / the one-table cell's" : 'cluster-IP rate / its rate at 1,000',
            'cluster IP p50 / p99',
            'full sync',
          ],
          rows,
        },
      ],
      targets,
      notes: [
        `Method: a client and a backend network namespace joined by a veth pair (the client's ${CLIENT_INTERFACE} has ${CLIENT_ADDRESS}/${ENDPOINT_PREFIX_LEN}); ` +
          "one such pair per size and back end (six; each backend namespace has its own Node.js server), all programmed first, then measured round-robin, every cell once per round, so sizes and back ends see the same machine moments; the client namespace's rules come from the sidecar's own dataplane (`createDataplane({rules}).sync(state, {full: true})`) for N Services × 2 endpoints. " +
          'The measured Service is the last one (iptables: the last rule of MPX-SERVICES, the worst case of its linear scan; nftables: one lookup in the verdict map whatever N). Its endpoints are addresses of the backend namespace, where the Node.js HTTP server answers on both. ' +
          'The baseline is the same load from the same namespace to one backend address directly (it crosses the same hooks, and misses the same map). wrk sends one request per connection, so every request is a new connection whose SYN traverses nat. ' +
          "The client's conntrack table is flushed before every run; both namespaces get B4's TIME_WAIT settings. The machine's 2 cores are shared by wrk, the server, the kernel and other users: the per-pair ratio and the ratio of sizes are what count.",
      ],
    };
  },
);

if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url);
