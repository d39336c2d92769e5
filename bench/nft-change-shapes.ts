/**
 * Which shape of nftables change can meet the target (one-endpoint change at 10,000
 * Services: p50 ≤ 5 ms, p99 ≤ 10 ms)? Not a numbered benchmark: a probe, run by hand, whose
 * figures are in docs/decisions/0024-nft-endpoint-maps.md. Side by side in one run, round-robin
 * (each round does every shape once), in throw-away network namespaces:
 *
 *   A  today's partial text before this probe: `flush chain` + one `add rule` per endpoint, `nft -f -`
 *   B  `flush chain` + `add chain <name> { rules }` (a block), `nft -f -`  (adopted)
 *   C  as A, written to one kept-open `nft -i`
 *   D  as B, written to one kept-open `nft -i`
 *   E  as D but the new rules are counters: no rule the kernel must validate (the floor of D)
 *   F  as D, the Services spread over 8 tables (each its own hook and verdict map)
 *   G  a Service removed and added again: `delete element` + `add element` on the map, `nft -i`
 *
 *   node --import tsx bench/nft-change-shapes.ts [services=10000] [rounds=30]
 */
import { render } from '../src/dataplane/core/incremental.js';
import { fullText, renderNft, type NftTarget } from '../src/dataplane/nftables/render.js';
import { desiredState } from './lib/services.js';
import { createNetns } from './lib/netns.js';
import { run, withCleanup } from './lib/proc.js';
import { fmt, summarize } from '../test/harness/stats.js';
import { NftInteractive } from './lib/nft-interactive.js';

const SHARDS = 8;
const T = 'inet multus_proxy';

async function viaFile(netns: string, commands: readonly string[]): Promise<number> {
  return (await run('nft', ['-f', '-'], { netns, input: `${commands.join('\n')}\n` })).ms;
}

/** The Services spread over SHARDS tables `inet mpx<k>`, Service i in table i mod SHARDS. */
function shardedText(targets: readonly NftTarget[]): string {
  const out: string[] = [];
  for (let k = 0; k < SHARDS; k++) {
    const mine = targets.filter((_, i) => i % SHARDS === k);
    out.push(`table inet mpx${k} {`);
    for (const t of mine) out.push(`\tchain ${t.chain} {`, ...t.rules.map((r) => `\t\t${r}`), '\t}');
    out.push('\tmap services-v4 {', '\t\ttype ipv4_addr . inet_proto . inet_service : verdict', `\t\telements = { ${mine.map((t) => `${t.key} : goto ${t.chain}`).join(',\n')} }`, '\t}');
    out.push('\tchain nat-output {', '\t\ttype nat hook output priority -100; policy accept;', '\t\tip daddr . meta l4proto . th dport vmap @services-v4', '\t}', '}');
  }
  return `${out.join('\n')}\n`;
}

const services = Number(process.argv[2] ?? 10000);
const rounds = Number(process.argv[3] ?? 30);

await withCleanup(
  (m) => process.stderr.write(`${m}\n`),
  async (cleanup) => {
    const ruleset = renderNft(render(desiredState(services, 10)).resolution.targets);
    const targets = [...ruleset.targets.values()];
    const one = await createNetns('shapes', cleanup);
    const sharded = await createNetns('shapes8', cleanup);
    await run('nft', ['-f', '-'], { netns: one, input: fullText(ruleset) });
    await run('nft', ['-f', '-'], { netns: sharded, input: shardedText(targets) });
    const i1 = new NftInteractive(['ip', 'netns', 'exec', one]);
    const i8 = new NftInteractive(['ip', 'netns', 'exec', sharded]);
    cleanup.add('nft -i', () => {
      i1.close();
      i8.close();
    });

    /** Change g: endpoint 0 of Service (g·997 mod n) gets a new address. */
    const changed = (g: number): { i: number; t: NftTarget; rules: string[] } => {
      const i = (g * 997) % services;
      const t = targets[i];
      if (t === undefined) throw new Error(`no target ${i}`);
      return { i, t, rules: t.rules.map((r, j) => (j === 0 ? r.replace(/ip to \S+/, `ip to 10.101.${(g >> 8) & 255}.${g & 255}:8080`) : r)) };
    };
    const rulesShape = (table: string, g: number): string[] => {
      const { t, rules } = changed(g);
      return [`flush chain ${table} ${t.chain}`, ...rules.map((r) => `add rule ${table} ${t.chain} ${r}`)];
    };
    const blockShape = (table: string, g: number, rules = changed(g).rules): string[] => {
      const { t } = changed(g);
      return [`flush chain ${table} ${t.chain}`, `add chain ${table} ${t.chain} { ${rules.join('; ')}; }`];
    };
    const shapes: readonly [string, (g: number) => Promise<number>][] = [
      ['A flush + add rule per endpoint, nft -f', (g) => viaFile(one, rulesShape(T, g))],
      ['B flush + chain block, nft -f (adopted)', (g) => viaFile(one, blockShape(T, g))],
      ['C flush + add rule per endpoint, kept-open nft -i', (g) => i1.send(rulesShape(T, g))],
      ['D flush + chain block, kept-open nft -i', (g) => i1.send(blockShape(T, g))],
      // E leaves counters in the chain; D rewrites it with DNAT rules when its turn comes again.
      ['E as D, counters only (no kernel validation)', (g) => i1.send(blockShape(T, g, ['counter']))],
      [`F as D, Services over ${SHARDS} tables`, (g) => i8.send(blockShape(`inet mpx${changed(g).i % SHARDS}`, g))],
      [
        'G delete + add a map element, nft -i',
        (g) => i1.send([`delete element ${T} services-v4 { ${changed(g).t.key} }`, `add element ${T} services-v4 { ${changed(g).t.key} : goto ${changed(g).t.chain} }`]),
      ],
    ];
    const samples = new Map<string, number[]>(shapes.map(([name]) => [name, []]));
    // Round 0 warms every process and cache up and is not counted.
    for (let g = 0; g <= rounds; g++)
      for (const [name, f] of shapes) {
        const ms = await f(g + 1);
        if (g > 0) samples.get(name)?.push(ms);
      }
    const load = (await run('cat', ['/proc/loadavg'])).stdout.trim();
    process.stdout.write(`${services.toLocaleString('en')} Services × 10 endpoints, ${rounds} rounds, load average ${load}\n`);
    process.stdout.write('| shape | p50 ms | p90 ms | p99 ms | min ms |\n|---|---|---|---|---|\n');
    for (const [name, v] of samples) {
      const s = summarize(v);
      process.stdout.write(`| ${name} | ${fmt(s.median)} | ${fmt(s.p90)} | ${fmt(s.p99)} | ${fmt(s.min)} |\n`);
    }
  },
);
