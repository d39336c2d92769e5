/**
 * Certificate bootstrap without cert-manager: keep the webhook's CA and serving Secrets and the
 * caBundle of the project's webhook configurations consistent. Idempotent; run it at install time
 * and then periodically (the CLI's --interval) so certificates are renewed before they expire.
 *
 * Order matters for overlapping rotation: (1) CA Secret, (2) caBundle in the webhook
 * configurations (new CA + previous CAs), (3) serving Secret with the new leaf. The apiserver
 * thus trusts the new CA before the webhook can serve a leaf signed by it, and keeps trusting
 * the old CA while the old leaf is still being served (kubelet updates Secret volumes lazily).
 */
import type { KubeClient } from '../../src/kube/client.js';
import { getIfExists, isConflict } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1MutatingWebhookConfiguration, V1Secret, V1ValidatingWebhookConfiguration } from '../../src/kube/types.js';
import type { Logger } from '../../src/log.js';
import { planCertificates, type CaStore, type CertificatePlan, type RotationOptions, type ServingStore } from './rotation.js';

export interface BootstrapOptions extends RotationOptions {
  /** Where both Secrets live (normally the install namespace, which is also the Service's). */
  readonly secretNamespace: string;
  /** The Secret the webhook mounts: type kubernetes.io/tls with tls.crt, tls.key, ca.crt. */
  readonly servingSecret: string;
  /** The CA's own Secret; not mounted anywhere, so the CA key never enters the webhook pod. */
  readonly caSecret: string;
  readonly mutatingWebhookConfigurations: readonly string[];
  readonly validatingWebhookConfigurations: readonly string[];
  readonly logger?: Logger;
}

export interface BootstrapResult {
  readonly plan: CertificatePlan;
  readonly caSecretWritten: boolean;
  readonly servingSecretWritten: boolean;
  /** `mutating/<name>` or `validating/<name>` whose caBundle was changed. */
  readonly patchedConfigurations: string[];
  /** Configurations that do not exist (yet); the next run patches them. */
  readonly missingConfigurations: string[];
}

/** Secret data keys. The serving Secret uses the kubernetes.io/tls names plus ca.crt (as cert-manager writes it). */
export const TLS_CERT = 'tls.crt';
export const TLS_KEY = 'tls.key';
export const CA_CERT = 'ca.crt';
/** In the CA Secret: earlier CAs still in the trust bundle. */
export const PREVIOUS_CA = 'previous.crt';

const ADMISSION_GROUP = 'admissionregistration.k8s.io';
const MAX_ATTEMPTS = 5;

function decode(secret: V1Secret | undefined, key: string): string | undefined {
  const b64 = secret?.data?.[key];
  return b64 === undefined ? undefined : Buffer.from(b64, 'base64').toString('utf8');
}

function encode(entries: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(entries).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('base64')]));
}

/** Creates the Secret, or replaces it at the resourceVersion that was read (a concurrent writer makes this fail with 409). */
async function writeSecret(client: KubeClient, namespace: string, name: string, existing: V1Secret | undefined, data: Record<string, string>): Promise<void> {
  // managedFields are the apiserver's bookkeeping, not ours to send back; resourceVersion stays (optimistic concurrency).
  const { managedFields: _managed, ...meta } = existing?.metadata ?? {};
  const body: V1Secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    // The type of an existing Secret is immutable; keep it rather than fail the replace.
    type: existing?.type ?? 'kubernetes.io/tls',
    metadata: {
      ...meta,
      name,
      namespace,
      labels: { ...(existing?.metadata?.labels ?? {}), 'app.kubernetes.io/part-of': 'multus-proxy' },
    },
    data: encode(data),
  };
  if (existing === undefined) await client.create(apiPath('', 'v1', 'secrets', namespace), body);
  else await client.replace(apiPath('', 'v1', 'secrets', namespace, name), body);
}

type WebhookConfiguration = V1MutatingWebhookConfiguration | V1ValidatingWebhookConfiguration;

/**
 * JSON patch setting caBundle on every webhook of a configuration whose bundle differs. Each
 * write is guarded by a `test` of the webhook's name, so a concurrent reorder makes the patch fail
 * instead of writing into the wrong entry. Empty when nothing differs (no write at all).
 */
export function caBundlePatch(config: WebhookConfiguration, caBundleB64: string): unknown[] {
  const ops: unknown[] = [];
  (config.webhooks ?? []).forEach((w, i) => {
    if (w.clientConfig?.caBundle === caBundleB64) return;
    ops.push({ op: 'test', path: `/webhooks/${i}/name`, value: w.name });
    ops.push({ op: 'add', path: `/webhooks/${i}/clientConfig/caBundle`, value: caBundleB64 });
  });
  return ops;
}

async function patchConfigurations(client: KubeClient, opts: BootstrapOptions, caBundlePem: string, result: { patched: string[]; missing: string[] }): Promise<void> {
  const b64 = Buffer.from(caBundlePem, 'utf8').toString('base64');
  const targets = [
    ...opts.mutatingWebhookConfigurations.map((name) => ({ kind: 'mutating', resource: 'mutatingwebhookconfigurations', name })),
    ...opts.validatingWebhookConfigurations.map((name) => ({ kind: 'validating', resource: 'validatingwebhookconfigurations', name })),
  ];
  for (const t of targets) {
    const path = apiPath(ADMISSION_GROUP, 'v1', t.resource, undefined, t.name);
    const config = await getIfExists<WebhookConfiguration>(client, path);
    if (config === undefined) {
      result.missing.push(`${t.kind}/${t.name}`);
      continue;
    }
    const ops = caBundlePatch(config, b64);
    if (ops.length === 0) continue;
    await client.patch(path, ops, 'json');
    result.patched.push(`${t.kind}/${t.name}`);
  }
}

async function attempt(client: KubeClient, opts: BootstrapOptions): Promise<BootstrapResult> {
  const caPath = apiPath('', 'v1', 'secrets', opts.secretNamespace, opts.caSecret);
  const servingPath = apiPath('', 'v1', 'secrets', opts.secretNamespace, opts.servingSecret);
  const caSecret = await getIfExists<V1Secret>(client, caPath);
  const servingSecret = await getIfExists<V1Secret>(client, servingPath);
  const caStore: CaStore | undefined = caSecret && {
    certPem: decode(caSecret, TLS_CERT),
    keyPem: decode(caSecret, TLS_KEY),
    previousPem: decode(caSecret, PREVIOUS_CA),
  };
  const servingStore: ServingStore | undefined = servingSecret && {
    certPem: decode(servingSecret, TLS_CERT),
    keyPem: decode(servingSecret, TLS_KEY),
    caBundlePem: decode(servingSecret, CA_CERT),
  };
  const plan = planCertificates(caStore, servingStore, opts);
  for (const r of plan.reasons) opts.logger?.info({ reason: r }, 'certificate change');

  if (plan.caChanged) {
    await writeSecret(client, opts.secretNamespace, opts.caSecret, caSecret, {
      [TLS_CERT]: plan.ca.certPem,
      [TLS_KEY]: plan.ca.keyPem,
      [PREVIOUS_CA]: plan.ca.previousPem,
    });
  }
  const configs = { patched: [] as string[], missing: [] as string[] };
  await patchConfigurations(client, opts, plan.serving.caBundlePem, configs);
  if (plan.servingChanged) {
    await writeSecret(client, opts.secretNamespace, opts.servingSecret, servingSecret, {
      [TLS_CERT]: plan.serving.certPem,
      [TLS_KEY]: plan.serving.keyPem,
      [CA_CERT]: plan.serving.caBundlePem,
    });
  }
  return {
    plan,
    caSecretWritten: plan.caChanged,
    servingSecretWritten: plan.servingChanged,
    patchedConfigurations: configs.patched,
    missingConfigurations: configs.missing,
  };
}

/**
 * One reconcile. Two bootstraps racing (two replicas starting together) conflict on the Secret
 * write (409: created or replaced since we read it); the loser reads again and reuses the winner's
 * certificates instead of overwriting them.
 */
export async function bootstrapCertificates(client: KubeClient, opts: BootstrapOptions): Promise<BootstrapResult> {
  for (let i = 1; ; i++) {
    try {
      return await attempt(client, opts);
    } catch (e) {
      if (!isConflict(e) || i >= MAX_ATTEMPTS) throw e;
      opts.logger?.info({ attempt: i }, 'certificate Secret changed under us; reading it again');
    }
  }
}
