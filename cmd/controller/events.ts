/**
 * Events on Services and NetServices (Warnings, and Normal for a migration step), rate-limited so a pod stuck with a bad annotation does not produce
 * an Event per reconcile. The limiter is pure (time passed in); the recorder writes through the
 * process's one bounded Event queue (src/kube/event-queue.ts: aggregation, spam filter, a bounded
 * number pending and in flight) and never throws: an Event that cannot be written is logged and
 * counted, nothing more.
 */
import type { KubeClient } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { CoreV1Event, V1Service } from '../../src/kube/types.js';
import type { Logger } from '../../src/log.js';
import { objectEvent as kubeObjectEvent, type EventSubject, type EventType } from '../../src/kube/events.js';
import { createEventQueue, type EventDrop, type EventQueue } from '../../src/kube/event-queue.js';

// The limiter is shared with the webhook's Events (src/kube/rate-limiter.ts).
import { RateLimiter } from '../../src/kube/rate-limiter.js';
export { RateLimiter };

export const EVENT_COMPONENT = 'multus-proxy-controller';
export type { EventSubject, EventType } from '../../src/kube/events.js';

export function serviceSubject(svc: V1Service): EventSubject {
  return { apiVersion: 'v1', kind: 'Service', name: svc.metadata?.name ?? '', namespace: svc.metadata?.namespace ?? 'default', uid: svc.metadata?.uid ?? '' };
}

/** A core/v1 Event about an object, written by the controller. */
export function objectEvent(subject: EventSubject, type: EventType, reason: string, message: string, now: Date, instance: string): CoreV1Event {
  return kubeObjectEvent(subject, type, reason, message, now, { component: EVENT_COMPONENT, instance });
}

/** A core/v1 Warning Event about a Service. */
export function warningEvent(svc: V1Service, reason: string, message: string, now: Date, instance: string): CoreV1Event {
  return objectEvent(serviceSubject(svc), 'Warning', reason, message, now, instance);
}

export interface EventRecorder {
  /** Records a Warning unless the same (Service, subject, reason) was recorded within the interval. Returns whether it did. */
  warn(svc: V1Service, subject: string, reason: string, message: string): boolean;
  /** The same for any object and either type. */
  record(about: EventSubject, type: EventType, subject: string, reason: string, message: string): boolean;
}

export function createEventRecorder(
  client: Pick<KubeClient, 'create'>,
  opts: { intervalMs: number; instance: string; logger: Logger; onError?: () => void; onDrop?: (why: EventDrop) => void },
): EventRecorder & { readonly queue: EventQueue } {
  const limiter = new RateLimiter(opts.intervalMs);
  const queue = createEventQueue({
    write: (ev) => client.create(apiPath('', 'v1', 'events', ev.metadata.namespace), ev),
    onError: (e, ev) => {
      opts.onError?.();
      opts.logger.warn({ err: e instanceof Error ? e.message : String(e), reason: ev.reason }, 'could not record Event');
    },
    ...(opts.onDrop !== undefined ? { onDrop: opts.onDrop } : {}),
  });
  const record = (about: EventSubject, type: EventType, subject: string, reason: string, message: string): boolean => {
    const object = `${about.namespace}/${about.name}`;
    const key = `${about.kind}|${object}|${subject}|${reason}`;
    if (!limiter.allow(key, Date.now())) return false;
    const ev = objectEvent(about, type, reason, message, new Date(), opts.instance);
    if (!queue.submit(ev)) return false;
    opts.logger[type === 'Warning' ? 'warn' : 'info']({ [about.kind === 'Service' ? 'service' : about.kind.toLowerCase()]: object, subject, reason }, message);
    return true;
  };
  return {
    queue,
    record,
    warn: (svc, subject, reason, message) => record(serviceSubject(svc), 'Warning', subject, reason, message),
  };
}
