/** cmd/controller/workers.ts alone, on a real WorkQueue: outcomes counted, failures retried rate-limited, nothing reconciled while writes are closed. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { WorkQueue } from '../../../cmd/controller/queue.js';
import { runWorker } from '../../../cmd/controller/workers.js';
import { RetryableWriteError } from '../../../cmd/controller/reconcile.js';
import { createControllerMetrics } from '../../../cmd/controller/metrics.js';
import { createRegistry } from '../../../src/metrics.js';

void test('a worker reconciles each key, requeues a failure with backoff, and stops when the queue shuts down', async () => {
  const queue = new WorkQueue({ baseDelayMs: 10_000, maxDelayMs: 60_000 });
  const registry = createRegistry('worker_test');
  const metrics = createControllerMetrics(registry);
  const seen: string[] = [];
  const reconciler = {
    reconcile: async (key: string): Promise<'written'> => {
      seen.push(key);
      if (key === 'ns/bad') throw new RetryableWriteError('conflict');
      return 'written';
    },
  };
  let writing = true;
  queue.add('ns/a');
  queue.add('ns/bad');
  const done = runWorker({ queue, reconciler, metrics, logger: pino({ level: 'silent' }), writing: () => writing }, () => queue.get());
  while (queue.length() > 0) await new Promise((r) => setImmediate(r));
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(seen, ['ns/a', 'ns/bad']);
  assert.equal(queue.retries('ns/bad'), 1, 'the failure was put back rate-limited');
  assert.equal(queue.retries('ns/a'), 0);
  writing = false;
  queue.add('ns/c');
  while (queue.length() > 0) await new Promise((r) => setImmediate(r));
  assert.deepEqual(seen, ['ns/a', 'ns/bad'], 'no reconcile while writes are closed');
  queue.shutdown();
  await done;
  const text = await registry.metrics();
  assert.match(text, /reconciles_total\{result="error"\} 1/);
});
