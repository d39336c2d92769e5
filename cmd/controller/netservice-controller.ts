/**
 * The NetService part of the controller (optional, see deploy/components/netservice): informers
 * on NetServices and NetworkAttachmentDefinitions, its own work queue, level-based reconciles
 * (read the NetService, the Service of that name live, the NADs known; planNetService decides;
 * write the Service, an Event, the Ready condition). Only the leader's workers write.
 *
 * The Services it keeps carry the proxy-name label, so the main controller's Service informer sees
 * them: run.ts forwards their changes here (someone edited or deleted "our" Service -> repaired).
 * Deleting a NetService deletes its Service here, not through a garbage collector (a cluster
 * without one, like the test harness, would keep it forever); the main controller then deletes the
 * slices of the vanished Service as for any other.
 */
import { getIfExists, isConflict, isNotFound, type KubeClient } from '../../src/kube/client.js';
import { createInformer, type Informer } from '../../src/kube/informer.js';
import { apiPath } from '../../src/kube/paths.js';
import { objectKey, type KubeObject, type NetworkAttachmentDefinition, type V1Service } from '../../src/kube/types.js';
import type { Logger } from '../../src/log.js';
import { NETSERVICE_GROUP, NETSERVICE_KIND, NETSERVICE_LABEL, NETSERVICE_RESOURCE, NETSERVICE_VERSION } from '../../src/keys.js';
import type { NetworkRef } from '../../src/annotations/service-network.js';
import type { EventRecorder, EventSubject } from './events.js';
import { NETSERVICE_API_VERSION, nextConditions, planNetService, readyCondition, type NetService, type NetServiceAction } from './netservice.js';
import { runWorker, WorkQueue } from './queue.js';
import { RetryableWriteError } from './reconcile.js';

export type NetServiceMode = 'auto' | 'true' | 'false';

export interface NetServiceDeps {
  readonly client: KubeClient;
  readonly logger: Logger;
  readonly events: EventRecorder;
  readonly mayWrite: () => boolean;
  /** Watch this namespace's NetServices only (NADs are always read cluster-wide: a bare name may resolve elsewhere). */
  readonly namespace?: string;
  readonly workers: number;
  readonly onError?: () => void;
}

export interface NetServiceController {
  readonly informers: Informer<KubeObject>[];
  /** A Service changed (from the main Service informer); ours are mapped to their NetService. */
  onService(svc: V1Service): void;
  /** Starts the workers (leader only) after enqueuing every NetService and every Service we own. */
  startWorking(ourServices: readonly V1Service[]): void;
  /** Every NetService again (periodic safety net: e.g. a clashing Service of the user's was deleted). */
  resync(): void;
  idle(): boolean;
  stop(): void;
}

/** Whether the apiserver serves svcctl.metaswitch.com/v1alpha1 (the CRD is installed). */
export async function netServiceApiServed(client: Pick<KubeClient, 'get'>): Promise<boolean> {
  return (await getIfExists(client, `/apis/${NETSERVICE_GROUP}/${NETSERVICE_VERSION}`)) !== undefined;
}

const nsPath = (namespace: string | undefined, name?: string): string => apiPath(NETSERVICE_GROUP, NETSERVICE_VERSION, NETSERVICE_RESOURCE, namespace, name);
const svcPath = (namespace: string, name?: string): string => apiPath('', 'v1', 'services', namespace, name);

function subject(ns: NetService): EventSubject {
  return { apiVersion: NETSERVICE_API_VERSION, kind: NETSERVICE_KIND, name: ns.metadata?.name ?? '', namespace: ns.metadata?.namespace ?? '', uid: ns.metadata?.uid ?? '' };
}

/**
 * A clashing Service is not ours, so it carries no proxy label and no informer here sees it go.
 * The NetService is looked at again this often until the name is free (level-based, no watch on
 * every Service in the cluster just for this).
 */
export const CLASH_RECHECK_MS = 15_000;

const WARNINGS: Partial<Record<NetServiceAction['kind'], string>> = { clash: 'ServiceNameConflict', invalid: 'InvalidSpec', unresolved: 'NetAttachDefUnresolved' };

/** Creates, replaces or deletes the NetService's Service as planned; false for the kinds that write no Service. */
async function writeService(d: NetServiceDeps, key: string, action: NetServiceAction): Promise<boolean> {
  const slash = key.indexOf('/');
  const namespace = key.slice(0, slash);
  const name = key.slice(slash + 1);
  switch (action.kind) {
    case 'create':
      try {
        await d.client.create(svcPath(namespace), action.service);
      } catch (e) {
        // Created by someone else meanwhile: the next reconcile sees whose it is.
        if (isConflict(e) || (e as { status?: number }).status === 409) throw new RetryableWriteError(`create of Service ${key}: ${(e as Error).message}`);
        throw e;
      }
      d.logger.info({ netservice: key, network: action.service.metadata?.annotations }, 'NetService Service created');
      return true;
    case 'update':
      try {
        await d.client.replace(svcPath(namespace, name), action.service);
      } catch (e) {
        if (isConflict(e) || isNotFound(e)) throw new RetryableWriteError(`update of Service ${key}: ${(e as Error).message}`);
        throw e;
      }
      d.logger.info({ netservice: key }, 'NetService Service updated');
      return true;
    case 'delete':
      await d.client.delete(svcPath(namespace, name));
      d.logger.info({ netservice: key }, 'NetService gone: its Service deleted');
      return true;
    case 'none':
      return true;
    default:
      return false;
  }
}

export function createNetServiceController(d: NetServiceDeps): NetServiceController {
  const queue = new WorkQueue({ baseDelayMs: 200, maxDelayMs: 60_000 });
  const netServices = createInformer<NetService>(d.client, { logger: d.logger, name: 'netservices', path: nsPath(d.namespace) });
  // Only names are read: drop spec.config (CNI JSON) and the rest from the cache.
  const nads = createInformer<NetworkAttachmentDefinition>(d.client, {
    logger: d.logger,
    name: 'network-attachment-definitions',
    path: apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions'),
    transform: (n) => ({ metadata: { name: n.metadata?.name, namespace: n.metadata?.namespace, resourceVersion: n.metadata?.resourceVersion } }),
  });
  let working = false;
  const enqueue = (key: string): void => {
    if (working) queue.add(key);
  };
  const enqueueAll = (): void => netServices.list().forEach((n) => enqueue(objectKey(n)));

  netServices.on({ add: (n) => enqueue(objectKey(n)), update: (n) => enqueue(objectKey(n)), delete: (n) => enqueue(objectKey(n)) });
  // A NAD appearing or going can change how a bare name resolves for any NetService.
  nads.on({ add: enqueueAll, update: () => undefined, delete: enqueueAll });

  const nadRefs = (): NetworkRef[] => nads.list().map((n) => ({ namespace: n.metadata?.namespace ?? '', name: n.metadata?.name ?? '' }));

  async function writeStatus(ns: NetService, action: NetServiceAction): Promise<void> {
    const conditions = nextConditions(ns.status?.conditions, readyCondition(action, ns.metadata?.generation), new Date());
    if (conditions === undefined) return;
    try {
      await d.client.patch(`${nsPath(ns.metadata?.namespace, ns.metadata?.name)}/status`, { status: { conditions, observedGeneration: ns.metadata?.generation } }, 'merge');
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
  }

  async function reconcile(key: string): Promise<void> {
    const slash = key.indexOf('/');
    const namespace = key.slice(0, slash);
    const name = key.slice(slash + 1);
    const ns = netServices.get(key);
    const existing = await getIfExists<V1Service>(d.client, svcPath(namespace, name));
    const action = planNetService(ns, existing, nadRefs());
    if (!d.mayWrite()) throw new Error('not the leader any more: write refused');
    if (!(await writeService(d, key, action)) && 'message' in action) {
      // clash, invalid, unresolved: nothing is written but the Event and the condition.
      if (ns !== undefined) d.events.record(subject(ns), 'Warning', action.kind, WARNINGS[action.kind] ?? action.kind, action.message);
      if (action.kind === 'clash') queue.addAfter(key, CLASH_RECHECK_MS);
    }
    if (ns !== undefined && action.kind !== 'delete') await writeStatus(ns, action);
  }

  const failed = (key: string, e: unknown, retryInMs: number): void => {
    d.onError?.();
    d.logger[e instanceof RetryableWriteError ? 'info' : 'warn']({ netservice: key, err: e instanceof Error ? e.message : String(e), retryInMs }, 'NetService reconcile failed; retrying');
  };

  return {
    informers: [netServices, nads] as Informer<KubeObject>[],
    onService(svc) {
      const owner = svc.metadata?.labels?.[NETSERVICE_LABEL];
      if (owner !== undefined && svc.metadata?.namespace !== undefined) enqueue(`${svc.metadata.namespace}/${owner}`);
    },
    startWorking(ourServices) {
      working = true;
      enqueueAll();
      // Services whose NetService vanished while no controller ran (orphans) are found by their label.
      for (const s of ourServices) this.onService(s);
      for (let i = 0; i < d.workers; i++) void runWorker(queue, reconcile, failed, d.mayWrite);
    },
    resync: enqueueAll,
    idle: () => queue.pending() === 0,
    stop: () => queue.shutdown(),
  };
}
