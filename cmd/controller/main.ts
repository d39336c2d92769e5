/**
 * The controller process: parse flags, connect, run until SIGTERM/SIGINT (then release the lease
 * so a standby takes over at once), exit non-zero when leadership is lost so the restart begins
 * from clean state.
 *
 * `controller diagnose pod|service NAME` is a one-shot subcommand of the same binary
 * (cmd/controller/diagnose/; docs/decisions/0016-diagnose-subcommand.md): it reads, explains and exits.
 */
import { createLogger } from '../../src/log.js';
import { connectKube } from '../../src/program/kube.js';
import { runMain, stderrStartFailure } from '../../src/program/main.js';
import { readOptions } from '../../src/program/options.js';
import { Program } from '../../src/program/program.js';
import { parseOptions, USAGE } from './options.js';
import { startController } from './run.js';
import { runDiagnose } from './diagnose/command.js';

async function main(): Promise<number | undefined> {
  // Exits explicitly: the client's keep-alive connection must not hold the process open.
  if (process.argv[2] === 'diagnose') return runDiagnose(process.argv.slice(3), process.stdout, process.stderr);
  const argv = process.argv.slice(2);
  const options = readOptions({ argv, help: () => USAGE, parse: () => parseOptions(argv) });
  if (!options.run) return options.code;
  const opts = options.value;
  const logger = createLogger('controller');
  const program = new Program('controller', logger, { message: 'shutting down', errorMessage: 'shutdown failed', errorExitCode: 1 });
  const running = await startController(connectKube(opts), opts, logger, {
    onLostLeadership: (reason) => {
      // At once, without stopping: not one more write, and the restart begins from clean state.
      logger.fatal({ reason }, 'leadership lost; exiting so the replica restarts clean');
      program.exit(1);
    },
  });
  // Started above (its health server is part of it); registered here so a signal stops it.
  await program.start({ name: 'controller', stop: () => running.stop() });
  logger.info({ healthPort: running.health.port, identity: opts.identity, namespace: opts.namespace ?? '(all)' }, 'controller started');
  program.handleSignals();
  return undefined;
}

runMain(main, stderrStartFailure('controller', true));
