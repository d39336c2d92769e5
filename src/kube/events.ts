/**
 * A core/v1 Event about an object, for every program that writes one (the controller on Services,
 * the sidecar on its own pod). Pure apart from the random name suffix.
 */
import { randomBytes } from 'node:crypto';
import type { CoreV1Event } from './types.js';

/** What an Event is about. */
export interface EventSubject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly namespace: string;
  /** Empty when unknown: kubectl still finds the Event by kind and name. */
  readonly uid: string;
}

export type EventType = 'Warning' | 'Normal';

/** Who writes it: the program (`component`) and which replica or pod (`instance`). */
export interface EventSource {
  readonly component: string;
  readonly instance: string;
}

/** Event messages are capped by the apiserver at 1 KiB; keep ours inside that. */
const MAX_MESSAGE = 1000;

export function objectEvent(subject: EventSubject, type: EventType, reason: string, message: string, now: Date, source: EventSource): CoreV1Event {
  const text = message.length > MAX_MESSAGE ? `${message.slice(0, MAX_MESSAGE - 1)}…` : message;
  const ts = now.toISOString();
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: `${subject.name}.${randomBytes(8).toString('hex')}`, namespace: subject.namespace },
    involvedObject: { apiVersion: subject.apiVersion, kind: subject.kind, name: subject.name, namespace: subject.namespace, ...(subject.uid ? { uid: subject.uid } : {}) },
    type,
    reason,
    message: text,
    source: { component: source.component },
    reportingComponent: source.component,
    reportingInstance: source.instance,
    count: 1,
    // Serialised as strings on the wire; the generated types call them Date.
    firstTimestamp: ts as unknown as Date,
    lastTimestamp: ts as unknown as Date,
  };
}

/** When an Event last happened (ms; 0 when unknown): which time fields are set depends on how the Event was written. */
export function eventTimeMs(e: CoreV1Event): number {
  const t = (e.lastTimestamp ?? e.eventTime ?? e.firstTimestamp ?? e.metadata?.creationTimestamp) as unknown;
  const ms = t === undefined || t === null ? NaN : new Date(t as string).getTime();
  return Number.isNaN(ms) ? 0 : ms;
}
