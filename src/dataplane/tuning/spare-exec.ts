/**
 * The exec every dataplane runs its commands with (core/exec.ts's Exec), with spare processes.
 *
 * Commands run in the current network namespace (the sidecar lives inside the pod). The one test
 * hook is `netns`: when set, each command is prefixed with `ip netns exec <netns>`.
 *
 * Spare processes (spare-process.ts): for the commands `keepSpare` names (the nft back end's restore binaries), the
 * exec keeps one process per argv started ahead, blocked reading its input, so the next call only
 * writes to it. A change then costs no fork, exec and dynamic linking on its way to the kernel
 * (write → commit 5.8 → 1.6 ms median, 20 → 5 ms max, probed in a network namespace on the loaded
 * 2-core development machine). Only safe because iptables-nft-restore does nothing before its input ends a table: it
 * reads the kernel's state (and loads extensions) after reading, so a spare started minutes ago
 * behaves exactly as one started now. Not for legacy, which may take the xtables lock early. A
 * spare costs ~160 KiB of private memory and no CPU while it waits, and is kept only for a
 * command run more than once; it exits on EOF without touching anything (close(), or this
 * process exiting). Such restores end with a sentinel line (see acked()), so a sync need not wait
 * for the process to exit. `nft -f -` (the nftables back end's one command per change) gets a spare
 * too: nft reads and parses its whole input before it fetches anything from the kernel, so a
 * waiting one is as fresh as a new one. It gets no sentinel (nft parses the whole input before
 * sending: a bad line would abort the transaction), so its sync waits for it to exit.
 */
import { launch, SpareProcess, writeInput, type LaunchResult, type Launched } from './spare-process.js';
import { inNetns, type ExecResult, type SpareExec } from '../core/exec.js';

/**
 * Whether iptables-nft-restore's stderr says only that the sentinel line failed (`line N
 * failed`), i.e. every table before it was committed. Pure.
 */
export function sentinelOnly(stderr: string, sentinelLine: number): boolean {
  if (!stderr.endsWith('\n')) return false;
  const lines = [...stderr.matchAll(/line:? (\d+)/gi)].map((m) => Number(m[1]));
  return lines.length > 0 && lines.every((n) => n === sentinelLine);
}

/**
 * Writes a restore's input followed by a sentinel (`COMMIT` outside any table, a parse error) and
 * resolves as soon as stderr reports that line: the tables before it are committed by then. The
 * process still has to exit, and that takes 5–30 ms after a transaction that deleted rules (the
 * kernel frees them when the netlink socket closes); the next change need not wait for it.
 */
function acked(l: Launched, text: string): Promise<ExecResult & { signal?: string }> {
  const body = text === '' || text.endsWith('\n') ? text : `${text}\n`;
  const sentinel = body.split('\n').length;
  return new Promise((resolve) => {
    let done = false;
    const ok = (stdout: string): void => {
      done = true;
      resolve({ code: 0, stdout, stderr: '' });
    };
    l.onStderr((all) => {
      if (!done && sentinelOnly(all, sentinel)) ok('');
    });
    void l.result.then((r) => {
      if (done) return;
      if (r.signal === undefined && sentinelOnly(r.stderr, sentinel)) ok(r.stdout);
      else {
        done = true;
        resolve(r);
      }
    });
    l.child.stdin?.end(`${body}COMMIT\n`);
  });
}

export function createExec(netns?: string, keepSpare: (cmd: string, args: readonly string[]) => boolean = () => false): SpareExec {
  const spares = new Map<string, SpareProcess>();
  const calls = new Map<string, number>();
  let closed = false;
  // The sentinel is used until a run shows this binary does not report it (then never again).
  let sentinel: 'unknown' | 'seen' | 'off' = 'unknown';
  const run = async (argv: readonly string[], stdin: string, l: Launched = launch(argv), wholeFirst = false): Promise<LaunchResult> => {
    writeInput(l, stdin, wholeFirst);
    return l.result;
  };
  const runSpare = async (argv: readonly string[], stdin: string, l?: Launched): Promise<LaunchResult> => {
    if (sentinel === 'off') return run(argv, stdin, l);
    const r = await acked(l ?? launch(argv), stdin);
    if (r.code === 0) sentinel = 'seen';
    else if (sentinel === 'unknown' && r.signal === undefined && failedLine(r.stderr) === undefined) {
      // A failure that names no line: perhaps this build reports the sentinel differently. Once
      // without it; if that succeeds, this binary goes without the sentinel from now on.
      const plain = await run(argv, stdin);
      if (plain.code === 0) sentinel = 'off';
      return plain;
    }
    return r;
  };
  const spareOf = (argv: readonly string[]): SpareProcess => {
    const key = argv.join('\0');
    let spare = spares.get(key);
    if (spare === undefined) spares.set(key, (spare = new SpareProcess(argv)));
    return spare;
  };
  const exec = async (cmd: string, args: readonly string[], stdin?: string): Promise<ExecResult> => {
    const argv = inNetns(netns, [cmd, ...args]);
    const key = argv.join('\0');
    const keep = keepSpare(cmd, args);
    const wholeFirst = readsWholeInputFirst(cmd, args);
    // A spare started `once` (startSpare) serves this run even where keepSpare does not take the command.
    if (closed || (!keep && spares.get(key)?.ready() !== true)) return run(argv, stdin ?? '', undefined, wholeFirst);
    const use = nftRestoreBinary(cmd) ? runSpare : (a: readonly string[], input: string, l?: Launched) => run(a, input, l, wholeFirst);
    const spare = spareOf(argv);
    // Only for a command run more than once: a family whose rules never change after the first
    // (full) sync, e.g. IPv6 in an IPv4-only cluster, keeps no spare. A killed run is run once
    // more (a restore is one transaction per table: applied fully or not at all).
    const n = (calls.get(key) ?? 0) + 1;
    calls.set(key, n);
    const r = await spare.run((l) => use(argv, stdin ?? '', l), keep && n >= 2);
    return { code: r.code, stdout: r.stdout, stderr: r.stderr };
  };
  return Object.assign(exec, {
    close() {
      closed = true;
      // EOF on its input: iptables-restore exits 0 without touching anything.
      for (const s of spares.values()) s.close();
      spares.clear();
    },
    spares: () => [...spares.values()].filter((s) => s.ready()).length,
    startSpare(cmd: string, args: readonly string[], once = false) {
      if (!closed && (once || keepSpare(cmd, args))) spareOf(inNetns(netns, [cmd, ...args])).start();
    },
  });
}

/** iptables' nft back end's restore binaries (spares with a sentinel, see the module comment). */
export function nftRestoreBinary(cmd: string): boolean {
  return /^ip6?tables-nft-restore$/.test(cmd);
}

/** `nft -f -`: reads and parses its whole input before it fetches anything from the kernel (spare-process.ts writeInput). */
export function readsWholeInputFirst(cmd: string, args: readonly string[]): boolean {
  return cmd === 'nft' && args.length === 2 && args[0] === '-f' && args[1] === '-';
}

/** The commands worth a spare process: those restore binaries, and `nft -f -` (see the module comment). */
export function spareWorthy(cmd: string, args: readonly string[]): boolean {
  return nftRestoreBinary(cmd) || readsWholeInputFirst(cmd, args);
}

/** Finds the line number iptables-restore reports ("Error occurred at line: N", "line N failed"). */
export function failedLine(stderr: string): number | undefined {
  const m = /line:? (\d+)/i.exec(stderr);
  return m?.[1] === undefined ? undefined : Number(m[1]);
}
