/**
 * A fake iptables (nft or legacy flavour: the same restore text) for one family: it takes the
 * `iptables-restore --noflush` text the renderers produce, full or partial, keeps the tables in
 * memory, refuses what iptables-restore refuses where that is cheap to see (a missing chain, a
 * rule to delete that is not there, a chain deleted while used, a target outside its table, an
 * option it does not know), and traces packets through them (walk.ts).
 *
 * Only what the project writes is understood; anything else fails loudly with its line, so a new
 * rule shape is added here on purpose rather than guessed at.
 */
import { canonical, inPrefix, parseHostPort, parsePrefix, type Prefix } from './addr.js';
import {
  isLocal,
  outInterface,
  portion,
  runHooks,
  when,
  type Action,
  type BaseChain,
  type Chains,
  type Cond,
  type Effect,
  type Family,
  type Outcome,
  type Packet,
  type Path,
  type RejectKind,
  type Rule,
  type Step,
} from './walk.js';

type TableName = 'filter' | 'nat';
const BUILTIN: Readonly<Record<TableName, readonly string[]>> = { filter: ['INPUT', 'FORWARD', 'OUTPUT'], nat: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'] };

/** A restore input line the fake refuses, as iptables-restore would (with its line number). */
export class RestoreError extends Error {}

interface IptRule extends Rule {
  /** The spec's words (quotes removed): what -D compares. */
  readonly spec: string;
  /** The chain it jumps or goes to, if any. */
  readonly target?: string;
}

interface Table {
  chains: Map<string, IptRule[]>;
}

/** Splits a line into words: double quotes group, as the shell-like parser of iptables-restore does. */
export function words(line: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|(\S+)/g;
  for (let m = re.exec(line); m !== null; m = re.exec(line)) out.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : (m[2] as string));
  return out;
}

export class FakeIptables {
  private tables: Record<TableName, Table> = { filter: emptyTable('filter'), nat: emptyTable('nat') };
  /** xt_recent lists: name -> client addresses. */
  readonly recent = new Map<string, Set<string>>();

  constructor(readonly family: Family) {}

  /**
   * One `iptables-restore --noflush` run. Each table's section commits on its COMMIT, as the real
   * tool does: an error leaves the sections before it applied and its own not.
   */
  restore(text: string): void {
    let table: TableName | undefined;
    let work: Table | undefined;
    const lines = text.split('\n');
    lines.forEach((raw, n) => {
      const line = raw.trim();
      const at = `line ${n + 1}: ${JSON.stringify(line)}`;
      if (line === '' || line.startsWith('#')) return;
      try {
        if (line.startsWith('*')) {
          if (table !== undefined) throw new Error('a table opened before COMMIT');
          const name = line.slice(1);
          if (name !== 'filter' && name !== 'nat') throw new Error(`table ${name} is not modelled`);
          table = name;
          work = cloneTable(this.tables[name]);
        } else if (line === 'COMMIT') {
          if (table === undefined || work === undefined) throw new Error('COMMIT outside a table');
          this.tables[table] = work;
          table = undefined;
          work = undefined;
        } else {
          if (table === undefined || work === undefined) throw new Error('a command outside a table section');
          this.command(table, work, line);
        }
      } catch (e) {
        throw new RestoreError(`iptables-restore (IPv${this.family}): ${at}: ${(e as Error).message}`, { cause: e });
      }
    });
    if (table !== undefined) throw new RestoreError(`iptables-restore (IPv${this.family}): COMMIT expected at the end (table ${table})`);
  }

  private command(table: TableName, t: Table, line: string): void {
    if (line.startsWith(':')) {
      const [name = '', policy] = line.slice(1).split(/\s+/);
      if (BUILTIN[table].includes(name)) {
        if (policy !== 'ACCEPT') throw new Error(`policy ${policy ?? ''} of ${name} is not modelled`);
      } else {
        if (policy !== '-') throw new Error(`a user chain takes policy "-", not ${policy ?? ''}`);
        checkChainName(name);
        t.chains.set(name, []);
      }
      return;
    }
    const w = words(line);
    const op = w[0];
    const chain = w[1] ?? '';
    const rules = t.chains.get(chain);
    if (op === '-X' || op === '-F' || op === '-N') {
      if (op === '-N') {
        if (rules !== undefined) throw new Error(`chain ${chain} already exists`);
        checkChainName(chain);
        t.chains.set(chain, []);
        return;
      }
      if (rules === undefined) throw new Error(`chain ${chain} does not exist`);
      if (op === '-F') return void t.chains.set(chain, []);
      if (BUILTIN[table].includes(chain)) throw new Error(`cannot delete built-in chain ${chain}`);
      if (rules.length > 0) throw new Error(`chain ${chain} is not empty`);
      for (const [from, rs] of t.chains) if (rs.some((r) => r.target === chain)) throw new Error(`chain ${chain} is still used by ${from}`);
      t.chains.delete(chain);
      return;
    }
    if (rules === undefined) throw new Error(`chain ${chain} does not exist`);
    if (op === '-A') return void rules.push(this.compile(table, t, w.slice(2)));
    if (op === '-I') {
      const pos = /^\d+$/.test(w[2] ?? '') ? Number(w[2]) : 1;
      const spec = /^\d+$/.test(w[2] ?? '') ? w.slice(3) : w.slice(2);
      if (pos < 1 || pos > rules.length + 1) throw new Error(`index ${pos} out of range`);
      return void rules.splice(pos - 1, 0, this.compile(table, t, spec));
    }
    if (op === '-D') {
      const spec = w.slice(2).join(' ');
      const i = rules.findIndex((r) => r.spec === spec);
      if (i < 0) throw new Error('Bad rule (does a matching rule exist in that chain?)');
      rules.splice(i, 1);
      return;
    }
    throw new Error(`command ${op ?? ''} is not modelled`);
  }

  /** A rule spec (the words after `-A CHAIN`) into conditions and an action. */
  private compile(table: TableName, t: Table, spec: readonly string[]): IptRule {
    const fam = this.family;
    const conds: Cond[] = [];
    let proto: string | undefined;
    let action: Action = (b) => [[b, { k: 'next' }]];
    let target: string | undefined;
    let i = 0;
    const arg = (): string => {
      const v = spec[i++];
      if (v === undefined) throw new Error(`${spec[i - 2] ?? ''} needs a value`);
      return v;
    };
    while (i < spec.length) {
      let neg = false;
      let opt = arg();
      if (opt === '!') {
        neg = true;
        opt = arg();
      }
      const not = (c: Cond): Cond => (neg ? (b) => c(b).map(([p, ok]) => [p, !ok] as const) : c);
      switch (opt) {
        case '-s':
        case '-d': {
          const p: Prefix = parsePrefix(arg());
          if (p.family !== fam) throw new Error(`${opt} ${spec[i - 1] ?? ''} is not an IPv${fam} prefix`);
          conds.push(not(when((b) => inPrefix(p, opt === '-s' ? b.pkt.src : b.pkt.dst, fam))));
          break;
        }
        case '-p': {
          const v = arg();
          if (v !== 'tcp' && v !== 'udp' && v !== 'sctp') throw new Error(`protocol ${v} is not modelled`);
          proto = v;
          conds.push(not(when((b) => b.pkt.protocol === v)));
          break;
        }
        case '-m': {
          const mod = arg();
          i = this.match(spec, i, mod, proto, conds);
          break;
        }
        case '-i':
        case '-o': {
          const name = arg();
          conds.push(not(when((b) => (opt === '-i' ? (b.pkt.iif ?? fail('trace: a rule matches the input interface; give the packet an iif')) : outInterface(this.path, b)) === name)));
          break;
        }
        case '--dport': {
          if (proto === undefined) throw new Error('--dport needs -p tcp, udp or sctp');
          const port = portNumber(arg());
          conds.push(not(when((b) => b.pkt.dport === port)));
          break;
        }
        case '-j':
        case '-g': {
          if (neg) throw new Error(`! ${opt} makes no sense`);
          const r = this.target(table, t, opt, arg(), spec.slice(i));
          action = r.action;
          target = r.target;
          i = spec.length;
          break;
        }
        default:
          throw new Error(`unknown option "${opt}"`);
      }
    }
    return { text: spec.join(' '), spec: spec.join(' '), conds, action, ...(target !== undefined ? { target } : {}) };
  }

  /** One `-m <module>` and its options; returns the index after them. */
  private match(spec: readonly string[], start: number, mod: string, proto: string | undefined, conds: Cond[]): number {
    let i = start;
    const opts = new Map<string, string | true>();
    while (i < spec.length && (spec[i] ?? '').startsWith('--')) {
      const o = spec[i++] as string;
      const flag = ['--rcheck', '--set', '--reap', '--update', '--rsource'].includes(o);
      if (flag) opts.set(o, true);
      else {
        const v = spec[i++];
        if (v === undefined) throw new Error(`${o} needs a value`);
        opts.set(o, v);
      }
    }
    const only = (...allowed: string[]): void => {
      for (const k of opts.keys()) if (!allowed.includes(k)) throw new Error(`-m ${mod}: option ${k} is not modelled`);
    };
    switch (mod) {
      case 'comment':
        only('--comment');
        break;
      case 'tcp':
      case 'udp':
      case 'sctp': {
        if (proto !== mod) throw new Error(`-m ${mod} needs -p ${mod}`);
        only('--dport');
        const d = opts.get('--dport');
        if (typeof d === 'string') {
          const port = portNumber(d);
          conds.push(when((b) => b.pkt.dport === port));
        }
        break;
      }
      case 'conntrack': {
        only('--ctstate');
        const states = String(opts.get('--ctstate') ?? '').split(',');
        if (!states.every((s) => ['NEW', 'ESTABLISHED', 'RELATED', 'INVALID', 'DNAT', 'SNAT'].includes(s))) throw new Error(`--ctstate ${states.join(',')}: unknown state`);
        // A traced packet opens its connection (NEW); DNAT: its destination was translated.
        conds.push(when((b) => states.includes('NEW') || (states.includes('DNAT') && b.dnat !== undefined)));
        break;
      }
      case 'statistic': {
        only('--mode', '--probability');
        const p = Number(opts.get('--probability'));
        if (opts.get('--mode') !== 'random' || !(p >= 0 && p <= 1)) throw new Error('-m statistic: only --mode random --probability 0..1 is modelled');
        conds.push((b) => [
          [portion(b, p), true],
          [portion(b, 1 - p), false],
        ]);
        break;
      }
      case 'recent':
        conds.push(this.recentMatch(opts));
        break;
      case 'mark': {
        only('--mark');
        const [v = '', m] = String(opts.get('--mark') ?? '').split('/');
        const value = Number(v);
        const mask = m === undefined ? 0xffffffff : Number(m);
        if (!Number.isInteger(value) || !Number.isInteger(mask)) throw new Error(`--mark ${String(opts.get('--mark'))}: not value[/mask]`);
        conds.push(when((b) => (b.mark & mask) >>> 0 === value));
        break;
      }
      default:
        throw new Error(`match module ${mod} is not modelled`);
    }
    return i;
  }

  /** xt_recent by source: `--rcheck` asks whether the client is in the list (time is not modelled: within the timeout), `--set` adds it and matches. */
  private recentMatch(opts: ReadonlyMap<string, string | true>): Cond {
    const name = opts.get('--name');
    if (typeof name !== 'string') throw new Error('-m recent needs --name');
    for (const k of opts.keys()) if (!['--name', '--rcheck', '--set', '--seconds', '--reap', '--rsource'].includes(k)) throw new Error(`-m recent: option ${k} is not modelled`);
    if (opts.has('--set') === opts.has('--rcheck')) throw new Error('-m recent: exactly one of --set and --rcheck');
    if (opts.has('--reap') && !opts.has('--seconds')) throw new Error('-m recent: --reap needs --seconds');
    if (opts.has('--set')) return (b) => [[{ ...b, effects: [...b.effects, { list: name, key: canonical(b.pkt.src, this.family) }] }, true]];
    return when((b) => remembered(this.recent, b.effects, name, canonical(b.pkt.src, this.family)));
  }

  private target(table: TableName, t: Table, opt: string, name: string, rest: readonly string[]): { action: Action; target?: string } {
    const fam = this.family;
    const opts = new Map<string, string>();
    for (let i = 0; i < rest.length; i += 2) {
      const k = rest[i] as string;
      if (!k.startsWith('--') || rest[i + 1] === undefined) throw new Error(`target ${name}: bad option ${k}`);
      opts.set(k, rest[i + 1] as string);
    }
    const only = (...allowed: string[]): void => {
      for (const k of opts.keys()) if (!allowed.includes(k)) throw new Error(`target ${name}: option ${k} is not modelled`);
    };
    const inTable = (want: TableName): void => {
      if (table !== want) throw new Error(`${name} target: only valid in the ${want} table, not ${table}`);
    };
    const step =
      (s: Step): Action =>
      (b) => [[b, s]];
    if (opt === '-g' || !['DNAT', 'REJECT', 'ACCEPT', 'DROP', 'RETURN', 'MASQUERADE', 'MARK'].includes(name)) {
      if (!t.chains.has(name) || BUILTIN[table].includes(name)) throw new Error(`Couldn't load target \`${name}': no such chain in ${table}`);
      only();
      return { action: step({ k: opt === '-g' ? 'goto' : 'jump', chain: name }), target: name };
    }
    switch (name) {
      case 'DNAT': {
        inTable('nat');
        only('--to-destination');
        const to = parseHostPort(opts.get('--to-destination') ?? '', fam);
        return { action: (b) => [[{ ...b, dnat: to, pkt: { ...b.pkt, dst: to.ip, dport: to.port } }, { k: 'accept' }]] };
      }
      case 'MARK': {
        only('--or-mark');
        const bits = Number(opts.get('--or-mark'));
        if (!Number.isInteger(bits)) throw new Error('MARK: only --or-mark <bits> is modelled');
        return { action: (b) => [[{ ...b, mark: (b.mark | bits) >>> 0 }, { k: 'next' }]] };
      }
      case 'MASQUERADE':
        inTable('nat');
        only();
        return { action: (b) => [[{ ...b, masquerade: true }, { k: 'accept' }]] };
      case 'REJECT': {
        inTable('filter');
        only('--reject-with');
        const w = opts.get('--reject-with') ?? (fam === 4 ? 'icmp-port-unreachable' : 'icmp6-port-unreachable');
        const kinds: Record<string, RejectKind> = { 'tcp-reset': 'tcp-reset', [fam === 4 ? 'icmp-port-unreachable' : 'icmp6-port-unreachable']: 'port-unreachable' };
        const kind = kinds[w];
        if (kind === undefined) throw new Error(`REJECT --reject-with ${w} is not modelled for IPv${fam}`);
        // A tcp-reset rule must match TCP only: iptables refuses it otherwise (not checked here; the renderers match -p tcp).
        return { action: step({ k: 'reject', with: kind }) };
      }
      default:
        only();
        return { action: step({ k: name === 'ACCEPT' ? 'accept' : name === 'DROP' ? 'drop' : 'return' }) };
    }
  }

  private chainsOf(table: TableName): Chains {
    const t = this.tables[table];
    return {
      rules: (c) => {
        const r = t.chains.get(c);
        if (r === undefined) throw new Error(`trace: no chain ${c} in ${table}`);
        return r;
      },
    };
  }

  /** The chains of one table, as iptables-save would list them (rule specs), for tests of the fake itself. */
  listing(table: TableName): Map<string, string[]> {
    return new Map([...this.tables[table].chains].map(([c, rs]) => [c, rs.map((r) => r.spec)]));
  }

  /** The path of the trace running now (rules matching the output interface ask it). */
  private path: Path | undefined;

  /**
   * Every way a new connection's first packet can end. `output`: sent by a process in this
   * namespace (nat OUTPUT, filter OUTPUT, nat POSTROUTING); `prerouting`: arriving from outside
   * (nat PREROUTING; then, by the destination after DNAT, filter INPUT or filter FORWARD and nat POSTROUTING).
   */
  trace(pkt: Packet, path: Path = { hook: 'output' }): Outcome[] {
    if (pkt.family !== this.family) throw new Error(`trace: an IPv${pkt.family} packet through IPv${this.family} tables`);
    const base = (table: TableName, name: string, priority: number): BaseChain => ({ name, chains: this.chainsOf(table), priority, nat: table === 'nat', policy: 'accept' });
    const post = [base('nat', 'POSTROUTING', 100)];
    this.path = path;
    try {
      if (path.hook === 'output') return runHooks([[base('nat', 'OUTPUT', -100), base('filter', 'OUTPUT', 0)], post], pkt);
      const canon = (ip: string): string => canonical(ip, this.family);
      return runHooks([[base('nat', 'PREROUTING', -100)], (b) => (isLocal(path, b, canon) ? [base('filter', 'INPUT', 0), base('nat', 'INPUT', 100)] : [base('filter', 'FORWARD', 0), ...post])], pkt);
    } finally {
      this.path = undefined;
    }
  }

  /** Makes the connection of one outcome: its effects (affinity) stay for the next trace. */
  connect(o: Outcome): void {
    for (const e of o.effects) (this.recent.get(e.list) ?? this.recent.set(e.list, new Set()).get(e.list))?.add(e.key);
  }
}

/** Whether a client is in a list, counting what this walk added already. */
export function remembered(lists: ReadonlyMap<string, ReadonlySet<string>>, effects: readonly Effect[], list: string, key: string): boolean {
  return lists.get(list)?.has(key) === true || effects.some((e) => e.list === list && e.key === key);
}

const fail = (msg: string): never => {
  throw new Error(msg);
};

function emptyTable(name: TableName): Table {
  return { chains: new Map(BUILTIN[name].map((c) => [c, []])) };
}

function cloneTable(t: Table): Table {
  return { chains: new Map([...t.chains].map(([c, rs]) => [c, [...rs]])) };
}

function checkChainName(name: string): void {
  if (name.length === 0 || name.length > 28 || name.startsWith('-')) throw new Error(`invalid chain name ${JSON.stringify(name)} (1 to 28 characters)`);
}

function portNumber(text: string): number {
  const p = Number(text);
  if (!/^\d+$/.test(text) || p < 0 || p > 65535) throw new Error(`port ${JSON.stringify(text)} is not a port number`);
  return p;
}
