/**
 * Processes started ahead. A command that reads its whole input before it touches the kernel
 * (iptables-nft-restore, `nft -f -`, nfnl-batch) can be started before it is needed and left
 * blocked on its input: a change then costs a write to it, not a fork, exec and dynamic linking
 * (iptables.ts and nft/element-writer.ts say what each gains). A waiting process costs its
 * memory and no CPU; it does not keep this process alive, and EOF on its input (close(), or this
 * process exiting) lets it exit without doing anything.
 *
 * The one loop both users share: take the waiting process if it is still alive (else start one
 * now), run the input through it, once more through a new process if it was killed from outside
 * (every user's input is one kernel transaction: applied whole or not at all, so running it again
 * is safe), and start the next one after the caller has run.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';

export interface LaunchResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
  readonly signal?: string;
}

/** A started process: its result, and its stderr as it comes. */
export interface Launched {
  readonly child: ChildProcess;
  readonly result: Promise<LaunchResult>;
  /** Called with all stderr so far, on each chunk. */
  onStderr(f: (all: string) => void): void;
}

export function launch(argv: readonly string[]): Launched {
  const cmd = argv[0] ?? '';
  const child = spawn(cmd, argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const errs: Buffer[] = [];
  let watch: ((all: string) => void) | undefined;
  child.stdout?.on('data', (b: Buffer) => out.push(b));
  child.stderr?.on('data', (b: Buffer) => {
    errs.push(b);
    watch?.(Buffer.concat(errs).toString());
  });
  child.stdin?.on('error', () => undefined);
  const result = new Promise<LaunchResult>((resolve) => {
    // A missing binary is reported like a failed command (code 127), never as a crash.
    child.on('error', (e) => resolve({ code: 127, stdout: '', stderr: `${cmd}: ${e.message}` }));
    child.on('close', (code, signal) =>
      resolve({ code: code ?? 1, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(errs).toString() + (signal ? `killed by ${signal}` : ''), ...(signal ? { signal } : {}) }),
    );
  });
  return { child, result, onStderr: (f) => (watch = f) };
}

/** A waiting process must not keep this process alive; one in use must. */
export function setRef(l: Launched, ref: boolean): void {
  const c = l.child;
  if (ref) c.ref();
  else c.unref();
  for (const s of [c.stdin, c.stdout, c.stderr] as unknown as (Socket | null)[]) {
    if (ref) s?.ref();
    else s?.unref();
  }
}

export const alive = (l: Launched): boolean => l.child.exitCode === null && l.child.signalCode === null;

/** One argv's process kept started ahead. */
export class SpareProcess {
  private waiting: Launched | undefined;
  private closed = false;

  constructor(readonly argv: readonly string[]) {}

  /** Starts one now, unless one is waiting or this was closed. */
  start(): void {
    if (this.closed || this.waiting !== undefined) return;
    const l = launch(this.argv);
    setRef(l, false);
    this.waiting = l;
  }

  /**
   * Runs one input: `use` writes it to the process and resolves with the outcome. The waiting
   * process if it is alive, else a new one; once more from a new one if it was killed by a signal.
   * With `next` (default), the next one starts after the caller has run: spawn() is synchronous
   * (~4 ms p50 from a process of ~80 MiB here) and no part of this change's latency.
   */
  async run<R extends { readonly signal?: string }>(use: (l: Launched) => Promise<R>, next = true): Promise<R> {
    const w = this.waiting;
    this.waiting = undefined;
    let l: Launched;
    if (w !== undefined && alive(w)) {
      setRef(w, true);
      l = w;
    } else {
      w?.child.kill();
      l = launch(this.argv);
    }
    let r = await use(l);
    if (r.signal !== undefined) r = await use(launch(this.argv));
    if (next && !this.closed) setImmediate(() => this.start());
    return r;
  }

  /** Whether a live process is waiting now (tests, metrics). */
  ready(): boolean {
    return this.waiting !== undefined && alive(this.waiting);
  }

  /** EOF on the waiting one's input: it exits without doing anything; none is started again. */
  close(): void {
    this.closed = true;
    this.waiting?.child.stdin?.end();
    this.waiting = undefined;
  }
}
