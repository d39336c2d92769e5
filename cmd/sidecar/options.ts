/**
 * The sidecar's settings, from the environment (what the webhook's injected container sets) and
 * command-line flags (handy when running it by hand); a flag wins over its variable. The names
 * and the defaults the webhook also needs are the contract in src/sidecar-contract.ts. Pure: the
 * caller passes env and argv, so every default and every bad value is unit-testable.
 */
import { parseFlags, type Flag, type Program } from '../../src/cli.js';
import { err, formatInputError, inputError, ok, type Result } from '../../src/result.js';
import { ANY_HOST } from '../../src/health.js';
import { DEFAULT_NFNL_BATCH } from '../../src/dataplane/index.js';
import { EXTERNAL_IPS_NOT_CONFIGURED, parseExternalIPPolicy } from '../../src/external-ips.js';
import { parseContainerPorts } from '../../src/policy/container-ports.js';
import {
  DEFAULT_HEALTH_PORT,
  DEFAULT_MAX_SERVICES_PER_NETWORK,
  DEFAULT_POLICY_API_RETRY_MS,
  DEFAULT_POLICY_HOLD_MS,
  OPTION_SOURCES,
  RULE_BACKENDS,
  SOURCE_GUARD_MODES,
  type IptablesBackend,
  type SidecarOptions,
} from '../../src/sidecar-contract.js';

/** The settings that come from a variable or a flag (the external-IP policy is parsed from its CIDR list). */
type Key = keyof typeof OPTION_SOURCES;

/** The one boolean flag: a mode, not a setting, so it has no environment variable. */
export const CLEANUP_FLAG = 'cleanup';

export interface ParsedOptions extends SidecarOptions {
  /**
   * `--cleanup`: remove every chain, jump and route of ours from this network namespace, then
   * exit (a normal run leaves them in place on exit). The pod's name is not needed then.
   */
  readonly cleanup: boolean;
}

const BACKENDS: readonly IptablesBackend[] = ['auto', 'nft', 'legacy'];

/** Integer bounds per numeric setting, so a typo such as `60` for a millisecond value is caught. */
const NUMBERS: Record<
  Exclude<
    Key,
    | 'podName'
    | 'podNamespace'
    | 'kubeconfig'
    | 'healthHost'
    | 'iptablesBackend'
    | 'backend'
    | 'annotationsFile'
    | 'elementWriter'
    | 'nodeName'
    | 'nodeZone'
    | 'externalIPsAllowedCIDRs'
    | 'podLabelsFile'
    | 'podContainerPorts'
    | 'sourceGuard'
  >,
  { def: number; min: number; max: number }
> = {
  healthPort: { def: DEFAULT_HEALTH_PORT, min: 0, max: 65535 },
  minSyncIntervalMs: { def: 100, min: 0, max: 60_000 },
  driftCheckIntervalMs: { def: 60_000, min: 1_000, max: 86_400_000 },
  retryMinMs: { def: 1_000, min: 10, max: 600_000 },
  retryMaxMs: { def: 30_000, min: 10, max: 3_600_000 },
  stuckAfterMs: { def: 120_000, min: 1_000, max: 86_400_000 },
  maxServicesPerNetwork: { def: DEFAULT_MAX_SERVICES_PER_NETWORK, min: 1, max: 1_000_000 },
  policyHoldMs: { def: DEFAULT_POLICY_HOLD_MS, min: 0, max: 600_000 },
  policyApiRetryMs: { def: DEFAULT_POLICY_API_RETRY_MS, min: 1_000, max: 3_600_000 },
};

const OBJECT = 'sidecar options';

/** A Node's name: a DNS subdomain (at most 253 characters). */
const DNS_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** A label value (the zone label's), non-empty here. */
const LABEL_VALUE = /^(?=.{1,63}$)[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

function describe(key: Key): string {
  return `${OPTION_SOURCES[key].env} (--${OPTION_SOURCES[key].flag})`;
}

/** What each setting is for, in the help. */
const HELP: Record<Key, { value: string; help: string }> = {
  podName: { value: 'NAME', help: 'this pod (downward API metadata.name); required' },
  podNamespace: { value: 'NS', help: "this pod's namespace (downward API metadata.namespace); required" },
  kubeconfig: { value: 'PATH', help: 'kubeconfig; unset: in-cluster service account' },
  healthPort: { value: 'N', help: '/healthz, /readyz and /metrics (0 = any free port)' },
  healthHost: { value: 'ADDR', help: 'address the health server listens on (:: = IPv4 and IPv6)' },
  minSyncIntervalMs: { value: 'MS', help: 'syncs start at most this often; changes in between are coalesced' },
  driftCheckIntervalMs: { value: 'MS', help: 'check our rules against what was written this often (every 10th check deep); rewrite them only on drift' },
  retryMinMs: { value: 'MS', help: 'backoff after a failed sync starts here' },
  retryMaxMs: { value: 'MS', help: 'and doubles up to here' },
  stuckAfterMs: { value: 'MS', help: 'liveness fails when one sync runs longer than this' },
  iptablesBackend: { value: 'NAME', help: `auto (legacy only if the namespace already has legacy rules, else nft), nft or legacy` },
  maxServicesPerNetwork: { value: 'N', help: 'serve at most this many Services per network (the first in namespace/name order); an Event and a metric say when more exist' },
  backend: { value: 'NAME', help: "rule back end: iptables, nftables or auto (nftables where the probe table loads, else iptables); the one that starts removes the other's rules" },
  elementWriter: {
    value: 'PATH',
    help: `nfnl-batch, the nftables back end's netlink sender for endpoint changes; off: write them as nft text (default ${DEFAULT_NFNL_BATCH}, where the image has it)`,
  },
  annotationsFile: { value: 'PATH', help: "this pod's annotations from a downwardAPI volume (metadata.annotations); unset: watch the pod through the API (needs pods read)" },
  nodeName: { value: 'NAME', help: "this pod's node (downward API spec.nodeName), for internalTrafficPolicy Local and same-node hints; unset: no endpoint is local" },
  nodeZone: { value: 'ZONE', help: "this node's zone (the pod's topology.kubernetes.io/zone label), for zone hints; unset: zone hints are not used" },
  podLabelsFile: { value: 'PATH', help: "this pod's labels from a downwardAPI volume (metadata.labels), for the MultiNetworkPolicies that select it; unset: no policy selects it by label" },
  policyHoldMs: {
    value: 'MS',
    help: 'the first sync waits at most this long for the address groups of the MultiNetworkPolicies that select this pod; then it goes ahead without them (their peers allowed nothing) with a warning',
  },
  policyApiRetryMs: { value: 'MS', help: 'while the MultiNetworkPolicy API is not served (its CRD is optional), ask again this often; no policy applies meanwhile' },
  podContainerPorts: { value: 'JSON', help: 'this pod\'s named containerPorts, [{"name","containerPort","protocol"}] (the webhook sets it), for named ports in ingress rules' },
  externalIPsAllowedCIDRs: {
    value: 'CIDRS',
    help: 'comma list of the CIDRs the cluster admin allows external IPs from (the webhook sets it from externalIPs.allowedCIDRs); unset: no external IP is served',
  },
  sourceGuard: {
    value: 'MODE',
    help: "enforce: the pod sends on its secondary interfaces only from its own addresses and MAC; off: no source guard (the webhook sets it from the cluster admin's sourceGuard settings)",
  },
};

const DEFAULT_TEXT: Partial<Record<Key, string>> = { healthHost: ANY_HOST, iptablesBackend: 'auto', backend: 'auto', elementWriter: DEFAULT_NFNL_BATCH, sourceGuard: 'enforce' };

/** The sidecar's flags and variables, for parsing and for --help. */
export const SIDECAR_PROGRAM: Program = {
  name: 'multus-proxy sidecar',
  about: "programs this pod's network namespace so Services on its secondary networks work",
  usage: 'sidecar [flags]',
  flags: (Object.keys(OPTION_SOURCES) as Key[])
    .map((key): Flag => {
      const def = key in NUMBERS ? String(NUMBERS[key as keyof typeof NUMBERS].def) : DEFAULT_TEXT[key];
      return { name: OPTION_SOURCES[key].flag, env: OPTION_SOURCES[key].env, ...HELP[key], ...(def !== undefined ? { def } : {}) };
    })
    .concat([{ name: CLEANUP_FLAG, help: 'remove every chain, jump and route of ours from this network namespace, then exit (a normal run leaves them on exit)' }]),
  notes: 'A flag wins over its variable. The webhook sets the variables in the container it injects.',
};

/** The rule back end, iptables' flavour and the element writer: each checked, a bad one reported in `problems`. */
function backendOptions(raw: (key: Key) => string | undefined, problems: string[]): Pick<ParsedOptions, 'iptablesBackend' | 'backend' | 'elementWriter'> {
  const backendRaw = raw('iptablesBackend') ?? 'auto';
  const iptablesBackend = BACKENDS.find((b) => b === backendRaw);
  if (iptablesBackend === undefined) {
    problems.push(formatInputError(OBJECT, inputError(describe('iptablesBackend'), backendRaw, 'is not a known back end', `write one of ${BACKENDS.join(', ')}`)));
  }
  const ruleRaw = raw('backend') ?? 'auto';
  const backend = RULE_BACKENDS.find((b) => b === ruleRaw);
  if (backend === undefined) {
    problems.push(formatInputError(OBJECT, inputError(describe('backend'), ruleRaw, 'is not a known rule back end', `write one of ${RULE_BACKENDS.join(', ')}`)));
  }
  // A path (checked by the writer's own probe at start, which logs one line and falls back to nft
  // text when it is not nfnl-batch), or off.
  const writerRaw = raw('elementWriter');
  let elementWriter: string | false | undefined;
  if (writerRaw === 'off') elementWriter = false;
  else if (writerRaw === undefined || writerRaw.startsWith('/')) elementWriter = writerRaw;
  else
    problems.push(
      formatInputError(
        OBJECT,
        inputError(
          describe('elementWriter'),
          writerRaw,
          'is neither an absolute path nor off',
          `write the absolute path of nfnl-batch (e.g. ${DEFAULT_NFNL_BATCH}, or what scripts/build-native.sh builds), or off`,
        ),
      ),
    );
  return { iptablesBackend: iptablesBackend ?? 'auto', backend: backend ?? 'auto', elementWriter: elementWriter ?? DEFAULT_NFNL_BATCH };
}

/** The source guard's mode; absent (a pod the webhook did not write): enforce; a bad one is refused with the fix, so a typo neither opens the pod nor passes unnoticed. */
function sourceGuardOption(raw: (key: Key) => string | undefined, problems: string[]): ParsedOptions['sourceGuard'] {
  const v = raw('sourceGuard') ?? 'enforce';
  const mode = SOURCE_GUARD_MODES.find((m) => m === v);
  if (mode === undefined)
    problems.push(
      formatInputError(
        OBJECT,
        inputError(
          describe('sourceGuard'),
          v,
          'is not a source guard mode',
          `write one of ${SOURCE_GUARD_MODES.join(', ')}; the webhook sets it from the cluster admin's sourceGuard.mode and sourceGuard.exemptNamespaces, so fix those (or the container spec that set it)`,
        ),
      ),
    );
  return mode ?? 'enforce';
}

/** The client's place (node, zone) and the admin's external-IP list: each checked, a bad one reported in `problems`. */
function placeOptions(raw: (key: Key) => string | undefined, problems: string[]): Pick<ParsedOptions, 'nodeName' | 'nodeZone' | 'externalIPs'> {
  const nodeName = raw('nodeName') ?? '';
  if (nodeName !== '' && !DNS_SUBDOMAIN.test(nodeName)) {
    problems.push(
      formatInputError(OBJECT, inputError(describe('nodeName'), nodeName, 'is not a node name (a DNS subdomain)', 'set it from the downward API (fieldRef spec.nodeName), or leave it unset')),
    );
  }
  const nodeZone = raw('nodeZone') ?? '';
  if (nodeZone !== '' && !LABEL_VALUE.test(nodeZone)) {
    problems.push(
      formatInputError(
        OBJECT,
        inputError(describe('nodeZone'), nodeZone, 'is not a label value', "set it from the pod's topology.kubernetes.io/zone label (fieldRef metadata.labels), or leave it unset"),
      ),
    );
  }
  const cidrsRaw = raw('externalIPsAllowedCIDRs');
  const externalIPs = parseExternalIPPolicy(
    cidrsRaw
      ?.split(',')
      .map((x) => x.trim())
      .filter((x) => x !== ''),
    describe('externalIPsAllowedCIDRs'),
  );
  if (!externalIPs.ok) problems.push(externalIPs.error);
  return { nodeName, nodeZone, externalIPs: externalIPs.ok ? externalIPs.value : EXTERNAL_IPS_NOT_CONFIGURED };
}

export function parseOptions(env: Readonly<Record<string, string | undefined>>, argv: readonly string[]): Result<ParsedOptions, string> {
  const parsed = parseFlags(SIDECAR_PROGRAM, argv);
  if (!parsed.ok) return parsed;
  const flags = parsed.value.values;
  const raw = (key: Key): string | undefined => {
    const f = flags[OPTION_SOURCES[key].flag];
    const v = typeof f === 'string' ? f : env[OPTION_SOURCES[key].env];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };

  const problems: string[] = [];
  const cleanup = flags[CLEANUP_FLAG] === 'true';
  const required = (key: 'podName' | 'podNamespace'): string => {
    const v = raw(key);
    if (v === undefined && !cleanup) {
      problems.push(formatInputError(OBJECT, inputError(describe(key), '', 'is not set', `set it from the downward API (fieldRef metadata.${key === 'podName' ? 'name' : 'namespace'})`)));
    }
    return v ?? '';
  };
  const integer = (key: keyof typeof NUMBERS): number => {
    const { def, min, max } = NUMBERS[key];
    const v = raw(key);
    if (v === undefined) return def;
    const n = /^\d+$/.test(v) ? Number(v) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      problems.push(formatInputError(OBJECT, inputError(describe(key), v, 'is not a whole number in range', `write an integer from ${min} to ${max} (default ${def})`)));
      return def;
    }
    return n;
  };

  const podName = required('podName');
  const podNamespace = required('podNamespace');
  const { iptablesBackend, backend, elementWriter } = backendOptions(raw, problems);
  const { nodeName, nodeZone, externalIPs } = placeOptions(raw, problems);
  const sourceGuard = sourceGuardOption(raw, problems);
  const portsRaw = raw('podContainerPorts');
  const ports = portsRaw === undefined ? undefined : parseContainerPorts(portsRaw, describe('podContainerPorts'));
  if (ports !== undefined && !ports.ok) problems.push(ports.error);
  const options: ParsedOptions = {
    podName,
    podNamespace,
    kubeconfig: raw('kubeconfig'),
    healthPort: integer('healthPort'),
    healthHost: raw('healthHost') ?? ANY_HOST,
    minSyncIntervalMs: integer('minSyncIntervalMs'),
    driftCheckIntervalMs: integer('driftCheckIntervalMs'),
    retryMinMs: integer('retryMinMs'),
    retryMaxMs: integer('retryMaxMs'),
    stuckAfterMs: integer('stuckAfterMs'),
    iptablesBackend,
    backend,
    annotationsFile: raw('annotationsFile'),
    maxServicesPerNetwork: integer('maxServicesPerNetwork'),
    policyHoldMs: integer('policyHoldMs'),
    policyApiRetryMs: integer('policyApiRetryMs'),
    elementWriter,
    nodeName,
    nodeZone,
    externalIPs,
    sourceGuard,
    ...(raw('podLabelsFile') !== undefined ? { podLabelsFile: raw('podLabelsFile') } : {}),
    ...(ports?.ok === true ? { podContainerPorts: ports.value } : {}),
    cleanup,
  };
  if (problems.length === 0 && options.retryMaxMs < options.retryMinMs) {
    problems.push(
      formatInputError(OBJECT, inputError(describe('retryMaxMs'), String(options.retryMaxMs), `is below ${describe('retryMinMs')} (${options.retryMinMs})`, 'make the maximum at least the minimum')),
    );
  }
  return problems.length > 0 ? err(problems.join('\n')) : ok(options);
}
