/**
 * The sidecar runtime (cmd/sidecar/runtime.ts, in this process) against the real kube-apiserver, when
 * the pod's networks change while the first EndpointSlice list is still out: readiness must follow
 * the informer that replaced it, not wait for the stopped one (whose `synced` never resolves).
 * The first list of the old selector is held back by a gate on the client; everything else is the
 * real apiserver. The dataplane records the states it is given (what reaches iptables is covered
 * by runtime.test.ts; this is about which caches the sync waits on).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { interpose } from '../harness/interpose.js';
import { apiPath } from '../../src/kube/paths.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { V1Pod } from '../../src/kube/types.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';
import { networkLabelValue } from '../../src/annotations/network-label.js';
import { SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { createLogger } from '../../src/log.js';
import { prom } from '../../src/metrics.js';
import { createSidecarMetrics } from '../../cmd/sidecar/metrics.js';
import { createSidecarRuntime, type SidecarRuntime } from '../../cmd/sidecar/runtime.js';
import { recordingDataplane } from './recording-dataplane.js';
import { podObject, serviceObject, sliceObject } from './state-fixtures.js';

/** A client whose EndpointSlice lists with a selector containing `held` wait for `open()` (or their abort). */
function gatedClient(c: KubeClient, held: string): { client: KubeClient; heldLists: () => number; open: () => void } {
  let heldLists = 0;
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const client = interpose(c, {
    list: async (p, o) => {
      if (p.includes('/endpointslices') && (o?.labelSelector ?? '').includes(held)) {
        heldLists += 1;
        const signal = o?.signal;
        await new Promise<void>((resolve, reject) => {
          void gate.then(resolve);
          signal?.addEventListener('abort', () => reject(signal.reason instanceof Error ? signal.reason : new Error('aborted')), { once: true });
        });
      }
      return c.list(p, o);
    },
  });
  return { client, heldLists: () => heldLists, open };
}

void describe('sidecar runtime: networks changed during the first slice list', () => {
  let cp: ControlPlane;
  let ns = '';
  let rt: SidecarRuntime | undefined;
  let release: (() => void) | undefined;

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('rt-nets');
    await cp.createNamespace(ns);
  });

  after(async () => {
    release?.();
    await rt?.stop();
    await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
    await cp?.stop();
  });

  void test('readiness follows the informer that replaced the one still listing; the new networks are served', async () => {
    const status = [
      { name: `${ns}/net-a`, interface: 'net1', ips: ['192.0.2.10'] },
      { name: `${ns}/net-b`, interface: 'net2', ips: ['198.51.100.10'] },
    ];
    await cp.client.create(apiPath('', 'v1', 'pods', ns), podObject(ns, 'client', { serviceNetwork: 'net-a', status }));
    const svc = await cp.client.create<{ spec?: { clusterIP?: string } }>(apiPath('', 'v1', 'services', ns), serviceObject(ns, 'web-b', { networks: 'net-b', ports: [{ port: 80 }] }));
    await cp.client.create(
      apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns),
      sliceObject(ns, 'web-b-1', { service: 'web-b', network: `${ns}/net-b`, family: 4, ports: [{ port: 80 }], endpoints: [{ ip: '198.51.100.20', ready: true }] }),
    );

    const gated = gatedClient(cp.client, networkLabelValue({ namespace: ns, name: 'net-a' }));
    release = gated.open;
    const states: DesiredState[] = [];
    const dataplane = recordingDataplane(states);
    rt = createSidecarRuntime(
      { podName: 'client', podNamespace: ns, minSyncIntervalMs: 20, retryMinMs: 50, retryMaxMs: 500, stuckAfterMs: 60_000, informer: { minBackoffMs: 50, maxBackoffMs: 500 } },
      { client: gated.client, dataplane, log: createLogger('sidecar', 'silent'), metrics: createSidecarMetrics(new prom.Registry()) },
    );
    rt.start();
    await waitFor('the first slice list (net-a) is out', () => gated.heldLists() > 0, 10_000);
    assert.equal(rt.ready().ready, false);

    // The pod now serves net-b: the runtime starts a new slice informer and stops the one listing.
    const pod = await cp.client.get<V1Pod>(apiPath('', 'v1', 'pods', ns, 'client'));
    await cp.client.replace(apiPath('', 'v1', 'pods', ns, 'client'), {
      ...pod,
      metadata: { ...pod.metadata, annotations: { ...pod.metadata?.annotations, [SERVICE_NETWORK_ANNOTATION]: 'net-b' } },
    });
    await waitFor(
      'ready on the new networks while the old list is still held',
      () => rt!.ready().ready,
      10_000,
      () => JSON.stringify(rt!.ready()),
    );
    assert.equal(gated.heldLists(), 1, 'the old selector was listed once and never again');
    const last = states.at(-1);
    const target = last?.targets.find((t) => t.service === `${ns}/web-b`);
    assert.equal(target?.clusterIP, svc.spec?.clusterIP);
    assert.deepEqual(
      target?.endpoints.map((e) => e.ip),
      ['198.51.100.20'],
    );
  });
});
