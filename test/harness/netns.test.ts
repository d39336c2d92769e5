/**
 * The network-namespace harness itself: two pods talk over the secondary network (IPv4 and
 * IPv6), the primary network is separate, and teardown leaves nothing behind.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { NETNS_PREFIX, createTopology, existingNamespaces, httpRequests, runCommand, startBackend, sweepLeftovers, udpRequests, type Pod, type Topology } from './netns.js';

void describe('netns harness', () => {
  let topo: Topology;
  let a: Pod;
  let b: Pod;
  before(async () => {
    topo = await createTopology();
    a = await topo.addPod('a', { net2: true });
    b = await topo.addPod('b');
    await startBackend(topo, b);
  });
  after(async () => {
    await topo.teardown();
  });

  void test('pods have eth0, net1 (net2 when asked), lo up and a default route on eth0', async () => {
    const links = JSON.parse((await topo.run(a, ['ip', '-j', 'link', 'show'])).stdout) as { ifname: string; operstate: string; flags: string[] }[];
    const names = links.map((l) => l.ifname).sort();
    assert.deepEqual(names, ['eth0', 'lo', 'net1', 'net2']);
    assert.ok(links.every((l) => l.flags.includes('UP')));
    const bLinks = JSON.parse((await topo.run(b, ['ip', '-j', 'link', 'show'])).stdout) as { ifname: string }[];
    assert.deepEqual(bLinks.map((l) => l.ifname).sort(), ['eth0', 'lo', 'net1']);
    const route = (await topo.run(a, ['ip', 'route', 'get', '1.1.1.1'])).stdout;
    assert.match(route, /dev eth0/);
    const route6 = (await topo.run(a, ['ip', '-6', 'route', 'get', '2001:db8::1'])).stdout;
    assert.match(route6, /dev eth0/);
  });

  void test('HTTP over net1, IPv4 and IPv6, the server sees the net1 address', async () => {
    const v4 = await httpRequests(topo, a, `http://${b.net1.ipv4}:80/`, 3);
    assert.deepEqual(
      v4.map((r) => [r.name, r.peer]),
      Array(3).fill(['b', a.net1.ipv4]),
    );
    const v6 = await httpRequests(topo, a, `http://[${b.net1.ipv6}]:80/`, 3);
    assert.deepEqual(
      v6.map((r) => [r.name, r.peer]),
      Array(3).fill(['b', a.net1.ipv6]),
    );
  });

  void test('UDP echo over net1, IPv4 and IPv6', async () => {
    const v4 = await udpRequests(topo, a, b.net1.ipv4, 5353, 2);
    assert.deepEqual(
      v4.map((r) => r.peer),
      [a.net1.ipv4, a.net1.ipv4],
    );
    const v6 = await udpRequests(topo, a, b.net1.ipv6, 5353, 2);
    assert.deepEqual(
      v6.map((r) => r.peer),
      [a.net1.ipv6, a.net1.ipv6],
    );
  });

  void test('the server listens on net1 only: its eth0 address refuses', async () => {
    // Asked from inside b itself: eth0 of another pod is not reachable at all (see above).
    const r = await httpRequests(topo, b, `http://${b.eth0.ipv4}:80/`, 1);
    assert.equal(r[0]?.error, 'ECONNREFUSED');
  });

  void test('a request from the eth0 address gets no reply; from the net1 address it does', async () => {
    const wrong = await topo.run(a, ['ping', '-c', '1', '-W', '1', '-I', a.eth0.ipv4, b.net1.ipv4], { allowFail: true });
    assert.notEqual(wrong.code, 0, 'a reply came back to the eth0 address');
    const right = await topo.run(a, ['ping', '-c', '1', '-W', '1', '-I', a.net1.ipv4, b.net1.ipv4], { allowFail: true });
    assert.equal(right.code, 0, right.stdout + right.stderr);
    const wrong6 = await topo.run(a, ['ping', '-6', '-c', '1', '-W', '1', '-I', a.eth0.ipv6, b.net1.ipv6], { allowFail: true });
    assert.notEqual(wrong6.code, 0, 'a reply came back to the eth0 IPv6 address');
  });

  void test('sweepLeftovers removes namespaces of dead runs only', async () => {
    const dead = spawnSync('true').pid ?? 0;
    assert.ok(dead > 0 && !existsSync(`/proc/${dead}`));
    const stale = `${NETNS_PREFIX}${dead}-000000-sw`;
    await runCommand(['ip', 'netns', 'add', stale]);
    const removed = sweepLeftovers();
    assert.ok(removed.includes(stale), `not swept: ${JSON.stringify(removed)}`);
    assert.ok(!removed.some((n) => n.startsWith(topo.id)), 'a live run was swept');
    assert.equal(existingNamespaces(topo.id).length, 3);
  });

  void test('networks are separate bridges: a net2 address is not reachable from net1', async () => {
    const r = await topo.run(a, ['ping', '-c', '1', '-W', '1', '-I', 'net2', b.net1.ipv4], { allowFail: true });
    assert.notEqual(r.code, 0);
  });

  void test('teardown removes every namespace, even with processes running', async () => {
    const t = await createTopology();
    const p = await t.addPod('x');
    await startBackend(t, p);
    assert.equal(existingNamespaces(t.id).length, 2);
    await t.teardown();
    assert.deepEqual(existingNamespaces(t.id), []);
  });
});
