/** Pure pieces of the IPv6 LoadBalancer test (test/node/loadbalancer6.ts): its NAD and docs/loadbalancer.md's IPv6 pool agree. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CONFIG_HEADING_V6, poolConfig } from '../../node/metallb.js';
import { V6, v6Nad } from '../../node/loadbalancer6.js';
import { ipamAllows, parseNadIpam } from '../../../src/annotations/nad-ipam.js';
import { NODE } from '../../harness/node-config.js';

const ipam = (): ReturnType<typeof parseNadIpam> => parseNadIpam((v6Nad() as { spec: { config: string } }).spec.config);

void test("docs/loadbalancer.md's IPv6 pool: an IPv6 range in the test network's subnet, announced on ens4 only", () => {
  const pool = poolConfig(undefined, CONFIG_HEADING_V6);
  assert.equal(pool.name, 'macvlan1-v6');
  assert.deepEqual(pool.interfaces, [NODE.parent]);
  assert.match(pool.first, /^fd00:10:1:1::/);
  assert.match(pool.last, /^fd00:10:1:1::/);
  // The IPv4 block is still the first heading's.
  assert.equal(poolConfig().name, 'macvlan1');
});

void test("the IPv6 NAD's range, as the controller reads it, hands out backends' addresses but never the pool's or the node's", () => {
  const r = ipam();
  assert.ok(r.ok && r.value.readable, JSON.stringify(r));
  const pool = poolConfig(undefined, CONFIG_HEADING_V6);
  assert.ok(ipamAllows(r.value, 'fd00:10:1:1::1', 6), 'a low address is handed out');
  for (const a of [pool.first, pool.last, V6.nodeAddress]) assert.equal(ipamAllows(r.value, a, 6), false, `${a} is excluded from whereabouts' range`);
});

void test("the IPv6 NAD routes the client's subnet via the node's address on the network (Local's return path)", () => {
  const config = JSON.parse((v6Nad() as { spec: { config: string } }).spec.config) as { master: string; ipam: { routes: { dst: string; gw: string }[] } };
  assert.equal(config.master, NODE.parent);
  assert.deepEqual(config.ipam.routes, [{ dst: V6.clientSubnet, gw: V6.nodeAddress }]);
});
