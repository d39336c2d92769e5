/**
 * Migration from the archived multus-service: its EndpointSlices
 * (`endpointslice.kubernetes.io/managed-by: multus-endpointslice-controller.npwg.k8s.io`) left
 * behind for a Service this controller serves would be merged by DNS (headless) and by any reader
 * selecting on `kubernetes.io/service-name` with ours. They are deleted, with one Normal Event per
 * Service (rate-limited like every Event). `--remove-multus-service-slices=false` turns it off.
 *
 * Its own informer (only those slices) and queue of Service keys; level-based: for a key, the
 * served Service (from the main Service informer) and the legacy slices naming it decide.
 */
import type { KubeClient } from '../../src/kube/client.js';
import { createInformer, type Informer } from '../../src/kube/informer.js';
import { apiPath } from '../../src/kube/paths.js';
import { objectKey, type KubeObject, type V1EndpointSlice, type V1Service } from '../../src/kube/types.js';
import type { Logger } from '../../src/log.js';
import { MANAGED_BY_LABEL, MULTUS_SERVICE_MANAGED_BY, PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NAME_LABEL } from '../../src/keys.js';
import { serviceSubject, type EventRecorder } from './events.js';
import { runWorker, WorkQueue } from './queue.js';
import { readServiceSpec, serviceName } from './service-spec.js';

export const LEGACY_SLICE_SELECTOR = `${MANAGED_BY_LABEL}=${MULTUS_SERVICE_MANAGED_BY}`;
export const MIGRATION_EVENT_REASON = 'MultusServiceSlicesRemoved';

/** The Service key a legacy slice belongs to, or undefined when it names none. */
export function legacySliceServiceKey(slice: V1EndpointSlice): string | undefined {
  const svc = slice.metadata?.labels?.[SERVICE_NAME_LABEL];
  const ns = slice.metadata?.namespace;
  return svc === undefined || svc === '' || ns === undefined ? undefined : `${ns}/${svc}`;
}

/** Which of a Service's legacy slices to delete: all of them when we serve it (label and a valid spec), else none. */
export function legacySlicesToRemove(svc: V1Service | undefined, legacy: readonly V1EndpointSlice[]): V1EndpointSlice[] {
  if (svc === undefined || svc.metadata?.labels?.[PROXY_NAME_LABEL] !== PROXY_NAME) return [];
  return readServiceSpec(svc).kind === 'serve' ? [...legacy] : [];
}

export function removalMessage(svc: V1Service, names: readonly string[]): string {
  return `${serviceName(svc)}: deleted ${names.length} EndpointSlice${names.length === 1 ? '' : 's'} left by multus-service (${MANAGED_BY_LABEL}=${MULTUS_SERVICE_MANAGED_BY}): ${[...names].sort().join(', ')}; multus-proxy publishes this Service's endpoints now`;
}

export interface MigrationDeps {
  readonly client: KubeClient;
  readonly logger: Logger;
  readonly events: EventRecorder;
  readonly mayWrite: () => boolean;
  readonly getService: (key: string) => V1Service | undefined;
  readonly namespace?: string;
  readonly onError?: () => void;
}

export interface Migration {
  readonly informer: Informer<KubeObject>;
  onService(svc: V1Service): void;
  startWorking(): void;
  idle(): boolean;
  stop(): void;
}

export function createMigration(d: MigrationDeps): Migration {
  const queue = new WorkQueue({ baseDelayMs: 500, maxDelayMs: 60_000 });
  const slices = createInformer<V1EndpointSlice>(d.client, {
    logger: d.logger,
    name: 'multus-service-endpointslices',
    path: apiPath('discovery.k8s.io', 'v1', 'endpointslices', d.namespace),
    labelSelector: LEGACY_SLICE_SELECTOR,
    // Only which Service a slice belongs to is read.
    transform: (s) => ({
      addressType: s.addressType,
      endpoints: [],
      metadata: { name: s.metadata?.name, namespace: s.metadata?.namespace, labels: s.metadata?.labels, resourceVersion: s.metadata?.resourceVersion },
    }),
  });
  const byService = new Map<string, Set<string>>();
  let working = false;
  const enqueue = (key: string | undefined): void => {
    if (working && key !== undefined) queue.add(key);
  };
  const index = (s: V1EndpointSlice, present: boolean): void => {
    const key = legacySliceServiceKey(s);
    if (key === undefined) return;
    const names = byService.get(key) ?? new Set<string>();
    if (present) names.add(objectKey(s));
    else names.delete(objectKey(s));
    if (names.size > 0) byService.set(key, names);
    else byService.delete(key);
    if (present) enqueue(key);
  };
  slices.on({ add: (s) => index(s, true), update: (s) => index(s, true), delete: (s) => index(s, false) });

  async function reconcile(key: string): Promise<void> {
    const svc = d.getService(key);
    const legacy = [...(byService.get(key) ?? [])].map((k) => slices.get(k)).filter((s): s is V1EndpointSlice => s !== undefined);
    const remove = legacySlicesToRemove(svc, legacy);
    if (svc === undefined || remove.length === 0) return;
    const deleted: string[] = [];
    for (const s of remove) {
      if (!d.mayWrite()) throw new Error('not the leader any more: write refused');
      await d.client.delete(apiPath('discovery.k8s.io', 'v1', 'endpointslices', s.metadata?.namespace, s.metadata?.name));
      deleted.push(s.metadata?.name ?? '');
    }
    d.events.record(serviceSubject(svc), 'Normal', 'multus-service', MIGRATION_EVENT_REASON, removalMessage(svc, deleted));
  }

  const failed = (key: string, e: unknown, retryInMs: number): void => {
    d.onError?.();
    d.logger.warn({ service: key, err: e instanceof Error ? e.message : String(e), retryInMs }, 'removing multus-service EndpointSlices failed; retrying');
  };

  return {
    informer: slices,
    onService(svc) {
      const key = objectKey(svc);
      if (byService.has(key)) enqueue(key);
    },
    startWorking() {
      working = true;
      for (const key of byService.keys()) enqueue(key);
      void runWorker(queue, reconcile, failed, d.mayWrite);
    },
    idle: () => queue.pending() === 0,
    stop: () => queue.shutdown(),
  };
}
