/**
 * MultiNetworkPolicy on a cluster that serves only `k8s.cni.cncf.io/v1beta1`, as the reference
 * implementation's CRD does (no v1beta2): our shipped CRD with its v1beta2 version taken out and
 * v1beta1 made the storage version, on a private real kube-apiserver. Every consumer works there:
 * - the webhook validates policies written as v1beta1 (its shipped rules name both versions);
 * - the controller, which reads v1beta1, writes the policy's address groups from the peers'
 *   network-status;
 * - the sidecar, which reads the newest version served, falls back to v1beta1 (v1beta2 answers
 *   404) and enforces the policy with real traffic: the allowed peer connects, the other does not;
 * - the webhook's policy cache, which reads v1beta1, sees the policy select the pod.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { setPodStatus, sliceAddresses, startNamespacedController } from '../controller/helpers.js';
import { createError, startPolicyValidation } from '../webhook/fixtures.js';
import { uniqueName } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { createPolicyCache, type PolicyCache } from '../../cmd/webhook/policy-cache.js';
import type { RunningController } from '../../cmd/controller/run.js';
import { isNotFound } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1EndpointSlice } from '../../src/kube/types.js';
import { MANAGED_BY_LABEL, MULTI_NETWORK_POLICY_CRD, MULTI_NETWORK_POLICY_GROUP, MULTI_NETWORK_POLICY_RESOURCE, POLICY_FOR_ANNOTATION } from '../../src/keys.js';
import { ADDRESS_GROUP_MANAGED_BY, ADDRESS_GROUP_POLICY_LABEL } from '../../src/policy/address-group.js';
import type { MultiNetworkPolicy } from '../../src/policy/api.js';
import { podObject } from './state-fixtures.js';
import { metricsText, waitForLog } from './runtime-harness.js';
import { policiesServed, startPolicedPod, type PolicedPod } from './policy-runtime.js';

const HEALTH_PORT = 19184;
const CRD_FILE = join(import.meta.dirname, '..', '..', 'deploy', 'components', 'multi-networkpolicy', 'crd.yaml');

interface CrdVersion {
  name: string;
  served: boolean;
  storage: boolean;
}

/** The shipped CRD as the reference ships its own: v1beta1 only, stored as v1beta1. */
function v1beta1OnlyCrd(): object {
  const crd = loadAll(readFileSync(CRD_FILE, 'utf8'))[0] as { spec: { versions: CrdVersion[] } };
  const versions = crd.spec.versions.filter((v) => v.name === 'v1beta1').map((v) => ({ ...v, served: true, storage: true }));
  assert.equal(versions.length, 1, 'the shipped CRD has a v1beta1 version');
  return { ...crd, spec: { ...crd.spec, versions } };
}

void describe('MultiNetworkPolicy on a cluster serving only v1beta1 (the reference CRD): webhook, controller and sidecar', () => {
  let rt: PolicedPod;
  let ctl: RunningController | undefined;
  let validation: { close(): Promise<void> } | undefined;
  let cache: PolicyCache | undefined;
  let ns = '';
  const testLabel = { 'multus-proxy-policy-test': uniqueName('v1b') };
  const policies = (version: string, name?: string): string => apiPath(MULTI_NETWORK_POLICY_GROUP, version, MULTI_NETWORK_POLICY_RESOURCE, ns, name);
  const policy = (name: string, from: string, policyFor = 'net-a'): MultiNetworkPolicy => ({
    apiVersion: `${MULTI_NETWORK_POLICY_GROUP}/v1beta1`,
    kind: 'MultiNetworkPolicy',
    metadata: { name, namespace: ns, annotations: { [POLICY_FOR_ANNOTATION]: policyFor } },
    spec: { podSelector: { matchLabels: { app: 'p' } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: from } } }] }] },
  });
  const groupAddresses = async (name: string): Promise<string[]> =>
    sliceAddresses(
      (
        await rt.env.cp.client.list<V1EndpointSlice>(apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns), {
          labelSelector: `${MANAGED_BY_LABEL}=${ADDRESS_GROUP_MANAGED_BY},${ADDRESS_GROUP_POLICY_LABEL}=${name}`,
        })
      ).items,
    );

  before(async () => {
    rt = await startPolicedPod({ nsPrefix: 'v1b', healthPort: HEALTH_PORT });
    const { cp } = rt.env;
    ns = rt.env.ns;
    await cp.client.patch(apiPath('', 'v1', 'namespaces', undefined, ns), { metadata: { labels: testLabel } }, 'merge');
    await cp.client.create(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name: 'net-a', namespace: ns },
      spec: { config: '{"cniVersion":"0.4.0","type":"macvlan","name":"net-a"}' },
    });
    // The peers' pod objects, as Multus and the kubelet leave them: labelled, on net-a, Running and Ready.
    for (const name of ['a', 'b'] as const) {
      const pod = podObject(ns, name, { status: [{ name: `${ns}/net-a`, interface: 'net1', ips: [`${rt.peer(name).net1.ipv4}/24`] }] });
      await cp.client.create(apiPath('', 'v1', 'pods', ns), { ...pod, metadata: { ...pod.metadata, labels: { app: name } } });
      await setPodStatus(cp.client, ns, name, { ready: true, phase: 'Running' });
    }
  });
  after(async () => {
    cache?.stop();
    await ctl?.stop();
    await validation?.close();
    await rt?.close();
  });

  void test('the CRD serves v1beta1 only', async () => {
    const s = rt.start();
    await rt.waitReady(s);
    await waitForLog(s, 'the absent API to be told', /MultiNetworkPolicy API is not served/);
    const { cp } = rt.env;
    await cp.client.create(apiPath('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'), v1beta1OnlyCrd());
    await waitFor('v1beta1 served', async () => (await policiesServed(cp.client, policies('v1beta1'))) !== undefined, 30_000);
    await assert.rejects(cp.client.list(policies('v1beta2')), (e) => isNotFound(e), 'v1beta2 is not served');
    const crd = await cp.client.get<{ spec: { versions: CrdVersion[] } }>(apiPath('apiextensions.k8s.io', 'v1', 'customresourcedefinitions', undefined, MULTI_NETWORK_POLICY_CRD));
    assert.deepEqual(
      crd.spec.versions.map((v) => [v.name, v.served, v.storage]),
      [['v1beta1', true, true]],
    );
  });

  void test('the webhook validates policies written as v1beta1', async () => {
    validation = await startPolicyValidation(rt.env.cp, ns, testLabel, uniqueName('multus-proxy-v1beta1-test'));
    const unknown = await createError(rt.env.cp.client.create(policies('v1beta1'), policy('unknown', 'a', 'net-a,net-b')));
    assert.match(unknown, new RegExp(`NetworkAttachmentDefinition ${ns}/net-b does not exist`));
    const bad = { ...policy('bad-cidr', 'a'), spec: { podSelector: {}, ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/40' } }] }] } };
    assert.match(await createError(rt.env.cp.client.create(policies('v1beta1'), bad)), /ipBlock.cidr "10.0.0.0\/40": has a prefix length "40"/);
  });

  void test('the controller writes the address groups, and the sidecar reads v1beta1 and enforces the policy', async () => {
    const { cp } = rt.env;
    ctl = await startNamespacedController(cp.connection, ns);
    await cp.client.create(policies('v1beta1'), policy('allow', 'a'));
    await waitFor('the controller writes the group of peer a', async () => (await groupAddresses('allow')).join() === rt.peer('a').net1.ipv4, 30_000);
    const s = rt.env.sidecar;
    assert.ok(s);
    const found = await waitForLog(s, 'the API to be found', /MultiNetworkPolicy API is served now/);
    assert.equal(found['resource'], policies('v1beta1'), 'the sidecar watches the version served');
    await rt.expectReach('a allowed, b denied', { a: true, b: false });
    assert.match(await metricsText(rt.env.topo, rt.pod, HEALTH_PORT), /^multus_proxy_sidecar_policies_enforced 1$/m);
  });

  void test("the webhook's policy cache sees the policy select the pod", async () => {
    cache = createPolicyCache(rt.env.cp.client, { probeMs: 300, minBackoffMs: 100, maxBackoffMs: 500 });
    cache.start();
    const pod = { namespace: ns, labels: { app: 'p' }, networks: [`${ns}/net-a`] };
    await waitFor(
      'the cache synced with the policy',
      async () => cache?.state() === 'synced' && cache.selecting(pod)?.name === 'allow',
      30_000,
      () => `state ${cache?.state()}`,
    );
    assert.equal(cache.selecting({ ...pod, labels: { app: 'q' } }), undefined, 'a pod the selector does not match is not selected');
  });
});
