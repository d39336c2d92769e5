/**
 * A program's first step: `--help` prints the usage and exits 0; options that do not parse are
 * reported (each program says where: stderr, or its logger) and exit 2; otherwise the program runs.
 */
import { wantsHelp } from '../cli.js';
import type { Result } from '../result.js';

export interface OptionsSpec<T> {
  readonly argv: readonly string[];
  /** The usage text (a function: some programs build it). */
  help(): string;
  /** Parses flags and environment; `'help'` when the command line asks for the usage in its own way. */
  parse(): Result<T | 'help', string>;
  /** Where a parse error goes; default: stderr, one line. */
  refuse?(error: string): void;
}

export interface Output {
  write(text: string): unknown;
}

/** The options to run with, or the exit code to end with. */
export type OptionsOutcome<T> = { readonly run: true; readonly value: T } | { readonly run: false; readonly code: number };

export function readOptions<T>(spec: OptionsSpec<T>, out: { stdout: Output; stderr: Output } = process): OptionsOutcome<T> {
  // Before parsing: the usage must print even when the environment would not parse.
  if (wantsHelp(spec.argv)) return usage(spec, out.stdout);
  const parsed = spec.parse();
  if (!parsed.ok) {
    if (spec.refuse !== undefined) spec.refuse(parsed.error);
    else out.stderr.write(`${parsed.error}\n`);
    return { run: false, code: 2 };
  }
  if (parsed.value === 'help') return usage(spec, out.stdout);
  return { run: true, value: parsed.value };
}

function usage<T>(spec: OptionsSpec<T>, stdout: Output): OptionsOutcome<T> {
  stdout.write(spec.help());
  return { run: false, code: 0 };
}
