/**
 * A small HTTPS load generator on node:https with keep-alive connections, for loopback only.
 * Fixed-rate mode is open-loop: request i is due at t0 + i/rate and its latency is measured from
 * that due time, so a stalled server is charged for the requests queued behind it (no
 * coordinated omission). Max mode is closed-loop: each connection sends its next request when
 * the previous answer arrives.
 */
import https from 'node:https';
import { performance } from 'node:perf_hooks';
import { summarize, type Summary } from '../../test/harness/stats.js';

export interface Target {
  readonly port: number;
  readonly path: string;
  readonly body: Buffer;
  readonly ca: string;
  /** The answer must contain this (cheap check that the server did the real work). */
  readonly expect: string;
}

export interface LoadResult {
  /** Latency in milliseconds. */
  readonly latency: Summary;
  readonly sent: number;
  readonly completed: number;
  readonly errors: number;
  /** Completed requests per second over the measured window. */
  readonly rps: number;
  readonly firstError?: string;
}

function agent(target: Target, connections: number): https.Agent {
  return new https.Agent({ keepAlive: true, maxSockets: connections, maxFreeSockets: connections, ca: target.ca });
}

function send(target: Target, a: https.Agent, done: (ok: boolean, why?: string) => void): void {
  const req = https.request(
    { host: '127.0.0.1', port: target.port, path: target.path, method: 'POST', agent: a, headers: { 'content-type': 'application/json', 'content-length': target.body.length } },
    (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        if (res.statusCode !== 200) return done(false, `HTTP ${res.statusCode}`);
        const text = Buffer.concat(chunks).toString();
        if (!text.includes(target.expect)) return done(false, `answer lacks ${target.expect}: ${text.slice(0, 300)}`);
        done(true);
      });
      res.on('error', (e) => done(false, e.message));
    },
  );
  req.on('error', (e) => done(false, e.message));
  req.end(target.body);
}

/** One request, timed (for large single requests such as the 1 MB pod). */
export function timedRequest(target: Target, a?: https.Agent): Promise<number> {
  const ag = a ?? agent(target, 1);
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    send(target, ag, (ok, why) => {
      if (!a) ag.destroy();
      if (ok) resolve(performance.now() - t0);
      else reject(new Error(why));
    });
  });
}

export function keepAliveAgent(target: Target, connections = 1): https.Agent {
  return agent(target, connections);
}

/** Latencies and errors of one load run. */
class Tally {
  readonly latencies: number[] = [];
  sent = 0;
  errors = 0;
  firstError: string | undefined;
  /** The callback for one request timed from `from` (its due time, or its send time). */
  record(from: number, after?: () => void): (ok: boolean, why?: string) => void {
    this.sent += 1;
    return (ok, why) => {
      if (ok) this.latencies.push(performance.now() - from);
      else {
        this.errors += 1;
        this.firstError ??= why;
      }
      after?.();
    };
  }
  result(seconds: number): LoadResult {
    const l = this.latencies;
    return { latency: summarize(l), sent: this.sent, completed: l.length, errors: this.errors, rps: l.length / seconds, ...(this.firstError ? { firstError: this.firstError } : {}) };
  }
}

/** Open loop at `rate` requests/s for `seconds`, over up to `connections` keep-alive connections. */
export function fixedRate(target: Target, rate: number, seconds: number, connections = 32): Promise<LoadResult> {
  const a = agent(target, connections);
  const total = Math.round(rate * seconds);
  const tally = new Tally();
  let finished = 0;
  return new Promise((resolve) => {
    const t0 = performance.now();
    const onDone = (): void => {
      finished += 1;
      if (finished < total) return;
      a.destroy();
      resolve(tally.result((performance.now() - t0) / 1000));
    };
    const tick = (): void => {
      const now = performance.now();
      while (tally.sent < total && t0 + (tally.sent * 1000) / rate <= now) {
        send(target, a, tally.record(t0 + (tally.sent * 1000) / rate, onDone));
      }
      if (tally.sent < total) setTimeout(tick, 0.5);
    };
    tick();
  });
}

/** Closed loop: `connections` requests in flight at all times for `seconds`. */
export function maxThroughput(target: Target, seconds: number, connections = 16): Promise<LoadResult> {
  const a = agent(target, connections);
  const tally = new Tally();
  let inFlight = 0;
  return new Promise((resolve) => {
    const t0 = performance.now();
    const stopAt = t0 + seconds * 1000;
    const next = (): void => {
      const start = performance.now();
      if (start >= stopAt) {
        if (inFlight === 0) {
          a.destroy();
          resolve(tally.result((start - t0) / 1000));
        }
        return;
      }
      inFlight += 1;
      send(
        target,
        a,
        tally.record(start, () => {
          inFlight -= 1;
          next();
        }),
      );
    };
    for (let i = 0; i < connections; i++) next();
  });
}
