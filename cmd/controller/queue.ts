/**
 * A work queue of keys in the manner of client-go's workqueue, which the controller pattern
 * depends on:
 * - dedup: a key waiting in the queue is there once however often it is added;
 * - one worker per key: a key added while being processed is queued again when `done` is called,
 *   never handed to a second worker at the same time;
 * - per-key exponential backoff for failures (`addRateLimited`), reset by `forget`;
 * - delayed adds (`addAfter`) for retries and periodic work;
 * - urgent adds (`addUrgent`): to the front of the queue, for the changes a user waits on; and
 *   `getUrgent` for a reserve worker that takes only those, so an urgent key never waits for a
 *   worker to finish another key's write.
 * Keys are strings; the queue knows nothing about what they mean.
 */

export interface QueueOptions {
  /** First retry delay after a failure. */
  readonly baseDelayMs?: number;
  /** Ceiling of the exponential backoff. */
  readonly maxDelayMs?: number;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  /** Keys that need processing: queued, or added again while being processed. */
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  /** Keys made dirty urgently while being processed: `done` queues them at the front. */
  private readonly urgentAgain = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly waiters: ((key: string | undefined) => void)[] = [];
  /** Keys waiting in the queue that were added (or promoted) urgently. */
  private readonly urgentQueued = new Set<string>();
  /** Workers that take only urgent keys (`getUrgent`). */
  private readonly urgentWaiters: ((key: string | undefined) => void)[] = [];
  private shuttingDown = false;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(opts: QueueOptions = {}) {
    this.baseDelayMs = opts.baseDelayMs ?? 5;
    this.maxDelayMs = opts.maxDelayMs ?? 60_000;
  }

  add(key: string): void {
    this.enqueue(key, false);
  }

  /**
   * Like `add`, but the key goes to the front of the queue (or moves there when it waits already),
   * and when it is being processed it is re-queued at the front by `done`. For the few changes
   * whose delay a user sees (a pod's deletion, its Ready flip): they must not wait behind a burst
   * of other keys. Dedup and one worker per key hold as for `add`.
   */
  addUrgent(key: string): void {
    this.enqueue(key, true);
  }

  private enqueue(key: string, urgent: boolean): void {
    if (this.shuttingDown) return;
    if (this.dirty.has(key)) {
      if (urgent) this.promote(key);
      return;
    }
    this.dirty.add(key);
    if (this.processing.has(key)) {
      if (urgent) this.urgentAgain.add(key); // re-queued by done(), at the front
      return;
    }
    const waiter = this.waiters.shift() ?? (urgent ? this.urgentWaiters.shift() : undefined);
    if (waiter !== undefined) {
      this.hand(key, waiter);
    } else if (urgent) {
      this.queue.unshift(key);
      this.urgentQueued.add(key);
    } else {
      this.queue.push(key);
    }
  }

  private hand(key: string, waiter: (key: string | undefined) => void): void {
    this.dirty.delete(key);
    this.urgentQueued.delete(key);
    this.processing.add(key);
    waiter(key);
  }

  /** A waiting key moves to the front (to a free reserve worker, if any); a key being processed is re-queued at the front. */
  private promote(key: string): void {
    if (this.processing.has(key)) {
      this.urgentAgain.add(key);
      return;
    }
    const i = this.queue.indexOf(key);
    if (i < 0) return;
    this.queue.splice(i, 1);
    const waiter = this.urgentWaiters.shift();
    if (waiter !== undefined) return this.hand(key, waiter);
    this.queue.unshift(key);
    this.urgentQueued.add(key);
  }

  /** Adds the key after `ms`; an earlier pending delayed add for the same key wins. */
  addAfter(key: string, ms: number): void {
    if (this.shuttingDown) return;
    if (ms <= 0) return this.add(key);
    const at = Date.now() + ms;
    const pending = this.timers.get(key);
    if (pending !== undefined) {
      if (pending.at <= at) return;
      clearTimeout(pending.timer);
    }
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, ms);
    this.timers.set(key, { at, timer });
  }

  /** Adds the key after its backoff delay, which doubles with every call until `forget`. */
  addRateLimited(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const delay = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** Math.min(n, 30));
    this.addAfter(key, delay);
    return delay;
  }

  /** Clears the key's failure count (after a success). */
  forget(key: string): void {
    this.failures.delete(key);
  }

  retries(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** The next key to process, or undefined once the queue is shut down. Pair with `done`. */
  get(): Promise<string | undefined> {
    const key = this.queue.shift();
    if (key !== undefined) {
      this.dirty.delete(key);
      this.urgentQueued.delete(key);
      this.processing.add(key);
      return Promise.resolve(key);
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /**
   * Like `get`, but only an urgent key (added with `addUrgent`, or promoted by it): for a reserve
   * worker, so that an urgent key starts at once even while every `get` worker is busy. One
   * worker per key holds as for `get`.
   */
  getUrgent(): Promise<string | undefined> {
    const key = this.queue[0];
    if (key !== undefined && this.urgentQueued.has(key)) return this.get();
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.urgentWaiters.push(resolve));
  }

  done(key: string): void {
    this.processing.delete(key);
    const urgent = this.urgentAgain.delete(key);
    if (this.dirty.has(key)) {
      this.dirty.delete(key);
      this.enqueue(key, urgent);
    }
  }

  /** Keys waiting (not counting those being processed or delayed). */
  length(): number {
    return this.queue.length;
  }

  /** Keys waiting, processing or delayed: zero means the controller is idle. */
  pending(): number {
    return this.queue.length + this.processing.size + this.timers.size;
  }

  shutdown(): void {
    this.shuttingDown = true;
    for (const t of this.timers.values()) clearTimeout(t.timer);
    this.timers.clear();
    this.queue.length = 0;
    this.dirty.clear();
    this.urgentAgain.clear();
    this.urgentQueued.clear();
    for (const w of [...this.waiters.splice(0), ...this.urgentWaiters.splice(0)]) w(undefined);
  }
}

/**
 * A worker: takes keys until the queue shuts down; a key that processed is forgotten (backoff
 * reset), one that failed is re-added with backoff (when `retry()` says so, e.g. still leading)
 * and reported with the delay chosen.
 */
export async function runWorker(queue: WorkQueue, process: (key: string) => Promise<void>, failed: (key: string, e: unknown, retryInMs: number) => void, retry: () => boolean): Promise<void> {
  for (;;) {
    const key = await queue.get();
    if (key === undefined) return;
    try {
      await process(key);
      queue.forget(key);
    } catch (e) {
      failed(key, e, retry() ? queue.addRateLimited(key) : 0);
    } finally {
      queue.done(key);
    }
  }
}
