/**
 * `npm run bench [-- [--quick] [--no-write] [--minutes N] [b1 … b12, b3real, b11ns, webhook-memory, policy, policyreal, soak]]`: runs the benchmarks one after the other
 * (never in parallel: they would measure each other). Each one's result goes to
 * bench/results/<id>.json, from which the results block of docs/benchmarks.md and its charts
 * (docs/benchmarks/*.svg) are redrawn. A failed benchmark keeps its last result and makes the
 * exit code 1.
 */
import { fileURLToPath } from 'node:url';
import { commandLine, parseRunArgs, runOne } from './lib/runner.js';
import type { Benchmark } from './lib/report.js';

/** The scripts, in run order; each exports `benchmark` and also runs alone. */
const SCRIPTS: Record<string, string> = {
  b1: './b1-admission.js',
  b2: './b2-rule-sync.js',
  b3: './b3-programming-latency.js',
  b3real: './b3-real-node.js',
  b4: './b4-dataplane.js',
  b5: './b5-footprint.js',
  b6: './b6-controller.js',
  b7: './b7-apiserver-load.js',
  b8: './b8-node-agent.js',
  b9: './b9-deletion-latency.js',
  b10: './b10-first-packet.js',
  b11: './b11-loadbalancer.js',
  b11ns: './b11-netns.js',
  soak: './soak.js',
  b12: './b12-churn-memory.js',
  'webhook-memory': './webhook-memory.js',
  policy: './policy.js',
  policyreal: './policy-real-node.js',
};

async function load(name: string): Promise<Benchmark> {
  const mod = (await import(SCRIPTS[name] ?? '')) as { benchmark?: Benchmark };
  if (!mod.benchmark) throw new Error(`${SCRIPTS[name]} exports no benchmark`);
  return mod.benchmark;
}

const argv = process.argv.slice(2);
const args = parseRunArgs(argv);
const unknown = args.names.filter((n) => !(n in SCRIPTS));
if (unknown.length > 0) {
  process.stderr.write(`bench: unknown benchmark ${unknown.map((n) => JSON.stringify(n)).join(', ')}; use ${Object.keys(SCRIPTS).join(', ')}\n`);
  process.exit(2);
}
// The soak runs for hours (minutes with --quick): only when named.
const ON_REQUEST = new Set(['soak']);
const names = args.names.length > 0 ? args.names : Object.keys(SCRIPTS).filter((n) => !ON_REQUEST.has(n));
const command = commandLine(fileURLToPath(import.meta.url), argv);
const failed: string[] = [];
const t0 = Date.now();
for (const name of names) {
  let b: Benchmark;
  try {
    b = await load(name);
  } catch (e) {
    process.stderr.write(`[${name}] cannot load: ${(e as Error).message}\n`);
    failed.push(name);
    continue;
  }
  if (!(await runOne(b, args, command))) failed.push(name);
}
process.stderr.write(`bench: ${names.length - failed.length} of ${names.length} ran in ${((Date.now() - t0) / 1000).toFixed(0)} s${failed.length > 0 ? `; failed: ${failed.join(', ')}` : ''}\n`);
process.exit(failed.length > 0 ? 1 : 0);
