/**
 * Running commands where the dataplane runs, for every back end and the shared steps (routes,
 * conntrack): the Exec type, the test hook's `ip netns exec` prefix, a tool's message on one line,
 * reading the namespace's /proc files, and the one listing of the tables several parts share.
 * How commands are started (spare processes kept ahead) is a tuning: ../tuning/spare-exec.ts.
 */
import { readFile } from 'node:fs/promises';

export interface ExecResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export type Exec = (cmd: string, args: readonly string[], stdin?: string) => Promise<ExecResult>;

/** An Exec that may hold spare processes; close() lets them go (they exit without doing anything). */
export interface SpareExec extends Exec {
  close(): void;
  /** Spare processes waiting now (tests, metrics). */
  spares(): number;
  /**
   * Starts a spare for a command that will run (if `keepSpare` takes it): its first run then starts
   * no process. `once`: started even if `keepSpare` does not take the command; its next run uses
   * it, and no spare follows (a command only the first sync needs started ahead).
   */
  startSpare(cmd: string, args: readonly string[], once?: boolean): void;
}

/** The argv that runs `argv` where the dataplane runs: here, or (test hook) in the named netns. */
export function inNetns(netns: string | undefined, argv: readonly string[]): string[] {
  return netns === undefined ? [...argv] : ['ip', 'netns', 'exec', netns, ...argv];
}

/** The tool's message without its banner prefix and usage hint, on one line. */
export function summarize(stderr: string): string {
  return stderr
    .split('\n')
    .map((l) => l.replace(/^ip6?tables-\S+ v[\d.]+ \([^)]*\):\s*/, '').trim())
    .filter((l) => l !== '' && !l.startsWith('Try `'))
    .join('; ');
}

/** The failing line with one line either side, numbered, for the log. */
export function lineContext(text: string, line: number | undefined): string[] {
  if (line === undefined) return [];
  const lines = text.split('\n');
  const out: string[] = [];
  for (let n = Math.max(1, line - 1); n <= Math.min(lines.length, line + 1); n += 1) out.push(`${n}${n === line ? '>' : ':'} ${lines[n - 1] ?? ''}`);
  return out;
}

/** A file of the namespace: its text, or undefined when it does not exist; throws when it cannot be read. */
export type ReadNetnsFile = (path: string) => Promise<string | undefined>;

/**
 * Reads where the commands run: with `exec`, by `cat` through it (right for the test hook's `ip
 * netns exec` too); without, in this process (the sidecar lives in its pod's namespace).
 */
export function fileReader(exec?: Exec): ReadNetnsFile {
  if (exec === undefined)
    return async (path) => {
      try {
        return await readFile(path, 'utf8');
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
        throw e;
      }
    };
  return async (path) => {
    const r = await exec('cat', [path]);
    if (r.code === 0) return r.stdout;
    if (/No such file/.test(r.stderr)) return undefined;
    throw new Error(`cat ${path} failed (exit ${r.code}): ${r.stderr.trim()}`);
  };
}

/**
 * The namespace's tables, every family: the one listing that tells iptables-nft's tables and the
 * nftables back end's own (read-ahead.ts shares it). `list chains` and not `list tables`: nft 1.0.6
 * fetches every rule and element for `list tables` (~41 MiB in `nft` over a table of 2,000 Service
 * ports, charged to the sidecar's cgroup at a restart), and only the chains for this (~5 MiB). Each
 * table is a block `table <family> <name> {`; a table with no chain is not listed (ours and
 * iptables-nft's always have one).
 */
export const TABLES_LISTING: readonly string[] = ['list', 'chains'];

/**
 * The exec a dataplane runs with: spare processes (../tuning/spare-exec.ts) and reads kept for
 * one operation (../tuning/read-ahead.ts). `ahead` starts reads whose answers the next callers
 * take; `drop` forgets them (the pipeline, when an operation settles).
 */
export interface DataplaneExec extends SpareExec {
  ahead(reads: readonly (readonly [string, readonly string[]])[]): void;
  drop(): void;
}
