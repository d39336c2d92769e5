/**
 * What a benchmark returns, and its text: the section printed after a run, and the record kept
 * per benchmark and mode (bench/lib/results.ts), so benchmarks can be run one at a time and the
 * page still holds the latest figure of every one. Quick runs keep their own record (`b2-quick`)
 * so they never overwrite the full-size figures.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatMachine, type MachineInfo } from './machine.js';

export interface Table {
  readonly caption?: string;
  readonly columns: readonly string[];
  readonly rows: readonly (readonly string[])[];
}

export interface TargetCheck {
  readonly target: string;
  readonly measured: string;
  /** undefined when the figure could not be taken (e.g. the part it measures failed). */
  readonly met: boolean | undefined;
}

export interface BenchResult {
  readonly tables: readonly Table[];
  readonly targets: readonly TargetCheck[];
  /** Method, what limits a missed target, profile findings: one paragraph each. */
  readonly notes: readonly string[];
}

export interface RunContext {
  readonly quick: boolean;
  /** `--minutes N`, for a benchmark that runs for a time (the soak); others ignore it. */
  readonly minutes?: number;
  /** Progress lines go to stderr so that stdout keeps only the figures. */
  readonly log: (msg: string) => void;
}

export interface Benchmark {
  readonly id: string;
  readonly title: string;
  run(ctx: RunContext): Promise<BenchResult>;
}

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** One benchmark's latest result in one mode, as bench/results/<key>.json keeps it. */
export interface ResultRecord {
  /** `b2`, or `b2-quick` for a quick run. */
  readonly key: string;
  readonly id: string;
  readonly title: string;
  readonly quick: boolean;
  readonly command: string;
  readonly date: string;
  readonly commit: string;
  readonly machine: string;
  readonly tables: readonly Table[];
  readonly targets: readonly TargetCheck[];
}

export function resultRecord(b: Benchmark, quick: boolean, command: string, machine: MachineInfo, r: BenchResult): ResultRecord {
  return { key: sectionKey(b, quick), id: b.id, title: b.title, quick, command, date: machine.date, commit: machine.commit, machine: formatMachine(machine), tables: r.tables, targets: r.targets };
}
function cell(s: string): string {
  return s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

export function renderTable(t: Table): string {
  const lines: string[] = [];
  if (t.caption) lines.push(t.caption, '');
  lines.push(`| ${t.columns.map(cell).join(' | ')} |`, `|${t.columns.map(() => '---').join('|')}|`);
  for (const r of t.rows) lines.push(`| ${r.map(cell).join(' | ')} |`);
  return lines.join('\n');
}

function verdict(met: boolean | undefined): string {
  return met === undefined ? 'not measured' : met ? 'met' : '**missed**';
}

export function sectionKey(b: Pick<Benchmark, 'id'>, quick: boolean): string {
  return quick ? `${b.id}-quick` : b.id;
}

export function renderSection(b: Benchmark, quick: boolean, command: string, machine: MachineInfo, r: BenchResult): string {
  const parts = [
    `## ${b.id.toUpperCase()}: ${b.title}${quick ? ' (quick mode)' : ''}`,
    '',
    `- command: \`${command}\``,
    `- date: ${machine.date}; commit ${machine.commit}`,
    `- machine: ${formatMachine(machine)}`,
    '',
  ];
  for (const t of r.tables) parts.push(renderTable(t), '');
  if (r.targets.length > 0) {
    parts.push(renderTable({ columns: ['target', 'measured', 'verdict'], rows: r.targets.map((t) => [t.target, t.measured, verdict(t.met)]) }), '');
  }
  for (const n of r.notes) parts.push(n, '');
  return parts.join('\n').trimEnd();
}

/** The order results appear in: b1..b12, each full one followed by its quick one, a variant (b3real) after its number's own. */
export function order(key: string): number {
  const m = /^b(\d+)([a-z]*)(-quick)?$/.exec(key);
  return m ? Number(m[1]) * 4 + (m[2] ? 2 : 0) + (m[3] ? 1 : 0) : 1000;
}
