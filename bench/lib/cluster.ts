/**
 * The real kube-apiserver for B3, B5 and B6 (test/harness/controlplane.ts), loaded with the
 * synthetic Services, EndpointSlices and pods of services.ts.
 */
import { startControlPlane, type ControlPlane } from '../../test/harness/controlplane.js';
import { apiPath } from '../../src/kube/paths.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { V1EndpointSlice, V1Pod, V1Service } from '../../src/kube/types.js';
import { BENCH_NAMESPACE, endpointSlice, service } from './services.js';
import type { Cleanup } from './proc.js';

export const SERVICES_PATH = apiPath('', 'v1', 'services', BENCH_NAMESPACE);
export const SLICES_PATH = apiPath('discovery.k8s.io', 'v1', 'endpointslices', BENCH_NAMESPACE);
export const PODS_PATH = apiPath('', 'v1', 'pods', BENCH_NAMESPACE);

import { inParallel } from '../../test/harness/parallel.js';

export { inParallel };

/** A private control plane with the bench namespace; stopped by the cleanup. */
export async function benchControlPlane(cleanup: Cleanup): Promise<ControlPlane> {
  const cp = await startControlPlane({ startTimeoutMs: 180_000 });
  cleanup.add('control plane', () => cp.stop());
  await cp.createNamespace(BENCH_NAMESPACE);
  return cp;
}

export const WRITE_CONCURRENCY = 16;

/** Services `from` … `n − 1` (so a benchmark can grow a cluster it already loaded). */
export async function createServices(client: KubeClient, n: number, from = 0, make: (i: number) => V1Service = service): Promise<V1Service[]> {
  return inParallel(
    Array.from({ length: n - from }, (_, i) => from + i),
    WRITE_CONCURRENCY,
    (i) => client.create<V1Service>(SERVICES_PATH, make(i)),
  );
}

export async function createSlices(client: KubeClient, n: number, perService: number, from = 0, make: (i: number, perService: number) => V1EndpointSlice = endpointSlice): Promise<V1EndpointSlice[]> {
  return inParallel(
    Array.from({ length: n - from }, (_, i) => from + i),
    WRITE_CONCURRENCY,
    (i) => client.create<V1EndpointSlice>(SLICES_PATH, make(i, perService)),
  );
}

export async function createPod(client: KubeClient, pod: V1Pod): Promise<V1Pod> {
  return client.create<V1Pod>(PODS_PATH, pod);
}

/** Replaces slice i with `next` over the version last written (`current`), and remembers the new one. */
export async function replaceSlice(client: KubeClient, current: Map<number, V1EndpointSlice>, i: number, next: V1EndpointSlice): Promise<void> {
  const body = { ...next, metadata: { ...next.metadata, resourceVersion: current.get(i)?.metadata?.resourceVersion ?? '' } };
  current.set(i, await client.replace<V1EndpointSlice>(`${SLICES_PATH}/${next.metadata?.name ?? ''}`, body));
}
