/**
 * The sidecars' RBAC follows the namespace label, and what it grants is checked with a real
 * service-account token against the real apiserver's authorizer.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createKubeClient, KubeApiError, type KubeClient } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { CoreV1Event, V1ClusterRoleBinding, V1RoleBinding } from '../../src/kube/types.js';
import { createLogger } from '../../src/log.js';
import { parseOptions } from '../../cmd/controller/options.js';
import { startController, type RunningController } from '../../cmd/controller/run.js';
import { desiredSidecarRbac, SIDECAR_POD_ROLE, SIDECAR_ROLE } from '../../cmd/controller/sidecar-rbac.js';
import { INJECTION_LABEL } from '../../src/keys.js';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';

const crbPath = apiPath('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings', undefined, SIDECAR_ROLE);
const rbPath = (ns: string): string => apiPath('rbac.authorization.k8s.io', 'v1', 'rolebindings', ns, SIDECAR_POD_ROLE);

async function status(p: Promise<unknown>): Promise<number> {
  try {
    await p;
    return 200;
  } catch (e) {
    if (e instanceof KubeApiError) return e.status;
    throw e;
  }
}

void describe('sidecar RBAC kept by the controller', () => {
  let cp: ControlPlane;
  let ctl: RunningController;
  let ns: string;
  let other: string;
  const extra: string[] = [];

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('rbac');
    other = uniqueName('rbac-other');
    await cp.createNamespace(other);
    // The two ClusterRoles come with the manifests, not from the controller: create them as those do.
    for (const role of desiredSidecarRbac([]).clusterRoles) {
      const code = await status(cp.client.create(apiPath('rbac.authorization.k8s.io', 'v1', 'clusterroles'), role));
      assert.ok(code === 200 || code === 409, `ClusterRole ${role.metadata?.name ?? ''}: ${code}`);
    }
    // The controller watches `ns` (Services and pods): the injected pod there is what it binds.
    const r = parseOptions(['--health-port', '0', '--health-host', '127.0.0.1', '--leader-elect', 'false', '--namespace', ns, '--watch-nodes', 'false'], {});
    if (!r.ok || r.value === 'help') throw new Error('bad options');
    ctl = await startController(createKubeClient(cp.connection), r.value, createLogger('controller', process.env['LOG_LEVEL'] ?? 'warn'));
    await waitFor('controller ready', () => ctl.isReady());
  });

  after(async () => {
    await ctl?.stop();
    for (const n of [ns, other, ...extra]) await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, n));
    await cp?.stop();
  });

  const subjects = async (): Promise<string[]> => {
    try {
      return ((await cp.client.get<V1ClusterRoleBinding>(crbPath)).subjects ?? []).map((s) => `${s.namespace ?? ''}/${s.name}`);
    } catch {
      return [];
    }
  };
  const hasRoleBinding = async (n: string): Promise<boolean> => (await status(cp.client.get<V1RoleBinding>(rbPath(n)))) === 200;

  void test("label on: the injected pod's ServiceAccount is bound (not the namespace's group), and its token can read exactly what the sidecar needs; another account of the namespace nothing; label off: unbound", async () => {
    const bound = `${ns}/sidecar-sa`;
    await cp.createNamespace(ns, { [INJECTION_LABEL]: 'enabled' });
    for (const name of ['sidecar-sa', 'app-sa']) await cp.client.create(apiPath('', 'v1', 'serviceaccounts', ns), { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace: ns } });
    // An injected pod (the webhook's container name) and a plain one, with their own accounts.
    for (const [name, sa, containers] of [
      [
        'client',
        'sidecar-sa',
        [
          { name: 'multus-proxy', image: 'x' },
          { name: 'app', image: 'x' },
        ],
      ],
      ['plain', 'app-sa', [{ name: 'app', image: 'x' }]],
    ] as const) {
      await cp.client.create(apiPath('', 'v1', 'pods', ns), {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: ns },
        spec: { serviceAccountName: sa, automountServiceAccountToken: false, containers },
      });
    }
    await waitFor("the injected pod's account bound", async () => (await subjects()).includes(bound) && (await hasRoleBinding(ns)), 15_000);
    assert.deepEqual(await subjects(), [bound], "only the injected pod's account, never the group");

    const plain: KubeClient = createKubeClient({ server: cp.server, ca: Buffer.from(cp.caPem), token: await cp.tokenFor(ns, 'app-sa') });
    assert.equal(await status(plain.list(apiPath('', 'v1', 'services'))), 403, "a plain pod's account reads no Services");
    assert.equal(await status(plain.list(apiPath('discovery.k8s.io', 'v1', 'endpointslices'))), 403, 'nor slices');
    const sa: KubeClient = createKubeClient({ server: cp.server, ca: Buffer.from(cp.caPem), token: await cp.tokenFor(ns, 'sidecar-sa') });
    // RBAC is enforced by the apiserver's authorizer; allow a moment for its cache.
    await waitFor('sidecar can list services cluster-wide', async () => (await status(sa.list(apiPath('', 'v1', 'services')))) === 200, 10_000);
    assert.equal(await status(sa.list(apiPath('discovery.k8s.io', 'v1', 'endpointslices'))), 200);
    // No pods, not even its own namespace's: the sidecar reads its own pod from the downwardAPI volume.
    assert.equal(await status(sa.list(apiPath('', 'v1', 'pods', ns))), 403, 'no pods of its own namespace');
    assert.equal(await status(sa.list(apiPath('', 'v1', 'pods', other))), 403, 'no pods of other namespaces');
    assert.equal(await status(sa.list(apiPath('', 'v1', 'secrets', ns))), 403, 'no secrets');
    assert.equal(await status(sa.delete(apiPath('', 'v1', 'services', ns, 'x'))), 403, 'read-only');

    const writesBefore = ctl.client.requestCount();
    await cp.client.patch(apiPath('', 'v1', 'namespaces', undefined, ns), { metadata: { labels: { unrelated: 'yes' } } }, 'merge');
    await new Promise((r) => setTimeout(r, 1000));
    const after = ctl.client.requestCount();
    for (const verb of ['create', 'replace', 'delete', 'POST', 'PUT', 'DELETE']) assert.equal(after[verb] ?? 0, writesBefore[verb] ?? 0, `no RBAC write for an unrelated label (${verb})`);

    await cp.client.patch(apiPath('', 'v1', 'namespaces', undefined, ns), { metadata: { labels: { [INJECTION_LABEL]: null } } }, 'merge');
    await waitFor('account unbound', async () => !(await subjects()).includes(bound) && !(await hasRoleBinding(ns)), 15_000);
    await waitFor('access gone', async () => (await status(sa.list(apiPath('', 'v1', 'services')))) === 403, 10_000);
  });

  void test('a stray RoleBinding named like ours blocks only its own namespace: the others sync, it gets an Event and is retried', async () => {
    // Namespaces are synced in name order: the stray one sorts first, so today every one after it waited.
    const stray = uniqueName('rbac-a-stray');
    const good = uniqueName('rbac-z-good');
    extra.push(stray, good);
    await cp.createNamespace(stray);
    // A tenant with admin on its namespace may create any RoleBinding there, also one with our name.
    const strayRb: V1RoleBinding = {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: SIDECAR_POD_ROLE, namespace: stray },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
      subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: stray }],
    };
    await cp.client.create(apiPath('rbac.authorization.k8s.io', 'v1', 'rolebindings', stray), strayRb);
    await cp.client.patch(apiPath('', 'v1', 'namespaces', undefined, stray), { metadata: { labels: { [INJECTION_LABEL]: 'enabled' } } }, 'merge');
    await new Promise((r) => setTimeout(r, 500));
    await cp.createNamespace(good, { [INJECTION_LABEL]: 'enabled' });
    await waitFor('the namespace after the stray one gets its RoleBinding', () => hasRoleBinding(good), 15_000);

    const warned = async (): Promise<CoreV1Event | undefined> =>
      (await cp.client.list<CoreV1Event>(apiPath('', 'v1', 'events', stray))).items.find((e) => e.involvedObject.kind === 'RoleBinding' && e.involvedObject.name === SIDECAR_POD_ROLE);
    await waitFor('a Warning Event in the stray namespace', async () => (await warned()) !== undefined, 15_000);
    const ev = (await warned())!;
    assert.equal(ev.type, 'Warning');
    assert.match(ev.message ?? '', new RegExp(`RoleBinding ${stray}/${SIDECAR_POD_ROLE}.*not managed by multus-proxy.*delete or rename`));
    const still = await cp.client.get<V1RoleBinding>(rbPath(stray));
    assert.equal(still.roleRef.name, 'view', "the tenant's object is left as it is");

    // Gone: the retry binds the namespace.
    await cp.client.delete(rbPath(stray));
    await waitFor(
      'retried: the stray namespace gets our RoleBinding once the stray one is gone',
      async () => {
        const rb = await cp.client.get<V1RoleBinding>(rbPath(stray)).catch(() => undefined);
        return rb?.roleRef.name === SIDECAR_POD_ROLE;
      },
      30_000,
    );
  });
});
