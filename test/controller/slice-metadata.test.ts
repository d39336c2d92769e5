/**
 * What our EndpointSlices carry besides endpoints, as Kubernetes' EndpointSlice controller writes
 * them: the last-change-trigger-time annotation (read by the sidecar's
 * trigger_to_rules_seconds), the Service's labels (its service-proxy-name among them) and the
 * headless label, so kube-proxy's slice watch never receives ours; no new slice for a Service
 * being deleted; slices written before these labels existed are updated in place. Real apiserver;
 * the controller watches only this file's namespace.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { apiPath } from '../../src/kube/paths.js';
import type { V1EndpointSlice, V1Pod, V1Service } from '../../src/kube/types.js';
import { LAST_CHANGE_TRIGGER_TIME_ANNOTATION, MANAGED_BY, MANAGED_BY_LABEL, NETWORK_LABEL, PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import type { RunningController } from '../../cmd/controller/run.js';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { networkStatus, service as serviceFixture } from '../unit/controller/fixtures.js';
import { createPod, createService, startNamespacedController, ourSlices, podPath, sliceAddresses, slicePath, svcPath } from './helpers.js';

/** kube-proxy's own selector for its EndpointSlice list and watch (pkg/proxy, since 1.19). */
const KUBE_PROXY_SELECTOR = '!service.kubernetes.io/service-proxy-name,!service.kubernetes.io/headless';
const HEADLESS_LABEL = 'service.kubernetes.io/headless';

const ms = (t: unknown): number => Date.parse(String(t));

void describe('EndpointSlice labels and annotations as upstream writes them', () => {
  let cp: ControlPlane;
  let ns: string;
  let ctl: RunningController;
  const status = (ips: string[]): string => networkStatus([{ name: `${ns}/macvlan1`, ips }]);
  const waitSlices = async (svc: string, what: string, check: (s: V1EndpointSlice[]) => boolean): Promise<V1EndpointSlice[]> => {
    let last: V1EndpointSlice[] = [];
    await waitFor(
      `${svc}: ${what}`,
      async () => check((last = await ourSlices(cp.client, ns, svc))),
      15_000,
      () => JSON.stringify(last.map((s) => ({ name: s.metadata?.name, labels: s.metadata?.labels, annotations: s.metadata?.annotations, addresses: sliceAddresses([s]) }))).slice(0, 1500),
    );
    return last;
  };
  const trigger = (s: V1EndpointSlice | undefined): string | undefined => s?.metadata?.annotations?.[LAST_CHANGE_TRIGGER_TIME_ANNOTATION];

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('meta');
    await cp.createNamespace(ns);
    ctl = await startNamespacedController(cp.connection, ns);
  });

  after(async () => {
    await ctl?.stop();
    await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
    await cp?.stop();
  });

  void test("last-change-trigger-time: the Service creation, then the new pod's Ready transition on a scale-up", async () => {
    const svc = 'trig';
    await createPod(cp.client, ns, 'trig-a', { labels: { app: 'trig' }, status: status(['10.2.140.1']) });
    // Timestamps have second precision: the Service is created in a later second than the pod's Ready.
    await sleep(1100);
    const created = await createService(cp.client, ns, svc, { network: 'macvlan1', selector: { app: 'trig' } });
    let slices = await waitSlices(svc, 'published with a trigger time', (l) => sliceAddresses(l).join() === '10.2.140.1' && trigger(l[0]) !== undefined);
    // A new Service over a running pod: its creation is the change behind the write (upstream's rule).
    assert.equal(ms(trigger(slices[0])), ms(created.metadata?.creationTimestamp), `trigger ${trigger(slices[0])} vs creation ${String(created.metadata?.creationTimestamp)}`);
    const name = slices[0]?.metadata?.name;

    await sleep(1100);
    await createPod(cp.client, ns, 'trig-b', { labels: { app: 'trig' }, status: status(['10.2.140.2']) });
    const pod = await cp.client.get<V1Pod>(podPath(ns, 'trig-b'));
    const readyAt = ms(pod.status?.conditions?.find((c) => c.type === 'Ready')?.lastTransitionTime);
    assert.ok(Number.isFinite(readyAt));
    slices = await waitSlices(
      svc,
      "scale-up written with the new pod's Ready time",
      (l) => sliceAddresses(l).join() === '10.2.140.1,10.2.140.2' && l[0]?.endpoints.every((e) => e.conditions?.ready === true) === true && ms(trigger(l[0])) === readyAt,
    );
    assert.equal(slices[0]?.metadata?.name, name, 'updated in place');
    assert.ok(ms(trigger(slices[0])) > ms(created.metadata?.creationTimestamp));
  });

  void test("service-proxy-name and headless labels: kube-proxy's selector lists none of our slices", async () => {
    await createPod(cp.client, ns, 'kp-a', { labels: { app: 'kp' }, status: status(['10.2.141.1']) });
    await createService(cp.client, ns, 'kp', { network: 'macvlan1', selector: { app: 'kp' } });
    await createService(cp.client, ns, 'kp-headless', { network: 'macvlan1', selector: { app: 'kp' }, headless: true });
    const plain = await waitSlices('kp', 'published', (l) => l.length === 1);
    assert.equal(plain[0]?.metadata?.labels?.[PROXY_NAME_LABEL], PROXY_NAME, 'copied from the Service');
    assert.equal(plain[0]?.metadata?.labels?.[HEADLESS_LABEL], undefined, 'a ClusterIP Service is not headless');
    const headless = await waitSlices('kp-headless', 'published', (l) => l.length === 1);
    assert.equal(headless[0]?.metadata?.labels?.[HEADLESS_LABEL], '');
    assert.equal(headless[0]?.metadata?.labels?.[PROXY_NAME_LABEL], PROXY_NAME);
    const seen = await cp.client.list<V1EndpointSlice>(slicePath(ns), { labelSelector: KUBE_PROXY_SELECTOR });
    const ours = seen.items.filter((s) => s.metadata?.labels?.[MANAGED_BY_LABEL] === MANAGED_BY);
    assert.deepEqual(
      ours.map((s) => s.metadata?.name),
      [],
      "kube-proxy's selector lists none of ours",
    );
  });

  void test("the Service's own labels are copied, reserved keys aside, and follow its changes in place", async () => {
    const svc = 'lbl';
    await createPod(cp.client, ns, 'lbl-a', { labels: { app: 'lbl' }, status: status(['10.2.142.1']) });
    const s = serviceFixture(svc, { namespace: ns, network: 'macvlan1', selector: { app: 'lbl' } });
    if (s.metadata) {
      delete s.metadata.uid;
      s.metadata.labels = { ...s.metadata.labels, team: 'blue', tier: 'db', [SERVICE_NAME_LABEL]: 'other', [MANAGED_BY_LABEL]: 'someone', [NETWORK_LABEL]: 'x', [HEADLESS_LABEL]: 'x' };
    }
    await cp.client.create(svcPath(ns), s);
    let slices = await waitSlices(svc, 'the Service labels', (l) => l[0]?.metadata?.labels?.['team'] === 'blue');
    const name = slices[0]?.metadata?.name;
    assert.deepEqual(slices[0]?.metadata?.labels, {
      team: 'blue',
      tier: 'db',
      [PROXY_NAME_LABEL]: PROXY_NAME,
      [SERVICE_NAME_LABEL]: svc,
      [MANAGED_BY_LABEL]: MANAGED_BY,
      [NETWORK_LABEL]: `${ns}.macvlan1`,
    });

    await cp.client.patch(svcPath(ns, svc), { metadata: { labels: { team: 'green', tier: null } } }, 'merge');
    slices = await waitSlices(svc, 'the changed labels', (l) => l[0]?.metadata?.labels?.['team'] === 'green' && l[0]?.metadata?.labels?.['tier'] === undefined);
    assert.equal(slices[0]?.metadata?.name, name, 'updated in place');
    assert.deepEqual(sliceAddresses(slices), ['10.2.142.1']);
  });

  void test('a Service being deleted gets no new slices; one that is not does', async () => {
    const hold = 'test.multus-proxy/hold';
    const mk = async (name: string): Promise<V1Service> => {
      const s = serviceFixture(name, { namespace: ns, network: 'macvlan1', selector: { app: name } });
      if (s.metadata) {
        delete s.metadata.uid;
        s.metadata.finalizers = [hold];
      }
      return cp.client.create<V1Service>(svcPath(ns), s);
    };
    await mk('going');
    await mk('staying');
    await cp.client.delete(svcPath(ns, 'going'));
    const going = await cp.client.get<V1Service>(svcPath(ns, 'going'));
    assert.ok(going.metadata?.deletionTimestamp, 'held by its finalizer');
    try {
      await createPod(cp.client, ns, 'going-a', { labels: { app: 'going' }, status: status(['10.2.143.1']) });
      await createPod(cp.client, ns, 'staying-a', { labels: { app: 'staying' }, status: status(['10.2.143.2']) });
      await waitSlices('staying', 'the control Service published', (l) => sliceAddresses(l).join() === '10.2.143.2');
      // Both pods arrived in the same informer stream; give the other key the same time again.
      await sleep(2000);
      assert.deepEqual(await ourSlices(cp.client, ns, 'going'), [], 'no slice for a Service being deleted');
    } finally {
      for (const name of ['going', 'staying']) await cp.client.patch(svcPath(ns, name), [{ op: 'remove', path: '/metadata/finalizers' }], 'json');
    }
  });

  void test('a slice the old controller wrote (no Service labels) gets them in place, endpoints kept', async () => {
    const svc = 'old';
    await createPod(cp.client, ns, 'old-a', { labels: { app: 'old' }, status: status(['10.2.144.1']) });
    const created = await createService(cp.client, ns, svc, { network: 'macvlan1', selector: { app: 'old' } });
    const first = await waitSlices(svc, 'published', (l) => l.length === 1);
    const current = first[0];
    assert.ok(current);
    // As the controller an older controller wrote it: its three labels and the network annotation only.
    const oldStyle: V1EndpointSlice = {
      ...current,
      metadata: {
        ...current.metadata,
        managedFields: undefined,
        labels: { [SERVICE_NAME_LABEL]: svc, [MANAGED_BY_LABEL]: MANAGED_BY, [NETWORK_LABEL]: `${ns}.macvlan1` },
        annotations: { [SERVICE_NETWORK_ANNOTATION]: `${ns}/macvlan1` },
      },
    };
    const written = await cp.client.replace<V1EndpointSlice>(slicePath(ns, current.metadata?.name), oldStyle);
    const slices = await waitSlices(svc, 'the labels restored', (l) => l[0]?.metadata?.labels?.[PROXY_NAME_LABEL] === PROXY_NAME);
    assert.equal(slices.length, 1);
    assert.equal(slices[0]?.metadata?.name, current.metadata?.name, 'same slice, not recreated');
    assert.equal(slices[0]?.metadata?.uid, current.metadata?.uid);
    assert.ok(Number(slices[0]?.metadata?.resourceVersion) > Number(written.metadata?.resourceVersion));
    assert.deepEqual(sliceAddresses(slices), ['10.2.144.1']);
    assert.equal(slices[0]?.metadata?.ownerReferences?.[0]?.uid, created.metadata?.uid);
  });
});
