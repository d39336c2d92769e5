/**
 * `controller diagnose pod|service NAME`: the command line around fetch (IO), diagnose (pure) and
 * render (pure). Exit status: 0 nothing found that stops traffic, 1 a cause found (an `error`
 * finding), 2 the command could not diagnose (bad usage, object missing, apiserver unreachable).
 */
import { loadKubeConnection } from '../../../src/kube/config.js';
import { createKubeClient, type KubeClient } from '../../../src/kube/client.js';
import { connectionValues, helpText, parseFlags, wantsHelp, type Program } from '../../../src/cli.js';
import { DEFAULT_HEALTH_PORT } from '../../../src/sidecar-contract.js';
import { err, ok, type Result } from '../../../src/result.js';
import { CONTROLLER_PROGRAM } from '../options.js';
import { DiagnoseError, readPodFacts, readServiceFacts, type WebhookSettings } from './fetch.js';
import { diagnosePod } from './pod.js';
import { diagnoseService } from './service.js';
import { renderReport, type OutputFormat } from './render.js';
import type { Report } from './report.js';
import { escapeTerminal } from '../../../src/terminal-text.js';
import { parseIp } from '../../../src/annotations/ip.js';
import type { PolicyProbe } from './policy.js';

export const DIAGNOSE_PROGRAM: Program = {
  name: 'multus-proxy controller diagnose',
  about: 'explain why traffic from a client pod, or to a Service, does or does not flow',
  usage: 'controller diagnose pod|service [NAMESPACE/]NAME [-n NAMESPACE] [-o text|json] [--peer IP --port N[/PROTO] [--direction ingress|egress]] [flags]',
  flags: [
    { name: 'namespace', value: 'NS', def: "the kubeconfig context's, else default", help: 'the namespace of the pod or Service (also -n; or write NAMESPACE/NAME)' },
    { name: 'output', value: 'FORMAT', def: 'text', help: 'text or json (also -o)' },
    // The controller's own connection flags, read the same way.
    ...CONTROLLER_PROGRAM.flags.filter((f) => f.name === 'kubeconfig' || f.name === 'context'),
    { name: 'sidecar-health-port', value: 'N', def: String(DEFAULT_HEALTH_PORT), help: "the webhook's sidecar.healthPort, for its port-clash check" },
    { name: 'pod-security-default', value: 'LEVEL', def: 'privileged', help: "the webhook's podSecurityDefault, for namespaces without an enforce label" },
    { name: 'peer', value: 'IP', help: 'pod only: the other end of a connection to explain against MultiNetworkPolicy (with --port)' },
    { name: 'port', value: 'N[/PROTO]', help: "pod only: the connection's destination port, protocol TCP (default), UDP or SCTP, e.g. 8080/TCP (with --peer)" },
    { name: 'direction', value: 'DIR', def: 'ingress', help: "pod only: ingress (the peer connects to the pod, port is the pod's) or egress (the pod connects to the peer, port is the peer's)" },
    { name: 'network', value: 'NS/NAD', def: "each of the pod's networks", help: 'pod only: the network to explain the connection on' },
  ],
  notes: [
    'Exit status: 0 nothing found that stops traffic; 1 a cause was found (an ERROR finding); 2 could not diagnose.',
    'Examples:',
    '  controller diagnose pod default/client',
    '  controller diagnose service multus-nginx-macvlan -n default -o json',
    '  controller diagnose pod shop/db --peer 10.1.2.3 --port 5432/TCP          # which policy rule admits 10.1.2.3, or why none does',
  ].join('\n'),
};

export interface DiagnoseRequest {
  readonly kind: 'pod' | 'service';
  /** Unset: the kubeconfig context's namespace, else `default`. */
  readonly namespace?: string;
  readonly name: string;
  readonly output: OutputFormat;
  readonly kubeconfig?: string;
  readonly context?: string;
  readonly webhook: WebhookSettings;
  /** pod only: a connection to explain against MultiNetworkPolicy. */
  readonly probe?: PolicyProbe;
}

const KINDS: Record<string, 'pod' | 'service'> = { pod: 'pod', pods: 'pod', po: 'pod', service: 'service', services: 'service', svc: 'service' };
const SHORT: Record<string, string> = { '-n': '--namespace', '-o': '--output' };
const USAGE_HINT = `usage: ${DIAGNOSE_PROGRAM.usage} (see --help)`;

/** Parses argv after `diagnose`; `help` for --help. Pure. */
export function parseDiagnoseArgs(argv: readonly string[]): Result<DiagnoseRequest | 'help', string> {
  if (wantsHelp(argv)) return ok('help');
  const parsed = parseFlags(
    DIAGNOSE_PROGRAM,
    argv.map((a) => SHORT[a] ?? a),
    { positionals: true },
  );
  if (!parsed.ok) return err(parsed.error);
  const v = parsed.value.values;
  const str = (k: string): string | undefined => (typeof v[k] === 'string' && v[k] !== '' ? v[k] : undefined);
  // kubectl's forms: `pod NAME`, `pod/NAME`, `svc NS/NAME`.
  const words = parsed.value.positionals.flatMap((p, i) =>
    i === 0 && p.includes('/') && KINDS[p.split('/')[0] ?? ''] !== undefined ? [p.slice(0, p.indexOf('/')), p.slice(p.indexOf('/') + 1)] : [p],
  );
  if (words.length !== 2) return err(`diagnose: expected a kind and a name, got ${JSON.stringify(parsed.value.positionals.join(' '))}; ${USAGE_HINT}`);
  const [kindWord = '', target = ''] = words;
  const kind = KINDS[kindWord.toLowerCase()];
  if (kind === undefined) return err(`diagnose: unknown kind ${JSON.stringify(kindWord)}: write pod or service; ${USAGE_HINT}`);
  const slash = target.indexOf('/');
  // undefined: the kubeconfig context's namespace, as kubectl (see runDiagnose).
  const namespace = slash >= 0 ? target.slice(0, slash) : str('namespace');
  const name = slash >= 0 ? target.slice(slash + 1) : target;
  if (name === '' || namespace === '' || name.includes('/')) return err(`diagnose: ${JSON.stringify(target)} is not NAME or NAMESPACE/NAME; ${USAGE_HINT}`);
  if (slash >= 0 && str('namespace') !== undefined && str('namespace') !== namespace)
    return err(`diagnose: ${JSON.stringify(target)} names namespace ${namespace}, but --namespace says ${str('namespace') ?? ''}; give one`);
  const output = str('output') ?? 'text';
  if (output !== 'text' && output !== 'json') return err(`diagnose: --output ${JSON.stringify(output)}: write text or json`);
  const port = Number(str('sidecar-health-port') ?? DEFAULT_HEALTH_PORT);
  if (!Number.isInteger(port) || port < 1 || port > 65535) return err(`diagnose: --sidecar-health-port ${JSON.stringify(str('sidecar-health-port'))}: write a port number (1-65535)`);
  // A connection flag given empty is a mistake to name, not a flag left out.
  const probe = parseProbe((k) => (typeof v[k] === 'string' ? v[k] : undefined));
  if (!probe.ok) return err(probe.error);
  if (probe.value !== undefined && kind !== 'pod') return err('diagnose: --peer, --port, --direction and --network explain a connection to or from a pod: use them with diagnose pod');
  const pss = str('pod-security-default');
  if (pss !== undefined && !['privileged', 'baseline', 'restricted'].includes(pss)) return err(`diagnose: --pod-security-default ${JSON.stringify(pss)}: write privileged, baseline or restricted`);
  return ok({
    kind,
    ...(namespace !== undefined ? { namespace } : {}),
    name,
    output,
    ...connectionValues(v),
    webhook: { healthPort: port, ...(pss !== undefined ? { podSecurityDefault: pss } : {}) },
    ...(probe.value !== undefined ? { probe: probe.value } : {}),
  });
}

/** --peer, --port, --direction, --network: a connection, or undefined when none of them is given (`str`: a flag's value as written, '' included). Pure. */
function parseProbe(str: (k: string) => string | undefined): Result<PolicyProbe | undefined, string> {
  const peer = str('peer');
  const port = str('port');
  const direction = str('direction');
  const network = str('network');
  if (peer === undefined && port === undefined && direction === undefined && network === undefined) return ok(undefined);
  if (peer === undefined || port === undefined) return err('diagnose: a connection needs both --peer IP and --port N[/PROTO], e.g. --peer 10.1.2.3 --port 8080/TCP');
  const ip = parseIp(peer);
  if (!ip.ok || ip.value.prefix !== undefined || ip.value.address.includes('%'))
    return err(`diagnose: --peer ${JSON.stringify(peer)}: write one IPv4 or IPv6 address, without a prefix, e.g. 10.1.2.3`);
  const m = /^([0-9]{1,5})(?:\/(TCP|UDP|SCTP))?$/i.exec(port);
  const n = Number(m?.[1]);
  if (m === null || n < 1 || n > 65535) return err(`diagnose: --port ${JSON.stringify(port)}: write a port number from 1 to 65535, optionally with /TCP, /UDP or /SCTP, e.g. 8080/TCP`);
  if (direction !== undefined && direction !== 'ingress' && direction !== 'egress') return err(`diagnose: --direction ${JSON.stringify(direction)}: write ingress or egress`);
  if (network !== undefined && !/^[^/\s]+\/[^/\s]+$/.test(network)) return err(`diagnose: --network ${JSON.stringify(network)}: write NAMESPACE/NAD, as network-status names it`);
  return ok({
    peer: ip.value.address,
    port: n,
    protocol: (m[2]?.toUpperCase() ?? 'TCP') as PolicyProbe['protocol'],
    direction: direction === 'egress' ? 'egress' : 'ingress',
    ...(network !== undefined ? { network } : {}),
  });
}

/** Reads and diagnoses; throws DiagnoseError when the object cannot be diagnosed. */
export async function diagnose(client: KubeClient, req: DiagnoseRequest & { readonly namespace: string }): Promise<Report> {
  if (req.kind === 'pod') return diagnosePod(await readPodFacts(client, req.namespace, req.name, req.webhook, req.probe));
  return diagnoseService(await readServiceFacts(client, req.namespace, req.name));
}

export interface Output {
  write(text: string): unknown;
}

/** The whole command; returns the exit status. */
export async function runDiagnose(argv: readonly string[], stdout: Output, stderr: Output): Promise<number> {
  const parsed = parseDiagnoseArgs(argv);
  if (!parsed.ok) {
    stderr.write(`${parsed.error}\n`);
    return 2;
  }
  if (parsed.value === 'help') {
    stdout.write(helpText(DIAGNOSE_PROGRAM));
    return 0;
  }
  const req = parsed.value;
  try {
    const conn = loadKubeConnection({ ...(req.kubeconfig !== undefined ? { kubeconfig: req.kubeconfig } : {}), ...(req.context !== undefined ? { context: req.context } : {}) });
    const report = await diagnose(createKubeClient(conn), { ...req, namespace: req.namespace ?? conn.namespace ?? 'default' });
    stdout.write(renderReport(report, req.output));
    return report.verdict === 'ok' ? 0 : 1;
  } catch (e) {
    stderr.write(`diagnose: ${escapeTerminal(e instanceof DiagnoseError || e instanceof Error ? e.message : String(e))}\n`);
    return 2;
  }
}
