import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  aliasFor,
  bridgePortName,
  hostInterfaceFor,
  hostInterfaceName,
  isOurs,
  parseLinks,
  planHostInterfaces,
  planRemoveAll,
  type ExistingLink,
  type HostInterface,
} from '../../../cmd/node-agent/host-interface.js';
import { golden as goldenIn } from '../../harness/golden.js';

const golden = (name: string, text: string): void => goldenIn('node-agent', name, text);
import { networkRef, RUNS } from '../annotations/arbitraries.js';

const A = { namespace: 'demo', name: 'net-a' };
const B = { namespace: 'demo', name: 'net-b' };
const V4 = { family: 4 as const, address: '192.168.101.250', prefix: 24 };
const V6 = { family: 6 as const, address: 'fd00:101::fa', prefix: 64 };
const macA = hostInterfaceFor(A, { servable: true, plugin: 'macvlan', parent: 'ens4', mode: 'vepa' }, [V6, V4]);
const brB = hostInterfaceFor(B, { servable: true, plugin: 'bridge', parent: 'br-sec', mode: '' }, [{ family: 4, address: '10.30.0.2', prefix: 16 }]);

/** What the kernel lists after `planHostInterfaces` created `w` (as `ip -d -j address show` reports it). */
function listed(w: HostInterface, over: Partial<ExistingLink> = {}): ExistingLink[] {
  const main: ExistingLink = {
    name: w.name,
    kind: w.kind,
    link: w.kind === 'veth' ? (w.peer ?? '') : w.parent,
    ...(w.kind === 'veth' ? {} : { mode: w.mode }),
    alias: aliasFor(w.network),
    up: true,
    addresses: [...w.addresses, { family: 6, address: 'fe80::1', prefix: 64 }],
    ...over,
  };
  const out = [main];
  if (w.peer !== undefined) out.push({ name: w.peer, kind: 'veth', link: w.name, master: w.parent, alias: aliasFor(w.network), up: true, addresses: [] });
  return out;
}

void describe('host interface plan', () => {
  void test('names: fixed prefix, at most 15 bytes, stable, distinct per network', () => {
    assert.equal(hostInterfaceName(A), macA.name);
    assert.match(macA.name, /^mpxh[a-z2-7]{11}$/);
    assert.notEqual(hostInterfaceName(A), hostInterfaceName(B));
    fc.assert(
      fc.property(networkRef, networkRef, (x, y) => {
        assert.ok(Buffer.byteLength(hostInterfaceName(x)) <= 15 && Buffer.byteLength(bridgePortName(x)) <= 15);
        if (x.namespace !== y.namespace || x.name !== y.name) assert.notEqual(hostInterfaceName(x), hostInterfaceName(y));
      }),
      RUNS,
    );
  });
  void test('macvlan is always bridge mode on the NAD parent, whatever the pods use; bridge gets a veth', () => {
    assert.equal(macA.kind, 'macvlan');
    assert.equal(macA.mode, 'bridge');
    assert.deepEqual(
      macA.addresses.map((a) => a.family),
      [4, 6],
    );
    assert.equal(brB.kind, 'veth');
    assert.equal(brB.peer, bridgePortName(B));
  });
  void test('golden: creation from nothing, beside foreign links', () => {
    const foreign: ExistingLink[] = [
      { name: 'ens4', kind: '', up: true, addresses: [] },
      { name: 'mpxhlookalike', kind: 'macvlan', link: 'ens4', mode: 'bridge', up: true, addresses: [] },
    ];
    const plan = planHostInterfaces([macA, brB], foreign);
    assert.deepEqual(plan.conflicts, []);
    assert.deepEqual(plan.deleted, [], 'a link with our prefix but not our alias is never deleted');
    golden('host-interfaces.create.batch', plan.lines.join('\n') + '\n');
  });
  void test('converged: nothing to do (kernel link-local addresses are left alone)', () => {
    const plan = planHostInterfaces([macA, brB], [...listed(macA), ...listed(brB)]);
    assert.deepEqual(plan.lines, []);
  });
  void test('address change: only the address lines; link down: set up', () => {
    const next = { ...macA, addresses: [{ ...V4, address: '192.168.101.251' }, V6] };
    const plan = planHostInterfaces([next], listed(macA, { up: false }));
    assert.deepEqual(plan.lines, [`address del 192.168.101.250/24 dev ${macA.name}`, `address add 192.168.101.251/24 dev ${macA.name}`, `link set dev ${macA.name} up`]);
    assert.deepEqual(plan.readdressed, [macA.name]);
  });
  void test('parent change: delete and recreate; unwanted interfaces of ours go, foreign ones stay', () => {
    const moved = { ...macA, parent: 'ens5' };
    const plan = planHostInterfaces([moved], [...listed(macA), ...listed(brB), { name: 'eth0', kind: '', up: true, addresses: [] }]);
    assert.equal(plan.lines[0], `link del dev ${macA.name}`);
    assert.ok(plan.lines.includes(`link add ${macA.name} link ens5 type macvlan mode bridge`));
    assert.ok(plan.lines.includes(`link del dev ${brB.name}`));
    assert.ok(!plan.lines.includes(`link del dev ${brB.peer ?? ''}`), 'the peer goes with its host end');
    assert.ok(!plan.lines.some((l) => l.includes('eth0')));
  });
  void test('a foreign link holding our name is a conflict, never touched', () => {
    const plan = planHostInterfaces([macA], [{ name: macA.name, kind: 'macvlan', link: 'ens4', mode: 'bridge', up: true, addresses: [] }]);
    assert.deepEqual(plan.lines, []);
    assert.match(plan.conflicts[0] ?? '', /is not the node agent's/);
  });
  void test('cleanup deletes ours only, each veth once', () => {
    const all = [...listed(macA), ...listed(brB), { name: 'mpxhforeign', kind: 'macvlan', up: true, addresses: [] }];
    assert.deepEqual(planRemoveAll(all), [`link del dev ${macA.name}`, `link del dev ${brB.name}`]);
    assert.ok(!isOurs({ name: 'mpxhforeign', kind: 'macvlan', up: true, addresses: [] }));
  });
  void test('parseLinks reads ip -d -j address show (as printed by iproute2 6.x)', () => {
    const json = JSON.stringify([
      { ifindex: 1, ifname: 'lo', flags: ['LOOPBACK', 'UP'], addr_info: [{ family: 'inet', local: '127.0.0.1', prefixlen: 8 }] },
      {
        ifindex: 5,
        ifname: macA.name,
        link: 'ens4',
        ifalias: aliasFor(A),
        flags: ['BROADCAST', 'UP'],
        linkinfo: { info_kind: 'macvlan', info_data: { mode: 'bridge' } },
        addr_info: [
          { family: 'inet', local: '192.168.101.250', prefixlen: 24 },
          { family: 'inet6', local: 'FD00:101::FA', prefixlen: 64 },
        ],
      },
      { ifindex: 6, ifname: 'mpxbx', link: 'mpxhx', master: 'br-sec', flags: [], linkinfo: { info_kind: 'veth' } },
      { nonsense: true },
    ]);
    const links = parseLinks(json);
    assert.equal(links.length, 3);
    assert.deepEqual(links[1], { name: macA.name, kind: 'macvlan', link: 'ens4', mode: 'bridge', alias: aliasFor(A), up: true, addresses: [V4, V6] });
    assert.equal(links[2]?.master, 'br-sec');
    assert.deepEqual(parseLinks('not json'), []);
    assert.deepEqual(parseLinks('{}'), []);
  });
});
