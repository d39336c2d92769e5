/**
 * The nftables element writer (src/dataplane/nft/element-writer.ts, native/nfnl-batch.c) against
 * the real kernel, in network namespaces this test creates and removes:
 *  - it replaces the contents of interval maps (IPv4 and IPv6; TCP, UDP and SCTP data; grown,
 *    shrunk, emptied), and `nft list table` of that namespace equals the listing of the same
 *    elements written by nft text (`flush map` + `add element`) in a second namespace;
 *  - random range sets list back as written (property);
 *  - a batch naming a missing map fails with table, map and the kernel's error, and applies nothing;
 *  - the factory returns undefined with one log line when the binary is missing or not nfnl-batch;
 *  - in a table of 10,000 maps, one map's replace by the writer and by `nft -f` text (the back
 *    end's way, with its spare process) are timed side by side; the assertions are on correctness.
 * nfnl-batch comes from $BIN_DIR (scripts/build-native.sh, run by scripts/setup.sh).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { binDir } from '../harness/controlplane.js';
import { createTopology, type Pod, type Topology } from '../harness/netns.js';
import { createElementWriter, type ElementWriterHandle } from '../../src/dataplane/nftables/tuning/element-writer.js';
import { MAX_KEY, encodeIntervalMapWrites, type IntervalMapWrite, type MapRange } from '../../src/dataplane/nftables/netlink-batch.js';
import { createExec, spareWorthy } from '../../src/dataplane/tuning/spare-exec.js';
import { equalRanges, PICK_MODULUS } from '../../src/dataplane/nftables/pick-ranges.js';

const BINARY = join(binDir(), 'nfnl-batch');
const T = 'mpxw';
const M = PICK_MODULUS;

function nfnlBatch(): string {
  assert.ok(existsSync(BINARY), `${BINARY} not found: run scripts/build-native.sh (scripts/setup.sh runs it; MULTUS_PROXY_BIN_DIR selects another folder)`);
  return BINARY;
}

/** The render's equal shares (pick-ranges.ts), for endpoints given as [address, port]. */
function shares(endpoints: readonly (readonly [string, number])[]): MapRange[] {
  return equalRanges(endpoints.length, M).map((r, i) => ({ ...r, ip: endpoints[i]?.[0] ?? '', port: endpoints[i]?.[1] ?? 0 }));
}

/** The maps of the test table: name -> its data type (address . port) and family. */
const MAPS = {
  'MPX-EPS-V4TCP': { family: 4, data: 'ip daddr . tcp dport' },
  'MPX-EPS-V4UDP': { family: 4, data: 'ip daddr . udp dport' },
  'MPX-EPS-V6TCP': { family: 6, data: 'ip6 daddr . tcp dport' },
  'MPX-EPS-V6SCTP': { family: 6, data: 'ip6 daddr . sctp dport' },
} as const;
type MapName = keyof typeof MAPS;

/** The table with every map holding one element, and the rules that use them (as the layout will). */
function tableText(): string {
  const lines = [`table inet ${T} {`];
  for (const [name, m] of Object.entries(MAPS)) {
    const addr = m.family === 4 ? '192.0.2.9' : '2001:db8::9';
    lines.push(`  map ${name} { typeof numgen random mod ${M} : ${m.data}; flags interval; elements = { 0-${MAX_KEY} : ${addr} . 9 } }`);
  }
  lines.push(`  chain out { type nat hook output priority -100;`);
  lines.push(`    ip daddr 198.51.100.1 meta l4proto tcp dnat ip to numgen random mod ${M} map @MPX-EPS-V4TCP`);
  lines.push(`    ip daddr 198.51.100.1 meta l4proto udp dnat ip to numgen random mod ${M} map @MPX-EPS-V4UDP`);
  lines.push(`    ip6 daddr 2001:db8:96::1 meta l4proto tcp dnat ip6 to numgen random mod ${M} map @MPX-EPS-V6TCP`);
  lines.push(`    ip6 daddr 2001:db8:96::1 meta l4proto sctp dnat ip6 to numgen random mod ${M} map @MPX-EPS-V6SCTP`);
  lines.push('  }', '}', '');
  return lines.join('\n');
}

/** An address as nft's parser takes it (nft 1.0.6 refuses some IPv6 spellings with a dotted tail). */
const canonical = (ip: string): string => (ip.includes(':') ? new URL(`http://[${ip}]/`).hostname.slice(1, -1) : ip);

/** The same change as nft text: flush each map, add its elements. */
function nftText(table: string, writes: readonly IntervalMapWrite[]): string {
  return writes
    .flatMap((w) => {
      const elems = w.ranges.map((r) => `${r.from === r.to ? r.from : `${r.from}-${r.to}`} : ${canonical(r.ip)} . ${r.port}`);
      return [`flush map inet ${table} ${w.map}`, ...(elems.length > 0 ? [`add element inet ${table} ${w.map} { ${elems.join(', ')} }`] : [])];
    })
    .join('\n')
    .concat('\n');
}

const write = (map: MapName, ranges: readonly MapRange[]): IntervalMapWrite => ({ table: T, map, family: MAPS[map].family, ranges });

/** `nft -j list map` elements as ranges (a one-key range lists as a plain number). */
function listedRanges(json: string): MapRange[] {
  const doc = JSON.parse(json) as { nftables: { map?: { elem?: [number | { range: [number, number] }, { concat: [string, number] }][] } }[] };
  const elems = doc.nftables.find((x) => x.map !== undefined)?.map?.elem ?? [];
  return elems.map(([key, data]) => {
    const [from, to] = typeof key === 'number' ? [key, key] : key.range;
    return { from, to, ip: data.concat[0], port: data.concat[1] };
  });
}

void describe('nftables element writer: the real kernel', () => {
  let topo: Topology;
  let byWriter: Pod;
  let byText: Pod;
  let writer: ElementWriterHandle;
  const warnings: string[] = [];

  before(async () => {
    topo = await createTopology();
    byWriter = await topo.addPod('writer');
    byText = await topo.addPod('text');
    for (const pod of [byWriter, byText]) await topo.run(pod, ['nft', '-f', '-'], { input: tableText() });
    const w = await createElementWriter({ binary: nfnlBatch(), netns: byWriter.ns, logger: { warn: (m) => warnings.push(m) } });
    assert.ok(w !== undefined, `the writer's probe failed: ${warnings.join('; ')}`);
    writer = w;
  });
  after(async () => {
    writer?.close();
    await topo?.teardown();
  });

  const listing = async (pod: Pod): Promise<string> => (await topo.run(pod, ['nft', 'list', 'table', 'inet', T])).stdout;
  const bothWays = async (writes: readonly IntervalMapWrite[]): Promise<void> => {
    await writer.write(writes);
    await topo.run(byText, ['nft', '-f', '-'], { input: nftText(T, writes) });
    assert.equal(await listing(byWriter), await listing(byText));
  };

  void test('replaces maps (IPv4 and IPv6; TCP, UDP and SCTP data) and lists as the same elements written by nft text', async () => {
    const first = [
      write(
        'MPX-EPS-V4TCP',
        shares([
          ['10.1.0.1', 80],
          ['10.1.0.2', 80],
          ['10.1.0.3', 8080],
        ]),
      ),
      write(
        'MPX-EPS-V4UDP',
        shares([
          ['10.1.0.4', 53],
          ['10.1.0.5', 5353],
        ]),
      ),
      write('MPX-EPS-V6TCP', shares([['fd00:101::3', 443]])),
      write(
        'MPX-EPS-V6SCTP',
        shares([
          ['fd00:101::4', 9000],
          ['fd00:101::5', 9000],
          ['fd00:101::6', 9001],
          ['fd00:101::7', 9001],
          ['fd00:101::8', 9002],
        ]),
      ),
    ];
    await bothWays(first);
    const l = await listing(byWriter);
    assert.match(l, /elements = \{ 0-1431655764 : 10\.1\.0\.1 \. 80, 1431655765-2863311529 : 10\.1\.0\.2 \. 80,\s+2863311530-4294967294 : 10\.1\.0\.3 \. 8080 \}/);
    assert.match(l, /elements = \{ 0-4294967294 : fd00:101::3 \. 443 \}/);
    assert.doesNotMatch(l, /192\.0\.2\.9|2001:db8::9/, 'the elements before were replaced');
    // Shrunk, grown, emptied, and one map left alone.
    await bothWays([
      write('MPX-EPS-V4TCP', shares([['10.1.0.3', 8080]])),
      write('MPX-EPS-V6TCP', shares(Array.from({ length: 40 }, (_, i): [string, number] => [`fd00:101::${(i + 16).toString(16)}`, 443]))),
      write('MPX-EPS-V6SCTP', []),
    ]);
    assert.match(await listing(byWriter), /10\.1\.0\.4 \. 53/, 'the map the batch did not name kept its elements');
    assert.deepEqual(warnings, []);
  });

  void test('a map of 4,000 IPv6 ranges: a batch larger than the default socket buffer, its element list split over messages', async () => {
    const big = [write('MPX-EPS-V6SCTP', shares(Array.from({ length: 4000 }, (_, i): [string, number] => [`fd00:101::1:${i.toString(16)}`, 9000 + (i % 7)])))];
    assert.ok(encodeIntervalMapWrites(big, 1).length > 212_992, 'larger than net.core.wmem_default');
    await bothWays(big);
    const got = listedRanges((await topo.run(byWriter, ['nft', '-j', 'list', 'map', 'inet', T, 'MPX-EPS-V6SCTP'])).stdout);
    assert.equal(got.length, 4000);
  });

  void test('random range sets list back exactly as written (property)', async () => {
    let last: IntervalMapWrite[] = [];
    const ranges = (family: 4 | 6) =>
      fc
        .tuple(
          fc.uniqueArray(fc.integer({ min: 0, max: MAX_KEY }), { minLength: 1, maxLength: 24 }),
          fc.array(fc.tuple(family === 4 ? fc.ipV4() : fc.ipV6(), fc.integer({ min: 1, max: 65535 })), { minLength: 1, maxLength: 4 }),
        )
        .map(([keys, eps]) => {
          const s = [...keys].sort((a, b) => a - b);
          const out: MapRange[] = [];
          for (let i = 0; i < s.length; i += 2) {
            const [ip, port] = eps[(i / 2) % eps.length] as [string, number];
            out.push({ from: s[i] as number, to: s[i + 1] ?? (s[i] as number), ip, port });
          }
          return out;
        });
    await fc.assert(
      fc.asyncProperty(ranges(4), ranges(6), async (r4, r6) => {
        last = [write('MPX-EPS-V4UDP', r4), write('MPX-EPS-V6TCP', r6)];
        await writer.write(last);
        for (const [map, want] of [
          ['MPX-EPS-V4UDP', r4],
          ['MPX-EPS-V6TCP', r6],
        ] as const) {
          const got = listedRanges((await topo.run(byWriter, ['nft', '-j', 'list', 'map', 'inet', T, map])).stdout);
          assert.deepEqual(
            got.map((r) => ({ ...r, ip: canonical(r.ip) })),
            want.map((r) => ({ ...r, ip: canonical(r.ip) })),
            map,
          );
        }
      }),
      { numRuns: 15 },
    );
    // The other namespace gets the same last state, so later tests compare whole tables again.
    await topo.run(byText, ['nft', '-f', '-'], { input: nftText(T, last) });
    assert.equal(await listing(byWriter), await listing(byText));
  });

  void test('a batch naming a missing map or table fails with table, map and the kernel error, and applies nothing', async () => {
    const before = await listing(byWriter);
    const batch = [write('MPX-EPS-V4TCP', shares([['10.9.9.9', 1]])), { table: T, map: 'MPX-EPS-MISSING', family: 4 as const, ranges: shares([['10.9.9.8', 2]]) }];
    await assert.rejects(writer.write(batch), (e: Error) => {
      assert.match(e.message, /flushing map inet mpxw MPX-EPS-MISSING: No such file or directory/);
      assert.match(e.message, /adding elements to map inet mpxw MPX-EPS-MISSING: No such file or directory/);
      assert.doesNotMatch(e.message, /MPX-EPS-V4TCP/, 'the valid write is not blamed');
      return true;
    });
    assert.equal(await listing(byWriter), before, 'one transaction: the valid write in the batch was not applied either');
    await assert.rejects(writer.write([{ table: 'nosuchtable', map: 'M', family: 6, ranges: [] }]), /flushing map inet nosuchtable M: No such file or directory/);
    // A map of the other family: the kernel refuses data of the wrong length.
    await assert.rejects(writer.write([{ ...write('MPX-EPS-V4TCP', []), family: 6, ranges: shares([['fd00::1', 1]]) }]), /adding elements to map inet mpxw MPX-EPS-V4TCP: Invalid argument/);
    // Still usable after failures (the spare was replaced).
    await bothWays([
      write(
        'MPX-EPS-V4TCP',
        shares([
          ['10.1.0.7', 80],
          ['10.1.0.8', 80],
        ]),
      ),
    ]);
  });

  void test('one process serves write after write (nfnl-batch --serve); a failure ends it and the next write starts another', async () => {
    // `ip netns exec` execs the sender in place: this process's nfnl-batch children are the senders.
    const senders = (): number[] =>
      readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, 'utf8')
        .split(' ')
        .filter((x) => x !== '')
        .map(Number)
        .filter((pid) => {
          try {
            return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'nfnl-batch';
          } catch {
            return false;
          }
        });
    await bothWays([write('MPX-EPS-V4TCP', shares([['10.1.0.1', 80]]))]);
    const first = senders();
    assert.equal(first.length, 1, `one sender waits: ${first.join(',')}`);
    for (let i = 2; i <= 4; i++)
      await bothWays([
        write(
          'MPX-EPS-V4TCP',
          shares([
            ['10.1.0.1', 80],
            ['10.1.0.2', 80 + i],
          ]),
        ),
      ]);
    assert.deepEqual(senders(), first, 'the same process wrote all four batches and waits for the next');
    await assert.rejects(writer.write([{ table: 'nosuchtable', map: 'M', family: 4, ranges: [] }]), /No such file or directory/);
    await bothWays([write('MPX-EPS-V4TCP', shares([['10.1.0.3', 80]]))]);
    const after = senders();
    assert.equal(after.length, 1);
    assert.notDeepEqual(after, first, 'a new sender after the failure');
  });

  void test('the factory returns undefined with one log line when the binary is missing or is not nfnl-batch', async () => {
    for (const [binary, why] of [
      [join(binDir(), 'no-such-nfnl-batch'), /no-such-nfnl-batch is not an executable file/],
      ['/bin/true', /its probe \(a flush in a missing table\) gave exit 0, not "message seq \d+: No such file or directory"/],
    ] as const) {
      const lines: string[] = [];
      assert.equal(await createElementWriter({ binary, netns: byWriter.ns, logger: { warn: (m) => lines.push(m) } }), undefined);
      assert.equal(lines.length, 1, lines.join('\n'));
      assert.match(lines[0] ?? '', /^nftables element writer off \(endpoint changes go through nft -f instead\): /);
      assert.match(lines[0] ?? '', why);
    }
  });
});

void describe('nftables element writer: one replace in a table of 10,000 maps, writer vs nft -f', () => {
  const N = 10_000;
  let topo: Topology;
  let pod: Pod;
  before(async () => {
    topo = await createTopology();
    pod = await topo.addPod('big');
  });
  after(async () => topo?.teardown());

  void test('both give the map the same contents; times reported', { timeout: 600_000 }, async (t) => {
    const lines = [`table inet big {`, '  map svcs { type ipv4_addr . inet_service : verdict; }', '  chain out { type nat hook output priority -100; ip daddr . tcp dport vmap @svcs; }'];
    const svcs: string[] = [];
    for (let i = 0; i < N; i++) {
      const net = `10.${(i >> 8) & 255}.${i & 255}`;
      lines.push(`  map eps${i} { typeof numgen random mod ${M} : ip daddr . tcp dport; flags interval; elements = { 0-2147483646 : ${net}.1 . 80, 2147483647-${MAX_KEY} : ${net}.2 . 80 } }`);
      lines.push(`  chain svc${i} { meta l4proto tcp dnat ip to numgen random mod ${M} map @eps${i}; }`);
      svcs.push(`172.16.${(i >> 8) & 255}.${i & 255} . 80 : jump svc${i}`);
    }
    lines.push('}', `add element inet big svcs { ${svcs.join(', ')} }`, '');
    const t0 = performance.now();
    await topo.run(pod, ['nft', '-f', '-'], { input: lines.join('\n') });
    t.diagnostic(`table of ${N} maps + chains loaded in ${Math.round(performance.now() - t0)} ms`);

    const writer = await createElementWriter({ binary: nfnlBatch(), netns: pod.ns });
    assert.ok(writer !== undefined);
    const exec = createExec(pod.ns, spareWorthy);
    try {
      const change = (k: number): IntervalMapWrite[] => [
        { table: 'big', map: 'eps5000', family: 4, ranges: shares(Array.from({ length: 2 + (k % 3) }, (_, j): [string, number] => [`10.250.${k}.${j + 1}`, 80])) },
      ];
      const check = async (w: IntervalMapWrite[]): Promise<void> => {
        const got = listedRanges((await topo.run(pod, ['nft', '-j', 'list', 'map', 'inet', 'big', 'eps5000'])).stdout);
        assert.deepEqual(got, w[0]?.ranges);
      };
      const time = async (f: () => Promise<void>): Promise<number> => {
        const s = performance.now();
        await f();
        return performance.now() - s;
      };
      const writerMs: number[] = [];
      const nftMs: number[] = [];
      // Interleaved, so load changes hit both alike; nft's seconds per run allow it 4 runs, the
      // writer gets 5 after each (its spare, like nft's, is started by the first run).
      for (let k = 0; k < 4; k++) {
        const byNft = change(6 * k);
        nftMs.push(
          await time(async () => {
            const r = await exec('nft', ['-f', '-'], nftText('big', byNft));
            assert.equal(r.code, 0, r.stderr);
          }),
        );
        await check(byNft);
        for (let j = 1; j <= 5; j++) {
          const byWriter = change(6 * k + j);
          writerMs.push(await time(() => writer.write(byWriter)));
          await check(byWriter);
        }
      }
      const sorted = (xs: number[]): number[] => [...xs].sort((a, b) => a - b);
      const stats = (xs: number[]): string =>
        `p50 ${(sorted(xs)[Math.floor(xs.length / 2)] ?? NaN).toFixed(1)} min ${Math.min(...xs).toFixed(1)} max ${Math.max(...xs).toFixed(1)} ms (n=${xs.length})`;
      const report = `one map replaced in a table of ${N} maps: writer ${stats(writerMs)}; nft -f ${stats(nftMs)}`;
      t.diagnostic(report);
      console.log(report);
    } finally {
      writer.close();
      exec.close();
    }
  });
});
