/**
 * Topology hints as Kubernetes' EndpointSlice controller writes them: trafficDistribution,
 * topology-mode Auto with its safeguards, and the slice plan carrying them.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  cpuMillis,
  hintMode,
  INSUFFICIENT_NODE_INFO,
  NodeCapacity,
  nodeTopology,
  ONE_ZONE_ONLY,
  planHints,
  TOPOLOGY_AWARE_HINTS_ANNOTATION,
  TOPOLOGY_MODE_ANNOTATION,
  zoneCapacity,
  type NodeTopology,
  type ZoneCapacity,
} from '../../../cmd/controller/topology-hints.js';
import { planSlices, isEmptyDiff } from '../../../cmd/controller/plan.js';
import { readServiceSpec } from '../../../cmd/controller/service-spec.js';
import { slimNode } from '../../../cmd/controller/slim.js';
import type { V1Endpoint, V1Service } from '../../../src/kube/types.js';
import { networkStatus, pod, service } from './fixtures.js';

function ep(ip: string, zone: string | undefined, o: { ready?: boolean; node?: string; hints?: V1Endpoint['hints'] } = {}): V1Endpoint {
  return {
    addresses: [ip],
    conditions: { ready: o.ready ?? true, serving: o.ready ?? true, terminating: false },
    ...(zone !== undefined ? { zone } : {}),
    ...(o.node !== undefined ? { nodeName: o.node } : {}),
    ...(o.hints !== undefined ? { hints: o.hints } : {}),
  };
}
const zonesOf = (eps: readonly V1Endpoint[]): (string[] | undefined)[] => eps.map((e) => e.hints?.forZones?.map((z) => z.name));
const nodesOf = (eps: readonly V1Endpoint[]): (string[] | undefined)[] => eps.map((e) => e.hints?.forNodes?.map((z) => z.name));

function svcWith(o: { annotations?: Record<string, string>; trafficDistribution?: string }): V1Service {
  return { metadata: { name: 's', namespace: 'default', annotations: o.annotations ?? {} }, spec: o.trafficDistribution !== undefined ? { trafficDistribution: o.trafficDistribution } : {} };
}
const node = (name: string, zone: string | undefined, cpuMilli: number, o: Partial<NodeTopology> = {}): NodeTopology => ({ name, zone, cpuMilli, ready: true, controlPlane: false, ...o });
const capacity = (ratios: Record<string, number>): ZoneCapacity => ({ ok: true, ratios: new Map(Object.entries(ratios)) });

void describe('hintMode: which hints a Service asks for', () => {
  const cases: [string, V1Service, ReturnType<typeof hintMode>][] = [
    ['no field, no annotation: none (hints removed)', svcWith({}), { kind: 'none' }],
    ['PreferClose: same zone', svcWith({ trafficDistribution: 'PreferClose' }), { kind: 'close', sameNode: false }],
    ['PreferSameZone: same zone', svcWith({ trafficDistribution: 'PreferSameZone' }), { kind: 'close', sameNode: false }],
    ['PreferSameNode: same node and zone', svcWith({ trafficDistribution: 'PreferSameNode' }), { kind: 'close', sameNode: true }],
    ['unknown trafficDistribution: none', svcWith({ trafficDistribution: 'Nearby' }), { kind: 'none' }],
    ['topology-mode Auto', svcWith({ annotations: { [TOPOLOGY_MODE_ANNOTATION]: 'Auto' } }), { kind: 'auto' }],
    ['topology-mode auto (lower case is accepted upstream)', svcWith({ annotations: { [TOPOLOGY_MODE_ANNOTATION]: 'auto' } }), { kind: 'auto' }],
    ['topology-mode Auto wins over trafficDistribution', svcWith({ annotations: { [TOPOLOGY_MODE_ANNOTATION]: 'Auto' }, trafficDistribution: 'PreferClose' }), { kind: 'auto' }],
    ['the older topology-aware-hints annotation when topology-mode is absent', svcWith({ annotations: { [TOPOLOGY_AWARE_HINTS_ANNOTATION]: 'Auto' } }), { kind: 'auto' }],
    [
      'topology-mode present but not Auto hides the older annotation; trafficDistribution applies',
      svcWith({ annotations: { [TOPOLOGY_MODE_ANNOTATION]: 'Disabled', [TOPOLOGY_AWARE_HINTS_ANNOTATION]: 'Auto' }, trafficDistribution: 'PreferClose' }),
      { kind: 'close', sameNode: false },
    ],
  ];
  for (const [name, svc, want] of cases) void test(name, () => assert.deepEqual(hintMode(svc), want));
});

void describe('trafficDistribution hints', () => {
  void test('PreferClose: each ready endpoint hinted for its own zone; not-ready and zoneless ones get none', () => {
    const eps = [ep('10.0.0.1', 'a'), ep('10.0.0.2', 'b'), ep('10.0.0.3', 'a', { ready: false, hints: { forZones: [{ name: 'a' }] } }), ep('10.0.0.4', undefined)];
    const r = planHints({ kind: 'close', sameNode: false }, eps, { ok: false, reason: 'unused' }, 'IPv4');
    assert.deepEqual(zonesOf(r.endpoints), [['a'], ['b'], undefined, undefined]);
    assert.equal(r.event, undefined, 'no Event for trafficDistribution, as upstream');
  });
  void test('PreferSameNode: also hinted for its own node', () => {
    const eps = [ep('10.0.0.1', 'a', { node: 'n1' }), ep('10.0.0.2', undefined, { node: 'n2' })];
    const r = planHints({ kind: 'close', sameNode: true }, eps, { ok: false, reason: 'unused' }, 'IPv4');
    assert.deepEqual(zonesOf(r.endpoints), [['a'], undefined]);
    assert.deepEqual(nodesOf(r.endpoints), [['n1'], ['n2']]);
  });
  void test('no mode: every hint removed, nothing else changed', () => {
    const eps = [ep('10.0.0.1', 'a', { hints: { forZones: [{ name: 'b' }] } })];
    const r = planHints({ kind: 'none' }, eps, { ok: false, reason: 'unused' }, 'IPv4');
    assert.deepEqual(r.endpoints, [ep('10.0.0.1', 'a')]);
  });
});

void describe('zoneCapacity: zone CPU shares from Nodes', () => {
  void test('shares by allocatable CPU; control-plane and not-ready nodes left out', () => {
    const c = zoneCapacity([node('n1', 'a', 3000), node('n2', 'b', 1000), node('cp', 'c', 8000, { controlPlane: true }), node('down', 'c', 8000, { ready: false })]);
    assert.ok(c.ok);
    assert.deepEqual(
      [...c.ratios],
      [
        ['a', 0.75],
        ['b', 0.25],
      ],
    );
  });
  void test('a ready node without a zone: insufficient node information', () => {
    assert.deepEqual(zoneCapacity([node('n1', 'a', 1000), node('n2', undefined, 1000)]), { ok: false, reason: INSUFFICIENT_NODE_INFO });
  });
  void test('a ready node without CPU: insufficient node information', () => {
    assert.deepEqual(zoneCapacity([node('n1', 'a', 1000), node('n2', 'b', 0)]), { ok: false, reason: INSUFFICIENT_NODE_INFO });
  });
  void test('one zone only: no hints', () => {
    assert.deepEqual(zoneCapacity([node('n1', 'a', 1000), node('n2', 'a', 1000)]), { ok: false, reason: ONE_ZONE_ONLY });
  });
  void test('nodeTopology reads labels, allocatable CPU and the Ready condition', () => {
    const n = nodeTopology({
      metadata: { name: 'n1', labels: { 'topology.kubernetes.io/zone': 'a', 'node-role.kubernetes.io/control-plane': '' } },
      status: { allocatable: { cpu: '3800m' }, conditions: [{ type: 'Ready', status: 'True' }] },
    });
    assert.deepEqual(n, { name: 'n1', zone: 'a', cpuMilli: 3800, ready: true, controlPlane: true });
    assert.deepEqual(nodeTopology({ metadata: { name: 'n2' }, status: { allocatable: { cpu: 'lots' } } }), { name: 'n2', zone: undefined, cpuMilli: 0, ready: false, controlPlane: false });
  });
  void test('the slimmed Node (the informer cache) keeps what nodeTopology reads', () => {
    const full = {
      metadata: { name: 'n1', resourceVersion: '7', labels: { 'topology.kubernetes.io/zone': 'a', 'node-role.kubernetes.io/master': '' }, managedFields: [{}] },
      status: {
        allocatable: { cpu: '2', memory: '8Gi', pods: '110' },
        conditions: [
          { type: 'MemoryPressure', status: 'False' },
          { type: 'Ready', status: 'True', lastHeartbeatTime: '2026-01-01T00:00:00Z' },
        ],
        addresses: [{ type: 'InternalIP', address: '192.0.2.10' }],
      },
    };
    assert.deepEqual(nodeTopology(slimNode(full)), nodeTopology(full));
    assert.deepEqual(nodeTopology(full), { name: 'n1', zone: 'a', cpuMilli: 2000, ready: true, controlPlane: true });
  });
  void test('cpuMillis reads quantities', () => {
    assert.equal(cpuMillis('4'), 4000);
    assert.equal(cpuMillis('3800m'), 3800);
    assert.equal(cpuMillis('0.5'), 500);
    assert.equal(cpuMillis('1k'), 1_000_000);
    assert.ok(Number.isNaN(cpuMillis('4 cores')));
    assert.ok(Number.isNaN(cpuMillis(undefined)));
  });
  void test('NodeCapacity reports a change only when the shares change', () => {
    const nc = new NodeCapacity();
    assert.equal(nc.set('n1', node('n1', 'a', 1000)), true, 'no CPU at all, then one zone: the reason changed');
    assert.equal(nc.set('n1b', node('n1b', 'a', 1000)), false, 'still one zone');
    assert.equal(nc.set('n2', node('n2', 'b', 1000)), true, 'two zones: shares appear');
    assert.equal(nc.set('n3', node('n3', 'b', 0, { ready: false })), false, 'a not-ready node changes nothing');
    assert.equal(nc.set('n2', undefined), true, 'back to one zone');
  });
});

void describe('topology-mode Auto', () => {
  const AUTO = { kind: 'auto' } as const;
  void test('balanced: every ready endpoint hinted for its own zone, Enabled Event', () => {
    const eps = [ep('10.0.0.1', 'a'), ep('10.0.0.2', 'b'), ep('10.0.0.3', 'a'), ep('10.0.0.4', 'b')];
    const r = planHints(AUTO, eps, capacity({ a: 0.5, b: 0.5 }), 'IPv4');
    assert.deepEqual(zonesOf(r.endpoints), [['a'], ['b'], ['a'], ['b']]);
    assert.deepEqual(r.event, { type: 'Normal', reason: 'TopologyAwareHintsEnabled', message: 'Topology Aware Hints has been enabled, addressType: IPv4' });
  });
  void test('unbalanced: a zone above its CPU share gives endpoints to the zone below it', () => {
    const eps = [ep('10.0.0.1', 'a'), ep('10.0.0.2', 'a'), ep('10.0.0.3', 'a'), ep('10.0.0.4', 'a'), ep('10.0.0.5', 'a'), ep('10.0.0.6', 'b')];
    const r = planHints(AUTO, eps, capacity({ a: 0.5, b: 0.5 }), 'IPv4');
    const counts = new Map<string, number>();
    for (const z of zonesOf(r.endpoints)) counts.set(z?.[0] ?? '', (counts.get(z?.[0] ?? '') ?? 0) + 1);
    assert.deepEqual([...counts].sort(), [
      ['a', 3],
      ['b', 3],
    ]);
    assert.deepEqual(zonesOf(r.endpoints), [['b'], ['b'], ['a'], ['a'], ['a'], ['b']], 'given away in endpoint order');
  });
  void test('not-ready endpoints get no hint and do not count', () => {
    const eps = [ep('10.0.0.1', 'a'), ep('10.0.0.2', 'b'), ep('10.0.0.3', 'a', { ready: false })];
    const r = planHints(AUTO, eps, capacity({ a: 0.5, b: 0.5 }), 'IPv4');
    assert.deepEqual(zonesOf(r.endpoints), [['a'], ['b'], undefined]);
  });
  const disabledCases: [string, V1Endpoint[], ZoneCapacity, string][] = [
    ['insufficient node information', [ep('10.0.0.1', 'a'), ep('10.0.0.2', 'b')], { ok: false, reason: INSUFFICIENT_NODE_INFO }, `${INSUFFICIENT_NODE_INFO}, addressType: IPv4`],
    [
      'fewer ready endpoints than zones',
      [ep('10.0.0.1', 'a'), ep('10.0.0.2', 'b')],
      capacity({ a: 0.4, b: 0.3, c: 0.3 }),
      'Insufficient number of endpoints (2 endpoints, 3 zones), addressType: IPv4',
    ],
    [
      'minimums above the endpoints (a zone would be overloaded)',
      [ep('10.0.0.1', 'a'), ep('10.0.0.2', 'b'), ep('10.0.0.3', 'a')],
      capacity({ a: 0.5, b: 0.5 }),
      'Unable to allocate minimum required endpoints to each zone without exceeding overload threshold (3 endpoints, 2 zones), addressType: IPv4',
    ],
    [
      'a ready endpoint without a zone',
      [ep('10.0.0.1', 'a'), ep('10.0.0.2', 'b'), ep('10.0.0.3', undefined), ep('10.0.0.4', 'b')],
      capacity({ a: 0.5, b: 0.5 }),
      'One or more endpoints do not have a zone specified, addressType: IPv4',
    ],
  ];
  for (const [name, eps, cap, message] of disabledCases) {
    void test(`safeguard: ${name}: no hints at all, Disabled Event`, () => {
      const withOld = eps.map((e) => ({ ...e, hints: { forZones: [{ name: 'a' }] } }));
      const r = planHints(AUTO, withOld, cap, 'IPv4');
      assert.ok(
        r.endpoints.every((e) => e.hints === undefined),
        'old hints removed',
      );
      assert.deepEqual(r.event, { type: 'Warning', reason: 'TopologyAwareHintsDisabled', message });
    });
  }

  void test('property: only hints change; when enabled every ready endpoint has exactly one zone hint, a zone with capacity', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ zone: fc.constantFrom('a', 'b', 'c'), ready: fc.boolean() }), { maxLength: 30 }),
        fc.array(fc.integer({ min: 1, max: 16 }), { minLength: 3, maxLength: 3 }),
        (specs, cpus) => {
          const eps = specs.map((s, i) => ep(`10.0.${Math.floor(i / 250)}.${i % 250}`, s.zone, { ready: s.ready }));
          const total = cpus.reduce((a, b) => a + b, 0);
          const cap = capacity({ a: (cpus[0] ?? 1) / total, b: (cpus[1] ?? 1) / total, c: (cpus[2] ?? 1) / total });
          const r = planHints(AUTO, eps, cap, 'IPv4');
          assert.equal(r.endpoints.length, eps.length);
          r.endpoints.forEach((e, i) => {
            const { hints: _h, ...rest } = e;
            assert.deepEqual(rest, eps[i]);
          });
          if (r.event?.reason === 'TopologyAwareHintsEnabled') {
            for (const e of r.endpoints) {
              if (e.conditions?.ready === true) assert.ok(e.hints?.forZones?.length === 1 && ['a', 'b', 'c'].includes(e.hints.forZones[0]?.name ?? ''));
              else assert.equal(e.hints, undefined);
            }
          } else assert.ok(r.endpoints.every((e) => e.hints === undefined));
        },
      ),
      { seed: 36, numRuns: 300 },
    );
  });
});

void describe('the slice plan carries hints', () => {
  const MACVLAN = 'default/macvlan1';
  const zoneOf = (n: string): string | undefined => ({ n1: 'a', n2: 'b' })[n];
  const pods = [
    pod('web-1', { nodeName: 'n1', status: networkStatus([{ name: MACVLAN, ips: ['10.2.0.1'] }]) }),
    pod('web-2', { nodeName: 'n2', status: networkStatus([{ name: MACVLAN, ips: ['10.2.0.2'] }]) }),
  ];
  function svc(o: { trafficDistribution?: string; annotations?: Record<string, string> }): V1Service {
    const s = service('web', { network: 'macvlan1', selector: { app: 'web' } });
    if (s.spec) {
      s.spec.clusterIP = '10.96.0.20';
      if (o.trafficDistribution !== undefined) s.spec.trafficDistribution = o.trafficDistribution;
    }
    Object.assign(s.metadata?.annotations ?? {}, o.annotations ?? {});
    return s;
  }
  const networks = (s: V1Service) => {
    const spec = readServiceSpec(s);
    return spec.kind === 'serve' ? spec.networks : [];
  };

  void test('PreferSameNode: zone and node hints written; the same plan again is empty; dropping the field removes them', () => {
    const s = svc({ trafficDistribution: 'PreferSameNode' });
    const first = planSlices({ service: s, networks: networks(s), pods, existing: [], zoneOf });
    const created = first.diff.create[0];
    assert.ok(created);
    assert.deepEqual(zonesOf(created.endpoints), [['a'], ['b']]);
    assert.deepEqual(nodesOf(created.endpoints), [['n1'], ['n2']]);
    const existing = [{ ...created, metadata: { ...created.metadata, name: 'web-abcde', resourceVersion: '1' } }];
    assert.ok(isEmptyDiff(planSlices({ service: s, networks: networks(s), pods, existing, zoneOf }).diff), 'converged');
    const plain = svc({});
    const again = planSlices({ service: plain, networks: networks(plain), pods, existing, zoneOf });
    assert.equal(again.diff.update.length, 1, 'hints removed by an update');
    assert.ok(again.diff.update[0]?.endpoints.every((e) => e.hints === undefined));
  });

  void test('Auto: hints with zone capacity and an Enabled Event; without Node information, none and a Disabled Event', () => {
    const s = svc({ annotations: { [TOPOLOGY_MODE_ANNOTATION]: 'Auto' } });
    const on = planSlices({ service: s, networks: networks(s), pods, existing: [], zoneOf, zoneCapacity: capacity({ a: 0.5, b: 0.5 }) });
    assert.deepEqual(zonesOf(on.diff.create[0]?.endpoints ?? []), [['a'], ['b']]);
    assert.deepEqual(
      on.hintEvents.map((h) => [h.network, h.event.reason]),
      [[MACVLAN, 'TopologyAwareHintsEnabled']],
    );
    const off = planSlices({ service: s, networks: networks(s), pods, existing: [], zoneOf });
    assert.ok(off.diff.create[0]?.endpoints.every((e) => e.hints === undefined));
    assert.deepEqual(
      off.hintEvents.map((h) => h.event.reason),
      ['TopologyAwareHintsDisabled'],
    );
  });
});
