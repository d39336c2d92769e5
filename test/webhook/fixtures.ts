/** Shared test fixtures for the webhook: a sidecar configuration, fake cluster lookups, requests, patch application. */
import jsonpatch from 'fast-json-patch';
import type { Operation as JsonPatchOperation } from 'fast-json-patch';
import type { ClusterLookups, NadState } from '../../cmd/webhook/cluster.js';
import type { NodeAgentPresence } from '../../cmd/webhook/service.js';
import { DEFAULT_SIDECAR_COMMAND, type SidecarConfig } from '../../cmd/webhook/options.js';
import type { AdmissionRequest, AdmissionResponse, Operation } from '../../cmd/webhook/responses.js';
import { networkKey } from '../../src/annotations/service-network.js';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createCA, createServingCert } from '../../cmd/certs/pki.js';
import assert from 'node:assert/strict';
import { KubeApiError } from '../../src/kube/client.js';
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
