/**
 * What the sidecar says about itself while it cannot use its input or cannot sync: a
 * Warning Event on its own pod and a metric, so the pod's owner sees why its rules are behind.
 * The pod stays Ready (docs/decisions/0019-pod-ready-while-sidecar-cannot-sync.md): the last good rules stay in place.
 *
 * ProblemState is pure (time passed in): it turns what happened into the Events to write, once per
 * distinct bad value (of the pod's annotations, and of the endpoint-macs annotation of each
 * address-group slice it reads), a failing sync at its first failure and then at most once per
 * `repeatMs`, and one Normal Event when a failing sync recovers.
 */
import type { KubeClient } from '../../src/kube/client.js';
import { objectEvent, type EventType } from '../../src/kube/events.js';
import { apiPath } from '../../src/kube/paths.js';
import type { Logger } from '../../src/log.js';
// The Event reasons are a contract with the controller's `diagnose` command, so they live in src/.
import { EVENT_COMPONENT, REASON_INVALID_ANNOTATION, REASON_INVALID_GROUP_ANNOTATION, REASON_SYNC_FAILED, REASON_SYNC_RECOVERED } from '../../src/sidecar-contract.js';

/** The pod annotations the sidecar reads. */
export type InputKey = 'service-network' | 'network-status';

export { EVENT_COMPONENT, REASON_INVALID_ANNOTATION, REASON_SYNC_FAILED, REASON_SYNC_RECOVERED } from '../../src/sidecar-contract.js';

export interface Say {
  readonly type: EventType;
  readonly reason: string;
  readonly message: string;
}

export class ProblemState {
  private readonly bad = new Map<InputKey, string>();
  /** Address-group slices (namespace/name) whose endpoint-macs annotation cannot be used, with why. */
  private readonly badGroups = new Map<string, string>();
  private lastSyncWarnMs: number | undefined;

  constructor(private readonly repeatMs: number) {}

  /** The annotation's current value was read: `error` when it is unusable (the last good value is kept). */
  input(key: InputKey, error: string | undefined): Say[] {
    return told(this.bad, key, error, REASON_INVALID_ANNOTATION, 'the sidecar keeps serving with the last good value until it is fixed');
  }

  /** Whether the annotation's current value is unusable. */
  invalid(key: InputKey): boolean {
    return this.bad.has(key);
  }

  /** An address-group slice was read (`error`: what is wrong with its endpoint-macs), or deleted (undefined). */
  group(slice: string, error: string | undefined): Say[] {
    return told(this.badGroups, slice, error, REASON_INVALID_GROUP_ANNOTATION, 'the policy rules match those peers by address alone, without the MAC binding, until it is fixed');
  }

  /** Address-group slices whose endpoint-macs cannot be used now. */
  invalidGroups(): number {
    return this.badGroups.size;
  }

  /** A sync failed (`failures` in a row), or succeeded after failing (error undefined). */
  sync(error: unknown, failures: number, now: number): Say[] {
    if (error === undefined) {
      if (this.lastSyncWarnMs === undefined) return [];
      this.lastSyncWarnMs = undefined;
      return [{ type: 'Normal', reason: REASON_SYNC_RECOVERED, message: 'rule sync succeeded again; the rules follow the Services and their endpoints' }];
    }
    if (this.lastSyncWarnMs !== undefined && now - this.lastSyncWarnMs < this.repeatMs) return [];
    this.lastSyncWarnMs = now;
    const why = error instanceof Error ? error.message : typeof error === 'string' ? error : JSON.stringify(error);
    return [{ type: 'Warning', reason: REASON_SYNC_FAILED, message: `rule sync failed (${failures} in a row): ${why}; the last good rules stay in place and the sync is retried with backoff` }];
  }
}

/** Remembers `key`'s problem: one Warning per distinct error, none while it stays the same, forgotten when it goes. */
function told<K>(bad: Map<K, string>, key: K, error: string | undefined, reason: string, consequence: string): Say[] {
  const before = bad.get(key);
  if (error === undefined) {
    bad.delete(key);
    return [];
  }
  bad.set(key, error);
  if (before === error) return [];
  return [{ type: 'Warning', reason, message: `${error}; ${consequence}` }];
}

/** Writes the Events on the pod (what they say is logged where it happens); never throws: an Event that cannot be written is logged. */
export function podEventWriter(client: KubeClient, pod: { namespace: string; name: string }, log: Logger): (s: Say) => void {
  return (s) => {
    const ev = objectEvent({ apiVersion: 'v1', kind: 'Pod', name: pod.name, namespace: pod.namespace, uid: '' }, s.type, s.reason, s.message, new Date(), {
      component: EVENT_COMPONENT,
      instance: pod.name,
    });
    client.create(apiPath('', 'v1', 'events', pod.namespace), ev).catch((e: unknown) => log.warn({ err: e instanceof Error ? e.message : String(e), reason: s.reason }, 'could not record Event'));
  };
}
