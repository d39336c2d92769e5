/**
 * The webhook behind a real kube-apiserver: our MutatingWebhookConfiguration and
 * ValidatingWebhookConfiguration point at the webhook on https://127.0.0.1:<port> with our
 * generated CA as caBundle, and objects are created through the API. This proves that the
 * apiserver accepts our AdmissionReview answers, applies our JSON Patches, and shows our
 * denial messages to the user.
 *
 * The configurations only select this test's namespaces (a label with a random value), so other
 * tests on the shared control plane never reach this webhook. The pod webhooks otherwise use the
 * shipped namespaceSelector label and matchConditions (read from deploy/base), so what reaches the
 * webhook here is what reaches it in a cluster. The webhook reads the apiserver
 * with a service-account token bound to the ClusterRole in deploy/base/webhook-rbac.yaml, so
 * the shipped RBAC is proven sufficient too.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import https from 'node:https';
import { setTimeout as delay } from 'node:timers/promises';
import { loadAll } from 'js-yaml';
import { createClusterLookups, serviceEventWriter } from '../../cmd/webhook/cluster.js';
import { REASON_EXTERNAL_IPS_NOT_SERVED, withExternalIPs } from '../../cmd/webhook/external-ips.js';
import { EXTERNAL_IPS_NOT_CONFIGURED, parseExternalIPPolicy, type ExternalIPPolicy } from '../../src/external-ips.js';
import { podHandler, serviceDefaultingHandler, serviceValidationHandler } from '../../cmd/webhook/handlers.js';
import { createApp, PATHS, startWebhookServer, type WebhookServer } from '../../cmd/webhook/server.js';
import { watchCertificateFiles, type CertificateSource } from '../../cmd/webhook/tls.js';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { createKubeClient, KubeApiError } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1Pod, V1Service } from '../../src/kube/types.js';
import { admissionRequest, createError, servingPairFolder, shippedWebhookClient, SIDECAR } from './fixtures.js';

const SN = 'k8s.v1.cni.cncf.io/service-network';
const NETS = 'k8s.v1.cni.cncf.io/networks';
const PROXY_LABEL = 'service.kubernetes.io/service-proxy-name';
const ADMISSION = 'admissionregistration.k8s.io';

/** POST with dryRun through the raw API, returning the Warning headers the apiserver sent back (our client does not surface them). */
function createWarnings(cp: ControlPlane, path: string, body: unknown): Promise<{ status: number; warnings: string[] }> {
  return new Promise((resolve, reject) => {
    const url = new URL(`${path}?dryRun=All`, cp.server);
    const req = https.request(url, { method: 'POST', ca: cp.connection.ca, headers: { authorization: `Bearer ${cp.connection.token ?? ''}`, 'content-type': 'application/json' } }, (res) => {
      res.resume();
      res.on('end', () => {
        const raw: string | string[] | undefined = res.headers['warning'];
        const headers: string[] = Array.isArray(raw) ? raw : raw === undefined ? [] : [raw];
        // RFC 7234 form: 299 - "text", with \" and \\ escaped.
        const list: string[] = headers.flatMap((h) => [...h.matchAll(/299 - "((?:[^"\\]|\\.)*)"/g)].map((m) => (m[1] ?? '').replace(/\\(.)/g, '$1')));
        resolve({ status: res.statusCode ?? 0, warnings: list });
      });
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

void describe('webhook behind a real kube-apiserver', () => {
  let cp: ControlPlane;
  let dir: string;
  let certs: CertificateSource;
  let server: WebhookServer;
  const testLabel = { 'multus-proxy-webhook-test': uniqueName('run') };
  const on = uniqueName('wh-on');
  const off = uniqueName('wh-off');
  const psa = uniqueName('wh-psa');
  const reg = uniqueName('wh-reg');
  const REGULAR_PATH = '/mutate-pods-regular';
  let externalIPs: ExternalIPPolicy = EXTERNAL_IPS_NOT_CONFIGURED;
  const configName = uniqueName('multus-proxy-webhook-test');
  const roleName = uniqueName('multus-proxy-webhook-test');
  // A namespace whose Service admissions go to the same handler over a client whose NAD lookups
  // cannot complete (nothing listens at its server): the fail-closed path.
  const broken = uniqueName('wh-broken');
  const brokenLabel = { 'multus-proxy-webhook-test-broken': uniqueName('run') };
  const BROKEN_PATH = '/validate-services-broken';
  let webhookClient: ReturnType<typeof createKubeClient>;

  const pods = (ns: string) => apiPath('', 'v1', 'pods', ns);
  const services = (ns: string) => apiPath('', 'v1', 'services', ns);
  const clientPod = (name: string, annotations: Record<string, string>, spec: Partial<NonNullable<V1Pod['spec']>> = {}): V1Pod => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { ...(name.endsWith('-') ? { generateName: name } : { name }), annotations },
    spec: { containers: [{ name: 'app', image: 'busybox', command: ['sleep', 'infinity'] }], ...spec },
  });
  const service = (name: string, annotations: Record<string, string>, spec: V1Service['spec']): V1Service => ({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, annotations },
    spec: { ports: [{ port: 80, protocol: 'TCP' }], ...spec },
  });

  before(async () => {
    cp = await useControlPlane();
    await cp.createNamespace(on, { ...testLabel, 'multus-proxy-injection': 'enabled' });
    await cp.createNamespace(off, testLabel);
    await cp.createNamespace(reg, { ...testLabel, 'multus-proxy-injection': 'enabled', 'multus-proxy-test-mode': 'regular' });
    await cp.createNamespace(broken, brokenLabel);
    await cp.createNamespace(psa, { ...testLabel, 'multus-proxy-injection': 'enabled', 'pod-security.kubernetes.io/enforce': 'restricted' });
    await cp.client.create(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', on), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name: 'net-a', namespace: on },
      spec: { config: '{"cniVersion":"0.4.0","type":"macvlan","name":"net-a"}' },
    });

    // The webhook's identity: a service account bound to the shipped ClusterRole's rules.
    webhookClient = await shippedWebhookClient(cp, off, roleName);
    const token = await cp.tokenFor(off, 'multus-proxy-webhook');
    const unreachable = createKubeClient({ server: 'https://127.0.0.1:1', ca: Buffer.from(cp.caPem), token });

    const pair = servingPairFolder('webhook-api-', ['127.0.0.1']);
    dir = pair.dir;
    certs = watchCertificateFiles(pair.certFile, pair.keyFile);
    const deps = { cluster: createClusterLookups(webhookClient, { namespaceCacheMs: 1000, nadTimeoutMs: 2000 }), sidecar: { ...SIDECAR, mode: 'auto' as const } };
    const app = createApp({
      endpoints: {
        [PATHS.mutatePods]: { kind: 'Pod', handler: podHandler(deps) },
        // The same webhook configured for regular containers, for the `reg` namespace only.
        [REGULAR_PATH]: { kind: 'Pod', handler: podHandler({ ...deps, sidecar: { ...SIDECAR, mode: 'regular' } }) },
        [PATHS.mutateServices]: { kind: 'Service', handler: serviceDefaultingHandler(deps) },
        [BROKEN_PATH]: { kind: 'Service', handler: serviceValidationHandler({ cluster: createClusterLookups(unreachable, { namespaceCacheMs: 1000, nadTimeoutMs: 2000 }) }) },
        // External IPs under the policy the test sets (src/external-ips.ts), Events written as the webhook's identity.
        [PATHS.validateServices]: { kind: 'Service', handler: (req) => withExternalIPs(serviceValidationHandler(deps), externalIPs, serviceEventWriter(webhookClient))(req) },
      },
      maxBodyBytes: 8 * 1024 * 1024,
    });
    server = await startWebhookServer(app, certs, { port: 0, host: '127.0.0.1' });

    const shipped = loadAll(readFileSync(join(import.meta.dirname, '..', '..', 'deploy', 'base', 'webhook-configurations.yaml'), 'utf8')) as {
      kind?: string;
      webhooks?: { name: string; matchConditions?: unknown[] }[];
    }[];
    const podConditions = shipped.find((d) => d.kind === 'MutatingWebhookConfiguration')?.webhooks?.find((w) => w.name.startsWith('pods.'))?.matchConditions;
    assert.ok(podConditions !== undefined && podConditions.length > 0, 'the shipped pod webhook has matchConditions');
    const enabled = { ...testLabel, 'multus-proxy-injection': 'enabled' };
    const caBundle = Buffer.from(pair.caPem).toString('base64');
    const hook = (name: string, path: string, resource: string, operations: string[]) => ({
      name,
      admissionReviewVersions: ['v1'],
      sideEffects: 'None',
      timeoutSeconds: 10,
      failurePolicy: 'Fail',
      clientConfig: { url: `https://127.0.0.1:${server.port}${path}`, caBundle },
      rules: [{ apiGroups: [''], apiVersions: ['v1'], operations, resources: [resource], scope: 'Namespaced' }],
      namespaceSelector: { matchLabels: testLabel },
    });
    await cp.client.create(apiPath(ADMISSION, 'v1', 'mutatingwebhookconfigurations'), {
      apiVersion: `${ADMISSION}/v1`,
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: configName },
      webhooks: [
        {
          ...hook('pods.multus-proxy.test', PATHS.mutatePods, 'pods', ['CREATE']),
          reinvocationPolicy: 'IfNeeded',
          matchConditions: podConditions,
          namespaceSelector: { matchLabels: enabled, matchExpressions: [{ key: 'multus-proxy-test-mode', operator: 'DoesNotExist' }] },
        },
        {
          ...hook('regular-pods.multus-proxy.test', REGULAR_PATH, 'pods', ['CREATE']),
          reinvocationPolicy: 'IfNeeded',
          matchConditions: podConditions,
          namespaceSelector: { matchLabels: { ...enabled, 'multus-proxy-test-mode': 'regular' } },
        },
        hook('services.multus-proxy.test', PATHS.mutateServices, 'services', ['CREATE', 'UPDATE']),
      ],
    });
    await cp.client.create(apiPath(ADMISSION, 'v1', 'validatingwebhookconfigurations'), {
      apiVersion: `${ADMISSION}/v1`,
      kind: 'ValidatingWebhookConfiguration',
      metadata: { name: configName },
      webhooks: [
        hook('services.multus-proxy.test', PATHS.validateServices, 'services', ['CREATE', 'UPDATE']),
        { ...hook('broken-services.multus-proxy.test', BROKEN_PATH, 'services', ['CREATE', 'UPDATE']), namespaceSelector: { matchLabels: brokenLabel } },
      ],
    });

    // The apiserver picks up new configurations asynchronously: wait until both are in effect.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const probe = await cp.client.create<V1Service>(services(on), service(uniqueName('probe'), { [SN]: 'net-a' }, { selector: { app: 'x' } }), { dryRun: true });
      const denied = await cp.client.create(services(on), service(uniqueName('probe'), { [SN]: 'net-a' }, { type: 'ExternalName', externalName: 'x.example.com' }), { dryRun: true }).then(
        () => false,
        () => true,
      );
      const brokenDenied = await cp.client.create(services(broken), service(uniqueName('probe'), { [SN]: `${on}/net-a` }, { selector: { app: 'x' } }), { dryRun: true }).then(
        () => false,
        () => true,
      );
      if (probe.metadata?.labels?.[PROXY_LABEL] === 'multus-proxy' && denied && brokenDenied) break;
      if (Date.now() > deadline) throw new Error('the webhook configurations did not take effect within 30 s');
      await delay(200);
    }
  });

  after(async () => {
    for (const kind of ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations']) await cp.client.delete(apiPath(ADMISSION, 'v1', kind, undefined, configName));
    await cp.client.delete(apiPath('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings', undefined, roleName));
    await cp.client.delete(apiPath('rbac.authorization.k8s.io', 'v1', 'clusterroles', undefined, roleName));
    await server.close();
    certs.close();
    rmSync(dir, { recursive: true, force: true });
    await cp.stop();
  });

  void test('a pod that asks for it, in an enabled namespace, is stored with the native sidecar', async () => {
    const stored = await cp.client.create<V1Pod>(pods(on), clientPod('client', { [SN]: 'net-a', [NETS]: 'net-a' }, { initContainers: [{ name: 'init', image: 'busybox' }] }));
    const init = stored.spec?.initContainers ?? [];
    assert.deepEqual(
      init.map((c) => c.name),
      ['multus-proxy', 'init'],
    );
    const sidecar = init[0];
    assert.equal(sidecar?.restartPolicy, 'Always', 'apiserver 1.34: auto mode chose a native sidecar');
    assert.deepEqual(sidecar?.securityContext?.capabilities, { add: ['NET_ADMIN', 'NET_RAW'], drop: ['ALL'] });
    assert.match(sidecar?.startupProbe?.httpGet?.path ?? '', /^\/readyz\?wait=\d+$/);
    assert.deepEqual(
      sidecar?.env?.slice(0, 2).map((e) => [e.name, e.valueFrom?.fieldRef?.fieldPath]),
      [
        ['POD_NAME', 'metadata.name'],
        ['POD_NAMESPACE', 'metadata.namespace'],
      ],
    );
    assert.ok(stored.spec?.volumes?.some((v) => v.name === 'multus-proxy-token' && v.projected !== undefined));
    assert.deepEqual(
      stored.spec?.containers.map((c) => c.name),
      ['app'],
    );
  });

  void test("the sidecar as the apiserver stored it (defaulted) is the webhook's own: admitted unchanged on reinvocation; a pod that declares it with SOURCE_GUARD=off is refused", async () => {
    const stored = await cp.client.create<V1Pod>(pods(on), clientPod('reinvoked', { [SN]: 'net-a', [NETS]: 'net-a' }));
    assert.equal(stored.spec?.initContainers?.[0]?.terminationMessagePath, '/dev/termination-log', 'the apiserver defaulted the sidecar');
    const again = await podHandler({ cluster: createClusterLookups(webhookClient, { namespaceCacheMs: 1000, nadTimeoutMs: 2000 }), sidecar: { ...SIDECAR, mode: 'auto' } })(
      admissionRequest(stored, on),
    );
    assert.equal(again.response.allowed, true, JSON.stringify(again.response.status));
    assert.equal(again.response.patch, undefined, 'nothing added twice');
    assert.equal(again.reason, 'already-injected');
    // The tenant's own copy of the sidecar, with the guard switched off: refused by name.
    const sidecar = stored.spec?.initContainers?.[0];
    assert.ok(sidecar !== undefined);
    const tenant: V1Pod = {
      metadata: { name: 'tenant-sidecar', annotations: { [SN]: 'net-a', [NETS]: 'net-a' } },
      spec: {
        ...stored.spec,
        containers: stored.spec?.containers ?? [],
        nodeName: undefined,
        initContainers: [{ ...sidecar, env: [...(sidecar.env ?? []), { name: 'SOURCE_GUARD', value: 'off' }] }],
      },
    };
    const err = await createError(cp.client.create(pods(on), tenant));
    assert.match(
      err,
      /Pod .*\/tenant-sidecar: spec\.initContainers\[0\]\.env\[\d+\] .*SOURCE_GUARD.*off.*: is not what the injected sidecar has there \(nothing\); the container name multus-proxy is reserved/,
    );
  });

  void test('regular mode: the sidecar is the first container and kubectl keeps defaulting to the app (a slash-bearing key in the patch)', async () => {
    const stored = await cp.client.create<V1Pod>(pods(reg), clientPod('regular', { [SN]: 'net-a', [NETS]: 'net-a', 'example.com/other': 'kept' }));
    assert.deepEqual(
      stored.spec?.containers.map((c) => c.name),
      ['multus-proxy', 'app'],
    );
    assert.equal(stored.spec?.containers[0]?.restartPolicy, undefined);
    assert.equal(stored.spec?.initContainers, undefined);
    assert.equal(stored.metadata?.annotations?.['kubectl.kubernetes.io/default-container'], 'app');
    assert.equal(stored.metadata?.annotations?.['example.com/other'], 'kept');
  });

  void test('generateName pods and pods without an automounted token get it too (token mounted in the sidecar only)', async () => {
    const stored = await cp.client.create<V1Pod>(pods(on), clientPod('web-', { [SN]: 'net-a', [NETS]: 'net-a' }, { automountServiceAccountToken: false }));
    assert.match(stored.metadata?.name ?? '', /^web-/);
    const sidecar = stored.spec?.initContainers?.[0];
    assert.equal(sidecar?.name, 'multus-proxy');
    assert.deepEqual(
      sidecar?.volumeMounts?.map((m) => m.mountPath),
      ['/var/run/secrets/kubernetes.io/serviceaccount', '/run/multus-proxy', '/etc/multus-proxy/podinfo'],
    );
    assert.deepEqual(stored.spec?.containers[0]?.volumeMounts ?? [], []);
    // The apiserver stored the downwardAPI volume of the pod's annotations and labels as the webhook wrote it.
    const podinfo = stored.spec?.volumes?.find((v) => v.name === 'multus-proxy-podinfo');
    assert.deepEqual(
      podinfo?.downwardAPI?.items?.map((i) => i.fieldRef?.fieldPath),
      ['metadata.annotations', 'metadata.labels'],
    );
  });

  void test('namespace-wide: the blog client, carrying only networks, gets the sidecar', async () => {
    const stored = await cp.client.create<V1Pod>(pods(on), clientPod('blog-client', { [NETS]: 'net-a' }));
    assert.deepEqual(
      stored.spec?.initContainers?.map((c) => c.name),
      ['multus-proxy'],
    );
    assert.deepEqual(
      stored.spec?.containers.map((c) => c.name),
      ['app'],
    );
  });

  void test('no network, opted out, or a namespace without the label: the pod is stored untouched, silently', async () => {
    const untouched = [
      await cp.client.create<V1Pod>(pods(on), clientPod('plain', { 'example.com/x': 'y' })),
      await cp.client.create<V1Pod>(pods(on), clientPod('opted-out', { [NETS]: 'net-a', 'multus-proxy.k8s.cni.cncf.io/inject': 'false' })),
      await cp.client.create<V1Pod>(pods(off), clientPod('elsewhere', { [SN]: 'net-a', [NETS]: 'net-a' })),
    ];
    for (const p of untouched) {
      assert.equal(p.spec?.initContainers, undefined, p.metadata?.name);
      assert.deepEqual(
        p.spec?.containers.map((c) => c.name),
        ['app'],
      );
      assert.ok(!(p.spec?.volumes ?? []).some((v) => v.name.startsWith('multus-proxy')));
    }
    // The namespaceSelector keeps the webhook from ever seeing a pod of a namespace without the label: no warning can come.
    const silent = await createWarnings(cp, pods(off), clientPod('silent', { [SN]: 'net-a', [NETS]: 'net-a' }));
    assert.equal(silent.status, 201);
    assert.deepEqual(silent.warnings, []);
  });

  void test('an inherited pod that cannot have the sidecar is created without it, with a warning saying why', async () => {
    const restricted = { runAsNonRoot: true, runAsUser: 1000, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } };
    const compliant = clientPod('inherits', { [NETS]: 'net-a' }, { containers: [{ name: 'app', image: 'busybox', securityContext: restricted }] });
    const psaPod = await createWarnings(cp, pods(psa), compliant);
    assert.equal(psaPod.status, 201);
    assert.equal(psaPod.warnings.length, 1);
    assert.match(
      psaPod.warnings[0] ?? '',
      new RegExp(
        `^no multus-proxy sidecar added \\(namespace-wide injection\\): Pod ${psa}/inherits: namespace ${psa} label pod-security\\.kubernetes\\.io/enforce "restricted": .*enforce=privileged`,
      ),
    );
    const host = await createWarnings(cp, pods(on), clientPod('host-agent', { [NETS]: 'net-a' }, { hostNetwork: true }));
    assert.equal(host.status, 201);
    assert.match(host.warnings[0] ?? '', /spec\.hostNetwork "true": .*node agent serves host-network pods/);
  });

  void test('bad annotations, unattached networks, hostNetwork and PodSecurity: the create call fails with our message', async () => {
    const cases: [string, V1Pod, RegExp][] = [
      [on, clientPod('bad', { [SN]: 'a//b', [NETS]: 'a' }), /denied the request: Pod wh-on-\w+\/bad: k8s\.v1\.cni\.cncf\.io\/service-network "a\/\/b": /],
      [
        on,
        clientPod('unattached', { [SN]: 'net-a,net-b', [NETS]: 'net-a' }),
        /network wh-on-\w+\/net-b is not attached to the pod by k8s\.v1\.cni\.cncf\.io\/networks; attach it: write k8s\.v1\.cni\.cncf\.io\/networks: "net-a,wh-on-\w+\/net-b"/,
      ],
      [on, clientPod('host', { [SN]: 'net-a', [NETS]: 'net-a' }, { hostNetwork: true }), /spec\.hostNetwork "true": the multus-proxy sidecar would program iptables in the node's network namespace/],
      [psa, clientPod('psa', { [SN]: 'net-a', [NETS]: 'net-a' }), /"restricted": the multus-proxy sidecar needs the NET_ADMIN and NET_RAW capabilities.*enforce=privileged/],
    ];
    for (const [ns, body, message] of cases) {
      assert.match(await createError(cp.client.create(pods(ns), body)), message);
    }
  });

  void test('Services: the label is defaulted; a missing NAD is only a warning; headless with a selector and ExternalName are rejected; NodePort and LoadBalancer are admitted with warnings', async () => {
    const stored = await cp.client.create<V1Service>(services(on), service('web', { [SN]: 'net-a' }, { selector: { app: 'web' } }));
    assert.equal(stored.metadata?.labels?.[PROXY_LABEL], 'multus-proxy');
    const headless = await cp.client.create<V1Service>(services(on), service('db', { [SN]: 'net-a,missing-net', 'k8s.v1.cni.cncf.io/service-selector': 'app=db' }, { clusterIP: 'None' }));
    assert.equal(headless.metadata?.labels?.[PROXY_LABEL], 'multus-proxy');
    // The missing NetworkAttachmentDefinition reaches the user as an admission warning (kubectl prints it).
    const warned = await createWarnings(cp, services(on), service('warned', { [SN]: 'net-a,missing-net' }, { selector: { app: 'x' } }));
    assert.equal(warned.status, 201);
    assert.deepEqual(warned.warnings, [`NetworkAttachmentDefinition ${on}/missing-net does not exist (yet): the Service has no endpoints on it until it is created`]);
    assert.match(
      await createError(cp.client.create(services(on), service('bad-headless', { [SN]: 'net-a' }, { clusterIP: 'None', selector: { app: 'db' } }))),
      /denied the request: Service wh-on-\w+\/bad-headless: spec\.selector .*move the selector into the annotation k8s\.v1\.cni\.cncf\.io\/service-selector: "app=db" and remove spec\.selector/,
    );
    assert.match(
      await createError(cp.client.create(services(on), service('alias', { [SN]: 'net-a' }, { type: 'ExternalName', externalName: 'x.example.com' }))),
      /spec\.type "ExternalName": multus-proxy serves ClusterIP, headless, NodePort and LoadBalancer Services only/,
    );
    // LoadBalancer: admitted; what it needs is said, and (no node agent in this cluster) that it is not served.
    const lb = await createWarnings(cp, services(on), service('lb', { [SN]: 'net-a' }, { type: 'LoadBalancer', selector: { app: 'x' }, loadBalancerSourceRanges: ['203.0.113.0/24'] }));
    assert.equal(lb.status, 201);
    assert.match(lb.warnings.join('\n'), /type LoadBalancer on wh-on-\w+\/net-a: its status\.loadBalancer\.ingress IPs are served on the secondary network by the multus-proxy-node agent/);
    assert.match(lb.warnings.join('\n'), /type LoadBalancer is not served on the secondary network: the multus-proxy-node agent is not installed/);
    const nodePort = await createWarnings(cp, services(on), service('np', { [SN]: 'net-a' }, { type: 'NodePort', selector: { app: 'x' } }));
    assert.equal(nodePort.status, 201);
    assert.match(nodePort.warnings.join('\n'), /type NodePort on wh-on-\w+\/net-a is served only by the multus-proxy-node agent/);
    const conflicting = service('conflict', { [SN]: 'net-a' }, { selector: { app: 'x' } });
    conflicting.metadata = { ...conflicting.metadata, labels: { [PROXY_LABEL]: 'kube-proxy-ng' } };
    assert.match(
      await createError(cp.client.create(services(on), conflicting)),
      /label service\.kubernetes\.io\/service-proxy-name "kube-proxy-ng": conflicts with the k8s\.v1\.cni\.cncf\.io\/service-network annotation/,
    );
    // UPDATE is validated too: switching the stored Service to ExternalName is refused.
    const current = await cp.client.get<V1Service>(apiPath('', 'v1', 'services', on, 'web'));
    assert.match(
      await createError(cp.client.replace(apiPath('', 'v1', 'services', on, 'web'), { ...current, spec: { type: 'ExternalName', externalName: 'x.example.com' } })),
      /spec\.type "ExternalName"/,
    );
  });

  void test('a Service being deleted, kept by its own finalizer, cannot be re-annotated to an unshared NAD; its finalizer can still be removed', async () => {
    await cp.client.create(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', off), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name: 'victim-net', namespace: off },
      spec: { config: '{"cniVersion":"0.4.0","type":"macvlan","name":"victim-net"}' },
    });
    const path = apiPath('', 'v1', 'services', on, 'kept');
    const kept = service('kept', { [SN]: 'net-a' }, { clusterIP: 'None' });
    kept.metadata = { ...kept.metadata, finalizers: ['example.com/keep'], annotations: { ...kept.metadata?.annotations, 'k8s.v1.cni.cncf.io/service-selector': 'app=x' } };
    await cp.client.create(services(on), kept);
    // A live Service naming it is denied, as before.
    assert.match(await createError(cp.client.create(services(on), service('direct', { [SN]: `${off}/victim-net` }, { selector: { app: 'x' } }))), /not shared with namespace wh-on-\w+/);
    await cp.client.delete(path);
    const deleting = await cp.client.get<V1Service>(path);
    assert.ok(deleting.metadata?.deletionTimestamp, 'the finalizer keeps it, being deleted');
    const message = await createError(cp.client.patch(path, { metadata: { annotations: { [SN]: `${off}/victim-net` } } }, 'merge'));
    assert.match(
      message,
      /denied the request: Service wh-on-\w+\/kept: annotation k8s\.v1\.cni\.cncf\.io\/service-network: NetworkAttachmentDefinition wh-off-\w+\/victim-net belongs to another namespace and is not shared/,
    );
    assert.equal((await cp.client.get<V1Service>(path)).metadata?.annotations?.[SN], 'net-a', 'the stored annotation is unchanged');
    // Its cleanup is never blocked: the update that only removes the finalizer passes, and it is gone.
    await cp.client.patch(path, { metadata: { finalizers: null } }, 'merge');
    const gone = await cp.client.get(path).then(
      () => false,
      (e: unknown) => e instanceof KubeApiError && e.status === 404,
    );
    assert.ok(gone, 'the Service is gone once its finalizer is removed');
  });

  void test('3,000 names in one annotation are denied with the fix, before any NAD lookup', async () => {
    const before = webhookClient.requestCount()['get'] ?? 0;
    const names = Array.from({ length: 3000 }, (_, i) => `${off}/n${i}`).join(',');
    const message = await createError(cp.client.create(services(on), service('many', { [SN]: names }, { selector: { app: 'x' } }), { dryRun: true }));
    assert.match(
      message,
      /denied the request: Service wh-on-\w+\/many: k8s\.v1\.cni\.cncf\.io\/service-network ".*…\(\d+ chars\)": names 3000 networks, more than the 32 one object may name; name at most 32 NetworkAttachmentDefinitions/,
    );
    assert.equal(webhookClient.requestCount()['get'] ?? 0, before, 'no NAD was looked up');
  });

  void test("a cross-namespace reference whose NAD lookup cannot complete is denied (fail closed); one of the Service's own namespace is only a warning", async () => {
    const message = await createError(cp.client.create(services(broken), service('cross', { [SN]: `${off}/victim-net` }, { selector: { app: 'x' } })));
    assert.match(
      message,
      /denied the request: Service wh-broken-\w+\/cross: annotation k8s\.v1\.cni\.cncf\.io\/service-network: NetworkAttachmentDefinition wh-off-\w+\/victim-net of another namespace could not be read just now/,
    );
    const own = await createWarnings(cp, services(broken), service('own', { [SN]: 'net-b' }, { selector: { app: 'x' } }));
    assert.equal(own.status, 201);
    assert.deepEqual(own.warnings, [`NetworkAttachmentDefinition ${broken}/net-b could not be checked; make sure it exists`]);
  });

  void test('external IPs: by default admitted with a warning and an Event, not served; with allowed CIDRs, a new address outside them is denied and one the Service had is kept', async () => {
    externalIPs = EXTERNAL_IPS_NOT_CONFIGURED;
    const body = (name: string, ips: string[]): V1Service => service(name, { [SN]: 'net-a' }, { selector: { app: 'x' }, externalIPs: ips });
    const warned = await createWarnings(cp, services(on), body('ext-dry', ['198.51.100.7']));
    assert.equal(warned.status, 201);
    assert.match(warned.warnings.join('\n'), /Service wh-on-\w+\/ext-dry: spec\.externalIPs \(198\.51\.100\.7\) are not served on the secondary network.*CVE-2020-8554.*externalIPs\.allowedCIDRs/);
    await cp.client.create(services(on), body('ext-old', ['198.51.100.7']));
    await waitFor('ExternalIPsNotServed Event', async () => {
      const list = await cp.client.list<{ reason?: string; type?: string; message?: string }>(apiPath('', 'v1', 'events', on), {
        fieldSelector: 'involvedObject.kind=Service,involvedObject.name=ext-old',
      });
      return list.items.some((e) => e.reason === REASON_EXTERNAL_IPS_NOT_SERVED && e.type === 'Warning' && (e.message ?? '').includes('198.51.100.7'));
    });
    // A Service not on a network is none of our business.
    const plain = await createWarnings(cp, services(on), service('ext-plain', {}, { selector: { app: 'x' }, externalIPs: ['198.51.100.7'] }));
    assert.deepEqual([plain.status, plain.warnings], [201, []]);

    const p = parseExternalIPPolicy(['192.0.2.0/24'], 'externalIPs.allowedCIDRs');
    assert.ok(p.ok);
    externalIPs = p.value;
    try {
      const inside = await createWarnings(cp, services(on), body('ext-in', ['192.0.2.10']));
      assert.deepEqual([inside.status, inside.warnings], [201, []]);
      assert.match(
        await createError(cp.client.create(services(on), body('ext-out', ['192.0.2.10', '203.0.113.9']))),
        /denied the request: Service wh-on-\w+\/ext-out: spec\.externalIPs "203\.0\.113\.9": is outside the CIDRs the cluster admin allows .*\(192\.0\.2\.0\/24\)/,
      );
      // The Service admitted before the list keeps its address through an update, with a warning; adding another outside is denied.
      const old = await cp.client.get<V1Service>(apiPath('', 'v1', 'services', on, 'ext-old'));
      await cp.client.replace(apiPath('', 'v1', 'services', on, 'ext-old'), { ...old, metadata: { ...old.metadata, labels: { ...old.metadata?.labels, touched: 'yes' } } });
      const again = await cp.client.get<V1Service>(apiPath('', 'v1', 'services', on, 'ext-old'));
      assert.match(
        await createError(cp.client.replace(apiPath('', 'v1', 'services', on, 'ext-old'), { ...again, spec: { ...again.spec, externalIPs: ['198.51.100.7', '198.51.100.8'] } })),
        /spec\.externalIPs "198\.51\.100\.8": is outside/,
      );
    } finally {
      externalIPs = EXTERNAL_IPS_NOT_CONFIGURED;
    }
  });
});
