/**
 * Processes started ahead. A command that reads its whole input before it touches the kernel
 * (iptables-nft-restore, `nft -f -`, nfnl-batch) can be started before it is needed and left
 * blocked on its input: a change then costs a write to it, not a fork, exec and dynamic linking
 * (iptables.ts and nftables/tuning/element-writer.ts say what each gains). A waiting process costs its
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

/**
 * `keepStdout` false: the result's stdout stays empty, for a process that serves many inputs (its
 * user reads each answer from the stream; kept, they would pile up for the process's life).
 */
export function launch(argv: readonly string[], keepStdout = true): Launched {
  const cmd = argv[0] ?? '';
  const child = spawn(cmd, argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  const errs: Buffer[] = [];
  let watch: ((all: string) => void) | undefined;
  if (keepStdout) child.stdout?.on('data', (b: Buffer) => out.push(b));
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

/** Inputs from this size on are written blocking to a command that reads its whole input first (writeInput). */
export const BLOCKING_INPUT_MIN = 64 * 1024;

/**
 * Ends a process's input with `text`. `readsWholeFirst`: the command reads all of its input before
 * it does anything else (`nft -f -`: strace, docs/decisions/0026-first-sync-fills-maps-over-netlink.md), so it cannot start before the
 * last byte arrives; a large input is then written with the pipe in blocking mode, in one write
 * that returns when the command has read it all (~6 ms for 760 KB), instead of a socket buffer's
 * worth per turn of the event loop, where the GC and whatever else this process runs next
 * (a first sync: a route batch, a major GC after the render) delayed the rest (B2 at 10,000
 * Services: 76-162 ms; docs/decisions/0026-first-sync-fills-maps-over-netlink.md). Node sets its own stdout pipes blocking the same way.
 */
export function writeInput(l: Launched, text: string, readsWholeFirst = false): void {
  const stdin = l.child.stdin;
  if (readsWholeFirst && text.length >= BLOCKING_INPUT_MIN) (stdin as unknown as { _handle?: { setBlocking?: (on: boolean) => number } } | null)?._handle?.setBlocking?.(true);
  stdin?.end(text);
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

  /**
   * `serves`: the command answers input after input (nfnl-batch --serve): a run whose result
   * `serves` says so hands the same process back as the waiting one, and no new one starts.
   */
  constructor(
    readonly argv: readonly string[],
    private readonly serves?: (r: LaunchResult) => boolean,
  ) {}

  private launch(): Launched {
    return launch(this.argv, this.serves === undefined);
  }

  /** Starts one now, unless one is waiting or this was closed. */
  start(): void {
    if (this.closed || this.waiting !== undefined) return;
    const l = this.launch();
    setRef(l, false);
    this.waiting = l;
  }

  /**
   * Runs one input: `use` writes it to the process and resolves with the outcome. The waiting
   * process if it is alive, else a new one; once more from a new one if it was killed by a signal.
   * With `next` (default), the next one starts after the caller has run: spawn() is synchronous
   * (~4 ms p50 from a process of ~80 MiB here) and no part of this change's latency.
   */
  async run<R extends LaunchResult>(use: (l: Launched) => Promise<R>, next = true): Promise<R> {
    const w = this.waiting;
    this.waiting = undefined;
    let l: Launched;
    if (w !== undefined && alive(w)) {
      setRef(w, true);
      l = w;
    } else {
      w?.child.kill();
      l = this.launch();
    }
    let r = await use(l);
    if (r.signal !== undefined) r = await use((l = this.launch()));
    if (this.serves?.(r) === true && alive(l)) {
      // Still serving: it waits for the next input (or, once closed, gets its EOF).
      setRef(l, false);
      if (this.closed || this.waiting !== undefined) l.child.stdin?.end();
      else this.waiting = l;
      return r;
    }
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
