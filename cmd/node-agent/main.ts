/**
 * multus-proxy-node: wiring only (options, client, host interfaces, dataplane, runtime, health
 * server, signals). `--help` prints usage; `--cleanup` removes everything the agent added (its
 * MPXN- chains and jumps, its proto-242 routes, its mpxh/mpxb interfaces) and nothing else, then
 * exits. A normal stop (SIGTERM/SIGINT) leaves rules and interfaces in place, like kube-proxy, so a
 * rolling update drops no connection; the next start adopts them and reconciles.
 */
import { createLogger } from '../../src/log.js';
import { startHealthServer } from '../../src/health.js';
import { createRegistry } from '../../src/metrics.js';
import { loadKubeConnection } from '../../src/kube/config.js';
import { createKubeClient } from '../../src/kube/client.js';
import { createHostInterfaces, createNodeDataplane } from './dataplane.js';
import { createHealthCheckServers } from './health-check.js';
import { HELP, parseNodeAgentOptions } from './options.js';
import { chooseBackendAtStart } from '../../src/dataplane/index.js';
import { nodeProbeText } from './nft-probe.js';
import { createNodeRuntime } from './runtime.js';

async function main(): Promise<void> {
  const log = createLogger('node-agent');
  const parsed = parseNodeAgentOptions(process.env, process.argv.slice(2));
  if (!parsed.ok) {
    log.fatal({ problem: parsed.error }, parsed.error);
    process.exit(2);
  }
  const opts = parsed.value;
  if (opts.mode === 'help') {
    process.stdout.write(HELP);
    return;
  }
  const choice = opts.mode === 'cleanup' ? { kind: opts.backend === 'nftables' ? ('nftables' as const) : ('iptables' as const), why: 'cleanup' } : await chooseBackendAtStart(opts.backend, log, nodeProbeText());
  const dataplane = createNodeDataplane({ backendKind: choice.kind, iptablesFlavor: opts.iptablesBackend, logger: log });
  const interfaces = createHostInterfaces();
  if (opts.mode === 'cleanup') {
    let code = 0;
    try {
      const done = await dataplane.cleanup();
      log.info({ routesRemoved: done.routesRemoved }, 'node rules and routes removed');
    } catch (e) {
      log.error({ err: e }, 'rule cleanup incomplete');
      code = 1;
    }
    try {
      const removed = await interfaces.removeAll();
      log.info({ removed }, 'node interfaces removed');
    } catch (e) {
      log.error({ err: e }, 'interface cleanup incomplete');
      code = 1;
    }
    process.exit(code);
  }

  const client = createKubeClient(loadKubeConnection(opts.kubeconfig !== undefined ? { kubeconfig: opts.kubeconfig } : {}));
  const registry = createRegistry('multus_proxy_node');
  // serviceProxyHealthy in the health-check answers: the runtime's liveness, once it exists.
  let live = (): boolean => false;
  const healthChecks = createHealthCheckServers(log, '::', () => live());
  const runtime = createNodeRuntime(
    { nodeName: opts.nodeName, masqueradeMark: 2 ** opts.masqueradeBit, parentFromNad: opts.parentFromNad, minSyncIntervalMs: opts.minSyncIntervalMs, fullResyncIntervalMs: opts.fullResyncIntervalMs },
    { client, dataplane, interfaces, healthChecks, log, registry },
  );
  live = () => runtime.live();
  const health = await startHealthServer({ live: () => runtime.live(), ready: () => runtime.ready() }, registry, opts.healthPort, undefined, (path) => healthChecks.route(path));
  log.info({ node: opts.nodeName, healthPort: health.port, backend: await dataplane.backend(), backendChoice: choice.why, parentFromNad: opts.parentFromNad }, 'multus-proxy node agent starting');

  let stopping = false;
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping; rules and interfaces stay in place');
    await runtime.stop();
    await healthChecks.close();
    await health.close();
    process.exit(0);
  };
  for (const sig of ['SIGTERM', 'SIGINT'] as const) process.on(sig, (s) => void shutdown(s));
  runtime.start();
  void runtime.firstSync.then(() => log.info('first sync done; ready'));
}

main().catch((e: unknown) => {
  createLogger('node-agent').fatal({ err: e }, 'node agent failed to start');
  process.exit(1);
});
