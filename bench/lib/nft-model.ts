/**
 * A live model of one nftables table (`ip nat`) built from `nft -a list table` and the lines of
 * `nft -a monitor`, for timing when a rule really is in place without polling. Pure: lines in,
 * state out; bench/lib/nft-monitor.ts runs the processes.
 *
 * Why a model and not a grep of the stream: a deletion prints only `delete rule ip nat <chain>
 * handle <n>`, without the rule, so what went away is known only from what was added under that
 * handle. And iptables-restore rewrites a chain as deletes followed by adds inside one transaction,
 * so a rule "vanishes" in the middle of every rewrite: the state is judged only at transaction
 * ends (the `# new generation` line nft prints after each committed batch).
 *
 * iptables-nft (1.8.9) writes DNAT as native nf_tables, so rules print as `... dnat to A:P`, and
 * jumps as `jump <chain>`; comments (xt match) print as nothing.
 */

export interface Rule {
  readonly chain: string;
  readonly text: string;
}

/** What one monitor line means for the model. */
export type MonitorLine =
  | { readonly kind: 'add-rule'; readonly chain: string; readonly handle: number; readonly text: string }
  | { readonly kind: 'delete-rule'; readonly chain: string; readonly handle: number }
  | { readonly kind: 'delete-chain'; readonly chain: string }
  | { readonly kind: 'flush-chain'; readonly chain: string }
  | { readonly kind: 'generation'; readonly generation: number }
  | { readonly kind: 'other' };

const TABLE_NAME = /^[a-z0-9]+ [\w-]+$/;

/**
 * Parses one line of `nft -a monitor` for table `table` (e.g. "ip nat"); lines of other tables and
 * kinds the model ignores (sets, tables, chain creation) are 'other'.
 */
export function parseMonitorLine(line: string, table: string): MonitorLine {
  if (!TABLE_NAME.test(table)) throw new Error(`nft table must be "<family> <name>", got ${JSON.stringify(table)}`);
  const gen = /^# new generation (\d+)\b/.exec(line);
  if (gen) return { kind: 'generation', generation: Number(gen[1]) };
  const prefix = (verb: string): string => `${verb} ${table} `;
  if (line.startsWith(prefix('add rule'))) {
    const rest = line.slice(prefix('add rule').length);
    const m = /^(\S+) (.*?)\s*# handle (\d+)\s*$/.exec(rest);
    if (m) return { kind: 'add-rule', chain: m[1] ?? '', text: (m[2] ?? '').trim(), handle: Number(m[3]) };
    return { kind: 'other' };
  }
  if (line.startsWith(prefix('delete rule'))) {
    const m = /^(\S+) handle (\d+)\s*$/.exec(line.slice(prefix('delete rule').length));
    if (m) return { kind: 'delete-rule', chain: m[1] ?? '', handle: Number(m[2]) };
    return { kind: 'other' };
  }
  const chainOp = /^(delete|flush) chain (\S+ \S+) (\S+)/.exec(line);
  if (chainOp && chainOp[2] === table) return { kind: chainOp[1] === 'delete' ? 'delete-chain' : 'flush-chain', chain: chainOp[3] ?? '' };
  return { kind: 'other' };
}

/**
 * Rules of one table by handle (handles are unique per table), from a listing, then kept current
 * by monitor lines.
 */
export class NftTable {
  private readonly rules = new Map<number, Rule>();

  /** Replaces the contents with `nft -a list table <table>` output. */
  load(listing: string): void {
    this.rules.clear();
    let chain: string | undefined;
    for (const raw of listing.split('\n')) {
      const line = raw.trim();
      const c = /^chain (\S+) \{/.exec(line);
      if (c) {
        chain = c[1];
        continue;
      }
      if (line === '}') {
        chain = undefined;
        continue;
      }
      const r = /^(.*?)\s*# handle (\d+)$/.exec(line);
      if (chain !== undefined && r && !line.startsWith('type ')) this.rules.set(Number(r[2]), { chain, text: (r[1] ?? '').trim() });
    }
  }

  apply(l: MonitorLine): void {
    switch (l.kind) {
      case 'add-rule':
        this.rules.set(l.handle, { chain: l.chain, text: l.text });
        break;
      case 'delete-rule':
        this.rules.delete(l.handle);
        break;
      case 'delete-chain':
      case 'flush-chain':
        for (const [h, r] of this.rules) if (r.chain === l.chain) this.rules.delete(h);
        break;
      default:
        break;
    }
  }

  size(): number {
    return this.rules.size;
  }

  /**
   * The `address:port` targets traffic can be DNATed to: those of `dnat to` rules in chains another
   * chain jumps (or goes) to. That is kube-proxy's KUBE-SVC → KUBE-SEP (an endpoint chain may
   * outlive the jump to it) and the sidecar's MPX-SERVICES → MPX-SVC.
   */
  inPlaceTargets(): Set<string> {
    const jumpedTo = new Set<string>();
    for (const r of this.rules.values()) {
      for (const m of r.text.matchAll(/\b(?:jump|goto) (\S+)/g)) if (m[1] !== undefined && m[1] !== r.chain) jumpedTo.add(m[1]);
    }
    const out = new Set<string>();
    for (const r of this.rules.values()) {
      if (!jumpedTo.has(r.chain)) continue;
      for (const m of r.text.matchAll(/\bdnat to (\S+)/g)) if (m[1] !== undefined) out.add(m[1]);
    }
    return out;
  }

  dnatInPlace(address: string, port: number): boolean {
    return this.inPlaceTargets().has(`${address}:${port}`);
  }
}

/** `iptables-save -t nat` text: whether a DNAT to address:port is there (the once-per-run cross-check). */
export function saveHasDnat(saveText: string, address: string, port: number): boolean {
  return saveText.split('\n').some((l) => l.startsWith('-A ') && new RegExp(`--to-destination ${address.replace(/\./g, '\\.')}:${port}(\\s|$)`).test(l));
}
