/**
 * Runs the real sidecar program inside a client "pod" (a network namespace from
 * test/harness/netns.ts) against a real kube-apiserver, the way the webhook runs it: POD_NAME /
 * POD_NAMESPACE from the environment, only NET_ADMIN and NET_RAW (setpriv drops every other
 * capability from the bounding set, so root keeps just those two), its own health port.
 *
 * Also the probes the tests need: the namespace's iptables-save text, /readyz and /metrics seen
 * from inside the namespace, and the sidecar's JSON log lines.
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { dirname, join } from 'node:path';
import { createTopology, startBackend, type Pod, type Reply, type Topology } from '../harness/netns.js';
import { startApiserverRelay, type ApiserverRelay } from '../harness/apiserver-relay.js';
import { uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { apiPath } from '../../src/kube/paths.js';
import { podObject } from './state-fixtures.js';
import { CHAIN_PREFIX, DISPATCH_CHAIN } from '../../src/dataplane/core/names.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const SIDECAR_MAIN = join(ROOT, 'cmd', 'sidecar', 'main.ts');

function need(binary: string, pkg: string): void {
  try {
    execFileSync('sh', ['-c', `command -v ${binary}`], { stdio: 'ignore' });
  } catch {
    throw new Error(`${binary} is not installed; install ${pkg}`);
  }
}

export interface SidecarProcess {
  readonly process: ChildProcess;
  readonly healthPort: number;
  /** Parsed JSON log lines so far (stdout), plus any non-JSON stderr text. */
  logs(): Record<string, unknown>[];
  stderr(): string;
  /** Sends SIGTERM and resolves with the exit code. */
  terminate(timeoutMs?: number): Promise<number | null>;
  /** Resolves with the exit code when the process exits by itself. */
  readonly exit: Promise<number | null>;
  exited(): boolean;
}

export interface SidecarSpawnOptions {
  podName: string;
  podNamespace: string;
  kubeconfig: string;
  healthPort: number;
  /**
   * Extra environment (e.g. MIN_SYNC_INTERVAL_MS). The rule back end is iptables unless this sets
   * DATAPLANE_BACKEND: these tests read iptables-save; runtime-nftables.test.ts runs nftables.
   */
  env?: Record<string, string>;
  /** The program to run: default the TypeScript source via tsx; a bundle path runs `node <bundle>`. */
  bundle?: string;
  /** Command-line flags (e.g. `--cleanup`). */
  args?: string[];
}

export function spawnSidecar(topo: Topology, pod: Pod, o: SidecarSpawnOptions): SidecarProcess {
  need('setpriv', 'util-linux (apt-get install util-linux)');
  need('iptables-save', 'iptables (apt-get install iptables)');
  need('curl', 'curl (apt-get install curl)');
  const env = {
    POD_NAME: o.podName,
    POD_NAMESPACE: o.podNamespace,
    KUBECONFIG: o.kubeconfig,
    HEALTH_PORT: String(o.healthPort),
    HEALTH_HOST: '127.0.0.1',
    LOG_LEVEL: 'debug',
    MIN_SYNC_INTERVAL_MS: '50',
    DATAPLANE_BACKEND: 'iptables',
    ...o.env,
  };
  const child = topo.spawn(pod, [
    'setpriv',
    '--bounding-set=-all,+net_admin,+net_raw',
    '--',
    'env',
    ...Object.entries(env).map(([k, v]) => `${k}=${v}`),
    process.execPath,
    ...(o.bundle !== undefined ? [o.bundle] : ['--import', 'tsx', SIDECAR_MAIN]),
    ...(o.args ?? []),
  ]);
  const lines: Record<string, unknown>[] = [];
  let partial = '';
  let errText = '';
  child.stdout?.on('data', (b: Buffer) => {
    partial += b.toString();
    const parts = partial.split('\n');
    partial = parts.pop() ?? '';
    for (const line of parts) {
      if (line.trim() === '') continue;
      try {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        errText += `${line}\n`;
      }
    }
  });
  child.stderr?.on('data', (b: Buffer) => (errText += b.toString()));
  const exitP = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    process: child,
    healthPort: o.healthPort,
    logs: () => lines,
    stderr: () => errText,
    exited: () => child.exitCode !== null || child.signalCode !== null,
    exit: exitP,
    async terminate(timeoutMs = 15_000) {
      // `ip netns exec` execs setpriv which execs env which execs node: the child pid is node's.
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const code = await exitP;
      clearTimeout(timer);
      return code;
    },
  };
}

/** HTTP status of a health path, from inside the pod's namespace; 0 when nothing answered. */
export async function probe(topo: Topology, pod: Pod, port: number, path: string): Promise<number> {
  const r = await topo.run(pod, ['curl', '-s', '-o', '/dev/null', '-m', '2', '-w', '%{http_code}', `http://127.0.0.1:${port}${path}`], { allowFail: true });
  return Number(r.stdout.trim()) || 0;
}

/** Resident set size of a process in MiB (VmRSS). */
export function rssMiB(pid: number): number {
  const kb = Number(/^VmRSS:\s*(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]);
  if (!Number.isFinite(kb)) throw new Error(`no VmRSS for pid ${pid}`);
  return kb / 1024;
}

export async function metricsText(topo: Topology, pod: Pod, port: number): Promise<string> {
  return (await topo.run(pod, ['curl', '-s', '-m', '2', `http://127.0.0.1:${port}/metrics`])).stdout;
}

/** `iptables-save` (or ip6tables-save) of the pod's namespace, all tables. */
export async function rulesOf(topo: Topology, pod: Pod, family: 4 | 6 = 4): Promise<string> {
  return (await topo.run(pod, [family === 4 ? 'iptables-save' : 'ip6tables-save'])).stdout;
}

/**
 * The DNAT destinations of one cluster IP in an iptables-save text: follows its dispatch rules to
 * their Service chains. Undefined when the cluster IP has no dispatch rule at all (not served);
 * an empty list when it is served without endpoints.
 */
export function endpointsOf(save: string, clusterIP: string): string[] | undefined {
  const prefix = clusterIP.includes(':') ? '128' : '32';
  const chains = new Set<string>();
  for (const line of save.split('\n')) {
    if (!line.startsWith(`-A ${DISPATCH_CHAIN} `) || !line.includes(` -d ${clusterIP}/${prefix} `)) continue;
    const m = / -j (\S+)/.exec(line);
    if (m?.[1] !== undefined) chains.add(m[1]);
  }
  if (chains.size === 0) return undefined;
  const out = new Set<string>();
  for (const line of save.split('\n')) {
    const chain = /^-A (\S+) /.exec(line)?.[1];
    const to = / --to-destination (\S+)/.exec(line)?.[1];
    if (chain !== undefined && chains.has(chain) && to !== undefined) out.add(to);
  }
  return [...out].sort();
}

/** Every line this project owns in a save text (our chains, jumps to them). */
export function ownedLines(save: string): string[] {
  return save.split('\n').filter((l) => l.includes(CHAIN_PREFIX));
}

/** Waits until the log has a line matching `re` (message or problem); returns it. */
export async function waitForLog(sc: SidecarProcess, what: string, re: RegExp, timeoutMs = 15_000): Promise<Record<string, unknown>> {
  let found: Record<string, unknown> | undefined;
  await waitFor(
    what,
    () => {
      const text = (v: unknown): string => (typeof v === 'string' ? v : '');
      found = sc.logs().find((l) => re.test(text(l['msg'])) || re.test(text(l['problem'])));
      return found !== undefined;
    },
    timeoutMs,
    () =>
      `log so far:\n${sc
        .logs()
        .slice(-15)
        .map((l) => JSON.stringify(l))
        .join('\n')}\n${sc.stderr()}`,
  );
  return found ?? {};
}

/** Everything a sidecar test runs on: a control plane, a topology with a client and backends serving HTTP/UDP, a namespace. */
export interface SidecarEnv {
  readonly cp: ControlPlane;
  readonly topo: Topology;
  readonly relay: ApiserverRelay;
  readonly client: Pod;
  /** Kubernetes namespace of the test's objects. */
  readonly ns: string;
  sidecar: SidecarProcess | undefined;
  /** Stops the sidecar (if still running), the relay, the namespaces, the test's objects and a private control plane. */
  close(): Promise<void>;
}

export async function startSidecarEnv(o: {
  controlPlane: () => Promise<ControlPlane>;
  nsPrefix: string;
  clientNet2?: boolean;
  /** Backend pods: name, whether it has net2, which of its addresses the servers listen on (default net1 v4+v6). */
  backends: { name: string; net2?: boolean; listen?: (p: Pod) => string[] }[];
}): Promise<SidecarEnv> {
  const cp = await o.controlPlane();
  const topo = await createTopology();
  const client = await topo.addPod('client', { net2: o.clientNet2 === true });
  for (const b of o.backends) {
    const pod = await topo.addPod(b.name, { net2: b.net2 === true });
    await startBackend(topo, pod, b.listen !== undefined ? { addresses: b.listen(pod) } : {});
  }
  const relay = await startApiserverRelay(topo, cp.server, cp.dir);
  const ns = uniqueName(o.nsPrefix);
  await cp.createNamespace(ns);
  const env: SidecarEnv = {
    cp,
    topo,
    relay,
    client,
    ns,
    sidecar: undefined,
    async close() {
      if (env.sidecar !== undefined && !env.sidecar.exited()) await env.sidecar.terminate(5000);
      await relay.close();
      await topo.teardown();
      if (cp.shared) await cp.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
      await cp.stop();
    },
  };
  return env;
}

/** The client pod object of an env: on net-a of its namespace, with its addresses in network-status (as Multus writes them). */
export async function createClientPod(env: SidecarEnv): Promise<void> {
  const { cp, ns, client } = env;
  const status = [
    { name: 'kindnet', interface: 'eth0', ips: [client.eth0.ipv4], default: true },
    { name: `${ns}/net-a`, interface: 'net1', ips: [`${client.net1.ipv4}/24`] },
  ];
  await cp.client.create(apiPath('', 'v1', 'pods', ns), podObject(ns, 'client', { serviceNetwork: 'net-a', status }));
}

/**
 * A client that keeps sending HTTP GETs (a new connection each, `pauseMs` apart) from inside the
 * pod until stop(), which resolves with every reply: for counting failures across sidecar restarts.
 */
const HTTP_LOOP_JS = `
const http = require('node:http');
const [url, pauseMs] = process.argv.slice(1);
const out = []; let stop = false;
process.on('SIGTERM', () => (stop = true));
const one = () => new Promise((resolve) => {
  const t0 = Date.now();
  const req = http.get(url, { agent: false, timeout: 2000 }, (res) => {
    let body = ''; res.on('data', (d) => (body += d));
    res.on('end', () => { try { resolve({ name: JSON.parse(body).name, ms: Date.now() - t0, at: t0 }); } catch { resolve({ error: 'BADBODY', ms: Date.now() - t0, at: t0 }); } });
  });
  req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
  req.on('error', (e) => resolve({ error: e.code || e.message, ms: Date.now() - t0, at: t0 }));
});
(async () => {
  while (!stop) { out.push(await one()); await new Promise((r) => setTimeout(r, Number(pauseMs))); }
  process.stdout.write(JSON.stringify(out));
})();
`;

export interface HttpLoop {
  stop(): Promise<(Reply & { at: number })[]>;
}

export function startHttpLoop(topo: Topology, pod: Pod, url: string, pauseMs = 20): HttpLoop {
  const child = topo.spawn(pod, [process.execPath, '-e', HTTP_LOOP_JS, url, String(pauseMs)]);
  let out = '';
  let errText = '';
  child.stdout?.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (errText += b.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    async stop() {
      child.kill('SIGTERM');
      await exited;
      try {
        return JSON.parse(out) as (Reply & { at: number })[];
      } catch {
        throw new Error(`the HTTP loop printed no result: ${out.slice(0, 200)} ${errText}`);
      }
    },
  };
}
