/**
 * `npm run demo`: the classic multus-service demo on this machine, with no cluster (see
 * test/e2e/scenario.ts for what is real and what is played). Needs root (network namespaces,
 * iptables). The first run builds etcd, kube-apiserver and kustomize through scripts/setup.sh.
 * Ctrl-C cleans up every namespace, process and rule it created.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { binDir } from '../test/harness/controlplane.js';
import { runScenario, type Answer, type Observations } from '../test/e2e/scenario.js';

const ROOT = resolve(import.meta.dirname, '..');

function ensureSetup(): void {
  const missing = ['etcd', 'kube-apiserver'].filter((b) => !existsSync(join(binDir(), b)));
  if (missing.length === 0) return;
  console.log(`${missing.join(' and ')} not built yet: running scripts/setup.sh (the first build takes several minutes)`);
  const r = spawnSync('bash', [join(ROOT, 'scripts/setup.sh')], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error('scripts/setup.sh failed; see its output above');
}

function summary(o: Observations): string[] {
  const by = (as: readonly Answer[]): string => {
    const m = new Map<string, number>();
    for (const a of as) m.set(a.backend ?? 'failed', (m.get(a.backend ?? 'failed') ?? 0) + 1);
    return [...m].sort().map(([k, v]) => `${k}=${v}`).join(' ');
  };
  return [
    `Service clusterIP ${o.clusterIP}; ready slice addresses at the end: ${o.sliceAddresses.join(', ')}`,
    `two backends:        ${by(o.initial)}`,
    `three backends:      ${by(o.scaled)}`,
    `${o.unreadyBackend} unready:    ${by(o.afterUnready)}`,
    `every backend saw the client's net1 address ${o.clientNet1}: ${[...o.initial, ...o.scaled, ...o.afterUnready].every((a) => a.seenSource === o.clientNet1) ? 'yes' : 'NO'}`,
  ];
}

async function main(): Promise<number> {
  if (process.getuid?.() !== 0) {
    console.error('The demo builds network namespaces and iptables rules: run it as root.');
    return 1;
  }
  ensureSetup();
  const abort = new AbortController();
  let n = 0;
  const started = Date.now();
  process.once('SIGINT', () => {
    console.log('\nInterrupted: cleaning up ...');
    abort.abort();
    setTimeout(() => process.exit(130), 10_000).unref();
  });
  try {
    const o = await runScenario(
      {
        step: (t) => console.log(`\n[${++n}] ${t}`),
        info: (t) => console.log(`    ${t}`),
      },
      abort.signal,
    );
    console.log(`\nDone in ${((Date.now() - started) / 1000).toFixed(1)} s.`);
    for (const line of summary(o)) console.log(`  ${line}`);
    return 0;
  } catch (e) {
    console.error(`\nThe demo failed: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  }
}

process.exitCode = await main();
