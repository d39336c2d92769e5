/**
 * The policy drop counters read by nfnl-counters (native/nfnl-counters.c) in a network namespace
 * the test makes: the same packets as `nft -j list counters` for every counter of the sidecar's
 * table, real packets counted by a rule, nothing for a table that does not exist, and a reader
 * that cannot run falls back to nft with a warning (cmd/sidecar/policy-drops.ts).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createTopology, type Pod, type Topology } from '../harness/netns.js';
import { counterLines, counterPackets, counterSource } from '../../cmd/sidecar/policy-drops.js';
import type { Logger } from '../../src/log.js';

const TABLE = 'multus_proxy';

void describe('policy drop counters over netlink', () => {
  let topo: Topology;
  let pod: Pod;
  let dir = '';
  let reader = '';

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mpx-counters-'));
    reader = join(dir, 'nfnl-counters');
    // The flags of scripts/build-native.sh, so this is the helper the image has.
    execFileSync('gcc', ['-O2', '-s', '-Wall', '-Wextra', '-Werror', '-static', '-o', reader, join(import.meta.dirname, '..', '..', 'native', 'nfnl-counters.c')]);
    topo = await createTopology();
    pod = await topo.addPod('p');
  });
  after(async () => {
    await topo?.teardown();
    rmSync(dir, { recursive: true, force: true });
  });

  void test('reads what nft reads, packets a rule counted included, and nothing of a table that does not exist', async () => {
    const none = await topo.run(pod, [reader, 'inet', TABLE]);
    assert.equal(none.stdout, '', 'no table: no counters, exit 0');
    await topo.run(pod, ['nft', '-f', '-'], {
      input: `table inet ${TABLE} {\n\tcounter MPX-PC-A {\n\t\tpackets 7 bytes 700\n\t}\n\tcounter MPX-PC-B {\n\t}\n\tset s {\n\t\ttype ipv4_addr\n\t\telements = { 10.0.0.1, 10.0.0.2 }\n\t}\n\tchain out {\n\t\ttype filter hook output priority 0; policy accept;\n\t\tip daddr 192.0.2.1 counter name "MPX-PC-B" drop\n\t}\n}\ntable inet other {\n\tcounter MPX-PC-A {\n\t\tpackets 99 bytes 99\n\t}\n}\n`,
    });
    await topo.run(pod, ['ping', '-c', '3', '-i', '0.2', '-W', '1', '192.0.2.1'], { allowFail: true });
    const ours = counterLines((await topo.run(pod, [reader, 'inet', TABLE])).stdout);
    const nft = counterPackets((await topo.run(pod, ['nft', '-j', 'list', 'counters', 'table', 'inet', TABLE])).stdout);
    assert.deepEqual([...ours].sort(), [...nft].sort());
    assert.deepEqual([...ours].sort(), [
      ['MPX-PC-A', 7],
      ['MPX-PC-B', 3],
    ]);
  });

  void test('a reader that cannot run: a warning, then nft', async () => {
    const warned: string[] = [];
    const log = { warn: (_o: unknown, m: string) => void warned.push(m) } as unknown as Logger;
    const read = counterSource(join(dir, 'absent'), log);
    // This process's own namespace has no such table: nft is asked, and fails.
    await assert.rejects(read(), /nft/);
    assert.equal(warned.length, 1);
    assert.match(warned[0] ?? '', /reading them with nft from now on/);
  });

  void test('counterLines skips what is not a counter line', () => {
    assert.deepEqual(
      [...counterLines('A 1 2\nbad line\nB x 3\nC 99999999999999999999 1\n\nD 4 5')],
      [
        ['A', 1],
        ['D', 4],
      ],
    );
  });
});
