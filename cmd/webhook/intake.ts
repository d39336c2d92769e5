/**
 * Admission intake: requests are read and decided while the bytes of the bodies in flight stay
 * within a budget; the others wait their turn, unread, in arrival order. A body in flight costs
 * about four times its size (the text, the parsed review, the decision), and the apiserver sends
 * as many reviews at once as it is asked for, so without this a burst of large pods could take the
 * webhook past its memory limit, and with failurePolicy Fail that refuses every injected pod. One
 * request is always let in, whatever its size (the body limit bounds it).
 */
import type { NextFunction, Request, Response } from 'express';

/** Bodies in flight at once: about 128 MiB of memory at four times their size, half a 256 Mi limit. */
export const BODY_BYTES_IN_FLIGHT = 32 * 1024 * 1024;

export interface Intake {
  readonly middleware: (req: Request, res: Response, next: NextFunction) => void;
  /** Bytes admitted and not yet answered, and requests waiting. */
  readonly stats: () => { inFlightBytes: number; waiting: number };
}

/** A request's claim on the budget: its Content-Length, or the body limit when it sends none. */
export function claimOf(contentLength: string | undefined, maxBodyBytes: number): number {
  const n = Number(contentLength);
  return Number.isFinite(n) && n > 0 ? Math.min(n, maxBodyBytes) : maxBodyBytes;
}

export function createIntake(budgetBytes: number, maxBodyBytes: number): Intake {
  let inFlight = 0;
  const waiting: { bytes: number; start: () => void }[] = [];
  const pump = (): void => {
    for (let w = waiting[0]; w !== undefined && (inFlight === 0 || inFlight + w.bytes <= budgetBytes); w = waiting[0]) {
      waiting.shift();
      inFlight += w.bytes;
      w.start();
    }
  };
  return {
    middleware: (req, res, next) => {
      const bytes = claimOf(req.headers['content-length'], maxBodyBytes);
      let started = false;
      let done = false;
      const entry = {
        bytes,
        start: () => {
          started = true;
          if (done) return void release();
          next();
        },
      };
      const release = (): void => {
        inFlight -= bytes;
        pump();
      };
      // Answered, or the caller gave up: the claim goes back, and a waiter that left is dropped.
      res.on('close', () => {
        if (done) return;
        done = true;
        if (started) release();
        else waiting.splice(waiting.indexOf(entry) >>> 0, 1);
      });
      waiting.push(entry);
      pump();
    },
    stats: () => ({ inFlightBytes: inFlight, waiting: waiting.length }),
  };
}
