/**
 * The source guard's drift check and mode, with a recording nft (the kernel's side is
 * test/sidecar/source-guard-drift.test.ts): a table deleted or altered is written again at once,
 * counted and logged; one as written is left alone; `off` keeps no guard.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { SourceGuard, type GuardTool } from '../../../cmd/sidecar/source-guard.js';
import { guardDrift, guardInterfaces, sourceGuardText, GUARD_TABLE } from '../../../src/dataplane/index.js';
import { createLogger } from '../../../src/log.js';
import type { NetworkStatusEntry } from '../../../src/annotations/network-status.js';

const MAC = '02:00:00:00:00:0b';
const STATUS: NetworkStatusEntry[] = [
  { name: 'ovn', interface: 'eth0', ipv4: ['10.0.0.5'], ipv6: [], default: true },
  { name: 'demo/net-a', namespace: 'demo', nad: 'net-a', interface: 'net1', ipv4: ['192.0.2.11'], ipv6: ['2001:db8::11'], mac: MAC, default: false },
];
const LIST = guardInterfaces(STATUS, () => MAC);

/** The listing nft prints for the written guard (rules as their count matters, counters shown). */
function listing(lines = 5): string {
  const chain = [...sourceGuardText(LIST).matchAll(/chain (\S+) \{/g)][0]?.[1] ?? '';
  const rules = Array.from({ length: lines }, (_, i) => `\t\tether saddr != ${MAC} counter packets ${i} bytes 0 drop`).join('\n');
  return `table netdev ${GUARD_TABLE} {\n\tchain ${chain} {\n\t\ttype filter hook egress device "net1" priority filter; policy accept;\n${rules}\n\t}\n}\n`;
}

/** A tool whose table is what it was last given, unless the test changes it. */
function fakeTool(): GuardTool & { writes: string[]; table: string | undefined } {
  const t = {
    writes: [] as string[],
    table: undefined as string | undefined,
    write: (text: string) => {
      t.writes.push(text);
      t.table = text.includes('chain') ? listing() : undefined;
      return Promise.resolve(undefined);
    },
    list: () => Promise.resolve(t.table),
  };
  return t;
}

const log = createLogger('test', 'silent');

void test('guardDrift: the written guard matches; a missing table, a missing or shortened chain and an extra chain are drift', () => {
  assert.equal(guardDrift(LIST, listing()), undefined);
  assert.match(guardDrift(LIST, undefined) ?? '', /table netdev multus_proxy_guard missing/);
  assert.match(guardDrift(LIST, listing(2)) ?? '', /2 rules, 5 written/);
  assert.match(guardDrift(LIST, `table netdev ${GUARD_TABLE} {\n}\n`) ?? '', /missing/);
  assert.match(guardDrift(LIST, listing().replace(/\}\n$/, '\tchain other {\n\t\taccept\n\t}\n}\n')) ?? '', /other: a chain that was not written/);
  assert.equal(guardDrift([], undefined), undefined, 'no interface: nothing to keep');
});

void test('repair: a deleted guard is written again, counted and told; one as written is left alone', async () => {
  const tool = fakeTool();
  const restored: boolean[] = [];
  const g = new SourceGuard({ tool, log, restored: (ok) => restored.push(ok), macOf: () => MAC });
  await g.apply(STATUS);
  assert.equal(tool.writes.length, 1);
  assert.equal(await g.repair(), undefined, 'as written: no drift');
  assert.equal(tool.writes.length, 1, 'and no write');
  tool.table = undefined; // nft delete table netdev multus_proxy_guard, from inside the pod
  assert.match((await g.repair()) ?? '', /missing/);
  assert.deepEqual(restored, [true]);
  assert.equal(tool.writes.length, 2);
  assert.equal(tool.writes[1], tool.writes[0], 'the same text as before');
  assert.equal(await g.repair(), undefined, 'back as written');
  tool.table = listing(1); // rules deleted from the chain
  assert.match((await g.repair()) ?? '', /1 rules, 5 written/);
  assert.deepEqual(restored, [true, true]);
  assert.ok(g.current(STATUS), 'a sync with nothing else to do still skips');
});

void test('repair: a write that fails after drift is counted as failed and tried again at the next check', async () => {
  const tool = fakeTool();
  const restored: boolean[] = [];
  const g = new SourceGuard({ tool, log, restored: (ok) => restored.push(ok), macOf: () => MAC });
  await g.apply(STATUS);
  tool.table = undefined;
  tool.write = () => Promise.resolve('Error: Could not process rule: Operation not permitted');
  assert.ok((await g.repair()) !== undefined);
  assert.deepEqual(restored, [false]);
  assert.equal(g.current(STATUS), true, 'the failed text is known: the next sync does not spin on it');
  // The next sync writes it when the tool works again (apply: not written yet).
  tool.write = (text) => {
    tool.writes.push(text);
    tool.table = listing();
    return Promise.resolve(undefined);
  };
  await g.apply(STATUS);
  assert.equal(await g.repair(), undefined);
});

void test("off (the cluster admin's setting): the table is removed, and no drift check keeps one", async () => {
  const tool = fakeTool();
  tool.table = listing();
  const g = new SourceGuard({ tool, log, mode: 'off', macOf: () => MAC });
  await g.apply(STATUS);
  assert.deepEqual(tool.writes, [sourceGuardText([])], 'the delete-only text');
  assert.equal(tool.table, undefined);
  tool.table = listing();
  assert.equal(await g.repair(), undefined);
  assert.equal(tool.writes.length, 1);
});
