/**
 * The webhook's configuration: defaults < config file (YAML or JSON, mounted from the
 * `multus-proxy-webhook` ConfigMap) < environment < flags. Pure: the caller passes env, argv and
 * a file reader, so every default and every bad value has a tested message.
 *
 * Config file (all keys optional except an image from somewhere):
 *
 *   port: 8443
 *   logLevel: info
 *   maxBodyBytes: 8388608
 *   podSecurityDefault: privileged          # the apiserver's PodSecurity defaults.enforce, if set
 *   nodeAgentNamespace: multus-proxy-node   # where the optional node agent's DaemonSet runs
 *   sidecar:
 *     image: registry/multus-proxy:1.0     # or the `sidecarImage` file next to the config file
 *     imagePullPolicy: IfNotPresent
 *     mode: auto                            # native | regular | auto
 *     privileged: false
 *     healthPort: 9180
 *     maxServicesPerNetwork: 2000
 *     logLevel: info
 *     backend: auto                         # iptables | nftables | auto (nftables where the probe table loads, else iptables)
 *     command: [/usr/local/bin/health-listen, node, /app/dist/sidecar.js]
 *     args: []
 *     resources: { requests: { cpu: 10m, memory: 48Mi }, limits: { memory: 128Mi } }
 *   externalIPs:
 *     allowedCIDRs: [192.0.2.0/24]          # unset: external IPs admitted with a warning, never served
 *   sourceGuard:
 *     mode: enforce                         # enforce | off (every injected pod)
 *     exemptNamespaces: [vip-team]          # namespaces whose pods get no source guard (VIPs, moving MACs)
 */
import { ANY_HOST } from '../../src/health.js';
import { dirname, join } from 'node:path';
import { load } from 'js-yaml';
import { DEFAULT_HEALTH_PORT, DEFAULT_MAX_SERVICES_PER_NETWORK, RULE_BACKENDS, SOURCE_GUARD_MODES, type RuleBackendChoice, type SourceGuardMode } from '../../src/sidecar-contract.js';
import { err, formatInputError, inputError, ok, showValue, type Result } from '../../src/result.js';
import { helpText, KUBECONFIG_FLAG, parseFlags, type Program } from '../../src/cli.js';
import { NODE_AGENT_NAMESPACE } from '../../src/keys.js';
import { MALLOC_ENV, NODE_MEMORY_FLAGS } from '../../src/memory-settings.js';
import { parseExternalIPPolicy, type ExternalIPPolicy } from '../../src/external-ips.js';

export type SidecarMode = 'native' | 'regular' | 'auto';
export type PullPolicy = 'Always' | 'IfNotPresent' | 'Never';

export interface ResourceRequirements {
  requests?: Record<string, string>;
  limits?: Record<string, string>;
}

export interface SidecarConfig {
  readonly image: string;
  readonly imagePullPolicy: PullPolicy;
  /** native: init container with restartPolicy Always; regular: a plain container; auto: native from Kubernetes 1.29. */
  readonly mode: SidecarMode;
  /** Only for nodes where capabilities are not enough (some hardened kernels); off by default. */
  readonly privileged: boolean;
  /** The sidecar's /healthz, /readyz, /metrics port (its HEALTH_PORT); the probes point here. */
  readonly healthPort: number;
  readonly logLevel: string;
  /** The sidecar's rule back end (its DATAPLANE_BACKEND; auto leaves the variable out). */
  readonly backend: RuleBackendChoice;
  readonly command: readonly string[];
  readonly args: readonly string[];
  readonly resources: ResourceRequirements;
  /** Lifetime asked for the sidecar's projected service-account token; kubelet renews it at 80%. */
  readonly tokenExpirationSeconds: number;
  /** The sidecar's MAX_SERVICES_PER_NETWORK: Services served per network at most. */
  readonly maxServicesPerNetwork: number;
  /**
   * The admin's external-IP CIDRs (externalIPs.allowedCIDRs), passed to the sidecar so it re-checks
   * them (its EXTERNAL_IPS_ALLOWED_CIDRS); absent when not configured (no variable: none served).
   */
  readonly externalIPsAllowedCIDRs?: readonly string[];
  /**
   * The cluster admin's source guard settings (docs/decisions/0300-source-guard-exemption-by-cluster-admin.md),
   * turned into the sidecar's SOURCE_GUARD per pod (sourceGuardFor); unset: enforce everywhere.
   */
  readonly sourceGuard?: SourceGuardSettings;
}

export interface SourceGuardSettings {
  /** enforce, or off for every injected pod. */
  readonly mode: SourceGuardMode;
  /** Namespaces whose pods get no guard while the mode is enforce (by name: a tenant cannot rename its namespace). */
  readonly exemptNamespaces: readonly string[];
}

/** The source guard of a pod of `namespace`: the admin's mode, off in an exempt namespace. */
export function sourceGuardFor(cfg: Pick<SidecarConfig, 'sourceGuard'>, namespace: string): SourceGuardMode {
  const g = cfg.sourceGuard;
  if (g === undefined) return 'enforce';
  return g.mode === 'off' || g.exemptNamespaces.includes(namespace) ? 'off' : 'enforce';
}

export interface WebhookOptions {
  readonly port: number;
  readonly host: string;
  readonly tlsCertFile: string;
  readonly tlsKeyFile: string;
  /** The certificate files are also re-read this often, in case a file-change event was missed. */
  readonly certPollMs: number;
  /** Largest AdmissionReview body accepted; a pod near etcd's 1.5 MiB object limit fits several times. */
  readonly maxBodyBytes: number;
  readonly logLevel: string;
  readonly kubeconfig: string | undefined;
  /** A Namespace read from the apiserver is reused for this long. */
  readonly namespaceCacheMs: number;
  /** How long a Service admission waits to learn whether its NetworkAttachmentDefinitions exist. */
  readonly nadLookupTimeoutMs: number;
  /** Where the optional node agent's DaemonSet lives (Helm nodeAgent.namespace): NodePort and LoadBalancer admissions check it runs. */
  readonly nodeAgentNamespace: string;
  /** After SIGTERM, keep answering this long (not ready) while endpoint removal propagates. */
  readonly drainMs: number;
  /**
   * The Pod Security level the cluster enforces on a namespace without the
   * `pod-security.kubernetes.io/enforce` label (the `defaults.enforce` of the apiserver's
   * AdmissionConfiguration for PodSecurity; Kubernetes' own default is privileged).
   */
  readonly podSecurityDefault: PodSecurityLevel;
  readonly sidecar: SidecarConfig;
  /** Which CIDRs spec.externalIPs may come from (src/external-ips.ts); not configured: warn only. */
  readonly externalIPs: ExternalIPPolicy;
}

export type PodSecurityLevel = 'privileged' | 'baseline' | 'restricted';
export const POD_SECURITY_LEVELS: readonly PodSecurityLevel[] = ['privileged', 'baseline', 'restricted'];

export const DEFAULT_PORT = 8443;
export const DEFAULT_TLS_DIR = '/etc/multus-proxy/tls';
export const DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024;
/** The ConfigMap key (a file next to config.yaml) that kustomize's image transformer rewrites. */
export const SIDECAR_IMAGE_FILE = 'sidecarImage';
/**
 * Node flags for the sidecar (src/memory-settings.ts). A 1 MiB young generation caps the peak RSS
 * of the first sync (measured 74 instead of 93 MiB at 1,000 Services, no measurable slowdown),
 * which is what a memory limit has to cover. `--optimize-for-size`: on the image's Node.js 24,
 * private memory idle 20.0 -> 18.5 MiB, at 1,000 Services 34-40 -> 29-30, at 2,000 49-57 -> 39,
 * sync time per change unchanged (medians 26-45 vs 24-49 ms at 2,000), where `--lite-mode` saves a
 * little more but makes each sync at 2,000 Services four times slower (docs/benchmarks.md, B5 on
 * Node 24; docs/decisions/0030-memory-settings.md).
 */
export const SIDECAR_NODE_FLAGS: readonly string[] = NODE_MEMORY_FLAGS;
/** glibc malloc settings in the sidecar container's environment (src/memory-settings.ts). */
export const SIDECAR_MALLOC_ENV: Readonly<Record<string, string>> = MALLOC_ENV;
/**
 * The image's launcher (native/health-listen.c): it listens on the sidecar's health port, then execs
 * Node.js with the socket, so the kubelet's startup probe is never refused while Node.js starts.
 */
export const HEALTH_LISTEN = '/usr/local/bin/health-listen';
/** The image's entry point runs the webhook; the same image runs the sidecar with this command. */
export const DEFAULT_SIDECAR_COMMAND = [HEALTH_LISTEN, 'node', ...SIDECAR_NODE_FLAGS, '/app/dist/sidecar.js'];

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
const MODES: readonly SidecarMode[] = ['native', 'regular', 'auto'];
const PULL_POLICIES: readonly PullPolicy[] = ['Always', 'IfNotPresent', 'Never'];
/** A namespace's name: a DNS label. */
const NAMESPACE_NAME = /^(?=.{1,63}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** Kubernetes quantity syntax, e.g. 10m, 0.5, 128Mi, 1G, 1e3. */
const QUANTITY = /^[+]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/;

type Kind = { type: 'int'; min: number; max: number } | { type: 'string' } | { type: 'enum'; values: readonly string[] } | { type: 'bool' } | { type: 'strings' } | { type: 'resources' };

interface Setting {
  /** Where it lives in the config file. */
  readonly file: readonly string[];
  readonly env?: string;
  readonly flag?: string;
  /** What it does, for --help (settings with a flag). */
  readonly help?: string;
  readonly kind: Kind;
}

/** Every setting once: file path, variable, flag and type. */
export const SETTINGS = {
  port: { file: ['port'], env: 'WEBHOOK_PORT', flag: 'port', help: 'HTTPS port of the admission endpoints, /healthz, /readyz and /metrics', kind: { type: 'int', min: 1, max: 65535 } },
  host: { file: ['host'], env: 'WEBHOOK_HOST', flag: 'host', help: 'address to listen on (:: = IPv4 and IPv6)', kind: { type: 'string' } },
  tlsCertFile: { file: ['tlsCertFile'], env: 'TLS_CERT_FILE', flag: 'tls-cert-file', help: 'serving certificate (PEM); re-read when it changes', kind: { type: 'string' } },
  tlsKeyFile: { file: ['tlsKeyFile'], env: 'TLS_KEY_FILE', flag: 'tls-key-file', help: 'its private key (PEM)', kind: { type: 'string' } },
  certPollMs: { file: ['certPollMs'], env: 'CERT_POLL_MS', flag: 'cert-poll-ms', help: 'also re-read the certificate files this often (ms)', kind: { type: 'int', min: 100, max: 3_600_000 } },
  maxBodyBytes: {
    file: ['maxBodyBytes'],
    env: 'MAX_BODY_BYTES',
    flag: 'max-body-bytes',
    help: 'largest AdmissionReview body accepted (bytes)',
    kind: { type: 'int', min: 64 * 1024, max: 64 * 1024 * 1024 },
  },
  logLevel: { file: ['logLevel'], env: 'LOG_LEVEL', flag: 'log-level', help: 'fatal, error, warn, info, debug, trace or silent', kind: { type: 'enum', values: LOG_LEVELS } },
  kubeconfig: { file: ['kubeconfig'], env: KUBECONFIG_FLAG.env, flag: KUBECONFIG_FLAG.name, help: 'kubeconfig; unset: in-cluster service account', kind: { type: 'string' } },
  namespaceCacheMs: {
    file: ['namespaceCacheMs'],
    env: 'NAMESPACE_CACHE_MS',
    flag: 'namespace-cache-ms',
    help: 'reuse a Namespace read from the apiserver this long (ms)',
    kind: { type: 'int', min: 0, max: 600_000 },
  },
  nadLookupTimeoutMs: {
    file: ['nadLookupTimeoutMs'],
    env: 'NAD_LOOKUP_TIMEOUT_MS',
    flag: 'nad-lookup-timeout-ms',
    help: 'how long a Service admission waits for its NetworkAttachmentDefinitions (ms)',
    kind: { type: 'int', min: 10, max: 10_000 },
  },
  nodeAgentNamespace: {
    file: ['nodeAgentNamespace'],
    env: 'NODE_AGENT_NAMESPACE',
    flag: 'node-agent-namespace',
    help: "namespace of the node agent's DaemonSet multus-proxy-node (NodePort and LoadBalancer Services are warned about when it does not run)",
    kind: { type: 'string' },
  },
  drainMs: { file: ['drainMs'], env: 'SHUTDOWN_DRAIN_MS', flag: 'shutdown-drain-ms', help: 'after SIGTERM, keep answering (not ready) this long (ms)', kind: { type: 'int', min: 0, max: 120_000 } },
  podSecurityDefault: {
    file: ['podSecurityDefault'],
    env: 'POD_SECURITY_DEFAULT',
    flag: 'pod-security-default',
    help: "the Pod Security level enforced on namespaces without the pod-security.kubernetes.io/enforce label (the apiserver's AdmissionConfiguration defaults.enforce)",
    kind: { type: 'enum', values: POD_SECURITY_LEVELS },
  },
  'sidecar.image': {
    file: ['sidecar', 'image'],
    env: 'SIDECAR_IMAGE',
    flag: 'sidecar-image',
    help: 'image of the injected sidecar; required (or the sidecarImage file next to the config file)',
    kind: { type: 'string' },
  },
  'sidecar.imagePullPolicy': {
    file: ['sidecar', 'imagePullPolicy'],
    env: 'SIDECAR_IMAGE_PULL_POLICY',
    flag: 'sidecar-image-pull-policy',
    help: 'Always, IfNotPresent or Never',
    kind: { type: 'enum', values: PULL_POLICIES },
  },
  'sidecar.mode': {
    file: ['sidecar', 'mode'],
    env: 'SIDECAR_MODE',
    flag: 'sidecar-mode',
    help: 'native (init container, restartPolicy Always), regular, or auto (native from Kubernetes 1.29)',
    kind: { type: 'enum', values: MODES },
  },
  'sidecar.privileged': {
    file: ['sidecar', 'privileged'],
    env: 'SIDECAR_PRIVILEGED',
    flag: 'sidecar-privileged',
    help: 'run the sidecar privileged (only where capabilities are not enough)',
    kind: { type: 'bool' },
  },
  'sidecar.healthPort': {
    file: ['sidecar', 'healthPort'],
    env: 'SIDECAR_HEALTH_PORT',
    flag: 'sidecar-health-port',
    help: "the sidecar's health port (its HEALTH_PORT); the probes point here",
    kind: { type: 'int', min: 1, max: 65535 },
  },
  'sidecar.backend': {
    file: ['sidecar', 'backend'],
    env: 'SIDECAR_BACKEND',
    flag: 'sidecar-backend',
    help: "the sidecar's rule back end: iptables, nftables or auto (nftables where the probe table loads, else iptables)",
    kind: { type: 'enum', values: RULE_BACKENDS },
  },
  'sidecar.logLevel': {
    file: ['sidecar', 'logLevel'],
    env: 'SIDECAR_LOG_LEVEL',
    flag: 'sidecar-log-level',
    help: "the sidecar's log level (default: the webhook's)",
    kind: { type: 'enum', values: LOG_LEVELS },
  },
  'sidecar.maxServicesPerNetwork': {
    file: ['sidecar', 'maxServicesPerNetwork'],
    env: 'SIDECAR_MAX_SERVICES_PER_NETWORK',
    flag: 'sidecar-max-services-per-network',
    help: 'Services a sidecar serves per network at most (its MAX_SERVICES_PER_NETWORK); the first in namespace/name order',
    kind: { type: 'int', min: 1, max: 1_000_000 },
  },
  'sidecar.command': { file: ['sidecar', 'command'], kind: { type: 'strings' } },
  'sidecar.args': { file: ['sidecar', 'args'], kind: { type: 'strings' } },
  'sidecar.resources': { file: ['sidecar', 'resources'], kind: { type: 'resources' } },
  'sidecar.tokenExpirationSeconds': { file: ['sidecar', 'tokenExpirationSeconds'], kind: { type: 'int', min: 600, max: 86_400 } },
  'externalIPs.allowedCIDRs': {
    file: ['externalIPs', 'allowedCIDRs'],
    env: 'EXTERNAL_IPS_ALLOWED_CIDRS',
    flag: 'external-ips-allowed-cidrs',
    help: 'CIDRs a Service on a secondary network may take spec.externalIPs from (comma list; empty: none); a new address outside them is denied. Unset: admitted with a warning, not served (CVE-2020-8554)',
    kind: { type: 'strings' },
  },
  'sourceGuard.mode': {
    file: ['sourceGuard', 'mode'],
    env: 'SOURCE_GUARD',
    flag: 'source-guard',
    help: "enforce: every injected pod sends on its secondary interfaces only from its own addresses and MAC; off: no source guard in any pod (only the receivers' MAC binding then stops a pod that claims another's address)",
    kind: { type: 'enum', values: SOURCE_GUARD_MODES },
  },
  'sourceGuard.exemptNamespaces': {
    file: ['sourceGuard', 'exemptNamespaces'],
    env: 'SOURCE_GUARD_EXEMPT_NAMESPACES',
    flag: 'source-guard-exempt-namespaces',
    help: 'namespaces (comma list) whose pods get no source guard: for pods that add their own addresses (VIPs) or move their MAC; set by the cluster admin only',
    kind: { type: 'strings' },
  },
} as const satisfies Record<string, Setting>;

type Name = keyof typeof SETTINGS;
type Value = number | string | boolean | string[] | ResourceRequirements;

const OBJECT = 'webhook options';

function where(name: Name, source: 'file' | 'env' | 'flag', configFile: string | undefined): string {
  const s: Setting = SETTINGS[name];
  if (source === 'env') return String(s.env);
  if (source === 'flag') return `--${String(s.flag)}`;
  return `${s.file.join('.')} in ${configFile ?? 'the config file'}`;
}

/** Checks one value against its kind; `fromText` values (env, flags) arrive as strings. */
function convert(kind: Kind, raw: unknown, fromText: boolean): Result<Value, { reason: string; fix: string }> {
  switch (kind.type) {
    case 'int': {
      const n = fromText && typeof raw === 'string' && /^\d+$/.test(raw.trim()) ? Number(raw.trim()) : raw;
      if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < kind.min || n > kind.max) {
        return err({ reason: 'is not a whole number in range', fix: `write an integer from ${kind.min} to ${kind.max}` });
      }
      return ok(n);
    }
    case 'string':
      if (typeof raw !== 'string' || raw.trim() === '') return err({ reason: 'is not a non-empty string', fix: 'write a non-empty text value' });
      return ok(raw.trim());
    case 'enum':
      if (typeof raw !== 'string' || !kind.values.includes(raw.trim())) return err({ reason: 'is not one of the known values', fix: `write one of ${kind.values.join(', ')}` });
      return ok(raw.trim());
    case 'bool': {
      const b = fromText && typeof raw === 'string' ? ({ true: true, false: false } as Record<string, boolean>)[raw.trim().toLowerCase()] : raw;
      if (typeof b !== 'boolean') return err({ reason: 'is not a boolean', fix: 'write true or false' });
      return ok(b);
    }
    case 'strings':
      // From a variable or a flag: a comma list ('' is the empty list).
      if (fromText && typeof raw === 'string')
        return ok(
          raw
            .split(',')
            .map((x) => x.trim())
            .filter((x) => x !== ''),
        );
      if (!Array.isArray(raw) || !raw.every((x) => typeof x === 'string')) return err({ reason: 'is not a list of strings', fix: 'write a YAML list such as [node, /app/dist/sidecar.js]' });
      return ok(raw);
    case 'resources': {
      const example = 'write e.g. {requests: {cpu: 10m, memory: 48Mi}, limits: {memory: 128Mi}}';
      if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return err({ reason: 'is not a mapping', fix: example });
      const out: ResourceRequirements = {};
      for (const [section, list] of Object.entries(raw as Record<string, unknown>)) {
        if (section !== 'requests' && section !== 'limits') return err({ reason: `has an unknown section ${showValue(section)}`, fix: `use only requests and limits; ${example}` });
        if (typeof list !== 'object' || list === null || Array.isArray(list)) return err({ reason: `${section} is not a mapping`, fix: example });
        const entries: Record<string, string> = {};
        for (const [res, q] of Object.entries(list as Record<string, unknown>)) {
          const text = typeof q === 'number' ? String(q) : q;
          if (typeof text !== 'string' || !QUANTITY.test(text))
            return err({ reason: `${section}.${res} ${showValue(String(q))} is not a quantity`, fix: 'write a Kubernetes quantity such as 10m, 0.5, 48Mi or 1Gi' });
          entries[res] = text;
        }
        out[section] = entries;
      }
      return ok(out);
    }
  }
}

/** Looks up a path in the parsed file; also reports keys the file has that no setting knows (typos). */
function fileValue(doc: Record<string, unknown>, path: readonly string[]): unknown {
  let cur: unknown = doc;
  for (const k of path) {
    if (typeof cur !== 'object' || cur === null || Array.isArray(cur)) return undefined;
    cur = Object.prototype.hasOwnProperty.call(cur, k) ? (cur as Record<string, unknown>)[k] : undefined;
  }
  return cur;
}

function unknownKeys(doc: Record<string, unknown>): string[] {
  const known = new Set(Object.values(SETTINGS).map((s) => s.file.join('.')));
  const out: string[] = [];
  for (const [k, v] of Object.entries(doc)) {
    if ((k === 'sidecar' || k === 'externalIPs' || k === 'sourceGuard') && typeof v === 'object' && v !== null && !Array.isArray(v)) {
      for (const sk of Object.keys(v)) if (!known.has(`${k}.${sk}`)) out.push(`${k}.${sk}`);
    } else if (!known.has(k)) out.push(k);
  }
  return out;
}

/** Reads a file's text, or undefined when it does not exist. */
export type ReadFile = (path: string) => string | undefined;

const FLAG_VALUE: Record<Kind['type'], string> = { int: 'N', string: 'TEXT', enum: 'NAME', bool: 'BOOL', strings: 'LIST', resources: 'MAP' };

/** The webhook's flags and variables, for parsing and for --help (defaults: see webhookHelp). */
export const WEBHOOK_PROGRAM: Program = {
  name: 'multus-proxy webhook',
  about: 'admission webhook: injects the sidecar into pods, defaults and validates multus-proxy Services',
  usage: 'webhook [flags]',
  flags: [
    { name: 'config', value: 'PATH', env: 'WEBHOOK_CONFIG', help: 'config file (YAML or JSON; the multus-proxy-webhook ConfigMap)' },
    ...(Object.values(SETTINGS) as Setting[]).flatMap((st) =>
      st.flag === undefined ? [] : [{ name: st.flag, value: FLAG_VALUE[st.kind.type], ...(st.env !== undefined ? { env: st.env } : {}), help: st.help ?? '' }],
    ),
  ],
  notes: 'Precedence: defaults < config file < environment < flags. Settings without a flag (sidecar.command, args, resources, tokenExpirationSeconds) are set in the config file.',
};

/** The --help text, with each setting's default read from what parseOptions actually defaults to. */
export function webhookHelp(): string {
  const defaults = parseOptions({ SIDECAR_IMAGE: '-' }, [], () => undefined);
  const lookup = (path: readonly string[]): unknown => {
    let cur: unknown = defaults.ok ? defaults.value : undefined;
    for (const k of path) cur = typeof cur === 'object' && cur !== null ? (cur as Record<string, unknown>)[k] : undefined;
    return cur;
  };
  const def = new Map<string, string>();
  for (const st of Object.values(SETTINGS) as Setting[]) {
    const v = lookup(st.file);
    // Flags carry scalars only; the image has no default (the placeholder above is not one).
    if (st.flag !== undefined && (typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean') && st.flag !== 'sidecar-image') def.set(st.flag, String(v));
  }
  return helpText({ ...WEBHOOK_PROGRAM, flags: WEBHOOK_PROGRAM.flags.map((f) => (def.has(f.name) ? { ...f, def: def.get(f.name) } : f)) });
}

/** The config file (`--config`, WEBHOOK_CONFIG) as a mapping, and the sidecar image file beside it; each problem added to `problems`. */
function readConfigFile(configFile: string | undefined, readFile: ReadFile, problems: string[]): { doc: Record<string, unknown>; imageFromFile: string | undefined } {
  let doc: Record<string, unknown> = {};
  if (configFile === undefined || configFile === '') return { doc, imageFromFile: undefined };
  const text = readFile(configFile);
  if (text === undefined) {
    problems.push(formatInputError(OBJECT, inputError('--config (WEBHOOK_CONFIG)', configFile, 'does not exist', 'mount the ConfigMap there or fix the path')));
    return { doc, imageFromFile: undefined };
  }
  try {
    const parsed = load(text);
    if (parsed === undefined || parsed === null) doc = {};
    else if (typeof parsed === 'object' && !Array.isArray(parsed)) doc = parsed as Record<string, unknown>;
    else problems.push(formatInputError(OBJECT, inputError(configFile, text, 'is not a YAML/JSON mapping', 'write keys such as `port:` and `sidecar:` at the top level')));
  } catch (e) {
    problems.push(formatInputError(OBJECT, inputError(configFile, text, `is not valid YAML or JSON (${(e as Error).message.split('\n')[0]})`, 'fix the syntax')));
  }
  for (const k of unknownKeys(doc)) {
    problems.push(
      formatInputError(
        OBJECT,
        inputError(
          `${k} in ${configFile}`,
          k,
          'is not a known setting',
          `use only ${Object.values(SETTINGS)
            .map((s) => s.file.join('.'))
            .join(', ')}`,
        ),
      ),
    );
  }
  return { doc, imageFromFile: readFile(join(dirname(configFile), SIDECAR_IMAGE_FILE))?.trim() };
}

export function parseOptions(env: Readonly<Record<string, string | undefined>>, argv: readonly string[], readFile: ReadFile): Result<WebhookOptions, string> {
  const parsed = parseFlags(WEBHOOK_PROGRAM, argv);
  if (!parsed.ok) return parsed;
  const flags = parsed.value.values;
  const problems: string[] = [];

  const configFile = typeof flags['config'] === 'string' ? flags['config'] : env['WEBHOOK_CONFIG'];
  const { doc, imageFromFile } = readConfigFile(configFile, readFile, problems);

  const values = new Map<Name, Value>();
  for (const name of Object.keys(SETTINGS) as Name[]) {
    const s: Setting = SETTINGS[name];
    const flag = s.flag === undefined ? undefined : flags[s.flag];
    const envValue = s.env === undefined ? undefined : env[s.env];
    const [raw, source]: [unknown, 'file' | 'env' | 'flag'] =
      typeof flag === 'string' ? [flag, 'flag'] : envValue !== undefined && envValue !== '' ? [envValue, 'env'] : [fileValue(doc, s.file), 'file'];
    if (raw === undefined || raw === null) continue;
    const v = convert(s.kind, raw, source !== 'file');
    if (v.ok) values.set(name, v.value);
    else problems.push(formatInputError(OBJECT, inputError(where(name, source, configFile), typeof raw === 'string' ? raw : JSON.stringify(raw), v.error.reason, v.error.fix)));
  }

  const image = (values.get('sidecar.image') as string | undefined) ?? (imageFromFile !== '' ? imageFromFile : undefined);
  if (image === undefined && problems.length === 0) {
    problems.push(
      formatInputError(OBJECT, inputError('sidecar.image', '', 'is not set', `set sidecar.image in the config file, the ${SIDECAR_IMAGE_FILE} key of the ConfigMap, SIDECAR_IMAGE or --sidecar-image`)),
    );
  }
  const exempt = (values.get('sourceGuard.exemptNamespaces') as string[] | undefined) ?? [];
  for (const ns of exempt)
    if (!NAMESPACE_NAME.test(ns))
      problems.push(
        formatInputError(OBJECT, inputError('sourceGuard.exemptNamespaces', ns, 'is not a namespace name', 'write namespace names (lower-case DNS labels), comma-separated in a variable or flag')),
      );
  const externalIPs = parseExternalIPPolicy(values.get('externalIPs.allowedCIDRs') as string[] | undefined, 'externalIPs.allowedCIDRs');
  if (!externalIPs.ok) problems.push(externalIPs.error);
  if (problems.length > 0 || !externalIPs.ok) return err(problems.join('\n'));

  const get = <T extends Value>(name: Name, def: T): T => (values.get(name) as T | undefined) ?? def;
  const logLevel = get('logLevel', 'info');
  return ok({
    port: get('port', DEFAULT_PORT),
    host: get('host', ANY_HOST),
    tlsCertFile: get('tlsCertFile', join(DEFAULT_TLS_DIR, 'tls.crt')),
    tlsKeyFile: get('tlsKeyFile', join(DEFAULT_TLS_DIR, 'tls.key')),
    certPollMs: get('certPollMs', 10_000),
    maxBodyBytes: get('maxBodyBytes', DEFAULT_MAX_BODY_BYTES),
    logLevel,
    kubeconfig: values.get('kubeconfig') as string | undefined,
    namespaceCacheMs: get('namespaceCacheMs', 5_000),
    nadLookupTimeoutMs: get('nadLookupTimeoutMs', 2_000),
    nodeAgentNamespace: get('nodeAgentNamespace', NODE_AGENT_NAMESPACE),
    drainMs: get('drainMs', 5_000),
    podSecurityDefault: get('podSecurityDefault', 'privileged'),
    sidecar: {
      image: image ?? '',
      imagePullPolicy: get('sidecar.imagePullPolicy', 'IfNotPresent'),
      mode: get('sidecar.mode', 'auto'),
      privileged: get('sidecar.privileged', false),
      healthPort: get('sidecar.healthPort', DEFAULT_HEALTH_PORT),
      logLevel: get('sidecar.logLevel', logLevel),
      backend: get('sidecar.backend', 'auto'),
      command: get('sidecar.command', DEFAULT_SIDECAR_COMMAND),
      args: get('sidecar.args', [] as string[]),
      resources: get('sidecar.resources', { requests: { cpu: '10m', memory: '48Mi' }, limits: { memory: '128Mi' } }),
      tokenExpirationSeconds: get('sidecar.tokenExpirationSeconds', 3607),
      maxServicesPerNetwork: get('sidecar.maxServicesPerNetwork', DEFAULT_MAX_SERVICES_PER_NETWORK),
      ...(externalIPs.value.configured ? { externalIPsAllowedCIDRs: externalIPs.value.allowed.map((r) => r.cidr) } : {}),
      sourceGuard: { mode: get('sourceGuard.mode', 'enforce'), exemptNamespaces: [...new Set(exempt)].sort() },
    },
    externalIPs: externalIPs.value,
  });
}
