/**
 * The entry point of every program: run `main`; a number it returns is the exit code (one-shot
 * commands, `--help`, bad options); undefined means it keeps running (its Program exits later).
 * An error thrown before that can only be a start-up failure: reported the program's way, exit 1.
 */
import { REAL_PROCESS, type ProcessPort } from './program.js';
import { escapeTerminal } from '../terminal-text.js';

export function runMain(main: () => Promise<number | undefined>, reportStartFailure: (e: unknown) => void, port: Pick<ProcessPort, 'exit'> = REAL_PROCESS): void {
  main().then(
    (code) => {
      if (code !== undefined) port.exit(code);
    },
    (e: unknown) => {
      reportStartFailure(e);
      port.exit(1);
    },
  );
}

/** `name: message` on stderr (the stack too when asked), control characters escaped (the message may quote cluster data): for programs whose logger may not exist yet. */
export function stderrStartFailure(name: string, withStack = false): (e: unknown) => void {
  return (e) => {
    const text = e instanceof Error ? (withStack ? (e.stack ?? e.message) : e.message) : String(e);
    process.stderr.write(`${name}: ${escapeTerminal(text)}\n`);
  };
}
