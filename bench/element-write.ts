/**
 * Where an element write's time goes (not a numbered benchmark: a probe run by hand,
 * figures in docs/benchmarks.md B2 notes). One endpoint map of 10 ranges is refilled in a fresh
 * namespace, the way the element writer does it (src/dataplane/nft/element-writer.ts): a sender
 * process started ahead and left idle (`SETTLE_MS`, as B2), then the batch written to its stdin and
 * the write done at its "ok" line. Each binary given is timed in turn, alternated per round, so
 * before/after builds of native/nfnl-batch.c see the same machine moments.
 *
 * A binary that knows `--times` (native/nfnl-batch.c) prints CLOCK_MONOTONIC stamps, the clock
 * of process.hrtime here, so the write splits into:
 *   wake     this process's stdin write -> the sender's read returns (the scheduler wakes it)
 *   input    that read -> the batch complete (a second wake-up if it waited for EOF)
 *   kernel   the send (the kernel's transaction runs inside sendmsg)
 *   answers  reading the ACKs
 *   back     the sender's "ok" -> this process's 'data' event (the scheduler wakes Node)
 *
 *   node --import tsx bench/element-write.ts <rounds> <nfnl-batch> [<nfnl-batch> ...]
 *
 * EW_BALLAST=<n>: the process first holds the render of n Services × 10 (as B2's sidecar at
 * 10,000 does) and re-renders one changed Service before each write, to see whether a large heap
 * and its garbage collection show in the write. EW_MAPS=<n>: the table holds n more endpoint maps
 * of 10 ranges (the sidecar's table at n Services), declared before the one written.
 */
import os from 'node:os';
import { inNetns } from '../src/dataplane/core/exec.js';
import { launch, type Launched } from '../src/dataplane/tuning/spare-process.js';
import { encodeIntervalMapBatch, type IntervalMapWrite } from '../src/dataplane/nftables/netlink-batch.js';
import { equalRanges, PICK_MODULUS } from '../src/dataplane/nftables/pick-ranges.js';
import { createNetns } from './lib/netns.js';
import { run, sleep, withCleanup } from './lib/proc.js';
import { fmt, summarize } from '../test/harness/stats.js';
import { render, RenderCache } from '../src/dataplane/core/incremental.js';
import { clientInterface, endpointSlice, NETWORK, service } from './lib/services.js';
import { StateFeed } from '../cmd/sidecar/state-feed.js';
import type { V1EndpointSlice } from '../src/kube/types.js';

/** EW_BALLAST: a sidecar's heap at n Services, and one change's work per call. */
function ballast(n: number): () => void {
  if (n === 0) return () => undefined;
  const feed = new StateFeed(n);
  const cache = new RenderCache();
  const services = Array.from({ length: n }, (_, i) => service(i));
  const slices: V1EndpointSlice[] = Array.from({ length: n }, (_, i) => endpointSlice(i, 10));
  const input = { served: [NETWORK], interfaces: [clientInterface], services: () => services, slices: () => slices };
  render(feed.compute(input).state, cache);
  let g = 0;
  return () => {
    g += 1;
    const i = (g * 997) % n;
    const next = endpointSlice(i, 10, g);
    feed.slice(slices[i], next);
    slices[i] = next;
    render(feed.compute(input).state, cache);
  };
}
const work = ballast(Number(process.env['EW_BALLAST'] ?? 0));

const SETTLE_MS = 100;
const TABLE = 'mpxw';
const MAP = 'MPX-EPS-PROBE';
const rounds = Number(process.argv[2] ?? 40);
const binaries = process.argv.slice(3);
if (binaries.length === 0) throw new Error('element-write: give one or more nfnl-batch binaries after the round count');

const writeOf = (g: number): IntervalMapWrite[] => [{ table: TABLE, map: MAP, family: 4, ranges: equalRanges(10).map((r, i) => ({ ...r, ip: `10.100.${g % 250}.${i + 1}`, port: 8080 })) }];

interface Sample {
  total: number;
  stages?: { wake: number; input: number; kernel: number; answers: number; back: number };
}

const ns = (t: bigint): number => Number(t) / 1e6;

/** One write through a spare started SETTLE_MS ago. */
async function once(ns0: string, binary: string, bytes: Uint8Array): Promise<Sample> {
  const l: Launched = launch(inNetns(ns0, [binary, '--times']));
  await sleep(SETTLE_MS);
  work();
  const done = new Promise<bigint>((resolve) => {
    let out = '';
    l.child.stdout?.on('data', (b: Buffer) => {
      out += b.toString();
      if (out === 'ok\n') resolve(process.hrtime.bigint());
    });
  });
  const t0 = process.hrtime.bigint();
  l.child.stdin?.end(bytes);
  const t5 = await Promise.race([done, l.result.then((r) => Promise.reject(new Error(`${binary} failed: exit ${r.code} ${r.stderr}`)))]);
  const r = await l.result;
  if (r.code !== 0) throw new Error(`${binary} failed: exit ${r.code} ${r.stderr}`);
  const m = /times (\d+) (\d+) (\d+) (\d+)/.exec(r.stderr);
  if (m === null) return { total: ns(t5 - t0) };
  const [t1, t2, t3, t4] = m.slice(1).map((x) => BigInt(x)) as [bigint, bigint, bigint, bigint];
  return { total: ns(t5 - t0), stages: { wake: ns(t1 - t0), input: ns(t2 - t1), kernel: ns(t3 - t2), answers: ns(t4 - t3), back: ns(t5 - t4) } };
}

await withCleanup(
  (msg) => process.stderr.write(`${msg}\n`),
  async (cleanup) => {
    const netns = await createNetns('ew', cleanup);
    const mapText = (name: string): string =>
      `  map ${name} { typeof numgen random mod ${PICK_MODULUS} : ip daddr . tcp dport; flags interval; elements = { ${equalRanges(10)
        .map((r, i) => `${r.from}-${r.to} : 192.0.2.${i + 1} . 9`)
        .join(', ')} } }\n`;
    const others = Array.from({ length: Number(process.env['EW_MAPS'] ?? 0) }, (_, i) => mapText(`MPX-EPS-${i}`)).join('');
    const table = `table inet ${TABLE} {\n${others}${mapText(MAP)}}\n`;
    await run('nft', ['-f', '-'], { netns, input: table });
    const samples = new Map<string, Sample[]>(binaries.map((b) => [b, []]));
    let seq = 1;
    for (let g = 0; g < rounds + 3; g++) {
      for (const b of g % 2 === 0 ? binaries : [...binaries].reverse()) {
        const batch = encodeIntervalMapBatch(writeOf(g), seq);
        seq += batch.messages.length;
        const s = await once(netns, b, batch.bytes);
        if (g >= 3) samples.get(b)?.push(s);
      }
    }
    const cell = (xs: number[]): string => {
      const s = summarize(xs);
      return `${fmt(s.median)} / ${fmt(s.p90)} / ${fmt(s.max)}`;
    };
    process.stdout.write(
      `EW_BALLAST=${process.env['EW_BALLAST'] ?? 0}, EW_MAPS=${process.env['EW_MAPS'] ?? 0}, heap used ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(0)} MiB; one endpoint map refilled (10 ranges), ${rounds} writes per binary, alternated, each to a sender idle ${SETTLE_MS} ms; ms p50 / p90 / max\n`,
    );
    process.stdout.write('| binary | write -> ok | wake | input | kernel | answers | back |\n|---|---|---|---|---|---|---|\n');
    for (const [b, xs] of samples) {
      const st = xs.flatMap((x) => (x.stages === undefined ? [] : [x.stages]));
      const col = (k: keyof NonNullable<Sample['stages']>): string => (st.length === 0 ? '–' : cell(st.map((x) => x[k])));
      process.stdout.write(`| ${b} | ${cell(xs.map((x) => x.total))} | ${col('wake')} | ${col('input')} | ${col('kernel')} | ${col('answers')} | ${col('back')} |\n`);
    }
    process.stdout.write(
      `node ${process.version}, load average ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')}\n`,
    );
  },
);
