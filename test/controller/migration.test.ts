/**
 * Migration from multus-service on a real kube-apiserver: its EndpointSlices
 * (managed-by multus-endpointslice-controller.npwg.k8s.io) of a Service this controller serves are
 * deleted, with one Event per Service; those of Services it does not serve are left alone; the
 * flag turns it off. Each controller watches only its own namespace of the shared control plane.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { createKubeClient } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { CoreV1Event, V1EndpointSlice } from '../../src/kube/types.js';
import { createLogger } from '../../src/log.js';
import { parseOptions } from '../../cmd/controller/options.js';
import { startController, type RunningController } from '../../cmd/controller/run.js';
import { MANAGED_BY_LABEL, SERVICE_NAME_LABEL } from '../../src/keys.js';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { networkStatus } from '../unit/controller/fixtures.js';
import { createPod, createService, ourSlices, serviceEvents, sliceAddresses, slicePath, svcPath } from './helpers.js';

const LEGACY = 'multus-endpointslice-controller.npwg.k8s.io';

let cp: ControlPlane;
const running: RunningController[] = [];

async function start(ns: string, extra: string[] = []): Promise<RunningController> {
  const r = parseOptions(
    ['--health-port', '0', '--health-host', '127.0.0.1', '--leader-elect', 'false', '--resync', '0', '--manage-sidecar-rbac', 'false', '--netservices', 'false', '--namespace', ns, ...extra],
    {},
  );
  if (!r.ok || r.value === 'help') throw new Error('bad options');
  const ctl = await startController(createKubeClient(cp.connection), r.value, createLogger('controller', process.env['LOG_LEVEL'] ?? 'warn'));
  running.push(ctl);
  await waitFor('controller ready', () => ctl.isReady());
  return ctl;
}

/** A slice as multus-service wrote them: its managed-by label, the Service's name, secondary addresses. */
async function legacySlice(ns: string, service: string, ip: string): Promise<string> {
  const s = await cp.client.create<V1EndpointSlice>(slicePath(ns), {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { generateName: `${service}-`, labels: { [MANAGED_BY_LABEL]: LEGACY, [SERVICE_NAME_LABEL]: service } },
    addressType: 'IPv4',
    endpoints: [{ addresses: [ip], conditions: { ready: true } }],
    ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
  });
  return s.metadata?.name ?? '';
}

async function legacyNames(ns: string): Promise<string[]> {
  const list = await cp.client.list<V1EndpointSlice>(slicePath(ns), { labelSelector: `${MANAGED_BY_LABEL}=${LEGACY}` });
  return list.items.map((s) => s.metadata?.name ?? '').sort();
}

async function setup(ns: string): Promise<void> {
  await cp.createNamespace(ns);
  await cp.client.create(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', ns), {
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    metadata: { name: 'macvlan1', namespace: ns },
    spec: { config: '{"cniVersion":"0.3.1","type":"macvlan"}' },
  });
  await createPod(cp.client, ns, 'nginx-a', { labels: { app: 'nginx' }, status: networkStatus([{ name: `${ns}/macvlan1`, ips: ['10.2.128.10'] }]) });
  await createService(cp.client, ns, 'served', { network: 'macvlan1', selector: { app: 'nginx' } });
  // A Service multus-proxy does not serve (no service-network annotation): its slices are not ours to judge.
  await cp.client.create(svcPath(ns), { apiVersion: 'v1', kind: 'Service', metadata: { name: 'plain' }, spec: { selector: { app: 'nginx' }, ports: [{ port: 80 }] } });
}

before(async () => {
  cp = await useControlPlane();
});

after(async () => {
  for (const c of running) await c.stop();
  await cp?.stop();
});

void describe('migration from multus-service', () => {
  void test('stale multus-service slices of a served Service are deleted, one Event; others are left; only ours remain', async () => {
    const ns = uniqueName('migrate');
    await setup(ns);
    const stale = [await legacySlice(ns, 'served', '10.2.128.99'), await legacySlice(ns, 'served', '10.2.128.98')];
    const plain = await legacySlice(ns, 'plain', '10.2.128.97');
    const orphan = await legacySlice(ns, 'gone', '10.2.128.96');
    assert.deepEqual(await legacyNames(ns), [...stale, plain, orphan].sort());

    await start(ns);
    await waitFor("the served Service's legacy slices deleted", async () => (await legacyNames(ns)).join() === [plain, orphan].sort().join());
    await waitFor('our slice published', async () => sliceAddresses(await ourSlices(cp.client, ns, 'served')).join() === '10.2.128.10');
    const all = await cp.client.list<V1EndpointSlice>(slicePath(ns), { labelSelector: `${SERVICE_NAME_LABEL}=served` });
    assert.deepEqual(
      all.items.map((s) => s.metadata?.labels?.[MANAGED_BY_LABEL]),
      ['multus-proxy-controller'],
      'only ours remain for the Service',
    );

    let events: CoreV1Event[] = [];
    await waitFor('the migration Event', async () => (events = (await serviceEvents(cp.client, ns, 'served')).filter((e) => e.reason === 'MultusServiceSlicesRemoved')).length > 0);
    assert.equal(events.length, 1);
    assert.equal(events[0]?.type, 'Normal');
    assert.equal(
      events[0]?.message,
      `Service ${ns}/served: deleted 2 EndpointSlices left by multus-service (endpointslice.kubernetes.io/managed-by=${LEGACY}): ${[...stale].sort().join(', ')}; multus-proxy publishes this Service's endpoints now`,
    );

    // A still-running multus-service writing again: deleted again, and no second Event within the interval.
    const again = await legacySlice(ns, 'served', '10.2.128.95');
    await waitFor('the new stale slice deleted', async () => !(await legacyNames(ns)).includes(again));
    await sleep(300);
    assert.equal((await serviceEvents(cp.client, ns, 'served')).filter((e) => e.reason === 'MultusServiceSlicesRemoved').length, 1);
  });

  void test('--remove-multus-service-slices=false leaves them', async () => {
    const ns = uniqueName('migrate-off');
    await setup(ns);
    const stale = await legacySlice(ns, 'served', '10.2.128.99');
    await start(ns, ['--remove-multus-service-slices', 'false']);
    await waitFor('our slice published', async () => sliceAddresses(await ourSlices(cp.client, ns, 'served')).join() === '10.2.128.10');
    await sleep(500);
    assert.deepEqual(await legacyNames(ns), [stale]);
    assert.equal((await serviceEvents(cp.client, ns, 'served')).filter((e) => e.reason === 'MultusServiceSlicesRemoved').length, 0);
  });
});
