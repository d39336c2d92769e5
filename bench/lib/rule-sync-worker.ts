/**
 * The in-namespace worker of rule-sync-inside.ts: started under `ip netns exec <ns> node --import
 * tsx` with one task (JSON in argv[2]); runs it where it was started and prints one `RESULT {json}`
 * line on stdout. Progress lines go to stderr.
 */
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { partialVsRaw, rawRestore, timeFullSync, timeRaw, type SyncSubject } from './rule-sync.js';
import { REPORT, type OursReport, type RawReport, type Task } from './rule-sync-inside.js';
import type { RunContext } from './report.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** The stand-in for the sidecar's informers' list before its first sync (ms; a list of 1,000 Services and their slices from an apiserver takes longer). */
const INFORMERS_LIST_MS = 50;

/** The worker: one task in the namespace it was started in; the result is one `RESULT {json}` line on stdout. */
async function worker(task: Task): Promise<OursReport | RawReport> {
  const mod = (await import(pathToFileURL(path.resolve(fileURLToPath(task.module))).href)) as { SYNC_SUBJECTS?: Record<string, SyncSubject<unknown>> };
  const subject = mod.SYNC_SUBJECTS?.[task.key];
  if (subject === undefined) throw new Error(`${task.module} exports no SYNC_SUBJECTS[${task.key}]`);
  const ctx: RunContext = { quick: false, log: (m) => process.stderr.write(`${m}\n`) };
  if (task.mode === 'raw') {
    const text = subject.plan(subject.state(task.services));
    return { raw: await timeRaw(subject, undefined, text) };
  }
  // As the sidecar: the dataplane is made before its informers list (it decides its back end and
  // starts its element writer meanwhile), then the first sync.
  const dp = subject.dataplane(undefined);
  try {
    // The informers' list (network-bound; in the sidecar the process is idle meanwhile, and an
    // nftables dataplane reads ahead and warms its render then: read-ahead.ts, nft/warm-up.ts).
    // A fixed stand-in, untimed, so the first sync starts as it would after a real list.
    await sleep(INFORMERS_LIST_MS);
    const state = subject.state(task.services);
    // The expected text is rendered after the sync (only to check what landed), so the sync's own
    // render is this process's first, as a starting sidecar's is.
    const ours = await timeFullSync(subject, dp, state, undefined, () => subject.plan(state));
    if (task.changes === undefined) return ours;
    if (subject.changes === undefined) throw new Error(`SYNC_SUBJECTS[${task.key}] has no changes() for partial syncs`);
    const partial = await partialVsRaw(ctx, dp, undefined, task.changes, subject.changes(task.services), subject.raw ?? rawRestore);
    return { ...ours, partial };
  } finally {
    dp.close();
  }
}

{
  const task = JSON.parse(process.argv[2] ?? '{}') as Task;
  try {
    const r = await worker(task);
    process.stdout.write(`${REPORT}${JSON.stringify(r)}\n`);
    process.exit(0);
  } catch (e) {
    process.stderr.write(`${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  }
}
