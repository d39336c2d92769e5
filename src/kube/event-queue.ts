/**
 * The one way a program writes Events: a bounded queue in front of the apiserver, with the three
 * filters of client-go's EventCorrelator in front of the queue, so no number of tenant objects
 * turns into an unbounded number of writes, sockets or bytes in flight.
 *
 * - aggregation: Events of one source, object, type and reason with more than `maxSimilar`
 *   different messages within `aggregateWindowMs` become one "(combined from similar events)"
 *   Event (the messages differ, e.g. one per network or pod, the cause is one);
 * - de-duplication: the same Event (message included) is written at most once per
 *   `dedupIntervalMs`; the repeats are counted in the next one written;
 * - spam filter: each source and object gets a token bucket (`spamBurst` Events, one more per
 *   `spamRefillMs`), so one object cannot flood its namespace's Events;
 * - the queue holds at most `maxPending` Events and writes `concurrency` at a time; an Event that
 *   finds it full is dropped and counted.
 *
 * `EventCorrelator` is pure (time passed in); `createEventQueue` does the writing and never
 * throws: an Event that cannot be written is reported through `onError`, nothing more.
 */
import type { CoreV1Event } from './types.js';

/** Why an Event was not written. */
export type EventDrop = 'duplicate' | 'spam' | 'full';

export interface CorrelatorOptions {
  /** Different messages of one source, object, type and reason before they are combined (client-go: 10). */
  readonly maxSimilar?: number;
  readonly aggregateWindowMs?: number;
  /** The same Event again within this long is counted, not written. */
  readonly dedupIntervalMs?: number;
  /** Events per source and object at once (client-go: 25). */
  readonly spamBurst?: number;
  /** One more Event per source and object per this long (client-go: 5 min). */
  readonly spamRefillMs?: number;
  /** The most keys each filter remembers (oldest forgotten first). */
  readonly maxKeys?: number;
}

const DEFAULTS: Required<CorrelatorOptions> = {
  maxSimilar: 10,
  aggregateWindowMs: 10 * 60_000,
  dedupIntervalMs: 10 * 60_000,
  spamBurst: 25,
  spamRefillMs: 5 * 60_000,
  maxKeys: 4096,
};

export const COMBINED_PREFIX = '(combined from similar events): ';

/** A Map that forgets its oldest entries past `max`: Maps iterate in insertion order. */
function remember<V>(m: Map<string, V>, key: string, value: V, max: number): void {
  m.delete(key);
  m.set(key, value);
  while (m.size > max) m.delete(m.keys().next().value as string);
}

function objectOf(e: CoreV1Event): string {
  const o = e.involvedObject;
  return `${e.source?.component ?? e.reportingComponent ?? ''}|${o.kind ?? ''}|${o.namespace ?? ''}|${o.name ?? ''}|${o.uid ?? ''}`;
}

export type Correlated = { readonly write: true; readonly event: CoreV1Event } | { readonly write: false; readonly why: Exclude<EventDrop, 'full'> };

export class EventCorrelator {
  private readonly o: Required<CorrelatorOptions>;
  /** Per source, object, type and reason: the distinct messages seen in the window. */
  private readonly similar = new Map<string, { since: number; messages: Set<string> }>();
  /** Per Event (message included): when last written and the repeats since. */
  private readonly written = new Map<string, { at: number; repeats: number }>();
  /** Per source and object: tokens left and when they were counted. */
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(opts: CorrelatorOptions = {}) {
    this.o = { ...DEFAULTS, ...opts };
  }

  /** Whether to write `e`, and as what (combined, or with its repeats counted). */
  correlate(e: CoreV1Event, now: number): Correlated {
    const object = objectOf(e);
    const aggKey = `${object}|${e.type ?? ''}|${e.reason ?? ''}`;
    let message = e.message ?? '';
    let group = this.similar.get(aggKey);
    if (group === undefined || now - group.since >= this.o.aggregateWindowMs) group = { since: now, messages: new Set() };
    if (!group.messages.has(message)) {
      if (group.messages.size < this.o.maxSimilar) group.messages.add(message);
      else message = `${COMBINED_PREFIX}${message}`;
    }
    remember(this.similar, aggKey, group, this.o.maxKeys);

    const combined = message.startsWith(COMBINED_PREFIX);
    const eventKey = `${aggKey}|${combined ? COMBINED_PREFIX : message}`;
    const last = this.written.get(eventKey);
    if (last !== undefined && now - last.at < this.o.dedupIntervalMs) {
      last.repeats++;
      return { write: false, why: 'duplicate' };
    }

    const bucket = this.buckets.get(object) ?? { tokens: this.o.spamBurst, at: now };
    const refilled = Math.min(this.o.spamBurst, bucket.tokens + Math.floor((now - bucket.at) / this.o.spamRefillMs));
    const at = refilled > bucket.tokens ? now : bucket.at;
    if (refilled < 1) {
      remember(this.buckets, object, { tokens: refilled, at }, this.o.maxKeys);
      return { write: false, why: 'spam' };
    }
    remember(this.buckets, object, { tokens: refilled - 1, at }, this.o.maxKeys);
    remember(this.written, eventKey, { at: now, repeats: 0 }, this.o.maxKeys);
    const count = 1 + (last?.repeats ?? 0);
    return { write: true, event: message === e.message && count === 1 ? e : { ...e, message, count } };
  }
}

export interface EventQueueOptions extends CorrelatorOptions {
  /** Writes one Event (a create through the program's client). */
  readonly write: (e: CoreV1Event) => Promise<unknown>;
  /** Events waiting or being written at once, at most. */
  readonly maxPending?: number;
  /** Writes in flight at once. */
  readonly concurrency?: number;
  readonly now?: () => number;
  readonly onDrop?: (why: EventDrop, e: CoreV1Event) => void;
  readonly onError?: (err: unknown, e: CoreV1Event) => void;
}

export interface EventQueue {
  /** Queues `e` unless a filter drops it or the queue is full. Returns whether it was queued. */
  submit(e: CoreV1Event): boolean;
  /** Events waiting or being written. */
  pending(): number;
  /** Resolves once nothing is waiting or being written (tests, shutdown). */
  idle(): Promise<void>;
}

export const DEFAULT_MAX_PENDING_EVENTS = 256;
export const DEFAULT_EVENT_WRITE_CONCURRENCY = 4;

export function createEventQueue(opts: EventQueueOptions): EventQueue {
  const correlator = new EventCorrelator(opts);
  const now = opts.now ?? Date.now;
  const maxPending = opts.maxPending ?? DEFAULT_MAX_PENDING_EVENTS;
  const concurrency = opts.concurrency ?? DEFAULT_EVENT_WRITE_CONCURRENCY;
  const waiting: CoreV1Event[] = [];
  let inFlight = 0;
  let idleWaiters: (() => void)[] = [];

  const settle = (): void => {
    if (waiting.length > 0 || inFlight > 0) return;
    const w = idleWaiters;
    idleWaiters = [];
    for (const f of w) f();
  };

  const pump = (): void => {
    while (inFlight < concurrency && waiting.length > 0) {
      const e = waiting.shift() as CoreV1Event;
      inFlight++;
      void Promise.resolve()
        .then(() => opts.write(e))
        .catch((err: unknown) => opts.onError?.(err, e))
        .finally(() => {
          inFlight--;
          pump();
          settle();
        });
    }
  };

  return {
    submit(e) {
      if (waiting.length + inFlight >= maxPending) {
        opts.onDrop?.('full', e);
        return false;
      }
      const c = correlator.correlate(e, now());
      if (!c.write) {
        opts.onDrop?.(c.why, e);
        return false;
      }
      waiting.push(c.event);
      pump();
      return true;
    },
    pending: () => waiting.length + inFlight,
    idle: () =>
      new Promise<void>((resolve) => {
        idleWaiters.push(resolve);
        settle();
      }),
  };
}
