/**
 * An informer: a local copy of the objects at `path` (with label/field selectors), kept current
 * by list + watch, with change handlers. Written for what a plain ListWatch does not survive:
 * - lists as client-go's reflector makes them: the first from the watch cache (resourceVersion=0),
 *   a relist after 410 at the last resourceVersion seen (also served by the watch cache), and a
 *   consistent (quorum) list only when the apiserver says that resourceVersion is unavailable
 *   (Expired, or too large); `listFrom: 'quorum'` keeps every list a quorum read (the old way);
 * - 410 Gone (watch resourceVersion compacted away) -> relist, and the relist is diffed against
 *   the store so handlers see only real changes, including deletes of objects that vanished while
 *   we were disconnected, and never a second add for an object already known;
 * - a relist after 410 waits a random time (`relistJitterMs`), longer when 410s repeat, so the
 *   sidecars of a whole cluster do not all list in the same second after an apiserver restart;
 * - list or watch errors (a watch broken by an apiserver restart included) -> retry after a wait
 *   drawn from the whole backoff window ("full jitter"), the window doubling per failure, so the
 *   sidecars of a cluster do not reconnect in step and each new connection's TLS handshake is
 *   spread out;
 * - a watch that has gone silent (not even a bookmark) for watchdogMs -> restarted;
 * - stop() -> everything in flight is aborted and no timer is left, so the process can exit.
 */
import { createLogger, type Logger } from '../log.js';
import { objectKey, type KubeObject, type WatchEvent } from './types.js';
import { isGone, isTooLargeResourceVersion, type KubeClient } from './client.js';

/** T is the stored object type; only `transform` depends on it. */
export interface InformerOptions<T extends KubeObject = KubeObject> {
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Restart a watch that received nothing, not even a bookmark, for this long. Default 4 minutes. */
  watchdogMs?: number;
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** Default: a pino logger (LOG_LEVEL), so handler errors and retries are never silent. */
  logger?: Logger;
  name?: string;
  /**
   * Applied to every listed and watched object before it is stored or handed to a handler (like
   * client-go's SetTransform): keep only the fields the program reads, so the cache does not hold
   * managedFields and the like. Must be pure; the informer still reads the resourceVersion from the
   * object it received. If it throws, the error is logged and the object is kept as received.
   */
  transform?: (obj: T) => T;
  /**
   * 'cache' (default): list like client-go's reflector (see the header). 'quorum': every list is
   * a consistent read from etcd, as before; kept to compare the apiserver's load (bench B7).
   */
  listFrom?: 'cache' | 'quorum';
  /** A relist after a 410 waits a random time in [0, this); 410s in a row double it (up to maxBackoffMs). Default 5 s. */
  relistJitterMs?: number;
}

export interface InformerHandlers<T> {
  add?(obj: T): void;
  update?(obj: T, old: T): void;
  /** `stored` is the object the informer held (and last handed to add or update); `obj` the delete's own. */
  delete?(obj: T, stored: T): void;
}

export interface Informer<T extends KubeObject> {
  start(): void;
  /** Final: aborts what is in flight, clears every timer; start() does nothing afterwards. */
  stop(): void;
  /** Resolves after the first full list; never rejects (stays pending if stopped before that). */
  readonly synced: Promise<void>;
  hasSynced(): boolean;
  list(): T[];
  get(key: string): T | undefined;
  on(handlers: InformerHandlers<T>): void;
}

/**
 * kube-apiserver (watch cache on) sends an idle watcher that asked for bookmarks one after about
 * 120 s and then one every 60 s (measured on v1.34.4: bookmarks at 120, 180, 240 s). Twice the
 * longest gap means a dead connection (a NAT or proxy that dropped it without a reset), not a
 * quiet one. Restarting a watch from its resourceVersion is cheap, so a false alarm costs little.
 */
const DEFAULT_WATCHDOG_MS = 240_000;
/**
 * The first retry after a failure waits in [0, 1 s], then [0, 2 s], … up to [0, 30 s] (full
 * jitter). Was [250, 500 ms] doubling, a window so narrow that after an apiserver restart the
 * whole cohort reconnected within the same second (bench B7 at N = 1,000: up to 1,670 TLS
 * connections opened in one second to the starting apiserver; docs/benchmarks.md).
 */
const DEFAULT_MIN_BACKOFF_MS = 1_000;
const DEFAULT_MAX_BACKOFF_MS = 30_000;
/**
 * After an apiserver restart every watch of every sidecar gets 410 within the same second; spread
 * over 5 s, 1,000 sidecars make ~200 lists a second, and each is served from the watch cache.
 */
const DEFAULT_RELIST_JITTER_MS = 5_000;
/** Like client-go: the server ends each watch after 5-10 minutes, spreading re-watches of many clients. */
const MIN_WATCH_TIMEOUT_S = 300;

const QUICK_WATCH_END_MS = 1_000;

/**
 * One change of the store. The stored object changes identity only with an add or update: an
 * update's `old` and a delete's `stored` are the very object last handed out, so a handler may
 * keep objects by identity (cmd/sidecar/state-feed.ts does).
 */
export type Change<T> = { type: 'add'; obj: T } | { type: 'update'; obj: T; old: T } | { type: 'delete'; obj: T; stored: T };

function rvOf(obj: KubeObject): string | undefined {
  return obj.metadata?.resourceVersion;
}

/**
 * What a relist means for handlers: adds for new keys, updates where the resourceVersion moved,
 * deletes for keys that are gone. Pure, so the diff can be tested without a server.
 */
export function diffStore<T extends KubeObject>(store: ReadonlyMap<string, T>, fresh: readonly T[]): { changes: Change<T>[]; next: Map<string, T> } {
  const next = new Map<string, T>();
  const changes: Change<T>[] = [];
  for (const obj of fresh) {
    const key = objectKey(obj);
    next.set(key, obj);
    const old = store.get(key);
    if (old === undefined) changes.push({ type: 'add', obj });
    else if (rvOf(old) !== rvOf(obj)) changes.push({ type: 'update', obj, old });
    // Unchanged: keep the object handlers were given (no event says it was replaced).
    else next.set(key, old);
  }
  for (const [key, old] of store) if (!next.has(key)) changes.push({ type: 'delete', obj: old, stored: old });
  return { changes, next };
}

/**
 * Applies one watch event to the store and says what changed. An ADDED for a known key is an
 * update (or nothing if identical), a DELETED for an unknown key is nothing: no duplicates.
 */
export function applyEvent<T extends KubeObject>(store: Map<string, T>, ev: WatchEvent<T>): Change<T> | undefined {
  if (ev.type !== 'ADDED' && ev.type !== 'MODIFIED' && ev.type !== 'DELETED') return undefined;
  const key = objectKey(ev.object);
  const old = store.get(key);
  if (ev.type === 'DELETED') {
    if (old === undefined) return undefined;
    store.delete(key);
    return { type: 'delete', obj: ev.object, stored: old };
  }
  // Unchanged: keep the object handlers were given (no event says it was replaced).
  if (old !== undefined && rvOf(old) === rvOf(ev.object)) return undefined;
  store.set(key, ev.object);
  if (old === undefined) return { type: 'add', obj: ev.object };
  return { type: 'update', obj: ev.object, old };
}

/**
 * The event with its object transformed; BOOKMARK and ERROR events are passed through untouched
 * (a bookmark carries only a resourceVersion, an ERROR a Status, neither is stored).
 */
export function transformEvent<T extends KubeObject>(ev: WatchEvent<T>, transform: (obj: T) => T): WatchEvent<T> {
  if (ev.type !== 'ADDED' && ev.type !== 'MODIFIED' && ev.type !== 'DELETED') return ev;
  return { type: ev.type, object: transform(ev.object) };
}

/**
 * Full jitter (AWS's "full jitter"): a random integer wait in [0, windowMs]. Many clients that
 * failed at the same moment spread their retries over the whole window, where [w/2, w] would
 * bunch them into its second half.
 */
export function fullJitter(windowMs: number, random: () => number = Math.random): number {
  const w = Math.max(0, Math.floor(windowMs));
  return Math.min(w, Math.floor(random() * (w + 1)));
}

/** Half jitter: a random wait in [base/2, base] (repeated 410s: the wait must grow, not just spread). */
export function jitter(baseMs: number, random: () => number = Math.random): number {
  return Math.round(baseMs / 2 + (random() * baseMs) / 2);
}

/**
 * The resourceVersion of a list, as client-go's reflector chooses it: '' (quorum read) when the
 * last one was unavailable or quorum lists are asked for, '0' (any, from the watch cache) for
 * the first list, else the last resourceVersion seen (not older than that, from the watch cache).
 */
export function listResourceVersion(listFrom: 'cache' | 'quorum', lastSeen: string | undefined, unavailable: boolean): string | undefined {
  if (listFrom === 'quorum' || unavailable) return undefined;
  return lastSeen ?? '0';
}

/**
 * How long to wait before the relist that follows a 410: uniform in [0, jitterMs) for the first,
 * then [w/2, w] with w doubling per repeated 410 (capped at max(maxMs, jitterMs)).
 */
export function relistDelay(streak: number, jitterMs: number, maxMs: number, random: () => number = Math.random): number {
  if (streak <= 0) return Math.floor(random() * jitterMs);
  const window = Math.min(Math.max(jitterMs, 1) * 2 ** streak, Math.max(maxMs, jitterMs));
  return jitter(window, random);
}

class Stopped extends Error {}

/** A watch failure that remembers the last resourceVersion the watch reached. */
class WatchFailed extends Error {
  constructor(
    readonly rv: string,
    override readonly cause: unknown,
  ) {
    super('watch failed', { cause });
  }
}

class InformerImpl<T extends KubeObject> implements Informer<T> {
  readonly synced: Promise<void>;
  private markSynced!: () => void;
  private isSynced = false;
  private store = new Map<string, T>();
  private readonly handlers: InformerHandlers<T>[] = [];
  private started = false;
  private readonly life = new AbortController();
  private readonly watchdogMs: number;
  private readonly minBackoffMs: number;
  private readonly maxBackoffMs: number;
  private readonly relistJitterMs: number;
  private readonly name: string;
  private readonly log: Logger;

  constructor(
    private readonly client: KubeClient,
    private readonly opts: InformerOptions<T>,
  ) {
    this.synced = new Promise<void>((resolve) => (this.markSynced = resolve));
    this.watchdogMs = opts.watchdogMs ?? DEFAULT_WATCHDOG_MS;
    this.minBackoffMs = opts.minBackoffMs ?? DEFAULT_MIN_BACKOFF_MS;
    this.maxBackoffMs = Math.max(opts.maxBackoffMs ?? DEFAULT_MAX_BACKOFF_MS, this.minBackoffMs);
    this.name = opts.name ?? opts.path;
    this.relistJitterMs = opts.relistJitterMs ?? DEFAULT_RELIST_JITTER_MS;
    this.log = opts.logger ?? createLogger('informer');
  }

  start(): void {
    if (this.started || this.life.signal.aborted) return;
    this.started = true;
    void this.run();
  }

  stop(): void {
    this.life.abort();
  }

  hasSynced(): boolean {
    return this.isSynced;
  }

  list(): T[] {
    return [...this.store.values()];
  }

  get(key: string): T | undefined {
    return this.store.get(key);
  }

  /** Handlers registered after objects are known get an add for each, like client-go. */
  on(handlers: InformerHandlers<T>): void {
    this.handlers.push(handlers);
    for (const obj of this.store.values()) this.call(handlers, { type: 'add', obj });
  }

  private call(h: InformerHandlers<T>, c: Change<T>): void {
    try {
      if (c.type === 'add') h.add?.(c.obj);
      else if (c.type === 'update') h.update?.(c.obj, c.old);
      else h.delete?.(c.obj, c.stored);
    } catch (e) {
      // A buggy handler must not stop the informer or starve the other handlers.
      this.log.error({ err: e, informer: this.name, change: c.type, key: objectKey(c.obj) }, 'informer handler threw');
    }
  }

  /** The object as the transform makes it; as received if the transform throws (logged). */
  private transformed(obj: T): T {
    const transform = this.opts.transform;
    if (!transform) return obj;
    try {
      return transform(obj);
    } catch (e) {
      this.log.error({ err: e, informer: this.name, key: objectKey(obj) }, 'informer transform threw; keeping the object as received');
      return obj;
    }
  }

  private emit(c: Change<T> | undefined): void {
    if (c === undefined) return;
    for (const h of this.handlers) this.call(h, c);
  }

  /**
   * List once, then watch from the last resourceVersion seen. A failed watch is retried from that
   * resourceVersion after a backoff (no relist: with a sidecar in every pod, relists after each
   * network blip would load the apiserver); only 410 Gone or a failed list leads to a new list.
   */
  private async run(): Promise<void> {
    let backoff = this.minBackoffMs;
    const signal = this.life.signal;
    const listFrom = this.opts.listFrom ?? 'cache';
    /** Where the watch resumes; undefined = list first. */
    let rv: string | undefined;
    /** The last resourceVersion seen by a list or a watch. */
    let lastSeen: string | undefined;
    let unavailable = false;
    /** 410s in a row without a watch that ran its course in between. */
    let goneStreak = 0;
    while (!signal.aborted) {
      try {
        if (rv === undefined) {
          rv = await this.relist(listResourceVersion(listFrom, lastSeen, unavailable));
          lastSeen = rv;
          unavailable = false;
          backoff = this.minBackoffMs;
        }
        const result = await this.watchOnce(rv);
        rv = lastSeen = result.rv;
        goneStreak = 0; // a watch that ran its course: the next 410 is a new episode
        if (result.events > 0) backoff = this.minBackoffMs;
      } catch (caught) {
        if (signal.aborted || caught instanceof Stopped) break;
        let e = caught;
        const listing = rv === undefined;
        if (e instanceof WatchFailed) {
          rv = lastSeen = e.rv;
          e = e.cause;
        }
        if (listing && (isGone(e) || isTooLargeResourceVersion(e)) && !unavailable) {
          // The list's resourceVersion is not available (compacted, or ahead of this apiserver):
          // the documented fallback is a quorum list, at once.
          this.log.info({ informer: this.name, err: e instanceof Error ? e.message : String(e) }, 'list resourceVersion unavailable; listing from etcd (quorum)');
          unavailable = true;
          continue;
        }
        if (!listing && isGone(e)) {
          // Not a failure: our resourceVersion was compacted away (or the apiserver restarted
          // with a fresh watch cache). Relist after a jittered pause that grows if 410s repeat.
          rv = undefined;
          const wait = relistDelay(goneStreak, this.relistJitterMs, this.maxBackoffMs);
          goneStreak++;
          this.log.info({ informer: this.name, relistInMs: wait }, 'watch expired (410 Gone); relisting');
          try {
            await this.sleep(wait);
          } catch {
            break;
          }
          continue;
        }
        const wait = fullJitter(backoff);
        this.log.warn({ err: e, informer: this.name, retryInMs: wait, relist: rv === undefined }, 'list/watch failed; retrying');
        try {
          await this.sleep(wait);
        } catch {
          break;
        }
        backoff = Math.min(backoff * 2, this.maxBackoffMs);
      }
    }
  }

  private async relist(resourceVersion: string | undefined): Promise<string> {
    const signal = this.life.signal;
    const result = await this.client.list<T>(this.opts.path, {
      labelSelector: this.opts.labelSelector,
      fieldSelector: this.opts.fieldSelector,
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
      // A paginated list at a resourceVersion other than 0 is an *exact* read from etcd (legacy
      // semantics), stale after an apiserver restart (its watch then 410s again, forever) and
      // gone after compaction. Unpaginated it is "not older than", served by the watch cache, as
      // client-go's reflector does (pager page size 0). rv=0 and quorum lists page as before.
      ...(resourceVersion !== undefined && resourceVersion !== '0' ? { limit: 0 } : {}),
      // Applied as each item is parsed, so a large list's full objects never live all at once.
      ...(this.opts.transform ? { transform: (o: T) => this.transformed(o) } : {}),
      signal,
    });
    if (signal.aborted) throw new Stopped();
    const { changes, next } = diffStore(this.store, result.items);
    this.store = next;
    for (const c of changes) this.emit(c);
    if (!this.isSynced) {
      this.isSynced = true;
      this.markSynced();
    }
    const rv = result.metadata?.resourceVersion;
    if (!rv) throw new Error(`list ${this.opts.path} returned no resourceVersion`);
    return rv;
  }

  /**
   * One watch from rv; returns the last resourceVersion seen when the watch ends normally or the
   * watchdog restarts it. Failures are wrapped in WatchFailed so the progress made is not lost.
   */
  private async watchOnce(fromRv: string): Promise<{ rv: string; events: number }> {
    let rv = fromRv;
    const ctl = new AbortController();
    const onStop = (): void => ctl.abort();
    this.life.signal.addEventListener('abort', onStop);
    let timer: NodeJS.Timeout | undefined;
    let silent = false;
    let events = 0;
    const began = Date.now();
    const arm = (): void => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(() => {
        silent = true;
        ctl.abort();
      }, this.watchdogMs);
    };
    arm();
    try {
      await this.client.watch<T>(
        this.opts.path,
        {
          labelSelector: this.opts.labelSelector,
          fieldSelector: this.opts.fieldSelector,
          resourceVersion: rv,
          allowWatchBookmarks: true,
          timeoutSeconds: Math.floor(MIN_WATCH_TIMEOUT_S * (1 + Math.random())),
        },
        (ev) => {
          events++;
          arm();
          const next = rvOf(ev.object);
          if (next) rv = next;
          this.emit(applyEvent(this.store, this.opts.transform ? transformEvent(ev, (o) => this.transformed(o)) : ev));
        },
        ctl.signal,
      );
    } catch (e) {
      throw new WatchFailed(rv, e);
    } finally {
      if (timer) clearTimeout(timer);
      this.life.signal.removeEventListener('abort', onStop);
    }
    if (this.life.signal.aborted) throw new Stopped();
    // A watch the server ends at once, again and again, would spin: treat it as a failure (backoff).
    if (!silent && events === 0 && Date.now() - began < QUICK_WATCH_END_MS) {
      throw new WatchFailed(rv, new Error(`watch ${this.opts.path} ended at once without events`));
    }
    if (silent) this.log.warn({ informer: this.name, watchdogMs: this.watchdogMs }, 'watch silent too long (watchdog); restarting it');
    return { rv, events };
  }

  private sleep(ms: number): Promise<void> {
    const signal = this.life.signal;
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) return reject(new Stopped());
      const onAbort = (): void => {
        clearTimeout(t);
        reject(new Stopped());
      };
      const t = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, ms);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

export function createInformer<T extends KubeObject>(client: KubeClient, opts: InformerOptions<T>): Informer<T> {
  return new InformerImpl<T>(client, opts);
}
