/**
 * The controller against a real kube-apiserver (the suite's shared control plane), started in
 * process with its own client so its API writes can be counted. It watches only this file's
 * namespace, so other tests' objects on the shared plane cannot disturb it.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { createKubeClient } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1EndpointSlice, V1Pod } from '../../src/kube/types.js';
import { createLogger } from '../../src/log.js';
import { parseOptions, type ControllerOptions } from '../../cmd/controller/options.js';
import { startController, type RunningController } from '../../cmd/controller/run.js';
import { MANAGED_BY, MANAGED_BY_LABEL, NETWORK_LABEL, SERVICE_NAME_LABEL, SERVICE_NAMESPACES_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { networkStatus } from '../unit/controller/fixtures.js';
import { createPod, createService, ourSlices, podPath, serviceEvents, setPodStatus, sliceAddresses, slicePath, svcPath, writeCount } from './helpers.js';

function options(extra: string[]): ControllerOptions {
  const r = parseOptions(['--health-port', '0', '--health-host', '127.0.0.1', '--leader-elect', 'false', '--resync', '0', '--manage-sidecar-rbac', 'false', ...extra], {});
  if (!r.ok || r.value === 'help') throw new Error(`bad test options: ${r.ok ? 'help' : r.error}`);
  return r.value;
}

void describe('controller on a real apiserver', () => {
  let cp: ControlPlane;
  let ns: string;
  let ctl: RunningController;
  const status = (ips: string[], net = 'macvlan1'): string => networkStatus([{ name: `${ns}/${net}`, ips }]);
  const waitSlices = async (svc: string, what: string, check: (s: V1EndpointSlice[]) => boolean, timeoutMs = 15_000): Promise<V1EndpointSlice[]> => {
    let last: V1EndpointSlice[] = [];
    await waitFor(
      `${svc}: ${what}`,
      async () => check((last = await ourSlices(cp.client, ns, svc))),
      timeoutMs,
      () => JSON.stringify(last.map((s) => ({ type: s.addressType, ports: s.ports, endpoints: s.endpoints }))).slice(0, 1500),
    );
    return last;
  };

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('ctl');
    await cp.createNamespace(ns);
    await cp.client.create(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name: 'macvlan1', namespace: ns },
      spec: { config: JSON.stringify({ cniVersion: '0.3.1', type: 'macvlan', master: 'eth1', ipam: { type: 'static' } }) },
    });
    // Its own client, so requestCount() counts only the controller's requests.
    ctl = await startController(createKubeClient(cp.connection), options(['--namespace', ns, '--event-interval', '10m']), createLogger('controller', process.env['LOG_LEVEL'] ?? 'warn'));
    await waitFor('controller ready', () => ctl.isReady());
  });

  after(async () => {
    await ctl?.stop();
    await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
    await cp?.stop();
  });

  void test('readiness and metrics are served', async () => {
    const ready = await fetch(`http://127.0.0.1:${ctl.health.port}/readyz`);
    assert.equal(ready.status, 200);
    const metrics = await (await fetch(`http://127.0.0.1:${ctl.health.port}/metrics`)).text();
    assert.match(metrics, /multus_proxy_controller_queue_depth/);
  });

  void test('blog scenario: secondary IPs published, unready, pod deleted, Service deleted', async () => {
    const svc = 'multus-nginx-macvlan';
    await createPod(cp.client, ns, 'nginx-a', { labels: { app: 'nginx' }, status: status(['10.2.128.10']) });
    await createPod(cp.client, ns, 'nginx-b', { labels: { app: 'nginx' }, status: status(['10.2.128.11']) });
    const created = await createService(cp.client, ns, svc, { network: 'macvlan1', selector: { app: 'nginx' } });

    let slices = await waitSlices(svc, 'both secondary IPs', (s) => sliceAddresses(s).join() === '10.2.128.10,10.2.128.11');
    assert.equal(slices.length, 1);
    const s = slices[0];
    assert.ok(s);
    assert.equal(s.addressType, 'IPv4');
    assert.deepEqual(s.ports, [{ name: 'http', port: 80, protocol: 'TCP' }]);
    assert.equal(s.metadata?.labels?.[SERVICE_NAME_LABEL], svc);
    assert.equal(s.metadata?.labels?.[MANAGED_BY_LABEL], MANAGED_BY);
    assert.equal(s.metadata?.labels?.[NETWORK_LABEL], `${ns}.macvlan1`);
    assert.equal(s.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION], `${ns}/macvlan1`);
    assert.equal(s.metadata?.ownerReferences?.[0]?.uid, created.metadata?.uid);
    assert.equal(s.metadata?.ownerReferences?.[0]?.controller, true);
    assert.ok(s.endpoints.every((e) => e.conditions?.ready === true && e.conditions.serving === true && e.conditions.terminating === false));
    assert.ok(s.metadata?.name?.startsWith(`${svc}-`));

    await setPodStatus(cp.client, ns, 'nginx-a', { ready: false });
    slices = await waitSlices(svc, 'nginx-a not ready', (l) => l[0]?.endpoints.find((e) => e.targetRef?.name === 'nginx-a')?.conditions?.ready === false);
    assert.equal(slices[0]?.metadata?.name, s.metadata?.name, 'updated in place, not recreated');
    assert.equal(slices[0]?.endpoints.find((e) => e.targetRef?.name === 'nginx-b')?.conditions?.ready, true);

    await cp.client.delete(podPath(ns, 'nginx-a'));
    slices = await waitSlices(svc, 'nginx-a gone', (l) => sliceAddresses(l).join() === '10.2.128.11');
    assert.equal(slices[0]?.metadata?.name, s.metadata?.name);

    await cp.client.delete(svcPath(ns, svc));
    await waitSlices(svc, 'all slices deleted', (l) => l.length === 0);
  });

  void test('terminating pod: ready false, serving true, terminating true', async () => {
    const svc = 'term';
    await createPod(cp.client, ns, 'term-a', { labels: { app: 'term' }, status: status(['10.2.130.1']), finalizers: ['test.multus-proxy/hold'] });
    await createService(cp.client, ns, svc, { network: 'macvlan1', selector: { app: 'term' } });
    await waitSlices(svc, 'published', (l) => sliceAddresses(l).join() === '10.2.130.1');
    await cp.client.delete(podPath(ns, 'term-a'));
    const slices = await waitSlices(svc, 'terminating', (l) => l[0]?.endpoints[0]?.conditions?.terminating === true);
    assert.deepEqual(slices[0]?.endpoints[0]?.conditions, { ready: false, serving: true, terminating: true });
    await cp.client.patch(podPath(ns, 'term-a'), [{ op: 'remove', path: '/metadata/finalizers' }], 'json');
    await waitSlices(svc, 'gone with the pod', (l) => l.length === 0);
  });

  void test('dual-stack network-status: one IPv4 and one IPv6 slice', async () => {
    const svc = 'dual';
    await createPod(cp.client, ns, 'dual-a', { labels: { app: 'dual' }, status: status(['10.2.131.1', 'fd00:2:131::1']) });
    await createService(cp.client, ns, svc, { network: 'macvlan1', selector: { app: 'dual' } });
    const slices = await waitSlices(svc, 'two families', (l) => l.length === 2);
    assert.deepEqual(slices.map((s) => s.addressType).sort(), ['IPv4', 'IPv6']);
    assert.deepEqual(sliceAddresses(slices, 'IPv4'), ['10.2.131.1']);
    assert.deepEqual(sliceAddresses(slices, 'IPv6'), ['fd00:2:131::1']);
  });

  void test('named targetPort resolved per pod, UDP and appProtocol carried', async () => {
    const svc = 'named';
    await createPod(cp.client, ns, 'named-a', { labels: { app: 'named' }, status: status(['10.2.132.1']), containerPorts: [{ name: 'web', containerPort: 8080 }] });
    await createPod(cp.client, ns, 'named-b', { labels: { app: 'named' }, status: status(['10.2.132.2']) });
    await createService(cp.client, ns, svc, {
      network: 'macvlan1',
      selector: { app: 'named' },
      ports: [
        { name: 'http', port: 80, targetPort: 'web', protocol: 'TCP' },
        { name: 'dns', port: 53, targetPort: 5353, protocol: 'UDP', appProtocol: 'dns' },
      ],
    });
    const slices = await waitSlices(svc, 'two port groups', (l) => l.length === 2);
    const of = (ip: string): V1EndpointSlice | undefined => slices.find((s) => s.endpoints.some((e) => e.addresses.includes(ip)));
    const portsOf = (ip: string): string[] => (of(ip)?.ports ?? []).map((p) => `${p.name}/${p.protocol}/${p.port}/${p.appProtocol ?? '-'}`).sort();
    assert.deepEqual(portsOf('10.2.132.1'), ['dns/UDP/5353/dns', 'http/TCP/8080/-']);
    assert.deepEqual(portsOf('10.2.132.2'), ['dns/UDP/5353/dns'], 'a pod without the named port is left out of that port only');
  });

  void test('several networks in one annotation, one of them in another namespace: served once its owner shares it', async () => {
    const svc = 'multi';
    const other = `${ns}-o`;
    await cp.createNamespace(other);
    await createPod(cp.client, ns, 'multi-a', {
      labels: { app: 'multi' },
      status: networkStatus([
        { name: `${ns}/macvlan1`, ips: ['10.2.133.1'] },
        { name: `${other}/net`, ips: ['192.168.133.1'] },
      ]),
    });
    await createService(cp.client, ns, svc, { network: `macvlan1, ${other}/net`, selector: { app: 'multi' } });
    // Not shared (the NAD does not even exist yet): its own network only, and an Event saying why.
    await waitSlices(svc, 'own network only', (l) => l.length === 1 && l[0]?.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] === `${ns}/macvlan1`);
    await waitFor('NetworkNotShared Event', async () => (await serviceEvents(cp.client, ns, svc)).some((e) => e.reason === 'NetworkNotShared' && (e.message ?? '').includes(`${other}/net`)));
    const nadPath = apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', other);
    await cp.client.create(nadPath, {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name: 'net', namespace: other, annotations: { [SERVICE_NAMESPACES_ANNOTATION]: `x, ${ns}` } },
      spec: { config: JSON.stringify({ cniVersion: '0.3.1', type: 'macvlan', master: 'eth2', ipam: { type: 'static' } }) },
    });
    let slices = await waitSlices(svc, 'two networks', (l) => l.length === 2);
    const byNet = new Map(slices.map((s) => [s.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION], s]));
    assert.deepEqual(byNet.get(`${ns}/macvlan1`)?.endpoints[0]?.addresses, ['10.2.133.1']);
    assert.deepEqual(byNet.get(`${other}/net`)?.endpoints[0]?.addresses, ['192.168.133.1']);
    assert.equal(byNet.get(`${other}/net`)?.metadata?.labels?.[NETWORK_LABEL], `${other}.net`);

    // The owner takes the share back: that network's slice goes.
    await cp.client.patch(`${nadPath}/net`, { metadata: { annotations: { [SERVICE_NAMESPACES_ANNOTATION]: 'x' } } }, 'merge');
    await waitSlices(svc, 'share withdrawn', (l) => l.length === 1);
    await cp.client.patch(`${nadPath}/net`, { metadata: { annotations: { [SERVICE_NAMESPACES_ANNOTATION]: '*' } } }, 'merge');
    slices = await waitSlices(svc, 'shared with everyone', (l) => l.length === 2);
    const again = new Map(slices.map((s) => [s.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION], s]));

    // Network removed from the annotation: its slice goes, the other stays as it is.
    const kept = again.get(`${ns}/macvlan1`);
    await cp.client.patch(svcPath(ns, svc), { metadata: { annotations: { [SERVICE_NETWORK_ANNOTATION]: 'macvlan1' } } }, 'merge');
    slices = await waitSlices(svc, 'other/net removed', (l) => l.length === 1);
    assert.equal(slices[0]?.metadata?.name, kept?.metadata?.name);
    assert.equal(slices[0]?.metadata?.resourceVersion, kept?.metadata?.resourceVersion, 'the remaining slice was not rewritten');
  });

  void test('headless Service with the selector annotation', async () => {
    const svc = 'headless';
    await createPod(cp.client, ns, 'hl-a', { labels: { app: 'hl', tier: 'db' }, status: status(['10.2.134.1']) });
    await createPod(cp.client, ns, 'hl-b', { labels: { app: 'hl', tier: 'cache' }, status: status(['10.2.134.2']) });
    await createService(cp.client, ns, svc, { network: 'macvlan1', headless: true, selectorAnnotation: 'app=hl,tier in (db)' });
    const slices = await waitSlices(svc, 'selected pod only', (l) => sliceAddresses(l).join() === '10.2.134.1');
    assert.equal(slices.length, 1);
  });

  void test('250 pods make three slices', async () => {
    const svc = 'many';
    const ips: string[] = [];
    for (let batch = 0; batch < 250; batch += 25) {
      await Promise.all(
        Array.from({ length: 25 }, (_, j) => {
          const i = batch + j;
          const ip = `10.3.${Math.floor(i / 200)}.${(i % 200) + 1}`;
          ips.push(ip);
          // No status write: Pending pods are endpoints too (ready through publishNotReadyAddresses).
          return createPod(cp.client, ns, `many-${i}`, { labels: { app: 'many' }, status: status([ip]), skipStatus: true });
        }),
      );
    }
    // The Service comes after its pods, so the first reconcile sees all 250 and packs them full.
    await createService(cp.client, ns, svc, { network: 'macvlan1', selector: { app: 'many' }, publishNotReadyAddresses: true });
    const slices = await waitSlices(svc, '250 endpoints', (l) => sliceAddresses(l).length === 250, 60_000);
    assert.deepEqual(
      slices.map((s) => s.endpoints.length).sort((a, b) => a - b),
      [50, 100, 100],
    );
    assert.deepEqual(sliceAddresses(slices), [...ips].sort());
    assert.ok(slices.every((s) => s.endpoints.every((e) => e.conditions?.ready === true)));
  });

  void test('bad network-status on one pod: the others are published and an Event names the bad pod', async () => {
    const svc = 'badstatus';
    await createPod(cp.client, ns, 'bad-good', { labels: { app: 'bad' }, status: status(['10.2.135.1']) });
    await createPod(cp.client, ns, 'bad-broken', { labels: { app: 'bad' }, status: '[{"name": "oops", "ips": [' });
    await createService(cp.client, ns, svc, { network: 'macvlan1', selector: { app: 'bad' } });
    await waitSlices(svc, 'the good pod', (l) => sliceAddresses(l).join() === '10.2.135.1');
    let events = await serviceEvents(cp.client, ns, svc);
    await waitFor('Event naming bad-broken', async () => {
      events = await serviceEvents(cp.client, ns, svc);
      return events.some((e) => e.type === 'Warning' && e.reason === 'NetworkStatusInvalid' && (e.message ?? '').includes(`Pod ${ns}/bad-broken`));
    });
    const ev = events.find((e) => e.reason === 'NetworkStatusInvalid');
    assert.match(ev?.message ?? '', /k8s\.v1\.cni\.cncf\.io\/network-status/);
    const metrics = await (await fetch(`http://127.0.0.1:${ctl.health.port}/metrics`)).text();
    assert.match(metrics, /multus_proxy_controller_pods_skipped_total\{reason="NetworkStatusInvalid"\} [1-9]/);
  });

  void test('a malformed Service annotation keeps the published slices and raises a Warning', async () => {
    const svc = 'typo';
    await createPod(cp.client, ns, 'typo-a', { labels: { app: 'typo' }, status: status(['10.2.136.1']) });
    await createService(cp.client, ns, svc, { network: 'macvlan1', selector: { app: 'typo' } });
    const before = await waitSlices(svc, 'published', (l) => l.length === 1);
    await cp.client.patch(svcPath(ns, svc), { metadata: { annotations: { [SERVICE_NETWORK_ANNOTATION]: 'Mac_Vlan!' } } }, 'merge');
    await waitFor('InvalidServiceAnnotation Event', async () => (await serviceEvents(cp.client, ns, svc)).some((e) => e.reason === 'InvalidServiceAnnotation'));
    await createPod(cp.client, ns, 'typo-b', { labels: { app: 'typo' }, status: status(['10.2.136.2']) });
    await sleep(1500);
    const after = await ourSlices(cp.client, ns, svc);
    assert.deepEqual(
      after.map((s) => s.metadata?.resourceVersion),
      before.map((s) => s.metadata?.resourceVersion),
      'slices kept exactly as they were',
    );
    // Label removed: the Service is no longer ours and its slices go.
    await cp.client.patch(svcPath(ns, svc), [{ op: 'remove', path: '/metadata/labels' }], 'json');
    await waitSlices(svc, 'deleted after the label went', (l) => l.length === 0);
  });

  void test('a foreign slice (without our managed-by label) is never touched', async () => {
    const svc = 'foreign';
    await createPod(cp.client, ns, 'foreign-a', { labels: { app: 'foreign' }, status: status(['10.2.137.1']) });
    const foreign = await cp.client.create<V1EndpointSlice>(slicePath(ns), {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: 'foreign-builtin', labels: { [SERVICE_NAME_LABEL]: svc, [MANAGED_BY_LABEL]: 'endpointslice-controller.k8s.io' } },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.244.9.9'] }],
      ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
    });
    await createService(cp.client, ns, svc, { network: 'macvlan1', selector: { app: 'foreign' } });
    await waitSlices(svc, 'ours published', (l) => l.length === 1);
    await cp.client.delete(svcPath(ns, svc));
    await waitSlices(svc, 'ours deleted', (l) => l.length === 0);
    const still = await cp.client.get<V1EndpointSlice>(slicePath(ns, 'foreign-builtin'));
    assert.equal(still.metadata?.resourceVersion, foreign.metadata?.resourceVersion);
  });

  void test('no hot loop: once converged, a quiet period issues no writes, even with irrelevant pod updates', async () => {
    await waitFor('queue idle', () => ctl.idle(), 30_000);
    await sleep(1000);
    await waitFor('queue idle', () => ctl.idle(), 30_000);
    const before = writeCount(ctl.client);
    const reconciles = async (): Promise<number> => {
      const text = await (await fetch(`http://127.0.0.1:${ctl.health.port}/metrics`)).text();
      return [...text.matchAll(/^multus_proxy_controller_reconciles_total\{[^}]*\} (\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
    };
    const r0 = await reconciles();
    // Status-only and unrelated annotation updates on a selected pod: not a reason to write.
    await cp.client.patch(podPath(ns, 'many-7'), { metadata: { annotations: { unrelated: 'x' } } }, 'merge');
    await cp.client.patch<V1Pod>(`${podPath(ns, 'many-7')}/status`, { status: { message: 'heartbeat' } }, 'merge');
    await sleep(5000);
    assert.equal(writeCount(ctl.client), before, `writes during the quiet period: ${JSON.stringify(ctl.client.requestCount())}`);
    assert.equal(await reconciles(), r0, 'irrelevant pod updates do not even enqueue the Service');
    const text = await (await fetch(`http://127.0.0.1:${ctl.health.port}/metrics`)).text();
    const value = (re: RegExp): number => Number(re.exec(text)?.[1] ?? 0);
    assert.ok(value(/^multus_proxy_controller_change_to_slice_write_seconds_count (\d+)/m) > 0, 'change-to-write latency observed');
    assert.ok(value(/^multus_proxy_controller_slice_writes_total\{verb="update"\} (\d+)/m) > 0, 'updates counted');
    assert.ok(value(/^multus_proxy_controller_reconciles_total\{result="unchanged"\} (\d+)/m) > 0, 'no-op reconciles counted');
  });
});
