/**
 * A namespace tenant's objects against the controller on a real apiserver, with no webhook in the
 * way (objects written while it was down, or that never reach it): a Service being deleted,
 * re-annotated to a NAD that is not shared, gets no slice; a Service naming 30,000 networks is
 * refused whole with one Event, and so is a label-only Service whose labels total 1 MiB; and 30,000 Event-worthy problems cost a bounded number of writes.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { createKubeClient } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { CoreV1Event, V1Service } from '../../src/kube/types.js';
import { createLogger } from '../../src/log.js';
import type { RunningController } from '../../cmd/controller/run.js';
import { createEventRecorder } from '../../cmd/controller/events.js';
import { COMBINED_PREFIX, DEFAULT_MAX_PENDING_EVENTS } from '../../src/kube/event-queue.js';
import { SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { networkStatus, service as serviceFixture } from '../unit/controller/fixtures.js';
import { createPod, createService, ourSlices, serviceEvents, startNamespacedController, svcPath } from './helpers.js';

const NADS = (ns: string): string => apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', ns);

void describe('controller: a tenant object costs a bounded amount and is never served where it may not be', () => {
  let cp: ControlPlane;
  let ns: string;
  let victim: string;
  let ctl: RunningController;

  const nad = (namespace: string, name: string) => ({
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    metadata: { name, namespace },
    spec: { config: JSON.stringify({ cniVersion: '0.3.1', type: 'macvlan', master: 'eth1', ipam: { type: 'static' } }) },
  });

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('aaa-tenant');
    victim = uniqueName('victim');
    await cp.createNamespace(ns);
    await cp.createNamespace(victim);
    await cp.client.create(NADS(ns), nad(ns, 'own'));
    await cp.client.create(NADS(victim), nad(victim, 'net'));
    ctl = await startNamespacedController(cp.connection, ns);
  });

  after(async () => {
    await ctl?.stop();
    for (const n of [ns, victim]) await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, n));
    await cp?.stop();
  });

  void test('a Service being deleted, kept by its own finalizer and re-annotated to an unshared NAD, gets no slice there, and loses its own', async () => {
    const svc = 'kept';
    await createPod(cp.client, ns, 'kept-a', {
      labels: { app: 'kept' },
      status: networkStatus([
        { name: `${ns}/own`, ips: ['10.9.1.1'] },
        { name: `${victim}/net`, ips: ['192.168.9.1'] },
      ]),
    });
    const s = serviceFixture(svc, { namespace: ns, network: 'own', selector: { app: 'kept' } });
    if (s.metadata) {
      delete s.metadata.uid;
      s.metadata.finalizers = ['example.com/keep'];
    }
    await cp.client.create(svcPath(ns), s);
    await waitFor('its own slice', async () => (await ourSlices(cp.client, ns, svc)).length === 1);
    await cp.client.delete(svcPath(ns, svc));
    assert.ok((await cp.client.get<V1Service>(svcPath(ns, svc))).metadata?.deletionTimestamp, 'kept alive by its finalizer');
    await cp.client.patch(svcPath(ns, svc), { metadata: { annotations: { [SERVICE_NETWORK_ANNOTATION]: `${victim}/net` } } }, 'merge');
    await waitFor('NetworkNotShared Event', async () => (await serviceEvents(cp.client, ns, svc)).some((e) => e.reason === 'NetworkNotShared' && (e.message ?? '').includes(`${victim}/net`)));
    await waitFor('its slice on its own network removed', async () => (await ourSlices(cp.client, ns, svc)).length === 0);
    // A while later still nothing: the controller never writes a slice on the victim's network.
    await sleep(1000);
    assert.deepEqual(await ourSlices(cp.client, ns, svc), []);
    await cp.client.patch(svcPath(ns, svc), { metadata: { finalizers: null } }, 'merge');
  });

  void test('a Service that carries only the proxy-name label gets no slice', async () => {
    const svc = 'label-only';
    await createPod(cp.client, ns, 'label-only-a', { labels: { app: 'label-only' }, status: networkStatus([{ name: `${victim}/net`, ips: ['192.168.9.2'] }]) });
    await createService(cp.client, ns, svc, { selector: { app: 'label-only' } });
    await sleep(1000);
    assert.deepEqual(await ourSlices(cp.client, ns, svc), []);
  });

  void test('a label-only Service whose labels total 1 MiB: refused with one OverBudget Event naming it and the metric, no slice', async () => {
    const svc = 'label-only-big';
    await createPod(cp.client, ns, 'label-only-big-a', { labels: { app: 'label-only-big' }, status: networkStatus([{ name: `${ns}/own`, ips: ['10.9.1.4'] }]) });
    // 15,000 labels of ~70 bytes: 1 MiB, which the apiserver accepts (labels have no total bound).
    const labels = Object.fromEntries(Array.from({ length: 15_000 }, (_, i) => [`l${i.toString(36)}`, 'v'.repeat(63)]));
    const s = serviceFixture(svc, { namespace: ns, selector: { app: 'label-only-big' } });
    if (s.metadata) {
      delete s.metadata.uid;
      s.metadata.labels = { ...s.metadata.labels, ...labels };
    }
    assert.ok(JSON.stringify(s.metadata?.labels).length > 1024 * 1024, 'the labels total 1 MiB');
    assert.equal(s.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION], undefined, 'no service-network annotation: label only');
    await cp.client.create(svcPath(ns), s);
    await waitFor('OverBudget Event', async () => (await serviceEvents(cp.client, ns, svc)).some((e) => e.reason === 'OverBudget'));
    const events: CoreV1Event[] = await serviceEvents(cp.client, ns, svc);
    assert.equal(events.length, 1, `one Event, got ${events.map((e) => e.reason).join(', ')}`);
    assert.equal(events[0]?.type, 'Warning');
    assert.match(events[0]?.message ?? '', new RegExp(`^Service ${ns}/${svc}: its labels, annotations, ports and selector come to \\d+ bytes, more than the 65536`));
    assert.deepEqual(await ourSlices(cp.client, ns, svc), []);
    const metrics = await (await fetch(`http://127.0.0.1:${ctl.health.port}/metrics`)).text();
    assert.match(metrics, /multus_proxy_controller_objects_refused_total\{budget="bytes"\} 1\b/);
  });

  void test('30,000 networks named by one Service: refused whole, with one OverBudget Event and the metric, never one Event per name', async () => {
    const svc = 'many';
    await createPod(cp.client, ns, 'many-a', { labels: { app: 'many' }, status: networkStatus([{ name: `${ns}/own`, ips: ['10.9.1.3'] }]) });
    const names = ['own', ...Array.from({ length: 29_999 }, (_, i) => `v/${i.toString(36)}`)].join(',');
    await createService(cp.client, ns, svc, { network: names, selector: { app: 'many' } });
    await waitFor('OverBudget Event', async () => (await serviceEvents(cp.client, ns, svc)).some((e) => e.reason === 'OverBudget'));
    await sleep(1500);
    const events: CoreV1Event[] = await serviceEvents(cp.client, ns, svc);
    assert.equal(events.length, 1, `one Event, got ${events.map((e) => e.reason).join(', ')}`);
    assert.match(events[0]?.message ?? '', /names 30000 networks, more than the 32 one Service may name; name at most 32/);
    assert.deepEqual(await ourSlices(cp.client, ns, svc), [], 'not even its own network is served: never half');
    const metrics = await (await fetch(`http://127.0.0.1:${ctl.health.port}/metrics`)).text();
    assert.match(metrics, /multus_proxy_controller_objects_refused_total\{budget="networks"\} 1\b/);
  });

  void test('30,000 Event-worthy problems make a bounded number of Event writes: combined per object, dropped past the queue', async () => {
    const client = createKubeClient(cp.connection);
    const dropped: string[] = [];
    const recorder = createEventRecorder(client, { intervalMs: 600_000, instance: 'test', logger: createLogger('events', 'silent'), onDrop: (why) => dropped.push(why) });
    const one = serviceFixture('noisy', { namespace: ns });
    // One object, 30,000 different problems: ten are written as they are, the rest as one combined Event.
    for (let i = 0; i < 30_000; i++) recorder.warn(one, `pod-${i}`, 'NetworkNotAttached', `Pod ${ns}/pod-${i}: not attached`);
    await recorder.queue.idle();
    const writesOne = client.requestCount()['create'] ?? 0;
    const noisy = await serviceEvents(cp.client, ns, 'noisy');
    assert.equal(noisy.length, writesOne);
    assert.ok(writesOne <= 25, `at most the spam filter's burst, got ${writesOne}`);
    assert.ok(
      noisy.some((e) => (e.message ?? '').startsWith(COMBINED_PREFIX)),
      'the similar ones are combined',
    );
    // 30,000 objects with one problem each: no more than the queue holds are written.
    for (let i = 0; i < 30_000; i++) recorder.warn(serviceFixture(`s${i}`, { namespace: ns }), 'x', 'NetworkNotShared', `Service ${ns}/s${i}: not shared`);
    await recorder.queue.idle();
    const writesMany = (client.requestCount()['create'] ?? 0) - writesOne;
    assert.ok(writesMany <= DEFAULT_MAX_PENDING_EVENTS, `at most the queue's bound, got ${writesMany}`);
    assert.ok(dropped.filter((d) => d === 'full').length >= 30_000 - DEFAULT_MAX_PENDING_EVENTS);
  });
});
