/**
 * A whole real single-node Kubernetes v1.34.4 on this machine, for the real-node tests and
 * `npm run demo:node`: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd +
 * runc, kubelet, kube-proxy (iptables mode), the Multus thin plugin over a bridge + host-local
 * primary network, macvlan on a parent named `ens4` with whereabouts IPAM, CoreDNS on the host as
 * the cluster DNS, and a local registry serving the images under their upstream names.
 * docs/node-harness.md records why each setting is what it is; node-config.ts renders the files.
 *
 * One node per machine: fixed ports (6443, 2379, 10250, 53, 5000), host iptables and sysctls. A
 * machine-wide flock (MULTUS_PROXY_REALNODE_LOCK, default /run/multus-proxy-realnode.lock) is held
 * by a detached reaper process for the node's whole life, so a second start waits for the first
 * node to be gone.
 *
 * Cleanup: stop() tears down in order (kubelet, `crictl rmp -fa` so CNI DEL runs, every process,
 * mounts, cgroups, iptables, links, sysctls, paths) and returns what it could not restore. A
 * process 'exit' hook does the same synchronously, and the reaper does it
 * (test/harness/node-reap.ts) when the test process is killed outright. Every component runs in
 * its own session, so a Ctrl-C reaches the reaper's teardown instead of killing containerd before
 * the pods are removed.
 *
 * Inputs, built by scripts/setup.sh (a missing one is an error, never a skip): the binaries in
 * binDir(), the CNI plugins in binDir()/../cni-bin, CRDs in ../manifests, image archives and
 * images.json in ../images; containerd, runc, buildah and docker-registry from Debian.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes, createHash } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { dump } from 'js-yaml';
import { binDir, issue, kubeconfigYaml, poll, rsaPair, tail } from './controlplane.js';
import {
  containerdConfig,
  corefile,
  hostsToml,
  kubeDnsObjects,
  kubeletConfig,
  kubeletFlags,
  kubeletResolvConf,
  kubeProxyConfig,
  layoutPaths,
  MIRRORED_HOSTS,
  multusConf,
  NODE,
  NODE1_ZONED_SPEC,
  NODE2,
  registryConfig,
  registryPath,
  WHEREABOUTS_FLAT_CONFIG,
  whereaboutsFlatConfig,
  type NodeLayout,
} from './node-config.js';
import { host, saveState, takeSnapshot, teardown, uplinks, type NodeState } from './node-host.js';
import { startSecondNode, type SecondNode } from './node2.js';
import { createKubeClient, type KubeClient } from '../../src/kube/client.js';
import type { KubeConnection } from '../../src/kube/config.js';
import { apiPath } from '../../src/kube/paths.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
export const LOCK_ENV = 'MULTUS_PROXY_REALNODE_LOCK';
const DEFAULT_LOCK = '/run/multus-proxy-realnode.lock';

export const KUBE_BINARIES = ['etcd', 'kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kubelet', 'kube-proxy', 'kubectl', 'kustomize', 'crictl', 'coredns'] as const;
export const CERT_MANAGER_BINARIES = ['cert-manager-controller', 'cert-manager-cainjector', 'cert-manager-webhook'] as const;
const CNI_PLUGINS = ['bridge', 'macvlan', 'host-local', 'loopback', 'multus', 'whereabouts'] as const;
const OS_COMMANDS = ['containerd', 'containerd-shim-runc-v2', 'runc', 'buildah', 'docker-registry', 'iptables', 'ip', 'flock'] as const;

export interface ExecOptions {
  input?: string;
  timeoutMs?: number;
  /** Resolve with the result instead of throwing on a non-zero exit. */
  allowFail?: boolean;
  /** kubectl only: act as this kubeconfig's user instead of the admin (see userKubeconfig). */
  kubeconfig?: string;
}

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RealNode {
  readonly dir: string;
  readonly server: string;
  readonly kubeconfigPath: string;
  readonly connection: KubeConnection;
  /** Admin client. */
  readonly client: KubeClient;
  readonly caPem: string;
  /** Bring-up time in ms (the control plane and the first node). */
  readonly startMs: number;
  /** The second node of startNode({ nodes: 2 }) (test/harness/node2.ts); undefined on one node. */
  readonly second?: SecondNode;
  /** `kubectl <args>` as admin; stdout, or throws with stderr. */
  kubectl(args: string[], opts?: ExecOptions): Promise<string>;
  kubectlResult(args: string[], opts?: ExecOptions): Promise<ExecResult>;
  /** `kubectl exec -n ns pod [-c container] -- cmd`. */
  exec(namespace: string, pod: string, cmd: string[], opts?: ExecOptions & { container?: string }): Promise<ExecResult>;
  crictl(args: string[], opts?: ExecOptions): Promise<string>;
  /** A shell command line as a user types it (kubectl, kustomize on PATH, admin KUBECONFIG, repository as cwd). */
  sh(command: string, opts?: ExecOptions): Promise<string>;
  /** `kubectl apply -f` of a file path or of YAML text. */
  apply(fileOrYaml: string, namespace?: string): Promise<string>;
  /** `kubectl wait --for=<condition> <what>`. */
  wait(what: string, condition: string, opts?: { namespace?: string; timeoutMs?: number }): Promise<void>;
  /** Starts a host process that teardown kills (cert-manager); its log is logs/<name>.log. */
  startProcess(name: string, bin: string, args: string[]): ChildProcess;
  logPath(name: string): string;
  /**
   * A kubeconfig (its path) for a user authenticated like any kubectl user: a client certificate
   * for `user` (and `groups`) signed by the cluster CA. Pass it as `kubeconfig` to kubectl().
   */
  userKubeconfig(user: string, groups?: string[]): string;
  /** Tears everything down; resolves with what was left behind (empty when clean). */
  stop(): Promise<string[]>;
}

function bin(name: string): string {
  return join(binDir(), name);
}

export function cniBinDir(): string {
  return resolve(binDir(), '..', 'cni-bin');
}
export function manifestsDir(): string {
  return resolve(binDir(), '..', 'manifests');
}
export function imagesDir(): string {
  return resolve(binDir(), '..', 'images');
}

function which(cmd: string): string | undefined {
  for (const d of (process.env['PATH'] ?? '').split(':').concat(['/usr/sbin', '/sbin', '/usr/bin'])) {
    const p = join(d, cmd);
    if (existsSync(p)) return p;
  }
  return undefined;
}

/** Everything the node needs, checked up front with one message naming every missing piece. */
export function checkPrerequisites(opts: { certManager?: boolean } = {}): void {
  const missing: string[] = [];
  for (const b of [...KUBE_BINARIES, ...(opts.certManager ? CERT_MANAGER_BINARIES : [])]) if (!existsSync(bin(b))) missing.push(bin(b));
  for (const p of CNI_PLUGINS) if (!existsSync(join(cniBinDir(), p))) missing.push(join(cniBinDir(), p));
  for (const m of ['nad-crd.yaml', 'whereabouts-crds.yaml']) if (!existsSync(join(manifestsDir(), m))) missing.push(join(manifestsDir(), m));
  if (!existsSync(join(imagesDir(), 'images.json'))) missing.push(join(imagesDir(), 'images.json'));
  for (const c of OS_COMMANDS) if (!which(c)) missing.push(`${c} (OS package)`);
  if (missing.length > 0) {
    throw new Error(`the real node cannot start; missing:\n  ${missing.join('\n  ')}\nrun scripts/setup.sh as root (it builds and caches them; MULTUS_PROXY_BIN_DIR selects another folder)`);
  }
  if (process.getuid?.() !== 0) throw new Error('the real node needs root (kubelet, containerd, iptables, interfaces)');
}

interface Pki {
  caPem: string;
  caKey: ReturnType<typeof rsaPair>;
  files: Record<'ca' | 'apiCert' | 'apiKey' | 'kubeletClientCert' | 'kubeletClientKey' | 'saKey' | 'saPub' | 'tokens', string>;
  adminCert: string;
  adminKey: string;
  nodeCert: string;
  nodeKey: string;
  adminToken: string;
}

type Signer = Parameters<typeof issue>[2];
const CA_SUBJECT = [{ name: 'commonName', value: 'multus-proxy-realnode-ca' }];

/** A client certificate: CN is the user, each O a group (how the apiserver reads x509 subjects). */
function clientCert(signer: Signer, cn: string, groups: string[]): { cert: string; key: string } {
  const k = rsaPair();
  const subject = [{ name: 'commonName', value: cn }, ...groups.map((value) => ({ name: 'organizationName', value }))];
  const cert = issue(subject, k.publicKey, signer, [
    { name: 'basicConstraints', cA: false },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
    { name: 'extKeyUsage', clientAuth: true },
  ]);
  return { cert, key: k.pem };
}

function makePki(dir: string): Pki {
  const ca = rsaPair();
  const caSubject = CA_SUBJECT;
  const caPem = issue(caSubject, ca.publicKey, { key: ca.forgeKey, subject: caSubject }, [
    { name: 'basicConstraints', cA: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, digitalSignature: true },
  ]);
  const signer = { key: ca.forgeKey, subject: caSubject };
  const client = (cn: string, org?: string): { cert: string; key: string } => clientCert(signer, cn, org ? [org] : []);
  const api = rsaPair();
  // Pods reach the apiserver as 10.96.0.1 and by name; the host as the node IP.
  const apiCert = issue([{ name: 'commonName', value: 'kube-apiserver' }], api.publicKey, signer, [
    { name: 'basicConstraints', cA: false },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true },
    { name: 'extKeyUsage', serverAuth: true },
    {
      name: 'subjectAltName',
      altNames: [
        ...['localhost', 'kubernetes', 'kubernetes.default', 'kubernetes.default.svc', `kubernetes.default.svc.${NODE.clusterDomain}`].map((value) => ({ type: 2, value })),
        ...['127.0.0.1', NODE.ip, NODE.apiServiceIp].map((ip) => ({ type: 7, ip })),
      ],
    },
  ]);
  const admin = client('realnode-admin', 'system:masters');
  // The Node authorizer knows a kubelet by this exact subject.
  const node = client(`system:node:${NODE.name}`, 'system:nodes');
  const kubeletClient = client('kube-apiserver-kubelet-client', 'system:masters');
  const sa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const adminToken = randomBytes(24).toString('hex');
  const f = (n: string): string => join(dir, 'pki', n);
  mkdirSync(join(dir, 'pki'), { recursive: true });
  const files = {
    ca: f('ca.crt'),
    apiCert: f('apiserver.crt'),
    apiKey: f('apiserver.key'),
    kubeletClientCert: f('kubelet-client.crt'),
    kubeletClientKey: f('kubelet-client.key'),
    saKey: f('sa.key'),
    saPub: f('sa.pub'),
    tokens: f('tokens.csv'),
  };
  writeFileSync(files.ca, caPem);
  writeFileSync(files.apiCert, apiCert);
  writeFileSync(files.apiKey, api.pem, { mode: 0o600 });
  writeFileSync(files.kubeletClientCert, kubeletClient.cert);
  writeFileSync(files.kubeletClientKey, kubeletClient.key, { mode: 0o600 });
  writeFileSync(files.saKey, sa.privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  writeFileSync(files.saPub, sa.publicKey.export({ type: 'spki', format: 'pem' }));
  writeFileSync(files.tokens, `${adminToken},realnode-admin,realnode-admin-uid,"system:masters"\n`, { mode: 0o600 });
  return { caPem, caKey: ca, files, adminCert: admin.cert, adminKey: admin.key, nodeCert: node.cert, nodeKey: node.key, adminToken };
}

function readyz(server: string, caPem: string, token: string): Promise<boolean> {
  return new Promise((resolveP) => {
    const req = https.get(`${server}/readyz`, { ca: caPem, headers: { Authorization: `Bearer ${token}` }, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolveP(res.statusCode === 200));
    });
    req.setTimeout(3_000, () => req.destroy());
    req.on('error', () => resolveP(false));
  });
}

async function httpOk(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(3_000) });
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false;
  }
}

function execP(cmd: string, args: string[], opts: ExecOptions & { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<ExecResult> {
  return new Promise((resolveP, reject) => {
    const child = execFile(cmd, args, { encoding: 'utf8', timeout: opts.timeoutMs ?? 120_000, maxBuffer: 64 * 1024 * 1024, env: opts.env ?? process.env, cwd: opts.cwd }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
      const r = { code, stdout, stderr };
      if (code !== 0 && !opts.allowFail) reject(new Error(`${cmd.split('/').pop()} ${args.join(' ')} failed (${err?.message.split('\n')[0]}): ${stderr.trim() || stdout.trim()}`));
      else resolveP(r);
    });
    if (opts.input !== undefined) child.stdin?.end(opts.input);
    else child.stdin?.end();
  });
}

/** Takes the machine-wide lock by starting the reaper under flock; resolves once it holds it. */
function lockAndReap(dir: string, lockFile: string): Promise<ChildProcess> {
  const reap = join(import.meta.dirname, 'node-reap.ts');
  // The reaper holds the flock for as long as the node exists: it exits once stop() removed dir,
  // or, if this process died first, tears the node down itself.
  const script =
    `echo locked; while kill -0 ${process.pid} 2>/dev/null && [ -d '${dir}' ]; do sleep 1; done; ` +
    `[ -d '${dir}' ] || exit 0; exec '${process.execPath}' --import tsx '${reap}' '${dir}' >>'${dir}.reap.log' 2>&1`;
  const child = spawn('flock', ['-w', '1800', lockFile, 'sh', '-c', script], { detached: true, stdio: ['ignore', 'pipe', 'ignore'], cwd: ROOT });
  return new Promise((resolveP, reject) => {
    let out = '';
    const t = setTimeout(() => reject(new Error(`could not take ${lockFile} within 30 min: another real node is running on this machine`)), 1_800_000);
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      if (out.includes('locked')) {
        clearTimeout(t);
        child.stdout?.destroy();
        child.unref();
        resolveP(child);
      }
    });
    child.on('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`flock ${lockFile} exited (${code}) before taking the lock`));
    });
  });
}

/**
 * The registry's storage is cached beside the binaries: an image is pushed once per archive (a
 * stamp per image records the archive's size and time), so a rebuilt project image costs one push.
 */
export async function fillRegistry(storage: string, dir: string, log: (m: string) => void): Promise<void> {
  const list = JSON.parse(readFileSync(join(imagesDir(), 'images.json'), 'utf8')) as { file: string; name: string }[];
  const store = ['--root', join(dir, 'buildah', 'root'), '--runroot', join(dir, 'buildah', 'run'), '--storage-driver', 'vfs'];
  for (const img of list) {
    const file = img.file.startsWith('/') ? img.file : join(imagesDir(), img.file);
    const st = statSync(file);
    const stamp = `${img.name} ${st.size} ${st.mtimeMs}`;
    const stampFile = join(storage, `.stamp-${createHash('sha256').update(img.name).digest('hex').slice(0, 16)}`);
    if (existsSync(stampFile) && readFileSync(stampFile, 'utf8') === stamp) continue;
    const t = Date.now();
    const { path } = registryPath(img.name);
    const id = (await execP('buildah', [...store, 'pull', '--quiet', `docker-archive:${file}`], { timeoutMs: 600_000 })).stdout.trim().split('\n').pop() ?? '';
    await execP('buildah', [...store, 'push', '--quiet', '--tls-verify=false', id, `docker://${NODE.registry}/${path}`], { timeoutMs: 600_000 });
    await execP('buildah', [...store, 'rmi', '--force', id], { allowFail: true });
    writeFileSync(stampFile, stamp);
    log(`pushed ${img.name} into the local registry cache in ${Date.now() - t} ms (once per image build)`);
  }
  rmSync(join(dir, 'buildah'), { recursive: true, force: true });
}

export interface NodeOptions {
  log?: (m: string) => void;
  /** 2: a second real node joined to the same control plane (test/harness/node2.ts). Default 1. */
  nodes?: 1 | 2;
}

/** Starts the node. Call stop() when done; it resolves with anything left behind. */
export async function startNode(opts: NodeOptions = {}): Promise<RealNode> {
  const log = opts.log ?? ((): void => {});
  checkPrerequisites();
  const t0 = Date.now();
  const dir = mkdtempSync(join(tmpdir(), 'multus-proxy-node-'));
  const lockFile = process.env[LOCK_ENV] || DEFAULT_LOCK;
  await lockAndReap(dir, lockFile);
  const lockedAt = Date.now();
  log(`lock ${lockFile} held after ${lockedAt - t0} ms`);
  const p = layoutPaths(dir);
  const state: NodeState = { dir, links: [], pids: {}, containerdSocket: p.containerdSocket, crictl: bin('crictl') };
  for (const d of [p.logs, p.cniConfDir, p.kubeletRoot, dirname(p.containerdConfig)]) mkdirSync(d, { recursive: true });
  let stopped = false;
  const onExit = (): void => {
    if (!stopped) teardown(state);
  };
  process.on('exit', onExit);

  const children = new Map<string, ChildProcess>();
  const startProcess = (name: string, file: string, args: string[], env?: NodeJS.ProcessEnv): ChildProcess => {
    const fd = openSync(join(p.logs, `${name}.log`), 'a');
    // Own session: a Ctrl-C on the test reaches the reaper's orderly teardown, not these.
    const child = spawn(file, args, { stdio: ['ignore', fd, fd], detached: true, env: env ?? process.env });
    closeSync(fd);
    child.unref();
    if (child.pid !== undefined) state.pids[String(child.pid)] = name;
    saveState(state);
    children.set(name, child);
    return child;
  };
  const exited = (name: string) => (): string | undefined => {
    const c = children.get(name);
    return c && (c.exitCode !== null || c.signalCode !== null) ? `${name} exited (${c.exitCode ?? c.signalCode}); last lines of its log:\n${tail(join(p.logs, `${name}.log`))}` : undefined;
  };
  const step = async (what: string, f: () => Promise<void>): Promise<void> => {
    const s = Date.now();
    await f();
    log(`${what}: ${Date.now() - s} ms`);
  };

  const stop = async (): Promise<string[]> => {
    if (stopped) return [];
    stopped = true;
    process.off('exit', onExit);
    const s = Date.now();
    const left = teardown(state, log);
    log(`teardown: ${Date.now() - s} ms${left.length ? `, left behind: ${left.join('; ')}` : ''}`);
    rmSync(`${dir}.reap.log`, { force: true });
    return left;
  };

  try {
    const pki = makePki(dir);
    const server = `https://${NODE.ip}:${NODE.apiPort}`;
    const adminKubeconfig = join(dir, 'admin.kubeconfig');
    writeFileSync(
      adminKubeconfig,
      kubeconfigYaml(server, pki.caPem, { 'client-certificate-data': Buffer.from(pki.adminCert).toString('base64'), 'client-key-data': Buffer.from(pki.adminKey).toString('base64') }),
      { mode: 0o600 },
    );
    const kubeletKubeconfig = join(dir, 'kubelet.kubeconfig');
    writeFileSync(
      kubeletKubeconfig,
      kubeconfigYaml(server, pki.caPem, { 'client-certificate-data': Buffer.from(pki.nodeCert).toString('base64'), 'client-key-data': Buffer.from(pki.nodeKey).toString('base64') }),
      { mode: 0o600 },
    );
    const layout: NodeLayout = { dir, cniBin: cniBinDir(), kubeconfig: adminKubeconfig, ca: pki.files.ca, ...(opts.nodes === 2 ? { node: NODE1_ZONED_SPEC } : {}) };

    // --- host: saved first, then changed -------------------------------------------------------
    await step('host network', async () => {
      for (const l of [NODE.bridge]) {
        if (existsSync(`/sys/class/net/${l}`)) throw new Error(`interface ${l} already exists: a real node is running or a crashed one left it (ip link del ${l})`);
      }
      state.snapshot = takeSnapshot([WHEREABOUTS_FLAT_CONFIG]);
      saveState(state);
      host('ip', ['link', 'add', NODE.bridge, 'type', 'bridge']);
      state.links.push(NODE.bridge);
      saveState(state);
      host('ip', ['addr', 'add', `${NODE.ip}/24`, 'dev', NODE.bridge]);
      host('ip', ['link', 'set', NODE.bridge, 'up']);
      if (!existsSync(`/sys/class/net/${NODE.parent}`)) {
        host('ip', ['link', 'add', NODE.parent, 'type', 'veth', 'peer', 'name', NODE.parentPeer]);
        state.links.push(NODE.parent, NODE.parentPeer);
        saveState(state);
        host('ip', ['link', 'set', NODE.parentPeer, 'up']);
        host('ip', ['link', 'set', NODE.parent, 'up']);
      }
      // Service addresses never follow the default route off the machine.
      for (const cidr of NODE.serviceCidrs) host('ip', [cidr.includes(':') ? '-6' : '-4', 'route', 'add', cidr, 'dev', NODE.bridge]);
      // kube-proxy puts ACCEPT rules at the head of filter FORWARD; mangle runs before it.
      for (const up of uplinks()) {
        host('iptables', ['-t', 'mangle', '-A', 'FORWARD', '-i', NODE.bridge, '-o', up, '-j', 'DROP']);
        host('iptables', ['-t', 'mangle', '-A', 'FORWARD', '-s', NODE.podCidr, '-o', up, '-j', 'DROP']);
        // IPv6 forwarding is on (below): nothing on this node forwards IPv6 to the uplink.
        host('ip6tables', ['-t', 'mangle', '-A', 'FORWARD', '-o', up, '-j', 'DROP']);
      }
      writeFileSync('/proc/sys/net/ipv4/ip_forward', '1');
      // A dual-stack node forwards IPv6 too (kubeadm requires it): the node agent's IPv6 node ports
      // and ingress IPs DNAT to pods behind another interface. Restored at teardown (SYSCTLS).
      writeFileSync('/proc/sys/net/ipv6/conf/all/forwarding', '1');
    });

    // --- control plane ---------------------------------------------------------------------------
    await step('etcd', async () => {
      startProcess('etcd', bin('etcd'), [
        '--name=realnode',
        `--data-dir=${join(dir, 'etcd')}`,
        `--listen-client-urls=http://127.0.0.1:${NODE.etcdPort}`,
        `--advertise-client-urls=http://127.0.0.1:${NODE.etcdPort}`,
        `--listen-peer-urls=http://127.0.0.1:${NODE.etcdPeerPort}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${NODE.etcdPeerPort}`,
        `--initial-cluster=realnode=http://127.0.0.1:${NODE.etcdPeerPort}`,
        '--listen-metrics-urls=',
        '--unsafe-no-fsync=true',
        '--log-level=warn',
      ]);
      await poll('etcd', 30_000, () => httpOk(`http://127.0.0.1:${NODE.etcdPort}/health`), exited('etcd'));
    });
    await step('kube-apiserver', async () => {
      startProcess('kube-apiserver', bin('kube-apiserver'), [
        `--etcd-servers=http://127.0.0.1:${NODE.etcdPort}`,
        // Pods reach it as 10.96.0.1 through kube-proxy: bound to the node IP, endpoint reconciler on.
        `--bind-address=${NODE.ip}`,
        `--advertise-address=${NODE.ip}`,
        `--secure-port=${NODE.apiPort}`,
        `--cert-dir=${join(dir, 'pki', 'generated')}`,
        `--tls-cert-file=${pki.files.apiCert}`,
        `--tls-private-key-file=${pki.files.apiKey}`,
        `--client-ca-file=${pki.files.ca}`,
        `--token-auth-file=${pki.files.tokens}`,
        '--authorization-mode=Node,RBAC',
        // Two nodes: the Nodes' zone labels are copied onto pods at binding (PodTopologyLabels,
        // alpha in 1.34), where the sidecar's NODE_ZONE reads them (docs/decisions/0161-sidecar-node-and-zone.md).
        ...(opts.nodes === 2 ? ['--enable-admission-plugins=NodeRestriction,PodTopologyLabels', '--feature-gates=PodTopologyLabelsAdmission=true'] : ['--enable-admission-plugins=NodeRestriction']),
        '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
        `--service-account-key-file=${pki.files.saPub}`,
        `--service-account-signing-key-file=${pki.files.saKey}`,
        `--service-cluster-ip-range=${NODE.serviceCidrs.join(',')}`,
        '--allow-privileged=true',
        `--kubelet-client-certificate=${pki.files.kubeletClientCert}`,
        `--kubelet-client-key=${pki.files.kubeletClientKey}`,
        // Otherwise exec/logs dial the node's host name.
        '--kubelet-preferred-address-types=InternalIP',
        '--enable-priority-and-fairness=false',
        '--profiling=false',
      ]);
      await poll('kube-apiserver', 120_000, () => readyz(server, pki.caPem, pki.adminToken), exited('kube-apiserver'));
    });
    const connection: KubeConnection = { server, ca: Buffer.from(pki.caPem), token: pki.adminToken };
    const client = createKubeClient(connection);
    // KUBECACHEDIR: kubectl's discovery cache stays in the node's folder, not in ~/.kube.
    const kubectlEnv = { ...process.env, KUBECONFIG: adminKubeconfig, KUBECACHEDIR: join(dir, 'kubectl-cache') };
    const kubectlResult = (args: string[], o: ExecOptions = {}): Promise<ExecResult> =>
      execP(bin('kubectl'), args, { ...o, env: o.kubeconfig ? { ...kubectlEnv, KUBECONFIG: o.kubeconfig } : kubectlEnv });
    const kubectl = async (args: string[], o: ExecOptions = {}): Promise<string> => (await kubectlResult(args, o)).stdout;
    const apply = async (fileOrYaml: string, namespace?: string): Promise<string> => {
      const ns = namespace ? ['-n', namespace] : [];
      if (fileOrYaml.includes('\n')) return kubectl(['apply', ...ns, '-f', '-'], { input: fileOrYaml });
      return kubectl(['apply', ...ns, '-f', fileOrYaml]);
    };

    await step('controller-manager, scheduler, CRDs', async () => {
      startProcess('kube-controller-manager', bin('kube-controller-manager'), [
        `--kubeconfig=${adminKubeconfig}`,
        `--root-ca-file=${pki.files.ca}`,
        `--service-account-private-key-file=${pki.files.saKey}`,
        '--use-service-account-credentials=true',
        `--service-cluster-ip-range=${NODE.serviceCidrs.join(',')}`,
        '--leader-elect=false',
        '--bind-address=127.0.0.1',
        '--profiling=false',
        // Two nodes: a node cut off is NotReady after 25 s of no lease renewal (renewed every 10 s),
        // not the default 50 s that the node-loss test would wait out.
        ...(opts.nodes === 2 ? ['--node-monitor-grace-period=25s'] : []),
      ]);
      startProcess('kube-scheduler', bin('kube-scheduler'), [`--kubeconfig=${adminKubeconfig}`, '--leader-elect=false', '--bind-address=127.0.0.1', '--profiling=false']);
      await apply(join(manifestsDir(), 'nad-crd.yaml'));
      await apply(join(manifestsDir(), 'whereabouts-crds.yaml'));
      await apply(
        `${kubeDnsObjects()
          .map((o) => dump(o))
          .join('---\n')}\n`,
      );
    });

    await step('registry', async () => {
      const storage = resolve(binDir(), '..', 'registry');
      mkdirSync(storage, { recursive: true });
      writeFileSync(p.registryConfig, registryConfig(storage));
      startProcess('registry', which('docker-registry') ?? 'docker-registry', ['serve', p.registryConfig]);
      await poll('docker-registry', 30_000, () => httpOk(`http://${NODE.registry}/v2/`), exited('registry'));
      await fillRegistry(storage, dir, log);
    });

    await step('containerd', async () => {
      writeFileSync(p.containerdConfig, containerdConfig(layout));
      for (const h of MIRRORED_HOSTS) {
        mkdirSync(join(p.certsD, h), { recursive: true });
        writeFileSync(join(p.certsD, h, 'hosts.toml'), hostsToml());
      }
      // containerd 1.6 wedges when CNI config files change while it runs: written before it starts.
      writeFileSync(join(p.cniConfDir, '00-multus.conf'), multusConf(layout));
      mkdirSync(dirname(WHEREABOUTS_FLAT_CONFIG), { recursive: true });
      writeFileSync(WHEREABOUTS_FLAT_CONFIG, whereaboutsFlatConfig(layout));
      const env = { ...process.env, PATH: `${process.env['PATH'] ?? ''}:/usr/sbin:/sbin` };
      startProcess('containerd', which('containerd') ?? 'containerd', ['--config', p.containerdConfig, '--log-level', 'warn'], env);
      await poll('containerd socket', 30_000, async () => existsSync(p.containerdSocket), exited('containerd'));
    });

    await step('kubelet', async () => {
      writeFileSync(p.kubeletConfig, kubeletConfig(layout));
      writeFileSync(p.resolvConf, kubeletResolvConf());
      startProcess('kubelet', bin('kubelet'), kubeletFlags(layout, kubeletKubeconfig));
      await poll(
        'Node registered',
        60_000,
        async () => {
          await client.get(apiPath('', 'v1', 'nodes', undefined, NODE.name));
          return true;
        },
        exited('kubelet'),
      );
    });

    await step('kube-proxy', async () => {
      // Its /healthz answers 503 until the Node exists, so it starts after the kubelet registered.
      writeFileSync(p.kubeProxyConfig, kubeProxyConfig(layout));
      startProcess('kube-proxy', bin('kube-proxy'), [`--config=${p.kubeProxyConfig}`, '--v=1']);
      await poll('kube-proxy healthz', 60_000, () => httpOk('http://127.0.0.1:10256/healthz'), exited('kube-proxy'));
    });

    await step('CoreDNS', async () => {
      writeFileSync(p.corefile, corefile(layout));
      startProcess('coredns', bin('coredns'), ['-conf', p.corefile]);
      const r = new Resolver({ timeout: 1_000, tries: 1 });
      r.setServers([NODE.ip]);
      await poll('CoreDNS', 60_000, async () => (await r.resolve4(`kubernetes.default.svc.${NODE.clusterDomain}`)).includes(NODE.apiServiceIp), exited('coredns'));
    });

    await step('Node Ready, default ServiceAccount', async () => {
      await poll(
        'Node Ready',
        120_000,
        async () => {
          const n = await client.get<{ status?: { conditions?: { type: string; status: string }[] } }>(apiPath('', 'v1', 'nodes', undefined, NODE.name));
          return n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
        },
        exited('kubelet'),
      );
      await poll(
        'default ServiceAccount and kube-root-ca.crt',
        60_000,
        async () => {
          await client.get(apiPath('', 'v1', 'serviceaccounts', 'default', 'default'));
          await client.get(apiPath('', 'v1', 'configmaps', 'default', 'kube-root-ca.crt'));
          return true;
        },
        exited('kube-controller-manager'),
      );
    });
    const startMs = Date.now() - t0;
    log(`node up in ${startMs} ms (${Date.now() - lockedAt} ms after taking the lock)`);

    let second: SecondNode | undefined;
    if (opts.nodes === 2) {
      const node2 = clientCert({ key: pki.caKey.forgeKey, subject: CA_SUBJECT }, `system:node:${NODE2.name}`, ['system:nodes']);
      const kubelet2Kubeconfig = join(dir, 'kubelet2.kubeconfig');
      writeFileSync(
        kubelet2Kubeconfig,
        kubeconfigYaml(server, pki.caPem, { 'client-certificate-data': Buffer.from(node2.cert).toString('base64'), 'client-key-data': Buffer.from(node2.key).toString('base64') }),
        { mode: 0o600 },
      );
      const nodeConditionReady = async (name: string): Promise<boolean> => {
        const n = await client.get<{ status?: { conditions?: { type: string; status: string }[] } }>(apiPath('', 'v1', 'nodes', undefined, name));
        return n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
      };
      second = await startSecondNode({
        dir,
        state,
        cniBin: cniBinDir(),
        kubeconfig: adminKubeconfig,
        ca: pki.files.ca,
        kubeletKubeconfig: kubelet2Kubeconfig,
        bin,
        startProcess,
        exited,
        step,
        poll,
        nodeRegistered: async (name) => {
          await client.get(apiPath('', 'v1', 'nodes', undefined, name));
          return true;
        },
        nodeReady: nodeConditionReady,
        httpOk,
        exec: async (cmd, args, input) => (await execP(cmd, args, { input })).stdout,
      });
      log(`${NODE2.name} up in ${second.startMs} ms (all: ${Date.now() - t0} ms)`);
    }

    const crictlArgs = ['--runtime-endpoint', `unix://${p.containerdSocket}`, '--image-endpoint', `unix://${p.containerdSocket}`];
    return {
      dir,
      server,
      kubeconfigPath: adminKubeconfig,
      connection,
      client,
      caPem: pki.caPem,
      startMs,
      second,
      kubectl,
      kubectlResult,
      exec: (namespace, pod, cmd, o = {}) =>
        kubectlResult(['exec', '-n', namespace, pod, ...(o.container ? ['-c', o.container] : []), ...(o.input !== undefined ? ['-i'] : []), '--', ...cmd], { allowFail: true, ...o }),
      sh: async (command, o = {}) => (await execP('sh', ['-c', command], { ...o, cwd: ROOT, env: { ...kubectlEnv, PATH: `${binDir()}:${process.env['PATH'] ?? ''}` } })).stdout,
      crictl: async (args, o = {}) => (await execP(bin('crictl'), [...crictlArgs, ...args], o)).stdout,
      apply,
      async wait(what, condition, o = {}) {
        const deadline = Date.now() + (o.timeoutMs ?? 120_000);
        for (;;) {
          const left = Math.max(1, Math.ceil((deadline - Date.now()) / 1000));
          const r = await kubectlResult(['wait', ...(o.namespace ? ['-n', o.namespace] : []), `--for=${condition}`, what, `--timeout=${left}s`], { timeoutMs: left * 1000 + 10_000, allowFail: true });
          if (r.code === 0) return;
          // kubectl wait fails at once on an object without status.conditions yet (a CRD just
          // created: "accessor error: <nil>") or not created yet: both only mean "not yet".
          if (Date.now() < deadline && /accessor error|NotFound|not found/.test(r.stderr)) {
            await new Promise((res) => setTimeout(res, 500));
            continue;
          }
          throw new Error(`kubectl wait --for=${condition} ${what}${o.namespace ? ` -n ${o.namespace}` : ''} failed: ${r.stderr.trim() || r.stdout.trim()}`);
        }
      },
      startProcess: (name, file, args) => startProcess(name, file, args),
      logPath: (name) => join(p.logs, `${name}.log`),
      userKubeconfig(user, groups = []) {
        const c = clientCert({ key: pki.caKey.forgeKey, subject: CA_SUBJECT }, user, groups);
        const path = join(dir, `user-${user.replace(/[^a-z0-9-]/gi, '_')}.kubeconfig`);
        const creds = { 'client-certificate-data': Buffer.from(c.cert).toString('base64'), 'client-key-data': Buffer.from(c.key).toString('base64') };
        writeFileSync(path, kubeconfigYaml(server, pki.caPem, creds), { mode: 0o600 });
        return path;
      },
      stop,
    };
  } catch (e) {
    const logs = [...children.keys()].map((n) => `--- ${n}:\n${tail(join(p.logs, `${n}.log`), 15)}`).join('\n');
    const left = await stop();
    throw new Error(`real node failed to start: ${(e as Error).message}\n${logs}${left.length ? `\nleft behind: ${left.join('; ')}` : ''}`, { cause: e });
  }
}
