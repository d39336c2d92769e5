/**
 * A fake nftables: it takes the `nft -f` text the renderers produce (a whole table, or a partial
 * change: flush, add with blocks, delete), applies each text as one transaction (all or nothing,
 * as nft), keeps tables, chains, sets and maps in memory, refuses what nft refuses where that is
 * cheap to see (an unknown object, a jump to a missing chain, a set of another type, a chain
 * deleted while used or not empty, overlapping intervals), and traces packets (walk.ts).
 *
 * Only the statements the project writes are understood (nft-rules.ts); anything else fails
 * loudly with its line.
 */
import { canonical } from './addr.js';
import { statements, tokenize, type Stmt } from './nft-syntax.js';
import { compileRule, type NftRule } from './nft-rules.js';
import { rangeText } from './nft-intervals.js';
import { isLocal, runHooks, type BaseChain, type Family, type Outcome, type Packet, type Path } from './walk.js';

/** A text the fake refuses, as `nft -f` would. */
export class NftError extends Error {}

export interface NftSet {
  readonly name: string;
  readonly kind: 'set' | 'map';
  /** The key's parts (`ipv4_addr`, `inet_proto`, `inet_service`, `numgen`) and the data's (`verdict`, `ipv4_addr`, ...). */
  readonly key: readonly string[];
  readonly data: readonly string[];
  readonly interval: boolean;
  readonly dynamic: boolean;
  /** key text -> data words (a set's are empty); an interval's key is `from-to`. */
  readonly elements: Map<string, readonly string[]>;
  /** The declaration as written, to refuse a second one that differs. */
  readonly decl: string;
}

export interface NftChain {
  readonly name: string;
  readonly hook?: { readonly type: 'nat' | 'filter'; readonly hook: string; readonly priority: number; readonly policy: 'accept' | 'drop' };
  readonly rules: NftRule[];
}

export interface NftTableState {
  readonly family: 'inet' | 'ip' | 'ip6';
  readonly name: string;
  readonly chains: Map<string, NftChain>;
  readonly sets: Map<string, NftSet>;
  /** Named counters (`counter <name> { }`, `add counter`); absent in a table that never had one. */
  counters?: Set<string>;
}

type State = Map<string, NftTableState>;

export class FakeNft {
  private tables: State = new Map();

  /** One `nft -f` run: all of it, or (on an error) nothing. */
  apply(text: string): void {
    const work = cloneState(this.tables);
    let stmts: Stmt[];
    try {
      stmts = statements(tokenize(text));
    } catch (e) {
      throw new NftError(`nft -f: ${(e as Error).message}`, { cause: e });
    }
    for (const s of stmts) {
      try {
        command(work, s);
      } catch (e) {
        throw new NftError(`nft -f: line ${s.line}: ${JSON.stringify(s.words.join(' '))}: ${(e as Error).message}`, { cause: e });
      }
    }
    try {
      for (const t of work.values()) for (const c of t.chains.values()) for (const r of c.rules) r.check(t);
      for (const t of work.values()) for (const s of t.sets.values()) if (s.data[0] === 'verdict') for (const d of s.elements.values()) verdictChain(t, d);
    } catch (e) {
      throw new NftError(`nft -f: ${(e as Error).message}`, { cause: e });
    }
    this.tables = work;
  }

  /** What `nft -t -f -` of `list chains|sets|maps|counters <family>` prints: each table's block with its objects' names, no rules, no elements. */
  listNames(family = 'inet'): string {
    const out: string[] = [];
    for (const t of this.tables.values()) {
      if (t.family !== family) continue;
      out.push(`table ${t.family} ${t.name} {`);
      for (const c of t.chains.keys()) out.push(`\tchain ${c} {`, '\t}');
      for (const s of t.sets.values()) out.push(`\t${s.kind} ${s.name} {`, '\t}');
      for (const c of t.counters ?? []) out.push(`\tcounter ${c} {`, '\t}');
      out.push('}');
    }
    return `${out.join('\n')}\n`;
  }

  table(name: string, family = 'inet'): NftTableState | undefined {
    return this.tables.get(`${family} ${name}`);
  }

  /**
   * Every way a new connection's first packet can end, through the base chains of every table
   * on its path, by priority (output: output, postrouting; prerouting: prerouting, then input or
   * forward and postrouting by the destination after DNAT).
   */
  trace(pkt: Packet, path: Path = { hook: 'output' }): Outcome[] {
    const bases = (hooks: readonly string[]): BaseChain[] => {
      const out: (BaseChain & { order: number })[] = [];
      for (const t of this.tables.values()) {
        if ((t.family === 'ip' && pkt.family === 6) || (t.family === 'ip6' && pkt.family === 4)) continue;
        for (const c of t.chains.values()) {
          if (c.hook === undefined || !hooks.includes(c.hook.hook)) continue;
          out.push({
            name: c.name,
            order: hooks.indexOf(c.hook.hook),
            priority: c.hook.priority,
            nat: c.hook.type === 'nat',
            policy: c.hook.policy,
            chains: { rules: (name) => (t.chains.get(name) ?? fail(`trace: no chain ${name} in ${t.name}`)).rules.map((r) => r.bind(t, this.dynamic, path)) },
          });
        }
      }
      return out.sort((a, b) => a.order - b.order || a.priority - b.priority);
    };
    if (path.hook === 'output') return runHooks([bases(['output', 'postrouting'])], pkt);
    const input = bases(['input']);
    const forward = bases(['forward', 'postrouting']);
    return runHooks([bases(['prerouting']), (b) => (isLocal(path, b, (ip) => canonical(ip, pkt.family)) ? input : forward)], pkt);
  }

  /** Dynamic set contents added by connections (update @set), by `<table> <set>`. */
  private readonly dynamic = new Map<string, Set<string>>();

  /** Makes the connection of one outcome: its effects (affinity) stay for the next trace. */
  connect(o: Outcome): void {
    for (const e of o.effects) (this.dynamic.get(e.list) ?? this.dynamic.set(e.list, new Set()).get(e.list))?.add(e.key);
  }
}

const fail = (msg: string): never => {
  throw new Error(msg);
};

function cloneState(s: State): State {
  const out: State = new Map();
  for (const [k, t] of s)
    out.set(k, {
      ...t,
      chains: new Map([...t.chains].map(([n, c]) => [n, { ...c, rules: [...c.rules] }])),
      sets: new Map([...t.sets].map(([n, x]) => [n, { ...x, elements: new Map(x.elements) }])),
      ...(t.counters !== undefined ? { counters: new Set(t.counters) } : {}),
    });
  return out;
}

/** `inet multus_proxy` -> the table, created when `create`. */
function tableRef(st: State, words: readonly string[], at: number, create = false): NftTableState {
  const family = words[at];
  const name = words[at + 1];
  if (family !== 'inet' && family !== 'ip' && family !== 'ip6') throw new Error(`table family ${family ?? ''} is not modelled`);
  if (name === undefined) throw new Error('a table needs a name');
  const key = `${family} ${name}`;
  let t = st.get(key);
  if (t === undefined) {
    if (!create) throw new Error(`No such file or directory: table ${key}`);
    t = { family, name, chains: new Map(), sets: new Map() };
    st.set(key, t);
  }
  return t;
}

function command(st: State, s: Stmt): void {
  const w = s.words;
  const [verb = '', obj = ''] = w;
  if (verb === 'table') return void tableBlock(tableRef(st, w, 1, true), s.block ?? fail('table without a block'));
  if (!['add', 'create', 'delete', 'flush'].includes(verb)) throw new Error(`command ${verb} is not modelled`);
  if (obj === 'table') {
    if (verb === 'delete') {
      tableRef(st, w, 2);
      st.delete(`${w[2] ?? ''} ${w[3] ?? ''}`);
      return;
    }
    if (verb === 'flush') throw new Error('flush table is not modelled');
    const t = tableRef(st, w, 2, true);
    if (s.block !== undefined) tableBlock(t, s.block);
    return;
  }
  const t = tableRef(st, w, 2);
  const name = w[4] ?? fail(`${obj} needs a name`);
  if (obj === 'chain') return chainCommand(t, verb, name, s);
  if (obj === 'counter') return counterCommand(t, verb, name);
  if (obj === 'set' || obj === 'map') {
    if (verb === 'add' || verb === 'create') return void declareSet(t, obj, name, s.block ?? fail(`add ${obj} needs a block here`));
    const set = t.sets.get(name);
    if (set === undefined || set.kind !== obj) throw new Error(`No such file or directory: ${obj} ${name}`);
    if (verb === 'flush') return void set.elements.clear();
    for (const c of t.chains.values()) if (c.rules.some((r) => r.sets.includes(name))) throw new Error(`Device or resource busy: ${obj} ${name} is used by chain ${c.name}`);
    t.sets.delete(name);
    return;
  }
  if (obj === 'element' && (verb === 'add' || verb === 'delete')) {
    const set = t.sets.get(name) ?? fail(`No such file or directory: set ${name}`);
    return verb === 'add' ? addElements(set, w.slice(5)) : deleteElements(set, w.slice(5));
  }
  throw new Error(`${verb} ${obj} is not modelled`);
}

/** `add counter` (kept if it exists) and `delete counter` (refused while a rule names it). */
function counterCommand(t: NftTableState, verb: string, name: string): void {
  t.counters ??= new Set();
  if (verb === 'add' || verb === 'create') return void t.counters.add(name);
  if (verb !== 'delete') throw new Error(`${verb} counter is not modelled`);
  if (!t.counters.has(name)) throw new Error(`No such file or directory: counter ${name}`);
  for (const c of t.chains.values()) if (c.rules.some((r) => r.text.includes(`counter name ${name}`))) throw new Error(`Device or resource busy: counter ${name} is used by chain ${c.name}`);
  t.counters.delete(name);
}

function chainCommand(t: NftTableState, verb: string, name: string, s: Stmt): void {
  const c = t.chains.get(name);
  if (verb === 'add' || verb === 'create') {
    if (c !== undefined && verb === 'create') throw new Error(`File exists: chain ${name}`);
    return void chainBlock(t, name, s.block ?? []);
  }
  if (c === undefined) throw new Error(`No such file or directory: chain ${name}`);
  if (verb === 'flush') return void c.rules.splice(0);
  if (c.rules.length > 0) throw new Error(`Device or resource busy: chain ${name} is not empty`);
  for (const o of t.chains.values()) if (o.rules.some((r) => r.chains.includes(name))) throw new Error(`Device or resource busy: chain ${name} is used by chain ${o.name}`);
  for (const m of t.sets.values())
    for (const d of m.elements.values()) if (m.data[0] === 'verdict' && d[1] === name) throw new Error(`Device or resource busy: chain ${name} is used by map ${m.name}`);
  t.chains.delete(name);
}

function tableBlock(t: NftTableState, block: readonly Stmt[]): void {
  for (const s of block) {
    const [kind = '', name] = s.words;
    if (name === undefined || s.words.length !== 2 || s.block === undefined) throw new Error(`line ${s.line}: ${JSON.stringify(s.words.join(' '))} is not modelled in a table block`);
    if (kind === 'chain') chainBlock(t, name, s.block);
    else if (kind === 'counter') (t.counters ??= new Set()).add(name);
    else if (kind === 'set' || kind === 'map') declareSet(t, kind, name, s.block);
    else throw new Error(`line ${s.line}: ${kind} is not modelled in a table block`);
  }
}

/** Creates the chain if missing, then appends the block's rules (as `add chain ... { }` does). */
function chainBlock(t: NftTableState, name: string, block: readonly Stmt[]): void {
  if (name.length === 0 || name.length > 256) throw new Error(`invalid chain name ${JSON.stringify(name)}`);
  let c = t.chains.get(name);
  let rules = block;
  const head = block[0]?.words;
  if (head?.[0] === 'type') {
    const m = /^type (nat|filter) hook (output|prerouting|postrouting|input|forward) priority (-?\d+)$/.exec(head.join(' '));
    const policy = block[1]?.words.join(' ');
    if (m === null || (policy !== 'policy accept' && policy !== 'policy drop'))
      throw new Error(`line ${block[0]?.line ?? 0}: base chain ${JSON.stringify(head.join(' '))} ${policy ?? ''} is not modelled`);
    const hook = { type: m[1] as 'nat' | 'filter', hook: m[2] as string, priority: Number(m[3]), policy: policy === 'policy accept' ? 'accept' : 'drop' } as const;
    if (c !== undefined && JSON.stringify(c.hook) !== JSON.stringify(hook)) throw new Error(`File exists: chain ${name} with another hook`);
    c ??= { name, hook, rules: [] };
    rules = block.slice(2);
  }
  c ??= { name, rules: [] };
  t.chains.set(name, c);
  for (const r of rules) {
    try {
      c.rules.push(compileRule(r.words));
    } catch (e) {
      throw new Error(`line ${r.line}: ${JSON.stringify(r.words.join(' '))}: ${(e as Error).message}`, { cause: e });
    }
  }
}

const KEY_TYPES = new Set(['ipv4_addr', 'ipv6_addr', 'ether_addr', 'inet_proto', 'inet_service']);

/** A set or map declaration; a second one must say the same and adds its elements. */
function declareSet(t: NftTableState, kind: 'set' | 'map', name: string, block: readonly Stmt[]): void {
  let key: string[] = [];
  let data: string[] = [];
  const flags = new Set<string>();
  let elements: readonly string[] = [];
  const decl: string[] = [];
  for (const s of block) {
    const [head = '', ...rest] = s.words;
    if (head === 'elements') {
      if (rest[0] !== '=') throw new Error(`line ${s.line}: elements needs "="`);
      elements = rest.slice(1);
      continue;
    }
    decl.push(s.words.join(' '));
    if (head === 'type') [key, data] = typeParts(rest.join(' ').split(' : '), (x) => x.split(' . '));
    else if (head === 'typeof') [key, data] = typeParts(rest.join(' ').split(' : '), typeofParts);
    else if (head === 'flags') for (const f of rest.filter((x) => x !== ',')) flags.add(f);
    else if (head !== 'timeout') throw new Error(`line ${s.line}: ${head} in a ${kind} is not modelled`);
  }
  for (const f of flags) if (!['interval', 'dynamic', 'timeout'].includes(f)) throw new Error(`flag ${f} is not modelled`);
  if (key.length === 0) throw new Error(`${kind} ${name} needs a type`);
  for (const k of key) if (!KEY_TYPES.has(k) && k !== 'numgen') throw new Error(`key type ${k} is not modelled`);
  if ((kind === 'map') !== data.length > 0) throw new Error(`${kind} ${name}: ${kind === 'map' ? 'a map needs "key : data"' : 'a set has no data'}`);
  const was = t.sets.get(name);
  const set: NftSet = was ?? { name, kind, key, data, interval: flags.has('interval'), dynamic: flags.has('dynamic'), elements: new Map(), decl: decl.join('; ') };
  if (was !== undefined && (was.kind !== kind || was.decl !== decl.join('; '))) throw new Error(`File exists: ${kind} ${name} is declared as ${JSON.stringify(was.decl)}`);
  t.sets.set(name, set);
  if (elements.length > 0) addElements(set, elements);
}

function typeParts(parts: string[], split: (x: string) => string[]): [string[], string[]] {
  if (parts.length > 2) throw new Error('a type with more than one ":"');
  return [split(parts[0] ?? ''), parts[1] === undefined ? [] : split(parts[1])];
}

/** `typeof numgen random mod M` / `ip daddr . tcp dport`: the types those expressions have. */
function typeofParts(text: string): string[] {
  return text.split(' . ').map((e) => {
    if (/^numgen random mod \d+$/.test(e)) return 'numgen';
    if (e === 'ip daddr' || e === 'ip saddr') return 'ipv4_addr';
    if (e === 'ip6 daddr' || e === 'ip6 saddr') return 'ipv6_addr';
    if (/^(tcp|udp|sctp|th) dport$/.test(e)) return 'inet_service';
    throw new Error(`typeof ${e} is not modelled`);
  });
}

/** `{ k : v, k : v }` words into elements, each key and value checked against the declared types. */
function elementItems(words: readonly string[]): string[][] {
  if (words[0] !== '{' || words[words.length - 1] !== '}') throw new Error('elements need { }');
  const items: string[][] = [[]];
  for (const w of words.slice(1, -1)) {
    if (w === ',') items.push([]);
    else items[items.length - 1]?.push(w);
  }
  return items.filter((i) => i.length > 0);
}

function addElements(set: NftSet, words: readonly string[]): void {
  for (const item of elementItems(words)) {
    const colon = item.indexOf(':');
    const keyWords = colon < 0 ? item : item.slice(0, colon);
    const dataWords = colon < 0 ? [] : item.slice(colon + 1);
    if ((set.kind === 'map') !== colon >= 0) throw new Error(`${set.name}: ${set.kind === 'map' ? 'a map element needs ": data"' : 'a set element has no data'}`);
    const key = elementKey(set, keyWords);
    const data =
      set.kind === 'set'
        ? []
        : set.data[0] === 'verdict'
          ? verdictWords(dataWords)
          : dataWords
              .join(' ')
              .split(' . ')
              .map((v, i) => valueText(set.data[i], v, set.name));
    if (set.data[0] !== 'verdict' && data.length !== set.data.length) throw new Error(`${set.name}: data ${dataWords.join(' ')} does not fit ${set.data.join(' . ')}`);
    const had = set.elements.get(key);
    if (had !== undefined && had.join(' ') !== data.join(' ')) throw new Error(`File exists: ${set.name} element ${key} has another value`);
    if (set.interval) overlapCheck(set, key);
    set.elements.set(key, data);
  }
}

/** `delete element`: each key must be there (the kernel refuses the transaction otherwise, ENOENT). */
function deleteElements(set: NftSet, words: readonly string[]): void {
  for (const item of elementItems(words)) {
    const colon = item.indexOf(':');
    const key = elementKey(set, colon < 0 ? item : item.slice(0, colon));
    if (!set.elements.delete(key)) throw new Error(`No such file or directory: ${set.name} has no element ${key}`);
  }
}

function elementKey(set: NftSet, words: readonly string[]): string {
  const parts = words.join(' ').split(' . ');
  if (parts.length !== set.key.length) throw new Error(`${set.name}: key ${words.join(' ')} does not fit ${set.key.join(' . ')}`);
  return parts.map((p, i) => valueText(set.key[i], p, set.name, set.interval)).join(' . ');
}

/** A value of a key or data type, canonical: the rules' lookups (nft-rules.ts) build the same text from a packet. */
export function valueText(type: string | undefined, v: string, set: string, interval = false): string {
  const bad = (): never => fail(`${set}: ${JSON.stringify(v)} is not a ${type ?? '?'}`);
  if (interval && type !== 'numgen') {
    const range = rangeText(type, v, (x) => valueText(type, x, set));
    if (range !== undefined) return range;
  }
  switch (type) {
    case 'ipv4_addr':
    case 'ipv6_addr':
      return canonicalOr(v, type === 'ipv4_addr' ? 4 : 6) ?? bad();
    case 'ether_addr':
      return /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/i.test(v) ? v.toLowerCase() : bad();
    case 'inet_proto':
      return ['tcp', 'udp', 'sctp'].includes(v) ? v : bad();
    case 'inet_service':
      return /^\d+$/.test(v) && Number(v) <= 65535 ? String(Number(v)) : bad();
    case 'numgen': {
      const m = interval ? /^(\d+)-(\d+)$/.exec(v) : /^(\d+)$/.exec(v);
      if (m === null || Number(m[1]) > Number(m[2] ?? m[1]) || Number(m[2] ?? m[1]) > 0xffffffff) return bad();
      return v;
    }
    default:
      return bad();
  }
}

function canonicalOr(v: string, f: Family): string | undefined {
  try {
    return canonical(v, f);
  } catch {
    return undefined;
  }
}

function verdictWords(words: readonly string[]): string[] {
  if (words.length === 1 && ['accept', 'drop', 'return'].includes(words[0] ?? '')) return [...words];
  if (words.length === 2 && (words[0] === 'goto' || words[0] === 'jump')) return [...words];
  throw new Error(`verdict ${words.join(' ')} is not modelled`);
}

/** The chain a verdict element names must exist when the transaction ends. */
function verdictChain(t: NftTableState, d: readonly string[]): void {
  if ((d[0] === 'goto' || d[0] === 'jump') && !t.chains.has(d[1] ?? '')) throw new Error(`No such file or directory: chain ${d[1] ?? ''} (a map element's verdict)`);
}

function overlapCheck(set: NftSet, key: string): void {
  // Numbers (numgen ranges) only: address and port intervals are checked by the renderer's merge.
  if (set.key.join() !== 'numgen') return;
  const [a, b] = key.split('-').map(Number) as [number, number];
  for (const k of set.elements.keys()) {
    if (k === key) continue;
    const [c, d] = k.split('-').map(Number) as [number, number];
    if (a <= d && c <= b) throw new Error(`File exists: ${set.name}: interval ${key} overlaps ${k}`);
  }
}
