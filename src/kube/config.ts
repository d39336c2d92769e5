/**
 * Where and how to reach the apiserver. Order: an explicit kubeconfig path, then $KUBECONFIG,
 * then the in-cluster service account, then ~/.kube/config (for running a program from a laptop).
 * Only what the lean client needs is read: server, CA, bearer token or token file, client
 * certificate, or an exec credential plugin (src/kube/exec-credential.ts; what EKS, GKE and AKS
 * kubeconfigs use). auth-provider (removed from kubectl) and basic auth are refused with a clear
 * message rather than ignored, so a wrong identity is never used silently.
 */
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, resolve } from 'node:path';
import { load } from 'js-yaml';
import { EXEC_API_VERSIONS, type ExecApiVersion, type ExecConfig, type InteractiveMode } from './exec-credential.js';

export interface KubeConnection {
  server: string;
  ca?: Buffer;
  token?: string;
  /** Re-read periodically by the client: projected service-account tokens rotate. */
  tokenFile?: string;
  cert?: Buffer;
  key?: Buffer;
  insecureSkipTLSVerify?: boolean;
  /** A kubeconfig exec credential plugin (EKS, GKE, AKS from a laptop); run by the client. */
  exec?: ExecConfig;
  /**
   * The namespace kubectl would use without -n: the context's `namespace`, or in a pod its own
   * (the service-account folder's `namespace` file). Only a default for commands such as
   * `controller diagnose`; the programs never act on it.
   */
  namespace?: string;
}

export interface LoadOptions {
  kubeconfig?: string;
  context?: string;
  /** For tests: the environment and the service-account folder used for in-cluster config. */
  env?: NodeJS.ProcessEnv;
  serviceAccountDir?: string;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export function loadKubeConnection(opts: LoadOptions = {}): KubeConnection {
  const env = opts.env ?? process.env;
  if (opts.kubeconfig) return fromKubeconfigFiles([opts.kubeconfig], opts.context);
  const fromEnv = env['KUBECONFIG'];
  if (fromEnv) {
    const files = fromEnv.split(':').filter((f) => f !== '');
    if (files.length > 0) return fromKubeconfigFiles(files, opts.context);
  }
  if (env['KUBERNETES_SERVICE_HOST']) return inClusterConnection(env, opts.serviceAccountDir ?? SERVICE_ACCOUNT_DIR);
  const home = resolve(homedir(), '.kube', 'config');
  if (existsSync(home)) return fromKubeconfigFiles([home], opts.context);
  throw new Error('no Kubernetes configuration found: pass --kubeconfig, set KUBECONFIG, or run in a pod with a service account (KUBERNETES_SERVICE_HOST unset)');
}

/** The pod's own service account: what every in-cluster program uses. */
export function inClusterConnection(env: NodeJS.ProcessEnv, dir: string = SERVICE_ACCOUNT_DIR): KubeConnection {
  const host = env['KUBERNETES_SERVICE_HOST'];
  const port = env['KUBERNETES_SERVICE_PORT'] ?? '443';
  if (!host) throw new Error('in-cluster config: KUBERNETES_SERVICE_HOST is not set');
  const tokenFile = resolve(dir, 'token');
  if (!existsSync(tokenFile)) {
    throw new Error(`in-cluster config: ${tokenFile} is missing; mount a service-account token (automountServiceAccountToken: true)`);
  }
  const caFile = resolve(dir, 'ca.crt');
  const namespaceFile = resolve(dir, 'namespace');
  const namespace = existsSync(namespaceFile) ? readFileSync(namespaceFile, 'utf8').trim() : '';
  // An IPv6 service host must be bracketed in a URL.
  const hostPart = host.includes(':') ? `[${host}]` : host;
  return {
    server: `https://${hostPart}:${port}`,
    tokenFile,
    ...(existsSync(caFile) ? { ca: readFileSync(caFile) } : {}),
    ...(namespace !== '' ? { namespace } : {}),
  };
}

type Named<T> = { name?: string } & { [k: string]: T | string | undefined };
interface RawKubeconfig {
  'current-context'?: string;
  clusters?: Named<Record<string, unknown>>[];
  users?: Named<Record<string, unknown>>[];
  contexts?: Named<Record<string, unknown>>[];
}

interface Section {
  body: Record<string, unknown>;
  /** Relative file paths in a kubeconfig are relative to the file that holds them. */
  dir: string;
}

/** Reads and merges kubeconfig files the way kubectl does: the first file that names an entry wins. */
export function fromKubeconfigFiles(files: readonly string[], context?: string): KubeConnection {
  const clusters = new Map<string, Section>();
  const users = new Map<string, Section>();
  const contexts = new Map<string, Section>();
  let current: string | undefined;
  let seen = 0;
  for (const file of files) {
    if (!existsSync(file)) continue;
    seen++;
    const raw = parseKubeconfig(file);
    const dir = dirname(resolve(file));
    current ??= raw['current-context'] || undefined;
    collect(raw.clusters, 'cluster', clusters, dir);
    collect(raw.users, 'user', users, dir);
    collect(raw.contexts, 'context', contexts, dir);
  }
  if (seen === 0) throw new Error(`kubeconfig: none of ${files.join(', ')} exists`);
  const ctxName = context ?? current;
  if (!ctxName) throw new Error(`kubeconfig ${files.join(':')}: no current-context set and no context given`);
  const ctx = contexts.get(ctxName);
  if (!ctx) throw new Error(`kubeconfig ${files.join(':')}: context ${JSON.stringify(ctxName)} not found; known: ${[...contexts.keys()].join(', ') || 'none'}`);
  const clusterName = str(ctx.body['cluster']);
  const cluster = clusterName === undefined ? undefined : clusters.get(clusterName);
  if (!cluster) throw new Error(`kubeconfig: context ${JSON.stringify(ctxName)} names cluster ${JSON.stringify(clusterName)}, which is not defined`);
  const userName = str(ctx.body['user']);
  const user = userName === undefined ? undefined : users.get(userName);
  if (userName !== undefined && !user) throw new Error(`kubeconfig: context ${JSON.stringify(ctxName)} names user ${JSON.stringify(userName)}, which is not defined`);
  const conn = connectionFrom(ctxName, cluster, user, userName);
  const namespace = str(ctx.body['namespace']);
  if (namespace !== undefined) conn.namespace = namespace;
  return conn;
}

function parseKubeconfig(file: string): RawKubeconfig {
  let doc: unknown;
  try {
    doc = load(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`kubeconfig ${file}: not valid YAML: ${(e as Error).message}`, { cause: e });
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new Error(`kubeconfig ${file}: expected a mapping at the top level`);
  return doc;
}

function collect(list: Named<Record<string, unknown>>[] | undefined, field: string, into: Map<string, Section>, dir: string): void {
  if (!Array.isArray(list)) return;
  for (const entry of list) {
    const name = typeof entry?.name === 'string' ? entry.name : undefined;
    const body = entry?.[field];
    if (name === undefined || into.has(name)) continue;
    into.set(name, { body: body !== null && typeof body === 'object' ? body : {}, dir });
  }
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

/** `*-data` (base64) wins over the file form, as in kubectl. */
function bytes(section: Section, dataKey: string, fileKey: string): Buffer | undefined {
  const data = str(section.body[dataKey]);
  if (data !== undefined) return Buffer.from(data, 'base64');
  const file = str(section.body[fileKey]);
  if (file !== undefined) return readFileSync(resolve(section.dir, file));
  return undefined;
}

function connectionFrom(ctxName: string, cluster: Section, user: Section | undefined, userName?: string): KubeConnection {
  const server = str(cluster.body['server']);
  if (!server) throw new Error(`kubeconfig: the cluster of context ${JSON.stringify(ctxName)} has no server URL`);
  const conn: KubeConnection = { server: server.replace(/\/+$/, '') };
  const ca = bytes(cluster, 'certificate-authority-data', 'certificate-authority');
  if (ca) conn.ca = ca;
  if (cluster.body['insecure-skip-tls-verify'] === true) conn.insecureSkipTLSVerify = true;
  if (user) {
    if (user.body['exec'] !== undefined) conn.exec = execConfig(user.body['exec'], userName ?? '', user.dir);
    for (const unsupported of ['auth-provider', 'username']) {
      if (user.body[unsupported] !== undefined) {
        throw new Error(
          `kubeconfig: the user of context ${JSON.stringify(ctxName)} uses "${unsupported}", which multus-proxy does not support; use a token, tokenFile, client certificate or an exec plugin`,
        );
      }
    }
    const token = str(user.body['token']);
    if (token !== undefined) conn.token = token;
    const tokenFile = str(user.body['tokenFile']);
    if (tokenFile !== undefined) conn.tokenFile = resolve(user.dir, tokenFile);
    const cert = bytes(user, 'client-certificate-data', 'client-certificate');
    const key = bytes(user, 'client-key-data', 'client-key');
    if ((cert === undefined) !== (key === undefined)) {
      throw new Error(`kubeconfig: the user of context ${JSON.stringify(ctxName)} has a client certificate without a key or a key without a certificate`);
    }
    if (cert && key) {
      conn.cert = cert;
      conn.key = key;
    }
  }
  return conn;
}

const INTERACTIVE_MODES: readonly InteractiveMode[] = ['Never', 'IfAvailable', 'Always'];

/** users[].user.exec, checked; every problem names the user, the key, the bad value and the fix. */
export function execConfig(raw: unknown, user: string, dir: string): ExecConfig {
  const where = `kubeconfig user ${JSON.stringify(user)}: exec`;
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw new Error(`${where} must be a mapping with command and apiVersion`);
  const e = raw as Record<string, unknown>;
  const command = str(e['command']);
  if (command === undefined) throw new Error(`${where}.command is missing or empty; set it to the plugin's executable (e.g. aws, gke-gcloud-auth-plugin, kubelogin)`);
  const apiVersion = e['apiVersion'];
  if (!EXEC_API_VERSIONS.includes(apiVersion as ExecApiVersion)) {
    throw new Error(`${where}.apiVersion is ${JSON.stringify(apiVersion)}; use one of ${EXEC_API_VERSIONS.join(', ')}`);
  }
  const args = e['args'] ?? [];
  if (!Array.isArray(args) || !args.every((a) => typeof a === 'string')) throw new Error(`${where}.args must be a list of strings, got ${JSON.stringify(args)}`);
  const envRaw = e['env'] ?? [];
  if (!Array.isArray(envRaw)) throw new Error(`${where}.env must be a list of {name, value}, got ${JSON.stringify(envRaw)}`);
  const env = envRaw.map((v: unknown, i) => {
    const item = (v ?? {}) as { name?: unknown; value?: unknown };
    if (typeof item.name !== 'string' || item.name === '' || typeof item.value !== 'string') {
      throw new Error(`${where}.env[${i}] is ${JSON.stringify(v)}; each entry needs a string name and value`);
    }
    return { name: item.name, value: item.value };
  });
  // client.authentication.k8s.io/v1 requires interactiveMode; v1beta1 defaults to IfAvailable.
  const modeRaw = e['interactiveMode'] ?? (apiVersion === 'client.authentication.k8s.io/v1beta1' ? 'IfAvailable' : undefined);
  if (!INTERACTIVE_MODES.includes(modeRaw as InteractiveMode)) {
    throw new Error(`${where}.interactiveMode is ${JSON.stringify(modeRaw)}; use Never, IfAvailable or Always (required for client.authentication.k8s.io/v1)`);
  }
  const installHint = str(e['installHint']);
  return { user, command, args: args, env, apiVersion: apiVersion as ExecApiVersion, interactiveMode: modeRaw as InteractiveMode, dir, ...(installHint ? { installHint } : {}) };
}
