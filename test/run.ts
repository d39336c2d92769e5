/**
 * The runner behind `npm test`. Node 20 does not expand `*.test.ts` globs, so this finds the files
 * and runs `node --import tsx --test --test-concurrency=1 <files>` with inherited stdio, so that
 * node's closing summary (`# pass N`, `# fail N`) is printed, then a block naming each failed test
 * (reporterArgs), and exits with its code.
 *
 *   npm test                 every test under test/
 *   npm test -- --unit       only test/unit (no control plane)
 *   npm test -- test/kube    only files under the given folders or files
 *
 * Shared control plane: starting etcd + kube-apiserver costs ~5-10 s and ~300 MB; a suite that
 * started one per file would spend minutes on it. So this runner starts one before the tests and
 * passes its state file in MULTUS_PROXY_TEST_CONTROLPLANE; `useControlPlane()` in
 * test/harness/controlplane.ts returns it. Tests on it use unique namespaces (uniqueName()).
 * Tests that restart the apiserver, compact etcd or need other flags start a private one with
 * `startControlPlane()`. Cluster-wide objects a test creates on the shared plane (admission
 * webhooks above all) must be scoped to the test's own namespaces by a namespaceSelector and
 * deleted afterwards, or the test must use a private plane: a failing webhook would otherwise
 * break every later test. If the shared one fails to start, the error is printed and the tests
 * that need it fail with it (nothing is skipped).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { transformSync } from 'esbuild';
import { SHARED_ENV, startControlPlane, type ControlPlane } from './harness/controlplane.js';

const root = resolve(import.meta.dirname, '..');

/**
 * TAP as before, and after it the failed tests' names and errors (test/harness/failure-summary.ts):
 * CI keeps the output's head and tail, and a failure in the middle of ~8,000 lines was lost.
 * node:test loads reporters before `--import tsx` applies, so the reporter is transpiled to a
 * plain module in a temporary folder first (esbuild, already a dependency; it imports nothing).
 */
export function reporterArgs(dir: string): string[] {
  const src = readFileSync(join(root, 'test', 'harness', 'failure-summary.ts'), 'utf8');
  const out = join(dir, 'failure-summary.mjs');
  writeFileSync(out, transformSync(src, { loader: 'ts', format: 'esm', target: 'node20' }).code);
  return ['--test-reporter=tap', '--test-reporter-destination=stdout', `--test-reporter=${pathToFileURL(out).href}`, '--test-reporter-destination=stdout'];
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

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const unit = args.includes('--unit');
  const targets = args.filter((a) => !a.startsWith('--'));
  const roots = unit ? [join(root, 'test', 'unit')] : targets.length > 0 ? targets.map((t) => resolve(t)) : [join(root, 'test')];
  const files = roots.flatMap(findTests).map((f) => relative(root, f));
  if (files.length === 0) {
    console.error(`no *.test.ts files under ${roots.join(', ')}`);
    return 1;
  }
  const needsControlPlane = !unit && files.some((f) => !f.startsWith(join('test', 'unit')));
  let cp: ControlPlane | undefined;
  const env = { ...process.env };
  if (needsControlPlane && !env[SHARED_ENV]) {
    const t0 = Date.now();
    try {
      cp = await startControlPlane();
      env[SHARED_ENV] = join(cp.dir, 'state.json');
      console.log(`# shared control plane ${cp.server} ready in ${Date.now() - t0} ms`);
    } catch (e) {
      console.error(`# shared control plane failed to start; tests that need it will fail:\n${(e as Error).message}`);
      env[SHARED_ENV] = join(root, '.no-shared-control-plane');
    }
  }
  const reporterDir = mkdtempSync(join(tmpdir(), 'multus-proxy-reporter-'));
  const code = await new Promise<number>((done) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', ...reporterArgs(reporterDir), ...files], { cwd: root, env, stdio: 'inherit' });
    const forward = (sig: NodeJS.Signals): void => {
      child.kill(sig);
    };
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    child.on('exit', (c, sig) => done(c ?? (sig ? 1 : 0)));
  });
  rmSync(reporterDir, { recursive: true, force: true });
  await cp?.stop();
  return code;
}

// Only when run as the program (tests import findTests).
if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) process.exitCode = await main();
