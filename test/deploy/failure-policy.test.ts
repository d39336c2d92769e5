/**
 * What docs/install.md promises about the webhook's failure policy, shown by the real
 * kube-apiserver with the webhook configurations exactly as deploy/ renders them, while the webhook
 * is down (nothing listens where they point) or hangs (accepts connections, never answers):
 *
 * - pods and Services multus-proxy has nothing to do with are created as if no webhook existed
 *   (the namespaceSelector and matchConditions keep them from ever being sent): pods attaching no
 *   secondary network (in any namespace; outside enabled namespaces also those that only name a
 *   service network), Services without the annotation;
 * - pods and Services that asked are refused, not let through half-configured (failurePolicy Fail),
 *   and so are the pods a MultiNetworkPolicy may select (those attaching a secondary network, in
 *   any namespace, opted out or not), since whether one selects them only the webhook can tell;
 * - the install namespace and kube-system are never sent anything, so the project can always
 *   (re)start its own pods;
 * - a hanging webhook costs at most timeoutSeconds.
 *
 * A private control plane: these webhooks must not refuse anything of other tests.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { freePort, startControlPlane, type ControlPlane } from '../harness/controlplane.js';
import { KubeApiError } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import { INJECT_ANNOTATION, INJECTION_ENABLED, INJECTION_LABEL, INSTALL_NAMESPACE, NETWORKS_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { render, type Rendered } from './kustomize.js';

const ENABLED_NS = 'fp-enabled';
const PLAIN_NS = 'fp-plain';
const ADMISSION = 'admissionregistration.k8s.io';

let cp: ControlPlane;
let configs: Rendered[];
let hanging: net.Server | undefined;
const held = new Set<net.Socket>();

type Hook = { clientConfig: { service?: { path?: string }; url?: string; caBundle?: string }; timeoutSeconds?: number };

/** The rendered configurations, pointed at `base` (https://127.0.0.1:<port>) instead of the Service. */
function pointedAt(base: string): Rendered[] {
  return configs.map((c) => {
    const copy = structuredClone(c);
    for (const w of (copy['webhooks'] as Hook[] | undefined) ?? []) {
      w.clientConfig = { url: `${base}${w.clientConfig.service?.path ?? '/'}`, caBundle: Buffer.from(cp.caPem).toString('base64') };
    }
    return copy;
  });
}

async function register(objs: Rendered[]): Promise<void> {
  for (const o of objs) {
    const resource = o.kind === 'MutatingWebhookConfiguration' ? 'mutatingwebhookconfigurations' : 'validatingwebhookconfigurations';
    await cp.client.patch(apiPath(ADMISSION, 'v1', resource, undefined, o.metadata?.name), o, 'apply', { fieldManager: 'multus-proxy-failure-policy-test', force: true });
  }
}

const ASKS = { [SERVICE_NETWORK_ANNOTATION]: 'macvlan1', [NETWORKS_ANNOTATION]: 'macvlan1' };

/** `asks`: true for a pod with a service network, false for none at all, or the annotations to give it. */
function pod(namespace: string, name: string, asks: boolean | Record<string, string>): unknown {
  const annotations = asks === true ? ASKS : asks === false ? undefined : asks;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace, ...(annotations ? { annotations } : {}) },
    spec: {
      containers: [{ name: 'app', image: 'busybox', securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } } }],
    },
  };
}

function service(namespace: string, name: string, asks: boolean): unknown {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace, ...(asks ? { annotations: { [SERVICE_NETWORK_ANNOTATION]: 'macvlan1' } } : {}) },
    spec: { selector: { app: name }, ports: [{ port: 80 }] },
  };
}

/** 'created', or the refusal. A dry-run create: webhooks declaring sideEffects None are called for it as for a real one, and nothing is stored. */
async function create(kind: 'pods' | 'services', body: unknown, namespace: string): Promise<string> {
  try {
    await cp.client.create(apiPath('', 'v1', kind, namespace), body, { dryRun: true });
    return 'created';
  } catch (e) {
    if (e instanceof KubeApiError) return `${e.status}: ${e.apiMessage}`;
    throw e;
  }
}

before(async () => {
  cp = await startControlPlane();
  configs = (await render('deploy')).filter((o) => o.kind === 'MutatingWebhookConfiguration' || o.kind === 'ValidatingWebhookConfiguration');
  assert.equal(configs.length, 2);
  await cp.createNamespace(ENABLED_NS, { [INJECTION_LABEL]: INJECTION_ENABLED });
  await cp.createNamespace(PLAIN_NS);
  // Labelled as if someone enabled injection there too (kube-system already exists: patch it).
  for (const ns of [INSTALL_NAMESPACE, 'kube-system']) {
    await cp.createNamespace(ns);
    await cp.client.patch(apiPath('', 'v1', 'namespaces', undefined, ns), { metadata: { labels: { [INJECTION_LABEL]: INJECTION_ENABLED } } }, 'merge');
  }
});

after(async () => {
  for (const s of held) s.destroy();
  await new Promise<void>((r) => (hanging ? hanging.close(() => r()) : r()));
  await cp?.stop();
});

void describe('webhook down: nothing listens where the configurations point', () => {
  before(async () => {
    await register(pointedAt(`https://127.0.0.1:${await freePort()}`));
    // The apiserver picks webhook configurations up asynchronously: wait until one refusal shows.
    const deadline = Date.now() + 30_000;
    while ((await create('pods', pod(ENABLED_NS, 'probe', true), ENABLED_NS)) === 'created') {
      if (Date.now() > deadline) throw new Error('the webhook configurations never took effect');
      await new Promise((r) => setTimeout(r, 200));
    }
  });

  void test('pods and Services that did not ask are created as if there were no webhook', async () => {
    assert.equal(await create('pods', pod(ENABLED_NS, 'plain', false), ENABLED_NS), 'created', 'pod without annotations in an enabled namespace');
    assert.equal(await create('pods', pod(ENABLED_NS, 'other', { 'example.com/x': 'y' }), ENABLED_NS), 'created', 'pod with other annotations in an enabled namespace');
    assert.equal(await create('pods', pod(ENABLED_NS, 'empty', { [NETWORKS_ANNOTATION]: '' }), ENABLED_NS), 'created', 'pod with an empty networks annotation');
    assert.equal(await create('pods', pod(ENABLED_NS, 'out', { [INJECT_ANNOTATION]: 'false' }), ENABLED_NS), 'created', 'opted-out pod attaching no network');
    assert.equal(await create('pods', pod(PLAIN_NS, 'plain', false), PLAIN_NS), 'created', 'pod without annotations in a namespace without the injection label');
    assert.equal(await create('pods', pod(PLAIN_NS, 'service-only', { [SERVICE_NETWORK_ANNOTATION]: 'macvlan1' }), PLAIN_NS), 'created', 'service network alone, namespace without the label');
    assert.equal(await create('pods', pod(PLAIN_NS, 'empty', { [NETWORKS_ANNOTATION]: '' }), PLAIN_NS), 'created', 'empty networks annotation, namespace without the label');
    assert.equal(await create('services', service(ENABLED_NS, 'plain', false), ENABLED_NS), 'created', 'Service without the annotation');
  });

  void test('pods and Services that asked are refused rather than let through without sidecar or validation', async () => {
    const p = await create('pods', pod(ENABLED_NS, 'asks', true), ENABLED_NS);
    assert.match(p, /^500: Internal error occurred: failed calling webhook "pods\.multus-proxy/, p);
    // Namespace-wide injection: attaching a network is asking (the blog's client pod).
    const inherited = await create('pods', pod(ENABLED_NS, 'inherits', { [NETWORKS_ANNOTATION]: 'macvlan1' }), ENABLED_NS);
    assert.match(inherited, /^500: Internal error occurred: failed calling webhook "pods\.multus-proxy/, inherited);
    const optedIn = await create('pods', pod(ENABLED_NS, 'in', { [NETWORKS_ANNOTATION]: '[{"name":"macvlan1"}]', [INJECT_ANNOTATION]: 'true' }), ENABLED_NS);
    assert.match(optedIn, /failed calling webhook "pods\.multus-proxy/, optedIn);
    // A MultiNetworkPolicy may select them: opted out, or in a namespace without the label.
    const optedOut = await create('pods', pod(ENABLED_NS, 'out', { [NETWORKS_ANNOTATION]: 'macvlan1', [INJECT_ANNOTATION]: 'false' }), ENABLED_NS);
    assert.match(optedOut, /failed calling webhook "pods\.multus-proxy/, optedOut);
    const selectables: Record<string, string>[] = [{ [NETWORKS_ANNOTATION]: 'macvlan1' }, ASKS, { [NETWORKS_ANNOTATION]: 'macvlan1', [INJECT_ANNOTATION]: 'false' }];
    for (const annotations of selectables) {
      const selectable = await create('pods', pod(PLAIN_NS, 'attached', annotations), PLAIN_NS);
      assert.match(selectable, /^500: Internal error occurred: failed calling webhook "selected-pods\.multus-proxy/, selectable);
    }
    const s = await create('services', service(PLAIN_NS, 'asks', true), PLAIN_NS);
    assert.match(s, /failed calling webhook "services\.multus-proxy/, s);
  });

  void test('the install namespace and kube-system are never sent anything, even when labelled and annotated', async () => {
    for (const ns of [INSTALL_NAMESPACE, 'kube-system']) {
      assert.equal(await create('pods', pod(ns, 'own', true), ns), 'created', `pod in ${ns}`);
      assert.equal(await create('services', service(ns, 'own', true), ns), 'created', `Service in ${ns}`);
    }
    // Without the label too, where the selected-pods webhook would otherwise take them.
    const label = (value: string | null) => ({ metadata: { labels: { [INJECTION_LABEL]: value } } });
    for (const ns of [INSTALL_NAMESPACE, 'kube-system']) {
      await cp.client.patch(apiPath('', 'v1', 'namespaces', undefined, ns), label(null), 'merge');
      try {
        assert.equal(await create('pods', pod(ns, 'own', { [NETWORKS_ANNOTATION]: 'macvlan1', [INJECT_ANNOTATION]: 'false' }), ns), 'created', `unlabelled ${ns}`);
      } finally {
        await cp.client.patch(apiPath('', 'v1', 'namespaces', undefined, ns), label(INJECTION_ENABLED), 'merge');
      }
    }
  });
});

void describe('webhook hangs: accepts connections, never answers', () => {
  void test('a pod that asked is refused after timeoutSeconds, not later', async () => {
    hanging = net.createServer((s) => {
      held.add(s);
      s.on('close', () => held.delete(s));
    });
    await new Promise<void>((r) => hanging?.listen(0, '127.0.0.1', () => r()));
    const port = (hanging.address() as net.AddressInfo).port;
    const objs = pointedAt(`https://127.0.0.1:${port}`);
    await register(objs);
    const timeout = Math.max(...objs.flatMap((o) => (o['webhooks'] as Hook[]).map((w) => w.timeoutSeconds ?? 10)));
    assert.equal(timeout, 5);
    // Until the apiserver has the new URL the call fails at once (connection refused), so wait
    // until a call takes the hanging path.
    const deadline = Date.now() + 30_000;
    for (;;) {
      const t0 = Date.now();
      const r = await create('pods', pod(ENABLED_NS, 'hang', true), ENABLED_NS);
      const seconds = (Date.now() - t0) / 1000;
      assert.notEqual(r, 'created');
      if (held.size > 0 || seconds >= timeout - 0.5) {
        // Refused by the webhook's timeout: not before it, and with the deadline as the cause.
        assert.ok(seconds >= timeout - 0.5, `refused after ${seconds.toFixed(1)} s (timeoutSeconds ${timeout}): ${r}`);
        assert.match(r, /context deadline exceeded|timeout|Timeout/, r);
        break;
      }
      if (Date.now() > deadline) throw new Error(`the hanging endpoint was never called: ${r}`);
      await new Promise((res) => setTimeout(res, 200));
    }
    // Pods that did not ask still never wait for it.
    const t0 = Date.now();
    assert.equal(await create('pods', pod(ENABLED_NS, 'quick', false), ENABLED_NS), 'created');
    assert.ok(Date.now() - t0 < timeout * 1000, `a pod that did not ask waited ${Date.now() - t0} ms, as long as the hanging webhook's timeout`);
  });
});
