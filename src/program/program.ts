/**
 * One way to run a long-lived program, shaped like controller-runtime's manager: named runnables
 * started one after another, stopped together in the reverse order when SIGTERM or SIGINT comes
 * or when one of them fails. Stopping is a fixed sequence: say why, drain (the program's own wait,
 * while the health server still answers), stop the runnables, exit. An optional deadline exits
 * anyway when stopping hangs, so the kubelet's grace period is never what ends the process.
 *
 * The process is reached through a small port (signals in, exit out) so the sequence is testable
 * without signalling the test runner.
 */
import type { Logger } from '../log.js';

export const STOP_SIGNALS = ['SIGTERM', 'SIGINT'] as const;
export type StopSignal = (typeof STOP_SIGNALS)[number];

/** The process as a program sees it. */
export interface ProcessPort {
  on(signal: StopSignal, listener: () => void): unknown;
  exit(code: number): void;
}

export const REAL_PROCESS: ProcessPort = {
  on: (signal, listener) => process.on(signal, listener),
  exit: (code) => process.exit(code),
};

/** What a runnable may do while it runs. */
export interface RunContext {
  /** Stops the program with a non-zero exit, naming this runnable and the error. */
  fail(error: unknown): void;
  /** True once stopping has begun (a runnable that starts slowly checks it before going on). */
  stopping(): boolean;
}

/** A part of a program with a start and a stop (a server, informers, a loop). */
export interface Runnable {
  readonly name: string;
  /** Resolves once started; a rejection stops the program (RunContext.fail). */
  start?(ctx: RunContext): void | Promise<void>;
  /** Called once, in the reverse order of starting, only for runnables that were started. */
  stop?(): void | Promise<void>;
}

export interface StopPolicy {
  /** Logged (with the signal) when a signal begins stopping. */
  readonly message: string;
  /** More fields for that line. */
  readonly fields?: Record<string, unknown>;
  /** Runs before any runnable stops (a webhook's endpoint-removal wait; a sidecar's last probe). */
  drain?(): Promise<void>;
  /** Exit anyway this long after stopping began (the pending exit code), logging `message`. */
  readonly deadline?: { readonly ms: number; readonly message: string; readonly fields?: Record<string, unknown> };
  /** Logged when a runnable's stop throws; the exit code is then `errorExitCode`. */
  readonly errorMessage: string;
  readonly errorExitCode: number;
}

type StopCause = { readonly signal: string } | { readonly runnable: string; readonly error: unknown };

const message = (e: unknown): string => (e instanceof Error ? e.message : String(e));

export class Program {
  private readonly started: Runnable[] = [];
  private stopped: Promise<void> | undefined;
  private signalsHandled = false;

  constructor(
    readonly name: string,
    private readonly log: Logger,
    private readonly policy: StopPolicy,
    private readonly port: ProcessPort = REAL_PROCESS,
  ) {}

  /** True from the first signal or failure on: readiness that changes while draining reads it. */
  stopping(): boolean {
    return this.stopped !== undefined;
  }

  /** From here on SIGTERM and SIGINT stop the program (a repeat while stopping is ignored). */
  handleSignals(): void {
    if (this.signalsHandled) return;
    this.signalsHandled = true;
    for (const signal of STOP_SIGNALS) this.port.on(signal, () => void this.stop({ signal }));
  }

  /**
   * Starts `r` and registers it for stopping. Returns false, without starting it, once stopping has
   * begun; a start that throws stops the program (and returns false).
   */
  async start(r: Runnable): Promise<boolean> {
    if (this.stopping()) return false;
    this.started.push(r);
    try {
      await r.start?.(this.context(r.name));
    } catch (error) {
      this.fail(r.name, error);
      return false;
    }
    return !this.stopping();
  }

  /** Starts each in order; false as soon as one did not start. */
  async startAll(rs: readonly Runnable[]): Promise<boolean> {
    for (const r of rs) if (!(await this.start(r))) return false;
    return true;
  }

  /** Stops the program with exit code 1, naming the runnable that failed and why. */
  fail(runnable: string, error: unknown): void {
    void this.stop({ runnable, error });
  }

  /** Exits now, without stopping anything (a wedged process the kubelet must restart). */
  exit(code: number): void {
    this.port.exit(code);
  }

  private context(name: string): RunContext {
    return { fail: (error) => this.fail(name, error), stopping: () => this.stopping() };
  }

  private stop(cause: StopCause): Promise<void> {
    this.stopped ??= this.stopSequence(cause);
    return this.stopped;
  }

  private async stopSequence(cause: StopCause): Promise<void> {
    let code = 0;
    if ('signal' in cause) {
      this.log.info({ signal: cause.signal, ...this.policy.fields }, this.policy.message);
    } else {
      code = 1;
      this.log.fatal({ runnable: cause.runnable, err: message(cause.error) }, `${cause.runnable} failed: ${message(cause.error)}; stopping ${this.name}`);
    }
    const { deadline } = this.policy;
    const timer =
      deadline === undefined
        ? undefined
        : setTimeout(() => {
            this.log.warn({ afterMs: deadline.ms, ...deadline.fields }, deadline.message);
            this.port.exit(code);
          }, deadline.ms);
    try {
      await this.policy.drain?.();
      for (const r of this.started.toReversed()) await r.stop?.();
    } catch (e) {
      this.log.error({ err: e }, this.policy.errorMessage);
      code = Math.max(code, this.policy.errorExitCode);
    }
    clearTimeout(timer);
    // pino writes synchronously to stdout by default, so nothing is lost by exiting here.
    this.port.exit(code);
  }
}
