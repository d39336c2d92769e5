/**
 * One kept-open `nft -i` in a namespace, for the nftables probes: each line written is one
 * transaction; a command is done when the sentinel line after it reports its syntax error.
 */
import { spawn, type ChildProcess } from 'node:child_process';

export class NftInteractive {
  private readonly child: ChildProcess;
  private stderr = '';
  private seq = 0;
  private waiter: (() => void) | undefined;
  /** `enter`: how the process gets into the namespace (argv prefix), e.g. nsenter. */
  constructor(enter: readonly string[]) {
    const [cmd, ...args] = [...enter, 'nft', '-i'];
    this.child = spawn(cmd ?? 'nft', args, { stdio: ['pipe', 'ignore', 'pipe'] });
    this.child.stderr?.on('data', (d: Buffer) => {
      this.stderr += d.toString();
      if (this.waiter !== undefined && this.stderr.includes(`@@sentinel${this.seq}\n`)) {
        const w = this.waiter;
        this.waiter = undefined;
        w();
      }
    });
  }
  /** Sends the commands as one line (one transaction); resolves with the wall time in ms. */
  async send(commands: readonly string[]): Promise<number> {
    this.seq += 1;
    this.stderr = '';
    const t0 = process.hrtime.bigint();
    const done = new Promise<void>((resolve) => (this.waiter = resolve));
    this.child.stdin?.write(`${commands.join('; ')}\n@@sentinel${this.seq}\n`);
    await done;
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (this.stderr.split('\n').some((l) => l.startsWith('Error') && !l.includes('unexpected @'))) throw new Error(`nft -i: ${this.stderr}`);
    return ms;
  }
  close(): void {
    this.child.stdin?.end();
  }
}
