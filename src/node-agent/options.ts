/**
 * The node agent's settings: environment (what the DaemonSet sets) and flags (a flag wins). Pure,
 * so every default and every bad value is unit-tested.
 */
import { parseArgs } from 'node:util';
import { err, formatInputError, inputError, ok, type Result } from '../result.js';
import { DEFAULT_MASQUERADE_MARK } from './rules.js';

export interface NodeAgentOptions {
  readonly mode: 'run' | 'cleanup' | 'help';
  readonly nodeName: string;
  readonly kubeconfig?: string;
  readonly healthPort: number;
  readonly iptablesBackend: 'auto' | 'nft' | 'legacy';
  readonly masqueradeBit: number;
  readonly minSyncIntervalMs: number;
  readonly fullResyncIntervalMs: number;
}

export const DEFAULT_NODE_HEALTH_PORT = 9190;

export const HELP = `multus-proxy-node: NodePort on secondary networks, and cluster-IP access for the node

Runs on every node (DaemonSet multus-proxy-node, host network, NET_ADMIN + NET_RAW). For each
network an opted-in Service uses, it keeps its own interface on the NAD's parent (mpxh...) with the
node's address there, and programs NodePort and cluster-IP rules (chains MPXN-...). It leaves them
in place when it exits and adopts them when it starts. See docs/node-agent.md.

Usage: node node-agent.js [--cleanup | --help] [flags]

  --cleanup                    remove every chain, rule, route and interface the agent added, then exit
  --help                       this text
  --node-name NAME             this node (env NODE_NAME, from the downward API spec.nodeName); required
  --kubeconfig FILE            (env KUBECONFIG) default: in-cluster service account
  --health-port N              /healthz /readyz /metrics (env HEALTH_PORT, default ${DEFAULT_NODE_HEALTH_PORT})
  --iptables-backend B         auto|nft|legacy (env IPTABLES_BACKEND, default auto)
  --masquerade-bit N           mark bit for NodePort Cluster masquerade, 0-31 (env MASQUERADE_BIT, default 13 = 0x${DEFAULT_MASQUERADE_MARK.toString(16)})
  --min-sync-interval-ms N     coalescing interval (env MIN_SYNC_INTERVAL_MS, default 100)
  --full-resync-interval-ms N  periodic full rewrite (env FULL_RESYNC_INTERVAL_MS, default 60000)
`;

const OBJECT = 'node agent options';

const NUMBERS = {
  healthPort: { flag: 'health-port', env: 'HEALTH_PORT', def: DEFAULT_NODE_HEALTH_PORT, min: 0, max: 65535 },
  masqueradeBit: { flag: 'masquerade-bit', env: 'MASQUERADE_BIT', def: 13, min: 0, max: 31 },
  minSyncIntervalMs: { flag: 'min-sync-interval-ms', env: 'MIN_SYNC_INTERVAL_MS', def: 100, min: 0, max: 60_000 },
  fullResyncIntervalMs: { flag: 'full-resync-interval-ms', env: 'FULL_RESYNC_INTERVAL_MS', def: 60_000, min: 1_000, max: 86_400_000 },
} as const;

export function parseNodeAgentOptions(env: Readonly<Record<string, string | undefined>>, argv: readonly string[]): Result<NodeAgentOptions, string> {
  let flags: Record<string, string | boolean | undefined>;
  try {
    flags = parseArgs({
      args: [...argv],
      options: {
        cleanup: { type: 'boolean' },
        help: { type: 'boolean' },
        'node-name': { type: 'string' },
        kubeconfig: { type: 'string' },
        'iptables-backend': { type: 'string' },
        ...Object.fromEntries(Object.values(NUMBERS).map((n) => [n.flag, { type: 'string' as const }])),
      },
      strict: true,
      allowPositionals: false,
    }).values;
  } catch (e) {
    return err(`${OBJECT}: ${(e as Error).message}; see --help`);
  }
  const pick = (flag: string, envName: string): string | undefined => {
    const f = flags[flag];
    const v = typeof f === 'string' ? f : env[envName];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };
  if (flags['help'] === true) return ok({ ...defaults(), mode: 'help' });
  const problems: string[] = [];
  const nums = {} as Record<keyof typeof NUMBERS, number>;
  for (const [key, n] of Object.entries(NUMBERS) as [keyof typeof NUMBERS, (typeof NUMBERS)[keyof typeof NUMBERS]][]) {
    const text = pick(n.flag, n.env);
    const v = text === undefined ? n.def : Number(text);
    if (!(Number.isInteger(v) && v >= n.min && v <= n.max)) {
      problems.push(formatInputError(OBJECT, inputError(`${n.env} (--${n.flag})`, text ?? '', `is not a whole number from ${n.min} to ${n.max}`, `write e.g. ${n.def}, or leave it unset for the default`)));
    }
    nums[key] = v;
  }
  const backend = pick('iptables-backend', 'IPTABLES_BACKEND') ?? 'auto';
  if (backend !== 'auto' && backend !== 'nft' && backend !== 'legacy') {
    problems.push(formatInputError(OBJECT, inputError('IPTABLES_BACKEND (--iptables-backend)', backend, 'is not a back end', 'write auto, nft or legacy')));
  }
  const nodeName = pick('node-name', 'NODE_NAME');
  if (nodeName === undefined && flags['cleanup'] !== true) {
    problems.push(formatInputError(OBJECT, inputError('NODE_NAME (--node-name)', '', 'is not set', 'set it from the downward API (fieldRef spec.nodeName)')));
  }
  if (problems.length > 0) return err(problems.join('\n'));
  const kubeconfig = pick('kubeconfig', 'KUBECONFIG');
  return ok({
    mode: flags['cleanup'] === true ? 'cleanup' : 'run',
    nodeName: nodeName ?? '',
    ...(kubeconfig !== undefined ? { kubeconfig } : {}),
    healthPort: nums.healthPort,
    iptablesBackend: backend as NodeAgentOptions['iptablesBackend'],
    masqueradeBit: nums.masqueradeBit,
    minSyncIntervalMs: nums.minSyncIntervalMs,
    fullResyncIntervalMs: nums.fullResyncIntervalMs,
  });
}

function defaults(): Omit<NodeAgentOptions, 'mode'> {
  return { nodeName: '', healthPort: DEFAULT_NODE_HEALTH_PORT, iptablesBackend: 'auto', masqueradeBit: 13, minSyncIntervalMs: 100, fullResyncIntervalMs: 60_000 };
}
