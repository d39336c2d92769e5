/**
 * A live model of one nftables table built from `nft -a list table` and the lines of `nft -a
 * monitor`, for timing when a rule really is in place without polling. Pure: lines in, state out;
 * bench/lib/nft-monitor.ts runs the processes. Two layouts are judged:
 *  - kube-proxy's `ip nat` (iptables-nft 1.8.9 writes DNAT as native nf_tables: rules print as
 *    `... dnat to A:P`, jumps as `jump <chain>`; comments, an xt match, print as nothing);
 *  - the sidecar's own `inet multus_proxy` (src/dataplane/nft/render.ts): the Service's element
 *    `<ip> . tcp . <port> : goto MPX-SVC-…` in the verdict map `services-v4`, whose chain either
 *    DNATs through its endpoint map (`dnat ip to numgen random mod M map @MPX-EPS-…`, elements
 *    `<from>-<to> : <address> . <port>`) or, with affinity, goes to endpoint chains holding
 *    `dnat ip to A:P`.
 *
 * Why a model and not a grep of the stream: a deletion prints only `delete rule <table> <chain>
 * handle <n>`, without the rule, so what went away is known only from what was added under that
 * handle. And a rewrite is deletes followed by adds inside one transaction (iptables-restore's
 * chain rewrite; `flush map` + the new elements of an endpoint-map refill, by nft -f or by
 * nfnl-batch, which the monitor prints as one `delete element` / `add element` line per element),
 * so an endpoint "vanishes" in the middle of every rewrite: the state is judged only at
 * transaction ends (the `# new generation` line nft prints after each committed batch).
 */

import { NFT_FAMILY, NFT_TABLE } from '../../src/dataplane/nftables/render.js';

export interface Rule {
  readonly chain: string;
  readonly text: string;
}

/** One element of a map or set: its key, and a map's value (`goto X`, `A . P`). */
export interface Element {
  readonly key: string;
  readonly value?: string;
}

/** What one monitor line means for the model. */
export type MonitorLine =
  | { readonly kind: 'add-rule'; readonly chain: string; readonly handle: number; readonly text: string }
  | { readonly kind: 'delete-rule'; readonly chain: string; readonly handle: number }
  | { readonly kind: 'delete-chain'; readonly chain: string }
  | { readonly kind: 'flush-chain'; readonly chain: string }
  | { readonly kind: 'add-set'; readonly set: string }
  | { readonly kind: 'delete-set'; readonly set: string }
  | { readonly kind: 'flush-set'; readonly set: string }
  | { readonly kind: 'add-elements'; readonly set: string; readonly elements: readonly Element[] }
  | { readonly kind: 'delete-elements'; readonly set: string; readonly elements: readonly Element[] }
  | { readonly kind: 'delete-table' }
  | { readonly kind: 'generation'; readonly generation: number; readonly by: string | undefined }
  | { readonly kind: 'other' };

const TABLE_NAME = /^[a-z0-9]+ [\w-]+$/;

/** `{ a : x, b : y }` (the braces' inside) into elements; keys and values never hold ", " in the layouts judged. */
export function parseElements(inside: string): Element[] {
  const out: Element[] = [];
  for (const raw of inside.split(/,\s*/)) {
    const e = raw.trim();
    if (e === '') continue;
    const i = e.indexOf(' : ');
    out.push(i < 0 ? { key: e } : { key: e.slice(0, i).trim(), value: e.slice(i + 3).trim() });
  }
  return out;
}

/**
 * Parses one line of `nft -a monitor` for table `table` (e.g. "ip nat", "inet multus_proxy");
 * lines of other tables and kinds the model ignores (chain creation, table creation) are 'other'.
 */
export function parseMonitorLine(line: string, table: string): MonitorLine {
  if (!TABLE_NAME.test(table)) throw new Error(`nft table must be "<family> <name>", got ${JSON.stringify(table)}`);
  const gen = /^# new generation (\d+)\b(?:.*\((\S+)\)\s*$)?/.exec(line);
  if (gen) return { kind: 'generation', generation: Number(gen[1]), by: gen[2] };
  const after = (verb: string): string | undefined => (line.startsWith(`${verb} ${table} `) ? line.slice(verb.length + table.length + 2) : undefined);
  let rest = after('add rule');
  if (rest !== undefined) {
    // `add rule <t> <chain> [handle <n> | position <n>] <rule> # handle <m>`: an insert names its position first.
    const m = /^(\S+) (?:(?:handle|position|index) \d+ )?(.*?)\s*# handle (\d+)\s*$/.exec(rest);
    if (m) return { kind: 'add-rule', chain: m[1] ?? '', text: (m[2] ?? '').trim(), handle: Number(m[3]) };
    return { kind: 'other' };
  }
  rest = after('delete rule');
  if (rest !== undefined) {
    const m = /^(\S+) handle (\d+)\s*$/.exec(rest);
    if (m) return { kind: 'delete-rule', chain: m[1] ?? '', handle: Number(m[2]) };
    return { kind: 'other' };
  }
  for (const verb of ['add', 'delete'] as const) {
    rest = after(`${verb} element`);
    const m = rest === undefined ? null : /^(\S+) \{(.*)\}\s*$/.exec(rest);
    if (m) return { kind: verb === 'add' ? 'add-elements' : 'delete-elements', set: m[1] ?? '', elements: parseElements(m[2] ?? '') };
  }
  const setOp = /^(add|delete|flush) (?:set|map) (\S+ \S+) (\S+)/.exec(line);
  if (setOp && setOp[2] === table) return { kind: setOp[1] === 'add' ? 'add-set' : setOp[1] === 'delete' ? 'delete-set' : 'flush-set', set: setOp[3] ?? '' };
  const chainOp = /^(delete|flush) chain (\S+ \S+) (\S+)/.exec(line);
  if (chainOp && chainOp[2] === table) return { kind: chainOp[1] === 'delete' ? 'delete-chain' : 'flush-chain', chain: chainOp[3] ?? '' };
  if (line === `delete table ${table}` || line.startsWith(`delete table ${table} `)) return { kind: 'delete-table' };
  return { kind: 'other' };
}

/** An endpoint as the model names it: `A:P`, `[A]:P` for IPv6 (as nft prints a DNAT to one). */
export const targetName = (address: string, port: number | string): string => (address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`);

/**
 * Rules of one table by handle (handles are unique per table) and its maps' and sets' elements,
 * from a listing, then kept current by monitor lines.
 */
export class NftTable {
  private readonly rules = new Map<number, Rule>();
  /** Map or set name -> element key -> value ('' for a set's element). */
  private readonly sets = new Map<string, Map<string, string>>();

  /** Replaces the contents with `nft -a list table <table>` output. */
  load(listing: string): void {
    this.rules.clear();
    this.sets.clear();
    let chain: string | undefined;
    let set: string | undefined;
    /** An `elements = { ...` list not closed yet (nft wraps long ones over lines). */
    let elements: string | undefined;
    for (const raw of listing.split('\n')) {
      const line = raw.trim();
      if (elements !== undefined) {
        elements += ` ${line}`;
        if (line.endsWith('}')) {
          this.closeElements(set, elements.slice(0, -1));
          elements = undefined;
        }
        continue;
      }
      const c = /^chain (\S+) \{/.exec(line);
      if (c) {
        chain = c[1];
        continue;
      }
      const s = /^(?:set|map) (\S+) \{/.exec(line);
      if (s?.[1] !== undefined) {
        set = s[1];
        this.sets.set(set, new Map());
        continue;
      }
      if (line === '}') {
        chain = undefined;
        set = undefined;
        continue;
      }
      if (set !== undefined) {
        const e = /^elements = \{(.*)$/.exec(line);
        if (e) {
          const inside = e[1] ?? '';
          if (inside.endsWith('}')) this.closeElements(set, inside.slice(0, -1));
          else elements = inside;
        }
        continue;
      }
      const r = /^(.*?)\s*# handle (\d+)$/.exec(line);
      if (chain !== undefined && r && !line.startsWith('type ')) this.rules.set(Number(r[2]), { chain, text: (r[1] ?? '').trim() });
    }
  }

  private closeElements(set: string | undefined, inside: string): void {
    if (set === undefined) return;
    const m = this.sets.get(set) ?? new Map<string, string>();
    for (const e of parseElements(inside)) m.set(e.key, e.value ?? '');
    this.sets.set(set, m);
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
      // Declaring an existing map again keeps its elements (nft prints `add map` for every `add map` command).
      case 'add-set':
        if (!this.sets.has(l.set)) this.sets.set(l.set, new Map());
        break;
      case 'delete-set':
        this.sets.delete(l.set);
        break;
      case 'flush-set':
        this.sets.get(l.set)?.clear();
        break;
      case 'add-elements': {
        const m = this.sets.get(l.set) ?? new Map<string, string>();
        for (const e of l.elements) m.set(e.key, e.value ?? '');
        this.sets.set(l.set, m);
        break;
      }
      case 'delete-elements':
        for (const e of l.elements) this.sets.get(l.set)?.delete(e.key);
        break;
      // A full sync of the sidecar is `add table; delete table; table { ... }` in one transaction.
      case 'delete-table':
        this.rules.clear();
        this.sets.clear();
        break;
      default:
        break;
    }
  }

  size(): number {
    return this.rules.size;
  }

  /** Elements of a map or set (key -> value), for tests and messages. */
  elements(set: string): ReadonlyMap<string, string> | undefined {
    return this.sets.get(set);
  }

  /**
   * The `address:port` targets traffic can be DNATed to: those of `dnat to` rules (`dnat ip to`,
   * `dnat ip6 to` in an inet table), and the data of the endpoint map a `dnat … map @M` rule
   * names, in chains something refers to: another chain's `jump`/`goto`, or a `goto`/`jump`
   * value of a verdict map that some rule looks up (`vmap @M`). That is kube-proxy's KUBE-SVC →
   * KUBE-SEP (an endpoint chain may outlive the jump to it), the sidecar's iptables MPX-SERVICES →
   * MPX-SVC, and its nftables services-v4 element → MPX-SVC → MPX-EPS map (or → MPX-SEP chain).
   */
  inPlaceTargets(): Set<string> {
    const referred = new Set<string>();
    const vmaps = new Set<string>();
    for (const r of this.rules.values()) {
      for (const m of r.text.matchAll(/\b(?:jump|goto) (\S+)/g)) if (m[1] !== undefined && m[1] !== r.chain) referred.add(m[1]);
      for (const m of r.text.matchAll(/\bvmap @(\S+)/g)) if (m[1] !== undefined) vmaps.add(m[1]);
    }
    for (const name of vmaps)
      for (const v of this.sets.get(name)?.values() ?? []) {
        const m = /^(?:jump|goto) (\S+)$/.exec(v);
        if (m?.[1] !== undefined) referred.add(m[1]);
      }
    const out = new Set<string>();
    for (const r of this.rules.values()) {
      if (!referred.has(r.chain)) continue;
      for (const m of r.text.matchAll(/\bdnat (?:ip6? )?to (\S+:\d+)(?:\s|$)/g)) if (m[1] !== undefined) out.add(m[1]);
      for (const m of r.text.matchAll(/\bdnat (?:ip6? )?to .*?\bmap @(\S+)/g)) {
        for (const v of this.sets.get(m[1] ?? '')?.values() ?? []) {
          const d = /^(\S+) \. (\d+)$/.exec(v);
          if (d?.[1] !== undefined && d[2] !== undefined) out.add(targetName(d[1], d[2]));
        }
      }
    }
    return out;
  }

  dnatInPlace(address: string, port: number): boolean {
    return this.inPlaceTargets().has(targetName(address, port));
  }
}

/** The sidecar's own nftables table. */
export const SIDECAR_NFT_TABLE = `${NFT_FAMILY} ${NFT_TABLE}`;

/**
 * Which table holds the sidecar's rules, from `nft list tables` in its pod's namespace: its own
 * (nftables back end) when present, else `ip nat` (iptables back end). The back end that starts
 * removes the other's rules, so an empty `ip nat` may remain beside its table.
 */
export function sidecarMonitorTable(listTables: string): string {
  return listTables.split('\n').some((l) => l.trim() === `table ${SIDECAR_NFT_TABLE}`) ? SIDECAR_NFT_TABLE : 'ip nat';
}

/** `iptables-save -t nat` text: whether a DNAT to address:port is there (the once-per-run cross-check). */
export function saveHasDnat(saveText: string, address: string, port: number): boolean {
  return saveText.split('\n').some((l) => l.startsWith('-A ') && new RegExp(`--to-destination ${address.replace(/\./g, '\\.')}:${port}(\\s|$)`).test(l));
}
