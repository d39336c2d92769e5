/**
 * MultiNetworkPolicy admission behind a real kube-apiserver, with the CRD exactly as
 * deploy/components/multi-networkpolicy ships it and the validating webhook's rules and
 * matchConditions exactly as deploy/base ships them (pointed at this test's webhook and narrowed
 * to this test's namespace). Shows that both API versions are served, that an endPort written
 * through v1beta2 is kept, that our denials reach the user with their message, and that a policy
 * without policy-for is never sent. And that the chart, rendered against the cluster, does not
 * render the CRD over one that is not its release's.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { isNotFound, KubeApiError } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import { MULTI_NETWORK_POLICY_CRD, MULTI_NETWORK_POLICY_GROUP, MULTI_NETWORK_POLICY_RESOURCE, POLICY_FOR_ANNOTATION } from '../../src/keys.js';
import type { MultiNetworkPolicy } from '../../src/policy/api.js';
import { poll, useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { createError, installPolicyCrd, startPolicyValidation } from './fixtures.js';
import { CHART, helm, KUBE_VERSION, NAMESPACE, RELEASE } from '../deploy/helm.js';

void describe('MultiNetworkPolicy admission behind a real kube-apiserver', () => {
  let cp: ControlPlane;
  let validation: { close(): Promise<void> };
  let createdCrd = false;
  const ns = uniqueName('mnp');
  const testLabel = { 'multus-proxy-policy-test': uniqueName('run') };
  const configName = uniqueName('multus-proxy-policy-test');
  const path = (version: string, name?: string): string => apiPath(MULTI_NETWORK_POLICY_GROUP, version, MULTI_NETWORK_POLICY_RESOURCE, ns, name);
  const policy = (name: string, spec: unknown, policyFor: string | null = 'net-a', version = 'v1beta1'): MultiNetworkPolicy => ({
    apiVersion: `${MULTI_NETWORK_POLICY_GROUP}/${version}`,
    kind: 'MultiNetworkPolicy',
    metadata: { name, ...(policyFor !== null ? { annotations: { [POLICY_FOR_ANNOTATION]: policyFor } } : {}) },
    spec: spec as MultiNetworkPolicy['spec'],
  });

  before(async () => {
    cp = await useControlPlane();
    createdCrd = await installPolicyCrd(cp);
    await poll('the MultiNetworkPolicy CRD is served (v1beta1 and v1beta2)', 30_000, async () => {
      try {
        await cp.client.list(apiPath(MULTI_NETWORK_POLICY_GROUP, 'v1beta1', MULTI_NETWORK_POLICY_RESOURCE));
        await cp.client.list(apiPath(MULTI_NETWORK_POLICY_GROUP, 'v1beta2', MULTI_NETWORK_POLICY_RESOURCE));
        return true;
      } catch (e) {
        if (isNotFound(e) || (e instanceof KubeApiError && e.status === 429)) return false; // 429: the new CRD's storage initialising
        throw e;
      }
    });
    await cp.createNamespace(ns, testLabel);
    await cp.client.create(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', ns), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name: 'net-a', namespace: ns },
      spec: { config: '{"cniVersion":"0.4.0","type":"macvlan","name":"net-a"}' },
    });

    validation = await startPolicyValidation(cp, ns, testLabel, configName);
  });

  after(async () => {
    await validation.close();
    await cp.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
    if (createdCrd) await cp.client.delete(apiPath('apiextensions.k8s.io', 'v1', 'customresourcedefinitions', undefined, MULTI_NETWORK_POLICY_CRD));
  });

  void test('an object written for the reference implementation is admitted through v1beta1 and read through v1beta2', async () => {
    const spec = {
      podSelector: { matchLabels: { app: 'db' } },
      policyTypes: ['Ingress'],
      ingress: [{ from: [{ podSelector: { matchLabels: { role: 'client' } } }, { ipBlock: { cidr: '10.1.0.0/16', except: ['10.1.2.0/24'] } }], ports: [{ protocol: 'TCP', port: 5432 }] }],
    };
    await cp.client.create(path('v1beta1'), policy('reference', spec));
    const read = await cp.client.get<MultiNetworkPolicy>(path('v1beta2', 'reference'));
    assert.deepEqual(read.spec, spec);
  });

  void test('an endPort written through v1beta2 is kept', async () => {
    await cp.client.create(path('v1beta2'), policy('range', { podSelector: {}, ingress: [{ ports: [{ protocol: 'UDP', port: 30000, endPort: 30100 }] }] }, 'net-a', 'v1beta2'));
    const read = await cp.client.get<MultiNetworkPolicy>(path('v1beta2', 'range'));
    assert.deepEqual(read.spec?.ingress?.[0]?.ports, [{ protocol: 'UDP', port: 30000, endPort: 30100 }]);
  });

  void test('denials reach the user with the object, the field, the value and the fix', async () => {
    const beside = await createError(cp.client.create(path('v1beta1'), policy('beside', { podSelector: {}, ingress: [{ from: [{ podSelector: {}, ipBlock: { cidr: '10.0.0.0/8' } }] }] })));
    assert.match(beside, new RegExp(`MultiNetworkPolicy ${ns}/beside: spec.ingress\\[0\\].from\\[0\\].ipBlock .*is beside podSelector in one peer.*make them two peers`));
    const noPort = await createError(cp.client.create(path('v1beta2'), policy('noport', { podSelector: {}, egress: [{ ports: [{ endPort: 80 }] }] }, 'net-a', 'v1beta2')));
    assert.match(noPort, /spec.egress\[0\].ports\[0\].endPort "80": is set without port/);
    const cidr = await createError(cp.client.create(path('v1beta1'), policy('cidr', { podSelector: {}, ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/40' } }] }] })));
    assert.match(cidr, /ipBlock.cidr "10.0.0.0\/40": has a prefix length "40"/);
    const unknown = await createError(cp.client.create(path('v1beta1'), policy('unknown', { podSelector: {} }, 'net-a,net-b')));
    assert.match(unknown, new RegExp(`NetworkAttachmentDefinition ${ns}/net-b does not exist`));
  });

  void test('UPDATE is validated: a valid policy cannot be made invalid', async () => {
    const current = await cp.client.get<MultiNetworkPolicy>(path('v1beta1', 'reference'));
    const broken = { ...current, spec: { ...current.spec, podSelector: { matchExpressions: [{ key: 'app', operator: 'Equal', values: ['db'] }] } } };
    const message = await createError(cp.client.replace(path('v1beta1', 'reference'), broken));
    assert.match(message, /spec.podSelector.matchExpressions\[0\].operator "Equal"/);
  });

  void test('a policy without policy-for is for no network and is never sent to the webhook', async () => {
    // Invalid as a policy (the webhook would deny it), yet admitted: the matchCondition kept it away.
    await cp.client.create(path('v1beta2'), policy('inert', { podSelector: {}, ingress: [{ ports: [{ endPort: 80 }] }] }, null, 'v1beta2'));
    const read = await cp.client.get<MultiNetworkPolicy>(path('v1beta2', 'inert'));
    assert.equal(read.metadata?.annotations?.[POLICY_FOR_ANNOTATION], undefined);
  });

  void test("helm: the chart does not render the CRD over one that is not the release's, and does over its own", async () => {
    const rendered = async (): Promise<boolean> => {
      const args = ['template', RELEASE, CHART, '--namespace', NAMESPACE, '--kube-version', KUBE_VERSION, '--dry-run=server', '--kubeconfig', cp.kubeconfigPath];
      const { stdout } = await helm([...args, '--set', 'multiNetworkPolicy.crd.enabled=true']);
      return stdout.includes(`name: ${MULTI_NETWORK_POLICY_CRD}`);
    };
    const crdPath = apiPath('apiextensions.k8s.io', 'v1', 'customresourcedefinitions', undefined, MULTI_NETWORK_POLICY_CRD);
    // The CRD here was not installed by a release (as the reference's own install leaves it).
    assert.equal(await rendered(), false, 'a CRD of another owner is kept, not rendered over');
    const release = { metadata: { annotations: { 'meta.helm.sh/release-name': RELEASE, 'meta.helm.sh/release-namespace': NAMESPACE } } };
    await cp.client.patch(crdPath, release, 'merge');
    try {
      assert.equal(await rendered(), true, "the release's own CRD stays in the release");
    } finally {
      await cp.client.patch(crdPath, { metadata: { annotations: { 'meta.helm.sh/release-name': null, 'meta.helm.sh/release-namespace': null } } }, 'merge');
    }
  });
});
