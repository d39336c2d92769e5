/**
 * The RBAC in deploy/ is enough, and the programs really run under it: the manifests' RBAC is
 * applied to a real kube-apiserver, then each program is started from its real entry point with
 * the arguments of its rendered Deployment or Job and a kubeconfig holding a token of its own
 * ServiceAccount (never admin). A permission missing from the manifests makes a step below time
 * out or a 403 appear in the program's log, and the test fails.
 *
 * - controller: reconciles a Service into an EndpointSlice, writes a Warning Event, holds its
 *   Lease, binds the sidecar roles for an enabled namespace and unbinds them when the label goes,
 *   deletes the slices of a deleted Service.
 * - webhook: reads the pod's Namespace (injection) and looks NetworkAttachmentDefinitions up.
 * - certs (bootstrap overlay): creates both Secrets and patches caBundle into both webhook
 *   configurations.
 * - sidecar: the real program, in a client "pod" network namespace, with a token of that pod's
 *   ServiceAccount, which only the controller's binding lets read anything: it must sync the
 *   Service the controller published. SelfSubjectAccessReviews add what it must NOT be able to do.
 *
 * A private control plane: the controller runs cluster-wide with the real Lease name, and the
 * webhook configurations exist for real for a moment, neither of which may touch other tests. It
 * also enables the OwnerReferencesPermissionEnforcement admission plugin, as hardened clusters do.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, startControlPlane, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { createTopology } from '../harness/netns.js';
import { startApiserverRelay, type ApiserverRelay } from '../harness/apiserver-relay.js';
import { endpointsOf, probe, rulesOf, spawnSidecar, type SidecarProcess } from '../sidecar/runtime-harness.js';
import { createKubeClient, type KubeClient } from '../../src/kube/client.js';
import { formatDownwardMap } from '../../src/annotations/downward-api.js';
import { apiPath } from '../../src/kube/paths.js';
import type { CoreV1Event, V1ClusterRoleBinding, V1EndpointSlice, V1Lease, V1Secret, V1Service } from '../../src/kube/types.js';
import {
  INJECTION_ENABLED,
  INJECTION_LABEL,
  INSTALL_NAMESPACE,
  MANAGED_BY,
  MANAGED_BY_LABEL,
  NETWORK_STATUS_ANNOTATION,
  NETWORKS_ANNOTATION,
  PROXY_NAME,
  PROXY_NAME_LABEL,
  SERVICE_NAME_LABEL,
  SERVICE_NETWORK_ANNOTATION,
  SIDECAR_CONTAINER_NAME,
  NODE_AGENT_DAEMONSET,
  NODE_AGENT_NAMESPACE,
} from '../../src/keys.js';
import { REPO, at, containerArgs, find, podSpec, render, type ContainerLike, type Rendered } from './kustomize.js';

const FIELD_MANAGER = 'multus-proxy-rbac-test';
const RBAC_KINDS = new Set(['Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding']);
const APP_NS = 'rbac-app';
const RBAC = 'rbac.authorization.k8s.io';

let cp: ControlPlane;
let dir: string;
let base: Rendered[];
let bootstrap: Rendered[];
const programs: Program[] = [];

/** A program under test: its output is kept, so a 403 anywhere in it fails the test. */
class Program {
  readonly child: ChildProcess;
  output = '';
  constructor(
    readonly name: string,
    argv: string[],
    env: Record<string, string>,
  ) {
    // The real entry points through tsx: the image runs the same code as an esbuild bundle.
    this.child = spawn(process.execPath, ['--import', 'tsx', ...argv], {
      cwd: REPO,
      env: { PATH: process.env['PATH'] ?? '/usr/bin:/bin', HOME: process.env['HOME'] ?? '/root', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const keep = (b: Buffer): void => {
      this.output += b.toString();
    };
    this.child.stdout?.on('data', keep);
    this.child.stderr?.on('data', keep);
    programs.push(this);
  }
  exited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }
  async exit(): Promise<number | null> {
    if (!this.exited()) await new Promise((r) => this.child.once('exit', r));
    return this.child.exitCode;
  }
  async stop(): Promise<void> {
    if (this.exited()) return;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 10_000);
    await this.exit();
    clearTimeout(timer);
  }
  /** Lines of its log that report a refusal by RBAC. */
  forbidden(): string[] {
    return this.output.split('\n').filter((l) => /\b403\b|forbidden/i.test(l));
  }
  tail(): string {
    return `--- ${this.name} output ---\n${this.output.split('\n').slice(-30).join('\n')}`;
  }
}

function firstContainer(o: Rendered): ContainerLike {
  const c = podSpec(o)?.containers?.[0];
  if (c === undefined) throw new Error(`${o.kind} ${o.metadata?.name} has no container`);
  return c;
}

/** The source entry point for a bundle the manifests name (`/app/dist/controller.js` -> cmd/controller/main.ts). */
function entryPoint(c: ContainerLike): string {
  const bundle = /\/app\/dist\/([a-z]+)\.js$/.exec(c.command?.at(-1) ?? '')?.[1];
  const entries: Record<string, string> = { controller: 'cmd/controller/main.ts', webhook: 'cmd/webhook/main.ts', certs: 'cmd/certs/cli.ts', sidecar: 'cmd/sidecar/main.ts' };
  const entry = bundle === undefined ? undefined : entries[bundle];
  if (entry === undefined) throw new Error(`unknown program ${JSON.stringify(c.command)}`);
  return entry;
}

async function applyForReal(client: KubeClient, objs: Rendered[]): Promise<void> {
  const plural: Record<string, [string, string]> = {
    Namespace: ['', 'namespaces'],
    ServiceAccount: ['', 'serviceaccounts'],
    ClusterRole: [RBAC, 'clusterroles'],
    ClusterRoleBinding: [RBAC, 'clusterrolebindings'],
    Role: [RBAC, 'roles'],
    RoleBinding: [RBAC, 'rolebindings'],
    MutatingWebhookConfiguration: ['admissionregistration.k8s.io', 'mutatingwebhookconfigurations'],
    ValidatingWebhookConfiguration: ['admissionregistration.k8s.io', 'validatingwebhookconfigurations'],
  };
  for (const o of objs) {
    const [group, resource] = plural[o.kind ?? ''] ?? [];
    if (resource === undefined) throw new Error(`applyForReal: ${o.kind} not expected`);
    await client.patch(apiPath(group ?? '', 'v1', resource, o.metadata?.namespace, o.metadata?.name), o, 'apply', { fieldManager: FIELD_MANAGER, force: true });
  }
}

before(async () => {
  // OwnerReferencesPermissionEnforcement (on in OpenShift and hardened clusters): setting
  // blockOwnerDeletion on a slice's owner reference then needs update on services/finalizers.
  cp = await startControlPlane({ extraApiserverArgs: ['--enable-admission-plugins=OwnerReferencesPermissionEnforcement'] });
  dir = mkdtempSync(join(tmpdir(), 'multus-proxy-rbac-'));
  base = await render('deploy/base');
  bootstrap = await render('deploy/overlays/bootstrap');
  await applyForReal(cp.client, base.filter((o) => RBAC_KINDS.has(o.kind ?? '')));
  await applyForReal(cp.client, bootstrap.filter((o) => RBAC_KINDS.has(o.kind ?? '') && o.metadata?.name === 'multus-proxy-certs'));
});

after(async () => {
  for (const p of programs) await p.stop();
  await cp?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function assertNoForbidden(p: Program): void {
  assert.deepEqual(p.forbidden(), [], `${p.name} was refused something:\n${p.tail()}`);
}

void describe('controller with its own ServiceAccount', () => {
  let controller: Program;
  let healthPort: number;
  const podName = 'multus-proxy-controller-7d9f-abcde';

  before(async () => {
    await cp.createNamespace(APP_NS, { [INJECTION_LABEL]: INJECTION_ENABLED });
    const c = firstContainer(find(base, 'Deployment', 'multus-proxy-controller'));
    const { args, env } = containerArgs(c, { name: podName, namespace: INSTALL_NAMESPACE });
    healthPort = await freePort();
    const kubeconfig = await cp.kubeconfigFor(INSTALL_NAMESPACE, 'multus-proxy-controller');
    controller = new Program('controller', [entryPoint(c), ...args, `--kubeconfig=${kubeconfig}`, `--health-port=${healthPort}`, '--health-host=127.0.0.1'], env);
    await waitFor(
      'controller /readyz',
      async () => {
        if (controller.exited()) throw new Error(`controller exited:\n${controller.tail()}`);
        return (await fetch(`http://127.0.0.1:${healthPort}/readyz`).catch(() => undefined))?.status === 200;
      },
      60_000,
      () => controller.tail(),
    );
  });

  void test('holds its Lease in the install namespace', async () => {
    await waitFor(
      'Lease multus-proxy-controller held by the pod',
      async () => {
        const lease = await cp.client.get<V1Lease>(apiPath('coordination.k8s.io', 'v1', 'leases', INSTALL_NAMESPACE, 'multus-proxy-controller')).catch(() => undefined);
        return lease?.spec?.holderIdentity === podName;
      },
      30_000,
      () => controller.tail(),
    );
  });

  void test('reconciles a Service into an EndpointSlice of secondary addresses and reports a bad pod with an Event', async () => {
    await cp.client.create(apiPath('', 'v1', 'services', APP_NS), {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: APP_NS, labels: { [PROXY_NAME_LABEL]: PROXY_NAME }, annotations: { [SERVICE_NETWORK_ANNOTATION]: 'macvlan1' } },
      spec: { selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }] },
    });
    const pod = (name: string, status: string): unknown => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: APP_NS, labels: { app: 'web' }, annotations: { [NETWORK_STATUS_ANNOTATION]: status } },
      spec: { containers: [{ name: 'web', image: 'nginx', ports: [{ containerPort: 8080 }] }] },
    });
    const status = JSON.stringify([
      { name: 'cbr0', interface: 'eth0', ips: ['10.244.0.5'], default: true },
      { name: `${APP_NS}/macvlan1`, interface: 'net1', ips: ['192.168.50.11'] },
    ]);
    await cp.client.create(apiPath('', 'v1', 'pods', APP_NS), pod('web-1', status));
    await cp.client.create(apiPath('', 'v1', 'pods', APP_NS), pod('web-bad', '{not json'));
    // No kubelet: mark web-1 Running and Ready as one would.
    await cp.client.patch(
      `${apiPath('', 'v1', 'pods', APP_NS, 'web-1')}/status`,
      { status: { phase: 'Running', podIP: '10.244.0.5', conditions: [{ type: 'Ready', status: 'True' }] } },
      'merge',
    );
    const slices = async (): Promise<V1EndpointSlice[]> =>
      (await cp.client.list<V1EndpointSlice>(apiPath('discovery.k8s.io', 'v1', 'endpointslices', APP_NS), { labelSelector: `${SERVICE_NAME_LABEL}=web,${MANAGED_BY_LABEL}=${MANAGED_BY}` })).items;
    await waitFor(
      'an EndpointSlice with 192.168.50.11',
      async () => (await slices()).some((s) => s.endpoints.some((e) => e.addresses.includes('192.168.50.11'))),
      30_000,
      () => controller.tail(),
    );
    await waitFor(
      'a Warning Event on Service web naming web-bad',
      async () => {
        const events = (await cp.client.list<CoreV1Event>(apiPath('', 'v1', 'events', APP_NS))).items;
        return events.some((e) => e.type === 'Warning' && e.involvedObject.name === 'web' && (e.message ?? '').includes('web-bad'));
      },
      30_000,
      () => controller.tail(),
    );
    assertNoForbidden(controller);
  });

  void test('sidecar: a client pod\'s ServiceAccount, bound by the controller, is enough for the real sidecar to sync the Service', async () => {
    // The real sidecar program in a client "pod" network namespace (root, iproute2, iptables),
    // reaching the apiserver through the harness relay, with a token of the pod's ServiceAccount.
    const topo = await createTopology();
    let relay: ApiserverRelay | undefined;
    let sc: SidecarProcess | undefined;
    try {
      const pod = await topo.addPod('client');
      relay = await startApiserverRelay(topo, cp.server, dir);
      await relay.attach(pod);
      const annotations = {
        [SERVICE_NETWORK_ANNOTATION]: 'macvlan1',
        [NETWORK_STATUS_ANNOTATION]: JSON.stringify([
          { name: 'cbr0', interface: 'eth0', ips: [pod.eth0.ipv4], default: true },
          { name: `${APP_NS}/macvlan1`, interface: 'net1', ips: [pod.net1.ipv4] },
        ]),
      };
      await cp.client.create(apiPath('', 'v1', 'pods', APP_NS), {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'client', namespace: APP_NS, annotations },
        // As injected: the controller binds the ServiceAccounts of pods with the sidecar container.
        spec: { serviceAccountName: 'default', containers: [{ name: SIDECAR_CONTAINER_NAME, image: 'multus-proxy' }, { name: 'app', image: 'busybox' }] },
      });
      // The pod's annotations as the kubelet writes the downwardAPI volume the webhook mounts:
      // the ServiceAccount may not read pods, so this file is the sidecar's only view of its pod.
      const podinfo = join(dir, 'podinfo');
      mkdirSync(podinfo, { recursive: true });
      writeFileSync(join(podinfo, 'annotations'), formatDownwardMap(annotations));
      const kubeconfig = await cp.kubeconfigFor(APP_NS, 'default');
      sc = spawnSidecar(topo, pod, { podName: 'client', podNamespace: APP_NS, kubeconfig, healthPort: 19180, env: { POD_ANNOTATIONS_FILE: join(podinfo, 'annotations') } });
      const running = sc;
      const lastLogs = (): string =>
        running.stderr() +
        running
          .logs()
          .slice(-3)
          .map((l) => `${String(l['msg'])}: ${String((l['err'] as { message?: string } | undefined)?.message ?? '')}`)
          .join('\n');
      await waitFor('sidecar /readyz 200 (first complete sync)', async () => (await probe(topo, pod, 19180, '/readyz')) === 200, 30_000, lastLogs);
      const svc = await cp.client.get<V1Service>(apiPath('', 'v1', 'services', APP_NS, 'web'));
      await waitFor(
        'rules for Service web with the controller\'s endpoint',
        async () => JSON.stringify(endpointsOf(await rulesOf(topo, pod, 4), svc.spec?.clusterIP ?? '')) === JSON.stringify(['192.168.50.11:8080']),
        30_000,
        lastLogs,
      );
      const refused = running.logs().filter((l) => /\b403\b|forbidden/i.test(JSON.stringify(l)));
      assert.deepEqual(refused, [], 'the sidecar was refused something');
    } finally {
      await sc?.terminate(5000);
      await relay?.close();
      await topo.teardown();
    }
  });

  void test('binds the sidecar roles for an enabled namespace and unbinds them when the label goes', async () => {
    // The injected client pod's ServiceAccount (the sidecar test above), never the namespace's group.
    const group = `${APP_NS}/default`;
    const crbPath = apiPath(RBAC, 'v1', 'clusterrolebindings', undefined, 'multus-proxy-sidecar');
    const rbPath = apiPath(RBAC, 'v1', 'rolebindings', APP_NS, 'multus-proxy-sidecar-pods');
    const subjects = async (): Promise<string[]> => ((await cp.client.get<V1ClusterRoleBinding>(crbPath).catch(() => undefined))?.subjects ?? []).map((s) => `${s.namespace ?? ''}/${s.name}`);
    const rbExists = async (): Promise<boolean> => (await cp.client.get(rbPath).then(() => true, () => false));
    await waitFor('ClusterRoleBinding multus-proxy-sidecar names the injected pod\'s ServiceAccount', async () => (await subjects()).includes(group), 30_000, () => controller.tail());
    await waitFor('RoleBinding multus-proxy-sidecar-pods in the namespace', rbExists, 30_000, () => controller.tail());

    await cp.client.patch(apiPath('', 'v1', 'namespaces', undefined, APP_NS), { metadata: { labels: { [INJECTION_LABEL]: null } } }, 'merge');
    await waitFor('the namespace unbound', async () => !(await subjects()).includes(group) && !(await rbExists()), 30_000, () => controller.tail());
    await cp.client.patch(apiPath('', 'v1', 'namespaces', undefined, APP_NS), { metadata: { labels: { [INJECTION_LABEL]: INJECTION_ENABLED } } }, 'merge');
    await waitFor('the namespace bound again', async () => (await subjects()).includes(group) && (await rbExists()), 30_000, () => controller.tail());
    assertNoForbidden(controller);
  });

  void test('a stray RoleBinding named like the sidecars\' one: the Event names it and the fix (the controller may get it)', async () => {
    // Without get on rolebindings/multus-proxy-sidecar-pods the controller cannot look at the
    // binding in the way, and the Event only repeats the create's 409.
    const stray = 'rbac-stray';
    await cp.createNamespace(stray);
    await cp.client.create(apiPath(RBAC, 'v1', 'rolebindings', stray), {
      apiVersion: `${RBAC}/v1`,
      kind: 'RoleBinding',
      metadata: { name: 'multus-proxy-sidecar-pods', namespace: stray },
      roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name: 'view' },
      subjects: [{ kind: 'ServiceAccount', name: 'default', namespace: stray }],
    });
    await cp.client.patch(apiPath('', 'v1', 'namespaces', undefined, stray), { metadata: { labels: { [INJECTION_LABEL]: INJECTION_ENABLED } } }, 'merge');
    const event = async (): Promise<CoreV1Event | undefined> =>
      (await cp.client.list<CoreV1Event>(apiPath('', 'v1', 'events', stray))).items.find((e) => e.reason === 'SidecarRbacFailed');
    await waitFor('a SidecarRbacFailed Event in the stray namespace', async () => (await event()) !== undefined, 30_000, () => controller.tail());
    const message = (await event())?.message ?? '';
    assert.match(message, /RoleBinding rbac-stray\/multus-proxy-sidecar-pods exists and is not managed by multus-proxy .*delete or rename it/, message);
    assertNoForbidden(controller);
  });

  void test('deletes the slices of a deleted Service, and gives its Lease up on SIGTERM', async () => {
    await cp.client.delete(apiPath('', 'v1', 'services', APP_NS, 'web'));
    // No garbage collector runs here: the controller must delete the slices itself.
    await waitFor(
      'slices of Service web gone',
      async () => (await cp.client.list(apiPath('discovery.k8s.io', 'v1', 'endpointslices', APP_NS), { labelSelector: `${SERVICE_NAME_LABEL}=web` })).items.length === 0,
      30_000,
      () => controller.tail(),
    );
    await controller.stop();
    const lease = await cp.client.get<V1Lease>(apiPath('coordination.k8s.io', 'v1', 'leases', INSTALL_NAMESPACE, 'multus-proxy-controller'));
    assert.notEqual(lease.spec?.holderIdentity, podName, 'lease released');
    assertNoForbidden(controller);
  });
});

/** POSTs JSON over HTTPS trusting only `ca`. */
function postJson(url: string, ca: string, body: unknown): Promise<{ status: number; json: unknown }> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method: 'POST', ca, headers: { 'content-type': 'application/json' }, agent: false }, (res) => {
      let text = '';
      res.on('data', (b: Buffer) => (text += b.toString()));
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) as unknown });
        } catch (e) {
          reject(new Error(`${url}: not JSON: ${text}`, { cause: e }));
        }
      });
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

function review(kind: 'Pod' | 'Service', namespace: string, object: unknown): unknown {
  const resource = kind === 'Pod' ? 'pods' : 'services';
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: `uid-${kind}-${Math.random().toString(16).slice(2)}`,
      kind: { group: '', version: 'v1', kind },
      resource: { group: '', version: 'v1', resource },
      requestKind: { group: '', version: 'v1', kind },
      requestResource: { group: '', version: 'v1', resource },
      namespace,
      operation: 'CREATE',
      userInfo: { username: 'test' },
      object,
      dryRun: false,
    },
  };
}

interface ReviewResponse {
  response?: { allowed: boolean; patch?: string; warnings?: string[]; status?: { message?: string } };
}

void describe('webhook with its own ServiceAccount', () => {
  const WEB_NS = 'rbac-web';
  let webhook: Program;
  let url: string;
  let ca: string;

  before(async () => {
    await cp.createNamespace(WEB_NS, { [INJECTION_LABEL]: INJECTION_ENABLED });
    await cp.client.create(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', WEB_NS), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name: 'macvlan1', namespace: WEB_NS },
      spec: { config: '{"cniVersion":"0.3.1","type":"macvlan"}' },
    });
    // Serving certificate for 127.0.0.1 from the project's own certs CLI.
    const tlsDir = join(dir, 'webhook-tls');
    const gen = new Program('certs generate', ['cmd/certs/cli.ts', 'generate', `--out=${tlsDir}`, '--ip=127.0.0.1'], {});
    assert.equal(await gen.exit(), 0, gen.tail());
    ca = readFileSync(join(tlsDir, 'ca.crt'), 'utf8');
    // The ConfigMap, as the kubelet would mount it: one file per key.
    const deploy = find(base, 'Deployment', 'multus-proxy-webhook');
    const c = firstContainer(deploy);
    const configDir = join(dir, 'webhook-config');
    rmSync(configDir, { recursive: true, force: true });
    mkdirSync(configDir);
    for (const [k, v] of Object.entries((at(find(base, 'ConfigMap', 'multus-proxy-webhook'), 'data') as Record<string, string>) ?? {})) writeFileSync(join(configDir, k), v);
    const { args, env } = containerArgs(c, { name: 'multus-proxy-webhook-0', namespace: INSTALL_NAMESPACE });
    const port = await freePort();
    const kubeconfig = await cp.kubeconfigFor(INSTALL_NAMESPACE, 'multus-proxy-webhook');
    webhook = new Program(
      'webhook',
      [
        entryPoint(c),
        ...args,
        `--config=${join(configDir, 'config.yaml')}`,
        `--tls-cert-file=${join(tlsDir, 'tls.crt')}`,
        `--tls-key-file=${join(tlsDir, 'tls.key')}`,
        `--port=${port}`,
        '--host=127.0.0.1',
        `--kubeconfig=${kubeconfig}`,
      ],
      env,
    );
    url = `https://127.0.0.1:${port}`;
    await waitFor(
      'webhook /readyz',
      async () => {
        if (webhook.exited()) throw new Error(`webhook exited:\n${webhook.tail()}`);
        return new Promise<boolean>((resolve) => {
          https.get(`${url}/readyz`, { ca, agent: false }, (res) => resolve(res.statusCode === 200)).on('error', () => resolve(false));
        });
      },
      60_000,
      () => webhook.tail(),
    );
  });

  const path = (kind: 'pods' | 'services', verb: 'mutate' | 'validate'): string => {
    const mwc = find(base, verb === 'mutate' ? 'MutatingWebhookConfiguration' : 'ValidatingWebhookConfiguration', 'multus-proxy-webhook');
    const hooks = mwc['webhooks'] as { rules: { resources: string[] }[]; clientConfig: { service: { path: string } } }[];
    const hook = hooks.find((h) => h.rules.some((r) => r.resources.includes(kind)));
    if (hook === undefined) throw new Error(`no ${verb} webhook for ${kind}`);
    return hook.clientConfig.service.path;
  };

  void test('injects the sidecar into a pod that asks, in an enabled namespace (reads the Namespace)', async () => {
    const pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { generateName: 'client-', namespace: WEB_NS, annotations: { [SERVICE_NETWORK_ANNOTATION]: 'macvlan1', [NETWORKS_ANNOTATION]: 'macvlan1' } },
      spec: { containers: [{ name: 'app', image: 'busybox' }] },
    };
    const { status, json } = await postJson(`${url}${path('pods', 'mutate')}`, ca, review('Pod', WEB_NS, pod));
    assert.equal(status, 200);
    const r = (json as ReviewResponse).response;
    assert.equal(r?.allowed, true, JSON.stringify(json));
    const patch = Buffer.from(r?.patch ?? '', 'base64').toString();
    assert.ok(patch.includes(`"name":"${SIDECAR_CONTAINER_NAME}"`), `patch adds the sidecar: ${patch}`);
    assertNoForbidden(webhook);
  });

  void test('tells an existing NetworkAttachmentDefinition from a missing one (reads NADs)', async () => {
    const svc = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'web', namespace: WEB_NS, labels: { [PROXY_NAME_LABEL]: PROXY_NAME }, annotations: { [SERVICE_NETWORK_ANNOTATION]: 'macvlan1,missing1' } },
      spec: { selector: { app: 'web' }, ports: [{ port: 80 }] },
    };
    const { json } = await postJson(`${url}${path('services', 'validate')}`, ca, review('Service', WEB_NS, svc));
    const r = (json as ReviewResponse).response;
    assert.equal(r?.allowed, true, JSON.stringify(json));
    const warnings = r?.warnings ?? [];
    assert.ok(warnings.some((w) => w.includes(`${WEB_NS}/missing1`) && w.includes('does not exist')), `missing1 reported: ${JSON.stringify(warnings)}`);
    assert.ok(!warnings.some((w) => w.includes('could not be checked')), `every lookup answered: ${JSON.stringify(warnings)}`);
    assert.ok(!warnings.some((w) => w.includes(`${WEB_NS}/macvlan1`)), `macvlan1 exists: ${JSON.stringify(warnings)}`);
    assertNoForbidden(webhook);
  });

  void test('a LoadBalancer Service without the node agent: a warning and a Warning Event (creates Events); with the component\'s RBAC and a ready DaemonSet: neither (gets that DaemonSet)', async () => {
    const lb = {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'lb', namespace: WEB_NS, labels: { [PROXY_NAME_LABEL]: PROXY_NAME }, annotations: { [SERVICE_NETWORK_ANNOTATION]: 'macvlan1' } },
      spec: { type: 'LoadBalancer', selector: { app: 'web' }, ports: [{ port: 80 }], loadBalancerSourceRanges: ['203.0.113.0/24'] },
    };
    const warningsNow = async (): Promise<string[]> => {
      const { json } = await postJson(`${url}${path('services', 'validate')}`, ca, review('Service', WEB_NS, lb));
      const r = (json as ReviewResponse).response;
      assert.equal(r?.allowed, true, JSON.stringify(json));
      return r?.warnings ?? [];
    };
    const before = await warningsNow();
    assert.ok(before.some((w) => w.includes('type LoadBalancer is not served on the secondary network: the multus-proxy-node agent is not installed')), JSON.stringify(before));
    await waitFor(
      'the NodeAgentMissing Event',
      async () => (await cp.client.list<CoreV1Event>(apiPath('', 'v1', 'events', WEB_NS))).items.some((e) => e.type === 'Warning' && e.reason === 'NodeAgentMissing' && e.involvedObject.kind === 'Service' && e.involvedObject.name === 'lb' && (e.message ?? '').includes('not installed')),
      20_000,
      () => webhook.tail(),
    );
    // Install the component's RBAC (as deploy/overlays/node-agent does) and a DaemonSet with a ready pod.
    const component = (await render('deploy/overlays/node-agent')).filter((o) => o.metadata?.namespace === NODE_AGENT_NAMESPACE || (o.kind === 'Namespace' && o.metadata?.name === NODE_AGENT_NAMESPACE));
    await applyForReal(cp.client, component.filter((o) => o.kind === 'Namespace' || o.kind === 'Role' || o.kind === 'RoleBinding'));
    const dsPath = apiPath('apps', 'v1', 'daemonsets', NODE_AGENT_NAMESPACE, NODE_AGENT_DAEMONSET);
    await cp.client.create(apiPath('apps', 'v1', 'daemonsets', NODE_AGENT_NAMESPACE), {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: NODE_AGENT_DAEMONSET, namespace: NODE_AGENT_NAMESPACE },
      spec: { selector: { matchLabels: { app: 'agent' } }, template: { metadata: { labels: { app: 'agent' } }, spec: { containers: [{ name: 'agent', image: 'multus-proxy:0.1.0' }] } } },
    });
    const ds = await cp.client.get<{ status?: Record<string, number> }>(dsPath);
    await cp.client.replace(`${dsPath}/status`, { ...ds, status: { currentNumberScheduled: 1, desiredNumberScheduled: 1, numberMisscheduled: 0, numberReady: 1 } });
    await waitFor('no warning once the agent runs (the webhook caches its answer for 10 s)', async () => !(await warningsNow()).some((w) => w.includes('not served') || w.includes('not installed')), 30_000, () => webhook.tail());
    assertNoForbidden(webhook);
  });
});

void describe('certs bootstrap (overlays/bootstrap) with its own ServiceAccount', () => {
  void test('creates both Secrets and sets caBundle on both webhook configurations; a second run changes nothing', async () => {
    const configs = bootstrap.filter((o) => o.kind === 'MutatingWebhookConfiguration' || o.kind === 'ValidatingWebhookConfiguration');
    assert.equal(configs.length, 2);
    // For real, but only for this test: with failurePolicy Fail they would refuse annotated
    // Services, since no webhook Service exists in this control plane.
    await applyForReal(cp.client, configs);
    try {
      const job = find(bootstrap, 'Job', 'multus-proxy-certs');
      const c = firstContainer(job);
      assert.equal(podSpec(job)?.serviceAccountName, 'multus-proxy-certs');
      const kubeconfig = await cp.kubeconfigFor(INSTALL_NAMESPACE, 'multus-proxy-certs');
      for (const round of [1, 2]) {
        const run = new Program(`certs bootstrap #${round}`, [entryPoint(c), ...(c.args ?? []), `--kubeconfig=${kubeconfig}`], {});
        assert.equal(await run.exit(), 0, run.tail());
        assertNoForbidden(run);
        if (round === 2) assert.match(run.output, /"caSecretWritten":false,"servingSecretWritten":false/, run.tail());
      }
      const secretName = (c.args ?? []).find((a) => a.startsWith('--secret='))?.slice('--secret='.length) ?? '';
      const secret = await cp.client.get<V1Secret>(apiPath('', 'v1', 'secrets', INSTALL_NAMESPACE, secretName));
      const bundle = secret.data?.['ca.crt'];
      assert.ok(bundle, 'serving Secret has ca.crt');
      for (const [resource, name] of [
        ['mutatingwebhookconfigurations', 'multus-proxy-webhook'],
        ['validatingwebhookconfigurations', 'multus-proxy-webhook'],
      ] as const) {
        const cfg = await cp.client.get<Rendered>(apiPath('admissionregistration.k8s.io', 'v1', resource, undefined, name));
        for (const w of cfg['webhooks'] as { name: string; clientConfig: { caBundle?: string } }[]) {
          assert.equal(w.clientConfig.caBundle, bundle, `${resource}/${name} ${w.name} caBundle`);
        }
      }
    } finally {
      for (const o of configs) {
        const resource = o.kind === 'MutatingWebhookConfiguration' ? 'mutatingwebhookconfigurations' : 'validatingwebhookconfigurations';
        await cp.client.delete(apiPath('admissionregistration.k8s.io', 'v1', resource, undefined, o.metadata?.name));
      }
    }
  });
});

void describe('sidecar permissions, as bound by the controller above: enough and no more', () => {
  // What cmd/sidecar/runtime.ts issues, as the ServiceAccount of a client pod in an enabled namespace.
  interface Access {
    verb: string;
    group: string;
    resource: string;
    namespace?: string;
  }
  const needs: Access[] = [
    { verb: 'list', group: '', resource: 'services' },
    { verb: 'watch', group: '', resource: 'services' },
    { verb: 'list', group: 'discovery.k8s.io', resource: 'endpointslices' },
    { verb: 'watch', group: 'discovery.k8s.io', resource: 'endpointslices' },
    { verb: 'create', group: '', resource: 'events', namespace: APP_NS },
  ];
  // No pods, not even its own namespace's: an app container mounting the same token could read
  // every pod spec there (env values included). The sidecar reads its own pod's annotations from
  // the downwardAPI volume the webhook mounts.
  const mustNot: Access[] = [
    { verb: 'list', group: '', resource: 'pods', namespace: APP_NS },
    { verb: 'get', group: '', resource: 'pods', namespace: APP_NS },
    { verb: 'watch', group: '', resource: 'pods', namespace: APP_NS },
    { verb: 'list', group: '', resource: 'pods', namespace: 'kube-system' },
    { verb: 'get', group: '', resource: 'secrets', namespace: APP_NS },
    { verb: 'create', group: 'discovery.k8s.io', resource: 'endpointslices', namespace: APP_NS },
    { verb: 'update', group: '', resource: 'services', namespace: APP_NS },
  ];

  async function allowed(client: KubeClient, a: Access): Promise<boolean> {
    const r = await client.create<{ status?: { allowed?: boolean } }>(apiPath('authorization.k8s.io', 'v1', 'selfsubjectaccessreviews'), {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectAccessReview',
      spec: { resourceAttributes: { verb: a.verb, group: a.group, resource: a.resource, ...(a.namespace ? { namespace: a.namespace } : {}) } },
    } as never);
    return r.status?.allowed === true;
  }

  void test('a client pod\'s ServiceAccount may read what the sidecar reads, and nothing more', async () => {
    const token = await cp.tokenFor(APP_NS, 'default');
    const client = createKubeClient({ server: cp.server, ca: Buffer.from(cp.caPem), token });
    for (const a of needs) assert.equal(await allowed(client, a), true, `sidecar may ${a.verb} ${a.resource} in ${a.namespace ?? 'all namespaces'}`);
    for (const a of mustNot) assert.equal(await allowed(client, a), false, `sidecar may not ${a.verb} ${a.resource} in ${a.namespace ?? 'all namespaces'}`);
    // And the requests themselves, as the sidecar makes them.
    await client.list(apiPath('', 'v1', 'services'), { labelSelector: `${PROXY_NAME_LABEL}=${PROXY_NAME}` });
    await client.list(apiPath('discovery.k8s.io', 'v1', 'endpointslices'), { labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY}` });
    await assert.rejects(client.list(apiPath('', 'v1', 'pods', APP_NS), { fieldSelector: 'metadata.name=web-1' }), /403|forbidden/i);
  });
});
