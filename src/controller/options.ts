/**
 * The controller's settings: command-line flags, with environment fallbacks where a Deployment
 * naturally provides them (POD_NAMESPACE, POD_NAME). Parsing is pure and never throws: a bad
 * value yields a message naming the flag, the value and what to write.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { INSTALL_NAMESPACE, MAX_ENDPOINTS_PER_SLICE } from '../keys.js';
import { err, formatInputError, inputError, ok, type Result } from '../result.js';
import { ANY_HOST } from '../health.js';

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
}

export const USAGE = `multus-proxy controller: EndpointSlices of secondary-network addresses for opted-in Services.

  --kubeconfig PATH           kubeconfig (default: $KUBECONFIG, then in-cluster)
  --context NAME              kubeconfig context
  --namespace NS              watch one namespace only (default: all)
  --leader-elect BOOL         default true
  --lease-namespace NS        default $POD_NAMESPACE or ${INSTALL_NAMESPACE}
  --lease-name NAME           default multus-proxy-controller
  --identity ID               default $POD_NAME or <hostname>_<random>
  --lease-duration DUR        default 15s   (DUR: 500ms, 15s, 2m or plain seconds)
  --renew-deadline DUR        default 10s
  --retry-period DUR          default 2s
  --health-port N             /healthz /readyz /metrics, default 8080 (0 = any free port)
  --health-host ADDR          default :: (IPv4 and IPv6)
  --workers N                 parallel reconciles, default 2
  --resync DUR                full re-reconcile period, default 10m (0 = off)
  --event-interval DUR        repeat the same Warning Event at most this often, default 10m
  --watch-nodes BOOL          read Nodes for endpoint zones, default true
  --manage-sidecar-rbac BOOL  keep the sidecars' ClusterRoleBinding and RoleBindings, default true
  --max-endpoints-per-slice N default ${MAX_ENDPOINTS_PER_SLICE}
`;

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

const STRINGS = ['kubeconfig', 'context', 'namespace', 'lease-namespace', 'lease-name', 'identity', 'health-host'] as const;
const DURATIONS = { 'lease-duration': '15s', 'renew-deadline': '10s', 'retry-period': '2s', resync: '10m', 'event-interval': '10m' } as const;
const BOOLS = { 'leader-elect': 'true', 'watch-nodes': 'true', 'manage-sidecar-rbac': 'true' } as const;
const COUNTS = { 'health-port': ['8080', 0], workers: ['2', 1], 'max-endpoints-per-slice': [String(MAX_ENDPOINTS_PER_SLICE), 1] } as const;

/** Parses argv (without node and script); `help` when --help was given. Errors are full messages. */
export function parseOptions(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Result<ControllerOptions | 'help', string> {
  const spec: Record<string, { type: 'string' | 'boolean' }> = { help: { type: 'boolean' } };
  for (const k of [...STRINGS, ...Object.keys(DURATIONS), ...Object.keys(BOOLS), ...Object.keys(COUNTS)]) spec[k] = { type: 'string' };
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({ args: [...argv], options: spec, allowPositionals: false, strict: true }).values;
  } catch (e) {
    return err(`controller: ${e instanceof Error ? e.message : String(e)}\n\n${USAGE}`);
  }
  if (values['help'] === true) return ok('help');
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
    ...(str('kubeconfig') !== undefined ? { kubeconfig: str('kubeconfig') } : {}),
    ...(str('context') !== undefined ? { context: str('context') } : {}),
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
  };
  if (problems.length === 0 && !(opts.retryPeriodMs < opts.renewDeadlineMs && opts.renewDeadlineMs < opts.leaseDurationMs)) {
    problems.push(
      `controller flags: --retry-period (${opts.retryPeriodMs} ms) < --renew-deadline (${opts.renewDeadlineMs} ms) < --lease-duration (${opts.leaseDurationMs} ms) must hold, so a leader stops before a standby may take over; e.g. 2s, 10s, 15s`,
    );
  }
  return problems.length > 0 ? err(problems.join('\n')) : ok(opts);
}
