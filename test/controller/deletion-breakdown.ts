/**
 * Where a deletion's time goes: the watcher's two sightings (deletion seen, terminating endpoint
 * seen; deletion-watch.ts) joined with the controller's own "EndpointSlices written" log line for
 * the write that published it (cmd/controller/reconcile.ts: when it saw the change, how long the
 * key queued and waited for its previous write's echo, planning, the apiserver's answer). All on
 * one machine, so the watcher's and the controller's clocks are the same clock. Pure.
 */

/** The fields of the controller's "EndpointSlices written" line this needs (ms, epoch for `time`). */
export interface WriteLine {
  /** When the write was answered (pino's `time`). */
  readonly time: number;
  readonly service: string;
  /** From the earliest unplanned change seen, and from the urgent one (a deletion, a Ready flip). */
  readonly changeMs?: number;
  readonly urgentMs?: number;
  readonly echoWaitMs?: number;
  readonly planMs: number;
  readonly writeMs: number;
}

/** One victim's deletion → terminating, split at the controller's boundaries (ms). */
export interface Breakdown {
  readonly pod: string;
  readonly totalMs: number;
  /** Watcher saw the deletion → the controller's informer saw a change (negative: the controller first). */
  readonly toControllerMs: number;
  /** The controller saw the change → its reconcile started: the queue, the echo wait included. */
  readonly queuedMs: number;
  /** Of queuedMs: waiting for the echo of the Service's previous write. */
  readonly echoWaitMs: number;
  readonly planMs: number;
  /** The apiserver's answer to the slice write(s). */
  readonly writeMs: number;
  /** Write answered → watcher saw the slice (negative when the watch event came before the answer). */
  readonly toWatcherMs: number;
}

/** Parses the controller's JSON log lines into its write lines (others are skipped). */
export function writeLines(logs: readonly string[]): WriteLine[] {
  const out: WriteLine[] = [];
  for (const l of logs) {
    if (!l.includes('"EndpointSlices written"')) continue;
    try {
      const r = JSON.parse(l) as Partial<WriteLine> & { msg?: string };
      if (r.msg === 'EndpointSlices written' && typeof r.time === 'number' && typeof r.service === 'string') out.push({ planMs: 0, writeMs: 0, ...r } as WriteLine);
    } catch {
      // not JSON
    }
  }
  return out;
}

/**
 * For each victim with both sightings: the last write of `service` sent before the watcher saw
 * the terminating endpoint, provided it was sent after the watcher saw the deletion (less
 * `slackMs`: the controller may see it first); else the victim is left out.
 */
export function breakdown(
  victims: readonly { readonly pod: string; readonly deletingAt?: number; readonly terminatingAt?: number }[],
  lines: readonly WriteLine[],
  service: string,
  slackMs = 50,
): Breakdown[] {
  const ws = lines.filter((w) => w.service === service && (w.urgentMs ?? w.changeMs) !== undefined).sort((a, b) => a.time - b.time);
  const out: Breakdown[] = [];
  for (const v of victims) {
    const { deletingAt, terminatingAt } = v;
    if (deletingAt === undefined || terminatingAt === undefined) continue;
    // The write that published it is the last one sent before the sighting (its answer, and the
    // log line, may come after the watcher's event). pino's time has ms precision.
    const w = ws.filter((x) => x.time - x.writeMs <= terminatingAt + 1).at(-1);
    const changeMs = w?.urgentMs ?? w?.changeMs;
    if (w === undefined || changeMs === undefined) continue;
    // A write sent before the deletion could be seen is an older one: this victim's was not logged.
    if (w.time - w.writeMs < deletingAt - slackMs) continue;
    const seen = w.time - changeMs;
    out.push({
      pod: v.pod,
      totalMs: terminatingAt - deletingAt,
      toControllerMs: seen - deletingAt,
      queuedMs: w.time - w.writeMs - w.planMs - seen,
      echoWaitMs: w.echoWaitMs ?? 0,
      planMs: w.planMs,
      writeMs: w.writeMs,
      toWatcherMs: terminatingAt - w.time,
    });
  }
  return out;
}
