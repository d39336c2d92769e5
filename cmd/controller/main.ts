/**
 * The controller process: parse flags, connect, run until SIGTERM/SIGINT (then release the lease
 * so a standby takes over at once), exit non-zero when leadership is lost so the restart begins
 * from clean state.
 *
 * `controller diagnose pod|service NAME` is a one-shot subcommand of the same binary
 * (cmd/controller/diagnose/; docs/decisions/0016-diagnose-subcommand.md): it reads, explains and exits.
 */
import { loadKubeConnection } from '../../src/kube/config.js';
import { createKubeClient } from '../../src/kube/client.js';
import { createLogger } from '../../src/log.js';
import { parseOptions, USAGE } from './options.js';
import { startController } from './run.js';
import { runDiagnose } from './diagnose/command.js';

async function main(): Promise<void> {
  if (process.argv[2] === 'diagnose') {
    // Explicit exit: the client's keep-alive connection must not hold the process open.
    process.exit(await runDiagnose(process.argv.slice(3), process.stdout, process.stderr));
  }
  const parsed = parseOptions(process.argv.slice(2));
  if (!parsed.ok) {
    process.stderr.write(`${parsed.error}\n`);
    process.exit(2);
  }
  if (parsed.value === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  const opts = parsed.value;
  const logger = createLogger('controller');
  const conn = loadKubeConnection({ ...(opts.kubeconfig ? { kubeconfig: opts.kubeconfig } : {}), ...(opts.context ? { context: opts.context } : {}) });
  const client = createKubeClient(conn);
  const running = await startController(client, opts, logger, {
    onLostLeadership: (reason) => {
      logger.fatal({ reason }, 'leadership lost; exiting so the replica restarts clean');
      process.exit(1);
    },
  });
  logger.info({ healthPort: running.health.port, identity: opts.identity, namespace: opts.namespace ?? '(all)' }, 'controller started');
  let stopping = false;
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    running
      .stop()
      .then(() => process.exit(0))
      .catch((e: unknown) => {
        logger.error({ err: String(e) }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((e: unknown) => {
  process.stderr.write(`controller: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
