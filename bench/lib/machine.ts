/**
 * Where and when a figure was taken: the machine, the versions and the commit. Recorded next to
 * every benchmark section, because numbers without their machine cannot be compared.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

export interface MachineInfo {
  readonly date: string;
  readonly commit: string;
  readonly cpu: string;
  readonly cores: number;
  readonly memoryGiB: number;
  readonly kernel: string;
  readonly node: string;
  readonly iptables: string;
  /** 1-minute load average when the benchmark started: how busy the shared machine was. */
  readonly load: number;
}

function tryRun(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch {
    return 'unknown';
  }
}

function cpuModel(): string {
  try {
    const m = /^model name\s*:\s*(.+)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    if (m?.[1]) return m[1].trim();
  } catch {
    // not Linux: fall back to what node reports
  }
  return os.cpus()[0]?.model ?? 'unknown';
}

export function machineInfo(): MachineInfo {
  const commit = tryRun('git', ['rev-parse', '--short', 'HEAD']);
  // Which tracked folders differ from the commit: the figures measured the working tree.
  const changed = tryRun('git', ['status', '--porcelain'])
    .split('\n')
    .filter(Boolean)
    .map((l) => l.replace(/^\s*\S+\s+/, '').split('/')[0] ?? '');
  const dirs = [...new Set(changed)].sort();
  const dirty = dirs.length > 0 ? ` + uncommitted changes in ${dirs.join(', ')}` : '';
  return {
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    commit: `${commit}${dirty}`,
    cpu: cpuModel(),
    cores: os.cpus().length,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    iptables: tryRun('iptables', ['-V']),
    load: Math.round((os.loadavg()[0] ?? 0) * 100) / 100,
  };
}

export function formatMachine(m: MachineInfo): string {
  return `${m.cpu}, ${m.cores} cores, ${m.memoryGiB} GiB, ${m.kernel}, node ${m.node}, ${m.iptables}; load average ${m.load} at start`;
}
