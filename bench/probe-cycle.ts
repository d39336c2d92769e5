/**
 * Startup probes with and without health-listen, side by side on one real node:
 * the probe cycle of test/node/probes.ts (a Deployment of injected pods 0 → 6 → 0 twice) once per
 * injected command × CPU contention, the webhook's `sidecar.command` switched between them in its
 * ConfigMap (and the webhook restarted), so the image, the node and the hour are the same:
 *   node binds the port  the command without health-listen (the webhook then waits 2 s: the old timing)
 *   health-listen        the default: the port listens before Node.js starts, first try at once
 * Needs an image with health-listen (MULTUS_PROXY_BIN_DIR naming a cache whose images/ has one).
 * Prints a markdown table: Unhealthy Events, sidecar start → Node.js serving / first sync / app
 * container start, load average. The time from the sidecar's start to its first accepted probe is
 * measured here; test/sidecar/health-listen.test.ts asserts only the order (accepted before
 * Node.js serves).
 *   node --import tsx bench/probe-cycle.ts [--busy 0,4]
 */
import os from 'node:os';
import { startNode, type RealNode } from '../test/harness/node.js';
import { installBootstrap } from '../test/node/install.js';
import { PROBE_CYCLE, runProbeCycle, tearDownProbeCycle, type ProbeCycleRecord } from '../test/node/probes.js';
import type { SidecarStart } from '../test/node/sidecar-starts.js';
import { INSTALL_NAMESPACE } from '../src/keys.js';
import { quantileSorted } from '../test/harness/stats.js';
import { setTimeout as delay } from 'node:timers/promises';
import { pods } from '../test/node/cluster.js';

const WEBHOOK_CONFIG = 'multus-proxy-webhook';
const LAUNCHER = '/usr/local/bin/health-listen, ';

async function useLauncher(node: RealNode, on: boolean): Promise<void> {
  const cm = JSON.parse(await node.kubectl(['get', 'configmap', '-n', INSTALL_NAMESPACE, WEBHOOK_CONFIG, '-o', 'json'])) as { data: Record<string, string> };
  const text = cm.data['config.yaml'] ?? '';
  const bare = text.replace(`command: [${LAUNCHER}`, 'command: [');
  if (!/command: \[node, /.test(bare)) throw new Error(`probe-cycle: the webhook's config.yaml has no "command: [node, ..." line:\n${text}`);
  const next = on ? bare.replace('command: [node, ', `command: [${LAUNCHER}node, `) : bare;
  await node.kubectl(['patch', 'configmap', '-n', INSTALL_NAMESPACE, WEBHOOK_CONFIG, '--type', 'merge', '-p', JSON.stringify({ data: { 'config.yaml': next } })]);
  await node.kubectl(['rollout', 'restart', '-n', INSTALL_NAMESPACE, 'deployment/multus-proxy-webhook']);
  await node.kubectl(['rollout', 'status', '-n', INSTALL_NAMESPACE, 'deployment/multus-proxy-webhook', '--timeout=300s'], { timeoutMs: 310_000 });
  // The old webhook pods answer admissions through their drain (5 s) until they leave the
  // Service's endpoints: wait until they are gone, or pods get the previous command.
  for (const until = Date.now() + 120_000; ; await delay(500)) {
    const left = await pods(node, INSTALL_NAMESPACE, 'app.kubernetes.io/component=webhook');
    if (left.every((p) => !p.metadata?.deletionTimestamp)) break;
    if (Date.now() > until) throw new Error('probe-cycle: old webhook pods still terminating after 120 s');
  }
}

const stat = (r: ProbeCycleRecord, pick: (s: SidecarStart) => number | undefined): string => {
  const xs = r.starts
    .map(pick)
    .filter((x): x is number => x !== undefined)
    .sort((a, b) => a - b);
  return xs.length === 0 ? '–' : `${Math.round(quantileSorted(xs, 0.5))} / ${Math.round(quantileSorted(xs, 0.99))} / ${xs[xs.length - 1]}`;
};

const arg = process.argv.indexOf('--busy');
const busy = (arg > 0 ? (process.argv[arg + 1] ?? '') : '0,4').split(',').map(Number);
const log = (m: string): void => console.error(`# ${m}`);
const node = await startNode({ log });
const rows: string[] = [];
try {
  await installBootstrap(node);
  for (const busyLoops of busy) {
    for (const launcher of [false, true]) {
      await useLauncher(node, launcher);
      const load0 = os.loadavg()[0] ?? 0;
      let r: ProbeCycleRecord;
      try {
        r = await runProbeCycle(node, { ...PROBE_CYCLE, busyLoops }, log);
      } finally {
        await tearDownProbeCycle(node);
      }
      const events = r.unhealthy.reduce((n, e) => n + e.count, 0);
      const causes = [...new Set(r.unhealthy.map((e) => e.cause ?? e.message))].join(', ');
      const got = Object.entries(r.launchers)
        .map(([k, n]) => `${n} ${k.split('/').pop()}`)
        .join(', ');
      rows.push(
        `| ${launcher ? 'health-listen' : 'node binds the port'} (pods: ${got}) | ${busyLoops} | ${load0.toFixed(1)}–${Math.max(...r.load).toFixed(1)} | ${r.starts.length} | **${events}**${causes ? ` (${causes})` : ''} | ${stat(r, (s) => s.listenMs)} | ${stat(r, (s) => s.readyMs)} | ${stat(r, (s) => s.appMs)} |`,
      );
      log(rows[rows.length - 1] ?? '');
    }
  }
} finally {
  await node.stop();
}
console.log(`probe cycle: ${PROBE_CYCLE.replicas} replicas, ${PROBE_CYCLE.cycles} cycles each, ${new Date().toISOString()}\n`);
console.log('| command | busy loops | load | sidecar starts | Unhealthy Events | start → Node.js serves, ms p50 / p99 / max | start → first sync | start → app container |');
console.log('|---|---|---|---|---|---|---|---|');
for (const r of rows) console.log(r);
