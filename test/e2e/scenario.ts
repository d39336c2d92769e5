/**
 * The classic multus-service demo, end to end, on one machine with no cluster:
 * NAD `macvlan1`, Service `multus-nginx-macvlan` (port 80), backends serving
 * "This is multus-nginx-macvlan!" on their secondary interface, and a client pod that asks for
 * the network in an injection-enabled namespace.
 *
 * Real parts: etcd + kube-apiserver (test/harness), the webhook registered through the project's
 * own webhook configuration (deploy/base), the controller, and the sidecar the webhook injected,
 * run with the environment from the stored pod inside the client's network namespace with only
 * NET_ADMIN and NET_RAW. This module plays kubelet and Multus: it builds each pod's network
 * namespace, writes its network-status annotation and its Ready condition.
 *
 * `scripts/demo.ts` prints the observations; `test/e2e/demo.test.ts` asserts them. Both run this
 * one module, so the demo cannot drift from what is tested.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { loadAll } from 'js-yaml';
import { binDir, startControlPlane, freePort, type ControlPlane } from '../harness/controlplane.js';
import { createTopology, type Pod as NetPod, type Topology } from '../harness/netns.js';
import { startApiserverRelay, type ApiserverRelay } from '../harness/apiserver-relay.js';
import { apiPath } from '../../src/kube/paths.js';
import { formatDownwardMap } from '../../src/annotations/downward-api.js';
import { NFT_FAMILY, NFT_TABLE } from '../../src/dataplane/nftables/render.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { V1Container, V1Pod, V1Service, V1EndpointSlice, KubeObject } from '../../src/kube/types.js';
import { INJECTION_ENABLED, INJECTION_LABEL, NETWORKS_ANNOTATION, NETWORK_STATUS_ANNOTATION, PROXY_NAME_LABEL, SERVICE_NETWORK_ANNOTATION, SIDECAR_CONTAINER_NAME } from '../../src/keys.js';

const ROOT = resolve(import.meta.dirname, '..', '..');
export const NAMESPACE = 'default';
export const NAD = 'macvlan1';
export const SERVICE = 'multus-nginx-macvlan';
export const GREETING = 'This is multus-nginx-macvlan!';
const APP_LABEL = { app: SERVICE };

/** How the scenario talks to whoever runs it. */
export interface Reporter {
  step(title: string): void;
  info(text: string): void;
}

/** One curl from the client pod. */
export interface Answer {
  /** The backend pod that answered, or undefined when the request failed. */
  readonly backend?: string;
  /** The client address the backend saw. */
  readonly seenSource?: string;
  readonly body?: string;
  readonly error?: string;
}

export interface Observations {
  readonly serviceLabel: string | undefined;
  readonly clusterIP: string;
  readonly sidecar: { readonly native: boolean; readonly capabilities: readonly string[]; readonly privileged: boolean };
  readonly clientNet1: string;
  readonly backendNet1: Readonly<Record<string, string>>;
  readonly initial: readonly Answer[];
  readonly scaled: readonly Answer[];
  readonly afterUnready: readonly Answer[];
  readonly unreadyBackend: string;
  readonly sliceAddresses: readonly string[];
  /** The sidecar's rules: `nft list table` of its table, or its iptables-save nat lines. */
  readonly natRules: readonly string[];
  /** The apiserver's answer to a pod whose service-network names a network it does not attach. */
  readonly denial: string;
}

interface Program {
  readonly name: string;
  readonly child: ChildProcess;
  readonly logFile: string;
}

/** Everything the scenario started, so cleanup can undo it in reverse. */
class Resources {
  readonly dir = mkdtempSync(join(tmpdir(), 'multus-proxy-demo-'));
  readonly programs: Program[] = [];
  cp: ControlPlane | undefined;
  topo: Topology | undefined;
  relay: ApiserverRelay | undefined;

  async cleanup(): Promise<void> {
    // The sidecar first, with SIGTERM, as the kubelet stops it; its rules go with the namespace.
    for (const p of [...this.programs].reverse()) await stopProgram(p);
    await this.relay?.close();
    await this.topo?.teardown();
    await this.cp?.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function stopProgram(p: Program): Promise<void> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return;
  const exited = new Promise<void>((r) => p.child.once('exit', () => r()));
  p.child.kill('SIGTERM');
  const timer = setTimeout(() => p.child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

function tail(file: string, lines = 15): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/** Starts one of our programs with tsx, logging to a file; `wrap` prefixes the command (ip netns exec, setpriv). */
function startProgram(res: Resources, name: string, entry: string, args: string[], env: NodeJS.ProcessEnv, wrap: string[] = []): Program {
  const logFile = join(res.dir, `${name}.log`);
  const out = createWriteStream(logFile);
  const argv = [...wrap, process.execPath, '--import', 'tsx', join(ROOT, entry), ...args];
  const [cmd, ...rest] = argv;
  const child = spawn(cmd ?? process.execPath, rest, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.pipe(out);
  child.stderr?.pipe(out);
  const p = { name, child, logFile };
  res.programs.push(p);
  return p;
}

/** Polls a health URL until 200; fails early (with the program's log) if the program exits. */
async function waitReady(p: Program, url: string, opts: { ca?: string; timeoutMs?: number } = {}): Promise<void> {
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  for (;;) {
    if (p.child.exitCode !== null) throw new Error(`${p.name} exited with code ${p.child.exitCode}; its log:\n${tail(p.logFile)}`);
    const status = await new Promise<number>((done) => {
      const mod = url.startsWith('https') ? https : http;
      const req = mod.get(url, { timeout: 2000, ...(opts.ca !== undefined ? { ca: opts.ca } : {}) }, (r) => {
        r.resume();
        done(r.statusCode ?? 0);
      });
      req.on('error', () => done(0));
      req.on('timeout', () => req.destroy());
    });
    if (status === 200) return;
    if (Date.now() > deadline) throw new Error(`${p.name} not ready at ${url} after ${opts.timeoutMs ?? 60_000} ms; its log:\n${tail(p.logFile)}`);
    await sleep(200);
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function eventually<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last instanceof Error ? `: ${last.message}` : ''}`);
    await sleep(200);
  }
}

/** The webhook configurations exactly as deploy/base ships them, pointed at the local webhook. */
function webhookConfigurations(url: string, caPem: string): KubeObject[] {
  const docs = loadAll(readFileSync(join(ROOT, 'deploy/base/webhook-configurations.yaml'), 'utf8')) as KubeObject[];
  const caBundle = Buffer.from(caPem).toString('base64');
  return docs.map((doc) => {
    const d = doc as KubeObject & { webhooks?: { clientConfig: { service?: { path?: string }; url?: string; caBundle?: string } }[] };
    for (const w of d.webhooks ?? []) {
      const path = w.clientConfig.service?.path ?? '/';
      w.clientConfig = { url: `${url}${path}`, caBundle };
    }
    return d;
  });
}

/** The network-status Multus would write for a pod with eth0 on the default network and net1 on macvlan1. */
function networkStatus(pod: NetPod): string {
  return JSON.stringify([
    { name: 'kindnet', interface: 'eth0', ips: [pod.eth0.ipv4], default: true },
    { name: `${NAMESPACE}/${NAD}`, interface: 'net1', ips: [pod.net1.ipv4], mac: '02:00:00:00:00:01' },
  ]);
}

/** Backend HTTP server: nginx's part in the classic demo, bound to net1 only. */
const BACKEND_JS = `
const http = require('node:http');
const [name, addr, greeting] = process.argv.slice(1);
http.createServer((req, res) => {
  res.setHeader('x-backend', name); res.setHeader('x-client', req.socket.remoteAddress); res.setHeader('connection', 'close');
  res.end(greeting + '\\n');
}).listen(80, addr, () => console.log('ready'));
`;

class Scenario {
  private readonly res = new Resources();
  private client!: KubeClient;
  private topo!: Topology;
  private readonly backends = new Map<string, NetPod>();

  constructor(private readonly report: Reporter) {}

  cleanup(): Promise<void> {
    return this.res.cleanup();
  }

  async run(): Promise<Observations> {
    const r = this.report;
    r.step('Starting a real etcd and kube-apiserver on 127.0.0.1');
    this.res.cp = await startControlPlane();
    const cp = this.res.cp;
    this.client = cp.client;
    r.info(`apiserver ${cp.server}`);

    r.step("Creating the webhook certificate with the project's certs CLI and starting the webhook");
    const certDir = join(this.res.dir, 'tls');
    await this.runCli('certs', 'cmd/certs/cli.ts', ['generate', '--out', certDir, '--ca-dir', join(this.res.dir, 'ca'), '--ip', '127.0.0.1', '--dns', 'localhost']);
    const caPem = readFileSync(join(certDir, 'ca.crt'), 'utf8');
    const webhookPort = await freePort();
    const webhook = startProgram(
      this.res,
      'webhook',
      'cmd/webhook/main.ts',
      [
        '--host',
        '127.0.0.1',
        '--port',
        String(webhookPort),
        '--tls-cert-file',
        join(certDir, 'tls.crt'),
        '--tls-key-file',
        join(certDir, 'tls.key'),
        '--kubeconfig',
        cp.kubeconfigPath,
        '--sidecar-image',
        'multus-proxy:demo',
      ],
      { ...process.env, LOG_LEVEL: 'info' },
    );
    const webhookUrl = `https://127.0.0.1:${webhookPort}`;
    await waitReady(webhook, `${webhookUrl}/readyz`, { ca: caPem });
    for (const cfg of webhookConfigurations(webhookUrl, caPem)) {
      const kind = cfg.kind === 'MutatingWebhookConfiguration' ? 'mutatingwebhookconfigurations' : 'validatingwebhookconfigurations';
      await this.client.create(apiPath('admissionregistration.k8s.io', 'v1', kind), cfg);
      r.info(`registered ${cfg.kind} ${cfg.metadata?.name ?? ''} -> ${webhookUrl}`);
    }

    r.step('Starting the controller');
    const healthPort = await freePort();
    const controller = startProgram(
      this.res,
      'controller',
      'cmd/controller/main.ts',
      ['--kubeconfig', cp.kubeconfigPath, '--leader-elect', 'false', '--health-port', String(healthPort), '--health-host', '127.0.0.1'],
      { ...process.env, LOG_LEVEL: 'info' },
    );
    await waitReady(controller, `http://127.0.0.1:${healthPort}/readyz`);

    r.step(`Enabling namespace ${NAMESPACE}, creating NetworkAttachmentDefinition ${NAD} and Service ${SERVICE}`);
    await cp.createNamespace(NAMESPACE);
    await this.client.patch(apiPath('', 'v1', 'namespaces', undefined, NAMESPACE), { metadata: { labels: { [INJECTION_LABEL]: INJECTION_ENABLED } } }, 'merge');
    await this.client.create(apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', NAMESPACE), {
      apiVersion: 'k8s.cni.cncf.io/v1',
      kind: 'NetworkAttachmentDefinition',
      metadata: { name: NAD, namespace: NAMESPACE },
      spec: { config: JSON.stringify({ cniVersion: '0.3.1', type: 'macvlan', master: 'eth1', mode: 'bridge', ipam: { type: 'host-local', subnet: '192.168.101.0/24' } }) },
    });
    const svc = await this.client.create<V1Service>(apiPath('', 'v1', 'services', NAMESPACE), {
      apiVersion: 'v1',
      kind: 'Service',
      // Only the annotation: the webhook adds the proxy-name label.
      metadata: { name: SERVICE, namespace: NAMESPACE, annotations: { [SERVICE_NETWORK_ANNOTATION]: NAD } },
      spec: { selector: APP_LABEL, ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 80 }] },
    });
    const clusterIP = svc.spec?.clusterIP ?? '';
    const serviceLabel = svc.metadata?.labels?.[PROXY_NAME_LABEL];
    r.info(`Service ${SERVICE}: clusterIP ${clusterIP}, label ${PROXY_NAME_LABEL}=${serviceLabel ?? '(missing)'} (added by the webhook)`);

    this.topo = await createTopology();
    this.res.topo = this.topo;

    r.step('Starting two backend pods (this script plays kubelet and Multus for them)');
    for (const name of ['backend1', 'backend2']) await this.addBackend(name);
    await this.waitForSliceAddresses([...this.backends.values()].map((p) => p.net1.ipv4));

    r.step('Creating the client pod; the webhook injects the multus-proxy sidecar');
    const stored = await this.client.create<V1Pod>(apiPath('', 'v1', 'pods', NAMESPACE), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { generateName: 'multus-client-', namespace: NAMESPACE, annotations: { [NETWORKS_ANNOTATION]: NAD, [SERVICE_NETWORK_ANNOTATION]: NAD } },
      spec: { containers: [{ name: 'client', image: 'curlimages/curl', command: ['sleep', 'infinity'] }] },
    });
    const podName = stored.metadata?.name ?? '';
    const native = (stored.spec?.initContainers ?? []).find((c) => c.name === SIDECAR_CONTAINER_NAME);
    const sidecarContainer = native ?? (stored.spec?.containers ?? []).find((c) => c.name === SIDECAR_CONTAINER_NAME);
    if (sidecarContainer === undefined) throw new Error(`pod ${NAMESPACE}/${podName} was stored without the ${SIDECAR_CONTAINER_NAME} container: the webhook did not inject it`);
    const capabilities = sidecarContainer.securityContext?.capabilities?.add ?? [];
    r.info(
      `pod ${podName}: ${SIDECAR_CONTAINER_NAME} injected as ${native !== undefined ? 'a native sidecar (init container, restartPolicy Always)' : 'a regular container'}, capabilities ${capabilities.join('+')}`,
    );
    const clientNs = await this.topo.addPod('client');
    await this.becomeRunning(podName, clientNs);

    r.step("Running the injected sidecar inside the client pod's network namespace (NET_ADMIN and NET_RAW only)");
    this.res.relay = await startApiserverRelay(this.topo, cp.server, this.res.dir);
    await this.res.relay.attach(clientNs);
    const env = this.containerEnv(sidecarContainer, stored);
    // The kubelet's part: the injected downwardAPI volume (metadata.annotations and metadata.labels)
    // the sidecar reads its networks and labels from. Here the file is written where this script keeps its state, and the
    // container's env points there instead of at the volume's mount path.
    const running = await this.client.get<V1Pod>(apiPath('', 'v1', 'pods', NAMESPACE, podName));
    const podInfo = join(this.res.dir, 'podinfo');
    mkdirSync(podInfo, { recursive: true });
    writeFileSync(join(podInfo, 'annotations'), formatDownwardMap(running.metadata?.annotations ?? {}));
    writeFileSync(join(podInfo, 'labels'), formatDownwardMap(running.metadata?.labels ?? {}));
    if (env['POD_ANNOTATIONS_FILE'] !== undefined) env['POD_ANNOTATIONS_FILE'] = join(podInfo, 'annotations');
    if (env['POD_LABELS_FILE'] !== undefined) env['POD_LABELS_FILE'] = join(podInfo, 'labels');
    const sidecarPort = Number(env['HEALTH_PORT'] ?? '9180');
    // The element writer as scripts/build-native.sh builds it (the image has it at the sidecar's default path).
    const nfnlBatch = join(binDir(), 'nfnl-batch');
    const writer = existsSync(nfnlBatch) ? { ELEMENT_WRITER: nfnlBatch } : {};
    const sidecar = startProgram(this.res, 'sidecar', 'cmd/sidecar/main.ts', [], { ...env, ...writer, PATH: process.env['PATH'], KUBECONFIG: cp.kubeconfigPath }, [
      'ip',
      'netns',
      'exec',
      clientNs.ns,
      'setpriv',
      '--inh-caps=-all,+net_admin,+net_raw',
      '--ambient-caps=-all,+net_admin,+net_raw',
      '--bounding-set=-all,+net_admin,+net_raw',
      '--',
    ]);
    await this.waitReadyInNetns(sidecar, clientNs, sidecarPort);
    r.info(`sidecar ready (first sync done); env from the stored pod: POD_NAME=${env['POD_NAME'] ?? ''} POD_NAMESPACE=${env['POD_NAMESPACE'] ?? ''}`);

    // Whichever back end the sidecar chose at start (nftables where it loads): its table, or its
    // iptables nat chains.
    const table = await this.topo.run(clientNs, ['nft', 'list', 'table', NFT_FAMILY, NFT_TABLE], { allowFail: true });
    const nat = table.code === 0 ? undefined : await this.topo.run(clientNs, ['iptables-save', '-t', 'nat']);
    const ours = nat === undefined ? table.stdout.split('\n').filter((l) => l.trim() !== '') : nat.stdout.split('\n').filter((l) => l.includes('MPX-'));
    r.info(nat === undefined ? `the sidecar's rules in the client pod (nft list table ${NFT_FAMILY} ${NFT_TABLE}):` : `the sidecar's nat rules in the client pod (iptables-save -t nat | grep MPX-):`);
    for (const l of ours) r.info(`  ${l}`);

    r.step('A client pod asking for a network it does not attach is denied');
    const denial = await this.client
      .create<V1Pod>(apiPath('', 'v1', 'pods', NAMESPACE), {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'bad-client', namespace: NAMESPACE, annotations: { [NETWORKS_ANNOTATION]: NAD, [SERVICE_NETWORK_ANNOTATION]: `${NAD},macvlan2` } },
        spec: { containers: [{ name: 'client', image: 'curlimages/curl' }] },
      })
      .then(
        () => undefined,
        (e: unknown) => (e instanceof Error ? e.message : String(e)),
      );
    if (denial === undefined) throw new Error('a pod with an unattached service-network was admitted; the webhook must deny it');
    r.info(denial);

    r.step(`curl http://${clusterIP}/ from the client pod, 20 times`);
    const initial = await this.curlRound(clientNs, clusterIP, 20);

    r.step('Scaling to three backends');
    await this.addBackend('backend3');
    await this.eventuallyAnswers(clientNs, clusterIP, (as) => as.some((a) => a.backend === 'backend3'), 'backend3 to answer');
    const scaled = await this.curlRound(clientNs, clusterIP, 20);

    const unreadyBackend = 'backend1';
    r.step(`Marking ${unreadyBackend} unready`);
    await this.setReady(unreadyBackend, false);
    await this.eventuallyAnswers(clientNs, clusterIP, (as) => as.every((a) => a.backend !== unreadyBackend && a.backend !== undefined), `${unreadyBackend} to leave`);
    const afterUnready = await this.curlRound(clientNs, clusterIP, 20);

    const sliceAddresses = await this.sliceAddresses();
    return {
      serviceLabel,
      clusterIP,
      sidecar: { native: native !== undefined, capabilities, privileged: sidecarContainer.securityContext?.privileged === true },
      clientNet1: clientNs.net1.ipv4,
      backendNet1: Object.fromEntries([...this.backends].map(([n, p]) => [n, p.net1.ipv4])),
      initial,
      scaled,
      afterUnready,
      unreadyBackend,
      sliceAddresses,
      natRules: ours,
      denial,
    };
  }

  private async runCli(name: string, entry: string, args: string[]): Promise<void> {
    const p = startProgram(this.res, name, entry, args, process.env);
    const code = await new Promise<number | null>((r) => p.child.once('exit', (c) => r(c)));
    if (code !== 0) throw new Error(`${name} ${args.join(' ')} failed (exit ${String(code)}):\n${tail(p.logFile)}`);
  }

  /** Resolves the container's env as kubelet would: literal values and the downward API fields we use. */
  private containerEnv(c: V1Container, pod: V1Pod): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {};
    for (const e of c.env ?? []) {
      if (e.value !== undefined) env[e.name] = e.value;
      const field = e.valueFrom?.fieldRef?.fieldPath;
      if (field === 'metadata.name') env[e.name] = pod.metadata?.name;
      else if (field === 'metadata.namespace') env[e.name] = pod.metadata?.namespace;
    }
    return env;
  }

  private async addBackend(name: string): Promise<void> {
    const podName = `${SERVICE}-${name}`;
    await this.client.create<V1Pod>(apiPath('', 'v1', 'pods', NAMESPACE), {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: podName, namespace: NAMESPACE, labels: APP_LABEL, annotations: { [NETWORKS_ANNOTATION]: NAD } },
      spec: { containers: [{ name: 'nginx', image: 'nginx', ports: [{ containerPort: 80, name: 'http' }] }] },
    });
    const netPod = await this.topo.addPod(name);
    const server = this.topo.spawn(netPod, [process.execPath, '-e', BACKEND_JS, name, netPod.net1.ipv4, GREETING]);
    await new Promise<void>((resolve, reject) => {
      server.stdout?.once('data', () => resolve());
      server.once('exit', (code) => reject(new Error(`backend ${name} exited (${String(code)})`)));
    });
    this.backends.set(name, netPod);
    await this.becomeRunning(podName, netPod);
    this.report.info(`pod ${podName}: net1 ${netPod.net1.ipv4}, Ready`);
  }

  /** kubelet + Multus: network-status annotation, then Running/Ready status with the primary IP. */
  private async becomeRunning(podName: string, netPod: NetPod): Promise<void> {
    const path = apiPath('', 'v1', 'pods', NAMESPACE, podName);
    await this.client.patch(path, { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: networkStatus(netPod) } } }, 'merge');
    await this.writeStatus(podName, netPod, true);
  }

  private async writeStatus(podName: string, netPod: NetPod, ready: boolean): Promise<void> {
    const now = new Date().toISOString();
    await this.client.patch(
      `${apiPath('', 'v1', 'pods', NAMESPACE, podName)}/status`,
      {
        status: {
          phase: 'Running',
          podIP: netPod.eth0.ipv4,
          podIPs: [{ ip: netPod.eth0.ipv4 }],
          conditions: [
            { type: 'Ready', status: ready ? 'True' : 'False', lastTransitionTime: now },
            { type: 'ContainersReady', status: ready ? 'True' : 'False', lastTransitionTime: now },
          ],
        },
      },
      'merge',
    );
  }

  private async setReady(name: string, ready: boolean): Promise<void> {
    const netPod = this.backends.get(name);
    if (netPod === undefined) throw new Error(`no backend ${name}`);
    await this.writeStatus(`${SERVICE}-${name}`, netPod, ready);
  }

  private async sliceAddresses(): Promise<string[]> {
    const slices = await this.client.list<V1EndpointSlice>(apiPath('discovery.k8s.io', 'v1', 'endpointslices', NAMESPACE), { labelSelector: `kubernetes.io/service-name=${SERVICE}` });
    return slices.items.flatMap((s) => (s.endpoints ?? []).filter((e) => e.conditions?.ready === true).flatMap((e) => e.addresses)).sort();
  }

  private async waitForSliceAddresses(want: string[]): Promise<void> {
    const sorted = [...want].sort();
    await eventually(`EndpointSlices of ${SERVICE} to list ${sorted.join(', ')}`, async () => {
      const got = await this.sliceAddresses();
      return JSON.stringify(got) === JSON.stringify(sorted) ? got : undefined;
    });
    this.report.info(`EndpointSlice for ${SERVICE} lists the secondary addresses ${sorted.join(', ')}`);
  }

  private async waitReadyInNetns(p: Program, pod: NetPod, port: number): Promise<void> {
    await eventually(
      `the sidecar's /readyz in ${pod.name}`,
      async () => {
        if (p.child.exitCode !== null) throw new Error(`sidecar exited with code ${p.child.exitCode}; its log:\n${tail(p.logFile)}`);
        const r = await this.topo.run(pod, ['curl', '-sf', '-o', '/dev/null', '-w', '%{http_code}', `http://127.0.0.1:${port}/readyz`], { allowFail: true });
        return r.stdout.trim() === '200' ? true : undefined;
      },
      60_000,
    ).catch((e: unknown) => {
      throw new Error(`${String(e)}\nsidecar log:\n${tail(p.logFile)}`);
    });
  }

  /** One real curl per request, each a new connection, so each is load-balanced anew. */
  private async curl(pod: NetPod, clusterIP: string): Promise<Answer> {
    const r = await this.topo.run(pod, ['curl', '-s', '-i', '--max-time', '2', `http://${clusterIP}/`], { allowFail: true });
    if (r.code !== 0) return { error: `curl exit ${r.code}${r.stderr ? `: ${r.stderr.trim()}` : ''}` };
    const header = (h: string): string | undefined => new RegExp(`^${h}: *(.*)$`, 'mi').exec(r.stdout)?.[1]?.trim();
    const body = r.stdout
      .split(/\r?\n\r?\n/)
      .slice(1)
      .join('\n')
      .trim();
    return { backend: header('x-backend'), seenSource: header('x-client'), body };
  }

  private async curlRound(pod: NetPod, clusterIP: string, n: number): Promise<Answer[]> {
    const answers: Answer[] = [];
    for (let i = 0; i < n; i++) {
      const a = await this.curl(pod, clusterIP);
      answers.push(a);
      this.report.info(`  #${String(i + 1).padStart(2)}  ${a.backend !== undefined ? `${a.backend.padEnd(9)} ${a.body ?? ''}  (saw client ${a.seenSource ?? '?'})` : `failed: ${a.error ?? ''}`}`);
    }
    const counts = new Map<string, number>();
    for (const a of answers) counts.set(a.backend ?? 'failed', (counts.get(a.backend ?? 'failed') ?? 0) + 1);
    this.report.info(
      `  answers by backend: ${[...counts]
        .sort()
        .map(([k, v]) => `${k}=${v}`)
        .join(' ')}`,
    );
    return answers;
  }

  private async eventuallyAnswers(pod: NetPod, clusterIP: string, ok: (as: Answer[]) => boolean, what: string): Promise<void> {
    const t0 = Date.now();
    await eventually(what, async () => {
      const as: Answer[] = [];
      for (let i = 0; i < 10; i++) as.push(await this.curl(pod, clusterIP));
      return ok(as) ? true : undefined;
    });
    this.report.info(`observed ${what} after ${Date.now() - t0} ms`);
  }
}

/** Runs the whole scenario and always cleans up; the observations are returned for printing or asserting. */
export async function runScenario(report: Reporter, signal?: AbortSignal): Promise<Observations> {
  let current = '';
  const s = new Scenario({
    step: (t) => {
      current = t;
      report.step(t);
    },
    info: (t) => report.info(t),
  });
  const onAbort = (): void => void s.cleanup();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    return await s.run();
  } catch (e) {
    throw new Error(`step "${current}" failed: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
  } finally {
    signal?.removeEventListener('abort', onAbort);
    report.step('Cleaning up: sidecar, programs, network namespaces (with the rules in them), control plane');
    await s.cleanup();
  }
}
