/**
 * Sharding the sidecar's nftables table: does confining the kernel's validation to one of S tables
 * bring a one-endpoint change at 10,000 Services to the target (p50 ≤ 5 ms, p99 ≤ 10 ms),
 * and what does it cost? Not a numbered benchmark: a probe, run by hand, whose figures are in
 * docs/decisions/0025-nft-shard-tables.md. Side by side in one run, round-robin, in throw-away
 * namespaces. Layout per S (Service i in shard i mod S):
 *
 *   table inet mpxr        the no-endpoints set, reject chain and filter-output hook (elements only: never validated)
 *   table inet mpx<k>      k < S: its own nat-output hook, services map and the Service chains of its share
 *
 * S = 1 is this layout with one shard; "today" is render.ts's single table. Per layout and transport
 * (`nft -f` spawned per change through nsenter, a pre-spawned `nft -f -` waiting for its input,
 * a kept-open `nft -i`): the change is `flush chain` + `add chain <c> { rules }` in the Service's
 * shard (the adopted shape B). Then the full load of each layout (one `nft -f`), and with
 * `--first-packet` the new-connection rate through a cluster IP and direct (as B10) per layout at
 * 1,000 and 30,000 Services × 2 endpoints.
 *
 * First, nft's own cost per table in the namespace (a counter chain rewritten among T tables).
 *
 *   node --import tsx bench/nft-shards.ts [services=10000] [rounds=40] [--first-packet]
 */
import { spawn } from 'node:child_process';
import { render } from '../src/dataplane/core/incremental.js';
import { fullText, renderNft, type NftTarget } from '../src/dataplane/nftables/render.js';
import { CLIENT_INTERFACE, SERVICE_PORT, TARGET_PORT, clusterIP, desiredState, endpointIP } from './lib/services.js';
import { createNetns } from './lib/netns.js';
import { run, withCleanup, type Cleanup } from './lib/proc.js';
import { fmt, summarize } from '../test/harness/stats.js';
import { NftInteractive } from './lib/nft-interactive.js';
import { createTrafficPair } from './lib/traffic-pair.js';
import { wrk } from './lib/wrk.js';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const services = Number(args[0] ?? 10000);
const rounds = Number(args[1] ?? 40);
const firstPacket = process.argv.includes('--first-packet');
const SHARDS = [1, 2, 4, 8, 16, 32, 64];
/** The first-packet part's S: none, a few, many (and the data-map layout). */
const FIRST_PACKET_SHARDS = [1, 8, 64];

const enter = (ns: string): string[] => ['nsenter', `--net=/run/netns/${ns}`];
const loadavg = async (): Promise<string> => (await run('cat', ['/proc/loadavg'])).stdout.trim().split(' ').slice(0, 3).join(' ');

/** The layout's whole text: root table and S shard tables, each replaced whole. */
function shardedText(targets: readonly NftTarget[], shards: number): string {
  const out: string[] = [];
  const replace = (t: string): void => void out.push(`add table inet ${t}`, `delete table inet ${t}`);
  replace('mpxr');
  out.push(
    'table inet mpxr {',
    '\tset no-endpoints-v4 { type ipv4_addr . inet_proto . inet_service; }',
    '\tchain reject-chain {',
    '\t\tmeta l4proto tcp reject with tcp reset',
    '\t\treject with icmpx port-unreachable',
    '\t}',
  );
  out.push('\tchain filter-output {', '\t\ttype filter hook output priority 0; policy accept;', '\t\tct state new ip daddr . meta l4proto . th dport @no-endpoints-v4 goto reject-chain', '\t}', '}');
  for (let k = 0; k < shards; k++) {
    const mine = targets.filter((_, i) => i % shards === k);
    replace(`mpx${k}`);
    out.push(`table inet mpx${k} {`);
    for (const t of mine) out.push(`\tchain ${t.chain} {`, ...t.rules.map((r) => `\t\t${r}`), '\t}');
    out.push('\tmap services-v4 {', '\t\ttype ipv4_addr . inet_proto . inet_service : verdict');
    if (mine.length > 0) out.push(`\t\telements = { ${mine.map((t) => `${t.key} : goto ${t.chain}`).join(',\n')} }`);
    out.push('\t}', '\tchain nat-output {', '\t\ttype nat hook output priority -100; policy accept;', '\t\tip daddr . meta l4proto . th dport vmap @services-v4', '\t}', '}');
  }
  return `${out.join('\n')}\n`;
}

/**
 * The endpoints as elements of one data map instead of DNAT rules: Service i's chain holds one rule
 * `dnat ip to numgen random mod N offset B_i map @endpoints-v4`, the map (B_i + j) : address . port.
 * Replacing an endpoint is an element change on a map whose data are not verdicts: the kernel
 * validates nothing. (Only the probe: not the adopted layout.)
 */
function dataMapText(targets: readonly NftTarget[]): { text: string; base: number[]; endpoints: string[][] } {
  const base: number[] = [];
  const endpoints: string[][] = [];
  let next = 0;
  const chains: string[] = [];
  const elements: string[] = [];
  for (const t of targets) {
    const eps = t.rules.map((r) => /ip to (\S+):(\d+)/.exec(r)).flatMap((m) => (m?.[1] !== undefined && m[2] !== undefined ? [`${m[1]} . ${m[2]}`] : []));
    base.push(next);
    endpoints.push(eps);
    for (const [j, e] of eps.entries()) elements.push(`${next + j} : ${e}`);
    chains.push(`\tchain ${t.chain} {`, `\t\tmeta l4proto tcp dnat ip to numgen random mod ${eps.length} offset ${next} map @endpoints-v4`, '\t}');
    next += eps.length;
  }
  const out = [
    'add table inet mpxd',
    'delete table inet mpxd',
    'table inet mpxd {',
    '\tmap endpoints-v4 {',
    '\t\ttypeof numgen random mod 1 : ip daddr . tcp dport',
    `\t\telements = { ${elements.join(',\n')} }`,
    '\t}',
    ...chains,
  ];
  out.push('\tmap services-v4 {', '\t\ttype ipv4_addr . inet_proto . inet_service : verdict', `\t\telements = { ${targets.map((t) => `${t.key} : goto ${t.chain}`).join(',\n')} }`, '\t}');
  out.push('\tchain nat-output {', '\t\ttype nat hook output priority -100; policy accept;', '\t\tip daddr . meta l4proto . th dport vmap @services-v4', '\t}', '}');
  return { text: `${out.join('\n')}\n`, base, endpoints };
}

async function nftFile(ns: string, text: string): Promise<number> {
  const r = await run(enter(ns)[0] ?? 'nsenter', [...enter(ns).slice(1), 'nft', '-f', '-'], { input: text });
  return r.ms;
}

/** A `nft -f -` started ahead of time, waiting for its input: the spawn is off the change's path. */
class Prespawned {
  private next: { write: (text: string) => Promise<number> } | undefined;
  constructor(private readonly ns: string) {
    this.next = this.spawnOne();
  }
  private spawnOne(): { write: (text: string) => Promise<number> } {
    const child = spawn('nsenter', [...enter(this.ns).slice(1), 'nft', '-f', '-'], { stdio: ['pipe', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    return {
      write: async (text) => {
        const t0 = process.hrtime.bigint();
        child.stdin.end(text);
        const code = await exited;
        const ms = Number(process.hrtime.bigint() - t0) / 1e6;
        if (code !== 0) throw new Error(`nft -f: ${err}`);
        return ms;
      },
    };
  }
  async send(text: string): Promise<number> {
    const p = this.next ?? this.spawnOne();
    const ms = await p.write(text);
    this.next = this.spawnOne();
    return ms;
  }
  close(): void {
    void this.next?.write('').catch(() => undefined);
  }
}

/**
 * nft's own cost per table in the namespace, apart from the kernel's validation: a change of a
 * counter-only chain (nothing to validate) in a namespace of T tables of one such chain each.
 */
async function perTableCost(cleanup: Cleanup): Promise<void> {
  const counts = [1, 16, 64, 256];
  const nss: { t: number; ns: string; ms: number[] }[] = [];
  for (const t of counts) {
    const ns = await createNetns(`pt${t}`, cleanup);
    await nftFile(ns, Array.from({ length: t }, (_, k) => `table inet t${k} { chain c { counter; }; }\n`).join(''));
    nss.push({ t, ns, ms: [] });
  }
  for (let r = 0; r <= 10; r++)
    for (const c of nss) {
      const ms = await nftFile(c.ns, 'flush chain inet t0 c\nadd chain inet t0 c { counter; }\n');
      if (r > 0) c.ms.push(ms);
    }
  process.stdout.write(
    `\nnft's cost per table (no validation: a counter chain rewritten, nft -f spawned), load average ${await loadavg()}\n\n| tables in the namespace | p50 ms | min ms |\n|---|---|---|\n`,
  );
  for (const c of nss) process.stdout.write(`| ${c.t} | ${fmt(summarize(c.ms).median)} | ${fmt(summarize(c.ms).min)} |\n`);
}

interface Layout {
  readonly name: string;
  readonly shards: number | 'today' | 'data map';
}

async function changeCost(cleanup: Cleanup): Promise<void> {
  const ruleset = renderNft(render(desiredState(services, 10)).resolution.targets);
  const targets = [...ruleset.targets.values()];
  const layouts: Layout[] = [
    { name: 'today (one table)', shards: 'today' },
    ...SHARDS.map((s) => ({ name: `S = ${s}`, shards: s })),
    { name: 'endpoints in one data map (one table)', shards: 'data map' },
  ];
  const dm = dataMapText(targets);
  const textOf = (l: Layout): string => (l.shards === 'today' ? fullText(ruleset) : l.shards === 'data map' ? dm.text : shardedText(targets, l.shards));
  const tableOf = (l: Layout, i: number): string => (l.shards === 'today' ? 'inet multus_proxy' : `inet mpx${typeof l.shards === 'number' ? i % l.shards : 0}`);
  const env: { l: Layout; ns: string; i: NftInteractive; p: Prespawned }[] = [];
  const full = new Map<string, number[]>();
  for (const l of layouts) {
    const ns = await createNetns(`sh${l.shards}`, cleanup);
    full.set(l.name, [await nftFile(ns, textOf(l))]);
    const i = new NftInteractive(enter(ns));
    const p = new Prespawned(ns);
    cleanup.add(`nft processes ${l.name}`, () => {
      i.close();
      p.close();
    });
    env.push({ l, ns, i, p });
  }
  /** Change g: endpoint 0 of Service (g·997 mod n) gets a new address. */
  const change = (l: Layout, g: number): string[] => {
    const i = (g * 997) % services;
    const t = targets[i];
    if (t === undefined) throw new Error(`no target ${i}`);
    const rules = t.rules.map((r, j) => (j === 0 ? r.replace(/ip to \S+/, `ip to 10.101.${(g >> 8) & 255}.${g & 255}:8080`) : r));
    if (l.shards === 'data map') {
      const key = dm.base[i] ?? 0;
      return [`delete element inet mpxd endpoints-v4 { ${key} }`, `add element inet mpxd endpoints-v4 { ${key} : 10.101.${(g >> 8) & 255}.${g & 255} . 8080 }`];
    }
    const T = tableOf(l, i);
    return [`flush chain ${T} ${t.chain}`, `add chain ${T} ${t.chain} { ${rules.join('; ')}; }`];
  };
  const samples = new Map<string, number[]>();
  const add = (k: string, ms: number): void => void (samples.get(k) ?? samples.set(k, []).get(k))?.push(ms);
  const loads: string[] = [await loadavg()];
  for (let g = 0; g <= rounds; g++) {
    for (const { l, ns, i, p } of env) {
      const c = change(l, g + 1);
      const f = await nftFile(ns, `${c.join('\n')}\n`);
      const pre = await p.send(`${c.join('\n')}\n`);
      const ii = await i.send(c);
      // Round 0 warms every process and cache up and is not counted.
      if (g === 0) continue;
      add(`${l.name}|nft -f (spawned)`, f);
      add(`${l.name}|nft -f (pre-spawned)`, pre);
      add(`${l.name}|nft -i (kept open)`, ii);
    }
    if (g % 10 === 0) loads.push(await loadavg());
  }
  for (let r = 0; r < 2; r++) for (const { l, ns } of env) full.get(l.name)?.push(await nftFile(ns, textOf(l)));
  loads.push(await loadavg());
  process.stdout.write(`\n${services.toLocaleString('en')} Services × 10 endpoints, ${rounds} rounds round-robin; load average (1/5/15 min) over the run: ${loads.join(' → ')}\n\n`);
  process.stdout.write('| layout | transport | p50 ms | p90 ms | p99 ms | min ms | full load s (3 runs: median, min) |\n|---|---|---|---|---|---|---|\n');
  for (const [k, v] of samples) {
    const [name, transport] = k.split('|');
    const s = summarize(v);
    const fl = summarize(full.get(name ?? '') ?? []);
    process.stdout.write(`| ${name} | ${transport} | ${fmt(s.median)} | ${fmt(s.p90)} | ${fmt(s.p99)} | ${fmt(s.min)} | ${fmt(fl.median / 1000)}, ${fmt(fl.min / 1000)} |\n`);
  }
}

/** As B10: new connections/s through the last Service's cluster IP and directly, per layout, at 1,000 and 30,000 Services. */
async function firstPacketCost(cleanup: Cleanup): Promise<void> {
  const E = 2;
  const cells: { n: number; s: string; client: string; via: number[]; direct: number[] }[] = [];
  for (const n of [1000, 30000]) {
    const targets = [...renderNft(render(desiredState(n, E)).resolution.targets).targets.values()];
    for (const s of [...FIRST_PACKET_SHARDS, 'data map'] as const) {
      const { client } = await createTrafficPair(
        `fp${s === 'data map' ? 'd' : s}x${n}`,
        cleanup,
        Array.from({ length: E }, (_, j) => endpointIP(n - 1, j, E)),
      );
      await run('ip', ['-n', client, 'route', 'add', '10.96.0.0/16', 'dev', CLIENT_INTERFACE]);
      await nftFile(client, s === 'data map' ? dataMapText(targets).text : shardedText(targets, s));
      cells.push({ n, s: s === 'data map' ? s : `S = ${s}`, client, via: [], direct: [] });
    }
  }
  const via = (n: number): string => `http://${clusterIP(n - 1)}:${SERVICE_PORT}/`;
  const direct = (n: number): string => `http://${endpointIP(n - 1, 0, E)}:${TARGET_PORT}/`;
  for (const c of cells) await wrk(c.client, via(c.n), 1, 16, true);
  const loads: string[] = [await loadavg()];
  for (let r = 0; r < 5; r++) {
    for (const c of cells) {
      for (const url of r % 2 === 0 ? [via(c.n), direct(c.n)] : [direct(c.n), via(c.n)]) {
        await run('conntrack', ['-F'], { netns: c.client, check: false });
        const w = await wrk(c.client, url, 3, 16, true);
        if (w.errors > 0) throw new Error(`wrk ${url} (S = ${c.s}, ${c.n}): ${w.errors} errors`);
        (url === direct(c.n) ? c.direct : c.via).push(w.rps);
      }
    }
    loads.push(await loadavg());
  }
  process.stdout.write(`\nFirst packet: 5 interleaved pairs of 3 s wrk runs (16 connections, one request per connection), ${E} endpoints; load average: ${loads.join(' → ')}\n\n`);
  process.stdout.write('| Services | layout | via cluster IP conn/s | direct conn/s | via / direct (per pair) | via rate / S = 1 at 1,000 |\n|---|---|---|---|---|---|\n');
  const base = cells.find((c) => c.n === 1000 && c.s === 'S = 1');
  for (const c of cells) {
    const v = summarize(c.via).median;
    const perPair = summarize(c.via.map((x, i) => x / (c.direct[i] ?? NaN))).median;
    process.stdout.write(
      `| ${c.n.toLocaleString('en')} | ${c.s} | ${fmt(v)} | ${fmt(summarize(c.direct).median)} | ${perPair.toFixed(3)} | ${base === undefined ? '' : (v / summarize(base.via).median).toFixed(3)} |\n`,
    );
  }
}

await withCleanup(
  (m) => process.stderr.write(`${m}\n`),
  async (cleanup) => {
    await perTableCost(cleanup);
    await changeCost(cleanup);
    if (firstPacket) await firstPacketCost(cleanup);
  },
);
