/**
 * The source guard in the sidecar: after each change of the pod's network-status, the guard table
 * (src/dataplane/nftables/source-guard.ts) is written whole, before the sync's rules, so the app,
 * which starts after the first sync, never sends on a secondary interface as another pod. A write
 * that fails is logged (once per text) and retried on the next sync; it does not hold the Services
 * and policy rules, which are the pod's own service (a kernel without the netdev egress hook,
 * before 5.16, cannot hold the guard).
 *
 * On the sync loop's drift-check cadence (runtime.ts) the table is listed and compared with what
 * was written (guardDrift); a table deleted or altered from inside the pod (anything there with
 * NET_ADMIN can) is written again at once, counted and logged.
 *
 * `off` (the cluster admin's SOURCE_GUARD, set by the webhook, decision 0300): no guard is kept; a
 * table of ours found at start is removed, so the setting is what the pod has.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Logger } from '../../src/log.js';
import type { NetworkStatusEntry } from '../../src/annotations/network-status.js';
import { GUARD_TABLE, guardDrift, guardInterfaces, sourceGuardText, type GuardInterface } from '../../src/dataplane/index.js';
import type { SourceGuardMode } from '../../src/sidecar-contract.js';

/** The nft calls the guard makes where the pod's rules live. */
export interface GuardTool {
  /** Writes one `nft -f` text; resolves to the tool's error text, or undefined when it took it. */
  write(text: string): Promise<string | undefined>;
  /** The guard table's listing, or undefined when it does not exist; throws when it cannot tell. */
  list(): Promise<string | undefined>;
}

function nft(args: readonly string[], input?: string): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const p = spawn('nft', args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d: Buffer) => void (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => {
      if (err.length < 4096) err += d.toString();
    });
    p.on('error', (e) => resolve({ code: -1, out, err: e.message }));
    p.on('close', (code) => resolve({ code, out, err: err.trim() }));
    p.stdin.on('error', () => undefined);
    p.stdin.end(input ?? '');
  });
}

/** `nft` in this process's network namespace (the pod's). */
export const nftGuardTool: GuardTool = {
  write: async (text) => {
    const r = await nft(['-f', '-'], text);
    return r.code === 0 ? undefined : r.err || `nft exited with ${String(r.code)}`;
  },
  list: async () => {
    const r = await nft(['list', 'table', 'netdev', GUARD_TABLE]);
    if (r.code === 0) return r.out;
    // nft says "No such file or directory" for a table that does not exist.
    if (/No such file or directory/.test(r.err)) return undefined;
    throw new Error(`nft list table netdev ${GUARD_TABLE} failed: ${r.err || `exit ${String(r.code)}`}`);
  },
};

/** The MAC of an interface of this network namespace (the container's /sys is its pod's), or undefined when there is none. */
export function sysfsMac(iface: string): string | undefined {
  try {
    return readFileSync(`/sys/class/net/${iface}/address`, 'utf8').trim();
  } catch {
    return undefined;
  }
}

export interface SourceGuardDeps {
  readonly tool: GuardTool;
  readonly log: Logger;
  /** enforce (the default) or off, as the cluster admin set it. */
  readonly mode?: SourceGuardMode;
  /** The guard was found deleted or altered, and written again (`ok`) or not. */
  readonly restored?: (ok: boolean) => void;
  /**
   * The interface's own MAC here, or undefined when it does not exist: network-status may name
   * one that is gone, and one missing device would fail the whole write.
   */
  readonly macOf?: (iface: string) => string | undefined;
}

export class SourceGuard {
  private written: { text: string; list: readonly GuardInterface[] } | undefined;
  /** The text whose write failed last, and the tool's error (told once). */
  private failed: { text: string; error: string } | undefined;
  private readonly macOf: (iface: string) => string | undefined;

  constructor(private readonly d: SourceGuardDeps) {
    this.macOf = d.macOf ?? sysfsMac;
    if (d.mode === 'off') d.log.info("source guard off for this pod (set by the cluster admin): only the receivers' MAC binding stops a pod here that claims another pod's address");
  }

  private want(status: readonly NetworkStatusEntry[]): { text: string; list: readonly GuardInterface[] } {
    if (this.d.mode === 'off') return { text: sourceGuardText([]), list: [] };
    const macs = new Map<string, string | undefined>();
    const macOf = (iface: string): string | undefined => (macs.has(iface) ? macs.get(iface) : macs.set(iface, this.macOf(iface)).get(iface));
    const list = guardInterfaces(status, macOf).filter((g) => macOf(g.interface) !== undefined);
    return { text: sourceGuardText(list), list };
  }

  /** Whether the guard was written (or tried and failed) for what `status` asks: a sync with nothing else to do can be skipped. */
  current(status: readonly NetworkStatusEntry[]): boolean {
    const { text } = this.want(status);
    return text === this.written?.text || text === this.failed?.text;
  }

  async apply(status: readonly NetworkStatusEntry[]): Promise<void> {
    const want = this.want(status);
    if (want.text === this.written?.text) return;
    if (await this.write(want)) this.d.log.info({ interfaces: want.list.map((g) => g.interface) }, "source guard written: secondary interfaces send only from the pod's own addresses and MAC");
  }

  private async write(want: { text: string; list: readonly GuardInterface[] }): Promise<boolean> {
    const error = await this.d.tool.write(want.text);
    if (error === undefined) {
      this.written = want;
      this.failed = undefined;
      return true;
    }
    const told = this.failed?.error === error;
    this.failed = { text: want.text, error };
    if (!told) this.d.log.error({ problem: error }, 'source guard not written: the pod can send on its secondary interfaces from addresses that are not its own (retried on the next sync)');
    return false;
  }

  /**
   * The drift check: the table as listed against what was written last; on drift it is written
   * again at once (a listing that fails is retried at the next check). Resolves to what was found,
   * or undefined when the guard was as written.
   */
  async repair(): Promise<string | undefined> {
    const w = this.written;
    if (w === undefined || w.list.length === 0) return undefined;
    let listing: string | undefined;
    try {
      listing = await this.d.tool.list();
    } catch (e) {
      this.d.log.warn({ err: e instanceof Error ? e.message : String(e) }, 'source guard drift check failed; checked again at the next drift check');
      return undefined;
    }
    const drift = guardDrift(w.list, listing);
    if (drift === undefined) return undefined;
    this.written = undefined;
    const ok = await this.write(w);
    this.d.restored?.(ok);
    this.d.log.warn(
      { drift, restored: ok, interfaces: w.list.map((g) => g.interface) },
      ok ? 'source guard was changed from inside the pod; written again' : 'source guard was changed from inside the pod and could not be written again',
    );
    return drift;
  }
}
