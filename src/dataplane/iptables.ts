/**
 * iptables IO: running commands, back-end detection, applying restore text, reading back what is
 * ours. All decisions (what text to apply) are in rules.ts and restore.ts; this module only runs binaries.
 *
 * Commands run in the current network namespace (the sidecar lives inside the pod). The one test
 * hook is `netns`: when set, each command is prefixed with `ip netns exec <netns>`.
 *
 * Spare processes: for the commands `keepSpare` names (the nft back end's restore binaries), the
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
import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import type { IpFamily } from './model.js';
import { SIDECAR_LAYOUT, TABLES, type Layout, type TableName } from './names.js';
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
}

/** A started process (also element-writer.ts's spare): its result, and its stderr as it comes. */
export interface Launched {
  readonly child: ChildProcess;
  readonly result: Promise<ExecResult & { readonly signal?: string }>;
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
  const result = new Promise<ExecResult & { signal?: string }>((resolve) => {
    // A missing binary is reported like a failed command (code 127), never as a crash.
    child.on('error', (e) => resolve({ code: 127, stdout: '', stderr: `${cmd}: ${e.message}` }));
    child.on('close', (code, signal) =>
      resolve({ code: code ?? 1, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(errs).toString() + (signal ? `killed by ${signal}` : ''), ...(signal ? { signal } : {}) }),
    );
  });
  return { child, result, onStderr: (f) => (watch = f) };
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

/** A waiting spare must not keep this process alive; one in use must. */
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

/** The argv that runs `argv` where the dataplane runs: here, or (test hook) in the named netns. */
export function inNetns(netns: string | undefined, argv: readonly string[]): string[] {
  return netns === undefined ? [...argv] : ['ip', 'netns', 'exec', netns, ...argv];
}

export function createExec(netns?: string, keepSpare: (cmd: string, args: readonly string[]) => boolean = () => false): SpareExec {
  const spares = new Map<string, Launched>();
  const calls = new Map<string, number>();
  let closed = false;
  // The sentinel is used until a run shows this binary does not report it (then never again).
  let sentinel: 'unknown' | 'seen' | 'off' = 'unknown';
  const run = async (argv: readonly string[], stdin: string, l: Launched = launch(argv)): Promise<ExecResult & { signal?: string }> => {
    l.child.stdin?.end(stdin);
    return l.result;
  };
  const runSpare = async (argv: readonly string[], stdin: string, l?: Launched): Promise<ExecResult & { signal?: string }> => {
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
  const startSpare = (key: string, argv: readonly string[]): void => {
    if (closed || spares.has(key)) return;
    const next = launch(argv);
    setRef(next, false);
    spares.set(key, next);
  };
  const exec = async (cmd: string, args: readonly string[], stdin?: string): Promise<ExecResult> => {
    const argv = inNetns(netns, [cmd, ...args]);
    if (closed || !keepSpare(cmd, args)) return run(argv, stdin ?? '');
    const key = argv.join('\0');
    const use = nftRestoreBinary(cmd) ? runSpare : run;
    const spare = spares.get(key);
    spares.delete(key);
    let r: ExecResult & { signal?: string };
    if (spare !== undefined && alive(spare)) {
      setRef(spare, true);
      r = await use(argv, stdin ?? '', spare);
      // Killed from outside before or while it read the input: run it once more from scratch (a
      // restore is one transaction per table, so a killed one applied its table fully or not at all).
      if (r.signal !== undefined) r = await use(argv, stdin ?? '');
    } else {
      spare?.child.kill();
      r = await use(argv, stdin ?? '');
    }
    // Only for a command run more than once: a family whose rules never change after the first
    // (full) sync, e.g. IPv6 in an IPv4-only cluster, keeps no spare.
    const n = (calls.get(key) ?? 0) + 1;
    calls.set(key, n);
    // The next spare starts after this call's caller has run: spawn() is synchronous, ~4 ms p50
    // (72 ms max) from a process of ~80 MiB here, and it is no part of this change's latency.
    if (!closed && n >= 2) setImmediate(() => startSpare(key, argv));
    return { code: r.code, stdout: r.stdout, stderr: r.stderr };
  };
  return Object.assign(exec, {
    close() {
      closed = true;
      // EOF on its input: iptables-restore exits 0 without touching anything.
      for (const l of spares.values()) l.child.stdin?.end();
      spares.clear();
    },
    spares: () => [...spares.values()].filter(alive).length,
  });
}

/** iptables' nft back end's restore binaries (spares with a sentinel, see the module comment). */
export function nftRestoreBinary(cmd: string): boolean {
  return /^ip6?tables-nft-restore$/.test(cmd);
}

/** The commands worth a spare process: those restore binaries, and `nft -f -` (see the module comment). */
export function spareWorthy(cmd: string, args: readonly string[]): boolean {
  return nftRestoreBinary(cmd) || (cmd === 'nft' && args.length === 2 && args[0] === '-f' && args[1] === '-');
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
