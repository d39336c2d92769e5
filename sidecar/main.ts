/**
 * The multus-proxy sidecar: wiring only. Options from the environment (downward API) and flags,
 * the lean Kubernetes client, the dataplane in this pod's network namespace, the runtime
 * (informers + sync loop), the health/metrics server, and signals.
 *
 * SIGTERM / SIGINT: stop the informers and the loop, remove every chain, route and jump this
 * program added (dataplane.cleanup()), exit 0. Foreign rules are never touched.
 */
import { createLogger } from '../src/log.js';
import { helpText, wantsHelp } from '../src/cli.js';
import { startHealthServer } from '../src/health.js';
import { loadKubeConnection } from '../src/kube/config.js';
import { createKubeClient } from '../src/kube/client.js';
import { createDataplane } from '../src/dataplane/apply.js';
import { createSidecarMetrics } from './metrics.js';
import { parseOptions, SIDECAR_PROGRAM } from './options.js';
import { createSidecarRuntime } from './runtime.js';

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
  const client = createKubeClient(loadKubeConnection(opts.kubeconfig !== undefined ? { kubeconfig: opts.kubeconfig } : {}));
  const metrics = createSidecarMetrics();
  const dataplane = createDataplane({ backend: opts.iptablesBackend, logger: log });
  const runtime = createSidecarRuntime(opts, { client, dataplane, log, metrics });
  const health = await startHealthServer({ live: () => runtime.live(), ready: () => runtime.ready() }, metrics.registry, opts.healthPort, opts.healthHost);
  log.info({ pod: `${opts.podNamespace}/${opts.podName}`, healthPort: health.port, backend: await dataplane.backend() }, 'multus-proxy sidecar starting');

  let stopping = false;
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping: removing our rules and routes');
    let code = 0;
    try {
      await runtime.stop();
      const done = await dataplane.cleanup();
      log.info({ routesRemoved: done.routesRemoved }, 'rules and routes removed');
    } catch (e) {
      log.error({ err: e }, 'cleanup failed; some rules may remain');
      code = 1;
    }
    await health.close();
    // pino writes synchronously to stdout by default, so nothing is lost by exiting here.
    process.exit(code);
  };
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, (s) => void shutdown(s));

  runtime.start();
  void runtime.firstSync.then(() => log.info('first sync done; ready'));
}

main().catch((e: unknown) => {
  // Only start-up can get here (bad kubeconfig, port in use): say why and exit non-zero.
  createLogger('sidecar').fatal({ err: e }, 'sidecar failed to start');
  process.exit(1);
});
