/**
 * Pods a MultiNetworkPolicy selects, behind a real kube-apiserver: the MultiNetworkPolicy CRD as
 * deploy/components/multi-networkpolicy ships it, both pod webhooks with the namespaceSelector
 * expressions and matchConditions deploy/base ships (narrowed to this test's namespaces by a
 * label), and the webhook's policy cache reading the apiserver as the shipped ClusterRole allows.
 *
 * Shows: the cache waits while the CRD is not installed (nothing selected, nothing crashes) and
 * sees it once installed; a policy created after the webhook started is seen; a selected pod in a
 * namespace without the injection label gets the sidecar with its labels and ports; an unselected
 * one is stored untouched; a selected pod's opt-out is refused with the policy and the fix, in a
 * namespace with the label too.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { createClusterLookups } from '../../cmd/webhook/cluster.js';
import { podHandler } from '../../cmd/webhook/handlers.js';
import { createPolicyCache, type PolicyCache } from '../../cmd/webhook/policy-cache.js';
import { createApp, PATHS, startWebhookServer, type WebhookServer } from '../../cmd/webhook/server.js';
import { watchCertificateFiles, type CertificateSource } from '../../cmd/webhook/tls.js';
import { isNotFound, KubeApiError, type KubeClient } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1Pod } from '../../src/kube/types.js';
import {
  INJECT_ANNOTATION,
  MULTI_NETWORK_POLICY_CRD,
  MULTI_NETWORK_POLICY_GROUP,
  MULTI_NETWORK_POLICY_RESOURCE,
  NETWORKS_ANNOTATION,
  POLICY_FOR_ANNOTATION,
  SIDECAR_CONTAINER_NAME,
} from '../../src/keys.js';
import type { MultiNetworkPolicy } from '../../src/policy/api.js';
import { POD_LABELS_FILE } from '../../src/sidecar-contract.js';
import { poll, useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { createError, installPolicyCrd, servingPairFolder, shippedWebhookClient, SIDECAR } from './fixtures.js';

const ADMISSION = 'admissionregistration.k8s.io';
const DEPLOY = join(import.meta.dirname, '..', '..', 'deploy');
const CRD_PATH = apiPath('apiextensions.k8s.io', 'v1', 'customresourcedefinitions', undefined, MULTI_NETWORK_POLICY_CRD);

interface ShippedHook {
  name: string;
  matchConditions?: unknown[];
  namespaceSelector?: { matchLabels?: Record<string, string>; matchExpressions?: unknown[] };
  clientConfig?: unknown;
}

async function crdServed(client: KubeClient): Promise<boolean> {
  try {
    await client.list(apiPath(MULTI_NETWORK_POLICY_GROUP, 'v1beta1', MULTI_NETWORK_POLICY_RESOURCE));
    return true;
  } catch (e) {
    if (isNotFound(e) || (e instanceof KubeApiError && e.status === 429)) return false; // 429: the new CRD's storage initialising
    throw e;
  }
}

void describe('pods a MultiNetworkPolicy selects, behind a real kube-apiserver', () => {
  let cp: ControlPlane;
  let dir: string;
  let certs: CertificateSource;
  let server: WebhookServer;
  let policies: PolicyCache;
  let createdCrd = false;
  const testLabel = { 'multus-proxy-selected-test': uniqueName('run') };
  const plain = uniqueName('sel-plain');
  const on = uniqueName('sel-on');
  const configName = uniqueName('multus-proxy-selected-test');
  const roleName = uniqueName('multus-proxy-selected-test');
  const pods = (ns: string): string => apiPath('', 'v1', 'pods', ns);
  const pod = (name: string, labels: Record<string, string>, annotations: Record<string, string>): V1Pod => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels, annotations },
    spec: { containers: [{ name: 'app', image: 'busybox', command: ['sleep', 'infinity'], ports: [{ name: 'pg', containerPort: 5432 }, { containerPort: 8080 }] }] },
  });
  const policy = (name: string, policyFor: string): MultiNetworkPolicy => ({
    apiVersion: `${MULTI_NETWORK_POLICY_GROUP}/v1beta1`,
    kind: 'MultiNetworkPolicy',
    metadata: { name, annotations: { [POLICY_FOR_ANNOTATION]: policyFor } },
    spec: { podSelector: { matchExpressions: [{ key: 'app', operator: 'In', values: ['db'] }] }, ingress: [{ ports: [{ port: 'pg' }] }] },
  });
  const sidecarOf = (p: V1Pod) => (p.spec?.initContainers ?? []).find((c) => c.name === SIDECAR_CONTAINER_NAME);

  before(async () => {
    cp = await useControlPlane();
    // Start without the CRD (tests run one file at a time; one left installed is removed first).
    if (await crdServed(cp.client)) {
      await cp.client.delete(CRD_PATH);
      await poll('the MultiNetworkPolicy CRD is gone', 60_000, async () => !(await crdServed(cp.client)));
    }
    await cp.createNamespace(plain, testLabel);
    await cp.createNamespace(on, { ...testLabel, 'multus-proxy-injection': 'enabled' });

    // The webhook's identity: a service account bound to the shipped ClusterRole's rules.
    const webhookClient = await shippedWebhookClient(cp, plain, roleName);

    policies = createPolicyCache(webhookClient, { probeMs: 300, minBackoffMs: 100, maxBackoffMs: 500 });
    policies.start();
    const pair = servingPairFolder('webhook-selected-', ['127.0.0.1']);
    dir = pair.dir;
    certs = watchCertificateFiles(pair.certFile, pair.keyFile);
    const deps = { cluster: createClusterLookups(webhookClient, { namespaceCacheMs: 1000, nadTimeoutMs: 2000 }), sidecar: { ...SIDECAR, mode: 'native' as const }, policies };
    const app = createApp({
      endpoints: {
        [PATHS.mutatePods]: { kind: 'Pod', handler: podHandler(deps) },
        [PATHS.mutateSelectedPods]: { kind: 'Pod', handler: podHandler(deps, { namespaceEnabled: false }) },
      },
      maxBodyBytes: 8 * 1024 * 1024,
    });
    server = await startWebhookServer(app, certs, { port: 0, host: '127.0.0.1' });

    // Both pod webhooks as shipped, pointed here and narrowed to this test's namespaces.
    const shipped = loadAll(readFileSync(join(DEPLOY, 'base', 'webhook-configurations.yaml'), 'utf8')) as { kind?: string; webhooks?: (ShippedHook & Record<string, unknown>)[] }[];
    const hooks = shipped.find((d) => d.kind === 'MutatingWebhookConfiguration')?.webhooks?.filter((w) => w.name.startsWith('pods.') || w.name.startsWith('selected-pods.')) ?? [];
    assert.equal(hooks.length, 2, 'deploy/base ships the pods and selected-pods webhooks');
    const caBundle = Buffer.from(pair.caPem).toString('base64');
    await cp.client.create(apiPath(ADMISSION, 'v1', 'mutatingwebhookconfigurations'), {
      apiVersion: `${ADMISSION}/v1`,
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: configName },
      webhooks: hooks.map((h) => {
        const path = (h.clientConfig as { service?: { path?: string } } | undefined)?.service?.path ?? '';
        return {
          ...h,
          name: h.name.replace('k8s.cni.cncf.io', 'test'),
          timeoutSeconds: 10,
          clientConfig: { url: `https://127.0.0.1:${server.port}${path}`, caBundle },
          namespaceSelector: { ...h.namespaceSelector, matchLabels: { ...h.namespaceSelector?.matchLabels, ...testLabel } },
        };
      }),
    });
    // In effect once a pod of the labelled namespace gets the sidecar (no policy needed there).
    await poll('the pod webhooks are in effect', 30_000, async () => {
      const p = await cp.client.create<V1Pod>(pods(on), pod(uniqueName('probe'), {}, { [NETWORKS_ANNOTATION]: 'net-a' }), { dryRun: true });
      return sidecarOf(p) !== undefined;
    });
  });

  after(async () => {
    await cp.client.delete(apiPath(ADMISSION, 'v1', 'mutatingwebhookconfigurations', undefined, configName));
    policies.stop();
    await server.close();
    certs.close();
    rmSync(dir, { recursive: true, force: true });
    for (const ns of [plain, on]) await cp.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
    await cp.client.delete(apiPath('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings', undefined, roleName));
    await cp.client.delete(apiPath('rbac.authorization.k8s.io', 'v1', 'clusterroles', undefined, roleName));
    if (createdCrd) await cp.client.delete(CRD_PATH);
  });

  void test('without the CRD: nothing is selected, pods are admitted as before, and the CRD installed later is seen', async () => {
    await poll('the policy cache knows the API is not served', 10_000, async () => policies.state() === 'not-served');
    const stored = await cp.client.create<V1Pod>(pods(plain), pod('before-crd', { app: 'db' }, { [NETWORKS_ANNOTATION]: 'net-a' }), { dryRun: true });
    assert.equal(sidecarOf(stored), undefined, 'no policy can select it: unchanged');
    createdCrd = await installPolicyCrd(cp);
    await poll('the policy cache has listed the policies', 30_000, async () => policies.state() === 'synced');
  });

  void test('an unselected pod in a namespace without the label is stored untouched', async () => {
    const stored = await cp.client.create<V1Pod>(pods(plain), pod('web', { app: 'web' }, { [NETWORKS_ANNOTATION]: 'net-a' }));
    assert.equal(sidecarOf(stored), undefined);
    assert.deepEqual(stored.spec?.volumes?.map((v) => v.name) ?? [], stored.spec?.volumes?.filter((v) => !v.name.startsWith('multus-proxy')).map((v) => v.name) ?? []);
    assert.equal(stored.metadata?.annotations?.[INJECT_ANNOTATION], undefined);
  });

  void test('a policy created after the webhook started is seen: its pod gets the sidecar with its labels and named ports', async () => {
    await poll('the policy cache has listed the policies', 30_000, async () => policies.state() === 'synced');
    await cp.client.create(apiPath(MULTI_NETWORK_POLICY_GROUP, 'v1beta1', MULTI_NETWORK_POLICY_RESOURCE, plain), policy('db-ingress', 'net-a'));
    await poll('the new policy selects a pod at admission', 10_000, async () => {
      const p = await cp.client.create<V1Pod>(pods(plain), pod(uniqueName('probe'), { app: 'db' }, { [NETWORKS_ANNOTATION]: 'net-a' }), { dryRun: true });
      return sidecarOf(p) !== undefined;
    });
    const stored = await cp.client.create<V1Pod>(pods(plain), pod('db', { app: 'db', tier: 'data' }, { [NETWORKS_ANNOTATION]: 'net-a' }));
    const sidecar = sidecarOf(stored);
    assert.ok(sidecar, 'the selected pod has the sidecar');
    const env = Object.fromEntries((sidecar.env ?? []).map((e) => [e.name, e.value]));
    assert.equal(env['POD_LABELS_FILE'], POD_LABELS_FILE);
    assert.deepEqual(JSON.parse(env['POD_CONTAINER_PORTS'] ?? 'null'), [{ name: 'pg', containerPort: 5432, protocol: 'TCP' }]);
    const podinfo = stored.spec?.volumes?.find((v) => v.downwardAPI !== undefined && v.name.startsWith('multus-proxy'));
    assert.deepEqual(
      podinfo?.downwardAPI?.items?.map((i) => [i.path, i.fieldRef?.fieldPath]),
      [
        ['annotations', 'metadata.annotations'],
        ['labels', 'metadata.labels'],
      ],
    );
    // The same pod on a network the policy is not for, or with other labels: untouched.
    const otherNet = await cp.client.create<V1Pod>(pods(plain), pod('db-b', { app: 'db' }, { [NETWORKS_ANNOTATION]: 'net-b' }), { dryRun: true });
    assert.equal(sidecarOf(otherNet), undefined);
    const otherLabels = await cp.client.create<V1Pod>(pods(plain), pod('cache', { app: 'cache' }, { [NETWORKS_ANNOTATION]: 'net-a' }), { dryRun: true });
    assert.equal(sidecarOf(otherLabels), undefined);
  });

  void test("a selected pod's opt-out is refused with the policy and the fix, with and without the namespace label", async () => {
    await cp.client.create(apiPath(MULTI_NETWORK_POLICY_GROUP, 'v1beta1', MULTI_NETWORK_POLICY_RESOURCE, on), policy('db-ingress', 'net-a'));
    for (const ns of [plain, on]) {
      const optOut = { [NETWORKS_ANNOTATION]: 'net-a', [INJECT_ANNOTATION]: 'false' };
      let message = '';
      await poll(`the opt-out in ${ns} is refused`, 10_000, async () => {
        message = await createError(cp.client.create(pods(ns), pod('db-out', { app: 'db' }, optOut), { dryRun: true })).catch(() => '');
        return message !== '';
      });
      assert.match(
        message,
        new RegExp(`Pod ${ns}/db-out: ${INJECT_ANNOTATION} "false": MultiNetworkPolicy ${ns}/db-ingress selects the pod .*network ${ns}/net-a.*; remove the annotation ${INJECT_ANNOTATION}`),
      );
      // An opted-out pod no policy selects is stored as it came.
      const web = await cp.client.create<V1Pod>(pods(ns), pod(uniqueName('web-out'), { app: 'web' }, optOut), { dryRun: true });
      assert.equal(sidecarOf(web), undefined);
      assert.equal(web.metadata?.annotations?.[INJECT_ANNOTATION], 'false');
    }
  });
});
