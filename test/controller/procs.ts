/**
 * Controller processes for tests (`node --import tsx cmd/controller/main.ts`) with leader
 * election on, their logs collected, their health port read from the "controller started" line.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import type { KubeClient } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1Lease } from '../../src/kube/types.js';

const ROOT = resolve(import.meta.dirname, '..', '..');

export interface Proc {
  readonly child: ChildProcess;
  readonly identity: string;
  port?: number;
  readonly logs: string[];
  exitCode?: number | null;
  exitSignal?: NodeJS.Signals | null;
  /** When the process exited (Date.now()). */
  exitedAt?: number;
}

export interface ProcOptions {
  kubeconfig: string;
  namespace: string;
  identity: string;
  leaseMs: number;
  renewMs: number;
  retryMs: number;
  extraArgs?: string[];
}

export function startControllerProc(o: ProcOptions): Proc {
  const args = [
    '--import',
    'tsx',
    'cmd/controller/main.ts',
    '--kubeconfig',
    o.kubeconfig,
    '--namespace',
    o.namespace,
    '--lease-namespace',
    o.namespace,
    '--lease-name',
    'ctl',
    '--identity',
    o.identity,
    '--lease-duration',
    `${o.leaseMs}ms`,
    '--renew-deadline',
    `${o.renewMs}ms`,
    '--retry-period',
    `${o.retryMs}ms`,
    '--health-port',
    '0',
    '--health-host',
    '127.0.0.1',
    '--manage-sidecar-rbac',
    'false',
    '--watch-nodes',
    'false',
    ...(o.extraArgs ?? []),
  ];
  const child = spawn(process.execPath, args, { cwd: ROOT, env: { ...process.env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] });
  const p: Proc = { child, identity: o.identity, logs: [] };
  const read = (stream: NodeJS.ReadableStream): void => {
    createInterface({ input: stream }).on('line', (line) => {
      p.logs.push(line);
      try {
        const rec = JSON.parse(line) as { msg?: string; healthPort?: number };
        if (rec.msg === 'controller started') p.port = rec.healthPort;
      } catch {
        // not JSON: kept in logs for the failure message
      }
    });
  };
  if (child.stdout) read(child.stdout);
  if (child.stderr) read(child.stderr);
  child.on('exit', (code, signal) => {
    p.exitCode = code;
    p.exitSignal = signal;
    p.exitedAt = Date.now();
  });
  return p;
}

export const readyz = async (p: Proc): Promise<number> => (await fetch(`http://127.0.0.1:${p.port ?? 0}/readyz`)).status;
export const tail = (p: Proc, n = 15): string => p.logs.slice(-n).join('\n');

/** The Lease `ctl`'s holder, undefined when it cannot be read. */
export async function leaseHolder(client: KubeClient, namespace: string): Promise<string | undefined> {
  try {
    return (await client.get<V1Lease>(apiPath('coordination.k8s.io', 'v1', 'leases', namespace, 'ctl'))).spec?.holderIdentity;
  } catch {
    return undefined;
  }
}
