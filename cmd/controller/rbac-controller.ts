/**
 * The sidecar RBAC sync as its own small controller: its own queue (one key: the whole set of
 * bindings is one decision, made from the namespace cache by syncSidecarRbac), its own worker, its
 * own retry backoff and its own periodic re-check. It shares nothing with the Service queue but the
 * fenced writer, so a slow or failing RBAC sync neither delays nor is delayed by slice writes, and
 * no special key has to be told apart from Service keys.
 */
import type { KubeClient } from '../../src/kube/client.js';
import type { V1Namespace, V1Pod } from '../../src/kube/types.js';
import type { Logger } from '../../src/log.js';
import { INJECTION_LABEL } from '../../src/keys.js';
import type { EventRecorder } from './events.js';
import type { ControllerMetrics } from './metrics.js';
import { WorkQueue } from './queue.js';
import { injectedAccounts, SIDECAR_POD_ROLE, syncSidecarRbac, type RbacFailure } from './sidecar-rbac.js';

/** The one key of the RBAC queue. */
const SYNC = 'sidecar-rbac';
/** Sidecar RBAC is also re-checked this often, in case someone edited or deleted it. */
export const RBAC_RESYNC_MS = 5 * 60_000;

export interface RbacControllerDeps {
  /** The fenced writer: a write outside leadership is refused there. */
  readonly client: KubeClient;
  /** The namespace cache (labels and phase are all it reads). */
  readonly namespaces: () => readonly V1Namespace[];
  /** The ServiceAccounts of injected pods per namespace, from the pod cache (injectedAccounts). */
  readonly accounts: () => ReadonlyMap<string, readonly string[]>;
  readonly logger: Logger;
  readonly metrics: ControllerMetrics;
  /** Where a namespace's failed write is reported (an Event about its RoleBinding). */
  readonly events?: EventRecorder;
  readonly resyncMs?: number;
}

/** Raised after a sync whose writes partly failed, so the key is retried with backoff. */
class RbacWritesFailed extends Error {
  override readonly name = 'RbacWritesFailed';
}

export interface RbacController {
  /** Namespace events: only a change of the injection label or the phase matters. */
  onNamespace(n: V1Namespace | undefined, old: V1Namespace | undefined): void;
  /** Pod events: only an injected pod's arrival, departure or ServiceAccount matters. */
  onPod(p: V1Pod | undefined, old: V1Pod | undefined): void;
  /** Starts the worker and the periodic re-check, and syncs once (on becoming leader). */
  start(): void;
  /** Stops the worker and the re-check; a sync in flight finishes (its writes are fenced). */
  stop(): void;
  /** Nothing waiting, running or delayed. */
  idle(): boolean;
}

/** Whether a namespace event changes which namespaces get bindings. */
export function namespaceChangeMatters(n: V1Namespace | undefined, old: V1Namespace | undefined): boolean {
  if (n === undefined || old === undefined) return true;
  return n.metadata?.labels?.[INJECTION_LABEL] !== old.metadata?.labels?.[INJECTION_LABEL] || n.status?.phase !== old.status?.phase;
}

/** Whether a pod event can change the bound ServiceAccounts: an injected pod came, went, or changed account. */
export function podChangeMatters(p: V1Pod | undefined, old: V1Pod | undefined): boolean {
  const key = (x: V1Pod | undefined): string => JSON.stringify([...(x === undefined ? [] : injectedAccounts([x]))]);
  return key(p) !== key(old);
}

export function createRbacController(deps: RbacControllerDeps): RbacController {
  const queue = new WorkQueue({ baseDelayMs: 100, maxDelayMs: 60_000 });
  let running = false;
  let timer: NodeJS.Timeout | undefined;

  const report = (f: RbacFailure): void => {
    const ns = f.write.namespace;
    // A namespace's failure is told to its owner, beside the object in the way; a
    // cluster-scoped one only reaches the log (and the retry).
    if (ns === undefined || deps.events === undefined) return;
    const about = { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', name: SIDECAR_POD_ROLE, namespace: ns, uid: f.blocker?.uid ?? '' };
    deps.events.record(about, 'Warning', f.write.what, 'SidecarRbacFailed', f.message);
  };

  const sync = async (): Promise<void> => {
    const { made, problems, failures } = await syncSidecarRbac(deps.client, deps.namespaces(), deps.accounts());
    if (made.length > 0) deps.logger.info({ writes: made.map((w) => `${w.verb} ${w.what}`) }, 'sidecar RBAC updated');
    for (const p of problems) {
      deps.metrics.errors.inc({ stage: 'rbac' });
      deps.logger.warn(p);
    }
    for (const f of failures) report(f);
    if (failures.length > 0) throw new RbacWritesFailed(failures.map((f) => f.message).join('; '));
  };

  const worker = async (): Promise<void> => {
    for (;;) {
      const key = await queue.get();
      if (key === undefined) return;
      try {
        await sync();
        queue.forget(key);
      } catch (e) {
        deps.metrics.errors.inc({ stage: 'rbac' });
        const delay = running ? queue.addRateLimited(key) : 0;
        deps.logger.warn({ err: e instanceof Error ? e.message : String(e), retryInMs: delay }, 'sidecar RBAC sync failed; retrying');
      } finally {
        queue.done(key);
      }
    }
  };

  return {
    onNamespace: (n, old) => {
      // Before start() nothing is queued: start() syncs once from the full cache anyway.
      if (running && namespaceChangeMatters(n, old)) queue.add(SYNC);
    },
    onPod: (p, old) => {
      if (running && podChangeMatters(p, old)) queue.add(SYNC);
    },
    start: () => {
      if (running) return;
      running = true;
      queue.add(SYNC);
      timer = setInterval(() => queue.add(SYNC), deps.resyncMs ?? RBAC_RESYNC_MS);
      void worker();
    },
    stop: () => {
      running = false;
      if (timer !== undefined) clearInterval(timer);
      queue.shutdown();
    },
    idle: () => queue.pending() === 0,
  };
}
