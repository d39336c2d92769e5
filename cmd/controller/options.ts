/**
 * The controller's settings: command-line flags, with environment fallbacks where a Deployment
 * naturally provides them (POD_NAMESPACE, POD_NAME). Parsing is pure and never throws: a bad
 * value yields a message naming the flag, the value and what to write.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { INSTALL_NAMESPACE, MAX_ENDPOINTS_PER_SLICE } from '../../src/keys.js';
import { err, formatInputError, inputError, ok, type Result } from '../../src/result.js';
import { ANY_HOST } from '../../src/health.js';
import { connectionFlags, connectionValues, helpText, parseFlags, wantsHelp, type Program } from '../../src/cli.js';
import type { NetServiceMode } from './netservice-controller.js';
import { ADDRESS_GROUP_BUDGET } from './group-plan.js';

export interface ControllerOptions {
  readonly kubeconfig?: string;
  readonly context?: string;
  /** Watch only this namespace's Services, pods and slices; undefined = all namespaces. */
  readonly namespace?: string;
  readonly leaderElect: boolean;
  readonly leaseNamespace: string;
  readonly leaseName: string;
  readonly identity: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
  readonly healthPort: number;
  readonly healthHost: string;
  readonly workers: number;
  /** Re-reconcile every Service this often (0 = never); a safety net, writes happen only on difference. */
  readonly resyncMs: number;
  /** The same Warning (Service, subject, reason) at most once per this interval. */
  readonly eventIntervalMs: number;
  readonly watchNodes: boolean;
  readonly manageSidecarRbac: boolean;
  readonly maxEndpointsPerSlice: number;
  /** Keep a headless Service per NetService (svcctl.metaswitch.com): auto = when that API is served. */
  readonly netServices: NetServiceMode;
  /** Delete multus-service's EndpointSlices of the Services this controller serves (migration). */
  readonly removeMultusServiceSlices: boolean;
  /** A pod's deletion or Ready flip puts its Services at the front of the queue (false: in turn, as before). */
  readonly urgentPodChanges: boolean;
  /** Addresses one MultiNetworkPolicy peer (address group) may resolve to; past it the peer allows none. */
  readonly maxAddressesPerGroup: number;
}

const DURATION = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

export function parseDuration(flag: string, value: string): Result<number> {
  const m = DURATION.exec(value.trim());
  if (m === null) return err(inputError(flag, value, 'is not a duration', 'write e.g. 500ms, 15s, 2m or a plain number of seconds'));
  return ok(Math.round(Number(m[1]) * (UNIT_MS[m[2] ?? 's'] ?? 1000)));
}

function parseBool(flag: string, value: string): Result<boolean> {
  if (['true', '1', 'yes'].includes(value)) return ok(true);
  if (['false', '0', 'no'].includes(value)) return ok(false);
  return err(inputError(flag, value, 'is not a boolean', 'write true or false'));
}

function parseCount(flag: string, value: string, min: number): Result<number> {
  if (!/^\d+$/.test(value) || Number(value) < min) return err(inputError(flag, value, `is not a whole number of at least ${min}`, `write e.g. ${Math.max(min, 2)}`));
  return ok(Number(value));
}

const DURATIONS = { 'lease-duration': '15s', 'renew-deadline': '10s', 'retry-period': '2s', resync: '10m', 'event-interval': '10m' } as const;
const BOOLS = { 'leader-elect': 'true', 'watch-nodes': 'true', 'manage-sidecar-rbac': 'true', 'remove-multus-service-slices': 'true', 'urgent-pod-changes': 'true' } as const;
const NETSERVICE_MODES: readonly NetServiceMode[] = ['auto', 'true', 'false'];

function parseNetServiceMode(value: string): Result<NetServiceMode> {
  const mode = NETSERVICE_MODES.find((m) => m === value);
  return mode !== undefined ? ok(mode) : err(inputError('--netservices', value, 'is not a mode', 'write auto, true or false'));
}
const COUNTS = {
  'health-port': ['8080', 0],
  workers: ['2', 1],
  'max-endpoints-per-slice': [String(MAX_ENDPOINTS_PER_SLICE), 1],
  'max-addresses-per-group': [String(ADDRESS_GROUP_BUDGET.addresses), 1],
} as const;

const DUR = 'DUR';
/** Every flag once, in help order; the defaults above are what the parser uses. */
export const CONTROLLER_PROGRAM: Program = {
  name: 'multus-proxy controller',
  about: 'EndpointSlices of secondary-network addresses for opted-in Services',
  usage: 'controller [flags]',
  flags: [
    ...connectionFlags({ kubeconfig: 'kubeconfig; unset: $KUBECONFIG, then in-cluster', context: 'kubeconfig context' }),
    { name: 'namespace', value: 'NS', def: 'all', help: 'watch one namespace only' },
    { name: 'leader-elect', value: 'BOOL', def: BOOLS['leader-elect'], help: 'run for leadership (a Lease); false: always act' },
    { name: 'lease-namespace', value: 'NS', env: 'POD_NAMESPACE', def: INSTALL_NAMESPACE, help: "the Lease's namespace" },
    { name: 'lease-name', value: 'NAME', def: 'multus-proxy-controller', help: "the Lease's name" },
    { name: 'identity', value: 'ID', env: 'POD_NAME', def: '<hostname>_<random>', help: 'holder identity in the Lease' },
    { name: 'lease-duration', value: DUR, def: DURATIONS['lease-duration'], help: 'DUR: 500ms, 15s, 2m or plain seconds' },
    { name: 'renew-deadline', value: DUR, def: DURATIONS['renew-deadline'], help: 'a leader that cannot renew for this long stops acting' },
    { name: 'retry-period', value: DUR, def: DURATIONS['retry-period'], help: 'how often to try to acquire or renew' },
    { name: 'health-port', value: 'N', def: COUNTS['health-port'][0], help: '/healthz /readyz /metrics (0 = any free port)' },
    { name: 'health-host', value: 'ADDR', def: ANY_HOST, help: 'address the health server listens on (:: = IPv4 and IPv6)' },
    { name: 'workers', value: 'N', def: COUNTS.workers[0], help: 'parallel reconciles' },
    { name: 'resync', value: DUR, def: DURATIONS.resync, help: 'full re-reconcile period (0 = off)' },
    { name: 'event-interval', value: DUR, def: DURATIONS['event-interval'], help: 'repeat the same Warning Event at most this often' },
    {
      name: 'watch-nodes',
      value: 'BOOL',
      def: BOOLS['watch-nodes'],
      help: "read Nodes for endpoint zones, zone CPU shares (topology-mode Auto) and to refuse pods claiming a Node's own address (false: none of these)",
    },
    { name: 'manage-sidecar-rbac', value: 'BOOL', def: BOOLS['manage-sidecar-rbac'], help: "keep the sidecars' ClusterRoleBinding and RoleBindings" },
    { name: 'max-endpoints-per-slice', value: 'N', def: COUNTS['max-endpoints-per-slice'][0], help: 'endpoints per EndpointSlice' },
    { name: 'netservices', value: 'MODE', def: 'auto', help: "auto|true|false: serve net-service-controller's NetService objects (auto: when the svcctl.metaswitch.com API is installed)" },
    { name: 'remove-multus-service-slices', value: 'BOOL', def: BOOLS['remove-multus-service-slices'], help: "delete multus-service's EndpointSlices of the Services served here" },
    { name: 'urgent-pod-changes', value: 'BOOL', def: BOOLS['urgent-pod-changes'], help: "a pod's deletion or Ready flip is reconciled before other queued work (false: in turn)" },
    {
      name: 'max-addresses-per-group',
      value: 'N',
      def: COUNTS['max-addresses-per-group'][0],
      help: 'addresses one MultiNetworkPolicy peer may resolve to; a peer selecting more is not written, so it allows none of them (fail-closed), and is reported',
    },
  ],
  notes: 'Subcommand: controller diagnose pod|service [NAMESPACE/]NAME [-o json] explains why traffic does or does not flow (controller diagnose --help).',
};

export const USAGE = helpText(CONTROLLER_PROGRAM);

/** Parses argv (without node and script); `help` when --help was given. Errors are full messages. */
export function parseOptions(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Result<ControllerOptions | 'help', string> {
  if (wantsHelp(argv)) return ok('help');
  const parsed = parseFlags(CONTROLLER_PROGRAM, argv);
  if (!parsed.ok) return err(`${parsed.error}\n\n${USAGE}`);
  const values = parsed.value.values;
  const str = (k: string): string | undefined => {
    const v = values[k];
    return typeof v === 'string' && v !== '' ? v : undefined;
  };
  const problems: string[] = [];
  const pick = <T>(r: Result<T>, fallback: T): T => {
    if (r.ok) return r.value;
    problems.push(formatInputError('controller flag', r.error));
    return fallback;
  };
  const dur = (k: keyof typeof DURATIONS): number => pick(parseDuration(`--${k}`, str(k) ?? DURATIONS[k]), 0);
  const bool = (k: keyof typeof BOOLS): boolean => pick(parseBool(`--${k}`, str(k) ?? BOOLS[k]), true);
  const count = (k: keyof typeof COUNTS): number => pick(parseCount(`--${k}`, str(k) ?? COUNTS[k][0], COUNTS[k][1]), COUNTS[k][1]);

  const opts: ControllerOptions = {
    ...connectionValues(values),
    ...(str('namespace') !== undefined ? { namespace: str('namespace') } : {}),
    leaderElect: bool('leader-elect'),
    leaseNamespace: str('lease-namespace') ?? env['POD_NAMESPACE'] ?? INSTALL_NAMESPACE,
    leaseName: str('lease-name') ?? 'multus-proxy-controller',
    identity: str('identity') ?? env['POD_NAME'] ?? `${hostname()}_${randomBytes(4).toString('hex')}`,
    leaseDurationMs: dur('lease-duration'),
    renewDeadlineMs: dur('renew-deadline'),
    retryPeriodMs: dur('retry-period'),
    healthPort: count('health-port'),
    healthHost: str('health-host') ?? ANY_HOST,
    workers: count('workers'),
    resyncMs: dur('resync'),
    eventIntervalMs: dur('event-interval'),
    watchNodes: bool('watch-nodes'),
    manageSidecarRbac: bool('manage-sidecar-rbac'),
    maxEndpointsPerSlice: count('max-endpoints-per-slice'),
    netServices: pick(parseNetServiceMode(str('netservices') ?? 'auto'), 'auto'),
    removeMultusServiceSlices: bool('remove-multus-service-slices'),
    urgentPodChanges: bool('urgent-pod-changes'),
    maxAddressesPerGroup: count('max-addresses-per-group'),
  };
  if (problems.length === 0 && !(opts.retryPeriodMs < opts.renewDeadlineMs && opts.renewDeadlineMs < opts.leaseDurationMs)) {
    problems.push(
      `controller flags: --retry-period (${opts.retryPeriodMs} ms) < --renew-deadline (${opts.renewDeadlineMs} ms) < --lease-duration (${opts.leaseDurationMs} ms) must hold, so a leader stops before a standby may take over; e.g. 2s, 10s, 15s`,
    );
  }
  return problems.length > 0 ? err(problems.join('\n')) : ok(opts);
}
