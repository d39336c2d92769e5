/**
 * The packet walk shared by both fake back ends: a connection's first packet goes through base
 * chains in hook order, rule by rule, and every random choice (iptables `statistic`, nftables
 * `numgen`) splits the walk into branches that each carry their share. The answer is every way the
 * packet can end, with its share, so a test can ask "which endpoints, in which shares" of one text.
 *
 * Each fake compiles its rules into the Rule shape below; nothing here knows either syntax.
 */

export type Family = 4 | 6;
export type L4 = 'tcp' | 'udp' | 'sctp';

/** The first packet of a new connection. */
export interface Packet {
  readonly family: Family;
  /** `icmpv6` with `icmpv6Type` (neighbour discovery), else the transport protocol. */
  readonly protocol: L4 | 'icmpv6';
  readonly src: string;
  readonly dst: string;
  readonly dport: number;
  /** Its source MAC as it arrived (rules matching `ether saddr` need it). */
  readonly srcMac?: string;
  /** The interface it came in on (the prerouting path; rules matching it need it). */
  readonly iif?: string;
  /** Its conntrack state (`ct state`); absent: a new connection's first packet. */
  readonly ct?: 'new' | 'established' | 'related';
  readonly icmpv6Type?: number;
}

/** Where a traced packet starts, and what routing would decide for it (which the fakes do not model). */
export interface Path {
  /** `output`: sent by a process in the namespace; `prerouting`: arriving from outside. */
  readonly hook: 'output' | 'prerouting';
  /** The namespace's own addresses: after prerouting, a packet to one is delivered (input), any other forwarded. */
  readonly local?: readonly string[];
  /** The interface a destination is routed out of (rules matching the output interface need it). */
  readonly route?: (dst: string) => string;
}

/** How a refused packet is answered: a TCP reset, or ICMP(v6) port unreachable. */
export type RejectKind = 'tcp-reset' | 'port-unreachable';

export type Verdict =
  | { readonly kind: 'dnat'; readonly ip: string; readonly port: number; readonly masquerade: boolean }
  | { readonly kind: 'accept'; readonly masquerade: boolean }
  | { readonly kind: 'reject'; readonly with: RejectKind }
  | { readonly kind: 'drop' };

/** Something a walk leaves behind when its connection is made: a client remembered in an affinity list or set. */
export interface Effect {
  readonly list: string;
  readonly key: string;
}

/** One way the packet can end. */
export interface Outcome {
  readonly verdict: Verdict;
  /** Its probability; the outcomes of one trace add up to 1. */
  readonly share: number;
  readonly effects: readonly Effect[];
  /** The rules it went through (`<chain>: <rule text>`), for failure messages. */
  readonly trail: readonly string[];
}

/** A packet on one branch of the walk. */
export interface Branch {
  readonly pkt: Packet;
  readonly share: number;
  readonly effects: readonly Effect[];
  readonly trail: readonly string[];
  readonly dnat?: { readonly ip: string; readonly port: number };
  readonly masquerade: boolean;
  /** The packet mark (meta mark, -j MARK). */
  readonly mark: number;
}

/** What a rule does when it matches: go on, or end the chain in some way. */
export type Step =
  { readonly k: 'next' } | { readonly k: 'jump' | 'goto'; readonly chain: string } | { readonly k: 'accept' | 'drop' | 'return' } | { readonly k: 'reject'; readonly with: RejectKind };

/** A condition splits a branch into the parts that match and those that do not. */
export type Cond = (b: Branch) => readonly (readonly [Branch, boolean])[];
/** A matched rule's action: the branches it leaves and how each goes on (an action may still not match, as a map lookup that misses). */
export type Action = (b: Branch) => readonly (readonly [Branch, Step | 'nomatch'])[];

export interface Rule {
  readonly text: string;
  readonly conds: readonly Cond[];
  readonly action: Action;
}

export interface Chains {
  /** A chain's rules; throws for a chain that does not exist. */
  rules(chain: string): readonly Rule[];
}

export type End = 'accept' | 'drop' | 'continue' | { readonly reject: RejectKind };

/** A condition that never splits. */
export const when =
  (test: (b: Branch) => boolean): Cond =>
  (b) => [[b, test(b)]];

/** A branch taking `part` of this one's share. */
export const portion = (b: Branch, part: number): Branch => ({ ...b, share: b.share * part });

const MAX_DEPTH = 64;

/** Runs `chain` for each branch; a branch that falls off the end or returns ends 'continue'. */
export function runChain(chains: Chains, chain: string, start: Branch, depth = 0): [Branch, End][] {
  if (depth > MAX_DEPTH) throw new Error(`trace: more than ${MAX_DEPTH} nested chains at ${chain}: a loop?`);
  const out: [Branch, End][] = [];
  const rules = chains.rules(chain);
  // Work list of (branch, index of the next rule).
  const work: [Branch, number][] = [[start, 0]];
  while (work.length > 0) {
    const [b, i] = work.pop() as [Branch, number];
    const rule = rules[i];
    if (rule === undefined) {
      out.push([b, 'continue']);
      continue;
    }
    let matching: Branch[] = [b];
    for (const cond of rule.conds) {
      const next: Branch[] = [];
      for (const m of matching)
        for (const [part, ok] of cond(m)) {
          if (part.share <= 0) continue;
          if (ok) next.push(part);
          else work.push([part, i + 1]);
        }
      matching = next;
    }
    for (const m of matching)
      for (const [part, step] of rule.action({ ...m, trail: [...m.trail, `${chain}: ${rule.text}`] })) {
        if (part.share <= 0) continue;
        if (step === 'nomatch') work.push([{ ...part, trail: m.trail }, i + 1]);
        else follow(chains, part, step, i, depth, work, out);
      }
  }
  return out;
}

function follow(chains: Chains, b: Branch, step: Step, i: number, depth: number, work: [Branch, number][], out: [Branch, End][]): void {
  switch (step.k) {
    case 'next':
      work.push([b, i + 1]);
      return;
    case 'accept':
    case 'drop':
      out.push([b, step.k]);
      return;
    case 'return':
      out.push([b, 'continue']);
      return;
    case 'reject':
      out.push([b, { reject: step.with }]);
      return;
    case 'jump':
    case 'goto':
      for (const [sub, end] of runChain(chains, step.chain, b, depth + 1)) {
        // A jump comes back to the next rule; a goto's chain ending ends this chain too.
        if (end === 'continue' && step.k === 'jump') work.push([sub, i + 1]);
        else out.push([sub, end]);
      }
  }
}

/** One base chain of a hook: where it sits (lower priority first) and its policy. */
export interface BaseChain {
  readonly name: string;
  readonly chains: Chains;
  readonly priority: number;
  /** nat chains see only a connection's first packet, which is what is traced. */
  readonly nat: boolean;
  readonly policy: 'accept' | 'drop';
}

/**
 * Runs the hooks' base chains in order and turns each branch's end into a verdict. A phase is base
 * chains already in order, or a function choosing them for a branch (after prerouting: input or
 * forward, by the branch's destination after DNAT).
 */
export function runHooks(phases: readonly (readonly BaseChain[] | ((b: Branch) => readonly BaseChain[]))[], pkt: Packet, seed: readonly Effect[] = []): Outcome[] {
  let live: Branch[] = [{ pkt, share: 1, effects: seed, trail: [], masquerade: false, mark: 0 }];
  const done: Outcome[] = [];
  for (const phase of phases) {
    const next: Branch[] = [];
    for (const start of live) {
      let here: Branch[] = [start];
      for (const base of typeof phase === 'function' ? phase(start) : phase) {
        const after: Branch[] = [];
        for (const b of here)
          for (const [out, end] of runChain(base.chains, base.name, b)) {
            const e = end === 'continue' ? base.policy : end;
            if (e === 'accept') after.push(out);
            else done.push(finish(out, e === 'drop' ? { kind: 'drop' } : { kind: 'reject', with: e.reject }, seed.length));
          }
        here = after;
      }
      next.push(...here);
    }
    live = next;
  }
  for (const b of live)
    done.push(finish(b, b.dnat !== undefined ? { kind: 'dnat', ip: b.dnat.ip, port: b.dnat.port, masquerade: b.masquerade } : { kind: 'accept', masquerade: b.masquerade }, seed.length));
  return done;
}

/** Whether a branch's packet (after any DNAT) is for the namespace itself. */
export function isLocal(path: Path, b: Branch, canon: (ip: string) => string): boolean {
  // Only addresses of the packet's family can be its destination.
  return (path.local ?? []).some((a) => a.includes(':') === (b.pkt.family === 6) && canon(a) === canon(b.pkt.dst));
}

/** The interface routing would send a branch's packet out of: the caller's answer, or an error (never a guess). */
export function outInterface(path: Path | undefined, b: Branch): string {
  if (path?.route === undefined) throw new Error('trace: a rule matches the output interface; give the trace a route');
  return path.route(b.pkt.dst);
}

function finish(b: Branch, verdict: Verdict, seeded: number): Outcome {
  return { verdict, share: b.share, effects: b.effects.slice(seeded), trail: b.trail };
}

/** The same verdicts merged, their shares added, in a stable order. */
export function summarize(outcomes: readonly Outcome[]): { readonly verdict: Verdict; readonly share: number }[] {
  const by = new Map<string, { verdict: Verdict; share: number }>();
  for (const o of outcomes) {
    const key = JSON.stringify(o.verdict);
    const had = by.get(key);
    if (had === undefined) by.set(key, { verdict: o.verdict, share: o.share });
    else had.share += o.share;
  }
  return [...by.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, v]) => v);
}
