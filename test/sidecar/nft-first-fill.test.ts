/**
 * A first nftables sync into an empty namespace in bounded transactions
 * (src/dataplane/nftables/tuning/first-fill.ts): each table's skeleton by `nft -f`, then the
 * elements in chunks of at most FILL_CHUNK_ELEMENTS, through the element writer (one nfnetlink
 * batch a chunk) or, without one, as `add map` text by `nft -f`. Against the real kernel in
 * namespaces this test creates and removes (no traffic):
 *  - the tables it leaves list the same, element for element, as the whole text's one `nft -f`,
 *    through the writer and through text, for every rule shape (IPv4 and IPv6; TCP, UDP, SCTP;
 *    affinity; terminating-only and no endpoints), over shard tables, and over several chunks with
 *    a map split between two;
 *  - when the writer's batch fails, that chunk and the rest follow as text, one warning says so,
 *    and the tables are again the same;
 *  - a failed chunk removes what the fill wrote, so the retry is a first fill again (a fake exec);
 *  - between transactions nothing dispatches before its map is full: maps come first, dispatch
 *    elements last, and no chunk exceeds the bound (the plan, pure).
 * nfnl-batch comes from $BIN_DIR (scripts/build-native.sh, run by scripts/setup.sh).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { binDir } from '../harness/controlplane.js';
import { createDataplane, type Dataplane, type DataplaneOptions } from '../../src/dataplane/index.js';
import { sidecarDataplaneOptions } from '../../cmd/sidecar/dataplane-options.js';
import { createTopology, type Pod, type Topology } from '../harness/netns.js';
import { CLIENT_BLUE, ep, manyPortsState, nftListingLines, sampleState, target } from './render-fixtures.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';
import { render } from '../../src/dataplane/core/incremental.js';
import { fullText, renderNft, type NftFillChunk } from '../../src/dataplane/nftables/render.js';
import { createNftBackend } from '../../src/dataplane/nftables/backend.js';
import { shardCount } from '../../src/dataplane/nftables/tuning/shards.js';
import { chunkWrites, FILL_CHUNK_ELEMENTS, fillChunkText, gotoElement, planFirstFill } from '../../src/dataplane/nftables/tuning/first-fill.js';
import type { Exec } from '../../src/dataplane/core/exec.js';

const WRITER = join(binDir(), 'nfnl-batch');

/** sampleState's shapes plus SCTP and enough ports to spread over shard tables at 2 ports a table. */
function state(pod: Pod): DesiredState {
  const s = sampleState();
  const more = Array.from({ length: 6 }, (_, i) =>
    target(
      `demo/more${i}`,
      i % 2 === 0 ? `10.96.1.${i + 1}` : `fd00:10:96::1:${i + 1}`,
      7000 + i,
      [ep(i % 2 === 0 ? '192.168.101.50' : 'fd00:101::50', 9000 + i), ep(i % 2 === 0 ? '192.168.101.51' : 'fd00:101::51', 9000 + i)],
      {
        protocol: i % 3 === 0 ? 'SCTP' : 'TCP',
      },
    ),
  );
  return { interfaces: [{ ...CLIENT_BLUE, ipv4: [pod.net1.ipv4], ipv6: [pod.net1.ipv6] }], targets: [...s.targets, ...more] };
}

/** 250 Service ports of 9 endpoints (and one IPv6): 2,250 ranges, more than one chunk, a map split between the first two. */
function many(pod: Pod): DesiredState {
  const targets = Array.from({ length: 250 }, (_, i) =>
    target(
      `demo/many${i % 5}`,
      i === 0 ? 'fd00:10:96::2:1' : `10.96.2.${(i % 5) + 1}`,
      6000 + i,
      Array.from({ length: 9 }, (_, e) => ep(i === 0 ? `fd00:101::${e + 60}` : `192.168.101.${e + 60}`, 6000 + i)),
      { portName: `p${i}` },
    ),
  );
  return { interfaces: [{ ...CLIENT_BLUE, ipv4: [pod.net1.ipv4], ipv6: [pod.net1.ipv6] }], targets };
}

const PODS = ['fill', 'text', 'whole', 'failed', 'sfill', 'stext', 'swhole', 'mfill', 'mtext', 'mwhole'] as const;

void describe('nftables first fill: skeletons, then the elements in bounded chunks', () => {
  let topo: Topology;
  const pods: Record<(typeof PODS)[number], Pod> = {} as never;
  const dps: Dataplane[] = [];
  let shimDir: string;
  before(async () => {
    assert.ok(existsSync(WRITER), `${WRITER} not found: run scripts/build-native.sh (scripts/setup.sh runs it)`);
    topo = await createTopology();
    for (const name of PODS) pods[name] = await topo.addPod(name);
    // A writer that passes its probe (the real binary) and fails every batch it serves, as the
    // kernel's refusal would: it reads, says which message failed, exits 1.
    shimDir = mkdtempSync(join(tmpdir(), 'mp-first-fill-'));
    writeFileSync(join(shimDir, 'nfnl-batch'), `#!/bin/sh\nif [ "$1" = --serve ]; then head -c 1 >/dev/null; echo "message seq 2: Invalid argument" >&2; exit 1; fi\nexec ${WRITER} "$@"\n`);
    chmodSync(join(shimDir, 'nfnl-batch'), 0o755);
  });
  after(async () => {
    for (const d of dps) d.close();
    await topo.teardown();
    rmSync(shimDir, { recursive: true, force: true });
  });

  const make = (pod: Pod, writer: string | false, extra: Partial<DataplaneOptions> = {}): Dataplane => {
    const dp = createDataplane({ ...sidecarDataplaneOptions({ cleanup: false, iptablesBackend: 'auto', elementWriter: writer }, 'nftables'), netns: pod.ns, ...extra });
    dps.push(dp);
    return dp;
  };
  const listing = async (pod: Pod): Promise<string[]> => nftListingLines((await topo.run(pod, ['nft', 'list', 'ruleset'])).stdout);
  /** The same state's whole text in one `nft -f`: what the fill must equal. */
  const whole = async (pod: Pod, s: DesiredState, perShard = 1000): Promise<string[]> => {
    const targets = render(s).resolution.targets;
    await topo.run(pod, ['nft', '-f', '-'], { input: fullText(renderNft(targets, undefined, undefined, shardCount(targets.length, perShard))) });
    return listing(pod);
  };

  void test('one table: every rule shape lists the same as the whole text, through the writer and through text', async () => {
    const r = await make(pods.fill, WRITER).sync(state(pods.fill), { full: true });
    const t = await make(pods.text, false).sync(state(pods.text), { full: true });
    assert.deepEqual(r.warnings, []);
    assert.equal(r.families[0]?.via, 'first-fill', 'the first sync did not fill through the writer');
    assert.equal(t.families[0]?.via, 'first-fill-text', 'without a writer the first sync is not a fill by text');
    const fill = await listing(pods.fill);
    assert.ok(
      fill.some((l) => /^fd00:10:96::a \. tcp \. 80 : goto MPX-SVC-/.test(l)),
      `no IPv6 dispatch element: ${fill.join(' | ')}`,
    );
    assert.ok(
      fill.some((l) => /^10\.96\.1\.1 \. sctp \. 7000 : goto MPX-SVC-/.test(l)),
      'no SCTP dispatch element',
    );
    assert.ok(
      fill.some((l) => /^\d+-\d+ : 192\.168\.101\.3 \. 8080$/.test(l)),
      'no endpoint-map range',
    );
    const want = await whole(pods.whole, state(pods.whole));
    assert.deepEqual(fill, want);
    assert.deepEqual(await listing(pods.text), want);
  });

  void test('shard tables: the same as the whole text, table by table', async () => {
    const r = await make(pods.sfill, WRITER, { nftPortsPerShard: 2 }).sync(state(pods.sfill), { full: true });
    const t = await make(pods.stext, false, { nftPortsPerShard: 2 }).sync(state(pods.stext), { full: true });
    assert.equal(r.families[0]?.via, 'first-fill');
    assert.equal(t.families[0]?.via, 'first-fill-text');
    const fill = await listing(pods.sfill);
    assert.ok(fill.filter((l) => /^table inet multus_proxy-s\d+$/.test(l)).length >= 2, `fewer than two shard tables: ${fill.filter((l) => l.startsWith('table')).join(' | ')}`);
    const want = await whole(pods.swhole, state(pods.swhole), 2);
    assert.deepEqual(fill, want);
    assert.deepEqual(await listing(pods.stext), want);
  });

  void test('several chunks, a map split between two, over four tables: the same as the whole text', async () => {
    const plan = planFirstFill(renderNft(render(many(pods.mfill)).resolution.targets, undefined, undefined, shardCount(250, 100)));
    assert.ok((plan?.fill?.chunks.length ?? 0) >= 2, 'one chunk: the state does not test chunking');
    const r = await make(pods.mfill, WRITER, { nftPortsPerShard: 100 }).sync(many(pods.mfill), { full: true });
    const t = await make(pods.mtext, false, { nftPortsPerShard: 100 }).sync(many(pods.mtext), { full: true });
    assert.equal(r.families[0]?.via, 'first-fill');
    assert.equal(t.families[0]?.via, 'first-fill-text');
    const want = await whole(pods.mwhole, many(pods.mwhole), 100);
    assert.equal(want.filter((l) => /^table inet multus_proxy/.test(l)).length, 4);
    assert.deepEqual(await listing(pods.mfill), want);
    assert.deepEqual(await listing(pods.mtext), want);
  });

  void test('a failed batch: that chunk and the rest follow as nft text, with one warning, and the tables are the same', async () => {
    const warnings: string[] = [];
    const logger = { debug: () => undefined, info: () => undefined, warn: (m: string) => warnings.push(m), error: () => undefined } as unknown as NonNullable<DataplaneOptions['logger']>;
    const r = await make(pods.failed, join(shimDir, 'nfnl-batch'), { logger }).sync(state(pods.failed), { full: true });
    assert.equal(r.families[0]?.via, 'first-fill-text', 'reported as filled through the writer though the batch failed');
    const fell = warnings.filter((m) => m.includes('first sync'));
    assert.equal(fell.length, 1, `warnings: ${warnings.join(' | ')}`);
    assert.match(fell[0] ?? '', /element writer failed on the first sync's elements, writing them with nft -f: .*Invalid argument/);
    assert.deepEqual(await listing(pods.failed), await listing(pods.whole));
  });
});

void describe('nftables first fill: the plan (pure)', () => {
  const targets = render(sampleState()).resolution.targets;
  const ruleset = renderNft(targets);
  const plan = planFirstFill(ruleset);

  void test('the skeletons hold no endpoint-map or dispatch element, and the chunks hold every one', () => {
    assert.ok(plan?.fill !== undefined);
    assert.doesNotMatch(plan.text, /elements = \{ 0-/, 'an endpoint map has elements in the skeleton');
    assert.doesNotMatch(plan.text, /: goto /, 'a dispatch element is in the skeleton');
    assert.equal(plan.fill.skeletons.join(''), plan.text);
    // What the whole text puts in them, the chunks carry: every range and every goto.
    const whole = fullText(ruleset);
    const ranges = (whole.match(/\d+-\d+ : [0-9a-f.:]+ \. \d+/g) ?? []).length;
    const gotos = (whole.match(/ : goto MPX-SVC-/g) ?? []).length;
    const writes = plan.fill.chunks.flatMap((c) => c.writes);
    assert.equal(
      writes.reduce((n, w) => n + ('ranges' in w ? w.ranges.length : 0), 0),
      ranges,
    );
    assert.equal(
      writes.reduce((n, w) => n + ('gotos' in w ? w.gotos.length : 0), 0),
      gotos,
    );
    assert.ok(
      writes.every((w) => !('ranges' in w) || w.fresh === true),
      'a map of the skeleton would be flushed: it is new and empty',
    );
    // The no-endpoints set stays in the skeleton: it rejects from the first transaction on, as after.
    assert.match(plan.text, /10\.96\.0\.30 \. tcp \. 8080/);
  });

  void test('chunks: at most the bound each, every element once in order, maps before dispatch, a map split over two', () => {
    const big = renderNft(render(manyPortsState(700, 7, '10.96.3')).resolution.targets);

    const p = planFirstFill(big);
    const chunks: readonly NftFillChunk[] = p?.fill?.chunks ?? [];
    const size = (c: NftFillChunk): number => c.writes.reduce((n, w) => n + ('gotos' in w ? w.gotos.length : w.ranges.length), 0);
    // 4,900 ranges and 700 dispatch elements.
    assert.equal(chunks.length, Math.ceil(5600 / FILL_CHUNK_ELEMENTS));
    assert.ok(chunks.every((c) => size(c) <= FILL_CHUNK_ELEMENTS && size(c) > 0));
    const writes = chunks.flatMap((c) => c.writes);
    const firstGoto = writes.findIndex((w) => 'gotos' in w);
    assert.ok(firstGoto > 0 && writes.slice(firstGoto).every((w) => 'gotos' in w), 'a dispatch element before an endpoint map');
    // A map split between chunks: its ranges, joined, are its map's, in order.
    const split = (chunks[0]?.writes.at(-1) ?? { map: '' }).map;
    assert.equal(chunks[1]?.writes[0]?.map, split, 'the first chunk does not end inside a map');
    const parts = writes.filter((w) => w.map === split).flatMap((w) => ('ranges' in w ? w.ranges : []));
    assert.equal(parts.length, 7);
    assert.deepEqual(
      parts.map((r) => r.ip),
      Array.from({ length: 7 }, (_, e) => `192.168.101.${e + 10}`).sort(),
    );
    // The text of a chunk: one `add map` per write, each with its declaration.
    const text = fillChunkText(chunks[1]);
    assert.match(text, /^add map inet multus_proxy MPX-EPS-\S+ \{ typeof numgen random mod 4294967295 : ip daddr \. tcp dport; flags interval; elements = \{ \d+-\d+ : /);
    const last = fillChunkText(chunks.at(-1) as NftFillChunk);
    assert.match(last, /add map inet multus_proxy services-v4 \{ type ipv4_addr \. inet_proto \. inet_service : verdict; elements = \{ 10\.96\.3\.\d \. tcp \. \d+ : goto MPX-SVC-/);
  });

  void test('chunkWrites: a write larger than a chunk continues in the next; nothing empty', () => {
    const w = { write: { table: 't', map: 'm', family: 4 as const, ranges: Array.from({ length: 5 }, (_, i) => ({ from: i, to: i, ip: '192.0.2.1', port: 1 })), fresh: true }, decl: 'd' };
    const c = chunkWrites([w, w], 3);
    assert.deepEqual(
      c.map((x) => x.writes.map((y) => ('ranges' in y ? y.ranges.length : -1))),
      [[3], [2, 1], [3], [1]],
    );
    assert.deepEqual(chunkWrites([], 3), []);
  });

  void test('a failed chunk removes what the fill wrote: the retry is a first fill again', async () => {
    const calls: string[] = [];
    const exec: Exec = (cmd, args, stdin) => {
      calls.push(`${cmd} ${args.join(' ')}${stdin === undefined ? '' : `\n${stdin}`}`);
      if (cmd === 'nft' && args[0] === 'list') return Promise.resolve({ code: 0, stdout: '', stderr: '' });
      // The skeleton goes; the first chunk is refused.
      const refused = stdin?.startsWith('add map') === true;
      return Promise.resolve({ code: refused ? 1 : 0, stdout: '', stderr: refused ? '/dev/stdin:1:1-3: Error: refused' : '' });
    };
    const backend = createNftBackend(exec);
    const existing = await backend.read(undefined);
    const next = backend.rules(render(sampleState()));
    const p = backend.plan(next, undefined, existing, true);
    assert.ok(p.fill !== undefined, 'not a first fill');
    await assert.rejects(backend.write(p, next), /refused/);
    assert.match(calls.at(-1) ?? '', /^nft -f -\nadd table inet multus_proxy\ndelete table inet multus_proxy\n$/, `the last command does not remove the table: ${calls.at(-1) ?? ''}`);
  });

  void test('a dispatch element of another shape is not filled (the whole text goes instead)', () => {
    assert.deepEqual(gotoElement('10.96.0.10 . tcp . 80', 'goto MPX-SVC-X'), { ip: '10.96.0.10', protocol: 'tcp', port: 80, chain: 'MPX-SVC-X' });
    for (const [key, value] of [
      ['10.96.0.10 . tcp . 80', 'jump MPX-SVC-X'],
      ['10.96.0.10 . tcp . 80', undefined],
      ['10.96.0.10 . icmp . 80', 'goto X'],
      ['10.96.0.10 . tcp', 'goto X'],
      ['10.96.0.10 . tcp . 8o', 'goto X'],
    ] as const)
      assert.equal(gotoElement(key, value), undefined, `${key} : ${String(value)}`);
  });
});
