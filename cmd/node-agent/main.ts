/**
 * multus-proxy-node: wiring only (options, client, host interfaces, dataplane, runtime, health
 * server, signals). `--help` prints usage; `--cleanup` removes everything the agent added (its
 * MPXN- chains and jumps, its proto-242 routes, its mpxh/mpxb interfaces) and nothing else, then
 * exits. A normal stop (SIGTERM/SIGINT) leaves rules and interfaces in place, like kube-proxy, so a
 * rolling update drops no connection; the next start adopts them and reconciles.
 */
import { createLogger, type Logger } from '../../src/log.js';
import { createRegistry } from '../../src/metrics.js';
import { healthRunnable } from '../../src/program/health.js';
import { connectKube } from '../../src/program/kube.js';
import { runMain } from '../../src/program/main.js';
import { readOptions } from '../../src/program/options.js';
import { Program } from '../../src/program/program.js';
import { createHostInterfaces, createNodeDataplane, type HostInterfaces } from './dataplane.js';
import { createHealthCheckServers } from './health-check.js';
import { HELP, parseNodeAgentOptions, type NodeAgentOptions } from './options.js';
import { chooseBackendAtStart } from '../../src/dataplane/index.js';
import { nodeProbeText } from './nft-probe.js';
import { createNodeRuntime, type NodeRuntime } from './runtime.js';

type NodeDataplane = ReturnType<typeof createNodeDataplane>;
type BackendChoice = Awaited<ReturnType<typeof chooseBackendAtStart>>;

/** `--cleanup`: the rules and routes, then the interfaces; 1 when either is incomplete. */
async function cleanupMode(dataplane: NodeDataplane, interfaces: HostInterfaces, log: Logger): Promise<number> {
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
  return code;
}

async function main(): Promise<number | undefined> {
  const argv = process.argv.slice(2);
  const log = createLogger('node-agent');
  const options = readOptions({ argv, help: () => HELP, parse: () => parseNodeAgentOptions(process.env, argv), refuse: (e) => log.fatal({ problem: e }, e) });
  if (!options.run) return options.code;
  const opts = options.value;
  const choice =
    opts.mode === 'cleanup' ? { kind: opts.backend === 'nftables' ? ('nftables' as const) : ('iptables' as const), why: 'cleanup' } : await chooseBackendAtStart(opts.backend, log, nodeProbeText());
  const dataplane = createNodeDataplane({ backendKind: choice.kind, iptablesFlavor: opts.iptablesBackend, logger: log });
  const interfaces = createHostInterfaces();
  if (opts.mode === 'cleanup') return cleanupMode(dataplane, interfaces, log);
  await run(opts, choice, dataplane, interfaces, log);
  return undefined;
}

/** Health server, health-check listeners and the runtime, started in that order and stopped in the reverse. */
async function run(opts: NodeAgentOptions, choice: BackendChoice, dataplane: NodeDataplane, interfaces: HostInterfaces, log: Logger): Promise<void> {
  const registry = createRegistry('multus_proxy_node');
  // serviceProxyHealthy in the health-check answers: the runtime's liveness, once it exists.
  const live = { runtime: undefined as NodeRuntime | undefined };
  const healthChecks = createHealthCheckServers(log, '::', () => live.runtime?.live() ?? false);
  const rt = createNodeRuntime(
    {
      nodeName: opts.nodeName,
      masqueradeMark: 2 ** opts.masqueradeBit,
      parentFromNad: opts.parentFromNad,
      minSyncIntervalMs: opts.minSyncIntervalMs,
      fullResyncIntervalMs: opts.fullResyncIntervalMs,
      externalIPs: opts.externalIPs,
    },
    { client: connectKube(opts), dataplane, interfaces, healthChecks, log, registry },
  );
  live.runtime = rt;
  const program = new Program('node agent', log, { message: 'stopping; rules and interfaces stay in place', errorMessage: 'error while stopping', errorExitCode: 1 });
  const health = healthRunnable({ checks: { live: () => rt.live(), ready: () => rt.ready() }, registry, port: opts.healthPort, extra: (path) => healthChecks.route(path) });
  if (!(await program.startAll([health, { name: 'health checks', stop: () => healthChecks.close() }]))) return;
  log.info(
    { node: opts.nodeName, healthPort: health.server().port, backend: await dataplane.backend(), backendChoice: choice.why, parentFromNad: opts.parentFromNad },
    'multus-proxy node agent starting',
  );
  program.handleSignals();
  if (await program.start({ name: 'runtime', start: () => rt.start(), stop: () => rt.stop() })) void rt.firstSync.then(() => log.info('first sync done; ready'));
}

runMain(main, (e) => createLogger('node-agent').fatal({ err: e }, 'node agent failed to start'));
