/**
 * Property tests for the incremental paths: StateMemo.update (src/dataplane/incremental.ts) must return what a
 * from-scratch buildDesiredState returns for the same inputs, and a render with a RenderCache
 * (which may patch the last render) what an uncached render returns, and the dataplane's narrowed
 * conntrack planning what planning over all targets returns, over random sequences of
 * the informer events a sidecar sees. Seeded, so a failure names its seed and step and replays.
 */
import { after, before, test, describe } from 'node:test';
import { createTopology, type Pod, type Topology } from '../harness/netns.js';
import { nftListingLines } from './render-fixtures.js';
import assert from 'node:assert/strict';
import { sameState, stateFingerprint } from '../../src/dataplane/state.js';
import { planRestore } from '../../src/dataplane/restore.js';
import { fullText, partialText, renderNft, type NftRuleset, type NftTarget } from '../../src/dataplane/nft/render.js';
import { buildDesiredState, conntrackScope, render, RenderCache, StateMemo } from '../../src/dataplane/incremental.js';
import type { Rendered } from '../../src/dataplane/model.js';
import type { PodInterface } from '../../src/dataplane/model.js';
import { planConntrack } from '../../src/dataplane/conntrack.js';
import type { V1EndpointSlice, V1Service } from '../../src/kube/types.js';
import { serviceObject, sliceObject } from './state-fixtures.js';
import { comparable as rendered, rng, ServiceWorld } from '../harness/property.js';

const IFACE_A: PodInterface = { network: { namespace: 'net', name: 'a' }, interface: 'net1', ipv4: ['10.1.0.10'], ipv6: ['fd00:a::10'] };
const IFACE_B: PodInterface = { network: { namespace: 'net', name: 'b' }, interface: 'net2', ipv4: ['10.2.0.10'], ipv6: [] };
const INTERFACE_SETS: readonly (readonly PodInterface[])[] = [[IFACE_A], [IFACE_A, IFACE_B], [IFACE_B], []];

/** A random world: Services and their slices, and the pod's interfaces. */
class World extends ServiceWorld {
  interfaces: readonly PodInterface[] = [IFACE_A];

  service(name: string): V1Service {
    const i = this.int(250) + 1;
    const networks = this.pick(['net/a', 'net/b', 'net/a,net/b', 'net/b, net/a', 'bad//x']);
    const dual = this.r() < 0.3;
    const clusterIPs = this.r() < 0.05 ? ['10.96.0.1'] : dual ? [`10.96.1.${i}`, `fd00:96::${i.toString(16)}`] : [`10.96.1.${i}`];
    const affinity = this.r() < 0.2 ? this.pick<number | 'default'>(['default', 60, 0]) : undefined;
    const svc = serviceObject('app', name, { networks, clusterIPs, ports: this.ports(), ...(affinity !== undefined ? { affinitySeconds: affinity } : {}) });
    if (this.r() < 0.05) svc.spec!.type = 'NodePort';
    else if (i % 4 === 0) {
      // A LoadBalancer, decided from the numbers already drawn (so the other tests' random streams
      // are unchanged): ingress IPs (sometimes the pod's own address, garbage, IPv6, ipMode Proxy)
      // and source ranges that admit the pod's address or not.
      svc.spec!.type = 'LoadBalancer';
      const ips = ['10.1.0.240', '10.2.0.240', 'fd00:a::f0', '10.1.0.10', 'x'];
      svc.status = { loadBalancer: { ingress: [{ ip: ips[i % 5] ?? 'x', ...(i % 3 === 0 ? { ipMode: 'Proxy' } : {}) }, ...(i % 8 === 0 ? [{ ip: 'fd00:a::f1' }] : [])] } };
      if (i % 6 === 0) svc.spec!.loadBalancerSourceRanges = [['10.1.0.0/24'], ['192.0.2.0/24'], ['fd00::/8'], ['bad']][Math.floor(i / 12) % 4] ?? [];
    }
    return svc;
  }

  protected endpointIP(family: 4 | 6, host: number): string {
    return family === 4 ? `10.${this.pick([1, 2])}.0.${host}` : `fd00:a::${host}`;
  }

  slice(name: string, svcName: string): V1EndpointSlice {
    const family = this.r() < 0.7 ? 4 : 6;
    const network = this.r() < 0.05 ? 'net/a,net/b' : this.pick(['net/a', 'net/b']);
    const s = sliceObject('app', name, { service: svcName, network, family, ports: this.ports(), endpoints: this.endpoints(family) });
    if (network.includes(',')) s.metadata!.annotations!['k8s.v1.cni.cncf.io/service-network'] = network;
    return s;
  }

  protected other(roll: number): string {
    if (roll < 0.95) {
      this.interfaces = this.pick(INTERFACE_SETS).map((i) => ({ ...i }));
      return 'pod interfaces changed';
    }
    return 'nothing';
  }

  input(): { interfaces: readonly PodInterface[]; services: V1Service[]; slices: V1EndpointSlice[] } {
    return { interfaces: this.interfaces, ...this.lists() };
  }
}

const SEEDS = [1, 2, 3, 4, 5, 6, 7, 8];
const STEPS = 150;

void describe('incremental state and render equal from-scratch ones', () => {
  void test('StateMemo.update equals buildDesiredState after every random event', () => {
    let reused = 0;
    let ingressSteps = 0;
    for (const seed of SEEDS) {
      const r = rng(seed);
      const world = new World(r);
      const memo = new StateMemo();
      let before = memo.update(world.input());
      for (let i = 0; i < STEPS; i++) {
        const what = world.step();
        const input = world.input();
        const got = memo.update(input);
        const want = buildDesiredState(input);
        assert.deepEqual(got, want, `seed ${seed}, step ${i} (${what})`);
        assert.equal(stateFingerprint(got.state), stateFingerprint(want.state));
        assert.equal(sameState(got.state, want.state), true, `seed ${seed}, step ${i}: sameState disagrees with the fingerprints`);
        // Targets of Services this event did not touch are the very objects of the previous state.
        const old = new Map(before.state.targets.map((t) => [stateFingerprint({ targets: [t], interfaces: [] }), t]));
        for (const t of got.state.targets) if (old.get(stateFingerprint({ targets: [t], interfaces: [] })) === t) reused += 1;
        if (got.state.targets.some((t) => t.ingress === true)) ingressSteps += 1;
        before = got;
      }
    }
    assert.ok(reused > SEEDS.length * STEPS, `unchanged targets should be reused by identity (reused ${reused})`);
    assert.ok(ingressSteps > (SEEDS.length * STEPS) / 10, `a good share of the steps should have an ingress-IP target (${ingressSteps} did)`);
  });

  void test('sameState is false when one endpoint differs', () => {
    const world = new World(rng(99));
    let a = buildDesiredState(world.input()).state;
    for (let n = 0; n < 500 && !a.targets.some((t) => t.endpoints.length > 0); n++) {
      world.step();
      a = buildDesiredState(world.input()).state;
    }
    const i = a.targets.findIndex((t) => t.endpoints.length > 0);
    assert.ok(i >= 0, 'the world should have a target with endpoints');
    const targets = a.targets.map((t, k) => (k === i ? { ...t, endpoints: t.endpoints.map((e, j) => (j === 0 ? { ...e, ready: !e.ready } : e)) } : t));
    assert.equal(sameState(a, { ...a, targets }), false);
    assert.equal(sameState(a, { ...a, targets: [...a.targets] }), true);
  });

  void test('a cached (patched) render equals an uncached one, and so does every restore plan (iptables) and table and change (nftables)', () => {
    let patched = 0;
    let flushes = 0;
    for (const seed of SEEDS) {
      const world = new World(rng(seed * 7919));
      const memo = new StateMemo();
      const cache = new RenderCache();
      let prevCached: Rendered | undefined;
      let prevFresh: Rendered | undefined;
      // The nftables back end's memo (per resolved target, as nft/backend.ts keeps it).
      const nftMemo = new WeakMap<Parameters<typeof renderNft>[0][number], NftTarget>();
      let prevNftCached: NftRuleset | undefined;
      let prevNftFresh: NftRuleset | undefined;
      for (let i = 0; i < STEPS; i++) {
        const what = world.step();
        const state = memo.update(world.input()).state;
        const lastBefore = cache.last;
        const cached = render(state, cache);
        const fresh = render(state);
        // Patched (the index carried over) and not just handed back unchanged: a real edit.
        if (lastBefore !== undefined && cache.last?.index === lastBefore.index && cached !== prevCached) patched += 1;
        const where = `seed ${seed}, step ${i} (${what})`;
        assert.deepEqual(rendered(cached), rendered(fresh), where);
        for (const f of ['v4', 'v6'] as const) {
          assert.equal(planRestore(cached[f], prevCached?.[f], undefined, false).text, planRestore(fresh[f], prevFresh?.[f], undefined, false).text, `${where}, IPv${f.slice(1)} plan`);
        }
        // nftables: the memoized render of the patched targets equals a fresh one, whole and by difference.
        const nftCached = renderNft(cached.resolution.targets, nftMemo);
        const nftFresh = renderNft(fresh.resolution.targets);
        assert.equal(fullText(nftCached), fullText(nftFresh), `${where}, nftables table`);
        if (prevNftCached !== undefined && prevNftFresh !== undefined) {
          assert.equal(partialText(nftCached, prevNftCached).text, partialText(nftFresh, prevNftFresh).text, `${where}, nftables plan`);
        }
        prevNftCached = nftCached;
        prevNftFresh = nftFresh;
        // The dataplane looks only at the changed pairs for conntrack flushes: same flushes as looking at all.
        const prevTargets = prevCached?.resolution.targets;
        assert.deepEqual(planConntrack(...conntrackScope(prevTargets, cached.resolution.targets)), planConntrack(prevTargets, cached.resolution.targets), `${where}, conntrack`);
        if (planConntrack(prevTargets, cached.resolution.targets).length > 0) flushes += 1;
        prevCached = cached;
        prevFresh = fresh;
      }
    }
    assert.ok(flushes > 0, 'some steps should call for conntrack flushes');
    assert.ok(patched > SEEDS.length * 4, `endpoint-only changes should take the patch path (took it ${patched} times)`);
  });
});

/**
 * The same property in the kernel, for the nftables back end: over random event sequences, the
 * table after applying each partial change with the real `nft` equals the table a whole load of
 * the same state gives (two namespaces this test creates).
 */
void describe('nftables: incremental changes in the kernel equal a from-scratch load', () => {
  let topo: Topology;
  let inc: Pod;
  let scratch: Pod;
  before(async () => {
    topo = await createTopology();
    inc = await topo.addPod('inc');
    scratch = await topo.addPod('scratch');
  });
  after(async () => topo?.teardown());

  void test('partial nft -f after every step = full nft -f of that state (3 seeds x 50 steps)', async () => {
    const apply = async (pod: Pod, text: string, where: string): Promise<void> => {
      if (text === '') return;
      const r = await topo.run(pod, ['nft', '-f', '-'], { input: text, allowFail: true });
      assert.equal(r.code, 0, `${where}: nft -f failed: ${r.stderr}\n${text}`);
    };
    const listing = async (pod: Pod): Promise<string[]> => nftListingLines((await topo.run(pod, ['nft', 'list', 'table', 'inet', 'multus_proxy'])).stdout);
    let partials = 0;
    for (const seed of [11, 12, 13]) {
      const world = new World(rng(seed * 7919));
      const memo = new StateMemo();
      const cache = new RenderCache();
      const nftMemo = new WeakMap<Parameters<typeof renderNft>[0][number], NftTarget>();
      let prev: NftRuleset | undefined;
      for (let i = 0; i < 50; i++) {
        const what = world.step();
        const next = renderNft(render(memo.update(world.input()).state, cache).resolution.targets, nftMemo);
        const where = `seed ${seed}, step ${i} (${what})`;
        if (prev === undefined) await apply(inc, fullText(next), where);
        else {
          const text = partialText(next, prev).text;
          if (text !== '') partials += 1;
          await apply(inc, text, where);
        }
        await apply(scratch, fullText(next), where);
        assert.deepEqual(await listing(inc), await listing(scratch), where);
        prev = next;
      }
    }
    assert.ok(partials >= 30, `many steps should change the table (${partials} did)`);
  });
});

