/**
 * Helpers for controller tests against the real apiserver: objects are created through the API
 * and pod status is written through the status subresource, standing in for the kubelet.
 */
import { createKubeClient, type KubeClient } from '../../src/kube/client.js';
import { createLogger } from '../../src/log.js';
import { parseOptions } from '../../cmd/controller/options.js';
import { startController, type RunningController } from '../../cmd/controller/run.js';
import { waitFor } from '../harness/wait.js';
import { apiPath } from '../../src/kube/paths.js';
import type { CoreV1Event, V1EndpointSlice, V1Pod, V1Service } from '../../src/kube/types.js';
import { MANAGED_BY, MANAGED_BY_LABEL, SERVICE_NAME_LABEL } from '../../src/keys.js';
import { pod as podFixture, service as serviceFixture, type PodOptions, type ServiceOptions } from '../unit/controller/fixtures.js';

export const podPath = (ns: string, name?: string): string => apiPath('', 'v1', 'pods', ns, name);
export const svcPath = (ns: string, name?: string): string => apiPath('', 'v1', 'services', ns, name);
export const slicePath = (ns: string, name?: string): string => apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns, name);

/** Creates a Service from the unit-test fixture (server-set fields stripped). */
export async function createService(client: KubeClient, ns: string, name: string, o: ServiceOptions = {}): Promise<V1Service> {
  const s = serviceFixture(name, { ...o, namespace: ns });
  if (s.metadata) delete s.metadata.uid;
  return client.create(svcPath(ns), s);
}

/**
 * Creates a pod and, standing in for the kubelet, writes its status (phase Running and the Ready
 * condition) through the status subresource. The network-status annotation is metadata and is
 * written with the pod.
 */
export async function createPod(client: KubeClient, ns: string, name: string, o: PodOptions & { finalizers?: string[]; skipStatus?: boolean } = {}): Promise<V1Pod> {
  const p = podFixture(name, { ...o, namespace: ns });
  if (p.metadata) {
    delete p.metadata.uid;
    delete p.metadata.deletionTimestamp;
    if (o.finalizers) p.metadata.finalizers = o.finalizers;
  }
  const status = p.status;
  delete p.status;
  const created = await client.create<V1Pod>(podPath(ns), p);
  if (o.skipStatus === true) return created;
  return setPodStatus(client, ns, name, { ready: o.ready !== false, phase: o.phase ?? 'Running', ...(status ? {} : {}) });
}

export async function setPodStatus(client: KubeClient, ns: string, name: string, s: { ready: boolean; phase?: string }): Promise<V1Pod> {
  const now = new Date().toISOString();
  return client.patch<V1Pod>(
    `${podPath(ns, name)}/status`,
    { status: { phase: s.phase ?? 'Running', conditions: [{ type: 'Ready', status: s.ready ? 'True' : 'False', lastTransitionTime: now }] } },
    'merge',
  );
}

export async function ourSlices(client: KubeClient, ns: string, service: string): Promise<V1EndpointSlice[]> {
  const list = await client.list<V1EndpointSlice>(slicePath(ns), { labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY},${SERVICE_NAME_LABEL}=${service}` });
  return list.items;
}

export function sliceAddresses(slices: readonly V1EndpointSlice[], family?: string): string[] {
  return slices
    .filter((s) => family === undefined || s.addressType === family)
    .flatMap((s) => (s.endpoints ?? []).flatMap((e) => e.addresses))
    .sort();
}

export async function serviceEvents(client: KubeClient, ns: string, service: string): Promise<CoreV1Event[]> {
  const list = await client.list<CoreV1Event>(apiPath('', 'v1', 'events', ns), { fieldSelector: `involvedObject.kind=Service,involvedObject.name=${service}` });
  return list.items;
}

/** Writes the controller's client issued (POST, PUT, PATCH, DELETE). */
export function writeCount(client: KubeClient): number {
  const c = client.requestCount();
  return ['POST', 'PUT', 'PATCH', 'DELETE', 'create', 'replace', 'patch', 'delete'].reduce((n, v) => n + (c[v] ?? 0), 0);
}

/** The controller in process, watching only `ns`, with its own client (its requests counted apart); ready. */
export async function startNamespacedController(connection: Parameters<typeof createKubeClient>[0], ns: string): Promise<RunningController> {
  const r = parseOptions(
    ['--health-port', '0', '--health-host', '127.0.0.1', '--leader-elect', 'false', '--resync', '0', '--manage-sidecar-rbac', 'false', '--namespace', ns, '--event-interval', '10m'],
    {},
  );
  if (!r.ok || r.value === 'help') throw new Error('bad test options');
  const ctl = await startController(createKubeClient(connection), r.value, createLogger('controller', process.env['LOG_LEVEL'] ?? 'warn'));
  await waitFor('controller ready', () => ctl.isReady());
  return ctl;
}
