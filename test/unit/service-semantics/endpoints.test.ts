/**
 * kube-proxy's endpoint categorisation, case by case (each case names the rule it shows), and
 * properties that hold for any input.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  categorizeEndpoints,
  endpointsFor,
  semanticEndpoint,
  topologyModeFromHints,
  trafficSettings,
  type ClientPlace,
  type SemanticEndpoint,
  type TrafficSettings,
} from '../../../src/service-semantics/endpoints.js';

interface Ep extends SemanticEndpoint {
  readonly address: string;
}

function ep(address: string, o: Partial<Omit<Ep, 'address'>> = {}): Ep {
  return { address, ready: true, serving: true, terminating: false, zoneHints: [], nodeHints: [], ...o };
}
const terminating = (address: string, o: Partial<Ep> = {}): Ep => ep(address, { ready: false, serving: true, terminating: true, ...o });

const CLUSTER: TrafficSettings = { internalTrafficPolicy: 'Cluster', externalTrafficPolicy: 'Cluster', externallyAccessible: false };
const ITP_LOCAL: TrafficSettings = { ...CLUSTER, internalTrafficPolicy: 'Local' };
const ETP_LOCAL: TrafficSettings = { internalTrafficPolicy: 'Cluster', externalTrafficPolicy: 'Local', externallyAccessible: true };
const BOTH_LOCAL: TrafficSettings = { internalTrafficPolicy: 'Local', externalTrafficPolicy: 'Local', externallyAccessible: true };
const ITP_LOCAL_EXTERNAL: TrafficSettings = { internalTrafficPolicy: 'Local', externalTrafficPolicy: 'Cluster', externallyAccessible: true };

const HERE: ClientPlace = { nodeName: 'node-a', zone: 'zone-a' };

const addrs = (l: readonly Ep[] | undefined): string[] | undefined => l?.map((e) => e.address);

interface Case {
  readonly name: string;
  readonly traffic: TrafficSettings;
  readonly endpoints: readonly Ep[];
  readonly client?: ClientPlace;
  readonly preferSameNode?: boolean;
  readonly cluster: string[] | undefined;
  readonly local: string[] | undefined;
  readonly hasAny: boolean;
  readonly topology?: string;
}

const CASES: Case[] = [
  {
    name: 'Cluster policy, no hints: every ready endpoint, not-ready ones left out',
    traffic: CLUSTER,
    endpoints: [ep('10.0.0.1', { nodeName: 'node-a' }), ep('10.0.0.2', { nodeName: 'node-b' }), ep('10.0.0.3', { ready: false, serving: false })],
    cluster: ['10.0.0.1', '10.0.0.2'],
    local: undefined,
    hasAny: true,
  },
  {
    name: 'no endpoints at all: nothing, and hasAnyEndpoints false (kube-proxy rejects)',
    traffic: CLUSTER,
    endpoints: [],
    cluster: [],
    local: undefined,
    hasAny: false,
  },
  {
    name: 'Cluster policy, none ready: serving-terminating endpoints stand in',
    traffic: CLUSTER,
    endpoints: [terminating('10.0.0.1'), ep('10.0.0.2', { ready: false, serving: false, terminating: true }), ep('10.0.0.3', { ready: false, serving: false })],
    cluster: ['10.0.0.1'],
    local: undefined,
    hasAny: true,
  },
  {
    name: 'Cluster policy, some ready: terminating endpoints are not used even if serving',
    traffic: CLUSTER,
    endpoints: [ep('10.0.0.1'), terminating('10.0.0.2')],
    cluster: ['10.0.0.1'],
    local: undefined,
    hasAny: true,
  },
  {
    name: 'Cluster policy, nothing serving: empty and hasAnyEndpoints false',
    traffic: CLUSTER,
    endpoints: [ep('10.0.0.1', { ready: false, serving: false, terminating: true })],
    cluster: [],
    local: undefined,
    hasAny: false,
  },
  {
    name: "ITP Local: only this node's ready endpoints",
    traffic: ITP_LOCAL,
    endpoints: [ep('10.0.0.1', { nodeName: 'node-a' }), ep('10.0.0.2', { nodeName: 'node-b' }), ep('10.0.0.3', { nodeName: 'node-a' })],
    cluster: undefined,
    local: ['10.0.0.1', '10.0.0.3'],
    hasAny: true,
  },
  {
    name: 'ITP Local, no local endpoint: none (drop), no fall back to other nodes, hasAnyEndpoints true',
    traffic: ITP_LOCAL,
    endpoints: [ep('10.0.0.2', { nodeName: 'node-b' }), ep('10.0.0.3', { nodeName: 'node-c' })],
    cluster: undefined,
    local: [],
    hasAny: true,
  },
  {
    name: 'ITP Local, local endpoint only terminating: the local serving-terminating one is used',
    traffic: ITP_LOCAL,
    endpoints: [terminating('10.0.0.1', { nodeName: 'node-a' }), ep('10.0.0.2', { nodeName: 'node-b' })],
    cluster: undefined,
    local: ['10.0.0.1'],
    hasAny: true,
  },
  {
    name: 'ITP Local, local ready and local terminating: only the ready one',
    traffic: ITP_LOCAL,
    endpoints: [terminating('10.0.0.1', { nodeName: 'node-a' }), ep('10.0.0.4', { nodeName: 'node-a' })],
    cluster: undefined,
    local: ['10.0.0.4'],
    hasAny: true,
  },
  {
    name: 'ITP Local, local endpoint terminating and not serving: none',
    traffic: ITP_LOCAL,
    endpoints: [ep('10.0.0.1', { nodeName: 'node-a', ready: false, serving: false, terminating: true })],
    cluster: undefined,
    local: [],
    hasAny: false,
  },
  {
    name: 'ITP Local, client without a node name: no endpoint is local',
    traffic: ITP_LOCAL,
    client: { nodeName: '', zone: 'zone-a' },
    endpoints: [ep('10.0.0.1', { nodeName: '' }), ep('10.0.0.2')],
    cluster: undefined,
    local: [],
    hasAny: true,
  },
  {
    name: 'ITP Local ignores topology hints (they only narrow Cluster endpoints)',
    traffic: ITP_LOCAL,
    endpoints: [ep('10.0.0.1', { nodeName: 'node-a', zoneHints: ['zone-b'] }), ep('10.0.0.2', { nodeName: 'node-b', zoneHints: ['zone-a'] })],
    cluster: undefined,
    local: ['10.0.0.1'],
    hasAny: true,
  },
  {
    name: 'ETP Local on an externally reachable Service: both lists; Cluster keeps every ready endpoint',
    traffic: ETP_LOCAL,
    endpoints: [ep('10.0.0.1', { nodeName: 'node-a' }), ep('10.0.0.2', { nodeName: 'node-b' })],
    cluster: ['10.0.0.1', '10.0.0.2'],
    local: ['10.0.0.1'],
    hasAny: true,
  },
  {
    name: 'ITP Local on an externally reachable Service: Cluster endpoints still computed for external traffic',
    traffic: ITP_LOCAL_EXTERNAL,
    endpoints: [ep('10.0.0.1', { nodeName: 'node-b' })],
    cluster: ['10.0.0.1'],
    local: [],
    hasAny: true,
  },
  {
    name: 'both policies Local: Cluster endpoints still computed (externally reachable), Local this node only',
    traffic: BOTH_LOCAL,
    endpoints: [ep('10.0.0.1', { nodeName: 'node-a' }), ep('10.0.0.2', { nodeName: 'node-b' })],
    cluster: ['10.0.0.1', '10.0.0.2'],
    local: ['10.0.0.1'],
    hasAny: true,
  },
  {
    name: 'terminating fallback is per category: Cluster has ready remotes, Local falls back to its terminating one',
    traffic: ETP_LOCAL,
    endpoints: [terminating('10.0.0.1', { nodeName: 'node-a' }), ep('10.0.0.2', { nodeName: 'node-b' })],
    cluster: ['10.0.0.2'],
    local: ['10.0.0.1'],
    hasAny: true,
  },
  {
    name: 'zone hints, every endpoint hinted, this zone has some: only those',
    traffic: CLUSTER,
    endpoints: [ep('10.0.0.1', { zoneHints: ['zone-a'] }), ep('10.0.0.2', { zoneHints: ['zone-b'] }), ep('10.0.0.3', { zoneHints: ['zone-a'] })],
    cluster: ['10.0.0.1', '10.0.0.3'],
    local: undefined,
    hasAny: true,
    topology: 'PreferSameZone',
  },
  {
    name: 'zone hints, one ready endpoint without a hint: hints ignored, every ready endpoint',
    traffic: CLUSTER,
    endpoints: [ep('10.0.0.1', { zoneHints: ['zone-a'] }), ep('10.0.0.2')],
    cluster: ['10.0.0.1', '10.0.0.2'],
    local: undefined,
    hasAny: true,
    topology: '',
  },
  {
    name: 'zone hints, a not-ready endpoint without a hint does not disable them',
    traffic: CLUSTER,
    endpoints: [ep('10.0.0.1', { zoneHints: ['zone-a'] }), ep('10.0.0.2', { zoneHints: ['zone-b'] }), ep('10.0.0.3', { ready: false, serving: false })],
    cluster: ['10.0.0.1'],
    local: undefined,
    hasAny: true,
    topology: 'PreferSameZone',
  },
  {
    name: 'zone hints, none for this zone: every ready endpoint (fall back)',
    traffic: CLUSTER,
    endpoints: [ep('10.0.0.1', { zoneHints: ['zone-b'] }), ep('10.0.0.2', { zoneHints: ['zone-c'] })],
    cluster: ['10.0.0.1', '10.0.0.2'],
    local: undefined,
    hasAny: true,
    topology: '',
  },
  {
    name: 'zone hints, client zone unknown: every ready endpoint',
    traffic: CLUSTER,
    client: { nodeName: 'node-a', zone: '' },
    endpoints: [ep('10.0.0.1', { zoneHints: ['zone-a'] }), ep('10.0.0.2', { zoneHints: ['zone-b'] })],
    cluster: ['10.0.0.1', '10.0.0.2'],
    local: undefined,
    hasAny: true,
    topology: '',
  },
  {
    name: 'zone hints are a hint list: an endpoint hinted for two zones serves both',
    traffic: CLUSTER,
    endpoints: [ep('10.0.0.1', { zoneHints: ['zone-b', 'zone-a'] }), ep('10.0.0.2', { zoneHints: ['zone-b'] })],
    cluster: ['10.0.0.1'],
    local: undefined,
    hasAny: true,
    topology: 'PreferSameZone',
  },
  {
    name: 'zone hints, no ready endpoint: terminating fallback ignores topology',
    traffic: CLUSTER,
    endpoints: [terminating('10.0.0.1', { zoneHints: ['zone-b'] }), terminating('10.0.0.2', { zoneHints: ['zone-a'] })],
    cluster: ['10.0.0.1', '10.0.0.2'],
    local: undefined,
    hasAny: true,
    topology: '',
  },
  {
    name: 'PreferSameNode: node hints on every ready endpoint and one for this node: same node only',
    traffic: CLUSTER,
    endpoints: [
      ep('10.0.0.1', { nodeName: 'node-a', zoneHints: ['zone-a'], nodeHints: ['node-a'] }),
      ep('10.0.0.2', { nodeName: 'node-b', zoneHints: ['zone-a'], nodeHints: ['node-b'] }),
      ep('10.0.0.3', { nodeName: 'node-c', zoneHints: ['zone-b'], nodeHints: ['node-c'] }),
    ],
    cluster: ['10.0.0.1'],
    local: undefined,
    hasAny: true,
    topology: 'PreferSameNode',
  },
  {
    name: 'PreferSameNode, none on this node: zone hints next',
    traffic: CLUSTER,
    endpoints: [ep('10.0.0.2', { nodeName: 'node-b', zoneHints: ['zone-a'], nodeHints: ['node-b'] }), ep('10.0.0.3', { nodeName: 'node-c', zoneHints: ['zone-b'], nodeHints: ['node-c'] })],
    cluster: ['10.0.0.2'],
    local: undefined,
    hasAny: true,
    topology: 'PreferSameZone',
  },
  {
    name: 'PreferSameNode, none on this node nor in this zone: every ready endpoint',
    traffic: CLUSTER,
    endpoints: [ep('10.0.0.3', { nodeName: 'node-c', zoneHints: ['zone-b'], nodeHints: ['node-c'] })],
    cluster: ['10.0.0.3'],
    local: undefined,
    hasAny: true,
    topology: '',
  },
  {
    name: 'PreferSameNode, one endpoint missing its node hint: zone hints decide',
    traffic: CLUSTER,
    endpoints: [ep('10.0.0.1', { zoneHints: ['zone-a'], nodeHints: ['node-a'] }), ep('10.0.0.2', { zoneHints: ['zone-a'] }), ep('10.0.0.3', { zoneHints: ['zone-b'], nodeHints: ['node-c'] })],
    cluster: ['10.0.0.1', '10.0.0.2'],
    local: undefined,
    hasAny: true,
    topology: 'PreferSameZone',
  },
  {
    name: 'PreferSameNode with the feature gate off: node hints ignored, zone hints used',
    traffic: CLUSTER,
    preferSameNode: false,
    endpoints: [ep('10.0.0.1', { zoneHints: ['zone-a'], nodeHints: ['node-a'] }), ep('10.0.0.2', { zoneHints: ['zone-a'], nodeHints: ['node-b'] })],
    cluster: ['10.0.0.1', '10.0.0.2'],
    local: undefined,
    hasAny: true,
    topology: 'PreferSameZone',
  },
  {
    name: 'ETP Local with zone hints: Cluster narrowed to the zone, Local keeps this node whatever its hint',
    traffic: ETP_LOCAL,
    endpoints: [ep('10.0.0.1', { nodeName: 'node-a', zoneHints: ['zone-b'] }), ep('10.0.0.2', { nodeName: 'node-b', zoneHints: ['zone-a'] })],
    cluster: ['10.0.0.2'],
    local: ['10.0.0.1'],
    hasAny: true,
    topology: 'PreferSameZone',
  },
];

void describe('categorizeEndpoints (kube-proxy semantics)', () => {
  for (const c of CASES) {
    void test(c.name, () => {
      const r = categorizeEndpoints(c.endpoints, c.traffic, c.client ?? HERE, c.preferSameNode === undefined ? {} : { preferSameNode: c.preferSameNode });
      assert.deepEqual(addrs(r.cluster), c.cluster, 'cluster endpoints');
      assert.deepEqual(addrs(r.local), c.local, 'local endpoints');
      assert.equal(r.hasAnyEndpoints, c.hasAny, 'hasAnyEndpoints');
      if (c.topology !== undefined) assert.equal(r.topology, c.topology, 'topology mode');
    });
  }

  void test('allReachable is the union of the two lists, in input order', () => {
    const eps = [terminating('10.0.0.1', { nodeName: 'node-a' }), ep('10.0.0.2', { nodeName: 'node-b' }), ep('10.0.0.3', { nodeName: 'node-c', ready: false, serving: false })];
    const r = categorizeEndpoints(eps, ETP_LOCAL, HERE);
    assert.deepEqual(addrs(r.allReachable), ['10.0.0.1', '10.0.0.2']);
  });

  void test('endpointsFor: internal traffic follows ITP, external traffic follows ETP', () => {
    const eps = [ep('10.0.0.1', { nodeName: 'node-a' }), ep('10.0.0.2', { nodeName: 'node-b' })];
    const r = categorizeEndpoints(eps, ETP_LOCAL, HERE);
    assert.deepEqual(addrs(endpointsFor(r, ETP_LOCAL, 'internal') as Ep[]), ['10.0.0.1', '10.0.0.2']);
    assert.deepEqual(addrs(endpointsFor(r, ETP_LOCAL, 'external') as Ep[]), ['10.0.0.1']);
    const l = categorizeEndpoints(eps, ITP_LOCAL, HERE);
    assert.deepEqual(addrs(endpointsFor(l, ITP_LOCAL, 'internal') as Ep[]), ['10.0.0.1']);
  });

  void test('topologyModeFromHints: no ready endpoint means no topology', () => {
    assert.equal(topologyModeFromHints([ep('10.0.0.1', { ready: false, zoneHints: ['zone-a'] })], HERE), '');
  });
});

void describe('from API objects', () => {
  void test('semanticEndpoint defaults conditions as a consumer must (ready and serving unset: true, terminating unset: false)', () => {
    const e = semanticEndpoint({ addresses: ['10.0.0.1'] });
    assert.deepEqual(e, { address: '10.0.0.1', ready: true, serving: true, terminating: false, nodeName: undefined, zone: undefined, zoneHints: [], nodeHints: [] });
    const h = semanticEndpoint({
      addresses: ['10.0.0.2'],
      conditions: { ready: false, serving: true, terminating: true },
      nodeName: 'n',
      zone: 'z',
      hints: { forZones: [{ name: 'z' }], forNodes: [{ name: 'n' }] },
    });
    assert.deepEqual(h, { address: '10.0.0.2', ready: false, serving: true, terminating: true, nodeName: 'n', zone: 'z', zoneHints: ['z'], nodeHints: ['n'] });
    assert.equal(semanticEndpoint({ addresses: [] }), undefined, 'an endpoint without an address is ignored');
  });

  void test('trafficSettings: ETP counts only where traffic can come from outside', () => {
    assert.deepEqual(trafficSettings({ spec: { type: 'ClusterIP', internalTrafficPolicy: 'Local', externalTrafficPolicy: 'Local' } }), ITP_LOCAL);
    assert.deepEqual(trafficSettings({ spec: { type: 'NodePort', ports: [{ port: 80, nodePort: 30080 }], externalTrafficPolicy: 'Local' } }), ETP_LOCAL);
    assert.deepEqual(trafficSettings({ spec: { type: 'ClusterIP', externalIPs: ['192.0.2.1'] } }), { ...CLUSTER, externallyAccessible: true });
    assert.deepEqual(trafficSettings({ spec: {} }), CLUSTER);
  });
});

void describe('properties', () => {
  const arbEp = fc.record({
    address: fc.integer({ min: 1, max: 40 }).map((n) => `10.0.0.${n}`),
    ready: fc.boolean(),
    serving: fc.boolean(),
    terminating: fc.boolean(),
    nodeName: fc.option(fc.constantFrom('node-a', 'node-b', 'node-c', ''), { nil: undefined }),
    zone: fc.option(fc.constantFrom('zone-a', 'zone-b'), { nil: undefined }),
    zoneHints: fc.array(fc.constantFrom('zone-a', 'zone-b', 'zone-c'), { maxLength: 2 }),
    nodeHints: fc.array(fc.constantFrom('node-a', 'node-b', 'node-c'), { maxLength: 2 }),
  });
  const arbTraffic = fc.record({
    internalTrafficPolicy: fc.constantFrom('Cluster' as const, 'Local' as const),
    externalTrafficPolicy: fc.constantFrom('Cluster' as const, 'Local' as const),
    externallyAccessible: fc.boolean(),
  });
  const arbClient = fc.record({ nodeName: fc.constantFrom('node-a', 'node-b', ''), zone: fc.constantFrom('zone-a', 'zone-b', '') });

  void test('never returns an endpoint that is not in the input, and never one that cannot serve', () => {
    fc.assert(
      fc.property(fc.array(arbEp, { maxLength: 12 }), arbTraffic, arbClient, fc.boolean(), (eps, traffic, client, psn) => {
        const r = categorizeEndpoints(eps, traffic, client, { preferSameNode: psn });
        const input = new Set(eps);
        for (const list of [r.cluster ?? [], r.local ?? [], r.allReachable]) {
          for (const e of list) {
            assert.ok(input.has(e), 'endpoint from the input');
            assert.ok(e.ready || (e.serving && e.terminating), 'ready, or serving and terminating');
          }
        }
      }),
      { seed: 36, numRuns: 500 },
    );
  });

  void test("Local endpoints are always on the client's node; ITP Local with ITP-only traffic reaches no other node", () => {
    fc.assert(
      fc.property(fc.array(arbEp, { maxLength: 12 }), arbTraffic, arbClient, (eps, traffic, client) => {
        const r = categorizeEndpoints(eps, traffic, client);
        for (const e of r.local ?? []) assert.equal(e.nodeName, client.nodeName, 'local endpoint on this node');
        if ((r.local ?? []).length > 0) assert.notEqual(client.nodeName, '', 'no local endpoint without a node');
        if (traffic.internalTrafficPolicy === 'Local') {
          for (const e of endpointsFor(r, traffic, 'internal')) assert.equal(e.nodeName, client.nodeName, 'ITP Local never reaches another node');
        }
      }),
      { seed: 37, numRuns: 500 },
    );
  });

  void test('with no hints, Cluster endpoints are exactly the ready ones when any is ready', () => {
    fc.assert(
      fc.property(fc.array(arbEp, { maxLength: 12 }), arbClient, (raw, client) => {
        const eps = raw.map((e) => ({ ...e, zoneHints: [], nodeHints: [] }));
        const r = categorizeEndpoints(eps, CLUSTER, client);
        if (eps.some((e) => e.ready))
          assert.deepEqual(
            r.cluster,
            eps.filter((e) => e.ready),
          );
      }),
      { seed: 38, numRuns: 300 },
    );
  });
});
