/**
 * iptables IO: flavour detection, applying restore text, reading back what is ours. All decisions
 * (what text to apply) are in render.ts and restore.ts; this module only runs binaries.
 */
import { lineContext, summarize, type Exec } from '../core/exec.js';
import { failedLine } from '../tuning/spare-exec.js';
import type { IpFamily } from '../core/model.js';
import type { BackendFlavor } from '../core/seam.js';
import { SIDECAR_LAYOUT, TABLES, type Layout, type TableName } from '../core/names.js';
import { parseExisting, type Existing } from './restore.js';

/** iptables' flavour: its nf_tables or its legacy (xtables) binaries. */
export type IptablesFlavor = Exclude<BackendFlavor, 'nftables'>;

function binary(backend: IptablesFlavor, family: IpFamily, tool: 'restore' | 'save'): string {
  return `${family === 4 ? 'iptables' : 'ip6tables'}-${backend}-${tool}`;
}

/** Whether iptables-save text holds any rule (a line `-A ...`). */
export function hasRules(saveText: string): boolean {
  return /^-A /m.test(saveText);
}

/**
 * The back end the namespace already uses: legacy only when it already holds legacy rules (some
 * other component of the pod chose legacy, and mixing the two makes both unreadable), else nft.
 * A missing legacy binary means nft.
 */
export async function detectFlavor(exec: Exec): Promise<IptablesFlavor> {
  const saves = await Promise.all(([4, 6] as const).map((family) => exec(binary('legacy', family, 'save'), [])));
  return saves.some((r) => r.code === 0 && hasRules(r.stdout)) ? 'legacy' : 'nft';
}

export async function save(exec: Exec, backend: IptablesFlavor, family: IpFamily): Promise<string> {
  const r = await exec(binary(backend, family, 'save'), []);
  if (r.code !== 0) throw new Error(`${binary(backend, family, 'save')} failed (exit ${r.code}): ${r.stderr.trim()}`);
  return r.stdout;
}

export async function readExisting(exec: Exec, backend: IptablesFlavor, family: IpFamily, layout: Layout = SIDECAR_LAYOUT): Promise<Existing> {
  return parseExisting(await save(exec, backend, family), layout);
}

/** `-S <chain>` of each built-in chain that holds our jumps (`OUTPUT` for the sidecar), per table. */
export async function readOutputChains(exec: Exec, backend: IptablesFlavor, family: IpFamily, layout: Layout = SIDECAR_LAYOUT): Promise<Record<TableName, string>> {
  const bin = `${family === 4 ? 'iptables' : 'ip6tables'}-${backend}`;
  const out: Record<TableName, string> = { filter: '', nat: '' };
  await Promise.all(
    TABLES.map(async (table) => {
      const chains = [...new Set(layout.hooks[table].map((h) => h.chain))];
      const texts = await Promise.all(
        chains.map(async (chain) => {
          const r = await exec(bin, ['--wait', '5', '-t', table, '-S', chain]);
          if (r.code !== 0) throw new Error(`${bin} -t ${table} -S ${chain} failed (exit ${r.code}): ${summarize(r.stderr)}`);
          return r.stdout;
        }),
      );
      out[table] = texts.join('');
    }),
  );
  return out;
}

/** A restore that failed, with the offending input line(s) mapped back from the reported line number. */
export class RestoreError extends Error {
  constructor(
    readonly family: IpFamily,
    readonly backend: IptablesFlavor,
    readonly stderr: string,
    /** 1-based line in the restore input, when the tool named one. */
    readonly line: number | undefined,
    /** That line and its neighbours, `N: text`. */
    readonly context: readonly string[],
  ) {
    super(`${binary(backend, family, 'restore')} failed: ${summarize(stderr)}` + (line !== undefined ? ` at input line ${line}: ${context.join(' | ')}` : ''));
    this.name = 'RestoreError';
  }
}

/**
 * One `iptables-restore --noflush` run. Each table section is committed as one transaction by
 * the kernel (nf_tables batch / legacy table replace), so a failure leaves each table either
 * fully old or fully new; rules.ts explains why every old/new mix of the two tables safe.
 */
export async function restore(exec: Exec, backend: IptablesFlavor, family: IpFamily, text: string): Promise<void> {
  if (text === '') return;
  const r = await exec(binary(backend, family, 'restore'), ['--noflush', '--wait', '5'], text);
  if (r.code !== 0) {
    const line = failedLine(r.stderr);
    throw new RestoreError(family, backend, r.stderr, line, lineContext(text, line));
  }
}
