/**
 * deploy/components/network-status-writers on the real kube-apiserver: a pod's owner (a
 * ServiceAccount token with `admin` in its namespace, plus pods/status) may not set, change or
 * remove `k8s.v1.cni.cncf.io/network-status`, on create, update or the status subresource, and the
 * refusal names the key and who may set it; Multus' ServiceAccount (a real token of
 * kube-system/multus) and a node (impersonated system:node:<name> in system:nodes) may, through
 * pods/status as Multus writes it; updates that leave the annotation as it is pass for everyone
 * (the kubelet's status updates among them). The component is rendered with kustomize, as an
 * install includes it, and with the identity patch docs/install.md shows.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1Pod } from '../../src/kube/types.js';
import { NETWORK_STATUS_ANNOTATION } from '../../src/keys.js';
import { DEPLOY, render, type Rendered } from './kustomize.js';

const ADMISSION = 'admissionregistration.k8s.io';
const RBAC = 'rbac.authorization.k8s.io';
const POLICY = 'multus-proxy-network-status-writers';
const MULTUS = 'system:serviceaccount:kube-system:multus';
const STATUS_A = JSON.stringify([{ name: 'ns/macvlan1', interface: 'net1', ips: ['192.168.50.11'] }]);
const STATUS_B = JSON.stringify([{ name: 'ns/macvlan1', interface: 'net1', ips: ['192.168.50.99'] }]);

/** Who a request is sent as: a bearer token, or the admin impersonating a user and its groups. */
type Identity = { token: string } | { user: string; groups: string[] };

/** The apiserver's answer to one request: 'ok', or its status code and message. */
type Answer = 'ok' | { status: number; message: string };

/** The message of the apiserver's Status body, or the body itself. */
function statusMessage(text: string): string {
  try {
    return (JSON.parse(text) as { message?: string }).message ?? text;
  } catch {
    return text;
  }
}

void describe('deploy/components/network-status-writers: only Multus and the nodes write network-status', () => {
  let cp: ControlPlane;
  let ns = '';
  let dir = '';
  let tenant: Identity;
  let multus: Identity;
  const node: Identity = { user: 'system:node:worker-1', groups: ['system:nodes', 'system:authenticated'] };
  const cleanup: string[] = [];

  /** One request as `who`; JSON body, merge patches for PATCH. */
  function send(who: Identity, method: string, path: string, body?: unknown): Promise<Answer> {
    const url = new URL(path, cp.server);
    const headers: Record<string, string | string[]> = { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' };
    if ('token' in who) headers['authorization'] = `Bearer ${who.token}`;
    else {
      headers['authorization'] = `Bearer ${cp.connection.token ?? ''}`;
      headers['impersonate-user'] = who.user;
      headers['impersonate-group'] = who.groups;
    }
    return new Promise((resolve, reject) => {
      const req = https.request(url, { method, ca: cp.caPem, headers, agent: false }, (res) => {
        let text = '';
        res.on('data', (b: Buffer) => (text += b.toString()));
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          if (status < 300) resolve('ok');
          else resolve({ status, message: statusMessage(text) });
        });
      });
      req.on('error', reject);
      req.end(body === undefined ? undefined : JSON.stringify(body));
    });
  }

  const podPath = (name?: string, sub?: string): string => `${apiPath('', 'v1', 'pods', ns, name)}${sub ? `/${sub}` : ''}`;
  const pod = (name: string, annotations?: Record<string, string>): V1Pod => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, ...(annotations ? { annotations } : {}) },
    spec: { automountServiceAccountToken: false, containers: [{ name: 'app', image: 'nginx' }] },
  });
  /** A pod created by the admin (who is not one of the writers either: the annotation is added by a writer). */
  async function podWithStatus(name: string): Promise<void> {
    await cp.client.create(podPath(), pod(name));
    assert.equal(await setStatusAs(multus, name, STATUS_A), 'ok');
  }
  /** As Multus writes it: GET the pod, set the annotation, PUT pods/status (UpdateStatus). */
  async function setStatusAs(who: Identity, name: string, value: string | null): Promise<Answer> {
    const p = await cp.client.get<V1Pod>(podPath(name));
    const annotations = { ...p.metadata?.annotations };
    if (value === null) delete annotations[NETWORK_STATUS_ANNOTATION];
    else annotations[NETWORK_STATUS_ANNOTATION] = value;
    return send(who, 'PUT', podPath(name, 'status'), { ...p, metadata: { ...p.metadata, annotations } });
  }
  const refusal = (a: Answer): string => {
    assert.notEqual(a, 'ok', 'refused');
    if (a === 'ok') return '';
    assert.equal(a.status, 403, a.message);
    return a.message;
  };
  const WHO_MAY = new RegExp(
    `${POLICY}.*the pod annotation k8s\\.v1\\.cni\\.cncf\\.io/network-status may be set or changed only by Multus and the nodes \\(users: ${MULTUS}; groups: system:nodes\\), not by system:serviceaccount:[a-z0-9-]+:tenant`,
  );

  async function install(objects: Rendered[]): Promise<void> {
    assert.deepEqual(objects.map((o) => o.kind).sort(), ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
    for (const o of objects) {
      const resource = o.kind === 'ValidatingAdmissionPolicy' ? 'validatingadmissionpolicies' : 'validatingadmissionpolicybindings';
      await cp.client.patch(apiPath(ADMISSION, 'v1', resource, undefined, o.metadata?.name), o, 'apply', { fieldManager: 'network-status-writers-test', force: true });
    }
  }
  async function renderComponent(kustomization: string): Promise<Rendered[]> {
    const component = relative(dir, join(DEPLOY, 'components', 'network-status-writers'));
    writeFileSync(join(dir, 'kustomization.yaml'), `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\ncomponents:\n  - ${component}\n${kustomization}`);
    return render(dir);
  }

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('nsw');
    await cp.createNamespace(ns);
    dir = mkdtempSync(join(tmpdir(), 'vap-nsw-'));
    // The tenant: `admin` in its namespace, and (beyond what admin has) pods/status, to show the
    // subresource is guarded too. Multus: its upstream ClusterRole's pod rights. The node: the same
    // (the Node authorizer is not on here; NodeRestriction would bound it to its own pods).
    const writer = `${ns}-pod-writer`;
    cleanup.push(writer);
    await cp.client.create(apiPath(RBAC, 'v1', 'clusterroles'), {
      apiVersion: `${RBAC}/v1`,
      kind: 'ClusterRole',
      metadata: { name: writer },
      rules: [{ apiGroups: [''], resources: ['pods', 'pods/status'], verbs: ['get', 'list', 'create', 'update', 'patch'] }],
    });
    await cp.client.create(apiPath(RBAC, 'v1', 'rolebindings', ns), {
      apiVersion: `${RBAC}/v1`,
      kind: 'RoleBinding',
      metadata: { name: 'tenant-admin' },
      roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name: 'admin' },
      subjects: [{ kind: 'ServiceAccount', name: 'tenant', namespace: ns }],
    });
    await cp.client.create(apiPath(RBAC, 'v1', 'rolebindings', ns), {
      apiVersion: `${RBAC}/v1`,
      kind: 'RoleBinding',
      metadata: { name: 'pod-writers' },
      roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name: writer },
      subjects: [
        { kind: 'ServiceAccount', name: 'tenant', namespace: ns },
        { kind: 'ServiceAccount', name: 'multus', namespace: 'kube-system' },
        { kind: 'Group', apiGroup: RBAC, name: 'system:nodes' },
      ],
    });
    tenant = { token: await cp.tokenFor(ns, 'tenant') };
    multus = { token: await cp.tokenFor('kube-system', 'multus') };
    await install(await renderComponent(''));
    // The policy is compiled by the apiserver a moment after it is created.
    await waitFor('the policy in force', async () => {
      const name = uniqueName('probe');
      const a = await send(tenant, 'POST', podPath(), pod(name, { [NETWORK_STATUS_ANNOTATION]: STATUS_A }));
      if (a === 'ok') await cp.client.delete(podPath(name));
      return a !== 'ok';
    }, 20_000);
  });

  after(async () => {
    for (const resource of ['validatingadmissionpolicybindings', 'validatingadmissionpolicies']) {
      await cp?.client.delete(apiPath(ADMISSION, 'v1', resource, undefined, POLICY)).catch(() => undefined);
    }
    for (const name of cleanup) await cp?.client.delete(apiPath(RBAC, 'v1', 'clusterroles', undefined, name)).catch(() => undefined);
    await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns)).catch(() => undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
    await cp?.stop();
  });

  void test('a pod owner creating a pod with network-status is refused, naming the key and who may set it; without it the pod is admitted', async () => {
    assert.match(refusal(await send(tenant, 'POST', podPath(), pod('forged', { [NETWORK_STATUS_ANNOTATION]: STATUS_A }))), WHO_MAY);
    assert.equal(await send(tenant, 'POST', podPath(), pod('plain', { other: 'x' })), 'ok');
  });

  void test('Multus (pods/status, as it writes) and a node may set and change it; the pod owner may not add, change or remove it, on the pod or its status', async () => {
    await cp.client.create(podPath(), pod('by-multus'));
    assert.equal(await setStatusAs(multus, 'by-multus', STATUS_A), 'ok', 'Multus sets it');
    assert.equal(await setStatusAs(multus, 'by-multus', STATUS_B), 'ok', 'Multus changes it');
    assert.equal(await setStatusAs(node, 'by-multus', STATUS_A), 'ok', 'a node changes it');
    assert.equal(await send(node, 'PATCH', podPath('by-multus'), { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: STATUS_B } } }), 'ok', 'a node, on the pod itself');

    assert.match(refusal(await send(tenant, 'PATCH', podPath('by-multus'), { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: STATUS_A } } })), WHO_MAY);
    assert.match(refusal(await send(tenant, 'PATCH', podPath('by-multus'), { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: null } } })), WHO_MAY, 'removing it');
    assert.match(refusal(await setStatusAs(tenant, 'by-multus', STATUS_A)), WHO_MAY, 'through pods/status');
    await cp.client.create(podPath(), pod('empty'));
    assert.match(refusal(await send(tenant, 'PATCH', podPath('empty'), { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: STATUS_A } } })), WHO_MAY, 'adding it later');
    const p = await cp.client.get<V1Pod>(podPath('by-multus'));
    assert.equal(p.metadata?.annotations?.[NETWORK_STATUS_ANNOTATION], STATUS_B, 'still what the node wrote');
  });

  void test('updates that leave it as it is pass for anyone: labels, other annotations, status (as the kubelet writes it)', async () => {
    await podWithStatus('unchanged');
    assert.equal(await send(tenant, 'PATCH', podPath('unchanged'), { metadata: { labels: { app: 'web' }, annotations: { other: 'y' } } }), 'ok');
    assert.equal(await send(tenant, 'PATCH', podPath('unchanged'), { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: STATUS_A } } }), 'ok', 'the same value again');
    assert.equal(await send(node, 'PATCH', podPath('unchanged', 'status'), { status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] } }), 'ok', 'kubelet-style status');
    assert.equal(await send(tenant, 'PATCH', podPath('unchanged', 'status'), { status: { conditions: [{ type: 'Ready', status: 'False' }] } }), 'ok', 'any status writer');
    assert.equal((await cp.client.get<V1Pod>(podPath('unchanged'))).metadata?.annotations?.[NETWORK_STATUS_ANNOTATION], STATUS_A);
  });

  void test('the identity patch of docs/install.md: another writer is allowed, the defaults it lists still are, the tenant still is not', async () => {
    const other = `system:serviceaccount:${ns}:cni-writer`;
    // The patch as docs/install.md shows it (variables 0 and 1 are users and groups).
    const patched = await renderComponent(
      [
        'patches:',
        '  - target: {kind: ValidatingAdmissionPolicy, name: multus-proxy-network-status-writers}',
        '    patch: |-',
        '      - op: replace',
        '        path: /spec/variables/0/expression',
        `        value: '["${MULTUS}", "${other}"]'`,
        '',
      ].join('\n'),
    );
    await install(patched);
    await cp.client.create(apiPath(RBAC, 'v1', 'rolebindings', ns), {
      apiVersion: `${RBAC}/v1`,
      kind: 'RoleBinding',
      metadata: { name: 'cni-writer' },
      roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name: `${ns}-pod-writer` },
      subjects: [{ kind: 'ServiceAccount', name: 'cni-writer', namespace: ns }],
    });
    const cni: Identity = { token: await cp.tokenFor(ns, 'cni-writer') };
    await cp.client.create(podPath(), pod('by-other'));
    await waitFor('the patched policy in force', async () => (await setStatusAs(cni, 'by-other', STATUS_A)) === 'ok', 20_000);
    assert.equal(await setStatusAs(multus, 'by-other', STATUS_B), 'ok');
    assert.equal(await setStatusAs(node, 'by-other', STATUS_A), 'ok');
    const message = refusal(await setStatusAs(tenant, 'by-other', STATUS_B));
    assert.match(message, new RegExp(`users: ${MULTUS}, ${other}; groups: system:nodes\\), not by system:serviceaccount:${ns}:tenant`));
  });
});
