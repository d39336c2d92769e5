/**
 * docs/migration.md promises commands that work when pasted. The blocks marked
 * `<!-- checked: <id> ... -->` are run here, as written, by bash with the project's kubectl against
 * a private real kube-apiserver holding what the predecessors leave behind (multus-service's
 * kube-system objects; net-service-controller's NetService, its `-template` Service and its
 * hand-filled Endpoints), and what they must change is asserted. Blocks that need a running
 * cluster (image pulls, rollouts) are not marked.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { loadAll } from 'js-yaml';
import { getIfExists } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1Namespace, V1Service } from '../../src/kube/types.js';
import { requireBinary, startControlPlane, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';

const ROOT = join(import.meta.dirname, '..', '..');
const DOC = readFileSync(join(ROOT, 'docs', 'migration.md'), 'utf8');
const run = promisify(execFile);

/** The sh block right after `<!-- checked: id ... -->`. */
function block(id: string): string {
  const m = new RegExp(`<!-- checked: ${id} [^\\n]*-->\\n\`\`\`sh\\n([\\s\\S]*?)\\n\`\`\``).exec(DOC);
  assert.ok(m?.[1], `docs/migration.md has no checked block ${id}`);
  return m[1];
}

let cp: ControlPlane;

async function paste(id: string, env: Record<string, string> = {}): Promise<string> {
  const kubectl = requireBinary('kubectl');
  const { stdout } = await run('bash', ['-eo', 'pipefail', '-c', block(id)], {
    cwd: ROOT,
    env: { ...process.env, ...env, KUBECONFIG: cp.kubeconfigPath, PATH: `${dirname(kubectl)}:${process.env['PATH'] ?? ''}` },
  });
  return stdout;
}

const apply = (obj: object): Promise<unknown> => {
  const o = obj as { apiVersion: string; kind: string; metadata: { name: string; namespace?: string } };
  const [group, version] = o.apiVersion.includes('/') ? o.apiVersion.split('/') : ['', o.apiVersion];
  const resource = { ClusterRole: 'clusterroles', ClusterRoleBinding: 'clusterrolebindings', ServiceAccount: 'serviceaccounts', Deployment: 'deployments', DaemonSet: 'daemonsets', Service: 'services', Endpoints: 'endpoints', NetService: 'netservices' }[o.kind] ?? '';
  return cp.client.create(apiPath(group ?? '', version ?? '', resource, o.metadata.namespace), obj);
};

before(async () => {
  cp = await startControlPlane();
  for (const ns of ['kube-system', 'default', 'app']) await cp.createNamespace(ns);
});

after(async () => {
  await cp?.stop();
});

void describe('docs/migration.md, pasted', () => {
  void test('from multus-service: its kube-system objects are removed; the client namespace is labelled', async () => {
    const pod = { metadata: { labels: { app: 'multus-proxy', name: 'multus-proxy' } }, spec: { containers: [{ name: 'c', image: 'ghcr.io/k8snetworkplumbingwg/multus-service:latest' }] } };
    const selector = { matchLabels: { name: 'multus-proxy', app: 'multus-proxy' } };
    const rbac = 'rbac.authorization.k8s.io/v1';
    await apply({ apiVersion: rbac, kind: 'ClusterRole', metadata: { name: 'multus-service' }, rules: [] });
    await apply({ apiVersion: rbac, kind: 'ClusterRoleBinding', metadata: { name: 'multus-service' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'multus-service' }, subjects: [{ kind: 'ServiceAccount', name: 'multus-service', namespace: 'kube-system' }] });
    await apply({ apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'multus-service', namespace: 'kube-system' } });
    await apply({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'multus-service-controller', namespace: 'kube-system' }, spec: { selector, template: pod } });
    await apply({ apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: { name: 'multus-proxy-ds-amd64', namespace: 'kube-system' }, spec: { selector, template: pod } });

    await paste('remove-multus-service');
    for (const path of [
      apiPath('apps', 'v1', 'daemonsets', 'kube-system', 'multus-proxy-ds-amd64'),
      apiPath('apps', 'v1', 'deployments', 'kube-system', 'multus-service-controller'),
      apiPath('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings', undefined, 'multus-service'),
      apiPath('rbac.authorization.k8s.io', 'v1', 'clusterroles', undefined, 'multus-service'),
      apiPath('', 'v1', 'serviceaccounts', 'kube-system', 'multus-service'),
    ]) {
      // Foreground/orphan deletion is immediate here (no garbage collector holds finalizers on these).
      await waitFor(`${path} deleted`, async () => (await getIfExists(cp.client, path)) === undefined);
    }
    // Pasted twice: --ignore-not-found keeps it harmless.
    await paste('remove-multus-service');

    await paste('label-namespace', { NS: 'app' });
    const ns = await cp.client.get<V1Namespace>(apiPath('', 'v1', 'namespaces', undefined, 'app'));
    assert.equal(ns.metadata?.labels?.['multus-proxy-injection'], 'enabled');
  });

  void test("from net-service-controller: its -template Service and Endpoints go, the NetService stays; then the conversion", async () => {
    const crd = loadAll(readFileSync(join(ROOT, 'deploy', 'components', 'netservice', 'crd.yaml'), 'utf8'))[0] as object;
    await cp.client.create(apiPath('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'), crd);
    await waitFor('NetService API served', async () => (await getIfExists(cp.client, '/apis/svcctl.metaswitch.com/v1alpha1')) !== undefined, 30_000);
    await waitFor('NetService create accepted', async () =>
      apply({ apiVersion: 'svcctl.metaswitch.com/v1alpha1', kind: 'NetService', metadata: { name: 'corens', namespace: 'default' }, spec: { netAttachDef: 'core', selector: { app: 'utils' } } }).then(
        () => true,
        () => false,
      ),
    );
    await apply({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'corens-template', namespace: 'default' }, spec: { clusterIP: 'None', selector: { app: 'utils' } } });
    await apply({ apiVersion: 'v1', kind: 'Service', metadata: { name: 'corens', namespace: 'default' }, spec: { clusterIP: 'None' } });
    await apply({ apiVersion: 'v1', kind: 'Endpoints', metadata: { name: 'corens', namespace: 'default' }, subsets: [{ addresses: [{ ip: '10.10.0.11' }] }] });

    await paste('nsc-cleanup');
    assert.equal(await getIfExists(cp.client, apiPath('', 'v1', 'services', 'default', 'corens-template')), undefined);
    assert.equal(await getIfExists(cp.client, apiPath('', 'v1', 'endpoints', 'default', 'corens')), undefined);
    assert.ok(await getIfExists(cp.client, apiPath('svcctl.metaswitch.com', 'v1alpha1', 'netservices', 'default', 'corens')), 'the NetService is kept');

    await paste('nsc-convert');
    assert.equal(await getIfExists(cp.client, apiPath('svcctl.metaswitch.com', 'v1alpha1', 'netservices', 'default', 'corens')), undefined);
    const svc = await cp.client.get<V1Service>(apiPath('', 'v1', 'services', 'default', 'corens'));
    assert.equal(svc.spec?.clusterIP, 'None');
    const a = svc.metadata?.annotations ?? {};
    assert.deepEqual([a['k8s.v1.cni.cncf.io/service-network'], a['k8s.v1.cni.cncf.io/service-selector']], ['networks/core', 'app=utils']);
  });
});
