/**
 * The leader's workers: they take keys from the work queue and reconcile each, counting the
 * outcome; a failure goes back on the queue rate-limited. A worker ends when the queue shuts down.
 * Nothing is written unless `writing()` (the write fence opened, leadership held).
 */
import type { Logger } from '../../src/log.js';
import type { ControllerMetrics } from './metrics.js';
import { RetryableWriteError, type Reconciler } from './reconcile.js';
import type { WorkQueue } from './queue.js';

export interface WorkerDeps {
  readonly queue: WorkQueue;
  readonly reconciler: Pick<Reconciler, 'reconcile'>;
  readonly metrics: ControllerMetrics;
  readonly logger: Logger;
  writing(): boolean;
}

async function reconcileOne(d: WorkerDeps, key: string): Promise<void> {
  const t0 = performance.now();
  const result = await d.reconciler.reconcile(key);
  d.metrics.reconcileDuration.observe((performance.now() - t0) / 1000);
  d.metrics.reconciles.inc({ result });
}

/** One worker: keys from `take` until it answers undefined (the queue shut down). */
export async function runWorker(d: WorkerDeps, take: () => Promise<string | undefined>): Promise<void> {
  for (;;) {
    const key = await take();
    if (key === undefined) return;
    try {
      if (d.writing()) await reconcileOne(d, key);
      d.queue.forget(key);
    } catch (e) {
      const retryable = e instanceof RetryableWriteError;
      d.metrics.errors.inc({ stage: 'reconcile' });
      d.metrics.reconciles.inc({ result: 'error' });
      const delay = d.writing() ? d.queue.addRateLimited(key) : 0;
      d.logger[retryable ? 'info' : 'warn']({ key, err: e instanceof Error ? e.message : String(e), retryInMs: delay }, 'reconcile failed; retrying');
    } finally {
      d.queue.done(key);
      d.metrics.queueDepth.set(d.queue.length());
    }
  }
}

/** `workers` workers on the queue, and the reserve one on its urgent lane when asked for. */
export function startWorkers(d: WorkerDeps, workers: number, reserve: boolean): void {
  for (let i = 0; i < workers; i++) void runWorker(d, () => d.queue.get());
  // The reserve worker takes only a pod's deletion or Ready flip: it starts at once even while
  // every other worker waits for a write of another Service (docs/decisions/0036-urgent-queue.md).
  if (reserve) void runWorker(d, () => d.queue.getUrgent());
}
