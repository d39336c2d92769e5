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
import { helpText } from '../../src/cli.js';
import { HEALTH_FD_ENV, inheritedHealthFd, type Readiness } from '../../src/health.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { createDataplane, type Dataplane } from '../../src/dataplane/index.js';
import { chooseBackendAtStart } from '../../src/dataplane/index.js';
import { drainAwareReadiness, healthRunnable } from '../../src/program/health.js';
import { connectKube } from '../../src/program/kube.js';
import { runMain } from '../../src/program/main.js';
import { readOptions } from '../../src/program/options.js';
import { Program, type Runnable } from '../../src/program/program.js';
import { createSidecarMetrics, type SidecarMetrics } from './metrics.js';
import { sidecarDataplaneOptions } from './dataplane-options.js';
import { parseOptions, SIDECAR_PROGRAM, type ParsedOptions } from './options.js';
import { createSidecarRuntime, type SidecarRuntime } from './runtime.js';
import { podEventWriter } from './problems.js';
import { countersReaderBeside } from './policy-drops.js';
import { nftGuardTool } from './source-guard.js';

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
/** How long a stopping sidecar that never answered ready waits for the startup probe (1 s period, first try 1 s after the start under health-listen, 2 s after it without). */
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

/** What the stop sequence and the probes need from a start that may be cut short at any step. */
class SidecarParts {
  runtime: SidecarRuntime | undefined;
  /** /readyz has answered ready at least once (it is its only caller). */
  readyServed = false;

  constructor(private readonly program: Program) {}

  /**
   * Stopping: ready, so that a startup probe held or still to come ends in a success. The kubelet
   * v1.34 keeps probing a native sidecar that had not started yet through its pod's termination
   * (cmd/webhook/mutate.ts); after one success it probes it no more, instead of failing (an
   * Unhealthy Event) once the sidecar is gone.
   */
  readonly ready = (): Readiness => {
    const r = drainAwareReadiness(
      () => this.runtime?.ready() ?? { ready: false, reason: 'starting' },
      () => this.program.stopping(),
      'ready',
    )();
    if (r.ready) this.readyServed = true;
    return r;
  };

  readonly live = (): boolean => this.runtime?.live() ?? true;

  /**
   * Never answered ready (the pod deleted while the sidecar started): let the kubelet's next
   * startup probe, at most a second or two away, pass before the port closes.
   */
  async lastProbe(): Promise<void> {
    for (const until = Date.now() + UNSTARTED_STOP_WAIT_MS; !this.readyServed && Date.now() < until;) await sleep(50);
  }
}

function sidecarProgram(log: Logger): { program: Program; parts: SidecarParts } {
  const program: Program = new Program('sidecar', log, {
    message: 'stopping; rules and routes stay in place for the next start to adopt',
    drain: () => parts.lastProbe(),
    deadline: { ms: STOP_DEADLINE_MS, message: 'a sync is still running; exiting without waiting for it' },
    errorMessage: 'error while stopping',
    errorExitCode: 0,
  });
  const parts = new SidecarParts(program);
  return { program, parts };
}

/** Ends the process when a rule sync is stuck: the kubelet restarts the sidecar as after a failed liveness probe. */
function watchdog(program: Program, runtime: SidecarRuntime, opts: ParsedOptions, log: Logger): Runnable {
  let timer: NodeJS.Timeout | undefined;
  return {
    name: 'watchdog',
    start() {
      timer = setInterval(() => {
        if (program.stopping() || runtime.live()) return;
        log.error({ stuckAfterMs: opts.stuckAfterMs }, 'a rule sync is stuck; exiting so that the kubelet restarts the sidecar');
        program.exit(1);
      }, WATCHDOG_MS);
      timer.unref();
    },
    stop: () => clearInterval(timer),
  };
}

/** The health port, then the stop handlers: before anything slow, so probes and SIGTERM are answered from the start. */
async function listenFirst(program: Program, parts: SidecarParts, opts: ParsedOptions, metrics: SidecarMetrics, log: Logger): Promise<number | undefined> {
  // Injected, the sidecar runs under health-listen (native/health-listen.c), which listened on the
  // port before Node.js started; without it (dev, demo, tests) the sidecar binds the port itself.
  const inheritedFd = inheritedHealthFd(process.env);
  delete process.env[HEALTH_FD_ENV]; // not for the processes the sidecar runs
  // The injected startup probe tries from the container's start (2 s after it without
  // health-listen; cmd/webhook/mutate.ts) and must find it listening; it holds that request until ready.
  const health = healthRunnable({ checks: { live: parts.live, ready: parts.ready }, registry: metrics.registry, port: opts.healthPort, host: opts.healthHost, inheritedFd });
  if (!(await program.start(health))) return undefined;
  log.info({ healthPort: health.server().port, inherited: inheritedFd !== undefined }, HEALTH_LISTENING);
  // A pod deleted while its sidecar starts must not lose the health port to SIGTERM's default
  // exit, or the kubelet's pending startup probe is refused (an Unhealthy Event).
  program.handleSignals();
  return health.server().port;
}

async function main(): Promise<number | undefined> {
  const argv = process.argv.slice(2);
  const log = createLogger('sidecar');
  const options = readOptions({ argv, help: () => helpText(SIDECAR_PROGRAM), parse: () => parseOptions(process.env, argv), refuse: (e) => log.fatal({ problem: e }, e) });
  if (!options.run) return options.code;
  const opts = options.value;
  if (opts.cleanup) return cleanupMode(opts, log);
  const metrics = createSidecarMetrics();
  const { program, parts } = sidecarProgram(log);
  const healthPort = await listenFirst(program, parts, opts, metrics, log);
  if (healthPort === undefined) return undefined;

  const choice = await chooseBackendAtStart(opts.backend, log);
  if (program.stopping()) return undefined; // stopped while probing: the program exits without a runtime
  const client = connectKube(opts);
  // Spare restore processes (a change skips a process start on its way to the kernel), and the
  // first sync's reads started while the informers list (dataplane-options.ts).
  const dataplane: Dataplane = createDataplane(sidecarDataplaneOptions(opts, choice.kind, log));
  await program.start({ name: 'dataplane', stop: () => dataplane.close() });
  const event = podEventWriter(client, { namespace: opts.podNamespace, name: opts.podName }, log);
  const policy = {
    podLabelsFile: opts.podLabelsFile,
    podContainerPorts: opts.podContainerPorts,
    policyHoldMs: opts.policyHoldMs,
    policyApiRetryMs: opts.policyApiRetryMs,
    backendKind: choice.kind,
    countersReader: countersReaderBeside(opts.elementWriter),
  };
  const rt = createSidecarRuntime({ ...opts, policy }, { client, dataplane, log, metrics, event, guard: nftGuardTool });
  parts.runtime = rt;
  log.info({ pod: `${opts.podNamespace}/${opts.podName}`, healthPort, backend: await dataplane.backend(), backendChoice: choice.why }, 'multus-proxy sidecar starting');
  const started = await program.startAll([watchdog(program, rt, opts, log), { name: 'runtime', start: () => rt.start(), stop: () => rt.stop() }]);
  if (started) void rt.firstSync.then(() => log.info('first sync done; ready'));
  return undefined;
}

// Only start-up can get here (bad kubeconfig): say why and exit non-zero.
runMain(main, (e) => createLogger('sidecar').fatal({ err: e }, 'sidecar failed to start'));
