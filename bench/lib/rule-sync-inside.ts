/**
 * Rule sync measured from inside the namespace, as a sidecar runs: it lives in its pod's network
 * namespace, so none of its commands pays an `ip netns exec` (~7 ms per command on a quiet machine,
 * 42 ms at load 22). Each measurement gets a fresh namespace and a worker process started in it
 * (rule-sync-worker.ts, under `ip netns exec <ns> node --import tsx`), which builds the state, then times
 * either ours (the dataplane with no netns option, so its commands run where the worker runs) or
 * raw (the rule tool spawned by the worker on the same text). The worker's own start (node, tsx,
 * the state) is not timed. The parent interleaves ours and raw as fullSyncVsRaw (rule-sync.ts) does.
 *
 * A subject is found by the worker as `SYNC_SUBJECTS[key]` of the module that defines it.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { deleteNetns } from './netns.js';
import { Cleanup, run } from './proc.js';
import { logRun, sizeResult, type FullRun, type PartialResult, type SizeResult, type SyncSubject } from './rule-sync.js';
import type { RunContext } from './report.js';
import { NODE_MEMORY_FLAGS } from '../../src/memory-settings.js';

/** Where the worker finds a subject: a module exporting `SYNC_SUBJECTS`, and the key in it. */
export interface SubjectRef {
  /** The module's URL (`import.meta.url` of the bench that defines the subjects). */
  readonly module: string;
  readonly key: string;
}

export interface Task extends SubjectRef {
  readonly mode: 'ours' | 'raw';
  readonly services: number;
  /** Ours only: this many one-endpoint changes on the loaded namespace after the full sync. */
  readonly changes?: number;
}

export type OursReport = Omit<FullRun, 'raw'> & { readonly partial?: PartialResult };
export type RawReport = { readonly raw: number };

/** The worker's entry (its own module: a bench module importing this one must not be the entry point of a module it imports). */
const WORKER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'rule-sync-worker.ts');
/** The worker's result line on stdout. */
export const REPORT = 'RESULT ';

/**
 * Extra node flags for the workers, from B2_NODE_FLAGS (space-separated; the word `sidecar` stands
 * for the flags the sidecar ships with, src/memory-settings.ts), e.g. `B2_NODE_FLAGS='sidecar --trace-gc'`.
 */
export function workerNodeFlags(env: string | undefined = process.env['B2_NODE_FLAGS']): string[] {
  return (env ?? '')
    .split(/\s+/)
    .filter((f) => f !== '')
    .flatMap((f) => (f === 'sidecar' ? [...NODE_MEMORY_FLAGS] : [f]));
}

/** Runs one task in a worker inside `ns`; its progress lines (and any other stdout, e.g. --trace-gc's) go to ctx.log. */
async function inWorker<R>(ctx: RunContext, ns: string, task: Task): Promise<R> {
  const r = await run(process.execPath, [...workerNodeFlags(), '--import', 'tsx', WORKER, JSON.stringify(task)], { netns: ns, check: false });
  for (const line of r.stderr.split('\n')) if (line.trim() !== '') ctx.log(`  [worker ${task.mode}] ${line}`);
  for (const line of r.stdout.split('\n')) if (line.trim() !== '' && !line.startsWith(REPORT)) ctx.log(`  [worker ${task.mode} stdout] ${line}`);
  const result = r.stdout.split('\n').find((l) => l.startsWith(REPORT));
  if (r.code !== 0 || result === undefined) throw new Error(`the ${task.mode} worker in ${ns} failed (exit ${r.code}): ${r.stderr.slice(-2000)}`);
  return JSON.parse(result.slice(REPORT.length)) as R;
}

/**
 * `runs` interleaved full syncs of `services`, each side in a worker inside its own fresh
 * namespace. With `changes`, the last run's ours also times that many partial syncs.
 */
export async function fullSyncInside<S>(
  ctx: RunContext,
  subject: SyncSubject<S>,
  ref: SubjectRef,
  services: number,
  runs: number,
  label: string,
  changes?: number,
): Promise<SizeResult & { readonly partial?: PartialResult }> {
  const out: FullRun[] = [];
  let partial: PartialResult | undefined;
  for (let i = 0; i < runs; i++) {
    const cleanup = new Cleanup();
    try {
      let ours: OursReport | undefined;
      let raw: RawReport | undefined;
      for (const which of i % 2 === 0 ? (['ours', 'raw'] as const) : (['raw', 'ours'] as const)) {
        const ns = await subject.freshNetns(cleanup);
        if (which === 'ours') ours = await inWorker<OursReport>(ctx, ns, { ...ref, mode: 'ours', services, ...(i === runs - 1 && changes !== undefined ? { changes } : {}) });
        else raw = await inWorker<RawReport>(ctx, ns, { ...ref, mode: 'raw', services });
        await deleteNetns(ns);
      }
      if (ours === undefined || raw === undefined) throw new Error('a worker gave no result');
      partial = ours.partial ?? partial;
      out.push({ ours: ours.ours, oursRestore: ours.oursRestore, render: ours.render, raw: raw.raw });
      logRun(ctx, services, i, out[out.length - 1]);
    } finally {
      await cleanup.run(ctx.log);
    }
  }
  return { ...sizeResult(label, out), ...(partial !== undefined ? { partial } : {}) };
}
