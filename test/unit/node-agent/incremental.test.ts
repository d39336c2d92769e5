/**
 * Property tests for the node agent's incremental paths: NodePlanner.update (cmd/node-agent/state.ts)
 * must return what a from-scratch planNode returns for the same objects, and renderNode with a
 * NodeRenderCache what an uncached renderNode returns (its nftables table and change included; and so every restore plan and conntrack
 * flush), over random sequences of the informer events an agent sees: Services (ClusterIP and
 * NodePort, Cluster and Local, dual-stack, duplicate and invalid node ports), their slices
 * (endpoints on this node or another), NADs (servable, unservable, malformed, with and without an
 * address range) and the Node (its address annotation, its InternalIP). Seeded, so a failure
 * names its seed and step and replays.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { NODE_ADDRESS_RANGE_ANNOTATION, SERVICE_NAMESPACES_ANNOTATION, NODE_ADDRESSES_ANNOTATION, NODE_PARENTS_ANNOTATION } from '../../../src/keys.js';
import type { NetworkAttachmentDefinition, V1EndpointSlice, V1Node, V1Service } from '../../../src/kube/types.js';
import { planRestore } from '../../../src/dataplane/iptables/restore.js';
import { planConntrack } from '../../../src/dataplane/core/conntrack.js';
import { conntrackScope } from '../../../src/dataplane/core/incremental.js';
/** A node render with one back end's rules beside it (stages.ts renderNode). */
type NodeRules = ReturnType<typeof renderNode>;
import { NodePlanner, planNode, type NodeInput, type NodePlan } from '../../../cmd/node-agent/state.js';
import { DEFAULT_MASQUERADE_MARK, LOADBALANCER_CHAIN_PREFIX, NODE_LAYOUT, NODEPORT_CHAIN_PREFIX, NodeRenderCache } from '../../../cmd/node-agent/rules.js';
import { renderNode } from '../../../cmd/node-agent/stages.js';
import { serviceObject, sliceObject, type EndpointSpec } from '../../sidecar/state-fixtures.js';
import { comparable, rng, ServiceWorld } from '../../harness/property.js';
import { fullText, partialText } from '../../../src/dataplane/nftables/render.js';

const NODE = 'w1';

/** A random cluster as one node's agent sees it: Services, slices, NADs and its Node. */
class World extends ServiceWorld {
  readonly nads = new Map<string, NetworkAttachmentDefinition>();
  node: V1Node | undefined;
  /** `--parent-from-nad`, per world: both modes are held to planNode. */
  readonly parentFromNad: boolean;
  constructor(r: () => number) {
    super(r);
    this.parentFromNad = this.r() < 0.3;
    for (const name of ['a', 'b', 'vf']) this.nads.set(name, this.nad(name));
    // Start with one network served (later NAD events may break it).
    this.nads.set('a', {
      metadata: { name: 'a', namespace: 'net', annotations: { [NODE_ADDRESS_RANGE_ANNOTATION]: '10.101.0.200-10.101.0.231/16, fd00:101::200-fd00:101::21f/64', [SERVICE_NAMESPACES_ANNOTATION]: '*' } },
      spec: { config: JSON.stringify({ type: 'macvlan', master: 'ens4' }) },
    });
    this.node = this.nodeObject();
  }

  nad(name: string): NetworkAttachmentDefinition {
    const master = this.pick(['ens4', 'ens5']);
    const config =
      name === 'vf'
        ? { type: 'sriov' }
        : this.pick<unknown>([{ type: 'macvlan', master }, { type: 'macvlan', master }, { type: 'ipvlan', mode: 'l2', master }, { type: 'bridge', bridge: 'br1' }, '{"type":', { type: 'macvlan' }]);
    const annotations: Record<string, string> = {};
    const third = name === 'a' ? 101 : 102;
    // The Services are in other namespaces: shared with them mostly, and sometimes not (the agent leaves those out).
    annotations[SERVICE_NAMESPACES_ANNOTATION] = '*';
    if (this.r() < 0.8)
      annotations[NODE_ADDRESS_RANGE_ANNOTATION] = this.pick([
        `10.${third}.0.200-10.${third}.0.231/16`,
        `10.${third}.0.200-10.${third}.0.231/16, fd00:${third}::200-fd00:${third}::21f/64`,
        `10.${third}.0.200-10.${third}.0.231/16, fd00:${third}::200-fd00:${third}::21f/64`,
        'not-a-range',
      ]);
    return { metadata: { name, namespace: 'net', annotations }, spec: { config: typeof config === 'string' ? config : JSON.stringify(config) } };
  }

  nodeObject(): V1Node {
    const annotations: Record<string, string> = {};
    const roll = this.r();
    // The admin's annotation is the only source of node addresses (NAD ranges are ignored).
    if (roll < 0.85)
      annotations[NODE_ADDRESSES_ANNOTATION] = this.pick([
        'net/a=10.101.0.9/16',
        'net/a=10.101.0.9/16,fd00:101::9/64;net/b=10.102.0.9/16',
        'net/a=10.101.0.9/16;net/b=10.102.0.8/16',
        'net/b=10.102.0.8/16',
        'bad=1.2.3.4/24',
      ]);
    // The parents are the admin's too: mostly both networks, sometimes one, a malformed value or none.
    const parents = this.r();
    if (parents < 0.95) annotations[NODE_PARENTS_ANNOTATION] = this.r() < 0.7 ? 'net/a=ens4;net/b=br1' : this.pick(['net/a=ens5; net/b=ens4;', 'net/a=ens4', 'net/b=br1', 'net/a=bad name']);
    return { metadata: { name: NODE, annotations }, status: { addresses: [{ type: 'InternalIP', address: `10.0.0.${this.pick([11, 12, 43])}` }] } };
  }

  service(name: string): V1Service {
    const i = this.int(250) + 1;
    const networks = this.pick(['net/a', 'net/a', 'net/b', 'net/a,net/b', 'net/b, net/a', 'net/vf', 'bad//x']);
    const dual = this.r() < 0.3;
    const clusterIPs = dual ? [`10.96.1.${i}`, `fd00:96::${i.toString(16)}`] : [`10.96.1.${i}`];
    const affinity = this.r() < 0.2 ? this.pick<number | 'default'>(['default', 60]) : undefined;
    const svc = serviceObject('app', name, { networks, clusterIPs, ports: this.ports(), ...(affinity !== undefined ? { affinitySeconds: affinity } : {}) });
    const spec = svc.spec as NonNullable<V1Service['spec']>;
    if (this.r() < 0.7) {
      spec.type = 'NodePort';
      if (this.r() < 0.4) spec.externalTrafficPolicy = 'Local';
      if (this.r() < 0.2) spec.healthCheckNodePort = 32000 + this.int(5);
      // Few distinct node ports, so two Services sometimes claim the same one; now and then an invalid one.
      for (const p of spec.ports ?? []) if (this.r() < 0.9) p.nodePort = this.r() < 0.03 ? 70000 : 30000 + this.int(8);
      // Some are LoadBalancers: ingress IPs (shared between Services sometimes, now and then the
      // node's own address or garbage, IPv6, ipMode Proxy) and source ranges.
      if (this.r() < 0.4) {
        spec.type = 'LoadBalancer';
        const ip = (): { ip: string; ipMode?: string } => ({
          ip: this.pick(['10.101.0.240', '10.101.0.241', '10.102.0.240', 'fd00:101::f0', '10.101.0.9', '10.0.0.11', 'x']),
          ...(this.r() < 0.2 ? { ipMode: this.pick(['Proxy', 'VIP']) } : {}),
        });
        svc.status = { loadBalancer: { ingress: Array.from({ length: this.int(3) }, ip) } };
        if (this.r() < 0.3) spec.loadBalancerSourceRanges = this.pick([['10.101.0.0/24'], ['192.0.2.0/24', 'fd00::/8'], ['bad']]);
      }
    }
    return svc;
  }

  protected endpointIP(family: 4 | 6, host: number): string {
    return family === 4 ? `10.${this.pick([101, 102])}.1.${host}` : `fd00:${this.pick([101, 102])}::1:${host}`;
  }
  protected override endpointExtra(): Partial<EndpointSpec> {
    return this.r() < 0.8 ? { nodeName: this.pick([NODE, 'w2']) } : {};
  }

  slice(name: string, svcName: string): V1EndpointSlice {
    const family = this.r() < 0.7 ? 4 : 6;
    return sliceObject('app', name, { service: svcName, network: this.pick(['net/a', 'net/b']), family, ports: this.ports(), endpoints: this.endpoints(family) });
  }

  protected other(roll: number): string {
    if (roll < 0.95) {
      const name = this.pick(['a', 'b']);
      if (this.r() < 0.15) this.nads.delete(name);
      else this.nads.set(name, this.nad(name));
      return `NAD ${name} changed`;
    }
    if (roll < 0.99) {
      this.node = this.r() < 0.05 ? undefined : this.nodeObject();
      return 'Node changed';
    }
    return 'nothing';
  }

  input(): NodeInput {
    return { nodeName: NODE, node: this.node, ...this.lists(), nads: [...this.nads.values()], masqueradeMark: DEFAULT_MASQUERADE_MARK, parentFromNad: this.parentFromNad };
  }
}

const SEEDS = [1, 2, 3, 4, 5, 6, 7, 8];
const STEPS = 150;

void describe('node agent: incremental plan and render equal from-scratch ones', () => {
  void test('NodePlanner.update equals planNode, and a cached renderNode an uncached one (restore plans and conntrack flushes too), after every random event', () => {
    let reused = 0;
    let servedSteps = 0;
    let patched = 0;
    let lbSteps = 0;
    for (const seed of SEEDS) {
      const world = new World(rng(seed));
      const planner = new NodePlanner();
      const cache = new NodeRenderCache();
      // Each back end renders only its own rules, so each has its own cache, as an agent runs one.
      const nftCache = new NodeRenderCache();
      let before: NodePlan | undefined;
      let prevCached: NodeRules | undefined;
      let prevFresh: NodeRules | undefined;
      let prevNft: { cached: NodeRules; fresh: NodeRules } | undefined;
      for (let i = 0; i < STEPS; i++) {
        const what = world.step();
        const input = world.input();
        const where = `seed ${seed}, step ${i} (${what})`;
        const got = planner.update(input);
        assert.deepEqual(got, planNode(input), `${where}: plan`);

        const lastPatch = cache.cluster.last;
        const cached = renderNode(got.state, cache);
        const fresh = renderNode(got.state);
        assert.deepEqual(comparable(cached), comparable(fresh), `${where}: render`);
        // The nftables table too: whole, and the change from the previous render.
        const nft = { cached: renderNode(got.state, nftCache, { nft: true }), fresh: renderNode(got.state, undefined, { nft: true }) };
        assert.deepEqual(comparable(nft.cached), comparable(nft.fresh), `${where}: nftables render`);
        assert.ok(nft.cached.nft !== undefined && nft.fresh.nft !== undefined);
        assert.equal(fullText(nft.cached.nft), fullText(nft.fresh.nft), `${where}: nftables table`);
        if (prevNft?.cached.nft !== undefined && prevNft.fresh.nft !== undefined)
          assert.equal(partialText(nft.cached.nft, prevNft.cached.nft).text, partialText(nft.fresh.nft, prevNft.fresh.nft).text, `${where}: nftables change`);
        prevNft = nft;
        assert.ok(cached.iptables !== undefined && fresh.iptables !== undefined, `${where}: an iptables render carries its rulesets`);
        if (lastPatch !== undefined && cache.cluster.last?.index === lastPatch.index && cached.iptables.v4 !== prevCached?.iptables?.v4) patched += 1;
        for (const f of ['v4', 'v6'] as const) {
          assert.equal(
            planRestore(cached.iptables[f], prevCached?.iptables?.[f], undefined, false, NODE_LAYOUT).text,
            planRestore(fresh.iptables[f], prevFresh?.iptables?.[f], undefined, false, NODE_LAYOUT).text,
            `${where}: IPv${f.slice(1)} restore plan`,
          );
        }
        const prevTargets = prevCached?.resolution.targets;
        assert.deepEqual(planConntrack(...conntrackScope(prevTargets, cached.resolution.targets)), planConntrack(prevTargets, cached.resolution.targets), `${where}: conntrack`);

        // What this event did not touch is last time's very object, so the render cache sees it unchanged.
        if (before !== undefined) {
          const old = new Set<unknown>([...before.state.clusterTargets, ...before.state.nodePorts]);
          for (const t of [...got.state.clusterTargets, ...got.state.nodePorts]) if (old.has(t)) reused += 1;
        }
        if (fresh.resolution.targets.some((t) => t.chain.startsWith(NODEPORT_CHAIN_PREFIX))) servedSteps += 1;
        if (fresh.resolution.targets.some((t) => t.chain.startsWith(LOADBALANCER_CHAIN_PREFIX))) lbSteps += 1;
        before = got;
        prevCached = cached;
        prevFresh = fresh;
      }
    }
    assert.ok(servedSteps > (SEEDS.length * STEPS) / 3, `a good share of the steps should serve some NodePort (${servedSteps} did)`);
    assert.ok(lbSteps > (SEEDS.length * STEPS) / 10, `a good share of the steps should serve some ingress IP (${lbSteps} did)`);
    assert.ok(reused > SEEDS.length * STEPS, `unchanged targets should be reused by identity (reused ${reused})`);
    assert.ok(patched > SEEDS.length * 4, `endpoint-only changes should take the render patch path (took it ${patched} times)`);
  });

  void test("Local endpoints come from the Service's own slices: a slice of another Service naming the same address on this node does not count", () => {
    const world = new World(rng(42));
    const nad = world.nads.get('a') as NetworkAttachmentDefinition;
    nad.spec = { config: JSON.stringify({ type: 'macvlan', master: 'ens4' }) };
    world.node = {
      metadata: { name: NODE, annotations: { [NODE_ADDRESSES_ANNOTATION]: 'net/a=10.101.0.200/16', [NODE_PARENTS_ANNOTATION]: 'net/a=ens4' } },
      status: { addresses: [{ type: 'InternalIP', address: '10.0.0.11' }] },
    };
    const local = serviceObject('app', 'local', { networks: 'net/a', clusterIPs: ['10.96.1.1'], ports: [{ port: 80 }], type: 'NodePort' });
    local.spec = { ...local.spec, externalTrafficPolicy: 'Local', ports: [{ port: 80, protocol: 'TCP', nodePort: 30001 }] };
    const slice = (name: string, service: string, nodeName: string): V1EndpointSlice =>
      sliceObject('app', name, { service, network: 'net/a', family: 4, ports: [{ port: 80 }], endpoints: [{ ip: '10.101.1.5', ready: true, nodeName }] });
    const own = slice('local-1', 'local', 'w2');
    const other = slice('other-1', 'other', NODE);
    const input: NodeInput = { nodeName: NODE, node: world.node, services: [local], slices: [own, other], nads: [nad], masqueradeMark: DEFAULT_MASQUERADE_MARK };
    const plan = planNode(input);
    assert.deepEqual(
      plan.state.nodePorts.map((t) => t.localEndpoints.length),
      [0],
    );
    assert.deepEqual(plan.healthChecks, [{ service: 'app/local', localEndpoints: 0 }]);
    const planner = new NodePlanner();
    planner.update(input);
    const moved = planner.update({ ...input, slices: [slice('local-1', 'local', NODE), other] });
    assert.deepEqual(moved.healthChecks, [{ service: 'app/local', localEndpoints: 1 }]);
  });
});
