/**
 * iptables IO: running commands, back-end detection, applying restore text, reading back what is
 * ours. All decisions (what text to apply) are in rules.ts and restore.ts; this module only runs binaries.
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
import { launch, SpareProcess, writeInput, type LaunchResult, type Launched } from '../tuning/spare-process.js';
import type { IpFamily } from '../core/model.js';
import { SIDECAR_LAYOUT, TABLES, type Layout, type TableName } from '../core/names.js';
import { parseExisting, type Existing } from './restore.js';

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

/** The argv that runs `argv` where the dataplane runs: here, or (test hook) in the named netns. */
export function inNetns(netns: string | undefined, argv: readonly string[]): string[] {
  return netns === undefined ? [...argv] : ['ip', 'netns', 'exec', netns, ...argv];
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

export type Backend = 'nft' | 'legacy';

function binary(backend: Backend, family: IpFamily, tool: 'restore' | 'save'): string {
  return `${family === 4 ? 'iptables' : 'ip6tables'}-${backend}-${tool}`;
}

/** Whether iptables-save text holds any rule (a line `-A ...`). */
export function hasRules(saveText: string): boolean {
  return /^-A /m.test(saveText);
}

/**
 * The back end the namespace already uses: legacy only when it already holds legacy rules (some
 * other component of the pod chose legacy, and mixing the two makes both unreadable), else nft.
 * A missing legacy binary means nft.
 */
export async function detectBackend(exec: Exec): Promise<Backend> {
  const saves = await Promise.all(([4, 6] as const).map((family) => exec(binary('legacy', family, 'save'), [])));
  return saves.some((r) => r.code === 0 && hasRules(r.stdout)) ? 'legacy' : 'nft';
}

export async function save(exec: Exec, backend: Backend, family: IpFamily): Promise<string> {
  const r = await exec(binary(backend, family, 'save'), []);
  if (r.code !== 0) throw new Error(`${binary(backend, family, 'save')} failed (exit ${r.code}): ${r.stderr.trim()}`);
  return r.stdout;
}

export async function readExisting(exec: Exec, backend: Backend, family: IpFamily, layout: Layout = SIDECAR_LAYOUT): Promise<Existing> {
  return parseExisting(await save(exec, backend, family), layout);
}

/** `-S <chain>` of each built-in chain that holds our jumps (`OUTPUT` for the sidecar), per table. */
export async function readOutputChains(exec: Exec, backend: Backend, family: IpFamily, layout: Layout = SIDECAR_LAYOUT): Promise<Record<TableName, string>> {
  const bin = `${family === 4 ? 'iptables' : 'ip6tables'}-${backend}`;
  const out: Record<TableName, string> = { filter: '', nat: '' };
  await Promise.all(
    TABLES.map(async (table) => {
      const chains = [...new Set(layout.hooks[table].map((h) => h.chain))];
      const texts = await Promise.all(
        chains.map(async (chain) => {
          const r = await exec(bin, ['--wait', '5', '-t', table, '-S', chain]);
          if (r.code !== 0) throw new Error(`${bin} -t ${table} -S ${chain} failed (exit ${r.code}): ${summarize(r.stderr)}`);
          return r.stdout;
        }),
      );
      out[table] = texts.join('');
    }),
  );
  return out;
}

/** A restore that failed, with the offending input line(s) mapped back from the reported line number. */
export class RestoreError extends Error {
  constructor(
    readonly family: IpFamily,
    readonly backend: Backend,
    readonly stderr: string,
    /** 1-based line in the restore input, when the tool named one. */
    readonly line: number | undefined,
    /** That line and its neighbours, `N: text`. */
    readonly context: readonly string[],
  ) {
    super(
      `${binary(backend, family, 'restore')} failed: ${summarize(stderr)}` +
        (line !== undefined ? ` at input line ${line}: ${context.join(' | ')}` : ''),
    );
    this.name = 'RestoreError';
  }
}

/** The tool's message without its banner prefix and usage hint, on one line. */
export function summarize(stderr: string): string {
  return stderr
    .split('\n')
    .map((l) => l.replace(/^ip6?tables-\S+ v[\d.]+ \([^)]*\):\s*/, '').trim())
    .filter((l) => l !== '' && !l.startsWith('Try `'))
    .join('; ');
}

/** Finds the line number iptables-restore reports ("Error occurred at line: N", "line N failed"). */
export function failedLine(stderr: string): number | undefined {
  const m = /line:? (\d+)/i.exec(stderr);
  return m?.[1] === undefined ? undefined : Number(m[1]);
}

/** The failing line with one line either side, numbered, for the log. */
export function lineContext(text: string, line: number | undefined): string[] {
  if (line === undefined) return [];
  const lines = text.split('\n');
  const out: string[] = [];
  for (let n = Math.max(1, line - 1); n <= Math.min(lines.length, line + 1); n += 1) out.push(`${n}${n === line ? '>' : ':'} ${lines[n - 1] ?? ''}`);
  return out;
}

/**
 * One `iptables-restore --noflush` run. Each table section is committed as one transaction by
 * the kernel (nf_tables batch / legacy table replace), so a failure leaves each table either
 * fully old or fully new; rules.ts explains why every old/new mix of the two tables safe.
 */
export async function restore(exec: Exec, backend: Backend, family: IpFamily, text: string): Promise<void> {
  if (text === '') return;
  const r = await exec(binary(backend, family, 'restore'), ['--noflush', '--wait', '5'], text);
  if (r.code !== 0) {
    const line = failedLine(r.stderr);
    throw new RestoreError(family, backend, r.stderr, line, lineContext(text, line));
  }
}
