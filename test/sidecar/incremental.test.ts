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
import { useNftNamespace } from '../harness/nft-namespace.js';
import assert from 'node:assert/strict';
import { sameState, stateFingerprint } from '../../src/dataplane/core/state.js';
import { countNftRules, fullText, shardsOf, type NftPlan, type NftRuleset } from '../../src/dataplane/nftables/render.js';
import { buildDesiredState, conntrackScope, conntrackStep, render, RenderCache, StateMemo } from '../../src/dataplane/core/incremental.js';
import { changedEntries, Snapshot, type Change } from '../../src/dataplane/core/engine.js';
import type { StateOutput } from '../../src/dataplane/core/state.js';
import { createIptablesBackend, type IptablesPlan } from '../../src/dataplane/iptables/backend.js';
import { type IptablesRules } from '../../src/dataplane/iptables/rulesets.js';
import { createNftBackend } from '../../src/dataplane/nftables/backend.js';
import { createExec } from '../../src/dataplane/tuning/spare-exec.js';
import { type Exec } from '../../src/dataplane/core/exec.js';
import type { RuleBackend } from '../../src/dataplane/core/seam.js';
import { countRules } from '../../src/dataplane/iptables/render.js';
import { SIDECAR_LAYOUT } from '../../src/dataplane/core/names.js';
import type { Rendered } from '../../src/dataplane/core/model.js';
import type { PodInterface } from '../../src/dataplane/core/model.js';
import { planConntrack } from '../../src/dataplane/core/conntrack.js';
import type { V1EndpointSlice, V1Service } from '../../src/kube/types.js';
import { serviceObject, sliceObject } from './state-fixtures.js';
import { CLIENT_BLUE, ep, target } from './render-fixtures.js';
import { SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
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
    if (roll < 0.91) {
      this.interfaces = this.pick(INTERFACE_SETS).map((i) => ({ ...i }));
      return 'pod interfaces changed';
    }
    return this.feed();
  }

  /**
   * The common change in a cluster: a Service's endpoints move (pods replaced) in a slice that
   * matches it (its first network, its family, its ports), with 1-4 ready endpoints; fed again,
   * it is an endpoint-only change with N >= 1 before and after (with nftables: endpoint-map
   * refills and nothing else). Random slices rarely match their Service's ports.
   */
  private feed(): string {
    const names = [...this.services.keys()];
    if (names.length === 0) return 'nothing';
    const fed = names.filter((n) => this.slices.has(`${n}-fed`));
    const name = fed.length > 0 && this.r() < 0.7 ? this.pick(fed) : this.pick(names);
    const svc = this.services.get(name) as V1Service;
    const network = (svc.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] ?? '').split(',')[0]?.trim() ?? '';
    const family = (svc.spec?.clusterIPs?.[0] ?? '').includes(':') ? 6 : 4;
    const ports = (svc.spec?.ports ?? []).map((p) => ({
      ...(p.name !== undefined ? { name: p.name } : {}),
      port: p.port,
      ...(typeof p.targetPort === 'number' ? { targetPort: p.targetPort } : {}),
      protocol: (p.protocol ?? 'TCP') as 'TCP' | 'UDP' | 'SCTP',
    }));
    const endpoints = Array.from({ length: 1 + this.int(4) }, () => ({ ip: this.endpointIP(family, this.int(12) + 1), ready: true, serving: true, terminating: false }));
    this.slices.set(`${name}-fed`, sliceObject('app', `${name}-fed`, { service: name, network, family, ports, endpoints }));
    return `slice ${name}-fed: endpoints moved`;
  }

  input(): { interfaces: readonly PodInterface[]; services: V1Service[]; slices: V1EndpointSlice[] } {
    return { interfaces: this.interfaces, ...this.lists() };
  }
}

/**
 * The world's changes since the last call as the informers report them (one change per key whose
 * object is not the same), stepped into `memo` (StateMemo.step, as cmd/sidecar/state-feed.ts does).
 */
function eventStepper(world: World): (memo: StateMemo) => StateOutput {
  let services = new Map<string, V1Service>();
  let slices = new Map<string, V1EndpointSlice>();
  const changes = <T>(was: ReadonlyMap<string, T>, now: ReadonlyMap<string, T>): Change<T>[] => {
    const out: Change<T>[] = [];
    for (const [k, a] of now) if (was.get(k) !== a) out.push({ before: was.get(k), after: a });
    for (const [k, b] of was) if (!now.has(k)) out.push({ before: b, after: undefined });
    return out;
  };
  return (memo) => {
    const out = memo.step({ interfaces: world.interfaces, services: changes(services, world.services), slices: changes(slices, world.slices) });
    services = new Map(world.services);
    slices = new Map(world.slices);
    return out ?? assert.fail('StateMemo.step refused the events of the objects it was given');
  };
}

const SEEDS = [1, 2, 3, 4, 5, 6, 7, 8];
/** The state stage is cheap to check: more sequences. */
const STATE_SEEDS = Array.from({ length: 32 }, (_, i) => i + 1);
const STEPS = 150;

void describe('incremental state and render equal from-scratch ones', () => {
  void test('StateMemo.update equals buildDesiredState after every random event', () => {
    let reused = 0;
    let ingressSteps = 0;
    for (const seed of STATE_SEEDS) {
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
    assert.ok(reused > STATE_SEEDS.length * STEPS, `unchanged targets should be reused by identity (reused ${reused})`);
    assert.ok(ingressSteps > (STATE_SEEDS.length * STEPS) / 10, `a good share of the steps should have an ingress-IP target (${ingressSteps} did)`);
  });

  void test("StateMemo.step on the informers' events equals buildDesiredState after every random event", () => {
    let reused = 0;
    for (const seed of STATE_SEEDS) {
      const world = new World(rng(seed));
      const memo = new StateMemo();
      const stepped = eventStepper(world);
      let before = stepped(memo);
      for (let i = 0; i < STEPS; i++) {
        const what = world.step();
        const input = world.input();
        const visited = memo.work.visited;
        const got = stepped(memo);
        assert.equal(memo.work.visited, visited, `seed ${seed}, step ${i}: a step passes over no list`);
        const want = buildDesiredState(input);
        assert.deepEqual({ state: got.state, problems: got.problems }, want, `seed ${seed}, step ${i} (${what})`);
        const old = new Set(before.state.targets);
        for (const t of got.state.targets) if (old.has(t)) reused += 1;
        before = got;
      }
    }
    assert.ok(reused > STATE_SEEDS.length * STEPS, `unchanged targets should be reused by identity (reused ${reused})`);
  });

  void test('StateMemo.step refuses an event whose before it does not hold, and changes nothing', () => {
    const svc = serviceObject('app', 'a', { networks: 'net/a', clusterIPs: ['10.96.1.1'], ports: [{ port: 80 }] });
    const memo = new StateMemo();
    const first = memo.step({ interfaces: [IFACE_A], services: [{ before: undefined, after: svc }], slices: [] });
    assert.equal(first?.state.targets.length, 1);
    const stranger = structuredClone(svc);
    assert.equal(memo.step({ interfaces: [IFACE_A], services: [{ before: stranger, after: undefined }], slices: [] }), undefined);
    // The lists still agree with what it held: the refused step left nothing behind.
    assert.deepEqual(memo.update({ interfaces: [IFACE_A], services: [svc], slices: [] }), first);
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

  void test('a cached (patched) render equals an uncached one', () => {
    let patched = 0;
    for (const seed of SEEDS) {
      const world = new World(rng(seed * 7919));
      const memo = new StateMemo();
      const cache = new RenderCache();
      let prevCached: Rendered | undefined;
      for (let i = 0; i < STEPS; i++) {
        const what = world.step();
        const state = memo.update(world.input()).state;
        const lastBefore = cache.last;
        const cached = render(state, cache);
        // Patched (the index carried over) and not just handed back unchanged: a real edit.
        if (lastBefore !== undefined && cache.last?.index === lastBefore.index && cached !== prevCached) patched += 1;
        assert.deepEqual(rendered(cached), rendered(render(state)), `seed ${seed}, step ${i} (${what})`);
        prevCached = cached;
      }
    }
    assert.ok(patched > SEEDS.length * 4, `endpoint-only changes should take the patch path (took it ${patched} times)`);
  });

  void test('Snapshot.with and changedEntries equal a Map and a full comparison over random edits', () => {
    for (const seed of SEEDS) {
      const r = rng(seed);
      let snap = Snapshot.of(new Map<string, number>(), (v) => v);
      let map = new Map<string, number>();
      const kept: { snap: Snapshot<string, number>; map: Map<string, number> }[] = [];
      for (let i = 0; i < 400; i++) {
        const edits: [string, number | undefined][] = [];
        for (let k = 0, n = Math.floor(r() * 6); k < n; k++) edits.push([`k${Math.floor(r() * 120)}`, r() < 0.3 ? undefined : Math.floor(r() * 5)]);
        const next = snap.with(edits);
        const nextMap = new Map(map);
        for (const [k, v] of edits)
          if (v === undefined) nextMap.delete(k);
          else nextMap.set(k, v);
        const where = `seed ${seed}, step ${i}`;
        assert.deepEqual([...next.entries()], [...nextMap.entries()], where);
        assert.equal(next.size, nextMap.size, where);
        assert.equal(
          next.total,
          [...nextMap.values()].reduce((a, b) => a + b, 0),
          where,
        );
        // An older version is unchanged by the newer ones, and its difference to any later one is the full comparison's.
        kept.push({ snap, map });
        const old = kept[Math.floor(r() * kept.length)] as (typeof kept)[number];
        assert.deepEqual([...old.snap.entries()], [...old.map.entries()], `${where}: an old version changed`);
        assert.deepEqual(changedEntries(old.snap, next), changedEntries(new Map(old.map), nextMap), `${where}: changedEntries`);
        snap = next;
        map = nextMap;
      }
    }
  });

  void test('changedEntries from one version to the next looks at the change only, also when the step folded the overlay into a new base', () => {
    // A sync diffs the version it applied against the next one: one key set per step (and put back,
    // as B2's changes do). Every ~√size steps the overlay folds; before the fold kept the old base's
    // number, that step compared all 2,000 keys (B2's p99 at 10,000 Services).
    const size = 2000;
    const loaded = new Map(Array.from({ length: size }, (_, i) => [`k${i}`, 0] as [string, number]));
    let snap = Snapshot.of(new Map(loaded), (v) => v);
    const map = new Map(loaded);
    let folds = 0;
    for (let g = 1; g <= 300; g++) {
      for (const v of [g, 0]) {
        const key = `k${(g * 997) % size}`;
        const next = snap.with([[key, v]]);
        map.set(key, v);
        const where = `step ${g}, value ${v}`;
        const touched = next.touchedSince(snap);
        assert.ok(touched !== undefined, `${where}: the next version should know its difference from the applied one`);
        const keys = [...touched];
        // A version fresh from a fold has an empty overlay: it differs from itself in no key.
        if ([...(next.touchedSince(next) ?? [''])].length === 0) folds += 1;
        // The two overlays and the fold's keys: at most ~3√size, never the table.
        assert.ok(keys.length <= 3 * Math.ceil(Math.sqrt(size)), `${where}: ${keys.length} keys looked at`);
        assert.deepEqual([...next.entries()], [...map.entries()], where);
        const before = new Map(snap.entries());
        assert.deepEqual(changedEntries(snap, next), changedEntries(before, new Map(map)), `${where}: changedEntries`);
        snap = next;
      }
    }
    assert.ok(folds >= 5, `the overlay should have folded several times (${folds})`);
  });
});

/** A rule back end under the property: its pure stages through the seam (backend.ts), never a command. */
interface Subject {
  readonly name: string;
  /** `shardsBefore`: nftables, the shard count of the table before (shards.ts shardsAfter: the count depends on it). */
  make(shardsBefore?: number): RuleBackend<unknown, unknown, unknown>;
  /** Everything the rules hold, in order. */
  content(rules: unknown): unknown;
  count(rules: unknown): number;
  text(plan: unknown): string;
  /** Whether `rules` was made by editing `prev` (the stage's O(changes) step), not from scratch. */
  edited?(rules: unknown, prev: unknown): boolean;
}
/**
 * How a table's Service ports without affinity pick, read from its text: through endpoint maps, or
 * one DNAT rule per endpoint (a DNAT line not in an affinity endpoint chain, whose DNAT follows its
 * `update @set`); undefined when it has no such port.
 */
function pickLayoutOf(text: string): 'map' | 'rules' | undefined {
  const lines = text.split('\n').map((l) => l.trim());
  if (lines.some((l) => / dnat ip6? to numgen random mod \d+ map @/.test(l))) return 'map';
  return lines.some((l, i) => / dnat ip6? to /.test(l) && !(lines[i - 1] ?? '').startsWith('update @')) ? 'rules' : undefined;
}

/** A bound the property's worlds cross both ways (they serve 0 to ~8 Service ports). */
const SMALL_MAP_BOUND = 3;
/** Ports per shard table so small that the worlds' tables spread over 1, 2, 4 and 8 tables and back (shards.ts). */
const SMALL_SHARD = 1;
/** The number of tables a full text writes. */
const tablesIn = (text: string): number => text.split('\n').filter((l) => /^table inet /.test(l)).length;
const noExec: Exec = () => Promise.reject(new Error('the property test runs no command'));
const SUBJECTS: readonly Subject[] = [
  {
    name: 'iptables',
    make: () => createIptablesBackend(noExec, { flavor: 'nft', families: [4, 6], layout: SIDECAR_LAYOUT }),
    content: (r) => {
      const x = r as IptablesRules;
      return [x.v4, x.v6].map((f) => [[...f.nat.entries()], [...f.filter.entries()]]);
    },
    count: (r) => countRules((r as IptablesRules).v4) + countRules((r as IptablesRules).v6),
    text: (p) => (p as IptablesPlan).map((f) => f.plan.text).join('\n'),
    // An edit keeps a family's ruleset, or makes its nat chains the next version of the last ones (sharing their base, engine.ts); scratch makes new ones.
    edited: (r, p) =>
      (['v4', 'v6'] as const).every((f) => {
        const [now, was] = [(r as IptablesRules)[f], (p as IptablesRules)[f]];
        return now === was || (now.nat instanceof Snapshot && was.nat instanceof Snapshot && now.nat.touchedSince(was.nat) !== undefined);
      }),
  },
  {
    name: 'nftables',
    make: () => createNftBackend(noExec),
    content: (r) => fullText(r as NftRuleset),
    count: (r) => countNftRules(r as NftRuleset),
    text: (p) => (p as NftPlan).text,
  },
  // The same with the endpoint-map bound low enough that the random worlds cross it both ways (render.ts MAX_ENDPOINT_MAPS).
  {
    name: `nftables, endpoint maps up to ${SMALL_MAP_BOUND} Service ports`,
    make: () => createNftBackend(noExec, undefined, { maxEndpointMaps: SMALL_MAP_BOUND }),
    content: (r) => fullText(r as NftRuleset),
    count: (r) => countNftRules(r as NftRuleset),
    text: (p) => (p as NftPlan).text,
  },
  // And with shard tables of ${SMALL_SHARD} Service port each, which the worlds' growth and shrinking change both ways (shards.ts).
  {
    name: `nftables, shard tables of ${SMALL_SHARD} Service port`,
    make: (shardsBefore) => createNftBackend(noExec, undefined, { portsPerShard: SMALL_SHARD, maxEndpointMaps: SMALL_MAP_BOUND, shardsBefore }),
    content: (r) => fullText(r as NftRuleset),
    count: (r) => countNftRules(r as NftRuleset),
    text: (p) => (p as NftPlan).text,
  },
];
const BACKEND_SEEDS = Array.from({ length: 16 }, (_, i) => 101 + i);

for (const subject of SUBJECTS) {
  void describe(`${subject.name}: the engine's stages equal from-scratch ones`, () => {
    void test(`rules, partial plan, rule count and conntrack step after every random event (${BACKEND_SEEDS.length} seeds x ${STEPS} steps)`, () => {
      let stepped = 0;
      let flushes = 0;
      let refills = 0;
      let edits = 0;
      /** Steps whose table picked through endpoint maps / through one rule per endpoint, and steps that switched between them. */
      const layouts = { map: 0, rules: 0, switched: 0 };
      /** Steps by the number of tables written, and steps that changed it. */
      const shards = { one: 0, more: 0, changed: 0 };
      for (const seed of BACKEND_SEEDS) {
        const world = new World(rng(seed * 7919));
        const memo = new StateMemo();
        // Odd seeds take the sidecar's path (the informers' events), even ones the lists.
        const byEvents = seed % 2 === 1 ? eventStepper(world) : undefined;
        const cache = new RenderCache();
        // Incremental: one back end and one render cache for the whole sequence, as a running sidecar.
        const be = subject.make();
        let prev: { rendered: Rendered; rules: unknown } | undefined;
        let prevFresh: { rendered: Rendered; rules: unknown } | undefined;
        for (let i = 0; i < STEPS; i++) {
          const what = world.step();
          const input = world.input();
          const where = `${subject.name}, seed ${seed}, step ${i} (${what})`;
          const rendered = render((byEvents?.(memo) ?? memo.update(input)).state, cache);
          const delta = prev !== undefined && rendered.delta?.from === prev.rendered.version;
          if (delta) stepped += 1;
          const rules = be.rules(rendered);
          if (delta && subject.edited?.(rules, prev?.rules) === true) edits += 1;
          // From scratch: state, render and a new back end, every step; it takes only the shard
          // count of the last from-scratch table (shardsAfter: the count has hysteresis).
          const fresh = render(buildDesiredState(input).state);
          const want = subject.make(prevFresh !== undefined && subject.name.startsWith('nftables') ? shardsOf(prevFresh.rules as NftRuleset) : undefined).rules(fresh);
          assert.deepEqual(subject.content(rules), subject.content(want), `${where}: rules`);
          assert.equal(subject.count(rules), subject.count(want), `${where}: rule count`);
          const plan = be.plan(rules, prev?.rules, undefined, prev === undefined);
          const planFresh = subject.make().plan(want, prevFresh?.rules, undefined, prevFresh === undefined);
          assert.equal(subject.text(plan), subject.text(planFresh), `${where}: plan`);
          if (/^flush map /m.test(subject.text(plan))) refills += 1;
          // nftables: no element command ever (nft 1.0.6 would dump every interval map's elements first).
          if (subject.name.startsWith('nftables')) {
            assert.doesNotMatch(subject.text(plan), /^(add|delete) element /m, `${where}: an element command`);
            const picks = pickLayoutOf(subject.content(rules) as string);
            if (picks !== undefined) layouts[picks] += 1;
            if (prev !== undefined && picks !== undefined && pickLayoutOf(subject.content(prev.rules) as string) === (picks === 'map' ? 'rules' : 'map')) layouts.switched += 1;
            const n = tablesIn(subject.content(rules) as string);
            shards[n > 1 ? 'more' : 'one'] += 1;
            if (prev !== undefined && tablesIn(subject.content(prev.rules) as string) !== n) shards.changed += 1;
          }
          if (prev !== undefined && prevFresh !== undefined) {
            const got = planConntrack(...conntrackStep(rendered, prev.rendered.version, prev.rendered.resolution.targets));
            assert.deepEqual(got, planConntrack(prevFresh.rendered.resolution.targets, fresh.resolution.targets), `${where}: conntrack`);
            assert.deepEqual(
              conntrackStep(rendered, prev.rendered.version, prev.rendered.resolution.targets),
              conntrackScope(prev.rendered.resolution.targets, rendered.resolution.targets),
              `${where}: conntrack step`,
            );
            if (got.length > 0) flushes += 1;
          }
          prev = { rendered, rules };
          prevFresh = { rendered: fresh, rules: want };
        }
      }
      assert.ok(stepped > BACKEND_SEEDS.length * 4, `endpoint-only changes should reach the back end as a delta (${stepped} did)`);
      assert.ok(flushes > 0, 'some steps should call for conntrack flushes');
      if (subject.edited !== undefined) assert.ok(edits > stepped / 2, `a render's delta should edit the last rules, not render them again (${edits} of ${stepped} did)`);
      if (subject.name === 'nftables')
        assert.ok(
          refills > BACKEND_SEEDS.length && layouts.rules === 0,
          `endpoint-only changes should refill endpoint maps (${refills} did), and the table never leave them (${layouts.rules} steps did)`,
        );
      if (!subject.name.includes('shard')) assert.equal(shards.more, 0, 'the default keeps one table for small worlds');
      else assert.ok(shards.one > 10 && shards.more > 10 && shards.changed > 10, `the shard count should change both ways (${JSON.stringify(shards)})`);
      if (subject.name.includes('up to')) assert.ok(layouts.map > 10 && layouts.rules > 10 && layouts.switched > 2, `the bound should be crossed both ways (${JSON.stringify(layouts)})`);
    });
  });
}

/**
 * The same property in the kernel, for each back end: over random event sequences, what one back
 * end instance writes partially after each step (the engine's plan, its own `write`) leaves the
 * namespace holding what a from-scratch full sync of that state by a new instance (its `read`,
 * full plan and `write`, adopting what is there) leaves in another namespace. Two namespaces
 * this test creates; listings compared as sorted lines (a Service added by a partial sync is
 * appended to the iptables dispatch chain, where a full one writes render order).
 */
const KERNEL: readonly { name: string; make: (exec: Exec, shardsBefore?: number) => RuleBackend<unknown, unknown, unknown>; listing: string[][]; byTable?: true }[] = [
  {
    name: 'iptables',
    make: (exec) => createIptablesBackend(exec, { flavor: 'nft', families: [4, 6], layout: SIDECAR_LAYOUT }),
    listing: [['iptables-save'], ['ip6tables-save']],
  },
  { name: 'nftables', make: (exec) => createNftBackend(exec), listing: [['nft', 'list', 'table', 'inet', 'multus_proxy']] },
  {
    name: `nftables, endpoint maps up to ${SMALL_MAP_BOUND} Service ports`,
    make: (exec) => createNftBackend(exec, undefined, { maxEndpointMaps: SMALL_MAP_BOUND }),
    listing: [['nft', 'list', 'table', 'inet', 'multus_proxy']],
  },
  // Every table of the namespace, each line under its table's name (sorted lines alone would not see a chain in the wrong shard).
  {
    name: `nftables, shard tables of ${SMALL_SHARD} Service port`,
    make: (exec, shardsBefore) => createNftBackend(exec, undefined, { portsPerShard: SMALL_SHARD, shardsBefore }),
    listing: [],
    byTable: true,
  },
];

/** Two namespaces for a describe block (made before its tests, removed after): one written incrementally, one from scratch. */
function twoNamespaces(): { topo: () => Topology; inc: () => Pod; scratch: () => Pod } {
  let topo: Topology | undefined;
  let inc: Pod | undefined;
  let scratch: Pod | undefined;
  before(async () => {
    topo = await createTopology();
    inc = await topo.addPod('inc');
    scratch = await topo.addPod('scratch');
  });
  after(async () => topo?.teardown());
  const need = <T>(x: T | undefined): T => {
    assert.ok(x !== undefined, 'the namespaces are made in before()');
    return x;
  };
  return { topo: () => need(topo), inc: () => need(inc), scratch: () => need(scratch) };
}

for (const k of KERNEL) {
  void describe(`${k.name}: incremental changes in the kernel equal a from-scratch sync`, () => {
    const ns = twoNamespaces();

    void test('partial write after every step = full sync of that state by a new back end (3 seeds x 40 steps)', async () => {
      const listing = async (pod: Pod): Promise<string[]> => {
        const out: string[] = [];
        for (const argv of k.listing) out.push(...nftListingLines((await ns.topo().run(pod, argv)).stdout.replace(/^#.*$/gm, '').replace(/\[\d+:\d+\]/g, '')));
        if (k.byTable === true)
          for (const t of (await ns.topo().run(pod, ['nft', 'list', 'tables'])).stdout
            .split('\n')
            .map((l) => l.trim())
            .filter((l) => l !== '')
            .sort())
            out.push(t, ...nftListingLines((await ns.topo().run(pod, ['nft', 'list', ...t.split(' ')])).stdout).map((l) => `${t}: ${l}`));
        return out;
      };
      const incExec = createExec(ns.inc().ns);
      const scratchExec = createExec(ns.scratch().ns);
      let partials = 0;
      /** byTable: tables in the namespace after the last step, the most seen, and how often the number changed. */
      const tables = { last: 0, most: 0, changed: 0 };
      try {
        for (const seed of [11, 12, 13]) {
          const world = new World(rng(seed * 7919));
          const memo = new StateMemo();
          const cache = new RenderCache();
          const be = k.make(incExec);
          let prev: unknown;
          /** byTable: the shard count of the last from-scratch table, which the next one follows (shardsAfter). */
          let freshShards: number | undefined;
          for (let i = 0; i < 40; i++) {
            const what = world.step();
            const input = world.input();
            const where = `${k.name}, seed ${seed}, step ${i} (${what})`;
            const next = be.rules(render(memo.update(input).state, cache));
            const existing = prev === undefined ? await be.read(undefined) : undefined;
            const written = await be.write(be.plan(next, prev, existing, prev === undefined), next);
            if (prev !== undefined && written.some((f) => f.text !== '')) partials += 1;
            prev = next;
            const fresh = k.make(scratchExec, freshShards);
            const want = fresh.rules(render(buildDesiredState(input).state));
            if (k.byTable === true) freshShards = shardsOf(want as NftRuleset);
            await fresh.write(fresh.plan(want, undefined, await fresh.read(undefined), true), want);
            const inc = await listing(ns.inc());
            assert.deepEqual(inc, await listing(ns.scratch()), where);
            const heads = inc.filter((l) => /^table \S+ \S+$/.test(l));
            const n = heads.length;
            // No table left from more shards: exactly the tables the state's full text writes.
            if (k.byTable === true) assert.deepEqual(heads, [...fullText(next as NftRuleset).matchAll(/^table (inet \S+) \{$/gm)].map((m) => `table ${m[1] ?? ''}`).sort(), `${where}: our tables`);
            if (n !== tables.last) tables.changed += 1;
            tables.last = n;
            tables.most = Math.max(tables.most, n);
          }
        }
      } finally {
        incExec.close();
        scratchExec.close();
      }
      assert.ok(partials >= 30, `many steps should change the rules (${partials} did)`);
      if (k.byTable === true) assert.ok(tables.most >= 4 && tables.changed >= 6, `the number of tables should change both ways (${JSON.stringify(tables)})`);
    });
  });
}

/**
 * The nftables layout's own change path in the kernel: Service ports of every family and protocol
 * (one with affinity) whose endpoints change at random, now and then to none or with affinity
 * toggled. After every step, the partial write of one back end (mostly endpoint-map refills)
 * leaves the table a new back end's full sync of that state leaves.
 */
void describe('nftables: endpoint changes in the kernel equal a from-scratch sync', () => {
  const ns = twoNamespaces();

  void test('partial write after every step = full sync of that state (2 seeds x 40 steps), most of them map refills only', async () => {
    const listing = async (pod: Pod): Promise<string[]> => nftListingLines((await ns.topo().run(pod, ['nft', 'list', 'table', 'inet', 'multus_proxy'])).stdout);
    const incExec = createExec(ns.inc().ns);
    const scratchExec = createExec(ns.scratch().ns);
    const ports = [
      { service: 'demo/t4', ip: '10.96.5.1', protocol: 'TCP' },
      { service: 'demo/u4', ip: '10.96.5.2', protocol: 'UDP' },
      { service: 'demo/s4', ip: '10.96.5.3', protocol: 'SCTP' },
      { service: 'demo/t6', ip: 'fd00:96::5:1', protocol: 'TCP' },
      { service: 'demo/u6', ip: 'fd00:96::5:2', protocol: 'UDP' },
      { service: 'demo/s6', ip: 'fd00:96::5:3', protocol: 'SCTP' },
    ] as const;
    let refillsOnly = 0;
    try {
      for (const seed of [21, 22]) {
        const r = rng(seed);
        const eps = (f: 4 | 6, n: number) => Array.from({ length: n }, (_, i) => ep(f === 4 ? `10.1.0.${1 + Math.floor(r() * 12)}` : `fd00:a::${1 + Math.floor(r() * 12)}`, 8000 + i));
        let targets = ports.map((p) =>
          target(p.service, p.ip, 80, eps(p.ip.includes(':') ? 6 : 4, 1 + Math.floor(r() * 4)), { protocol: p.protocol, ...(p.service === 'demo/u4' ? { affinityTimeoutSeconds: 60 } : {}) }),
        );
        const cache = new RenderCache();
        const be = createNftBackend(incExec);
        let prev: NftRuleset | undefined;
        for (let i = 0; i < 40; i++) {
          targets = targets.map((t) => {
            if (r() < 0.6) return t;
            const roll = r();
            const n = roll < 0.08 ? 0 : 1 + Math.floor(r() * 4);
            const affinity = roll > 0.95 ? (t.affinityTimeoutSeconds === undefined ? { affinityTimeoutSeconds: 30 } : { affinityTimeoutSeconds: undefined }) : {};
            return { ...t, endpoints: eps(t.family, n), ...affinity };
          });
          const state = { interfaces: [CLIENT_BLUE], targets };
          const next = be.rules(render(state, cache));
          const plan = be.plan(next, prev, prev === undefined ? await be.read(undefined) : undefined, prev === undefined);
          await be.write(plan, next);
          if (plan.onlyReplacements) refillsOnly += 1;
          prev = next;
          const fresh = createNftBackend(scratchExec);
          const want = fresh.rules(render(state));
          await fresh.write(fresh.plan(want, undefined, await fresh.read(undefined), true), want);
          assert.deepEqual(await listing(ns.inc()), await listing(ns.scratch()), `seed ${seed}, step ${i}: ${plan.text}`);
        }
      }
    } finally {
      incExec.close();
      scratchExec.close();
    }
    assert.ok(refillsOnly >= 20, `most steps should be endpoint-map refills only (${refillsOnly} were)`);
  });
});

/**
 * Shard-count hysteresis (shards.ts shardsAfter) through the back end into the kernel: a pod whose
 * Service-port count hovers at a boundary pays one full sync for the first crossing, not one per
 * crossing, and shrinks only once its ports fit in fewer tables with headroom.
 */
void describe('nftables: a Service-port count hovering at a shard boundary', () => {
  const ns = useNftNamespace('multus_proxy');

  void test('2 and 3 ports alternated over tables of 2 (shard boundary at 2): one full sync when it first grows, one when it shrinks to 1 port', async () => {
    const exec = createExec(ns.pod().ns);
    const all = [1, 2, 3].map((i) => target(`demo/h${i}`, `10.96.6.${i}`, 80, [ep('192.168.101.3', 8080), ep('192.168.101.4', 8080)]));
    const counts = [2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 1];
    const fulls: number[] = [];
    const tables: number[] = [];
    try {
      const cache = new RenderCache();
      const be = createNftBackend(exec, undefined, { portsPerShard: 2 });
      let prev: NftRuleset | undefined;
      for (const [i, n] of counts.entries()) {
        const next = be.rules(render({ interfaces: [CLIENT_BLUE], targets: all.slice(0, n) }, cache));
        const plan = be.plan(next, prev, prev === undefined ? await be.read(undefined) : undefined, prev === undefined);
        await be.write(plan, next);
        if (plan.full) fulls.push(i);
        prev = next;
        const listed = (await ns.topo().run(ns.pod(), ['nft', 'list', 'tables'])).stdout.split('\n').filter((l) => /^table inet multus_proxy/.test(l));
        tables.push(listed.length);
        assert.equal(listed.length, shardsOf(next), `step ${i} (${n} ports): the tables written are the namespace's`);
      }
    } finally {
      exec.close();
    }
    // Step 0 is the first sync (full anyway); 9 crossings of the boundary after it, one full sync among them.
    assert.deepEqual(fulls, [0, 1, 11], `full syncs at steps ${fulls.join(', ')}; tables ${tables.join(' ')}`);
    assert.deepEqual(tables, [1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1]);
  });
});
