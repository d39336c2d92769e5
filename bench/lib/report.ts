/**
 * What a benchmark returns and how it lands in docs/benchmarks.md. Each benchmark owns one
 * section between markers; writing a section replaces only that one, so benchmarks can be run
 * one at a time and the page still holds the latest figure of every one. Quick runs write their
 * own sections (`b2-quick`) so they never overwrite the full-size figures.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
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
export const DOC = path.join(ROOT, 'docs', 'benchmarks.md');

const HEADER = `# Benchmarks

Figures from \`npm run bench\` (all six; \`npm run bench -- b2 b4\` for some, \`--quick\` for smaller
sizes and fewer runs) or one script alone (\`node --import tsx bench/b2-rule-sync.ts\`). Each
benchmark writes its own section below, with the command, the date, the commit and the machine.
The machine is shared and noisy, so every benchmark runs its baseline in the same run,
interleaved with ours where possible, and reports the median with its spread (min–max over
the runs, or p10/p90 over the samples). Quick-mode sections are kept apart from full-size ones.
`;

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

const begin = (key: string): string => `<!-- bench:${key} begin -->`;
const end = (key: string): string => `<!-- bench:${key} end -->`;

/** The order sections appear in: b1..b8, each full section followed by its quick one, a variant (b3real) after its number's own. */
export function order(key: string): number {
  const m = /^b(\d+)([a-z]*)(-quick)?$/.exec(key);
  return m ? Number(m[1]) * 4 + (m[2] ? 2 : 0) + (m[3] ? 1 : 0) : 1000;
}

/**
 * Replaces (or adds) one section of the page, keeping every other section as it was, and the text
 * written by hand after a section (up to the next one) with that section. Pure.
 */
export function upsertSection(page: string, key: string, body: string): string {
  const re = /<!-- bench:([\w-]+) begin -->\n([\s\S]*?)\n<!-- bench:\1 end -->/g;
  const sections = new Map<string, { body: string; after: string }>();
  const found = [...page.matchAll(re)];
  found.forEach((m, i) => {
    if (m[1] === undefined || m[2] === undefined) return;
    const from = m.index + m[0].length;
    const to = found[i + 1]?.index ?? page.length;
    sections.set(m[1], { body: m[2], after: page.slice(from, to).trim() });
  });
  const firstMarker = page.indexOf('<!-- bench:');
  const head = firstMarker >= 0 ? page.slice(0, firstMarker).trimEnd() : page.trim() || HEADER.trimEnd();
  sections.set(key, { body, after: sections.get(key)?.after ?? '' });
  const keys = [...sections.keys()].sort((a, b) => order(a) - order(b) || a.localeCompare(b));
  const block = (k: string): string => {
    const s = sections.get(k);
    return `${begin(k)}\n${s?.body ?? ''}\n${end(k)}${s?.after ? `\n\n${s.after}` : ''}`;
  };
  return `${head}\n\n${keys.map(block).join('\n\n')}\n`;
}

export function writeSection(key: string, body: string, file = DOC): void {
  const page = existsSync(file) ? readFileSync(file, 'utf8') : HEADER;
  writeFileSync(file, upsertSection(page, key, body));
}
