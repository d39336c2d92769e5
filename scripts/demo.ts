/**
 * `npm run demo`: the classic multus-service demo on this machine, with no cluster (see
 * test/e2e/scenario.ts for what is real and what is played). Needs root (network namespaces,
 * iptables). Needs etcd and kube-apiserver: `bash scripts/setup.sh demo` builds them.
 * Ctrl-C cleans up every namespace, process and rule it created.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { binDir } from '../test/harness/controlplane.js';
import { runScenario, type Answer, type Observations } from '../test/e2e/scenario.js';

/** What to do when the binaries the demo runs are not built yet (fail fast, naming the command). */
function missingSetup(): string | undefined {
  const missing = ['etcd', 'kube-apiserver'].filter((b) => !existsSync(join(binDir(), b)));
  if (missing.length === 0) return undefined;
  return `${missing.join(' and ')} not found in ${binDir()}: run \`bash scripts/setup.sh demo\` first (a few minutes on a fresh machine)`;
}

function summary(o: Observations): string[] {
  const by = (as: readonly Answer[]): string => {
    const m = new Map<string, number>();
    for (const a of as) m.set(a.backend ?? 'failed', (m.get(a.backend ?? 'failed') ?? 0) + 1);
    return [...m]
      .sort()
      .map(([k, v]) => `${k}=${v}`)
      .join(' ');
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
  const notBuilt = missingSetup();
  if (notBuilt !== undefined) {
    console.error(notBuilt);
    return 1;
  }
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
