/**
 * The sidecar's state feed (cmd/sidecar/state-feed.ts): a one-endpoint change at 10,000 Services is a
 * step of the events, with no pass over the Services. Counted, not timed: StateMemo's `work`
 * counters (objects visited by a pass over a list, Service names recomputed) and the reads of the
 * informers' lists, so the test fails if the change path becomes O(Services) again on any machine.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { StateFeed, type FeedInput } from '../../cmd/sidecar/state-feed.js';
import { buildDesiredState } from '../../src/dataplane/core/incremental.js';
import type { PodInterface } from '../../src/dataplane/core/model.js';
import type { NetworkRef } from '../../src/annotations/service-network.js';
import type { V1EndpointSlice, V1Service } from '../../src/kube/types.js';
import { serviceObject, sliceObject } from './state-fixtures.js';

const N = 10_000;
const SERVED: readonly NetworkRef[] = [{ namespace: 'net', name: 'a' }];
const IFACE: PodInterface = { network: { namespace: 'net', name: 'a' }, interface: 'net1', ipv4: ['10.1.0.10'], ipv6: [] };
const ip = (k: number): string => `10.${96 + (k >> 16)}.${(k >> 8) & 255}.${k & 255}`;

const svc = (i: number): V1Service => serviceObject('app', `svc-${i}`, { networks: 'net/a', clusterIPs: [ip(i + 1)], ports: [{ name: 'http', port: 80, targetPort: 8080 }] });
const slice = (i: number, gen = 0): V1EndpointSlice =>
  sliceObject('app', `svc-${i}-x`, {
    service: `svc-${i}`,
    network: 'net/a',
    family: 4,
    ports: [{ name: 'http', port: 80, targetPort: 8080 }],
    endpoints: [{ ip: `10.1.${gen}.${(i % 250) + 1}` }, { ip: '10.1.1.1' }],
  });

/** A cluster of n Services with one slice each, and a feed that has taken its lists once. */
function loaded(n: number, cap = 20_000): { feed: StateFeed; services: V1Service[]; slices: V1EndpointSlice[]; input: () => FeedInput; reads: { n: number } } {
  const services = Array.from({ length: n }, (_, i) => svc(i));
  const slices = Array.from({ length: n }, (_, i) => slice(i));
  const reads = { n: 0 };
  const input = (): FeedInput => ({
    served: SERVED,
    interfaces: [IFACE],
    services: () => (reads.n++, services),
    slices: () => (reads.n++, slices),
  });
  const feed = new StateFeed(cap);
  const first = feed.compute(input());
  assert.equal(first.whole, true);
  assert.equal(first.state.targets.length, Math.min(n, cap));
  return { feed, services, slices, input, reads };
}

void describe('state feed: a change costs the change', () => {
  void test(`one slice replaced at ${N.toLocaleString('en')} Services: no list read, no object visited, one Service recomputed`, () => {
    const { feed, services, slices, input, reads } = loaded(N);
    for (const [k, i] of [
      [1, 4321],
      [2, 17],
      [3, N - 1],
    ] as const) {
      const before = { ...feed.memo.work };
      const readsBefore = reads.n;
      const old = slices[i] as V1EndpointSlice;
      slices[i] = slice(i, k);
      feed.slice(old, slices[i]);
      const out = feed.compute(input());
      assert.equal(out.whole, false, 'stepped, not a pass over the lists');
      assert.equal(reads.n, readsBefore, "the informers' lists were not read");
      assert.equal(feed.memo.work.visited - before.visited, 0, 'no input object visited by a pass');
      assert.equal(feed.memo.work.recomputed - before.recomputed, 1, 'one Service recomputed');
      assert.equal(out.over, undefined, 'the cap was not decided again');
      const t = out.state.targets.find((x) => x.service === `app/svc-${i}`);
      assert.deepEqual(
        t?.endpoints.map((e) => e.ip),
        [`10.1.${k}.${(i % 250) + 1}`, '10.1.1.1'].sort(),
      );
    }
    // The same answer as from scratch.
    assert.deepEqual(feed.compute(input()).state, buildDesiredState({ interfaces: [IFACE], services, slices }).state);
  });

  void test('the control: the list path visits every object (so the counter can fail)', () => {
    const { feed } = loaded(N);
    assert.ok(feed.memo.work.visited >= 2 * N, `visited ${feed.memo.work.visited}`);
  });

  void test('a Service added, changed and deleted steps too (one cap pass, no state pass); equal to from scratch', () => {
    const { feed, services, slices, input, reads } = loaded(2_000);
    const added = svc(5_000);
    services.push(added);
    feed.service(undefined, added);
    // On another namespace's network a Service is served only with a slice of the controller's.
    slices.push(slice(5_000));
    feed.slice(undefined, slices.at(-1));
    const old = services[10] as V1Service;
    services[10] = { ...old, spec: { ...old.spec, ports: [{ name: 'http', port: 81, protocol: 'TCP', targetPort: 8080 }] } };
    feed.service(old, services[10]);
    const gone = services.splice(20, 1)[0] as V1Service;
    feed.service(gone, undefined);
    const visited = feed.memo.work.visited;
    const readsBefore = reads.n;
    const out = feed.compute(input());
    assert.equal(out.whole, false);
    assert.equal(feed.memo.work.visited, visited);
    assert.equal(reads.n - readsBefore, 1, "the Services' list, read once for the cap");
    assert.deepEqual(out.over, []);
    assert.deepEqual(out.state, buildDesiredState({ interfaces: [IFACE], services, slices }).state);
  });

  void test('over the cap: a slice change still steps; a Service change reads the lists (the cap decides which are served)', () => {
    const cap = 500;
    const { feed, services, slices, input } = loaded(2_000, cap);
    const old = slices[100] as V1EndpointSlice;
    slices[100] = slice(100, 7);
    feed.slice(old, slices[100]);
    const a = feed.compute(input());
    assert.equal(a.whole, false);
    const served = services.slice(0, 0);
    // Which are served: the first `cap` by namespace/name (svc-0, svc-1, svc-10, svc-100, ...).
    served.push(...[...services].sort((x, y) => (x.metadata!.name! < y.metadata!.name! ? -1 : 1)).slice(0, cap));
    assert.deepEqual(a.state, buildDesiredState({ interfaces: [IFACE], services: served, slices }).state);
    const gone = services.shift() as V1Service;
    feed.service(gone, undefined);
    const b = feed.compute(input());
    assert.equal(b.whole, true);
    assert.equal(b.over?.[0]?.total, 1_999);
  });

  void test("another namespace's network: a Service without a slice there is left out; its first slice brings it in and its last takes it out again, each a step", () => {
    const { feed, services, slices, input } = loaded(200);
    const lone = svc(700);
    services.push(lone);
    feed.service(undefined, lone);
    const served = (o: { state: { targets: readonly { service: string }[] } }): boolean => o.state.targets.some((t) => t.service === 'app/svc-700');
    const a = feed.compute(input());
    assert.equal(a.whole, false);
    assert.equal(served(a), false, 'no slice on net/a for it: not served (the controller writes none where the network is not shared)');
    const s700 = slice(700);
    slices.push(s700);
    feed.slice(undefined, s700);
    const b = feed.compute(input());
    assert.equal(b.whole, false);
    assert.equal(served(b), true);
    assert.deepEqual(b.state, buildDesiredState({ interfaces: [IFACE], services, slices }).state);
    slices.pop();
    feed.slice(s700, undefined);
    const c = feed.compute(input());
    assert.equal(c.whole, false);
    assert.equal(served(c), false);
    assert.deepEqual(c.state, buildDesiredState({ interfaces: [IFACE], services: services.filter((x) => x !== lone), slices }).state);
  });

  void test('events of the objects it does not hold (missed events) fall back to the lists', () => {
    const { feed, services, slices, input } = loaded(100);
    const stranger = structuredClone(slices[5] as V1EndpointSlice);
    slices[5] = slice(5, 3);
    feed.slice(stranger, slices[5]);
    const out = feed.compute(input());
    assert.equal(out.whole, true);
    assert.deepEqual(out.state, buildDesiredState({ interfaces: [IFACE], services, slices }).state);
  });

  void test('new served networks, or a replaced slice informer, read the lists', () => {
    const { feed, input } = loaded(100);
    assert.equal(feed.compute({ ...input(), served: [...SERVED] }).whole, true);
    assert.equal(feed.compute(input()).whole, true, 'served is a new array again');
    const i = input();
    feed.compute(i);
    feed.slicesReplaced();
    assert.equal(feed.compute(i).whole, true);
    assert.equal(feed.compute(i).whole, false);
  });
});
