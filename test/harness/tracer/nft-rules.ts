/**
 * The nftables rule statements the fake understands, compiled from a rule's words into the walk's
 * conditions and action (walk.ts). Understood: `ip|ip6 saddr|daddr`, `ether saddr`, `meta l4proto`, `th|tcp|udp|sctp
 * dport`, `ct state`, `numgen random mod N [offset K]`, concatenations of them (`a . b . c`) against
 * a value, a named set (`@s`) or a verdict map (`vmap @m`); and the statements `dnat ip|ip6 to
 * <addr:port>` or `to numgen random mod M map @m`, `masquerade`, `reject [with ...]`, `update @s {
 * ip saddr }`, `accept`, `drop`, `return`, `jump`, `goto`, `counter`. Anything else throws.
 */
import { canonical, inPrefix, parseHostPort, parsePrefix } from './addr.js';
import type { NftSet, NftTableState } from './nftables.js';
import { elementCovers, ICMPV6_TYPES } from './nft-intervals.js';
import { outInterface, portion, type Action, type Branch, type Cond, type Effect, type Family, type Path, type RejectKind, type Rule, type Step } from './walk.js';

/** A compiled rule: what it names (checked when a transaction ends), and its walk form in a table. */
export interface NftRule {
  readonly text: string;
  readonly sets: readonly string[];
  readonly chains: readonly string[];
  check(t: NftTableState): void;
  bind(t: NftTableState, dynamic: ReadonlyMap<string, ReadonlySet<string>>, path: Path): Rule;
}

interface Ctx {
  readonly t: NftTableState;
  readonly dynamic: ReadonlyMap<string, ReadonlySet<string>>;
  readonly path: Path;
}

/** A packet field: its type (as a set declares it) and its value text, or undefined when the packet has none (an IPv4 field of an IPv6 packet). */
interface Selector {
  readonly text: string;
  readonly type: string;
  readonly value: (b: Branch, ctx: Ctx) => string | undefined;
  /** numgen: the modulus and offset. */
  readonly numgen?: { readonly mod: number; readonly offset: number };
}

type Part = (ctx: Ctx) => { cond?: Cond; action?: Action };
interface Compiled {
  readonly parts: Part[];
  readonly sets: { name: string; want: (s: NftSet) => string | undefined }[];
  readonly chains: string[];
  readonly counters: string[];
}

const addrField = (fam: Family, field: 'saddr' | 'daddr'): Selector => ({
  text: `${fam === 4 ? 'ip' : 'ip6'} ${field}`,
  type: fam === 4 ? 'ipv4_addr' : 'ipv6_addr',
  value: (b) => (b.pkt.family === fam ? canonical(field === 'saddr' ? b.pkt.src : b.pkt.dst, fam) : undefined),
});

/** Reads one selector at `w[i]`; returns it and the index after it, or undefined when `w[i]` starts none. */
function selector(w: readonly string[], i: number): [Selector, number] | undefined {
  const [a = '', b = ''] = [w[i], w[i + 1]];
  if ((a === 'ip' || a === 'ip6') && (b === 'saddr' || b === 'daddr')) return [addrField(a === 'ip' ? 4 : 6, b), i + 2];
  if (a === 'ether' && b === 'saddr')
    return [{ text: 'ether saddr', type: 'ether_addr', value: (x) => (x.pkt.srcMac ?? fail('trace: a rule matches the source MAC; give the packet a srcMac')).toLowerCase() }, i + 2];
  if (a === 'meta' && b === 'l4proto') return [{ text: 'meta l4proto', type: 'inet_proto', value: (x) => x.pkt.protocol }, i + 2];
  if (['th', 'tcp', 'udp', 'sctp'].includes(a) && b === 'dport')
    return [{ text: `${a} dport`, type: 'inet_service', value: (x) => (x.pkt.protocol !== 'icmpv6' && (a === 'th' || x.pkt.protocol === a) ? String(x.pkt.dport) : undefined) }, i + 2];
  if (a === 'ct' && b === 'state') return [{ text: 'ct state', type: 'ct_state', value: (x) => x.pkt.ct ?? 'new' }, i + 2];
  if (a === 'icmpv6' && b === 'type') return [{ text: 'icmpv6 type', type: 'icmpv6_type', value: (x) => (x.pkt.icmpv6Type === undefined ? undefined : String(x.pkt.icmpv6Type)) }, i + 2];
  if (a === 'ct' && b === 'status') return [{ text: 'ct status', type: 'ct_status', value: (x) => (x.dnat !== undefined ? 'dnat' : 'none') }, i + 2];
  if (a === 'iifname') return [{ text: a, type: 'ifname', value: (x) => x.pkt.iif ?? fail('trace: a rule matches the input interface; give the packet an iif') }, i + 1];
  if (a === 'oifname') return [{ text: a, type: 'ifname', value: (x, ctx) => outInterface(ctx.path, x) }, i + 1];
  if (a === 'numgen') {
    if (b !== 'random' || w[i + 2] !== 'mod') throw new Error('only "numgen random mod N" is modelled');
    const mod = Number(w[i + 3]);
    if (!Number.isInteger(mod) || mod < 1 || mod > 0xffffffff) throw new Error(`numgen modulus ${w[i + 3] ?? ''}`);
    let j = i + 4;
    let offset = 0;
    if (w[j] === 'offset') {
      offset = Number(w[j + 1]);
      j += 2;
    }
    return [{ text: `numgen random mod ${mod}`, type: 'numgen', value: () => undefined, numgen: { mod, offset } }, j];
  }
  return undefined;
}

const keyOf = (sels: readonly Selector[], b: Branch, ctx: Ctx): string | undefined => {
  const vals = sels.map((s) => s.value(b, ctx));
  return vals.some((v) => v === undefined) ? undefined : vals.join(' . ');
};

function wantKey(sels: readonly Selector[], kind: 'set' | 'map', data?: readonly string[]): (s: NftSet) => string | undefined {
  return (s) => {
    if (s.kind !== kind) return `${s.name} is a ${s.kind}, not a ${kind}`;
    if (s.key.join(' . ') !== sels.map((x) => x.type).join(' . ')) return `${s.name} has key ${s.key.join(' . ')}, the rule looks up ${sels.map((x) => x.type).join(' . ')}`;
    if (data !== undefined && s.data.join(' . ') !== data.join(' . ')) return `${s.name} has data ${s.data.join(' . ')}, the rule needs ${data.join(' . ')}`;
    return undefined;
  };
}

/** Elements of a set (and, for a dynamic one, the clients added by connections, this walk's too). */
function has(ctx: Ctx, set: string, key: string, effects: readonly Effect[]): boolean {
  const s = ctx.t.sets.get(set);
  const list = `${ctx.t.family} ${ctx.t.name} ${set}`;
  if (s?.interval === true) for (const e of s.elements.keys()) if (elementCovers(s.key, e, key)) return true;
  return s?.elements.has(key) === true || ctx.dynamic.get(list)?.has(key) === true || effects.some((e) => e.list === list && e.key === key);
}

function verdictStep(d: readonly string[]): Step {
  if (d[0] === 'goto' || d[0] === 'jump') return { k: d[0], chain: d[1] as string };
  return { k: d[0] as 'accept' | 'drop' | 'return' };
}

/** A concatenation of selectors and what follows it: a value, `@set`, or `vmap @map`. */
function relation(w: readonly string[], i0: number, c: Compiled): number {
  const sels: Selector[] = [];
  let i = i0;
  for (;;) {
    const s = selector(w, i);
    if (s === undefined) throw new Error(`"${w.slice(i, i + 2).join(' ') || 'end'}" is not modelled: no packet field or statement the fake knows starts there`);
    sels.push(s[0]);
    i = s[1];
    if (w[i] !== '.') break;
    i += 1;
  }
  const next = w[i] ?? '';
  if (sels.some((s) => s.numgen !== undefined) && (sels.length > 1 || next.startsWith('@') || next === 'vmap')) throw new Error('numgen is modelled alone, against a value');
  if (next === 'vmap') {
    const name = (w[i + 1] ?? '').slice(1);
    if (!(w[i + 1] ?? '').startsWith('@')) throw new Error('only a named verdict map (vmap @name) is modelled');
    c.sets.push({ name, want: wantKey(sels, 'map', ['verdict']) });
    c.parts.push((ctx) => ({
      action: (b) => {
        const key = keyOf(sels, b, ctx);
        const d = key === undefined ? undefined : ctx.t.sets.get(name)?.elements.get(key);
        return [[b, d === undefined ? 'nomatch' : verdictStep(d)]];
      },
    }));
    return i + 2;
  }
  if (next.startsWith('@')) {
    const name = next.slice(1);
    c.sets.push({ name, want: wantKey(sels, 'set') });
    c.parts.push((ctx) => ({ cond: (b) => [[b, ((k) => k !== undefined && has(ctx, name, k, b.effects))(keyOf(sels, b, ctx))]] }));
    return i + 1;
  }
  const anon = anonymousSet(sels, w, i, c);
  if (anon !== undefined) return anon;
  const neg = next === '!=';
  const raw = neg ? w[i + 1] : next;
  if (raw === undefined || raw === '{' || sels.length !== 1) throw new Error(`a comparison of ${sels.map((s) => s.text).join(' . ')} with ${raw ?? 'nothing'} is not modelled`);
  const sel = sels[0] as Selector;
  const ng = sel.numgen;
  if (ng !== undefined) {
    const v = Number(raw);
    if (!Number.isInteger(v)) throw new Error(`numgen compared with ${raw}`);
    const hit = v >= ng.offset && v < ng.offset + ng.mod ? 1 / ng.mod : 0;
    const p = neg ? 1 - hit : hit;
    c.parts.push(() => ({
      cond: (b) => [
        [portion(b, p), true],
        [portion(b, 1 - p), false],
      ],
    }));
  } else if ((sel.type === 'ipv4_addr' || sel.type === 'ipv6_addr') && raw.includes('/')) {
    const p = parsePrefix(raw);
    const fam: Family = sel.type === 'ipv4_addr' ? 4 : 6;
    if (p.family !== fam) throw new Error(`${sel.text} compared with ${raw}, of the other family`);
    c.parts.push((ctx) => ({ cond: (b) => [[b, ((v) => v !== undefined && inPrefix(p, v, fam) !== neg)(sel.value(b, ctx))]] }));
  } else {
    const want = literal(sel, raw);
    c.parts.push((ctx) => ({ cond: (b) => [[b, ((v) => v !== undefined && (v === want) !== neg)(sel.value(b, ctx))]] }));
  }
  return i + (neg ? 2 : 1);
}

/**
 * `ct state a,b` (a list of states) and `icmpv6 type { t, ... }` (an anonymous set of types): the
 * index after it, or undefined when `w[i]` starts neither.
 */
function anonymousSet(sels: readonly Selector[], w: readonly string[], i: number, c: Compiled): number | undefined {
  const sel = sels[0];
  if (sels.length !== 1 || sel === undefined) return undefined;
  let values: string[] = [];
  let end: number;
  if (sel.type === 'ct_state' && w[i + 1] === ',') {
    values.push(w[i] ?? '');
    end = i + 1;
    while (w[end] === ',') {
      values.push(w[end + 1] ?? '');
      end += 2;
    }
    for (const v of values) if (!['new', 'established', 'related', 'invalid', 'untracked'].includes(v)) throw new Error(`ct state ${v} is not modelled`);
  } else if (sel.type === 'icmpv6_type' && w[i] === '{') {
    const close = w.indexOf('}', i);
    if (close < 0) throw new Error('icmpv6 type { without }');
    values = w
      .slice(i + 1, close)
      .filter((x) => x !== ',')
      .map((x) => String(ICMPV6_TYPES[x] ?? (/^\d+$/.test(x) ? Number(x) : fail(`icmpv6 type ${x} is not modelled`))));
    end = close + 1;
  } else return undefined;
  const want = new Set(values);
  c.parts.push((ctx) => ({ cond: (b) => [[b, ((v) => v !== undefined && want.has(v))(sel.value(b, ctx))]] }));
  return end;
}

function literal(sel: Selector, raw: string): string {
  if (sel.type === 'ipv4_addr' || sel.type === 'ipv6_addr') return canonical(raw, sel.type === 'ipv4_addr' ? 4 : 6);
  if (sel.type === 'inet_proto' && ['tcp', 'udp', 'sctp'].includes(raw)) return raw;
  if (sel.type === 'inet_service' && /^\d+$/.test(raw)) return String(Number(raw));
  if (sel.type === 'ct_state' && raw === 'new') return raw;
  if (sel.type === 'ct_status' && raw === 'dnat') return raw;
  if (sel.type === 'ifname' && /^[A-Za-z0-9_.-]{1,15}$/.test(raw)) return raw;
  throw new Error(`${sel.text} compared with ${JSON.stringify(raw)} is not modelled`);
}

const REJECTS: Readonly<Record<string, RejectKind>> = {
  'with tcp reset': 'tcp-reset',
  'with icmpx port-unreachable': 'port-unreachable',
  'with icmp port-unreachable': 'port-unreachable',
  'with icmpv6 port-unreachable': 'port-unreachable',
  '': 'port-unreachable',
};

/** A statement at `w[i]`; returns the index after it, or undefined when `w[i]` is no statement. */
function statement(w: readonly string[], i: number, c: Compiled): number | undefined {
  const word = w[i];
  const step =
    (s: Step): Part =>
    () => ({ action: (b) => [[b, s]] });
  switch (word) {
    case 'accept':
    case 'drop':
    case 'return':
      c.parts.push(step({ k: word }));
      return i + 1;
    case 'jump':
    case 'goto': {
      const chain = w[i + 1] ?? '';
      c.chains.push(chain);
      c.parts.push(step({ k: word, chain }));
      return i + 2;
    }
    case 'counter':
      // A named counter (an object of the table) counts; the walk has nothing to do.
      if (w[i + 1] === 'name') {
        c.counters.push(w[i + 2] ?? '');
        return i + 3;
      }
      return i + 1;
    case 'meta':
      return w[i + 1] === 'mark' ? metaMark(w, i, c) : undefined;
    case 'masquerade':
      c.parts.push(() => ({ action: (b) => [[{ ...b, masquerade: true }, { k: 'accept' }]] }));
      return i + 1;
    case 'reject': {
      const rest = w[i + 1] === 'with' ? `with ${w[i + 2] ?? ''}${w[i + 2] === 'tcp' ? ` ${w[i + 3] ?? ''}` : ` ${w[i + 3] ?? ''}`}`.trim() : '';
      const kind = REJECTS[rest];
      if (kind === undefined) throw new Error(`reject ${rest} is not modelled`);
      c.parts.push(step({ k: 'reject', with: kind }));
      return i + 1 + (rest === '' ? 0 : 3);
    }
    case 'update': {
      const name = (w[i + 1] ?? '').slice(1);
      const inner = w.slice(i + 2, i + 6).join(' ');
      const m = /^\{ (ip|ip6) saddr \}$/.exec(inner);
      if (!(w[i + 1] ?? '').startsWith('@') || m === null) throw new Error(`update ${w.slice(i + 1, i + 6).join(' ')} is not modelled`);
      const sel = addrField(m[1] === 'ip' ? 4 : 6, 'saddr');
      c.sets.push({ name, want: (s) => (s.dynamic ? wantKey([sel], 'set')(s) : `${name} is not a dynamic set`) });
      c.parts.push((ctx) => ({
        cond: (b) => {
          const key = sel.value(b, ctx);
          return key === undefined ? [[b, false]] : [[{ ...b, effects: [...b.effects, { list: `${ctx.t.family} ${ctx.t.name} ${name}`, key }] }, true]];
        },
      }));
      return i + 6;
    }
    case 'dnat':
      return dnat(w, i, c);
    default:
      return undefined;
  }
}

/** `meta mark set meta mark | BITS` (sets bits), or `meta mark & MASK ==|!= VALUE` (a condition). */
function metaMark(w: readonly string[], i: number, c: Compiled): number {
  const num = (x: string | undefined): number => (x !== undefined && /^(0x[0-9a-f]+|\d+)$/i.test(x) ? Number(x) : fail(`meta mark: ${x ?? 'nothing'} is not a number`));
  if (w[i + 2] === 'set') {
    if (w[i + 3] !== 'meta' || w[i + 4] !== 'mark' || w[i + 5] !== '|') throw new Error('only "meta mark set meta mark | BITS" is modelled');
    const bits = num(w[i + 6]);
    c.parts.push(() => ({ cond: (b) => [[{ ...b, mark: (b.mark | bits) >>> 0 }, true]] }));
    return i + 7;
  }
  if (w[i + 2] !== '&' || (w[i + 4] !== '==' && w[i + 4] !== '!=')) throw new Error('only "meta mark & MASK ==|!= VALUE" is modelled');
  const mask = num(w[i + 3]);
  const value = num(w[i + 5]);
  const eq = w[i + 4] === '==';
  c.parts.push(() => ({ cond: (b) => [[b, ((b.mark & mask) >>> 0 === value) === eq]] }));
  return i + 6;
}

function dnat(w: readonly string[], i: number, c: Compiled): number {
  const fam: Family = w[i + 1] === 'ip' ? 4 : w[i + 1] === 'ip6' ? 6 : fail(`dnat ${w[i + 1] ?? ''}: name the family (ip or ip6)`);
  if (w[i + 2] !== 'to') throw new Error('dnat needs "to"');
  const to = (b: Branch, ip: string, port: number): Branch => ({ ...b, dnat: { ip, port }, pkt: { ...b.pkt, dst: ip, dport: port } });
  if (w[i + 3] === 'numgen') {
    const s = selector(w, i + 3);
    const ng = s?.[0].numgen;
    const j = s?.[1] ?? i;
    if (ng === undefined || w[j] !== 'map' || !(w[j + 1] ?? '').startsWith('@')) throw new Error('dnat to numgen: only "numgen random mod M map @m" is modelled');
    const name = (w[j + 1] as string).slice(1);
    c.sets.push({
      name,
      want: (m) =>
        m.kind === 'map' && m.interval && m.key.join() === 'numgen' && m.data.join(' . ') === `${fam === 4 ? 'ipv4_addr' : 'ipv6_addr'} . inet_service`
          ? undefined
          : `${name} is not an interval map of numgen to address . port`,
    });
    c.parts.push((ctx) => ({
      action: (b) => {
        if (b.pkt.family !== fam) return [[b, 'nomatch']];
        const out: [Branch, Step | 'nomatch'][] = [];
        let covered = 0;
        for (const [k, d] of ctx.t.sets.get(name)?.elements ?? []) {
          const [lo, hi] = k.split('-').map(Number) as [number, number];
          const from = Math.max(lo, ng.offset);
          const until = Math.min(hi, ng.offset + ng.mod - 1);
          if (until < from) continue;
          const share = (until - from + 1) / ng.mod;
          covered += share;
          out.push([to(portion(b, share), d[0] as string, Number(d[1])), { k: 'accept' }]);
        }
        // A value no element covers: the lookup fails and the rule does not match.
        if (covered < 1 - 1e-12) out.push([portion(b, 1 - covered), 'nomatch']);
        return out;
      },
    }));
    return j + 2;
  }
  const ep = parseHostPort(w[i + 3] ?? '', fam);
  c.parts.push(() => ({ action: (b) => [[b.pkt.family === fam ? to(b, ep.ip, ep.port) : b, b.pkt.family === fam ? { k: 'accept' } : 'nomatch']] }));
  return i + 4;
}

const fail = (msg: string): never => {
  throw new Error(msg);
};

export function compileRule(words: readonly string[]): NftRule {
  const c: Compiled = { parts: [], sets: [], chains: [], counters: [] };
  let i = 0;
  let terminal = false;
  while (i < words.length) {
    if (terminal) throw new Error(`"${words[i] ?? ''}" after the rule's verdict`);
    if (words[i] === 'comment') {
      i += 2;
      continue;
    }
    const before = c.parts.length;
    const after = statement(words, i, c) ?? relation(words, i, c);
    // A part that ends the chain's walk (a verdict, dnat, masquerade) must come last.
    terminal = c.parts.length > before && (['accept', 'drop', 'return', 'jump', 'goto', 'reject', 'dnat', 'masquerade'].includes(words[i] ?? '') || words.slice(i, after).includes('vmap'));
    i = after;
  }
  const text = words.join(' ');
  return {
    text,
    sets: c.sets.map((s) => s.name),
    chains: c.chains,
    check(t) {
      for (const s of c.sets) {
        const set = t.sets.get(s.name);
        if (set === undefined) throw new Error(`No such file or directory: set ${s.name} (in rule ${JSON.stringify(text)} of table ${t.name})`);
        const why = s.want(set);
        if (why !== undefined) throw new Error(`${why} (in rule ${JSON.stringify(text)})`);
      }
      for (const ch of c.chains) if (!t.chains.has(ch)) throw new Error(`No such file or directory: chain ${ch} (in rule ${JSON.stringify(text)} of table ${t.name})`);
      for (const n of c.counters) if (t.counters?.has(n) !== true) throw new Error(`No such file or directory: counter ${n} (in rule ${JSON.stringify(text)} of table ${t.name})`);
    },
    bind(t, dynamic, path) {
      const ctx: Ctx = { t, dynamic, path };
      const built = c.parts.map((p) => p(ctx));
      const last = built[built.length - 1];
      const action: Action = last?.action ?? ((b) => [[b, { k: 'next' }]]);
      const conds = built.filter((p) => p !== last || p.action === undefined).flatMap((p) => (p.cond === undefined ? [] : [p.cond]));
      if (built.some((p) => p !== last && p.action !== undefined)) throw new Error(`rule ${JSON.stringify(text)}: a verdict before its end`);
      return { text, conds, action };
    },
  };
}
