/** The "where the time goes" table of a deletion (test/controller/deletion-breakdown.ts), shared by B9 and the soak. */
import type { Breakdown } from './deletion-breakdown.js';
import { fmt, summarize } from '../harness/stats.js';

export const STAGE_COLUMNS = [
  'n',
  'total',
  'watcher saw the deletion → controller saw it',
  'queued (controller saw → reconcile started)',
  "of which waiting for the previous write's echo",
  'plan',
  'apiserver write',
  'write answered → watcher saw the slice',
];

export const STAGE_CAPTION =
  "Where the time goes, ms (p50 / p90 / p99 of each part, over the deletions joined to the controller's log): the watcher's two sightings and the controller's \"EndpointSlices written\" line of the write that published the endpoint terminating (one machine, one clock)";

/** One row's cells under STAGE_COLUMNS. */
export function stageCells(bs: readonly Breakdown[]): string[] {
  const col = (f: (b: Breakdown) => number): string => {
    const s = summarize(bs.map(f));
    return s.n === 0 ? '–' : `${fmt(s.median)} / ${fmt(s.p90)} / ${fmt(s.p99)}`;
  };
  return [
    String(bs.length),
    col((b) => b.totalMs),
    col((b) => b.toControllerMs),
    col((b) => b.queuedMs),
    col((b) => b.echoWaitMs),
    col((b) => b.planMs),
    col((b) => b.writeMs),
    col((b) => b.toWatcherMs),
  ];
}
