/**
 * `npm run certs -- <command>`: certificates for the webhook without cert-manager.
 *
 *   generate   write a CA and a serving certificate into folders (reuses what is still good)
 *   bootstrap  keep the Secrets and the webhook configurations' caBundle right, in the cluster,
 *              once or every --interval (renewing before expiry with overlapping CA rotation)
 *
 * Argument parsing is pure (`parseCli`) so every bad flag gets a tested message; main() only
 * does the IO.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { INSTALL_NAMESPACE, WEBHOOK_CONFIGURATION_NAME } from '../../src/keys.js';
import { checkDns1123Label } from '../../src/annotations/names.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLogger, type Logger } from '../../src/log.js';
import type { KubeClient } from '../../src/kube/client.js';
import { runMain, stderrStartFailure } from '../../src/program/main.js';
import { readOptions } from '../../src/program/options.js';
import { Program as RunningProgram, type Runnable } from '../../src/program/program.js';
import { err, formatInputError, inputError, ok, type Result } from '../../src/result.js';
import { connectionFlags, connectionValues, helpText, parseFlags, wantsHelp, type Program } from '../../src/cli.js';
import { bootstrapCertificates, CA_CERT, PREVIOUS_CA, TLS_CERT, TLS_KEY } from './bootstrap.js';
import { planCertificates, type RotationOptions } from './rotation.js';

/** Names the manifests use; flags override each. */
export const DEFAULTS = {
  service: 'multus-proxy-webhook',
  namespace: INSTALL_NAMESPACE,
  servingSecret: 'multus-proxy-webhook-tls',
  caSecret: 'multus-proxy-webhook-ca',
  webhookConfiguration: WEBHOOK_CONFIGURATION_NAME,
} as const;

export type CliCommand =
  | { readonly command: 'generate'; readonly rotation: RotationOptions; readonly outDir: string; readonly caDir: string }
  | {
      readonly command: 'bootstrap';
      readonly rotation: RotationOptions;
      readonly secretNamespace: string;
      readonly servingSecret: string;
      readonly caSecret: string;
      readonly mutating: string[];
      readonly validating: string[];
      readonly kubeconfig?: string;
      readonly context?: string;
      /** 0 = run once. */
      readonly intervalMs: number;
    }
  | { readonly command: 'help' };

const DAYS = 'DAYS';
/** Every flag once; generate uses the common ones and --out/--ca-dir, bootstrap the common ones and the rest. */
export const CERTS_PROGRAM: Program = {
  name: 'multus-proxy certs',
  about: "the webhook's serving certificate and private CA, when cert-manager is not used",
  usage: 'certs <generate|bootstrap> [flags]',
  flags: [
    { name: 'service', value: 'NAME', def: DEFAULTS.service, help: "the webhook's Service (names in the certificate)" },
    { name: 'namespace', value: 'NS', def: DEFAULTS.namespace, help: "its namespace, and the Secrets' (bootstrap)" },
    { name: 'ip', value: 'ADDR', multiple: true, help: 'an IP address SAN' },
    { name: 'dns', value: 'NAME', multiple: true, help: 'an extra DNS SAN' },
    { name: 'ca-validity-days', value: DAYS, def: '3650', help: 'lifetime of a new CA' },
    { name: 'validity-days', value: DAYS, def: '365', help: 'lifetime of a new serving certificate' },
    { name: 'ca-renew-before-days', value: DAYS, def: 'a third of the CA validity', help: 'renew the CA this long before it expires' },
    { name: 'renew-before-days', value: DAYS, def: 'a third of the validity', help: 'renew the serving certificate this long before it expires' },
    { name: 'out', value: 'DIR', help: 'generate: folder for tls.crt, tls.key and ca.crt (the trust bundle); required' },
    { name: 'ca-dir', value: 'DIR', def: '<out>/ca', help: "generate: the CA's tls.crt, tls.key, previous.crt" },
    { name: 'secret', value: 'NAME', def: DEFAULTS.servingSecret, help: 'bootstrap: the serving Secret' },
    { name: 'ca-secret', value: 'NAME', def: DEFAULTS.caSecret, help: 'bootstrap: the CA Secret' },
    { name: 'mutating', value: 'NAME[,NAME]', multiple: true, def: DEFAULTS.webhookConfiguration, help: 'bootstrap: MutatingWebhookConfigurations to patch the CA bundle into' },
    { name: 'validating', value: 'NAME[,NAME]', multiple: true, def: DEFAULTS.webhookConfiguration, help: 'bootstrap: ValidatingWebhookConfigurations to patch' },
    ...connectionFlags({ kubeconfig: 'bootstrap: kubeconfig; unset: in-cluster', context: 'bootstrap: kubeconfig context' }, 'FILE'),
    { name: 'interval', value: 'DURATION', def: '0', help: 'bootstrap: run again this often, e.g. 12h (0 = once)' },
  ],
};

export const USAGE = helpText(CERTS_PROGRAM);

const OBJECT = 'certs command line';

/** `90s`, `30m`, `12h`, `1d`, or a bare number of seconds. */
export function parseDuration(text: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim());
  if (m === null) return undefined;
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h' | 'd'];
  return Number(m[1]) * unit;
}

function problem(flag: string, value: string, reason: string, fix: string): string {
  return formatInputError(OBJECT, inputError(`--${flag}`, value, reason, fix));
}

type StringFlag = 'service' | 'namespace' | 'out' | 'ca-dir' | 'secret' | 'ca-secret' | 'interval' | 'ca-validity-days' | 'validity-days' | 'ca-renew-before-days' | 'renew-before-days';
type ListFlag = 'ip' | 'dns' | 'mutating' | 'validating';

export function parseCli(argv: readonly string[]): Result<CliCommand, string> {
  if (wantsHelp(argv)) return ok({ command: 'help' });
  const parsed = parseFlags(CERTS_PROGRAM, argv, { positionals: true });
  if (!parsed.ok) return err(`${parsed.error}\n${USAGE}`);
  const { values, positionals } = parsed.value;
  const command = positionals[0];
  if (command === 'help' || command === undefined) return ok({ command: 'help' });
  if (command !== 'generate' && command !== 'bootstrap') {
    return err(problem('command', command, 'is not a command', `write "generate" or "bootstrap"\n${USAGE}`));
  }
  const problems: string[] = [];
  const str = (f: StringFlag): string | undefined => values[f] as string | undefined;
  const list = (f: ListFlag): string[] =>
    ((values[f] as string[] | undefined) ?? [])
      .flatMap((v) => v.split(','))
      .map((v) => v.trim())
      .filter((v) => v !== '');
  const days = (f: StringFlag): number | undefined => {
    const v = str(f);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!Number.isFinite(n) || n <= 0) problems.push(problem(f, v, 'is not a positive number of days', 'write e.g. 365 or 0.5'));
    return n;
  };
  const dnsLabel = (f: 'service' | 'namespace', def: string): string => {
    const v = str(f) ?? def;
    const why = checkDns1123Label(v);
    if (why !== undefined) problems.push(problem(f, v, why, 'use the Service name and namespace exactly as in the cluster'));
    return v;
  };
  const service = dnsLabel('service', DEFAULTS.service);
  const namespace = dnsLabel('namespace', DEFAULTS.namespace);
  const ips = list('ip');
  for (const ip of ips) if (isIP(ip) === 0) problems.push(problem('ip', ip, 'is not an IPv4 or IPv6 address', 'write e.g. 127.0.0.1 or fd00::1'));
  const rotation: RotationOptions = {
    service,
    namespace,
    ips,
    dnsNames: list('dns'),
    caValidityDays: days('ca-validity-days'),
    leafValidityDays: days('validity-days'),
    caRenewBeforeDays: days('ca-renew-before-days'),
    leafRenewBeforeDays: days('renew-before-days'),
  };
  if (command === 'generate') {
    const outDir = str('out');
    if (outDir === undefined) problems.push(problem('out', '', 'is required for generate', 'name the folder for tls.crt, tls.key and ca.crt'));
    if (problems.length > 0) return err(problems.join('\n'));
    return ok({ command, rotation, outDir: outDir ?? '', caDir: str('ca-dir') ?? join(outDir ?? '', 'ca') });
  }
  const intervalText = str('interval') ?? '0';
  const intervalMs = parseDuration(intervalText);
  if (intervalMs === undefined || (intervalMs > 0 && intervalMs < 60_000)) {
    problems.push(problem('interval', intervalText, 'is not a duration of at least a minute (or 0)', 'write e.g. 12h, 30m or 0 to run once'));
  }
  const mutating = list('mutating');
  const validating = list('validating');
  if (problems.length > 0) return err(problems.join('\n'));
  return ok({
    command,
    rotation,
    secretNamespace: namespace,
    servingSecret: str('secret') ?? DEFAULTS.servingSecret,
    caSecret: str('ca-secret') ?? DEFAULTS.caSecret,
    mutating: values['mutating'] === undefined ? [DEFAULTS.webhookConfiguration] : mutating,
    validating: values['validating'] === undefined ? [DEFAULTS.webhookConfiguration] : validating,
    ...connectionValues(values),
    intervalMs: intervalMs ?? 0,
  });
}

function readOptional(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/** Write-then-rename, so a reader never sees half a PEM file; keys are readable by the owner only. */
function writeAtomic(path: string, text: string, mode: number): void {
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text, { mode });
  renameSync(tmp, path);
}

/** `generate`: the same plan as the in-cluster bootstrap, with folders as the stores. Returns the reasons. */
export function generateToFolders(rotation: RotationOptions, outDir: string, caDir: string): string[] {
  mkdirSync(outDir, { recursive: true });
  mkdirSync(caDir, { recursive: true, mode: 0o700 });
  const plan = planCertificates(
    { certPem: readOptional(join(caDir, TLS_CERT)), keyPem: readOptional(join(caDir, TLS_KEY)), previousPem: readOptional(join(caDir, PREVIOUS_CA)) },
    { certPem: readOptional(join(outDir, TLS_CERT)), keyPem: readOptional(join(outDir, TLS_KEY)), caBundlePem: readOptional(join(outDir, CA_CERT)) },
    rotation,
  );
  if (plan.caChanged) {
    writeAtomic(join(caDir, TLS_KEY), plan.ca.keyPem, 0o600);
    writeAtomic(join(caDir, TLS_CERT), plan.ca.certPem, 0o644);
    writeAtomic(join(caDir, PREVIOUS_CA), plan.ca.previousPem, 0o644);
  }
  if (plan.servingChanged) {
    // Bundle first, key before certificate: a watcher that reloads on each file sees a trusted pair soonest.
    writeAtomic(join(outDir, CA_CERT), plan.serving.caBundlePem, 0o644);
    writeAtomic(join(outDir, TLS_KEY), plan.serving.keyPem, 0o600);
    writeAtomic(join(outDir, TLS_CERT), plan.serving.certPem, 0o644);
  }
  return plan.reasons;
}

type BootstrapCommand = Extract<CliCommand, { command: 'bootstrap' }>;

/** One bootstrap round, logged. */
async function bootstrapOnce(client: KubeClient, cmd: BootstrapCommand, logger: Logger): Promise<void> {
  const r = await bootstrapCertificates(client, {
    ...cmd.rotation,
    now: new Date(),
    secretNamespace: cmd.secretNamespace,
    servingSecret: cmd.servingSecret,
    caSecret: cmd.caSecret,
    mutatingWebhookConfigurations: cmd.mutating,
    validatingWebhookConfigurations: cmd.validating,
    logger,
  });
  logger.info(
    { reasons: r.plan.reasons, caSecretWritten: r.caSecretWritten, servingSecretWritten: r.servingSecretWritten, patched: r.patchedConfigurations, missing: r.missingConfigurations },
    'certificate bootstrap done',
  );
  for (const m of r.missingConfigurations) logger.warn({ configuration: m }, 'webhook configuration not found; its caBundle will be set on the next run');
}

/** `--interval`: a round now and every interval until SIGTERM/SIGINT. */
function bootstrapLoop(client: KubeClient, cmd: BootstrapCommand, logger: Logger): Runnable {
  const stop = new AbortController();
  return {
    name: 'bootstrap loop',
    start() {
      void (async () => {
        while (!stop.signal.aborted) {
          try {
            await bootstrapOnce(client, cmd, logger);
          } catch (e) {
            // A failed round (apiserver briefly away) is retried at the next interval; renewal starts months before expiry.
            logger.error({ err: e }, 'certificate bootstrap failed; retrying at the next interval');
          }
          await sleep(cmd.intervalMs, undefined, { signal: stop.signal }).catch(() => undefined);
        }
      })();
    },
    stop: () => stop.abort(),
  };
}

async function bootstrapMode(cmd: BootstrapCommand): Promise<number | undefined> {
  const logger = createLogger('certs');
  // Loaded lazily so `generate` works without any Kubernetes configuration.
  const { connectKube } = await import('../../src/program/kube.js');
  const client = connectKube(cmd);
  if (cmd.intervalMs === 0) {
    await bootstrapOnce(client, cmd, logger);
    return 0;
  }
  const program = new RunningProgram('certs', logger, { message: 'stopping', errorMessage: 'error while stopping', errorExitCode: 1 });
  program.handleSignals();
  await program.start(bootstrapLoop(client, cmd, logger));
  return undefined;
}

/** The command line as readOptions takes it: the help command is `'help'`. */
function commandToRun(r: Result<CliCommand, string>): Result<Exclude<CliCommand, { command: 'help' }> | 'help', string> {
  if (!r.ok) return r;
  return r.value.command === 'help' ? ok('help') : ok(r.value);
}

async function main(argv: readonly string[]): Promise<number | undefined> {
  const options = readOptions({ argv, help: () => USAGE, parse: () => commandToRun(parseCli(argv)) });
  if (!options.run) return options.code;
  const cmd = options.value;
  if (cmd.command === 'bootstrap') return bootstrapMode(cmd);
  const reasons = generateToFolders(cmd.rotation, cmd.outDir, cmd.caDir);
  process.stdout.write(reasons.length === 0 ? `certificates in ${cmd.outDir} are current; nothing changed\n` : `${reasons.join('\n')}\n`);
  return 0;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) runMain(() => main(process.argv.slice(2)), stderrStartFailure('certs'));
