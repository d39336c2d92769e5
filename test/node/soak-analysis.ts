/**
 * The soak's pure parts: which churn event a failed request follows, what a kubelet
 * probe event says, and the slope of a memory series. test/node/soak.ts does the IO.
 */

/** What the soak does to the cluster, one kind per line of the report. */
export type ChurnKind = 'scale-up' | 'scale-down' | 'preStop added (a rollout)' | 'rollout restart' | 'controller leader deleted' | 'webhook pod deleted' | "client's sidecar stopped";

export interface ChurnEvent {
  /** ms since the epoch, when the soak issued it. */
  readonly at: number;
  readonly kind: ChurnKind;
  readonly detail: string;
}

export interface FailedRequest {
  readonly path: string;
  /** ms since the epoch (the client pod's clock, which is the host's). */
  readonly at: number;
  /** curl's exit code: 7 refused, 28 timeout, 52 empty reply, 56 reset, 22 HTTP ≥ 400, 6 no DNS answer. */
  readonly code: number;
}

export interface Attributed extends FailedRequest {
  /** The latest churn event issued before the failure; undefined when none was. */
  readonly after?: ChurnKind;
  readonly afterMs?: number;
}

/** Each failure with the latest churn event issued before it (the simplest rule that explains a scale-down race). */
export function attribute(failures: readonly FailedRequest[], events: readonly ChurnEvent[]): Attributed[] {
  const sorted = [...events].sort((a, b) => a.at - b.at);
  return failures.map((f) => {
    let last: ChurnEvent | undefined;
    for (const e of sorted) {
      if (e.at > f.at) break;
      last = e;
    }
    return last ? { ...f, after: last.kind, afterMs: f.at - last.at } : { ...f };
  });
}

const CURL_CODES: Record<number, string> = { 6: 'no DNS answer', 7: 'connection refused', 22: 'HTTP error', 28: 'timeout', 52: 'empty reply', 56: 'connection reset' };
export const curlCause = (code: number): string => CURL_CODES[code] ?? `curl exit ${code}`;

export interface ProbeFailure {
  readonly probe: 'Startup' | 'Liveness' | 'Readiness';
  readonly cause: 'connection refused' | 'connection reset' | 'timeout' | 'HTTP 503' | 'HTTP 500' | 'other';
}

/** The probe and cause of a kubelet "Unhealthy" event ("Liveness probe failed: Get …: connect: connection refused"); undefined for other messages. */
export function probeFailure(message: string): ProbeFailure | undefined {
  const m = /^(Startup|Liveness|Readiness) probe (?:failed|errored)/.exec(message);
  if (!m) return undefined;
  const probe = m[1] as ProbeFailure['probe'];
  const cause: ProbeFailure['cause'] = /connection refused/.test(message)
    ? 'connection refused'
    : /connection reset/.test(message)
      ? 'connection reset'
      : /deadline exceeded|timeout/i.test(message)
        ? 'timeout'
        : /statuscode: 503/.test(message)
          ? 'HTTP 503'
          : /statuscode: 500/.test(message)
            ? 'HTTP 500'
            : 'other';
  return { probe, cause };
}

/** Least-squares slope of y over x (units of y per unit of x); NaN with fewer than two distinct x. */
export function slope(points: readonly { readonly x: number; readonly y: number }[]): number {
  const n = points.length;
  if (n < 2) return NaN;
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) ** 2;
  }
  return den === 0 ? NaN : num / den;
}

/** Lines of the client's request loop: `fail <code> <epoch s.ns>`, `count <epoch s> <ok> <failed>`, `total <ok> <failed>`. */
export interface LoopOutput {
  readonly failures: { at: number; code: number }[];
  readonly counts: { at: number; ok: number; failed: number }[];
  readonly total?: { ok: number; failed: number };
}

export function parseLoop(text: string): LoopOutput {
  const failures: LoopOutput['failures'] = [];
  const counts: LoopOutput['counts'] = [];
  let total: LoopOutput['total'];
  for (const line of text.split('\n')) {
    const f = /^fail (\d+) (\d+(?:\.\d+)?)$/.exec(line.trim());
    if (f) failures.push({ code: Number(f[1]), at: Number(f[2]) * 1000 });
    const c = /^count (\d+(?:\.\d+)?) (\d+) (\d+)$/.exec(line.trim());
    if (c) counts.push({ at: Number(c[1]) * 1000, ok: Number(c[2]), failed: Number(c[3]) });
    const t = /^total (\d+) (\d+)$/.exec(line.trim());
    if (t) total = { ok: Number(t[1]), failed: Number(t[2]) };
  }
  return { failures, counts, ...(total ? { total } : {}) };
}

/** Requests (ok + failed) sent in [from, to), from the loop's running counts (the nearest count line at or before each bound). */
export function requestsBetween(counts: LoopOutput['counts'], from: number, to: number): number {
  const at = (t: number): number => {
    let n = 0;
    for (const c of counts) if (c.at <= t) n = c.ok + c.failed;
    return n;
  };
  return at(to) - at(from);
}

/** From Prometheus text lines: a histogram's observation count and how many were ≤ `le` seconds (its bucket of that bound). */
export function histogramShare(lines: readonly string[], name: string, le: number): { count: number; atMost: number } | undefined {
  const value = (re: RegExp): number | undefined => {
    for (const l of lines) {
      const m = re.exec(l);
      if (m?.[1] !== undefined) return Number(m[1]);
    }
    return undefined;
  };
  const esc = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const count = value(new RegExp(`^${esc}_count(?:\\{[^}]*\\})? (\\S+)$`));
  const atMost = value(new RegExp(`^${esc}_bucket\\{(?:[^}]*,)?le="${le}"[^}]*\\} (\\S+)$`));
  return count === undefined || atMost === undefined ? undefined : { count, atMost };
}

/** The parts of an Unhealthy Event the exit-race rule looks at. */
export interface ProbeEventView {
  readonly pod: string;
  readonly message: string;
  /** ISO time the Event was first seen (1 s precision). */
  readonly first: string;
}

/**
 * Unhealthy Events that are the kubelet probing a container of a pod the soak itself deleted,
 * after that container exited: "connection refused" once its listener is gone, before the kubelet
 * has noticed the exit (it keeps probing terminating pods; docs/decisions/0039-soak.md). Every other
 * Unhealthy Event counts against the soak. At most one such Event per deleted pod is excused, so a
 * pod that fails its probes while it still serves is still caught.
 */
export function exitRaceEvents<E extends ProbeEventView>(events: readonly E[], churn: readonly ChurnEvent[]): { excused: E[]; counted: E[] } {
  const deletedAt = new Map<string, number>();
  for (const c of churn) if (c.kind === 'webhook pod deleted' || c.kind === 'controller leader deleted') deletedAt.set(c.detail, c.at);
  const excused: E[] = [];
  const counted: E[] = [];
  const used = new Set<string>();
  for (const e of events) {
    const at = deletedAt.get(e.pod);
    const refused = /connect: connection refused/.test(e.message);
    if (at !== undefined && refused && Date.parse(e.first) >= at - 1000 && !used.has(e.pod)) {
      used.add(e.pod);
      excused.push(e);
    } else counted.push(e);
  }
  return { excused, counted };
}
