/**
 * The node agent's settings: environment (what the DaemonSet sets) and flags (a flag wins), on the
 * shared flag table (src/cli.ts), so the parser and `--help` cannot disagree. Pure, so every
 * default and every bad value is unit-tested.
 */
import { helpText, parseFlags, wantsHelp, type Program } from '../../src/cli.js';
import { err, formatInputError, inputError, ok, type Result } from '../../src/result.js';
import { DEFAULT_MASQUERADE_MARK } from './rules.js';
import { RULE_BACKENDS, type RuleBackendChoice } from '../../src/sidecar-contract.js';
import { EXTERNAL_IPS_NOT_CONFIGURED, parseExternalIPPolicy, type ExternalIPPolicy } from '../../src/external-ips.js';

export interface NodeAgentOptions {
  readonly mode: 'run' | 'cleanup' | 'help';
  readonly nodeName: string;
  readonly kubeconfig?: string;
  readonly healthPort: number;
  readonly iptablesBackend: 'auto' | 'nft' | 'legacy';
  readonly masqueradeBit: number;
  readonly minSyncIntervalMs: number;
  readonly fullResyncIntervalMs: number;
  /** Where the Node annotation names no parent for a network, use the NAD's master (upgrades only). */
  readonly parentFromNad: boolean;
  /** The rule back end (src/dataplane/backend-choice.ts). */
  readonly backend: RuleBackendChoice;
  /** The admin's external-IP CIDRs (src/external-ips.ts), re-checked before one is served; not configured: none is. */
  readonly externalIPs: ExternalIPPolicy;
}

export const DEFAULT_NODE_HEALTH_PORT = 9190;

const NUMBERS = {
  healthPort: { flag: 'health-port', env: 'HEALTH_PORT', def: DEFAULT_NODE_HEALTH_PORT, min: 0, max: 65535, help: '/healthz, /readyz, /metrics and /services/<namespace>/<name> (Local health)' },
  masqueradeBit: {
    flag: 'masquerade-bit',
    env: 'MASQUERADE_BIT',
    def: Math.log2(DEFAULT_MASQUERADE_MARK),
    min: 0,
    max: 31,
    help: 'packet mark bit for NodePort Cluster masquerade (kube-proxy uses 14 and 15)',
  },
  minSyncIntervalMs: { flag: 'min-sync-interval-ms', env: 'MIN_SYNC_INTERVAL_MS', def: 100, min: 0, max: 60_000, help: 'coalescing interval' },
  fullResyncIntervalMs: { flag: 'full-resync-interval-ms', env: 'FULL_RESYNC_INTERVAL_MS', def: 60_000, min: 1_000, max: 86_400_000, help: 'periodic full rewrite' },
} as const;

export const NODE_AGENT_PROGRAM: Program = {
  name: 'multus-proxy node-agent',
  about: 'NodePort on secondary networks, and cluster-IP access for the node and hostNetwork pods (docs/node-agent.md)',
  usage: 'node-agent [--cleanup] [flags]',
  flags: [
    { name: 'cleanup', help: 'remove every chain, jump, route and interface the agent added (nothing else), then exit' },
    { name: 'node-name', value: 'NAME', env: 'NODE_NAME', help: 'this node (downward API spec.nodeName); required unless --cleanup' },
    { name: 'kubeconfig', value: 'PATH', env: 'KUBECONFIG', help: 'default: the in-cluster service account' },
    { name: 'iptables-backend', value: 'B', env: 'IPTABLES_BACKEND', def: 'auto', help: 'auto, nft or legacy' },
    {
      name: 'parent-from-nad',
      env: 'PARENT_FROM_NAD',
      def: 'false',
      help: "where the Node annotation multus-proxy.k8s.cni.cncf.io/node-parents names no parent for a network, use the NAD's master (or bridge), which the NAD's owner chooses; for upgrades only (docs/node-agent.md)",
    },
    {
      name: 'backend',
      value: 'B',
      env: 'DATAPLANE_BACKEND',
      def: 'auto',
      help: "rule back end: iptables, nftables or auto (nftables where the probe table loads, else iptables); the one that starts removes the other's rules",
    },
    {
      name: 'external-ips-allowed-cidrs',
      value: 'CIDRS',
      env: 'EXTERNAL_IPS_ALLOWED_CIDRS',
      help: "comma list of the CIDRs the cluster admin allows Services' spec.externalIPs from (Helm externalIPs.allowedCIDRs, the webhook's setting); those are served on the node as kube-proxy serves them; unset: none is served",
    },
    ...Object.values(NUMBERS).map((n) => ({ name: n.flag, value: 'N', env: n.env, def: String(n.def), help: n.help })),
  ],
  notes:
    "It keeps its own interface (mpxh...) on each served network's parent with the node's address there, and chains MPXN-...; it leaves them in place when it exits (a rolling update drops no connection) and adopts them when it starts.",
};

export const HELP = helpText(NODE_AGENT_PROGRAM);

const OBJECT = 'node agent options';

export function parseNodeAgentOptions(env: Readonly<Record<string, string | undefined>>, argv: readonly string[]): Result<NodeAgentOptions, string> {
  const defaults = {
    nodeName: '',
    healthPort: DEFAULT_NODE_HEALTH_PORT,
    iptablesBackend: 'auto' as const,
    masqueradeBit: NUMBERS.masqueradeBit.def,
    minSyncIntervalMs: 100,
    fullResyncIntervalMs: 60_000,
    parentFromNad: false,
    backend: 'auto' as const,
    externalIPs: EXTERNAL_IPS_NOT_CONFIGURED,
  };
  if (wantsHelp(argv)) return ok({ ...defaults, mode: 'help' });
  const parsed = parseFlags(NODE_AGENT_PROGRAM, argv);
  if (!parsed.ok) return parsed;
  const flags = parsed.value.values;
  const pick = (flag: string, envName: string): string | undefined => {
    const f = flags[flag];
    const v = typeof f === 'string' ? f : env[envName];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };
  const cleanup = flags['cleanup'] === 'true';
  const problems: string[] = [];
  const nums = { ...defaults } as Record<keyof typeof NUMBERS, number>;
  for (const [key, n] of Object.entries(NUMBERS) as [keyof typeof NUMBERS, (typeof NUMBERS)[keyof typeof NUMBERS]][]) {
    const text = pick(n.flag, n.env);
    const v = text === undefined ? n.def : Number(text);
    if (!(Number.isInteger(v) && v >= n.min && v <= n.max)) {
      problems.push(
        formatInputError(OBJECT, inputError(`${n.env} (--${n.flag})`, text ?? '', `is not a whole number from ${n.min} to ${n.max}`, `write e.g. ${n.def}, or leave it unset for the default`)),
      );
    }
    nums[key] = v;
  }
  const backend = pick('iptables-backend', 'IPTABLES_BACKEND') ?? 'auto';
  if (backend !== 'auto' && backend !== 'nft' && backend !== 'legacy') {
    problems.push(formatInputError(OBJECT, inputError('IPTABLES_BACKEND (--iptables-backend)', backend, 'is not a back end', 'write auto, nft or legacy')));
  }
  // The sidecar's --backend.
  const rulesText = pick('backend', 'DATAPLANE_BACKEND') ?? 'auto';
  const rules = RULE_BACKENDS.find((b) => b === rulesText);
  if (rules === undefined) problems.push(formatInputError(OBJECT, inputError('DATAPLANE_BACKEND (--backend)', rulesText, 'is not a known rule back end', `write one of ${RULE_BACKENDS.join(', ')}`)));
  // A switch on the command line; in the environment (what a DaemonSet sets) true or false.
  const parentText = flags['parent-from-nad'] === 'true' ? 'true' : (pick('parent-from-nad', 'PARENT_FROM_NAD') ?? 'false').toLowerCase();
  if (!['true', 'false'].includes(parentText)) {
    problems.push(formatInputError(OBJECT, inputError('PARENT_FROM_NAD (--parent-from-nad)', parentText, 'is not true or false', 'write true or false, or leave it unset (false)')));
  }
  const nodeName = pick('node-name', 'NODE_NAME');
  if (nodeName === undefined && !cleanup) {
    problems.push(formatInputError(OBJECT, inputError('NODE_NAME (--node-name)', '', 'is not set', 'set it from the downward API (fieldRef spec.nodeName)')));
  }
  const cidrs = pick('external-ips-allowed-cidrs', 'EXTERNAL_IPS_ALLOWED_CIDRS');
  const externalIPs = parseExternalIPPolicy(
    cidrs
      ?.split(',')
      .map((x) => x.trim())
      .filter((x) => x !== ''),
    'EXTERNAL_IPS_ALLOWED_CIDRS (--external-ips-allowed-cidrs)',
  );
  if (!externalIPs.ok) problems.push(externalIPs.error);
  if (problems.length > 0) return err(problems.join('\n'));
  const kubeconfig = pick('kubeconfig', 'KUBECONFIG');
  return ok({
    mode: cleanup ? 'cleanup' : 'run',
    nodeName: nodeName ?? '',
    ...(kubeconfig !== undefined ? { kubeconfig } : {}),
    healthPort: nums.healthPort,
    iptablesBackend: backend as NodeAgentOptions['iptablesBackend'],
    masqueradeBit: nums.masqueradeBit,
    minSyncIntervalMs: nums.minSyncIntervalMs,
    fullResyncIntervalMs: nums.fullResyncIntervalMs,
    parentFromNad: parentText === 'true',
    backend: rules ?? 'auto',
    externalIPs: externalIPs.ok ? externalIPs.value : EXTERNAL_IPS_NOT_CONFIGURED,
  });
}
