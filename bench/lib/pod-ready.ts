/**
 * When a pod's Ready condition becomes True, from a pod watch: the start of the Kubernetes
 * network-programming SLI ("from the backend pod's Ready transition to the rule in place"). Pure;
 * the caller timestamps events on receipt.
 */
import type { V1Pod } from '../../src/kube/types.js';

/** One pod whose Ready condition became True with this event. */
export interface ReadyTransition {
  readonly pod: string;
  /** The condition's lastTransitionTime, ms since the epoch (the API's timestamps have second precision). */
  readonly transitionMs: number | undefined;
}

function readyCondition(p: V1Pod): { status?: string; lastTransitionTime?: unknown } | undefined {
  return p.status?.conditions?.find((c) => c.type === 'Ready');
}

export const podIsReady = (p: V1Pod): boolean => readyCondition(p)?.status === 'True';

/** The Ready condition's lastTransitionTime in ms (a string in JSON, though the client's type says Date). */
export function readyTransitionMs(p: V1Pod): number | undefined {
  const raw = readyCondition(p)?.lastTransitionTime;
  const ms = raw instanceof Date ? raw.getTime() : typeof raw === 'string' ? Date.parse(raw) : NaN;
  return Number.isFinite(ms) ? ms : undefined;
}

/** Keeps each pod's Ready state; reports the event in which it turns True (not a pod already Ready, not a repeat). */
export class PodReadyTracker {
  private readonly ready = new Map<string, boolean>();

  /** One watch event (ADDED, MODIFIED, DELETED; BOOKMARK is ignored). Seed with the list's pods as ADDED and ignore what that returns. */
  event(type: string, pod: V1Pod): ReadyTransition | undefined {
    const name = `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;
    if (type === 'BOOKMARK') return undefined;
    if (type === 'DELETED') {
      this.ready.delete(name);
      return undefined;
    }
    const was = this.ready.get(name) === true;
    const now = podIsReady(pod);
    this.ready.set(name, now);
    return now && !was ? { pod: name, transitionMs: readyTransitionMs(pod) } : undefined;
  }
}
