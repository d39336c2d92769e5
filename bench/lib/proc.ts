/**
 * Process helpers for benchmarks: run a command (optionally inside a network namespace) and
 * time it, and undo everything a benchmark set up
 * even when it fails half-way.
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { performance } from 'node:perf_hooks';

// What a process costs, read from /proc: shared with the real-node tests (the soak).
export { cpuMs, cpuWithChildrenMs, descendants, rssBytes, smaps, treeSum, type Smaps } from '../../test/harness/proc-stats.js';

export interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** Wall time from spawn to exit, in milliseconds. */
  readonly ms: number;
}

export interface RunOptions {
  /** Written to the child's stdin, then stdin is closed. */
  readonly input?: string;
  /** Run inside this network namespace (`ip netns exec <netns> …`). */
  readonly netns?: string;
  readonly env?: NodeJS.ProcessEnv;
  /** Reject when the exit code is not 0 (default true). */
  readonly check?: boolean;
}

export function nsArgv(cmd: string, args: readonly string[], netns?: string): [string, string[]] {
  return netns ? ['ip', ['netns', 'exec', netns, cmd, ...args]] : [cmd, [...args]];
}

export function run(cmd: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  const [file, argv] = nsArgv(cmd, args, opts.netns);
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(file, argv, { stdio: ['pipe', 'pipe', 'pipe'], env: opts.env ?? process.env });
    const out: Buffer[] = [];
    const errOut: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => errOut.push(c));
    child.on('error', (e) => reject(new Error(`cannot run ${file}: ${e.message}; is it installed?`)));
    child.on('close', (code) => {
      const r = { code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(errOut).toString(), ms: performance.now() - t0 };
      if (code !== 0 && opts.check !== false) reject(new Error(`${file} ${argv.join(' ').slice(0, 200)} exited ${code}: ${r.stderr.slice(0, 1000)}`));
      else resolve(r);
    });
    child.stdin.on('error', () => undefined);
    child.stdin.end(opts.input ?? '');
  });
}

/** Fails with an install hint when a tool the benchmark needs is missing. */
export async function requireTool(cmd: string, versionArgs: readonly string[], install: string): Promise<void> {
  try {
    await run(cmd, versionArgs, { check: false });
  } catch {
    throw new Error(`${cmd} is not installed; ${install}`);
  }
}

/** Starts a long-running child; its output is kept (last 64 KB) for error messages. */
export function startProcess(cmd: string, args: readonly string[], opts: SpawnOptions & { netns?: string } = {}): ChildProcess & { output(): string } {
  const [file, argv] = nsArgv(cmd, args, opts.netns);
  const child = spawn(file, argv, { stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  let buf = '';
  const keep = (c: Buffer): void => {
    buf = (buf + c.toString()).slice(-65536);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return Object.assign(child, { output: () => buf });
}

/** Stops a child started here (SIGTERM, then SIGKILL after a grace period) and waits for it. */
export async function stopProcess(child: ChildProcess, graceMs = 3000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Undo steps run in reverse order; each one's failure is logged, never thrown over the others. */
export class Cleanup {
  private readonly steps: { what: string; fn: () => Promise<void> | void }[] = [];
  add(what: string, fn: () => Promise<void> | void): void {
    this.steps.push({ what, fn });
  }
  async run(log: (msg: string) => void = (m) => process.stderr.write(`${m}\n`)): Promise<void> {
    while (this.steps.length > 0) {
      const s = this.steps.pop();
      if (!s) break;
      try {
        await s.fn();
      } catch (e) {
        log(`cleanup ${s.what}: ${(e as Error).message}`);
      }
    }
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Resolves with the first stdout line matching `re` (e.g. a server's `LISTENING <port>`); rejects when the child exits first. */
export function waitForLine(child: ChildProcess & { output(): string }, re: RegExp, timeoutMs = 30_000): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => fail(new Error(`no line matching ${re} after ${timeoutMs} ms; output: ${child.output().slice(-2000)}`)), timeoutMs);
    const onData = (c: Buffer): void => {
      buf += c.toString();
      const m = re.exec(buf);
      if (m) {
        done();
        resolve(m);
      }
    };
    const onExit = (code: number | null): void => fail(new Error(`exited (${code}) before printing ${re}; output: ${child.output().slice(-2000)}`));
    const done = (): void => {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.off('exit', onExit);
    };
    const fail = (e: Error): void => {
      done();
      reject(e);
    };
    child.stdout?.on('data', onData);
    child.once('exit', onExit);
  });
}

/** Runs `fn` with a fresh Cleanup and always runs the cleanup afterwards, logging its failures. */
export async function withCleanup<T>(log: (msg: string) => void, fn: (cleanup: Cleanup) => Promise<T>): Promise<T> {
  const cleanup = new Cleanup();
  try {
    return await fn(cleanup);
  } finally {
    await cleanup.run(log);
  }
}
