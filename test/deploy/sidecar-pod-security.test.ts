/**
 * deploy/components/sidecar-pod-security on the real kube-apiserver: in a namespace with
 * multus-proxy injection, the pod the webhook makes (injectSidecar, the injected securityContext)
 * is admitted, while a privileged container, an app container adding NET_ADMIN, a container that
 * only takes the sidecar's name, hostPath, hostNetwork and host ports are refused with a message
 * that says why. The same privileged pod in a namespace without injection is not this policy's
 * business. The component is rendered with kustomize, as an install includes it.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { KubeApiError } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1Container, V1Pod } from '../../src/kube/types.js';
import { INJECTION_ENABLED, INJECTION_LABEL } from '../../src/keys.js';
import { injectSidecar } from '../../cmd/webhook/mutate.js';
import { SIDECAR } from '../webhook/fixtures.js';
import { DEPLOY, render } from './kustomize.js';

const ADMISSION = 'admissionregistration.k8s.io';

void describe('deploy/components/sidecar-pod-security: baseline for all but the injected sidecar', () => {
  let cp: ControlPlane;
  let enabled = '';
  let plain = '';
  let dir = '';
  const created: { resource: string; name: string }[] = [];

  before(async () => {
    cp = await useControlPlane();
    enabled = uniqueName('psa-enabled');
    plain = uniqueName('psa-plain');
    // Enabled namespaces stay PodSecurity privileged (baseline would refuse NET_ADMIN): the policy is what holds them.
    await cp.createNamespace(enabled, { [INJECTION_LABEL]: INJECTION_ENABLED, 'pod-security.kubernetes.io/enforce': 'privileged' });
    await cp.createNamespace(plain, { 'pod-security.kubernetes.io/enforce': 'privileged' });
    dir = mkdtempSync(join(tmpdir(), 'vap-'));
    writeFileSync(join(dir, 'kustomization.yaml'), `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncomponents:\n  - ${relative(dir, join(DEPLOY, 'components', 'sidecar-pod-security'))}\n`);
    const objects = await render(dir);
    assert.deepEqual(objects.map((o) => o.kind).sort(), ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
    for (const o of objects) {
      const resource = o.kind === 'ValidatingAdmissionPolicy' ? 'validatingadmissionpolicies' : 'validatingadmissionpolicybindings';
      await cp.client.create(apiPath(ADMISSION, 'v1', resource), o);
      created.push({ resource, name: o.metadata?.name ?? '' });
    }
  });

  after(async () => {
    for (const c of created) await cp?.client.delete(apiPath(ADMISSION, 'v1', c.resource, undefined, c.name)).catch(() => undefined);
    for (const n of [enabled, plain]) await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, n)).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
    await cp?.stop();
  });

  let n = 0;
  const pod = (spec: Partial<NonNullable<V1Pod['spec']>>, containers: V1Container[] = [{ name: 'app', image: 'nginx' }]): V1Pod => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: `p${++n}` },
    spec: { automountServiceAccountToken: false, containers, ...spec },
  });
  /** 'admitted', or the apiserver's message for a refusal. Admitted pods are deleted again (no kubelet runs them). */
  async function admit(ns: string, p: V1Pod): Promise<string> {
    try {
      await cp.client.create(apiPath('', 'v1', 'pods', ns), p);
      await cp.client.delete(apiPath('', 'v1', 'pods', ns, p.metadata?.name));
      return 'admitted';
    } catch (e) {
      if (e instanceof KubeApiError && e.status === 403) return e.apiMessage;
      throw e;
    }
  }
  const privileged = (): V1Pod => pod({}, [{ name: 'app', image: 'nginx', securityContext: { privileged: true } }]);

  void test('a privileged container in an enabled namespace is refused, naming the policy and why; the injected sidecar is admitted', async () => {
    // The policy is compiled by the apiserver a moment after it is created.
    await waitFor('the policy in force', async () => (await admit(enabled, privileged())) !== 'admitted', 20_000);
    assert.match(await admit(enabled, privileged()), /multus-proxy-sidecar-pod-security.*privileged containers are not allowed/);
    const injected = injectSidecar(pod({}), SIDECAR, true);
    assert.equal(injected.spec?.initContainers?.[0]?.name, 'multus-proxy');
    assert.equal(await admit(enabled, injected), 'admitted');
    assert.equal(await admit(enabled, injectSidecar(pod({}), SIDECAR, false)), 'admitted', 'as a regular container too');
  });

  void test('NET_ADMIN on an app container, a multus-proxy container of another shape, hostPath, hostNetwork, host ports: refused; baseline capabilities are fine', async () => {
    const app = (securityContext: V1Container['securityContext']): V1Pod => pod({}, [{ name: 'app', image: 'nginx', securityContext }]);
    assert.match(await admit(enabled, app({ capabilities: { add: ['NET_ADMIN'] } })), /container app adds capabilities beyond Pod Security baseline/);
    assert.equal(await admit(enabled, app({ capabilities: { add: ['NET_BIND_SERVICE', 'CHOWN'] } })), 'admitted');
    const fake = injectSidecar(pod({}), SIDECAR, true);
    const sc = fake.spec?.initContainers?.[0];
    assert.ok(sc);
    sc.securityContext = { ...sc.securityContext, capabilities: { add: ['NET_ADMIN', 'NET_RAW', 'SYS_ADMIN'], drop: ['ALL'] } };
    assert.match(await admit(enabled, fake), /a container named multus-proxy must have exactly the injected securityContext/);
    const noDrop = injectSidecar(pod({}), SIDECAR, true);
    const sc2 = noDrop.spec?.initContainers?.[0];
    assert.ok(sc2);
    sc2.securityContext = { ...sc2.securityContext, capabilities: { add: ['NET_ADMIN', 'NET_RAW'] } };
    assert.match(await admit(enabled, noDrop), /exactly the injected securityContext/);
    assert.match(await admit(enabled, pod({ volumes: [{ name: 'h', hostPath: { path: '/' } }] })), /hostPath volumes are not allowed/);
    assert.match(await admit(enabled, pod({ hostNetwork: true })), /hostNetwork, hostPID and hostIPC are not allowed/);
    assert.match(await admit(enabled, pod({}, [{ name: 'app', image: 'nginx', ports: [{ containerPort: 80, hostPort: 8080 }] }])), /host ports are not allowed/);
    assert.match(await admit(enabled, app({ seccompProfile: { type: 'Unconfined' } })), /seccompProfile Unconfined/);
  });

  void test('a namespace without injection is not held by this policy', async () => {
    assert.equal(await admit(plain, privileged()), 'admitted');
  });
});
