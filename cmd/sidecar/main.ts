/**
 * The multus-proxy sidecar: wiring only. Options from the environment (downward API) and flags,
 * the lean Kubernetes client, the dataplane in this pod's network namespace, the runtime
 * (informers + sync loop), the health/metrics server, and signals.
 *
 * SIGTERM / SIGINT: stop the informers and the loop, close the health server, exit 0, and leave
 * every rule and route in place. The kubelet restarts a native sidecar with SIGTERM too (liveness
 * failure, `crictl stop`), and it cannot be told from a pod deletion; a deleted pod's network
 * namespace takes the rules with it. The next start adopts what it finds: its first sync is a full
 * one that replaces our chains in one transaction per table and removes stale ones.
 *
 * `--cleanup`: remove every chain, jump and route this program adds, and exit (0 when all went).
 * Foreign rules are never touched.
 */
import { createLogger, type Logger } from '../../src/log.js';
import { helpText, wantsHelp } from '../../src/cli.js';
import { HEALTH_FD_ENV, inheritedHealthFd, startHealthServer, type Readiness } from '../../src/health.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadKubeConnection } from '../../src/kube/config.js';
import { createKubeClient } from '../../src/kube/client.js';
import { createDataplane, type Dataplane } from '../../src/dataplane/index.js';
import { chooseBackendAtStart } from '../../src/dataplane/index.js';
import { createSidecarMetrics } from './metrics.js';
import { sidecarDataplaneOptions } from './dataplane-options.js';
import { parseOptions, SIDECAR_PROGRAM, type ParsedOptions } from './options.js';
import { createSidecarRuntime, type SidecarRuntime } from './runtime.js';
import { podEventWriter } from './problems.js';

/**
 * How long stopping may take before the process exits anyway: well inside the kubelet's default
 * 30 s grace period. Only a running sync is waited for; its restore is one transaction per table,
 * so exiting while it runs cannot leave half a table.
 */
const STOP_DEADLINE_MS = 5_000;
/** Logged the moment the health port listens (the soak measures start → listening from it). */
const HEALTH_LISTENING = 'health port listening';
/**
 * How often the watchdog looks at liveness. The injected container has no liveness probe (the
 * kubelet v1.34 probes a native sidecar's liveness after it exited, during the pod's termination:
 * cmd/webhook/mutate.ts); a sync stuck longer than SYNC_STUCK_AFTER_MS ends the process instead, and
 * the kubelet restarts the sidecar as it would after a failed probe.
 */
const WATCHDOG_MS = 10_000;
/** How long a stopping sidecar that never answered ready waits for the startup probe (1 s period, first try at once under health-listen, 2 s after the start without). */
const UNSTARTED_STOP_WAIT_MS = 3_000;

async function cleanupMode(opts: ParsedOptions, log: Logger): Promise<number> {
  // Removing writes no elements and reads nothing ahead (dataplane-options.ts).
  const dataplane = createDataplane(sidecarDataplaneOptions(opts, opts.backend, log));
  try {
    const done = await dataplane.cleanup();
    log.info({ backend: await dataplane.backend(), routesRemoved: done.routesRemoved }, 'cleanup: our rules and routes removed');
    return 0;
  } catch (e) {
    log.error({ err: e }, 'cleanup failed; some rules may remain (run it again)');
    return 1;
  }
}

async function main(): Promise<void> {
  if (wantsHelp(process.argv.slice(2))) {
    process.stdout.write(helpText(SIDECAR_PROGRAM));
    return;
  }
  const log = createLogger('sidecar');
  const parsed = parseOptions(process.env, process.argv.slice(2));
  if (!parsed.ok) {
    log.fatal({ problem: parsed.error }, parsed.error);
    process.exit(2);
  }
  const opts = parsed.value;
  if (opts.cleanup) process.exit(await cleanupMode(opts, log));
  const metrics = createSidecarMetrics();
  // The health port first: the injected startup probe tries from the container's start (2 s after
  // it without health-listen; cmd/webhook/mutate.ts) and must find it listening; it holds that
  // request until ready.
  const box: { runtime?: SidecarRuntime; dataplane?: Dataplane } = {};
  const state = { stopping: false, readyServed: false };
  const ready = (): Readiness => {
    // Stopping: ready, so that a startup probe held or still to come ends in a success. The kubelet
    // v1.34 keeps probing a native sidecar that had not started yet through its pod's termination
    // (cmd/webhook/mutate.ts); after one success it probes it no more, instead of failing (an Unhealthy
    // Event) once the sidecar is gone. /readyz is the only caller, so readyServed means answered.
    const r = state.stopping ? { ready: true } : (box.runtime?.ready() ?? { ready: false, reason: 'starting' });
    if (r.ready) state.readyServed = true;
    return r;
  };
  // Injected, the sidecar runs under health-listen (native/health-listen.c), which listened on the
  // port before Node.js started; without it (dev, demo, tests) the sidecar binds the port itself.
  const inheritedFd = inheritedHealthFd(process.env);
  delete process.env[HEALTH_FD_ENV]; // not for the processes the sidecar runs
  const health = await startHealthServer({ live: () => box.runtime?.live() ?? true, ready }, metrics.registry, opts.healthPort, opts.healthHost, undefined, inheritedFd);
  log.info({ healthPort: health.port, inherited: inheritedFd !== undefined }, HEALTH_LISTENING);

  // The stop handlers next, before anything slow (the nftables probe runs a process): a pod deleted
  // while its sidecar starts must not lose the health port to SIGTERM's default exit, or the
  // kubelet's pending startup probe is refused (an Unhealthy Event).
  const shutdown = async (signal: string): Promise<void> => {
    if (state.stopping) return;
    state.stopping = true;
    log.info({ signal }, 'stopping; rules and routes stay in place for the next start to adopt');
    const deadline = setTimeout(() => {
      log.warn({ afterMs: STOP_DEADLINE_MS }, 'a sync is still running; exiting without waiting for it');
      process.exit(0);
    }, STOP_DEADLINE_MS);
    try {
      // Never answered ready (the pod deleted while the sidecar started): let the kubelet's next
      // startup probe, at most a second or two away, pass before the port closes.
      for (const until = Date.now() + UNSTARTED_STOP_WAIT_MS; !state.readyServed && Date.now() < until; ) await sleep(50);
      await box.runtime?.stop();
      box.dataplane?.close();
      await health.close();
    } catch (e) {
      log.error({ err: e }, 'error while stopping');
    }
    clearTimeout(deadline);
    // pino writes synchronously to stdout by default, so nothing is lost by exiting here.
    process.exit(0);
  };
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, (s) => void shutdown(s));

  const choice = await chooseBackendAtStart(opts.backend, log);
  if (state.stopping) return; // stopped while probing: shutdown() exits without a runtime
  const client = createKubeClient(loadKubeConnection(opts.kubeconfig !== undefined ? { kubeconfig: opts.kubeconfig } : {}));
  // Spare restore processes (a change skips a process start on its way to the kernel), and the
  // first sync's reads started while the informers list (dataplane-options.ts).
  const dataplane = createDataplane(sidecarDataplaneOptions(opts, choice.kind, log));
  box.dataplane = dataplane;
  const event = podEventWriter(client, { namespace: opts.podNamespace, name: opts.podName }, log);
  const rt = createSidecarRuntime(opts, { client, dataplane, log, metrics, event });
  box.runtime = rt;
  log.info({ pod: `${opts.podNamespace}/${opts.podName}`, healthPort: health.port, backend: await dataplane.backend(), backendChoice: choice.why }, 'multus-proxy sidecar starting');

  const watchdog = setInterval(() => {
    if (state.stopping || rt.live()) return;
    log.error({ stuckAfterMs: opts.stuckAfterMs }, 'a rule sync is stuck; exiting so that the kubelet restarts the sidecar');
    process.exit(1);
  }, WATCHDOG_MS);
  watchdog.unref();

  if (state.stopping) return; // stopped meanwhile: shutdown() stops the runtime and exits
  rt.start();
  void rt.firstSync.then(() => log.info('first sync done; ready'));
}

main().catch((e: unknown) => {
  // Only start-up can get here (bad kubeconfig, port in use): say why and exit non-zero.
  createLogger('sidecar').fatal({ err: e }, 'sidecar failed to start');
  process.exit(1);
});
