/** Shared test fixtures for the webhook: a sidecar configuration, fake cluster lookups, requests, patch application. */
import jsonpatch from 'fast-json-patch';
import type { Operation as JsonPatchOperation } from 'fast-json-patch';
import type { ClusterLookups, NadState } from '../../cmd/webhook/cluster.js';
import type { NodeAgentPresence } from '../../cmd/webhook/service.js';
import { DEFAULT_SIDECAR_COMMAND, type SidecarConfig } from '../../cmd/webhook/options.js';
import type { AdmissionRequest, AdmissionResponse, Operation } from '../../cmd/webhook/responses.js';
import { networkKey } from '../../src/annotations/service-network.js';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { createCA, createServingCert } from '../../cmd/certs/pki.js';
import assert from 'node:assert/strict';
import { createKubeClient, KubeApiError, type KubeClient } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import { poll, type ControlPlane } from '../harness/controlplane.js';
import { createClusterLookups } from '../../cmd/webhook/cluster.js';
import { policyValidationHandler } from '../../cmd/webhook/handlers.js';
import { createApp, PATHS, startWebhookServer } from '../../cmd/webhook/server.js';
import { watchCertificateFiles } from '../../cmd/webhook/tls.js';
import { MULTI_NETWORK_POLICY_GROUP, MULTI_NETWORK_POLICY_RESOURCE, POLICY_FOR_ANNOTATION } from '../../src/keys.js';
import type { PolicyLookup } from '../../cmd/webhook/policy-cache.js';
import { slimPolicy } from '../../cmd/webhook/policy-cache.js';
import type { MultiNetworkPolicy } from '../../src/policy/api.js';
import { selectingPolicy } from '../../src/policy/selection.js';

export const SIDECAR: SidecarConfig = {
  image: 'registry.example/multus-proxy:test',
  imagePullPolicy: 'IfNotPresent',
  mode: 'native',
  privileged: false,
  healthPort: 9180,
  logLevel: 'info',
  backend: 'auto',
  command: [...DEFAULT_SIDECAR_COMMAND],
  args: [],
  resources: { requests: { cpu: '10m', memory: '48Mi' }, limits: { memory: '128Mi' } },
  tokenExpirationSeconds: 3607,
  maxServicesPerNetwork: 2000,
  sourceGuard: { mode: 'enforce', exemptNamespaces: [] },
};

export const ENABLED = { 'multus-proxy-injection': 'enabled' };

/** In-memory ClusterLookups that counts its calls. */
export function fakeCluster(
  init: {
    namespaces?: Record<string, Record<string, string>>;
    native?: boolean;
    nads?: Record<string, NadState>;
    nadAnnotations?: Record<string, Record<string, string>>;
    nodeAgent?: NodeAgentPresence;
  } = {},
): ClusterLookups & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    async namespaceLabels(name, fresh) {
      calls.push(`ns:${name}${fresh ? ':fresh' : ''}`);
      return init.namespaces?.[name];
    },
    async nativeSidecarsSupported() {
      calls.push('version');
      return init.native ?? true;
    },
    async nadExists(ref) {
      calls.push(`nad:${networkKey(ref)}`);
      const annotations = init.nadAnnotations?.[networkKey(ref)];
      return { state: init.nads?.[networkKey(ref)] ?? 'exists', ...(annotations !== undefined ? { annotations } : {}) };
    },
    async nodeAgent() {
      calls.push('node-agent');
      return init.nodeAgent ?? 'ready';
    },
  };
}

/** A synced policy cache holding these policies, each kept as the webhook's informer keeps it. */
export function fakePolicies(policies: readonly MultiNetworkPolicy[]): PolicyLookup {
  const kept = policies.map((p) => slimPolicy(p).selection);
  return { state: () => 'synced', selecting: (pod) => selectingPolicy(kept, pod) };
}

let uidCounter = 0;
export function admissionRequest(object: unknown, namespace: string, operation: Operation = 'CREATE', kind = 'Pod'): AdmissionRequest {
  uidCounter += 1;
  return {
    uid: `uid-${uidCounter}`,
    kind: { group: '', version: 'v1', kind },
    resource: { group: '', version: 'v1', resource: kind === 'Pod' ? 'pods' : 'services' },
    namespace,
    operation,
    object,
  };
}

export function decodePatch(response: AdmissionResponse): JsonPatchOperation[] {
  if (response.patch === undefined) return [];
  return JSON.parse(Buffer.from(response.patch, 'base64').toString('utf8')) as JsonPatchOperation[];
}

/** Applies the response's JSON Patch to a copy of `original` with fast-json-patch (validating each operation). */
export function applyResponse<T>(original: T, response: AdmissionResponse): T {
  const ops = decodePatch(response);
  return jsonpatch.applyPatch(structuredClone(original), ops, true, false).newDocument;
}

/** The webhook Service's name in the install namespace, as clients (and SANs) spell it. */
export const WEBHOOK_DNS_NAME = 'multus-proxy-webhook.multus-proxy-system.svc';

/** A fresh folder with tls.crt/tls.key for the webhook Service (plus IP SANs), and the CA that signed them. */
export function servingPairFolder(prefix: string, ips: string[] = []): { dir: string; caPem: string; certFile: string; keyFile: string } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const ca = createCA();
  const leaf = createServingCert(ca, { service: 'multus-proxy-webhook', namespace: 'multus-proxy-system', ips });
  writeFileSync(join(dir, 'tls.crt'), leaf.certPem);
  writeFileSync(join(dir, 'tls.key'), leaf.keyPem);
  return { dir, caPem: ca.certPem, certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key') };
}

/** The apiserver's message for a write that must be refused; fails the test when it succeeds. */
export async function createError(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof KubeApiError, `expected an API error, got ${String(e)}`);
    return e.message;
  }
  assert.fail('the create call succeeded but should have been denied');
}

const DEPLOY = join(import.meta.dirname, '..', '..', 'deploy');
const RBAC = 'rbac.authorization.k8s.io';

/**
 * The webhook's identity: the service account multus-proxy-webhook of `namespace`, bound to a
 * ClusterRole `roleName` with the shipped ClusterRole's rules (deploy/base/webhook-rbac.yaml), so a
 * test proves those rules sufficient. Delete the role and binding named `roleName` afterwards.
 */
export async function shippedWebhookClient(cp: ControlPlane, namespace: string, roleName: string): Promise<KubeClient> {
  const docs = loadAll(readFileSync(join(DEPLOY, 'base', 'webhook-rbac.yaml'), 'utf8')) as { kind?: string; rules?: unknown }[];
  const role = docs.find((d) => d.kind === 'ClusterRole');
  assert.ok(role, 'deploy/base/webhook-rbac.yaml has a ClusterRole');
  await cp.client.create(apiPath(RBAC, 'v1', 'clusterroles'), { apiVersion: `${RBAC}/v1`, kind: 'ClusterRole', metadata: { name: roleName }, rules: role.rules });
  await cp.client.create(apiPath(RBAC, 'v1', 'clusterrolebindings'), {
    apiVersion: `${RBAC}/v1`,
    kind: 'ClusterRoleBinding',
    metadata: { name: roleName },
    roleRef: { apiGroup: RBAC, kind: 'ClusterRole', name: roleName },
    subjects: [{ kind: 'ServiceAccount', name: 'multus-proxy-webhook', namespace }],
  });
  return createKubeClient({ server: cp.server, ca: Buffer.from(cp.caPem), token: await cp.tokenFor(namespace, 'multus-proxy-webhook') });
}

/** Installs the MultiNetworkPolicy CRD as deploy/components/multi-networkpolicy ships it; false when one was there already. */
export async function installPolicyCrd(cp: ControlPlane): Promise<boolean> {
  const crd = loadAll(readFileSync(join(DEPLOY, 'components', 'multi-networkpolicy', 'crd.yaml'), 'utf8'))[0] as object;
  try {
    await cp.client.create(apiPath('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'), crd);
    return true;
  } catch (e) {
    if (e instanceof KubeApiError && e.status === 409) return false;
    throw e;
  }
}

/**
 * The webhook's MultiNetworkPolicy validation, served here and registered with the apiserver by the
 * shipped rules and matchConditions (deploy/base), pointed at this server and narrowed to the
 * namespaces labelled `namespaceLabel`. Resolves once a policy it denies is denied in `namespace`
 * (the configuration takes effect asynchronously); close() removes the configuration.
 */
export async function startPolicyValidation(cp: ControlPlane, namespace: string, namespaceLabel: Record<string, string>, configName: string): Promise<{ close(): Promise<void> }> {
  const ADMISSION = 'admissionregistration.k8s.io';
  const pair = servingPairFolder('webhook-policy-', ['127.0.0.1']);
  const certs = watchCertificateFiles(pair.certFile, pair.keyFile);
  const cluster = createClusterLookups(cp.client, { namespaceCacheMs: 1000, nadTimeoutMs: 2000 });
  const app = createApp({ endpoints: { [PATHS.validatePolicies]: { kind: 'MultiNetworkPolicy', handler: policyValidationHandler({ cluster }) } }, maxBodyBytes: 8 * 1024 * 1024 });
  const server = await startWebhookServer(app, certs, { port: 0, host: '127.0.0.1' });
  const shipped = loadAll(readFileSync(join(DEPLOY, 'base', 'webhook-configurations.yaml'), 'utf8')) as {
    kind?: string;
    webhooks?: { name: string; clientConfig?: unknown; namespaceSelector?: unknown }[];
  }[];
  const hook = shipped.find((d) => d.kind === 'ValidatingWebhookConfiguration')?.webhooks?.find((w) => w.name.startsWith('multi-networkpolicies.'));
  assert.ok(hook, 'deploy/base has a validating webhook for multi-networkpolicies');
  await cp.client.create(apiPath(ADMISSION, 'v1', 'validatingwebhookconfigurations'), {
    apiVersion: `${ADMISSION}/v1`,
    kind: 'ValidatingWebhookConfiguration',
    metadata: { name: configName },
    webhooks: [
      {
        ...hook,
        clientConfig: { url: `https://127.0.0.1:${server.port}${PATHS.validatePolicies}`, caBundle: Buffer.from(pair.caPem).toString('base64') },
        namespaceSelector: { matchLabels: namespaceLabel },
      },
    ],
  });
  const probe = {
    apiVersion: `${MULTI_NETWORK_POLICY_GROUP}/v1beta1`,
    kind: 'MultiNetworkPolicy',
    metadata: { name: 'probe', annotations: { [POLICY_FOR_ANNOTATION]: 'no-such-net' } },
    spec: { podSelector: {} },
  };
  await poll('the validating webhook is in effect', 30_000, async () => {
    try {
      await cp.client.create(apiPath(MULTI_NETWORK_POLICY_GROUP, 'v1beta1', MULTI_NETWORK_POLICY_RESOURCE, namespace), probe, { dryRun: true });
      return false;
    } catch (e) {
      return e instanceof KubeApiError && /does not exist/.test(e.message);
    }
  });
  return {
    async close() {
      await cp.client.delete(apiPath(ADMISSION, 'v1', 'validatingwebhookconfigurations', undefined, configName));
      await server.close();
      certs.close();
      rmSync(pair.dir, { recursive: true, force: true });
    },
  };
}
