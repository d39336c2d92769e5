/**
 * Proves the control-plane harness: the real apiserver stores, allocates and streams the kinds
 * this project uses; RBAC and TokenRequest work for least-privilege runs; stop() cleans up.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { BlockList, isIPv4, isIPv6 } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createKubeClient, KubeApiError, type KubeClient } from '../../src/kube/client.js';
import { loadKubeConnection } from '../../src/kube/config.js';
import { apiPath } from '../../src/kube/paths.js';
import type { KubeObject, NetworkAttachmentDefinition, V1EndpointSlice, V1Pod, V1Service, WatchEvent } from '../../src/kube/types.js';
import { SERVICE_CIDRS, startControlPlane, useControlPlane, uniqueName, type ControlPlane } from './controlplane.js';
import { waitFor } from './wait.js';

const serviceRanges = new BlockList();
serviceRanges.addSubnet('10.96.0.0', 16, 'ipv4');
serviceRanges.addSubnet('fd00:10:96::', 112, 'ipv6');

/** Creates `body` at `path` while a watch (from the list's resourceVersion) runs; returns what the watch saw. */
async function createAndWatch<T extends KubeObject>(client: KubeClient, path: string, body: T): Promise<{ created: T; events: WatchEvent<T>[] }> {
  const list = await client.list<T>(path);
  const events: WatchEvent<T>[] = [];
  const ctl = new AbortController();
  const watching = client.watch<T>(path, { resourceVersion: list.metadata?.resourceVersion ?? '' }, (e) => events.push(e), ctl.signal);
  try {
    const created = await client.create<T>(path, body);
    await waitFor(`ADDED ${created.metadata?.name} on ${path}`, () => events.some((e) => e.type === 'ADDED' && e.object.metadata?.name === created.metadata?.name), 15_000);
    return { created, events };
  } finally {
    ctl.abort();
    await watching;
  }
}

void describe('control plane harness (shared)', () => {
  let cp: ControlPlane;
  let ns: string;
  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('cp');
    await cp.createNamespace(ns, { 'multus-proxy-injection': 'enabled' });
  });
  after(() => cp.stop());

  void test('reports the Kubernetes version it was built from (not v0.0.0-master)', async () => {
    const v = await cp.client.get<{ gitVersion: string; major: string; minor: string }>('/version');
    assert.match(v.gitVersion, /^v1\.\d+\.\d+$/);
    assert.ok(Number(v.minor) >= 29, `minor ${v.minor}: native sidecars need >= 1.29`);
  });

  void test('createNamespace sets labels and the default ServiceAccount', async () => {
    const got = await cp.client.get<KubeObject>(apiPath('', 'v1', 'namespaces', undefined, ns));
    assert.equal(got.metadata?.labels?.['multus-proxy-injection'], 'enabled');
    await cp.client.get(apiPath('', 'v1', 'serviceaccounts', ns, 'default'));
  });

  void test('Pods: create (admission adds the service-account volume), read, watch', async () => {
    const path = apiPath('', 'v1', 'pods', ns);
    const pod: V1Pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'p1', annotations: { 'k8s.v1.cni.cncf.io/networks': 'net1' } },
      spec: { containers: [{ name: 'c', image: 'registry.invalid/app:1' }] },
    };
    const { created } = await createAndWatch(cp.client, path, pod);
    const read = await cp.client.get<V1Pod>(apiPath('', 'v1', 'pods', ns, 'p1'));
    assert.equal(read.metadata?.uid, created.metadata?.uid);
    assert.equal(read.metadata?.annotations?.['k8s.v1.cni.cncf.io/networks'], 'net1');
    assert.equal(read.spec?.serviceAccountName, 'default');
    assert.ok(
      read.spec?.volumes?.some((v) => v.name.startsWith('kube-api-access-')),
      'ServiceAccount admission ran',
    );
  });

  void test('Services: cluster IPs allocated from the dual-stack virtual ranges', async () => {
    const path = apiPath('', 'v1', 'services', ns);
    const svc = (name: string, spec: V1Service['spec']): V1Service => ({ apiVersion: 'v1', kind: 'Service', metadata: { name }, spec: { ports: [{ port: 80 }], ...spec } });
    const { created: v4 } = await createAndWatch(cp.client, path, svc('v4', {}));
    const ip4 = v4.spec?.clusterIP ?? '';
    assert.ok(isIPv4(ip4) && serviceRanges.check(ip4, 'ipv4'), `${ip4} in ${SERVICE_CIDRS[0]}`);
    const dual = await cp.client.create<V1Service>(path, svc('dual', { ipFamilyPolicy: 'RequireDualStack', ipFamilies: ['IPv4', 'IPv6'] }));
    const [a, b] = dual.spec?.clusterIPs ?? [];
    assert.ok(a && isIPv4(a) && serviceRanges.check(a, 'ipv4'), `first family IPv4: ${a}`);
    assert.ok(b && isIPv6(b) && serviceRanges.check(b, 'ipv6'), `second family IPv6 in ${SERVICE_CIDRS[1]}: ${b}`);
    const v6 = await cp.client.create<V1Service>(path, svc('v6', { ipFamilies: ['IPv6'] }));
    assert.ok(isIPv6(v6.spec?.clusterIP ?? ''), `IPv6 single stack: ${v6.spec?.clusterIP}`);
    const headless = await cp.client.create<V1Service>(path, svc('headless', { clusterIP: 'None' }));
    assert.equal(headless.spec?.clusterIP, 'None');
  });

  void test('EndpointSlices: IPv4 and IPv6 slices stored and selectable by label', async () => {
    const path = apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns);
    const slice = (name: string, addressType: 'IPv4' | 'IPv6', address: string): V1EndpointSlice => ({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name, labels: { 'kubernetes.io/service-name': 'web', 'multus-proxy/network': `${ns}.net1` } },
      addressType,
      endpoints: [{ addresses: [address], conditions: { ready: true, serving: true, terminating: false } }],
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    });
    await createAndWatch(cp.client, path, slice('web-v4', 'IPv4', '192.0.2.10'));
    await cp.client.create(path, slice('web-v6', 'IPv6', '2001:db8::10'));
    await cp.client.create(path, { ...slice('other', 'IPv4', '192.0.2.11'), metadata: { name: 'other', labels: { 'kubernetes.io/service-name': 'other' } } });
    const got = await cp.client.list<V1EndpointSlice>(path, { labelSelector: `multus-proxy/network=${ns}.net1` });
    assert.deepEqual(got.items.map((s) => `${s.metadata?.name}:${s.addressType}:${s.endpoints[0]?.addresses[0]}`).sort(), ['web-v4:IPv4:192.0.2.10', 'web-v6:IPv6:2001:db8::10']);
  });

  void test('NetworkAttachmentDefinitions: CRD served, spec.config kept, schema enforced', async () => {
    const path = apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', ns);
    const config = JSON.stringify({ cniVersion: '1.0.0', type: 'macvlan', master: 'eth1' });
    const nad: NetworkAttachmentDefinition = { apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name: 'net1' }, spec: { config } };
    await createAndWatch(cp.client, path, nad);
    const read = await cp.client.get<NetworkAttachmentDefinition>(`${path}/net1`);
    assert.equal(read.spec?.config, config);
    const bad = await cp.client.create(path, { ...nad, metadata: { name: 'bad' }, spec: { config: 42 } }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(bad instanceof KubeApiError && bad.status === 422, `schema rejects a non-string config: ${String(bad)}`);
  });

  void test('the lean client speaks every patch type, server-side apply and dry run to the real apiserver', async () => {
    const path = apiPath('', 'v1', 'configmaps', ns);
    const item = `${path}/patched`;
    const dry = await cp.client.create<KubeObject>(path, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'patched' } }, { dryRun: true });
    assert.equal(dry.metadata?.name, 'patched');
    assert.equal(
      await cp.client.get(item).then(
        () => 'exists',
        (e: unknown) => (e instanceof KubeApiError ? e.status : e),
      ),
      404,
      'dry run stored nothing',
    );
    await cp.client.patch(item, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'patched' }, data: { a: '1' } }, 'apply', { fieldManager: 'test', force: true });
    await cp.client.patch(item, { data: { b: '2' } }, 'merge');
    await cp.client.patch(item, { metadata: { labels: { l: 'x' } } }, 'strategic');
    await cp.client.patch(item, [{ op: 'add', path: '/data/c', value: '3' }], 'json');
    const got = await cp.client.get<KubeObject & { data?: Record<string, string> }>(item);
    assert.deepEqual(got.data, { a: '1', b: '2', c: '3' });
    assert.equal(got.metadata?.labels?.['l'], 'x');
    assert.ok(
      got.metadata?.managedFields?.some((f) => f.manager === 'test' && f.operation === 'Apply'),
      'apply recorded its field manager',
    );
    const replaced = await cp.client.replace<KubeObject & { data?: Record<string, string> }>(item, { ...got, data: { only: 'this' } });
    assert.deepEqual(replaced.data, { only: 'this' });
    const conflict = await cp.client.replace(item, { ...got, data: {} }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(conflict instanceof KubeApiError && conflict.status === 409 && conflict.reason === 'Conflict', 'stale resourceVersion is a 409 Conflict');
    await cp.client.delete(item);
    await cp.client.delete(item); // already gone: not an error
  });

  void test('the admin client-certificate kubeconfig works (client certs and CA of the lean client)', async () => {
    const client = createKubeClient(loadKubeConnection({ kubeconfig: join(cp.dir, 'kubeconfig-cert') }));
    const got = await client.get<KubeObject>(apiPath('', 'v1', 'namespaces', undefined, ns));
    assert.equal(got.metadata?.name, ns);
  });

  void test('a TokenRequest token without RBAC gets 403; a RoleBinding grants exactly what it says', async () => {
    const kubeconfig = await cp.kubeconfigFor(ns, 'least');
    const client = createKubeClient(loadKubeConnection({ kubeconfig }));
    const podsPath = apiPath('', 'v1', 'pods', ns);
    const denied = await client.list(podsPath).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(denied instanceof KubeApiError, String(denied));
    assert.equal(denied.status, 403);
    assert.equal(denied.reason, 'Forbidden');
    assert.match(denied.apiMessage, new RegExp(`system:serviceaccount:${ns}:least`));
    await cp.client.create(apiPath('rbac.authorization.k8s.io', 'v1', 'roles', ns), {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'read-pods' },
      rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }],
    });
    await cp.client.create(apiPath('rbac.authorization.k8s.io', 'v1', 'rolebindings', ns), {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'least-read-pods' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'read-pods' },
      subjects: [{ kind: 'ServiceAccount', name: 'least', namespace: ns }],
    });
    await waitFor(
      'RBAC to allow listing pods',
      async () =>
        await client.list(podsPath).then(
          () => true,
          () => false,
        ),
      15_000,
    );
    const stillDenied = await client.list(apiPath('', 'v1', 'services', ns)).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(stillDenied instanceof KubeApiError && stillDenied.status === 403, 'services stay forbidden');
  });
});

void describe('control plane harness (private)', () => {
  void test('restartApiserver keeps the data; stop() kills both processes and removes the temp dir', async (t) => {
    const cp = await startControlPlane();
    t.after(() => cp.stop());
    assert.equal(cp.shared, false);
    const pids = cp.pids();
    assert.equal(pids.length, 2);
    await cp.createNamespace('keep');
    await cp.client.create(apiPath('', 'v1', 'configmaps', 'keep'), { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' } });
    await cp.restartApiserver();
    const restarted = cp.pids();
    assert.equal(restarted[0], pids[0], 'etcd kept running');
    assert.notEqual(restarted[1], pids[1], 'a new apiserver process');
    await cp.client.get(apiPath('', 'v1', 'configmaps', 'keep', 'c'));
    assert.ok(existsSync(cp.dir));
    await cp.stop();
    for (const pid of [...pids, ...restarted]) {
      assert.throws(() => process.kill(pid, 0), /ESRCH/, `process ${pid} is gone`);
    }
    assert.equal(existsSync(cp.dir), false, `${cp.dir} removed`);
  });

  void test('a failed start reports the apiserver log tail and leaves nothing behind', async () => {
    const existing = new Set(readdirSync(tmpdir()).filter((d) => d.startsWith('multus-proxy-cp-')));
    const err = await startControlPlane({ extraApiserverArgs: ['--no-such-flag=1'] }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof Error, 'start must fail');
    assert.match(err.message, /kube-apiserver exited/);
    assert.match(err.message, /unknown flag: --no-such-flag/);
    const left = readdirSync(tmpdir()).filter((d) => d.startsWith('multus-proxy-cp-') && !existing.has(d));
    // Other engineers' control planes may appear meanwhile; ours is named in the message.
    const ours = /(multus-proxy-cp-[A-Za-z0-9]+)/.exec(err.message)?.[1];
    assert.ok(ours, 'the message names the log file');
    assert.ok(!left.includes(ours), `${ours} removed`);
  });

  void test('missing binaries fail with a message naming scripts/setup.sh', async (t) => {
    const empty = mkdtempSync(join(tmpdir(), 'no-bins-'));
    const saved = process.env['MULTUS_PROXY_BIN_DIR'];
    t.after(() => {
      rmSync(empty, { recursive: true, force: true });
      if (saved === undefined) delete process.env['MULTUS_PROXY_BIN_DIR'];
      else process.env['MULTUS_PROXY_BIN_DIR'] = saved;
    });
    process.env['MULTUS_PROXY_BIN_DIR'] = empty;
    await assert.rejects(startControlPlane(), /etcd not found at .*: run scripts\/setup\.sh/);
  });
});
