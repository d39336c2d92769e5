/**
 * The source guard in the sidecar: after each change of the pod's network-status, the guard table
 * (src/dataplane/nftables/source-guard.ts) is written whole, before the sync's rules, so the app,
 * which starts after the first sync, never sends on a secondary interface as another pod. A write
 * that fails is logged (once per text) and retried on the next sync; it does not hold the Services
 * and policy rules, which are the pod's own service (a kernel without the netdev egress hook,
 * before 5.16, cannot hold the guard).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Logger } from '../../src/log.js';
import type { NetworkStatusEntry } from '../../src/annotations/network-status.js';
import { guardInterfaces, sourceGuardText } from '../../src/dataplane/index.js';

/** Writes one `nft -f` text where the pod's rules live; resolves to the tool's error text, or undefined when it took it. */
export type GuardWriter = (text: string) => Promise<string | undefined>;

/** `nft -f -` in this process's network namespace (the pod's). */
export const nftGuardWriter: GuardWriter = (text) =>
  new Promise((resolve) => {
    const p = spawn('nft', ['-f', '-'], { stdio: ['pipe', 'ignore', 'pipe'] });
    let err = '';
    p.stderr.on('data', (d: Buffer) => {
      if (err.length < 4096) err += d.toString();
    });
    p.on('error', (e) => resolve(e.message));
    p.on('close', (code) => resolve(code === 0 ? undefined : err.trim() || `nft exited with ${code}`));
    p.stdin.on('error', () => undefined);
    p.stdin.end(text);
  });

/** The MAC of an interface of this network namespace (the container's /sys is its pod's), or undefined when there is none. */
export function sysfsMac(iface: string): string | undefined {
  try {
    return readFileSync(`/sys/class/net/${iface}/address`, 'utf8').trim();
  } catch {
    return undefined;
  }
}

export class SourceGuard {
  private written: string | undefined;
  /** The text whose write failed last, and the tool's error (told once). */
  private failed: { text: string; error: string } | undefined;

  constructor(
    private readonly write: GuardWriter,
    private readonly log: Logger,
    /**
     * The interface's own MAC here, or undefined when it does not exist: network-status may name
     * one that is gone, and one missing device would fail the whole write.
     */
    private readonly macOf: (iface: string) => string | undefined = sysfsMac,
  ) {}

  private text(status: readonly NetworkStatusEntry[]): string {
    const macs = new Map<string, string | undefined>();
    const macOf = (iface: string): string | undefined => (macs.has(iface) ? macs.get(iface) : macs.set(iface, this.macOf(iface)).get(iface));
    return sourceGuardText(guardInterfaces(status, macOf).filter((g) => macOf(g.interface) !== undefined));
  }

  /** Whether the guard was written (or tried and failed) for what `status` asks: a sync with nothing else to do can be skipped. */
  current(status: readonly NetworkStatusEntry[]): boolean {
    const text = this.text(status);
    return text === this.written || text === this.failed?.text;
  }

  async apply(status: readonly NetworkStatusEntry[]): Promise<void> {
    const text = this.text(status);
    if (text === this.written) return;
    const error = await this.write(text);
    if (error === undefined) {
      this.written = text;
      this.failed = undefined;
      this.log.info({ interfaces: guardInterfaces(status).map((g) => g.interface) }, "source guard written: secondary interfaces send only from the pod's own addresses and MAC");
    } else {
      const told = this.failed?.error === error;
      this.failed = { text, error };
      if (!told) this.log.error({ problem: error }, 'source guard not written: the pod can send on its secondary interfaces from addresses that are not its own (retried on the next sync)');
    }
  }
}
