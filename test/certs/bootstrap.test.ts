/**
 * Certificate bootstrap against a real kube-apiserver: Secrets created and then reused, caBundle
 * patched only when it differs, and an overlapping CA rotation during which the apiserver keeps
 * reaching a running webhook, before and after the webhook picks up the new leaf.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { bootstrapCertificates, caBundlePatch, type BootstrapOptions } from '../../cmd/certs/bootstrap.js';
import { inspectCert, isIssuedBy, splitPemBundle } from '../../src/cert-info.js';
import { serviceDefaultingHandler } from '../../cmd/webhook/handlers.js';
import { createApp, PATHS, startWebhookServer, type WebhookServer } from '../../cmd/webhook/server.js';
import { watchCertificateFiles, type CertificateSource } from '../../cmd/webhook/tls.js';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1MutatingWebhookConfiguration, V1Secret, V1Service } from '../../src/kube/types.js';

const ADMISSION = 'admissionregistration.k8s.io';
const DAY = 86_400_000;

function secretText(s: V1Secret, key: string): string {
  return Buffer.from(s.data?.[key] ?? '', 'base64').toString('utf8');
}

void describe('certs/bootstrap against a real kube-apiserver', () => {
  let cp: ControlPlane;
  let dir: string;
  let server: WebhookServer | undefined;
  let source: CertificateSource | undefined;
  const ns = uniqueName('certs');
  const config = uniqueName('multus-proxy-certs-test');
  const testLabel = { 'multus-proxy-certs-test': ns };
  let opts: BootstrapOptions;
  const secretPath = (name: string) => apiPath('', 'v1', 'secrets', ns, name);
  const mutatingPath = apiPath(ADMISSION, 'v1', 'mutatingwebhookconfigurations', undefined, config);

  before(async () => {
    cp = await useControlPlane();
    await cp.createNamespace(ns, testLabel);
    dir = mkdtempSync(join(tmpdir(), 'bootstrap-'));
    opts = {
      service: 'multus-proxy-webhook',
      namespace: ns,
      ips: ['127.0.0.1'],
      secretNamespace: ns,
      servingSecret: 'webhook-tls',
      caSecret: 'webhook-ca',
      mutatingWebhookConfigurations: [config],
      validatingWebhookConfigurations: [config],
      caValidityDays: 30,
      caRenewBeforeDays: 10,
      leafValidityDays: 29,
      leafRenewBeforeDays: 1,
    };
  });
  after(async () => {
    for (const kind of ['mutatingwebhookconfigurations', 'validatingwebhookconfigurations']) await cp.client.delete(apiPath(ADMISSION, 'v1', kind, undefined, config));
    await server?.close();
    source?.close();
    rmSync(dir, { recursive: true, force: true });
    await cp.stop();
  });

  void test('caBundlePatch: only entries whose bundle differs, each guarded by a test of its name', () => {
    const cfg: V1MutatingWebhookConfiguration = {
      webhooks: [
        { name: 'a', clientConfig: { caBundle: 'X' } },
        { name: 'b', clientConfig: {} },
      ] as never,
    };
    assert.deepEqual(caBundlePatch(cfg, 'X'), [
      { op: 'test', path: '/webhooks/1/name', value: 'b' },
      { op: 'add', path: '/webhooks/1/clientConfig/caBundle', value: 'X' },
    ]);
    assert.deepEqual(caBundlePatch(cfg, 'Y').length, 4);
  });

  void test('first run creates both Secrets; a missing configuration is reported, not fatal; then patched once it exists', async () => {
    const past = new Date(Date.now() - 25 * DAY);
    const first = await bootstrapCertificates(cp.client, { ...opts, now: past });
    assert.equal(first.caSecretWritten, true);
    assert.equal(first.servingSecretWritten, true);
    assert.deepEqual(first.missingConfigurations, [`mutating/${config}`, `validating/${config}`]);
    const tlsSecret = await cp.client.get<V1Secret>(secretPath('webhook-tls'));
    assert.equal(tlsSecret.type, 'kubernetes.io/tls');
    assert.ok(isIssuedBy(secretText(tlsSecret, 'tls.crt'), secretText(tlsSecret, 'ca.crt')));
    assert.deepEqual(inspectCert(secretText(tlsSecret, 'tls.crt'))?.ips, ['127.0.0.1']);

    // The webhook, serving the Secret's pair, behind configurations without a caBundle yet.
    writeFileSync(join(dir, 'tls.crt'), secretText(tlsSecret, 'tls.crt'));
    writeFileSync(join(dir, 'tls.key'), secretText(tlsSecret, 'tls.key'));
    source = watchCertificateFiles(join(dir, 'tls.crt'), join(dir, 'tls.key'), { pollMs: 100 });
    const app = createApp({ endpoints: { [PATHS.mutateServices]: { kind: 'Service', handler: serviceDefaultingHandler() } }, maxBodyBytes: 1 << 20 });
    server = await startWebhookServer(app, source, { port: 0, host: '127.0.0.1' });
    const hook = {
      name: 'services.multus-proxy.test',
      admissionReviewVersions: ['v1'],
      sideEffects: 'None',
      failurePolicy: 'Fail',
      timeoutSeconds: 5,
      clientConfig: { url: `https://127.0.0.1:${server.port}${PATHS.mutateServices}` },
      rules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['services'] }],
      namespaceSelector: { matchLabels: testLabel },
    };
    await cp.client.create(apiPath(ADMISSION, 'v1', 'mutatingwebhookconfigurations'), {
      apiVersion: `${ADMISSION}/v1`,
      kind: 'MutatingWebhookConfiguration',
      metadata: { name: config },
      webhooks: [hook],
    });
    // A validating configuration that never matches anything, only to be patched.
    await cp.client.create(apiPath(ADMISSION, 'v1', 'validatingwebhookconfigurations'), {
      apiVersion: `${ADMISSION}/v1`,
      kind: 'ValidatingWebhookConfiguration',
      metadata: { name: config },
      webhooks: [{ ...hook, clientConfig: { url: `https://127.0.0.1:${server.port}/validate-services` }, namespaceSelector: { matchLabels: { 'never-matches': 'x' } } }],
    });

    const second = await bootstrapCertificates(cp.client, { ...opts, now: past });
    assert.deepEqual([second.caSecretWritten, second.servingSecretWritten], [false, false]);
    assert.deepEqual(second.patchedConfigurations, [`mutating/${config}`, `validating/${config}`]);
    const stored = await cp.client.get<V1MutatingWebhookConfiguration>(mutatingPath);
    assert.equal(Buffer.from(stored.webhooks?.[0]?.clientConfig.caBundle ?? '', 'base64').toString('utf8'), secretText(tlsSecret, 'ca.crt'));

    // Nothing differs now: no write at all.
    const before = (await cp.client.get<V1Secret>(secretPath('webhook-tls'))).metadata?.resourceVersion;
    const third = await bootstrapCertificates(cp.client, { ...opts, now: past });
    assert.deepEqual([third.caSecretWritten, third.servingSecretWritten, third.patchedConfigurations], [false, false, []]);
    assert.equal((await cp.client.get<V1Secret>(secretPath('webhook-tls'))).metadata?.resourceVersion, before);
    assert.equal((await cp.client.get<V1MutatingWebhookConfiguration>(mutatingPath)).metadata?.resourceVersion, stored.metadata?.resourceVersion);
  });

  async function labelledThroughWebhook(name: string): Promise<void> {
    // The apiserver picks up configuration changes asynchronously: retry briefly.
    let last: unknown;
    for (let i = 0; i < 50; i++) {
      try {
        const svc = await cp.client.create<V1Service>(
          apiPath('', 'v1', 'services', ns),
          {
            apiVersion: 'v1',
            kind: 'Service',
            metadata: { name: `${name}-${i}`, annotations: { 'k8s.v1.cni.cncf.io/service-network': 'net-a' } },
            spec: { selector: { app: 'x' }, ports: [{ port: 80 }] },
          },
          { dryRun: true },
        );
        assert.equal(svc.metadata?.labels?.['service.kubernetes.io/service-proxy-name'], 'multus-proxy');
        return;
      } catch (e) {
        last = e;
        await delay(100);
      }
    }
    throw new Error(`the apiserver could not use the webhook: ${String(last)}`);
  }

  void test('CA rotation overlaps: the apiserver reaches the webhook with the old leaf and with the new one', async () => {
    await labelledThroughWebhook('before');
    const oldTls = await cp.client.get<V1Secret>(secretPath('webhook-tls'));
    // At the real time the 30-day CA made "25 days ago" has 5 days left, inside its 10-day window.
    const rotated = await bootstrapCertificates(cp.client, { ...opts, now: new Date() });
    assert.match(rotated.plan.reasons.join('\n'), /new CA: the CA expires in 5\.0 days/);
    assert.deepEqual([rotated.caSecretWritten, rotated.servingSecretWritten], [true, true]);
    assert.deepEqual(rotated.patchedConfigurations, [`mutating/${config}`, `validating/${config}`]);
    const newTls = await cp.client.get<V1Secret>(secretPath('webhook-tls'));
    const bundle = secretText(newTls, 'ca.crt');
    assert.equal(splitPemBundle(bundle).length, 2, 'new CA + old CA');
    assert.ok(isIssuedBy(secretText(newTls, 'tls.crt'), splitPemBundle(bundle)[0] ?? ''));
    assert.ok(isIssuedBy(secretText(oldTls, 'tls.crt'), splitPemBundle(bundle)[1] ?? ''));
    const caSecret = await cp.client.get<V1Secret>(secretPath('webhook-ca'));
    assert.equal(splitPemBundle(secretText(caSecret, 'previous.crt')).length, 1);

    // The webhook still serves the old leaf (kubelet has not updated the volume yet): trusted through the old CA.
    await labelledThroughWebhook('old-leaf');
    // The volume is updated; the webhook reloads; trusted through the new CA.
    writeFileSync(join(dir, 'tls.key'), secretText(newTls, 'tls.key'));
    writeFileSync(join(dir, 'tls.crt'), secretText(newTls, 'tls.crt'));
    for (let i = 0; i < 50 && source?.current().fingerprint256 !== inspectCert(secretText(newTls, 'tls.crt'))?.fingerprint256; i++) await delay(50);
    assert.equal(source?.current().fingerprint256, inspectCert(secretText(newTls, 'tls.crt'))?.fingerprint256);
    await labelledThroughWebhook('new-leaf');
    // The new bundle is surely in effect now (the new leaf is trusted). A replica whose volume
    // still holds the old leaf must be trusted as well: that is the overlap.
    writeFileSync(join(dir, 'tls.key'), secretText(oldTls, 'tls.key'));
    writeFileSync(join(dir, 'tls.crt'), secretText(oldTls, 'tls.crt'));
    for (let i = 0; i < 50 && source?.current().fingerprint256 !== inspectCert(secretText(oldTls, 'tls.crt'))?.fingerprint256; i++) await delay(50);
    assert.equal(source?.current().fingerprint256, inspectCert(secretText(oldTls, 'tls.crt'))?.fingerprint256);
    await labelledThroughWebhook('old-leaf-again');
  });
});
