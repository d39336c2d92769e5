/**
 * A first nftables sync into an empty namespace as the skeleton (`nft -f`) and then every element
 * in one nfnetlink batch (src/dataplane/nft/first-fill.ts), against the real kernel in namespaces
 * this test creates and removes (no traffic):
 *  - the tables it leaves list the same, element for element, as the whole text's one `nft -f`
 *    (the element writer off), for every rule shape (IPv4 and IPv6; TCP, UDP, SCTP; affinity;
 *    terminating-only and no endpoints) and over shard tables;
 *  - when the writer's batch fails, the whole text follows with `nft -f`, one warning says so, and
 *    the tables are again the same;
 *  - between the two transactions the skeleton dispatches nothing: its dispatch maps and endpoint
 *    maps are empty (a plan checked on its own, pure).
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
import { CLIENT_BLUE, ep, nftListingLines, sampleState, target } from './render-fixtures.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';
import { render } from '../../src/dataplane/core/incremental.js';
import { fullText, renderNft } from '../../src/dataplane/nftables/render.js';
import { gotoElement, planFirstFill } from '../../src/dataplane/nftables/tuning/first-fill.js';

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

void describe('nftables first fill: skeleton, then the elements in one batch', () => {
  let topo: Topology;
  const pods: Record<'fill' | 'whole' | 'failed' | 'sfill' | 'swhole', Pod> = {} as never;
  const dps: Dataplane[] = [];
  let shimDir: string;
  before(async () => {
    assert.ok(existsSync(WRITER), `${WRITER} not found: run scripts/build-native.sh (scripts/setup.sh runs it)`);
    topo = await createTopology();
    for (const name of ['fill', 'whole', 'failed', 'sfill', 'swhole'] as const) pods[name] = await topo.addPod(name);
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

  void test('one table: every rule shape lists the same as the whole text', async () => {
    const r = await make(pods.fill, WRITER).sync(state(pods.fill), { full: true });
    const w = await make(pods.whole, false).sync(state(pods.whole), { full: true });
    assert.deepEqual(r.warnings, []);
    assert.equal(r.families[0]?.via, 'first-fill', 'the first sync did not fill through the writer');
    assert.equal(w.families[0]?.via, undefined, 'without a writer the first sync is one nft -f');
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
    assert.deepEqual(fill, await listing(pods.whole));
  });

  void test('shard tables: the same as the whole text, table by table', async () => {
    const r = await make(pods.sfill, WRITER, { nftPortsPerShard: 2 }).sync(state(pods.sfill), { full: true });
    await make(pods.swhole, false, { nftPortsPerShard: 2 }).sync(state(pods.swhole), { full: true });
    assert.equal(r.families[0]?.via, 'first-fill');
    const fill = await listing(pods.sfill);
    assert.ok(fill.filter((l) => /^table inet multus_proxy-s\d+$/.test(l)).length >= 2, `fewer than two shard tables: ${fill.filter((l) => l.startsWith('table')).join(' | ')}`);
    assert.deepEqual(fill, await listing(pods.swhole));
  });

  void test('a failed batch: the whole text follows with nft -f, with one warning, and the tables are the same', async () => {
    const warnings: string[] = [];
    const logger = { debug: () => undefined, info: () => undefined, warn: (m: string) => warnings.push(m), error: () => undefined } as unknown as NonNullable<DataplaneOptions['logger']>;
    const r = await make(pods.failed, join(shimDir, 'nfnl-batch'), { logger }).sync(state(pods.failed), { full: true });
    assert.equal(r.families[0]?.via, undefined, 'reported as filled though the batch failed');
    assert.match(r.families[0]?.text ?? '', /elements = \{ 0-/, 'the text reported is not the whole text applied');
    const fell = warnings.filter((m) => m.includes('first sync'));
    assert.equal(fell.length, 1, `warnings: ${warnings.join(' | ')}`);
    assert.match(fell[0] ?? '', /element writer failed on the first sync's elements, writing the whole table with nft -f: .*Invalid argument/);
    assert.deepEqual(await listing(pods.failed), await listing(pods.whole));
  });
});

void describe('nftables first fill: the plan (pure)', () => {
  const targets = render(sampleState()).resolution.targets;
  const ruleset = renderNft(targets);
  const plan = planFirstFill(ruleset);

  void test('the skeleton holds no endpoint-map or dispatch element, and the batch holds every one', () => {
    assert.ok(plan !== undefined);
    assert.doesNotMatch(plan.text, /elements = \{ 0-/, 'an endpoint map has elements in the skeleton');
    assert.doesNotMatch(plan.text, /: goto /, 'a dispatch element is in the skeleton');
    // What the whole text puts in them, the batch carries: every range and every goto.
    const whole = fullText(ruleset);
    const ranges = (whole.match(/\d+-\d+ : [0-9a-f.:]+ \. \d+/g) ?? []).length;
    const gotos = (whole.match(/ : goto MPX-SVC-/g) ?? []).length;
    const fill = plan.fill ?? [];
    assert.equal(
      fill.reduce((n, w) => n + ('ranges' in w ? w.ranges.length : 0), 0),
      ranges,
    );
    assert.equal(
      fill.reduce((n, w) => n + ('gotos' in w ? w.gotos.length : 0), 0),
      gotos,
    );
    assert.ok(
      fill.every((w) => !('ranges' in w) || w.fresh === true),
      'a map of the skeleton would be flushed: it is new and empty',
    );
    // The no-endpoints set stays in the skeleton: it rejects from the first transaction on, as after.
    assert.match(plan.text, /10\.96\.0\.30 \. tcp \. 8080/);
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
