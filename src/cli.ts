/**
 * Command-line options for every program (controller, webhook, sidecar, certs), on node:util
 * parseArgs. A program declares its flags once (name, environment variable, default, what it
 * does); from that one table come the parser (strict: an unknown flag is an error naming the known
 * ones) and the `--help` text, so the two cannot disagree. What a value means (a port, a duration,
 * a file) stays with the program, which validates it and names the flag in its message.
 */
import { parseArgs } from 'node:util';
import { err, ok, type Result } from './result.js';

export interface Flag {
  /** The flag without dashes, e.g. `health-port`. */
  readonly name: string;
  /** Placeholder for its value in the help, e.g. `N`, `DUR`, `PATH`; absent: a boolean switch. */
  readonly value?: string;
  /** The environment variable read when the flag is absent. */
  readonly env?: string;
  /** The default, as the user would write it. */
  readonly def?: string;
  readonly help: string;
  /** May be given several times. */
  readonly multiple?: boolean;
}

export interface Program {
  /** e.g. `multus-proxy sidecar`. */
  readonly name: string;
  /** One line: what the program does. */
  readonly about: string;
  /** e.g. `sidecar [flags]`, `certs <generate|bootstrap> [flags]`. */
  readonly usage: string;
  readonly flags: readonly Flag[];
  /** Extra paragraphs after the flag table (precedence, files). */
  readonly notes?: string;
}

export interface ParsedFlags {
  /** Given flags only (no env, no defaults): the program decides precedence. */
  readonly values: Readonly<Record<string, string | string[] | undefined>>;
  readonly positionals: readonly string[];
}

/** `--help` or `-h` anywhere on the command line: print the help and exit 0, whatever else is there. */
export function wantsHelp(argv: readonly string[]): boolean {
  return argv.includes('--help') || argv.includes('-h');
}

/** Parses argv strictly; an error names the program, the bad flag and the known ones. */
export function parseFlags(program: Program, argv: readonly string[], opts: { positionals?: boolean } = {}): Result<ParsedFlags, string> {
  try {
    const parsed = parseArgs({
      args: [...argv],
      options: Object.fromEntries(program.flags.map((f) => [f.name, f.value === undefined ? { type: 'boolean' as const } : { type: 'string' as const, multiple: f.multiple === true }])),
      strict: true,
      allowPositionals: opts.positionals === true,
    });
    const values: Record<string, string | string[] | undefined> = {};
    for (const [k, v] of Object.entries(parsed.values)) values[k] = typeof v === 'boolean' ? String(v) : (v as string | string[] | undefined);
    return ok({ values, positionals: parsed.positionals });
  } catch (e) {
    const known = program.flags.map((f) => `--${f.name}`).join(', ');
    return err(`${program.name}: ${(e as Error).message}; known flags: ${known} (see --help)`);
  }
}

/** The `--help` text: usage, then one block per flag with its variable and default. */
export function helpText(program: Program): string {
  const lines = [`${program.name}: ${program.about}`, '', `usage: ${program.usage}`, '', 'flags:'];
  const head = (f: Flag): string => `  --${f.name}${f.value === undefined ? '' : ` ${f.value}`}`;
  const width = Math.max(...program.flags.map((f) => head(f).length)) + 2;
  for (const f of program.flags) {
    const extra = [f.env !== undefined ? `env ${f.env}` : '', f.def !== undefined ? `default ${f.def}` : '', f.multiple === true ? 'repeatable' : ''].filter((x) => x !== '').join('; ');
    lines.push(`${head(f).padEnd(width)}${f.help}${extra === '' ? '' : ` (${extra})`}`);
  }
  lines.push(`${'  --help'.padEnd(width)}this text`);
  if (program.notes !== undefined) lines.push('', program.notes);
  return `${lines.join('\n')}\n`;
}

/** --kubeconfig's name and variable, the same in every program that reaches the apiserver. */
export const KUBECONFIG_FLAG = { name: 'kubeconfig', env: 'KUBECONFIG' } as const;

/**
 * --kubeconfig and --context, as one program lists them: the names, the variable and how they are
 * read are shared; the help says what each is for in that program (certs uses them for bootstrap only).
 */
export function connectionFlags(help: { readonly kubeconfig: string; readonly context: string }, value = 'PATH'): readonly Flag[] {
  return [
    { ...KUBECONFIG_FLAG, value, help: help.kubeconfig },
    { name: 'context', value: 'NAME', help: help.context },
  ];
}

/** The --kubeconfig and --context given (empty counts as not given), as optional fields for loadKubeConnection. */
export function connectionValues(values: ParsedFlags['values']): { kubeconfig?: string; context?: string } {
  const str = (k: string): string | undefined => {
    const v = values[k];
    return typeof v === 'string' && v !== '' ? v : undefined;
  };
  const kubeconfig = str(KUBECONFIG_FLAG.name);
  const context = str('context');
  return { ...(kubeconfig !== undefined ? { kubeconfig } : {}), ...(context !== undefined ? { context } : {}) };
}
