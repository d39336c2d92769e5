/**
 * The pure part of an nftables full sync alone (no namespace, no nft): the shared render
 * (incremental.ts), the nftables stage (nft/stage.ts) and the full plan (nft/render.ts planNft),
 * on the state B2 builds (bench/lib/services.ts: N Services × 10 endpoints). The first call in this
 * process is cold, as a starting sidecar's; then warm calls, each with fresh caches (a first sync's
 * work, JIT warm). Prints the text's size and a hash of it, to check a change keeps it byte-identical.
 * Beside process CPU, the main thread's own CPU (Linux), the steadier figure.
 *
 *   node --import tsx bench/nft-render-cost.ts [services=1000] [warm runs=5] [warm-up]
 *
 * `warm-up`: first the dataplane's warm-up (src/dataplane/nft/warm-up.ts), as a starting sidecar
 * runs it while its informers list; its CPU is printed, and "cold" is then the first real render.
 *   node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/nft-render-cost.ts 10000 0
 */
import { createHash } from 'node:crypto';
import { mainThreadCpuMs } from '../src/cpu-wait.js';
import { RenderCache, render } from '../src/dataplane/core/incremental.js';
import { NftStage } from '../src/dataplane/nftables/stage.js';
import { planNft } from '../src/dataplane/nftables/render.js';
import { desiredState } from './lib/services.js';
import { warmUpRender } from '../src/dataplane/nftables/tuning/warm-up.js';

const services = Number(process.argv[2] ?? 1000);
const warm = Number(process.argv[3] ?? 5);
const state = desiredState(services, 10);

/**
 * This thread's CPU in ms (Linux: its schedstat, in ns), undefined elsewhere. Process CPU also
 * counts V8's GC helper threads, which made it vary by ±20 % between identical runs at 10,000
 * Services; the main thread's alone is what a sync waits for (docs/decisions/0026-first-sync-fills-maps-over-netlink.md).
 */
const mainThreadMs = (): number | undefined => mainThreadCpuMs();

function once(): { ms: number[]; cpu: number; main: number | undefined; text: string } {
  const c0 = process.cpuUsage();
  const m0 = mainThreadMs();
  const cpu = (): number => {
    const c = process.cpuUsage(c0);
    return (c.user + c.system) / 1000;
  };
  const rendered = render(state, new RenderCache());
  const c1 = cpu();
  const next = new NftStage().step(rendered);
  const c2 = cpu();
  const plan = planNft(next, undefined, true, []);
  const c3 = cpu();
  const m3 = mainThreadMs();
  return { ms: [c1, c2 - c1, c3 - c2, c3], cpu: c3, main: m0 === undefined || m3 === undefined ? undefined : m3 - m0, text: plan.text };
}

const fmt = ({ ms, cpu, main }: { ms: number[]; cpu: number; main: number | undefined }): string =>
  `render ${ms[0]?.toFixed(1)} + stage ${ms[1]?.toFixed(1)} + plan ${ms[2]?.toFixed(1)} = ${cpu.toFixed(1)} ms CPU${main === undefined ? '' : ` (main thread ${main.toFixed(1)} ms)`}`;
if (process.argv[4] === 'warm-up') {
  const c0 = process.cpuUsage();
  warmUpRender();
  const c = process.cpuUsage(c0);
  console.log(`warm-up: ${((c.user + c.system) / 1000).toFixed(1)} ms CPU`);
}
const cold = once();
console.log(`${services} Services, cold: ${fmt(cold)}; text ${cold.text.length} chars, sha256 ${createHash('sha256').update(cold.text).digest('hex').slice(0, 16)}`);
const totals: number[] = [];
for (let i = 0; i < warm; i++) {
  const r = once();
  totals.push(r.cpu);
  console.log(`  warm ${i + 1}: ${fmt(r)}`);
  if (r.text !== cold.text) throw new Error('warm text differs from cold');
}
if (totals.length > 0) console.log(`warm median CPU ${[...totals].sort((a, b) => a - b)[Math.floor(totals.length / 2)]?.toFixed(1)} ms`);
