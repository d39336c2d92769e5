/**
 * A work queue of `<namespace>/<name>` keys that takes namespaces in turn: each namespace with a
 * key waiting has its own line, and `get` serves the lines round-robin. A namespace that queues a
 * thousand keys delays another namespace's key by at most one key per busy namespace, not by its
 * thousand. Otherwise the same contract as WorkQueue (queue.ts): a waiting key is there once, a key
 * is never handed to two workers at once (added while processed, it is queued again by `done`),
 * per-key exponential backoff reset by `forget`, delayed adds.
 */
import type { QueueOptions } from './queue.js';

const namespaceOf = (key: string): string => key.slice(0, Math.max(0, key.indexOf('/')));

export class FairQueue {
  /** Per namespace, its waiting keys in order; a namespace is here only while it has one. */
  private readonly lines = new Map<string, string[]>();
  /** The namespaces with waiting keys, in serving order. */
  private readonly turn: string[] = [];
  private readonly waiting = new Set<string>();
  private readonly processing = new Set<string>();
  /** Added while processing: queued again by `done`. */
  private readonly again = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private readonly takers: ((key: string | undefined) => void)[] = [];
  private closed = false;

  constructor(private readonly opts: QueueOptions = {}) {}

  add(key: string): void {
    if (this.closed || this.waiting.has(key)) return;
    if (this.processing.has(key)) {
      this.again.add(key);
      return;
    }
    const taker = this.takers.shift();
    if (taker !== undefined) {
      this.processing.add(key);
      taker(key);
      return;
    }
    this.waiting.add(key);
    const ns = namespaceOf(key);
    const line = this.lines.get(ns);
    if (line !== undefined) line.push(key);
    else {
      this.lines.set(ns, [key]);
      this.turn.push(ns);
    }
  }

  /** Adds the key after `ms`; an earlier pending delayed add for the same key wins. */
  addAfter(key: string, ms: number): void {
    if (this.closed) return;
    if (ms <= 0) return this.add(key);
    const at = Date.now() + ms;
    const pending = this.timers.get(key);
    if (pending !== undefined && pending.at <= at) return;
    if (pending !== undefined) clearTimeout(pending.timer);
    this.timers.set(key, {
      at,
      timer: setTimeout(() => {
        this.timers.delete(key);
        this.add(key);
      }, ms),
    });
  }

  /** Adds the key after its backoff delay, doubling with every failure until `forget`. */
  addRateLimited(key: string): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const delay = Math.min(this.opts.maxDelayMs ?? 60_000, (this.opts.baseDelayMs ?? 5) * 2 ** Math.min(n, 30));
    this.addAfter(key, delay);
    return delay;
  }

  forget(key: string): void {
    this.failures.delete(key);
  }

  /** The next key, the next namespace's turn; undefined once shut down. Pair with `done`. */
  get(): Promise<string | undefined> {
    const ns = this.turn.shift();
    if (ns !== undefined) {
      const line = this.lines.get(ns) ?? [];
      const key = line.shift() as string;
      if (line.length > 0) this.turn.push(ns);
      else this.lines.delete(ns);
      this.waiting.delete(key);
      this.processing.add(key);
      return Promise.resolve(key);
    }
    if (this.closed) return Promise.resolve(undefined);
    return new Promise((resolve) => this.takers.push(resolve));
  }

  done(key: string): void {
    this.processing.delete(key);
    if (this.again.delete(key)) this.add(key);
  }

  /** Keys waiting (not processing or delayed). */
  length(): number {
    return this.waiting.size;
  }

  /** Keys waiting, processing or delayed: zero means idle. */
  pending(): number {
    return this.waiting.size + this.processing.size + this.timers.size;
  }

  shutdown(): void {
    this.closed = true;
    for (const t of this.timers.values()) clearTimeout(t.timer);
    this.timers.clear();
    this.lines.clear();
    this.turn.length = 0;
    this.waiting.clear();
    this.again.clear();
    for (const t of this.takers.splice(0)) t(undefined);
  }
}
