/**
 * Runs benchmarks, prints their figures and keeps their results (bench/results/, which make the
 * results block of docs/benchmarks.md and its charts). Shared
 * by bench/run.ts (several) and by each bench/bN-*.ts when run alone.
 */
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { machineInfo } from './machine.js';
import { renderSection, resultRecord, ROOT, type Benchmark } from './report.js';
import { saveResult } from './results.js';

export interface RunArgs {
  readonly quick: boolean;
  readonly names: readonly string[];
  readonly noWrite: boolean;
  /** `--minutes N`: the length of a benchmark that runs for a time (the soak). */
  readonly minutes?: number;
}

export function parseRunArgs(argv: readonly string[]): RunArgs {
  const names: string[] = [];
  let quick = false;
  let noWrite = false;
  let minutes: number | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] ?? '';
    if (a === '--quick') quick = true;
    else if (a === '--no-write') noWrite = true;
    else if (a === '--minutes') {
      const v = argv[++i];
      minutes = Number(v);
      if (!(minutes > 0)) throw new Error(`bench: --minutes ${JSON.stringify(v ?? '')}: give a positive number of minutes, e.g. --minutes 25`);
    } else if (a.startsWith('-')) throw new Error(`bench: unknown option ${JSON.stringify(a)}; use --quick, --no-write, --minutes N and benchmark names (b1 … b9, b3real, soak)`);
    else names.push(a.toLowerCase());
  }
  return { quick, names, noWrite, ...(minutes !== undefined ? { minutes } : {}) };
}

/** The command line as the user typed it, for the record. */
export function commandLine(script: string, argv: readonly string[]): string {
  const args = argv.length > 0 ? ` ${argv.join(' ')}` : '';
  if (process.env['npm_lifecycle_event'] === 'bench') return `npm run bench --${args}`;
  return `node --import tsx ${path.relative(ROOT, script)}${args}`;
}

/** Runs one benchmark; returns false when it failed (its last result is then left as it was). */
export async function runOne(b: Benchmark, args: RunArgs, command: string): Promise<boolean> {
  const log = (msg: string): void => {
    process.stderr.write(`[${b.id} ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
  };
  const machine = machineInfo();
  log(`start${args.quick ? ' (quick)' : ''}: ${b.title}`);
  const t0 = Date.now();
  try {
    const result = await b.run({ quick: args.quick, log, ...(args.minutes !== undefined ? { minutes: args.minutes } : {}) });
    const section = renderSection(b, args.quick, command, machine, result);
    process.stdout.write(`\n${section}\n\n`);
    if (!args.noWrite) saveResult(resultRecord(b, args.quick, command, machine, result));
    log(`done in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    return true;
  } catch (e) {
    log(`FAILED after ${((Date.now() - t0) / 1000).toFixed(1)} s: ${(e as Error).stack ?? String(e)}`);
    return false;
  }
}

/** True when the module at metaUrl is the script node was started with. */
export function isMain(metaUrl: string): boolean {
  const entry = process.argv[1];
  return entry !== undefined && pathToFileURL(path.resolve(entry)).href === metaUrl;
}

/** `if (isMain(import.meta.url)) await runStandalone(benchmark, import.meta.url)` at the end of each bench script. */
export async function runStandalone(b: Benchmark, metaUrl: string): Promise<void> {
  const argv = process.argv.slice(2);
  const args = parseRunArgs(argv);
  const ok = await runOne(b, args, commandLine(fileURLToPath(metaUrl), argv));
  process.exit(ok ? 0 : 1);
}
