/**
 * `nft -a monitor` in one network namespace (the host's, or a pod's through `nsenter -t <pid> -n`),
 * feeding the table model of nft-model.ts for one table (kube-proxy's `ip nat`, the sidecar's
 * `inet multus_proxy` or, with its iptables back end, `ip nat`). Each committed transaction ends with a `# new
 * generation` line; its receipt time (performance.now()) is when the rules of that transaction
 * are in place. Every change of the set of DNAT targets in place is remembered with that time, so a
 * caller learns when an endpoint's rule appeared or went, even when it happened before the caller
 * asked (then the latency is negative: the proxy was faster than the caller's own watch).
 */
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { NftTable, parseMonitorLine } from './nft-model.js';
import { run, sleep } from './proc.js';

export interface NatMonitor {
  /**
   * Resolves with the time (performance.now()) at which `target` ("address:port") last became in
   * place (`present` true) or not in place (false), waiting for it if it is not so yet, and the
   * process that committed that transaction as nft names it (`nft`, `nfnl-batch`, `iptables-restor`).
   */
  when(target: string, present: boolean, timeoutMs: number): Promise<TargetChange>;
  /** Whether `target` is in place in the model now. */
  has(target: string): boolean;
  /** Committed transactions seen so far. */
  generations(): number;
  stop(): void;
}

export interface TargetChange {
  readonly t: number;
  readonly by: string | undefined;
}

/** `prefix`: e.g. ['nsenter', '-t', '<pid>', '-n'] for a pod's namespace, [] for the host; `table`: "<family> <name>". */
export async function startNatMonitor(prefix: readonly string[], what: string, table: string): Promise<NatMonitor> {
  const argv = [...prefix, 'nft', '-a', 'monitor'];
  const child = spawn(argv[0] ?? 'nft', argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (b: Buffer) => (stderr = (stderr + b.toString()).slice(-4000)));
  let exited: string | undefined;
  child.on('exit', (code, sig) => (exited = `nft monitor (${what}) exited (${code ?? sig}): ${stderr.trim()}`));
  child.on('error', (e) => (exited = `cannot run ${argv.join(' ')}: ${e.message}; nftables must be installed`));

  const model = new NftTable();
  let current = new Set<string>();
  /** target -> [when it last became present, when it last went away]. */
  const never: TargetChange = { t: -Infinity, by: undefined };
  const changed = new Map<string, [TargetChange, TargetChange]>();
  let gens = 0;
  const waiters = new Set<() => void>();
  const evaluate = (t: number, by: string | undefined): void => {
    const next = model.inPlaceTargets();
    for (const x of next) if (!current.has(x)) changed.set(x, [{ t, by }, changed.get(x)?.[1] ?? never]);
    for (const x of current) if (!next.has(x)) changed.set(x, [changed.get(x)?.[0] ?? never, { t, by }]);
    current = next;
    for (const w of [...waiters]) w();
  };
  let partial = '';
  child.stdout.on('data', (b: Buffer) => {
    const t = performance.now();
    const lines = (partial + b.toString()).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) {
      const l = parseMonitorLine(line, table);
      if (l.kind === 'generation') {
        gens += 1;
        evaluate(t, l.by);
      } else model.apply(l);
    }
  });

  // The monitor must be subscribed before the listing is taken. Replaying events the listing
  // already holds is harmless (adds by handle, deletes of absent handles), so overlap is fine.
  await sleep(500);
  if (exited !== undefined) throw new Error(exited);
  const [cmd = 'nft', ...args] = [...prefix, 'nft', '-a', 'list', 'table', ...table.split(' ')];
  const listing = await run(cmd, args);
  model.load(listing.stdout);
  evaluate(performance.now(), undefined);
  if (model.size() === 0) throw new Error(`nft -a list table ${table} (${what}) listed no rule: is this the right namespace?`);

  return {
    when(target, present, timeoutMs) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          if (current.has(target) === present) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve(changed.get(target)?.[present ? 0 : 1] ?? never);
          } else if (exited !== undefined) {
            waiters.delete(check);
            clearTimeout(timer);
            reject(new Error(exited));
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`${what}: the DNAT to ${target} was not ${present ? 'added' : 'removed'} within ${timeoutMs} ms (${gens} transactions seen)`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    has: (target) => current.has(target),
    generations: () => gens,
    stop: () => {
      child.kill('SIGTERM');
    },
  };
}
