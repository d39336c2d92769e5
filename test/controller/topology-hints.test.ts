/**
 * Topology hints on our slices, against a real kube-apiserver: what the controller writes is what
 * the API keeps (hints survive validation and the PreferSameNode feature gate of 1.34), for
 * trafficDistribution and for topology-mode Auto with its Event. Two Nodes of their own, in two
 * zones, Ready with allocatable CPU; they are deleted afterwards.
 */
import { test, describe, before, after } from 'node:test';
import { apiPath } from '../../src/kube/paths.js';
import type { V1EndpointSlice, V1Service } from '../../src/kube/types.js';
import type { RunningController } from '../../cmd/controller/run.js';
import { TOPOLOGY_MODE_ANNOTATION } from '../../cmd/controller/topology-hints.js';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { networkStatus } from '../unit/controller/fixtures.js';
import { createPod, createService, ourSlices, serviceEvents, startNamespacedController, svcPath } from './helpers.js';

void describe('topology hints on a real apiserver', () => {
  let cp: ControlPlane;
  let ns: string;
  let ctl: RunningController;
  const nodes: string[] = [];
  const zoneA = uniqueName('zone-a');
  const zoneB = uniqueName('zone-b');

  const hintsOf = (slices: readonly V1EndpointSlice[]): string[] =>
    slices
      .flatMap((s) => s.endpoints ?? [])
      .map(
        (e) =>
          `${e.addresses[0] ?? ''} zone=${e.zone ?? '-'} forZones=${(e.hints?.forZones ?? []).map((z) => z.name).join('+') || '-'} forNodes=${(e.hints?.forNodes ?? []).map((n) => n.name).join('+') || '-'}`,
      )
      .sort();
  const waitHints = async (svc: string, what: string, want: string[]): Promise<void> => {
    let last: string[] = [];
    await waitFor(
      `${svc}: ${what}`,
      async () => JSON.stringify((last = hintsOf(await ourSlices(cp.client, ns, svc)))) === JSON.stringify(want),
      15_000,
      () => JSON.stringify(last),
    );
  };
  const setService = async (name: string, change: (s: V1Service) => void): Promise<void> => {
    const s = await cp.client.get<V1Service>(svcPath(ns, name));
    change(s);
    await cp.client.replace(svcPath(ns, name), s);
  };

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('hints');
    await cp.createNamespace(ns);
    for (const [name, zone] of [
      [uniqueName('node-a'), zoneA],
      [uniqueName('node-b'), zoneB],
    ] as const) {
      await cp.client.create(apiPath('', 'v1', 'nodes'), { apiVersion: 'v1', kind: 'Node', metadata: { name, labels: { 'topology.kubernetes.io/zone': zone } } });
      nodes.push(name);
      const n = await cp.client.get<{ status?: unknown }>(apiPath('', 'v1', 'nodes', undefined, name));
      await cp.client.replace(apiPath('', 'v1', 'nodes', undefined, name) + '/status', {
        ...n,
        status: {
          allocatable: { cpu: '4', memory: '8Gi', pods: '110' },
          capacity: { cpu: '4', memory: '8Gi', pods: '110' },
          conditions: [{ type: 'Ready', status: 'True', reason: 'Test', message: 'test node' }],
        },
      });
    }
    ctl = await startNamespacedController(cp.connection, ns);
    const status = (ip: string): string => networkStatus([{ name: `${ns}/macvlan1`, ips: [ip] }]);
    await createPod(cp.client, ns, 'web-a1', { labels: { app: 'web' }, nodeName: nodes[0], status: status('10.2.0.1') });
    await createPod(cp.client, ns, 'web-a2', { labels: { app: 'web' }, nodeName: nodes[0], status: status('10.2.0.2') });
    await createPod(cp.client, ns, 'web-b1', { labels: { app: 'web' }, nodeName: nodes[1], status: status('10.2.0.3') });
    await createPod(cp.client, ns, 'web-b2', { labels: { app: 'web' }, nodeName: nodes[1], status: status('10.2.0.4') });
  });

  after(async () => {
    await ctl?.stop();
    await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
    for (const n of nodes) await cp?.client.delete(apiPath('', 'v1', 'nodes', undefined, n)).catch(() => undefined);
    await cp?.stop();
  });

  void test('trafficDistribution: PreferClose hints each endpoint for its zone, PreferSameNode adds its node, none removes them', async () => {
    const svc = 'close';
    await createService(cp.client, ns, svc, { network: 'macvlan1', selector: { app: 'web' } });
    const [na, nb] = nodes;
    const plain = [
      `10.2.0.1 zone=${zoneA} forZones=- forNodes=-`,
      `10.2.0.2 zone=${zoneA} forZones=- forNodes=-`,
      `10.2.0.3 zone=${zoneB} forZones=- forNodes=-`,
      `10.2.0.4 zone=${zoneB} forZones=- forNodes=-`,
    ];
    await waitHints(svc, 'published with zones, no hints', plain);

    await setService(svc, (s) => ((s.spec ??= {}).trafficDistribution = 'PreferClose'));
    await waitHints(svc, 'zone hints', [
      `10.2.0.1 zone=${zoneA} forZones=${zoneA} forNodes=-`,
      `10.2.0.2 zone=${zoneA} forZones=${zoneA} forNodes=-`,
      `10.2.0.3 zone=${zoneB} forZones=${zoneB} forNodes=-`,
      `10.2.0.4 zone=${zoneB} forZones=${zoneB} forNodes=-`,
    ]);

    await setService(svc, (s) => ((s.spec ??= {}).trafficDistribution = 'PreferSameNode'));
    await waitHints(svc, 'zone and node hints', [
      `10.2.0.1 zone=${zoneA} forZones=${zoneA} forNodes=${na}`,
      `10.2.0.2 zone=${zoneA} forZones=${zoneA} forNodes=${na}`,
      `10.2.0.3 zone=${zoneB} forZones=${zoneB} forNodes=${nb}`,
      `10.2.0.4 zone=${zoneB} forZones=${zoneB} forNodes=${nb}`,
    ]);

    await setService(svc, (s) => delete (s.spec ??= {}).trafficDistribution);
    await waitHints(svc, 'hints removed', plain);
  });

  void test('topology-mode Auto: hints by zone CPU share and a TopologyAwareHintsEnabled Event', async () => {
    const svc = 'auto';
    await createService(cp.client, ns, svc, { network: 'macvlan1', selector: { app: 'web' } });
    await setService(svc, (s) => ((s.metadata ??= {}).annotations = { ...s.metadata.annotations, [TOPOLOGY_MODE_ANNOTATION]: 'Auto' }));
    // This test's two Nodes hold equal CPU; other tests' Nodes on the shared plane are not Ready
    // and so not counted, as upstream does.
    await waitHints(svc, 'zone hints', [
      `10.2.0.1 zone=${zoneA} forZones=${zoneA} forNodes=-`,
      `10.2.0.2 zone=${zoneA} forZones=${zoneA} forNodes=-`,
      `10.2.0.3 zone=${zoneB} forZones=${zoneB} forNodes=-`,
      `10.2.0.4 zone=${zoneB} forZones=${zoneB} forNodes=-`,
    ]);
    await waitFor('Enabled Event', async () => (await serviceEvents(cp.client, ns, svc)).some((e) => e.reason === 'TopologyAwareHintsEnabled' && e.type === 'Normal'));
  });
});
