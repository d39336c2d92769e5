/**
 * Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics:
 * - a lease is free when it has no holder, or when its record has not changed for a whole lease
 *   duration as measured by *our* clock since we first saw that record (so clock skew between
 *   replicas does not matter);
 * - the leader renews every retry period; if it cannot renew for the renew deadline, or sees
 *   another holder, it has lost the lease and must stop writing at once: the caller exits the
 *   process, which restarts clean (as controller-runtime does);
 * - on a clean shutdown the leader releases the lease (empty holder) so the standby takes over
 *   immediately instead of after a lease duration.
 * The decision is a pure function; the elector is the IO loop around it.
 */
import { isConflict, isNotFound, type KubeClient } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1Lease } from '../../src/kube/types.js';
import type { Logger } from '../../src/log.js';
import { withLinkedSignal } from '../../src/abort.js';

export interface LeaderConfig {
  readonly namespace: string;
  readonly name: string;
  readonly identity: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
}

/** What we last saw in the lease and when (our clock). */
export interface Observed {
  readonly record: string;
  readonly at: number;
}

export type LeaseAction = 'create' | 'renew' | 'acquire' | 'wait';

function recordOf(lease: V1Lease): string {
  const s = lease.spec ?? {};
  return JSON.stringify([s.holderIdentity ?? '', String(s.renewTime ?? ''), String(s.acquireTime ?? ''), s.leaseTransitions ?? 0]);
}

/** Updates what we observed: the time only moves when the record changes. */
export function observe(prev: Observed | undefined, lease: V1Lease, now: number): Observed {
  const record = recordOf(lease);
  return prev !== undefined && prev.record === record ? prev : { record, at: now };
}

export function leaseDecision(lease: V1Lease | undefined, observed: Observed | undefined, now: number, identity: string, leaseDurationMs: number): LeaseAction {
  if (lease === undefined) return 'create';
  const holder = lease.spec?.holderIdentity ?? '';
  if (holder === identity) return 'renew';
  if (holder === '') return 'acquire';
  const since = observed?.at ?? now;
  return now - since >= leaseDurationMs ? 'acquire' : 'wait';
}

/** The write permission rule, pure: a renew sent at lastRenew allows writes for renewDeadline. */
export function mayWriteAt(lastRenew: number, now: number, renewDeadlineMs: number): boolean {
  return now - lastRenew < renewDeadlineMs;
}

/** MicroTime: RFC 3339 with six fractional digits. */
export function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

export function leaseSpec(prev: V1Lease | undefined, identity: string, leaseDurationMs: number, now: number): NonNullable<V1Lease['spec']> {
  const old = prev?.spec ?? {};
  const same = old.holderIdentity === identity;
  const t = microTime(now) as unknown as Date; // a string on the wire
  return {
    holderIdentity: identity,
    leaseDurationSeconds: Math.max(1, Math.ceil(leaseDurationMs / 1000)),
    acquireTime: same && old.acquireTime !== undefined ? old.acquireTime : t,
    renewTime: t,
    leaseTransitions: prev === undefined ? 0 : (old.leaseTransitions ?? 0) + (same ? 0 : 1),
  };
}

export interface LeaderCallbacks {
  onStartedLeading(): void;
  /** Called once when leadership is lost; the caller must stop writing (exit). */
  onStoppedLeading(reason: string): void;
}

const sleep = (ms: number, signal: AbortSignal): Promise<void> =>
  new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });

/**
 * What the controller's writes ask before they go out. Time-based, not a flag: a leader cut off
 * from the apiserver may write only while `now - lastRenew < renewDeadline` (lastRenew = when the
 * last successful renew was *sent*, so the bound is conservative), and each write carries a
 * signal that aborts at that instant. A standby takes over no earlier than a lease duration after
 * it saw our last renew, and renewDeadline < leaseDuration, so our writes end before its begin.
 */
export interface WriteFence {
  mayWrite(now?: number): boolean;
  /** Aborts when write permission runs out; already aborted when there is none. */
  writeSignal(): AbortSignal;
}

/** A fence for a controller that does not elect (a single replica): always allowed. */
export const OPEN_FENCE: WriteFence = { mayWrite: () => true, writeSignal: () => new AbortController().signal };

class FenceClosed extends Error {
  override readonly name = 'FenceClosed';
}

/**
 * The client the controller writes through: reads pass, every create/replace/patch/delete first
 * asks the fence and then runs under its signal (joined with the caller's), so a write that is
 * slow to reach the apiserver is aborted when permission runs out instead of landing later.
 */
export function fenceWrites(client: KubeClient, fence: WriteFence): KubeClient {
  const guarded = async <O extends { signal?: AbortSignal }, T>(what: string, opts: O | undefined, write: (o: O & { signal: AbortSignal }) => Promise<T>): Promise<T> => {
    if (!fence.mayWrite()) throw new FenceClosed(`${what}: refused, this replica is not the leader (or its renew deadline passed)`);
    const base = opts ?? ({} as O);
    if (!opts?.signal) return write({ ...base, signal: fence.writeSignal() });
    return withLinkedSignal([opts.signal, fence.writeSignal()], (signal) => write({ ...base, signal }));
  };
  return {
    get: (path, opts) => client.get(path, opts),
    list: (path, opts) => client.list(path, opts),
    watch: (path, opts, onEvent, signal) => client.watch(path, opts, onEvent, signal),
    requestCount: () => client.requestCount(),
    create: async (path, body, opts) => guarded(`create ${path}`, opts, (o) => client.create(path, body, o)),
    replace: async (path, body, opts) => guarded(`replace ${path}`, opts, (o) => client.replace(path, body, o)),
    patch: async (path, patch, type, opts) => guarded(`patch ${path}`, opts, (o) => client.patch(path, patch, type, o)),
    delete: async (path, opts) => guarded(`delete ${path}`, opts, (o) => client.delete(path, o)),
  };
}

/** A signal that aborts at the wall-clock instant `at` (already aborted when that has passed). */
export function abortAt(at: number, reason: string, now = Date.now()): AbortSignal {
  const left = at - now;
  if (left <= 0) return AbortSignal.abort(new Error(reason));
  const ctl = new AbortController();
  setTimeout(() => ctl.abort(new Error(reason)), left).unref();
  return ctl.signal;
}

export class LeaderElector implements WriteFence {
  private observed: Observed | undefined;
  private leading = false;
  /** When the last successful acquire/renew was sent (our clock); meaningful while leading. */
  private lastRenew = 0;
  /** Shared by the writes of one renew period; replaced when lastRenew moves. */
  private fenceSignal: { at: number; signal: AbortSignal } | undefined;
  private readonly path: string;
  private readonly collectionPath: string;

  constructor(
    private readonly client: KubeClient,
    private readonly cfg: LeaderConfig,
    private readonly callbacks: LeaderCallbacks,
    private readonly logger: Logger,
  ) {
    this.collectionPath = apiPath('coordination.k8s.io', 'v1', 'leases', cfg.namespace);
    this.path = apiPath('coordination.k8s.io', 'v1', 'leases', cfg.namespace, cfg.name);
  }

  /** True while this replica may act as the leader: the same time-based test as writes. */
  isLeader(now = Date.now()): boolean {
    return this.mayWrite(now);
  }

  mayWrite(now = Date.now()): boolean {
    return this.leading && mayWriteAt(this.lastRenew, now, this.cfg.renewDeadlineMs);
  }

  writeSignal(): AbortSignal {
    if (!this.leading) return AbortSignal.abort(new Error('not the leader'));
    const at = this.lastRenew + this.cfg.renewDeadlineMs;
    if (this.fenceSignal?.at !== at) this.fenceSignal = { at, signal: abortAt(at, 'renew deadline passed: this replica may no longer write') };
    return this.fenceSignal.signal;
  }

  /**
   * One attempt to acquire or renew; true when we hold the lease afterwards. The signal bounds it.
   * `now` (when the attempt started) stamps what we write and judges expiry, as client-go does;
   * what we read is stamped when the read *returns* (client-go's observedTime): a record that
   * arrives after a slow GET may have been written long after the GET was sent, and stamping it
   * with the send time would age it by the GET's latency and let a standby take a live lease.
   */
  async tryAcquireOrRenew(now = Date.now(), signal?: AbortSignal): Promise<boolean> {
    const opts = signal ? { signal } : {};
    let lease: V1Lease | undefined;
    try {
      lease = await this.client.get<V1Lease>(this.path, opts);
    } catch (e) {
      if (!isNotFound(e)) throw e;
    }
    if (lease !== undefined) this.observed = observe(this.observed, lease, Math.max(now, Date.now()));
    const action = leaseDecision(lease, this.observed, now, this.cfg.identity, this.cfg.leaseDurationMs);
    if (action === 'wait') return false;
    const spec = leaseSpec(lease, this.cfg.identity, this.cfg.leaseDurationMs, now);
    try {
      const written =
        lease === undefined
          ? await this.client.create<V1Lease>(
              this.collectionPath,
              {
                apiVersion: 'coordination.k8s.io/v1',
                kind: 'Lease',
                metadata: { name: this.cfg.name, namespace: this.cfg.namespace },
                spec,
              },
              opts,
            )
          : await this.client.replace<V1Lease>(this.path, { ...lease, spec }, opts);
      this.observed = observe(undefined, written, Math.max(now, Date.now()));
      return true;
    } catch (e) {
      // Someone else wrote first: not ours this round.
      if (isConflict(e) || (e as { status?: number }).status === 409) return false;
      throw e;
    }
  }

  /** Runs until the signal aborts (then releases the lease if held) or leadership is lost. */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const now = Date.now();
      // A renew may take no longer than what is left of the renew deadline (client-go's
      // RenewDeadline context), an acquire attempt no longer than a renew deadline: never the
      // client's 60 s request timeout.
      const until = this.leading ? this.lastRenew + this.cfg.renewDeadlineMs : now + this.cfg.renewDeadlineMs;
      let held = false;
      try {
        held = await withLinkedSignal([signal, abortAt(until, 'renew deadline reached', now)], (s) => this.tryAcquireOrRenew(now, s));
      } catch (e) {
        if (signal.aborted) break;
        this.logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'lease request failed');
      }
      if (held) {
        this.lastRenew = now;
        if (!this.leading) {
          this.leading = true;
          this.logger.info({ lease: `${this.cfg.namespace}/${this.cfg.name}`, identity: this.cfg.identity }, 'became leader');
          this.callbacks.onStartedLeading();
        }
      } else if (this.leading) {
        const holder = this.holderSeen();
        if (holder !== this.cfg.identity || !this.mayWrite()) {
          this.leading = false;
          const reason = holder !== this.cfg.identity ? `lease taken by ${holder || 'nobody'}` : 'could not renew within the renew deadline';
          this.logger.error({ reason }, 'lost leadership');
          this.callbacks.onStoppedLeading(reason);
          return;
        }
      }
      // Jitter keeps replicas from hitting the apiserver in lock step. A leader whose renew
      // failed retries at once-per-retry-period but never sleeps past its deadline.
      const wait = this.leading ? Math.min(this.cfg.retryPeriodMs, Math.max(0, this.lastRenew + this.cfg.renewDeadlineMs - Date.now())) : this.cfg.retryPeriodMs * (1 + Math.random() * 0.2);
      await sleep(wait, signal);
    }
    if (this.leading) await this.release();
  }

  private holderSeen(): string {
    if (this.observed === undefined) return this.cfg.identity;
    const parsed = JSON.parse(this.observed.record) as unknown[];
    return typeof parsed[0] === 'string' ? parsed[0] : '';
  }

  /** Gives the lease up so a standby can take over at once (bounded by one renew deadline). */
  async release(): Promise<void> {
    this.leading = false;
    const opts = { signal: AbortSignal.timeout(this.cfg.renewDeadlineMs) };
    try {
      const lease = await this.client.get<V1Lease>(this.path, opts);
      if (lease.spec?.holderIdentity !== this.cfg.identity) return;
      const spec = { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: microTime(Date.now()) as unknown as Date };
      await this.client.replace<V1Lease>(this.path, { ...lease, spec }, opts);
      this.logger.info('released the lease');
    } catch (e) {
      this.logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'could not release the lease');
    }
  }
}
