/**
 * kubeconfig `exec` credential plugins (client.authentication.k8s.io/v1 and v1beta1), what
 * `aws eks get-token`, `gke-gcloud-auth-plugin` and `kubelogin` are. The plugin is run with the
 * kubeconfig's args and env (on top of ours) and KUBERNETES_EXEC_INFO; its ExecCredential's
 * token is cached until its expirationTimestamp and fetched again after that, or at once when
 * the apiserver answers 401. Failures name the kubeconfig user and carry the plugin's stderr.
 */
import { spawn } from 'node:child_process';

export const EXEC_API_VERSIONS = ['client.authentication.k8s.io/v1', 'client.authentication.k8s.io/v1beta1'] as const;
export type ExecApiVersion = (typeof EXEC_API_VERSIONS)[number];
export type InteractiveMode = 'Never' | 'IfAvailable' | 'Always';

export interface ExecConfig {
  /** The kubeconfig user's name, for error messages. */
  user: string;
  command: string;
  args: string[];
  env: { name: string; value: string }[];
  apiVersion: ExecApiVersion;
  interactiveMode: InteractiveMode;
  installHint?: string;
  /** Relative commands are resolved against the kubeconfig's folder, as kubectl does for `./x`. */
  dir: string;
}

export interface ExecToken {
  token: string;
  /** ms since epoch; undefined = valid until a 401. */
  expiresAt?: number;
}

/** A token is used until this long before it expires (a request in flight must not carry a dead one). */
const EXPIRY_MARGIN_MS = 10_000;
const STDERR_LIMIT = 2_000;

/** Reads the plugin's output; pure, so malformed output can be tested without a plugin. */
export function parseExecCredential(stdout: string, cfg: Pick<ExecConfig, 'user' | 'command' | 'apiVersion'>): ExecToken {
  const what = `kubeconfig user ${JSON.stringify(cfg.user)}: exec plugin ${JSON.stringify(cfg.command)}`;
  let doc: unknown;
  try {
    doc = JSON.parse(stdout);
  } catch {
    throw new Error(`${what} printed no ExecCredential JSON on stdout: ${JSON.stringify(stdout.slice(0, 200))}`);
  }
  const d = (doc ?? {}) as { apiVersion?: unknown; kind?: unknown; status?: { token?: unknown; expirationTimestamp?: unknown; clientCertificateData?: unknown } };
  if (d.kind !== 'ExecCredential') throw new Error(`${what}: kind is ${JSON.stringify(d.kind)}, expected "ExecCredential"`);
  if (d.apiVersion !== cfg.apiVersion) {
    throw new Error(`${what}: answered apiVersion ${JSON.stringify(d.apiVersion)}, but the kubeconfig asks for ${JSON.stringify(cfg.apiVersion)}; make them match`);
  }
  const token = d.status?.token;
  if (typeof token !== 'string' || token === '') {
    const certOnly = d.status?.clientCertificateData !== undefined;
    throw new Error(`${what}: status.token is missing${certOnly ? ' (client certificates from exec plugins are not supported; use a plugin that returns a token)' : ''}`);
  }
  const exp = d.status?.expirationTimestamp;
  if (exp === undefined || exp === null) return { token };
  const at = typeof exp === 'string' ? Date.parse(exp) : NaN;
  if (!Number.isFinite(at)) throw new Error(`${what}: status.expirationTimestamp ${JSON.stringify(exp)} is not an RFC 3339 time`);
  return { token, expiresAt: at };
}

/** What KUBERNETES_EXEC_INFO tells the plugin. */
export function execInfo(apiVersion: ExecApiVersion, interactive: boolean): string {
  return JSON.stringify({ apiVersion, kind: 'ExecCredential', spec: { interactive } });
}

/** Whether the plugin may talk to the user; Always without a terminal is an error. */
export function interactiveFor(mode: InteractiveMode, stdinIsTTY: boolean, user: string): boolean {
  if (mode === 'Never') return false;
  if (mode === 'IfAvailable') return stdinIsTTY;
  if (!stdinIsTTY) throw new Error(`kubeconfig user ${JSON.stringify(user)}: the exec plugin needs a terminal (interactiveMode: Always), but stdin is not one`);
  return true;
}

function runPlugin(cfg: ExecConfig, interactive: boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const what = `kubeconfig user ${JSON.stringify(cfg.user)}: exec plugin ${JSON.stringify(cfg.command)}`;
    const command = cfg.command.startsWith('./') || cfg.command.startsWith('../') ? `${cfg.dir}/${cfg.command}` : cfg.command;
    const env = { ...process.env, ...Object.fromEntries(cfg.env.map((e) => [e.name, e.value])), KUBERNETES_EXEC_INFO: execInfo(cfg.apiVersion, interactive) };
    const child = spawn(command, cfg.args, { env, stdio: [interactive ? 'inherit' : 'ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => (out += c));
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      err = (err + c).slice(-STDERR_LIMIT);
      // An interactive plugin talks to the user on stderr.
      if (interactive) process.stderr.write(c);
    });
    child.on('error', (e: NodeJS.ErrnoException) => {
      const hint = e.code === 'ENOENT' ? `: not found${cfg.installHint ? `. ${cfg.installHint.trim()}` : '; install it or fix users[].user.exec.command'}` : `: ${e.message}`;
      reject(new Error(`${what}${hint}`, { cause: e }));
    });
    child.on('close', (code, signal) => {
      if (code === 0) return resolve(out);
      reject(new Error(`${what} failed (${signal ? `signal ${signal}` : `exit ${code}`}): ${err.trim() || '(no stderr)'}`));
    });
  });
}

/** Runs the plugin when there is no valid token; concurrent callers share one run. */
export class ExecCredentialSource {
  private cached: ExecToken | undefined;
  private running: Promise<ExecToken> | undefined;
  /** Times the plugin was run (tests). */
  runs = 0;

  constructor(
    private readonly cfg: ExecConfig,
    private readonly now: () => number = Date.now,
    private readonly stdinIsTTY: boolean = process.stdin.isTTY === true,
  ) {}

  async token(): Promise<string> {
    const c = this.cached;
    if (c !== undefined && (c.expiresAt === undefined || c.expiresAt - EXPIRY_MARGIN_MS > this.now())) return c.token;
    this.running ??= this.fetch().finally(() => (this.running = undefined));
    return (await this.running).token;
  }

  /** After a 401: the next request runs the plugin again. */
  invalidate(): void {
    this.cached = undefined;
  }

  private async fetch(): Promise<ExecToken> {
    this.runs++;
    const out = await runPlugin(this.cfg, interactiveFor(this.cfg.interactiveMode, this.stdinIsTTY, this.cfg.user));
    this.cached = parseExecCredential(out, this.cfg);
    return this.cached;
  }
}
