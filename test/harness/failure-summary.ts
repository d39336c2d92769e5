/**
 * A second test reporter for `npm test` (test/run.ts): it prints nothing until the run ends, then a
 * short block naming every failed test, with its path of suites, its file, its error and the last
 * lines its file printed before it failed.
 *
 * Why: the TAP output of a full run is ~8,000 lines, and a failure sits where it happened, in the
 * middle. CI keeps only the output's head and tail, so a failure in a 32-test real-node suite
 * showed as "1 subtest failed" with no name. This block lands in the tail.
 *
 * The collector is pure (events in, lines out); the default export is the reporter node:test loads.
 */

/** The node:test reporter events this reads (a subset of their fields). */
export type ReporterEvent =
  | { type: 'test:start'; data: { name: string; nesting: number; file?: string } }
  | { type: 'test:fail'; data: { name: string; nesting: number; file?: string; details: { error?: unknown } } }
  | { type: 'test:stdout' | 'test:stderr'; data: { message: string; file?: string } }
  | { type: 'test:diagnostic'; data: { message: string; nesting: number; file?: string } }
  | { type: string; data?: unknown };

export interface Failure {
  file: string;
  /** The suites' names, outermost first, then the test's. */
  path: string[];
  error: string;
  /** The file's last output lines before the failure. */
  before: string[];
}

export interface SummaryLimits {
  /** Failures shown in full; later ones by name only. */
  detailed: number;
  /** Output lines kept per file before a failure. */
  contextLines: number;
  /** Characters kept of an error and of an output line. */
  errorChars: number;
  lineChars: number;
}

export const DEFAULT_LIMITS: SummaryLimits = { detailed: 5, contextLines: 12, errorChars: 1200, lineChars: 240 };

const clip = (s: string, n: number): string => (s.length <= n ? s : `${s.slice(0, n)}… (${s.length - n} more characters)`);

/** The message of a node:test failure: its cause's when the runner wrapped it. */
export function errorText(error: unknown): string {
  if (error instanceof Error) {
    const cause = (error as Error & { cause?: unknown }).cause;
    if ((error as Error & { code?: string }).code === 'ERR_TEST_FAILURE' && cause !== undefined) return errorText(cause);
    return error.message || String(error);
  }
  if (typeof error === 'string') return error;
  try {
    return JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}

/** A failure is one of a test's own, not a suite's "N subtests failed" nor a cancelled sibling. */
function isOwnFailure(error: unknown): boolean {
  const e = error as { failureType?: string } | undefined;
  return e?.failureType !== 'subtestsFailed' && e?.failureType !== 'cancelledByParent';
}

export class FailureCollector {
  readonly failures: Failure[] = [];
  private readonly names: string[] = [];
  private readonly output = new Map<string, string[]>();

  /** `root`: a prefix cut from file names (the repository, so they read as test/…). */
  constructor(
    private readonly limits: SummaryLimits = DEFAULT_LIMITS,
    private readonly root = '',
  ) {}

  feed(event: ReporterEvent): void {
    const data = event.data as Record<string, unknown> | undefined;
    if (!data) return;
    const full = typeof data.file === 'string' ? data.file : '';
    const file = this.root && full.startsWith(`${this.root}/`) ? full.slice(this.root.length + 1) : full;
    switch (event.type) {
      case 'test:start': {
        const nesting = Number(data.nesting);
        this.names.length = nesting;
        this.names[nesting] = String(data.name);
        return;
      }
      case 'test:stdout':
      case 'test:stderr':
      case 'test:diagnostic':
        this.remember(file, String(data.message));
        return;
      case 'test:fail': {
        const error = (data.details as { error?: unknown } | undefined)?.error;
        if (!isOwnFailure(error)) return;
        const nesting = Number(data.nesting);
        const path = [...this.names.slice(0, nesting), String(data.name)];
        this.failures.push({ file, path, error: errorText(error), before: [...(this.output.get(file) ?? [])] });
        return;
      }
      default:
    }
  }

  private remember(file: string, message: string): void {
    let kept = this.output.get(file);
    if (!kept) this.output.set(file, (kept = []));
    for (const line of message.split('\n')) {
      if (line.trim() === '') continue;
      kept.push(clip(line, this.limits.lineChars));
      if (kept.length > this.limits.contextLines) kept.shift();
    }
  }

  /** The block printed at the end; empty when nothing failed. */
  summary(): string[] {
    if (this.failures.length === 0) return [];
    const out = [`# ===== ${this.failures.length} failed test(s) =====`];
    this.failures.forEach((f, i) => {
      out.push(`# ${i + 1}. ${f.path.join(' > ')}${f.file ? `  (${f.file})` : ''}`);
      if (i >= this.limits.detailed) return;
      for (const l of clip(f.error, this.limits.errorChars).split('\n')) if (l.trim() !== '') out.push(`#      error: ${l}`);
      if (f.before.length > 0) out.push('#      its file printed before:');
      for (const l of f.before) out.push(`#        ${l}`);
    });
    out.push(`# ===== end of failed tests =====`);
    return out;
  }
}

/**
 * Several runs' blocks (test/run.ts runs one per tier) as one: their failures in order, numbered
 * anew, under one heading. Empty when none failed.
 */
export function mergeSummaries(blocks: readonly string[]): string[] {
  const entries: string[][] = [];
  for (const block of blocks) {
    for (const line of block.split('\n')) {
      if (line.startsWith('# =====') || line.trim() === '') continue;
      const m = /^# \d+\. (.*)$/.exec(line);
      if (m) entries.push([m[1] as string]);
      else entries[entries.length - 1]?.push(line);
    }
  }
  if (entries.length === 0) return [];
  return [`# ===== ${entries.length} failed test(s) =====`, ...entries.flatMap(([head, ...rest], i) => [`# ${i + 1}. ${head ?? ''}`, ...rest]), '# ===== end of failed tests ====='];
}

export default async function* failureSummary(source: AsyncIterable<ReporterEvent>): AsyncGenerator<string> {
  const c = new FailureCollector(DEFAULT_LIMITS, process.cwd());
  for await (const event of source) c.feed(event);
  const lines = c.summary();
  if (lines.length > 0) yield `${lines.join('\n')}\n`;
}
