/**
 * The runner behind `npm test`. Node 20 does not expand `*.test.ts` globs, so this finds the files,
 * sorts them into tiers and runs each tier as one `node --import tsx --test` child:
 *
 *   npm test                        every tier (what CI and the README run)
 *   npm test -- --tier unit         test/unit and bench's own tests (bench/test): no root, no
 *                                   apiserver, files run in parallel
 *   npm test -- --tier cluster      the real kube-apiserver and network namespaces: everything but
 *                                   the node tier and test/unit
 *   npm test -- --tier node         real nodes, Helm and the soak (test/node), and the tests that
 *                                   share the node's host state (NODE_TIER_FILES)
 *   npm test -- --unit              the same as --tier unit
 *   npm test -- test/kube           only files under the given folders or files (tiers still apply)
 *
 * Schedule (docs/decisions/0130-test-tiers.md): the node tier runs beside the unit tier and then the
 * cluster tier. A node holds fixed host ports, host iptables, sysctls and containerd's paths, so its
 * files run one at a time; the cluster tier touches none of those (its namespaces are its own, its
 * ports come from the kernel's ephemeral range), so it overlaps the node tier. Unit files run in
 * parallel; cluster files one at a time, as the node tier is the longer path either way.
 *
 * Output: each tier's TAP in full, in tier order (the first unfinished tier streams, the others are
 * held until it ends); each tier's own closing lines are relabelled `# tier <name>: pass N`, and
 * the run ends with each tier's wall time, node's closing lines (`# tests N`, `# pass N`,
 * `# fail N`, ...) summed over the tiers, and one block naming every failed test
 * (test/harness/failure-summary.ts). The exit code is non-zero when any tier failed.
 *
 * Shared control plane: starting etcd + kube-apiserver costs ~5-10 s and ~300 MB; a suite that
 * started one per file would spend minutes on it. So this runner starts one for the cluster tier
 * and passes its state file in MULTUS_PROXY_TEST_CONTROLPLANE; `useControlPlane()` in
 * test/harness/controlplane.ts returns it. Tests on it use unique namespaces (uniqueName()).
 * Tests that restart the apiserver, compact etcd or need other flags start a private one with
 * `startControlPlane()`. Cluster-wide objects a test creates on the shared plane (admission
 * webhooks above all) must be scoped to the test's own namespaces by a namespaceSelector and
 * deleted afterwards, or the test must use a private plane: a failing webhook would otherwise
 * break every later test. If the shared one fails to start, the error is printed and the tests
 * that need it fail with it (nothing is skipped).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, relative, resolve, sep } from 'node:path';
import { pathToFileURL } from 'node:url';
import { transformSync } from 'esbuild';
import { SHARED_ENV, startControlPlane, type ControlPlane } from './harness/controlplane.js';
import { mergeSummaries } from './harness/failure-summary.js';

const root = resolve(import.meta.dirname, '..');

export const TIERS = ['unit', 'cluster', 'node'] as const;
export type Tier = (typeof TIERS)[number];

/**
 * Files outside test/node that belong to the node tier: image-run starts a private containerd, whose
 * pod sandboxes are /var/run/netns/cni-* entries and whose veths sit on a host bridge. A real node's
 * teardown deletes every new cni-* namespace and reports new veths as left behind, so the two must
 * not overlap.
 */
export const NODE_TIER_FILES: readonly string[] = ['test/deploy/image-run.test.ts'];

/** The tier of a test file, by its path relative to the repository. */
export function tierOf(file: string): Tier {
  const f = file.split(sep).join('/');
  if (f.startsWith('test/unit/') || f.startsWith('bench/')) return 'unit';
  if (f.startsWith('test/node/') || NODE_TIER_FILES.includes(f)) return 'node';
  return 'cluster';
}

export interface TierRun {
  tier: Tier;
  files: string[];
  /** node --test-concurrency for the tier's files. */
  concurrency: number;
}

/** The tiers to run, in output order, each with its files; tiers with no file are left out. */
export function planTiers(files: readonly string[], only: readonly Tier[], cores: number): TierRun[] {
  return TIERS.filter((t) => only.length === 0 || only.includes(t))
    .map((tier) => ({ tier, files: files.filter((f) => tierOf(f) === tier), concurrency: tier === 'unit' ? Math.max(1, cores) : 1 }))
    .filter((r) => r.files.length > 0);
}

/** `--tier X` (repeatable, or `--tier=X`), `--unit`, and paths. Throws on an unknown tier. */
export function parseArgs(args: readonly string[]): { tiers: Tier[]; targets: string[] } {
  const tiers: Tier[] = [];
  const targets: string[] = [];
  const add = (t: string | undefined): void => {
    if (!TIERS.includes(t as Tier)) throw new Error(`--tier ${t ?? ''}: expected one of ${TIERS.join(', ')}`);
    tiers.push(t as Tier);
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string;
    if (a === '--unit') tiers.push('unit');
    else if (a === '--tier') add(args[++i]);
    else if (a.startsWith('--tier=')) add(a.slice('--tier='.length));
    else if (!a.startsWith('--')) targets.push(a);
  }
  return { tiers, targets };
}

/** The closing lines node's TAP reporter prints, in its order. */
export const CLOSING_KEYS = ['tests', 'suites', 'pass', 'fail', 'cancelled', 'skipped', 'todo', 'duration_ms'] as const;
type Totals = Partial<Record<(typeof CLOSING_KEYS)[number], number>>;
const CLOSING = new RegExp(`^# (${CLOSING_KEYS.join('|')}) (\\d+(?:\\.\\d+)?)$`);

/** A TAP closing line as [key, value], else undefined. */
export function closingLine(line: string): [(typeof CLOSING_KEYS)[number], number] | undefined {
  const m = CLOSING.exec(line);
  return m ? [m[1] as (typeof CLOSING_KEYS)[number], Number(m[2])] : undefined;
}

/** The run's closing lines: counts summed over the tiers, duration_ms the run's wall time. */
export function closingLines(perTier: readonly Totals[], wallMs: number): string[] {
  return CLOSING_KEYS.map((k) => `# ${k} ${k === 'duration_ms' ? wallMs.toFixed(3) : perTier.reduce((s, t) => s + (t[k] ?? 0), 0)}`);
}

/**
 * TAP as before, and after it the failed tests' names and errors (test/harness/failure-summary.ts):
 * CI keeps the output's head and tail, and a failure in the middle of ~8,000 lines was lost.
 * node:test loads reporters before `--import tsx` applies, so the reporter is transpiled to a
 * plain module in a temporary folder first (esbuild, already a dependency; it imports nothing).
 * `summaryTo`: where the failure block goes (a file, when the runner merges the tiers' blocks).
 */
export function reporterArgs(dir: string, summaryTo = 'stdout'): string[] {
  const src = readFileSync(join(root, 'test', 'harness', 'failure-summary.ts'), 'utf8');
  const out = join(dir, 'failure-summary.mjs');
  if (!existsSync(out)) writeFileSync(out, transformSync(src, { loader: 'ts', format: 'esm', target: 'node20' }).code);
  return ['--test-reporter=tap', '--test-reporter-destination=stdout', `--test-reporter=${pathToFileURL(out).href}`, `--test-reporter-destination=${summaryTo}`];
}

export function findTests(dir: string): string[] {
  const out: string[] = [];
  let st;
  try {
    st = statSync(dir);
  } catch {
    return out;
  }
  if (st.isFile()) return dir.endsWith('.test.ts') ? [dir] : [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
    const p = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...findTests(p));
    else if (entry.isFile() && entry.name.endsWith('.test.ts')) out.push(p);
  }
  return out.sort();
}

/**
 * Several children's output, each kept whole and in order: the first unfinished one streams, the
 * others are held until every one before them has ended. Lines only, so no line is cut.
 */
export class OrderedOutput {
  private readonly held: string[][];
  private readonly ended: boolean[];
  private current = 0;

  constructor(
    n: number,
    private readonly write: (line: string) => void,
  ) {
    this.held = Array.from({ length: n }, () => []);
    this.ended = new Array<boolean>(n).fill(false);
  }

  line(i: number, line: string): void {
    if (i === this.current) this.write(line);
    else this.held[i]?.push(line);
  }

  end(i: number): void {
    this.ended[i] = true;
    while (this.current < this.held.length && this.ended[this.current]) {
      this.current++;
      for (const l of this.held[this.current]?.splice(0) ?? []) this.write(l);
    }
  }
}

interface TierResult {
  code: number;
  totals: Totals;
  wallMs: number;
}

/** Calls onLine for every complete line of a stream, and the rest at its end. */
function eachLine(stream: NodeJS.ReadableStream, onLine: (line: string) => void): Promise<void> {
  let rest = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    const lines = (rest + chunk).split('\n');
    rest = lines.pop() ?? '';
    for (const l of lines) onLine(l);
  });
  return new Promise((done) => {
    stream.on('end', () => {
      if (rest) onLine(rest);
      done();
    });
  });
}

async function runTier(run: TierRun, index: number, out: OrderedOutput, env: NodeJS.ProcessEnv, reporterDir: string, children: Set<import('node:child_process').ChildProcess>): Promise<TierResult> {
  const t0 = Date.now();
  const totals: Totals = {};
  out.line(index, `# tier ${run.tier}: ${run.files.length} file(s), --test-concurrency=${run.concurrency}`);
  const summaryFile = join(reporterDir, `failures-${run.tier}.txt`);
  const child = spawn(process.execPath, ['--import', 'tsx', '--test', `--test-concurrency=${run.concurrency}`, ...reporterArgs(reporterDir, summaryFile), ...run.files], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  const onLine = (l: string): void => {
    const c = closingLine(l);
    if (c) totals[c[0]] = c[1];
    out.line(index, c ? `# tier ${run.tier}: ${l.slice(2)}` : l);
  };
  const streams = Promise.all([eachLine(child.stdout, onLine), eachLine(child.stderr, (l) => out.line(index, l))]);
  const code = await new Promise<number>((done) => child.on('close', (c, sig) => done(c ?? (sig ? 1 : 0))));
  await streams;
  children.delete(child);
  out.end(index);
  return { code, totals, wallMs: Date.now() - t0 };
}

async function main(): Promise<number> {
  const t0 = Date.now();
  let parsed;
  try {
    parsed = parseArgs(process.argv.slice(2));
  } catch (e) {
    console.error((e as Error).message);
    return 2;
  }
  const roots = parsed.targets.length > 0 ? parsed.targets.map((t) => resolve(t)) : [join(root, 'test'), join(root, 'bench')];
  const files = roots.flatMap(findTests).map((f) => relative(root, f));
  const plan = planTiers(files, parsed.tiers, availableParallelism());
  if (plan.length === 0) {
    console.error(`no *.test.ts files of tier(s) ${parsed.tiers.length > 0 ? parsed.tiers.join(', ') : 'any'} under ${roots.join(', ')}`);
    return 1;
  }
  const env = { ...process.env };
  const reporterDir = mkdtempSync(join(tmpdir(), 'multus-proxy-reporter-'));
  const children = new Set<import('node:child_process').ChildProcess>();
  const forward = (sig: NodeJS.Signals): void => {
    for (const c of children) c.kill(sig);
  };
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  const out = new OrderedOutput(plan.length, (l) => process.stdout.write(`${l}\n`));

  // The shared control plane, for the cluster tier only; it starts while the other tiers run.
  let cp: ControlPlane | undefined;
  const planeReady = async (): Promise<void> => {
    if (env[SHARED_ENV]) return;
    const t = Date.now();
    try {
      cp = await startControlPlane();
      env[SHARED_ENV] = join(cp.dir, 'state.json');
      console.log(`# shared control plane ${cp.server} ready in ${Date.now() - t} ms`);
    } catch (e) {
      console.error(`# shared control plane failed to start; tests that need it will fail:\n${(e as Error).message}`);
      env[SHARED_ENV] = join(root, '.no-shared-control-plane');
    }
  };
  const at = (tier: Tier): number => plan.findIndex((r) => r.tier === tier);
  const start = (tier: Tier): Promise<TierResult | undefined> => {
    const i = at(tier);
    return i < 0 ? Promise.resolve(undefined) : runTier(plan[i] as TierRun, i, out, env, reporterDir, children);
  };
  const node = start('node');
  const unitThenCluster = (async () => {
    const plane = at('cluster') >= 0 ? planeReady() : Promise.resolve();
    const unit = await start('unit');
    await plane;
    return [unit, await start('cluster')] as const;
  })();
  const [nodeResult, [unitResult, clusterResult]] = await Promise.all([node, unitThenCluster]);
  await cp?.stop();

  const results = new Map<Tier, TierResult | undefined>([
    ['unit', unitResult],
    ['cluster', clusterResult],
    ['node', nodeResult],
  ]);
  for (const run of plan) {
    const r = results.get(run.tier);
    if (r) console.log(`# tier ${run.tier}: ${(r.wallMs / 1000).toFixed(1)} s wall, ${r.totals.pass ?? 0} pass, ${r.totals.fail ?? 0} fail, exit ${r.code}`);
  }
  const done = plan.map((r) => results.get(r.tier)).filter((r): r is TierResult => r !== undefined);
  for (const l of closingLines(
    done.map((r) => r.totals),
    Date.now() - t0,
  ))
    console.log(l);
  const blocks = plan
    .map((r) => join(reporterDir, `failures-${r.tier}.txt`))
    .filter((f) => existsSync(f))
    .map((f) => readFileSync(f, 'utf8'));
  const merged = mergeSummaries(blocks);
  if (merged.length > 0) console.log(merged.join('\n'));
  rmSync(reporterDir, { recursive: true, force: true });
  return done.some((r) => r.code !== 0) ? 1 : 0;
}

// Only when run as the program (tests import its parts).
if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) process.exitCode = await main();
