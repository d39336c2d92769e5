/**
 * Reads of the namespace that several parts of one sync ask for, run once and shared, and the
 * first sync's reads started ahead.
 *
 * - Shared: one listing of the tables (TABLES_LISTING) answers both the nftables back end (is our table there?) and
 *   tables-present.ts (has iptables-nft a table of ours?); a first nftables sync ran two listings.
 * - Ahead: the sidecar makes its dataplane while its informers list (cmd/sidecar/main.ts), so an
 *   nftables one starts the reads its first sync needs then (the namespace's tables, our routes;
 *   firstSyncReads), and that sync finds them done instead of starting processes beside its
 *   render (each spawn blocks this process 4–20 ms, more with a large heap on a loaded machine).
 *   Not the node agent (the host's namespace, where other programs make tables) nor `--cleanup`
 *   (one operation, no first sync).
 *
 * A kept answer stays right for one operation of the apply loop, which drops the kept answers
 * once, when the operation settles (a drift check must see what changed between operations). Within
 * one operation, what these reads look for (our tables, iptables tables of ours, routes of our
 * protocol) is written by no one else, an earlier run of the program has exited, and the shared
 * reads after the operation's own write look for what that write never adds or removes: the
 * other back ends' table listings (iptables-nft's `ip nat`, … against the nftables back end's
 * `inet` tables, and the other way round) and cleanup's route read after rule writes. IO, but for
 * the pure `sharedRead` (which reads are shared) and `firstSyncReads` (which start ahead).
 */
import type { BackendKind } from '../core/seam.js';
import type { Exec, ExecResult, SpareExec } from '../core/exec.js';
import { routesReadArgs } from '../core/routes.js';
import { TABLES_LISTING } from '../core/exec.js';

/** A command and its arguments. */
export type Read = readonly [string, readonly string[]];

/** A new dataplane: whether its program asks for reads ahead (DataplaneOptions.readAhead), its rule back end, its routes' protocol. */
export interface ReadAheadFor {
  readonly asked: boolean;
  readonly rules: BackendKind;
  readonly routeProto: number;
}

/**
 * The reads a new dataplane starts for its first sync: the tables listing and our routes, only
 * where its program asks (the sidecar's run mode, whose first sync follows while its informers
 * list) and the first sync is an nftables one (where they were measured; an iptables
 * first sync reads back with iptables-save, which is not shared). Pure.
 */
export function firstSyncReads(p: ReadAheadFor): Read[] {
  if (!p.asked || p.rules !== 'nftables') return [];
  return [
    ['nft', TABLES_LISTING],
    ['ip', routesReadArgs(p.routeProto)],
  ];
}

/** An exec that keeps the answers of the shared reads until drop(). */
export interface ReadAheadExec extends SpareExec {
  /** Starts these reads now; their answers are kept for the next callers. */
  ahead(reads: readonly Read[]): void;
  /** Forgets every kept answer (the apply loop, when an operation settles). */
  drop(): void;
  /** Answers kept now (tests). */
  kept(): number;
}

/** The reads worth sharing: the tables listing and our routes (read-only, asked by several parts of a sync). Pure. */
export function sharedRead(cmd: string, args: readonly string[]): boolean {
  if (cmd === 'nft') return args.length === TABLES_LISTING.length && args.every((a, i) => a === TABLES_LISTING[i]);
  return cmd === 'ip' && args[0] === '-j' && args[1] === 'route' && args[2] === 'show';
}

export function readAheadExec(exec: SpareExec, shared: (cmd: string, args: readonly string[]) => boolean = sharedRead): ReadAheadExec {
  const kept = new Map<string, Promise<ExecResult>>();
  const run: Exec = (cmd, args, stdin) => {
    if (stdin !== undefined || !shared(cmd, args)) return exec(cmd, args, stdin);
    const key = [cmd, ...args].join('\0');
    let r = kept.get(key);
    if (r === undefined) {
      r = exec(cmd, args);
      kept.set(key, r);
      // A failed run is not kept: the next caller runs it again.
      r.catch(() => kept.delete(key));
    }
    return r;
  };
  return Object.assign(run, {
    ahead(reads: readonly Read[]) {
      for (const [cmd, args] of reads) void run(cmd, args).catch(() => undefined);
    },
    drop: () => kept.clear(),
    kept: () => kept.size,
    close: () => exec.close(),
    spares: () => exec.spares(),
    startSpare: (cmd: string, args: readonly string[], once?: boolean) => exec.startSpare(cmd, args, once),
  });
}
