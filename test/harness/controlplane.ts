/**
 * A real Kubernetes control plane for tests: etcd + kube-apiserver on 127.0.0.1 (random ports,
 * temp data dir), RBAC, an admin static token (group system:masters), service-account signing
 * keys (so TokenRequest works and tests can run programs with least privilege), a dual-stack
 * service CIDR, the default admission plugins (webhooks and PodSecurity on), and the
 * NetworkAttachmentDefinition CRD. No controller-manager runs: `createNamespace` also creates the
 * `default` ServiceAccount that the ServiceAccount admission plugin requires.
 *
 * Binaries: `${MULTUS_PROXY_BIN_DIR:-$HOME/.cache/multus-proxy/bin}/{etcd,kube-apiserver}`, built
 * by scripts/setup.sh. Missing binaries are an error, never a skip.
 *
 * Sharing: test/run.ts starts one control plane for the whole suite and passes its state file in
 * MULTUS_PROXY_TEST_CONTROLPLANE; `useControlPlane()` returns it (stop() is then a no-op) or
 * starts a private one when run alone. Tests that restart the apiserver or need special flags
 * call `startControlPlane()` for their own.
 *
 * Cleanup: stop() kills both processes and removes the temp dir; a process 'exit' hook does the
 * same, and a small detached reaper shell does it if the test process is killed outright.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import forge from 'node-forge';
import { dump } from 'js-yaml';
import { createKubeClient, isConflict, type KubeClient } from '../../src/kube/client.js';
import type { KubeConnection } from '../../src/kube/config.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1Namespace } from '../../src/kube/types.js';

export const SHARED_ENV = 'MULTUS_PROXY_TEST_CONTROLPLANE';
/** Dual-stack virtual service ranges. Nothing may ever be sent to them outside test network namespaces. */
export const SERVICE_CIDRS = ['10.96.0.0/16', 'fd00:10:96::/112'] as const;

export interface ControlPlaneOptions {
  /** false: every watch goes straight to etcd, so a compacted resourceVersion yields 410 Gone. */
  watchCache?: boolean;
  extraApiserverArgs?: string[];
  startTimeoutMs?: number;
}

export interface ControlPlane {
  readonly server: string;
  readonly kubeconfigPath: string;
  /** Admin (system:masters) connection and client. */
  readonly connection: KubeConnection;
  readonly client: KubeClient;
  /** http://127.0.0.1:port; its v3 JSON gateway answers /v3/kv/... */
  readonly etcdEndpoint: string;
  readonly dir: string;
  readonly caPem: string;
  readonly apiserverLog: string;
  /** True when this is the suite's shared control plane (stop() then leaves it running). */
  readonly shared: boolean;
  stop(): Promise<void>;
  restartApiserver(): Promise<void>;
  /** Creates a namespace (labels optional) and its `default` ServiceAccount; existing ones are fine. */
  createNamespace(name: string, labels?: Record<string, string>): Promise<V1Namespace>;
  /** A real service-account token (TokenRequest); creates the ServiceAccount when missing. */
  tokenFor(namespace: string, serviceAccount: string, opts?: { expirationSeconds?: number }): Promise<string>;
  /** Writes a kubeconfig that authenticates as the ServiceAccount; returns its path. */
  kubeconfigFor(namespace: string, serviceAccount: string): Promise<string>;
  /** Compacts etcd up to its current revision; returns that revision. */
  compactEtcd(): Promise<number>;
  /** The pids of etcd and kube-apiserver (empty for a shared plane seen from a test). */
  pids(): number[];
}

/** What test/run.ts hands to test files. */
interface SharedState {
  server: string;
  kubeconfigPath: string;
  etcdEndpoint: string;
  dir: string;
  caPem: string;
  adminToken: string;
  apiserverLog: string;
}

export function binDir(): string {
  return process.env['MULTUS_PROXY_BIN_DIR'] || join(homedir(), '.cache', 'multus-proxy', 'bin');
}

export function requireBinary(name: string): string {
  const path = join(binDir(), name);
  if (!existsSync(path)) {
    throw new Error(`${name} not found at ${path}: run scripts/setup.sh (it builds etcd and kube-apiserver with Go into ${binDir()}; set MULTUS_PROXY_BIN_DIR to use another folder)`);
  }
  return path;
}

/** A port the kernel just handed out on 127.0.0.1; start-up retries if something grabs it first. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

interface Pki {
  caPem: string;
  servingCert: string;
  servingKey: string;
  adminCert: string;
  adminKey: string;
}

/** A 2048-bit RSA key pair: the forge key to sign with, its public key and its PKCS#1 PEM. */
export function rsaPair(): { forgeKey: forge.pki.rsa.PrivateKey; publicKey: forge.pki.rsa.PublicKey; pem: string } {
  // node:crypto generates keys natively (node-forge in pure JS takes seconds per key).
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const forgeKey = forge.pki.privateKeyFromPem(pem);
  return { forgeKey, publicKey: forge.pki.setRsaPublicKey(forgeKey.n, forgeKey.e), pem };
}

/** Issues a certificate for publicKey signed by signer (valid 24 h, backdated 1 min). */
export function issue(
  subject: forge.pki.CertificateField[],
  publicKey: forge.pki.rsa.PublicKey,
  signer: { key: forge.pki.rsa.PrivateKey; subject: forge.pki.CertificateField[] },
  extensions: object[],
): string {
  const cert = forge.pki.createCertificate();
  cert.publicKey = publicKey;
  cert.serialNumber = `01${randomBytes(8).toString('hex')}`;
  cert.validity.notBefore = new Date(Date.now() - 60_000);
  cert.validity.notAfter = new Date(Date.now() + 24 * 3600_000);
  cert.setSubject(subject);
  cert.setIssuer(signer.subject);
  cert.setExtensions(extensions);
  cert.sign(signer.key, forge.md.sha256.create());
  return forge.pki.certificateToPem(cert);
}

function makePki(): Pki {
  const ca = rsaPair();
  const caSubject = [{ name: 'commonName', value: 'multus-proxy-test-ca' }];
  const caPem = issue(caSubject, ca.publicKey, { key: ca.forgeKey, subject: caSubject }, [
    { name: 'basicConstraints', cA: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true },
  ]);
  const signer = { key: ca.forgeKey, subject: caSubject };
  const serving = rsaPair();
  const servingCert = issue([{ name: 'commonName', value: 'kube-apiserver' }], serving.publicKey, signer, [
    { name: 'basicConstraints', cA: false },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
    { name: 'extKeyUsage', serverAuth: true },
    {
      name: 'subjectAltName',
      altNames: [
        { type: 2, value: 'localhost' },
        { type: 7, ip: '127.0.0.1' },
        { type: 7, ip: '::1' },
      ],
    },
  ]);
  const admin = rsaPair();
  // O=system:masters: the client-certificate path of src/kube/client.ts gets full rights too.
  const adminCert = issue(
    [
      { name: 'commonName', value: 'test-admin-cert' },
      { name: 'organizationName', value: 'system:masters' },
    ],
    admin.publicKey,
    signer,
    [
      { name: 'basicConstraints', cA: false },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
      { name: 'extKeyUsage', clientAuth: true },
    ],
  );
  return { caPem, servingCert, servingKey: serving.pem, adminCert, adminKey: admin.pem };
}

export function kubeconfigYaml(server: string, caPem: string, user: Record<string, string>, name = 'test'): string {
  return dump({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server, 'certificate-authority-data': Buffer.from(caPem).toString('base64') } }],
    users: [{ name, user }],
    contexts: [{ name, context: { cluster: name, user: name } }],
    'current-context': name,
  });
}

export function tail(file: string, lines = 40): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

function waitExit(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const t = setTimeout(() => resolve(false), ms);
    child.once('exit', () => {
      clearTimeout(t);
      resolve(true);
    });
  });
}

async function kill(child: ChildProcess | undefined, graceMs: number): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  child.kill('SIGTERM');
  if (!(await waitExit(child, graceMs))) {
    child.kill('SIGKILL');
    await waitExit(child, 5_000);
  }
}

export async function poll(what: string, timeoutMs: number, check: () => Promise<boolean>, failed?: () => string | undefined): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    const why = failed?.();
    if (why) throw new Error(`${what}: ${why}`);
    try {
      if (await check()) return;
    } catch (e) {
      last = e;
    }
    await delay(200);
  }
  throw new Error(`${what}: not ready within ${timeoutMs} ms${last ? ` (last error: ${(last as Error).message})` : ''}`);
}

/** /readyz answers plain text, which the JSON client does not parse. */
function readyz(server: string, caPem: string, token: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = https.get(`${server}/readyz`, { ca: caPem, headers: { Authorization: `Bearer ${token}` }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(res.statusCode === 200 ? body.trim() : `${res.statusCode}: ${body}`));
      res.on('error', reject);
    });
    req.setTimeout(5_000, () => req.destroy(new Error('readyz timed out')));
    req.on('error', reject);
  });
}

const NAD_CRD = {
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: 'network-attachment-definitions.k8s.cni.cncf.io' },
  spec: {
    group: 'k8s.cni.cncf.io',
    scope: 'Namespaced',
    names: { plural: 'network-attachment-definitions', singular: 'network-attachment-definition', kind: 'NetworkAttachmentDefinition', shortNames: ['net-attach-def'] },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        schema: {
          openAPIV3Schema: {
            type: 'object',
            properties: {
              apiVersion: { type: 'string' },
              kind: { type: 'string' },
              metadata: { type: 'object' },
              spec: { type: 'object', properties: { config: { type: 'string' } } },
            },
          },
        },
      },
    ],
  },
};

async function registerNadCrd(client: KubeClient, timeoutMs: number): Promise<void> {
  try {
    await client.create(apiPath('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'), NAD_CRD);
  } catch (e) {
    if (!isConflict(e)) throw e;
  }
  // Established is not enough: discovery and the REST handler can lag; a list proves it is served.
  await poll('NetworkAttachmentDefinition CRD', timeoutMs, async () => {
    await client.list(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions'));
    return true;
  });
}

async function etcdJson(endpoint: string, path: string, body: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${endpoint}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } });
  const text = await res.text();
  if (!res.ok) throw new Error(`etcd ${path}: ${res.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
}

/** Helpers that need only a client, shared by private and shared control planes. */
function clientHelpers(client: KubeClient, server: string, caPem: string, dir: string, etcdEndpoint: string): Pick<ControlPlane, 'createNamespace' | 'tokenFor' | 'kubeconfigFor' | 'compactEtcd'> {
  const ensure = async (path: string, body: unknown): Promise<void> => {
    try {
      await client.create(path, body);
    } catch (e) {
      if (!isConflict(e)) throw e;
    }
  };
  const ensureSa = (namespace: string, name: string): Promise<void> =>
    ensure(apiPath('', 'v1', 'serviceaccounts', namespace), { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name, namespace } });
  const tokenFor = async (namespace: string, serviceAccount: string, opts?: { expirationSeconds?: number }): Promise<string> => {
    await ensureSa(namespace, serviceAccount);
    const tr = await client.create<{ apiVersion: string; kind: string; spec: { expirationSeconds: number }; status?: { token?: string } }>(
      `${apiPath('', 'v1', 'serviceaccounts', namespace, serviceAccount)}/token`,
      { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: opts?.expirationSeconds ?? 3600 } },
    );
    const token = tr.status?.token;
    if (!token) throw new Error(`TokenRequest for ${namespace}/${serviceAccount} returned no token`);
    return token;
  };
  return {
    async createNamespace(name, labels) {
      await ensure(apiPath('', 'v1', 'namespaces'), { apiVersion: 'v1', kind: 'Namespace', metadata: { name, ...(labels ? { labels } : {}) } });
      await ensureSa(name, 'default');
      return client.get<V1Namespace>(apiPath('', 'v1', 'namespaces', undefined, name));
    },
    tokenFor,
    async kubeconfigFor(namespace, serviceAccount) {
      const token = await tokenFor(namespace, serviceAccount);
      const path = join(dir, `kubeconfig-${namespace}-${serviceAccount}-${randomBytes(3).toString('hex')}`);
      writeFileSync(path, kubeconfigYaml(server, caPem, { token }), { mode: 0o600 });
      return path;
    },
    async compactEtcd() {
      // The v3 JSON gateway: no etcdctl needed. int64 fields travel as strings.
      const range = await etcdJson(etcdEndpoint, '/v3/kv/range', { key: Buffer.from('/').toString('base64') });
      const header = range['header'] as { revision?: string } | undefined;
      const revision = Number(header?.revision);
      if (!Number.isFinite(revision) || revision <= 0) throw new Error(`etcd: no revision in ${JSON.stringify(range)}`);
      await etcdJson(etcdEndpoint, '/v3/kv/compaction', { revision: String(revision), physical: true });
      return revision;
    },
  };
}

/** Starts a private control plane. Call `stop()` in `after`/`t.after`, also when the test failed. */
export async function startControlPlane(opts: ControlPlaneOptions = {}): Promise<ControlPlane> {
  const etcdBin = requireBinary('etcd');
  const kasBin = requireBinary('kube-apiserver');
  const timeoutMs = opts.startTimeoutMs ?? 120_000;
  const dir = mkdtempSync(join(tmpdir(), 'multus-proxy-cp-'));
  const pki = makePki();
  const sa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const adminToken = randomBytes(24).toString('hex');
  const files = {
    ca: join(dir, 'ca.crt'),
    servingCert: join(dir, 'apiserver.crt'),
    servingKey: join(dir, 'apiserver.key'),
    saKey: join(dir, 'sa.key'),
    saPub: join(dir, 'sa.pub'),
    tokens: join(dir, 'tokens.csv'),
    kubeconfig: join(dir, 'kubeconfig'),
    etcdLog: join(dir, 'etcd.log'),
    apiserverLog: join(dir, 'apiserver.log'),
    pids: join(dir, 'pids'),
  };
  writeFileSync(files.ca, pki.caPem);
  writeFileSync(files.servingCert, pki.servingCert);
  writeFileSync(files.servingKey, pki.servingKey, { mode: 0o600 });
  writeFileSync(files.saKey, sa.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  writeFileSync(files.saPub, sa.publicKey.export({ type: 'spki', format: 'pem' }));
  writeFileSync(files.tokens, `${adminToken},test-admin,test-admin-uid,"system:masters"\n`, { mode: 0o600 });

  let etcd: ChildProcess | undefined;
  let kas: ChildProcess | undefined;
  let stopped = false;
  const writePids = (): void => writeFileSync(files.pids, [etcd?.pid, kas?.pid].filter((p) => p !== undefined).join('\n'));
  const onExit = (): void => {
    for (const c of [kas, etcd]) {
      try {
        c?.kill('SIGKILL');
      } catch {
        /* already gone */
      }
    }
    rmSync(dir, { recursive: true, force: true });
  };
  process.on('exit', onExit);
  // If this process is killed outright ('exit' never runs), a detached shell reaps what we started.
  // It only kills pids whose command line names our temp dir, so a reused pid is never hit.
  const reaper = spawn(
    'sh',
    [
      '-c',
      `while kill -0 ${process.pid} 2>/dev/null && [ -d '${dir}' ]; do sleep 1; done; ` +
        `[ -d '${dir}' ] || exit 0; for p in $(cat '${files.pids}' 2>/dev/null); do grep -q '${dir}' /proc/$p/cmdline 2>/dev/null && kill -9 $p; done; rm -rf '${dir}'`,
    ],
    { detached: true, stdio: 'ignore' },
  );
  reaper.unref();

  const start = (bin: string, args: string[], log: string): ChildProcess => {
    const fd = openSync(log, 'a');
    const child = spawn(bin, args, { stdio: ['ignore', fd, fd] });
    closeSync(fd);
    // A test that forgets stop() must not hang the suite: the children do not keep this process
    // alive, and the 'exit' hook (or the reaper) kills them when it ends.
    child.unref();
    return child;
  };
  const exitedWhy = (c: ChildProcess | undefined, name: string, log: string) => (): string | undefined =>
    c && (c.exitCode !== null || c.signalCode !== null) ? `${name} exited (${c.exitCode ?? c.signalCode}); last lines of ${log}:\n${tail(log)}` : undefined;

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    await kill(kas, 10_000);
    await kill(etcd, 10_000);
    if (reaper.pid !== undefined && reaper.exitCode === null) reaper.kill('SIGKILL');
    process.off('exit', onExit);
    rmSync(dir, { recursive: true, force: true });
  };

  try {
    // etcd
    let etcdEndpoint = '';
    for (let attempt = 0; ; attempt++) {
      const clientPort = await freePort();
      const peerPort = await freePort();
      etcdEndpoint = `http://127.0.0.1:${clientPort}`;
      const peer = `http://127.0.0.1:${peerPort}`;
      etcd = start(
        etcdBin,
        [
          `--name=test`,
          `--data-dir=${join(dir, 'etcd')}`,
          `--listen-client-urls=${etcdEndpoint}`,
          `--advertise-client-urls=${etcdEndpoint}`,
          `--listen-peer-urls=${peer}`,
          `--initial-advertise-peer-urls=${peer}`,
          `--initial-cluster=test=${peer}`,
          '--unsafe-no-fsync=true', // throwaway data: fsync only slows tests on a shared disk
          '--log-level=warn',
        ],
        files.etcdLog,
      );
      writePids();
      try {
        await poll(
          'etcd',
          30_000,
          async () => {
            const res = await fetch(`${etcdEndpoint}/health`);
            return res.ok && ((await res.json()) as { health?: string }).health === 'true';
          },
          exitedWhy(etcd, 'etcd', files.etcdLog),
        );
        break;
      } catch (e) {
        await kill(etcd, 2_000);
        if (attempt >= 2) throw e;
      }
    }

    // kube-apiserver
    const argsFor = (port: number): string[] => [
      `--etcd-servers=${etcdEndpoint}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${port}`,
      `--cert-dir=${join(dir, 'certs')}`,
      `--tls-cert-file=${files.servingCert}`,
      `--tls-private-key-file=${files.servingKey}`,
      `--client-ca-file=${files.ca}`,
      `--token-auth-file=${files.tokens}`,
      '--authorization-mode=RBAC',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${files.saPub}`,
      `--service-account-signing-key-file=${files.saKey}`,
      `--service-cluster-ip-range=${SERVICE_CIDRS.join(',')}`,
      '--allow-privileged=true',
      // The `kubernetes` Endpoints would name 127.0.0.1, which Endpoints validation refuses.
      '--endpoint-reconciler-type=none',
      // Priority and fairness only adds start-up work and CPU on a small shared machine.
      '--enable-priority-and-fairness=false',
      '--profiling=false',
      `--watch-cache=${opts.watchCache === false ? 'false' : 'true'}`,
      ...(opts.extraApiserverArgs ?? []),
    ];
    let server = '';
    let kasArgs: string[] = [];
    const startKas = async (): Promise<void> => {
      kas = start(kasBin, kasArgs, files.apiserverLog);
      writePids();
      await poll('kube-apiserver', timeoutMs, async () => (await readyz(server, pki.caPem, adminToken)) === 'ok', exitedWhy(kas, 'kube-apiserver', files.apiserverLog));
    };
    // Another process may take the free port before the apiserver binds it: retry with a new one.
    for (let attempt = 0; ; attempt++) {
      const port = await freePort();
      server = `https://127.0.0.1:${port}`;
      kasArgs = argsFor(port);
      try {
        await startKas();
        break;
      } catch (e) {
        const log = tail(files.apiserverLog);
        await kill(kas, 2_000);
        if (attempt < 2 && /address already in use/.test(log)) continue;
        throw new Error(`${(e as Error).message}\nlast lines of ${files.apiserverLog}:\n${log}`, { cause: e });
      }
    }
    const connection: KubeConnection = { server, ca: Buffer.from(pki.caPem), token: adminToken };
    const client = createKubeClient(connection);
    writeFileSync(files.kubeconfig, kubeconfigYaml(server, pki.caPem, { token: adminToken }), { mode: 0o600 });
    writeFileSync(
      join(dir, 'kubeconfig-cert'),
      kubeconfigYaml(server, pki.caPem, {
        'client-certificate-data': Buffer.from(pki.adminCert).toString('base64'),
        'client-key-data': Buffer.from(pki.adminKey).toString('base64'),
      }),
      { mode: 0o600 },
    );
    await registerNadCrd(client, timeoutMs);

    const state: SharedState = { server, kubeconfigPath: files.kubeconfig, etcdEndpoint, dir, caPem: pki.caPem, adminToken, apiserverLog: files.apiserverLog };
    writeFileSync(join(dir, 'state.json'), JSON.stringify(state));
    return {
      server,
      kubeconfigPath: files.kubeconfig,
      connection,
      client,
      etcdEndpoint,
      dir,
      caPem: pki.caPem,
      apiserverLog: files.apiserverLog,
      shared: false,
      stop,
      async restartApiserver() {
        await kill(kas, 10_000);
        await startKas();
      },
      pids: () => [etcd?.pid, kas?.pid].filter((p): p is number => p !== undefined),
      ...clientHelpers(client, server, pki.caPem, dir, etcdEndpoint),
    };
  } catch (e) {
    await stop();
    throw e;
  }
}

/** The suite's shared control plane when test/run.ts started one, else a private one. */
export async function useControlPlane(): Promise<ControlPlane> {
  const stateFile = process.env[SHARED_ENV];
  if (!stateFile) return startControlPlane();
  if (!existsSync(stateFile)) {
    throw new Error(`${SHARED_ENV}=${stateFile} does not exist: the shared control plane did not start (see test/run.ts output above)`);
  }
  const s = JSON.parse(readFileSync(stateFile, 'utf8')) as SharedState;
  const connection: KubeConnection = { server: s.server, ca: Buffer.from(s.caPem), token: s.adminToken };
  const client = createKubeClient(connection);
  return {
    server: s.server,
    kubeconfigPath: s.kubeconfigPath,
    connection,
    client,
    etcdEndpoint: s.etcdEndpoint,
    dir: s.dir,
    caPem: s.caPem,
    apiserverLog: s.apiserverLog,
    shared: true,
    stop: async () => {},
    restartApiserver: () => Promise.reject(new Error('the shared control plane cannot be restarted from a test; use startControlPlane() for a private one')),
    pids: () => [],
    ...clientHelpers(client, s.server, s.caPem, s.dir, s.etcdEndpoint),
  };
}

/** A namespace name unique to this test run, so tests on the shared control plane never collide. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(3).toString('hex')}`;
}
