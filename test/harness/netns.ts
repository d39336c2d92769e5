/**
 * "Pods" as network namespaces, for dataplane tests with real iptables and real traffic.
 *
 * A topology is one switch namespace holding the bridges (br0 primary, br1 for net1, br2 for net2)
 * and any number of pod namespaces. Each pod has `lo`, `eth0` on br0 (default routes there),
 * `net1` on br1 and optionally `net2` on br2, each with an IPv4 and an IPv6 address (`nodad`, so
 * IPv6 is usable at once). Nothing is added to the root namespace; every topology has its own
 * switch, so parallel runs with the same addresses cannot see each other.
 *
 * Names: `mpxt-<pid>-<random>-<pod>`. The pid lets `sweepLeftovers()` delete what crashed runs left
 * behind without touching namespaces of runs that are still alive. `teardown()` kills every
 * process the topology spawned and deletes every namespace it made (deleting a namespace deletes
 * its veths and bridges); tests call it from `after()`, and a process 'exit' hook does it too.
 *
 * Addresses (pod number i = 2, 3, ...): eth0 10.244.0.i/32 fd00:244::i/128 (default routes via
 * 10.244.0.1 / fd00:244::1, which nobody answers for: the primary network carries nothing between
 * pods, so a reply to a request sent from a pod's eth0 address never arrives), net1
 * 192.168.101.i/24 fd00:101::i/64, net2 192.168.102.i/24 fd00:102::i/64. Only ever reachable inside
 * the topology.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';

export const NETNS_PREFIX = 'mpxt-';

export interface Addr {
  readonly ipv4: string;
  readonly ipv6: string;
}

export interface Pod {
  readonly name: string;
  /** The network namespace's name (for `ip netns exec`). */
  readonly ns: string;
  readonly eth0: Addr;
  readonly net1: Addr;
  readonly net2?: Addr;
}

export interface RunResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * A "node": a namespace whose `eth1` is a port on the net1 segment (br1) with no address, the
 * parent of the macvlan children that pods placed on it get as their `net1` (as Multus' macvlan
 * plugin does on a real node). IPv4 and IPv6 forwarding are on, as on a Kubernetes node.
 */
export interface Node {
  readonly name: string;
  readonly ns: string;
  /** The parent interface on the net1 segment. */
  readonly parent: string;
}

/** Anything commands can run in: a pod or a node. */
export type Place = Pick<Pod, 'name' | 'ns'>;

export interface Topology {
  readonly id: string;
  readonly switchNs: string;
  /** `node`: net1 is a macvlan (bridge mode) child of that node's eth1 instead of a veth on br1. */
  addPod(name: string, opts?: { net2?: boolean; node?: Node }): Promise<Pod>;
  addNode(name: string): Promise<Node>;
  pod(name: string): Pod;
  /** Runs `cmd` in the pod's (or node's) namespace; throws on a non-zero exit unless `allowFail`. */
  run(pod: Place, cmd: readonly string[], opts?: { input?: string; allowFail?: boolean }): Promise<RunResult>;
  /** Starts a long-running process in the pod's (or node's) namespace; killed by teardown. */
  spawn(pod: Place, cmd: readonly string[]): ChildProcess;
  teardown(): Promise<void>;
}

const NETS = {
  eth0: { bridge: 'br0', v4: '10.244.0', v6: 'fd00:244::', gw4: '10.244.0.1', gw6: 'fd00:244::1' },
  net1: { bridge: 'br1', v4: '192.168.101', v6: 'fd00:101::' },
  net2: { bridge: 'br2', v4: '192.168.102', v6: 'fd00:102::' },
} as const;

function need(binary: string): void {
  try {
    execFileSync('sh', ['-c', `command -v ${binary}`], { stdio: 'ignore' });
  } catch {
    throw new Error(`${binary} is not installed; install iproute2 (apt-get install iproute2) and run the tests as root`);
  }
}

/** Runs a command and collects its output; never throws for a non-zero exit. */
export function runCommand(argv: readonly string[], input?: string): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const [cmd, ...args] = argv;
    if (cmd === undefined) {
      reject(new Error('empty command'));
      return;
    }
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const errs: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => errs.push(b));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(errs).toString() }));
    child.stdin.on('error', () => undefined);
    child.stdin.end(input ?? '');
  });
}

async function must(argv: readonly string[], input?: string): Promise<RunResult> {
  const r = await runCommand(argv, input);
  if (r.code !== 0) throw new Error(`${argv.join(' ')} failed (exit ${r.code}): ${r.stderr.trim()}${input !== undefined ? `\ninput:\n${input}` : ''}`);
  return r;
}

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function listNetns(): string[] {
  try {
    return readdirSync('/run/netns');
  } catch {
    return [];
  }
}

/** Deletes namespaces of earlier runs whose process is gone. Returns their names. */
export function sweepLeftovers(): string[] {
  const removed: string[] = [];
  for (const name of listNetns()) {
    if (!name.startsWith(NETNS_PREFIX)) continue;
    const pid = Number(name.slice(NETNS_PREFIX.length).split('-')[0]);
    if (!Number.isInteger(pid) || pid === process.pid || pidAlive(pid)) continue;
    try {
      execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
      removed.push(name);
    } catch {
      // Already gone (another sweeper won the race).
    }
  }
  return removed;
}

export async function createTopology(): Promise<Topology> {
  need('ip');
  if (process.getuid?.() !== 0) throw new Error('network namespace tests must run as root (they create namespaces and veths)');
  sweepLeftovers();
  const id = `${NETNS_PREFIX}${process.pid}-${randomBytes(3).toString('hex')}`;
  const switchNs = `${id}-sw`;
  const namespaces: string[] = [];
  const children = new Set<ChildProcess>();
  const pods = new Map<string, Pod>();
  const nodes = new Set<string>();
  let torn = false;

  const syncTeardown = (): void => {
    for (const c of children) c.kill('SIGKILL');
    for (const ns of [...namespaces].reverse()) {
      try {
        execFileSync('ip', ['netns', 'del', ns], { stdio: 'ignore' });
      } catch {
        // already deleted
      }
    }
  };
  process.once('exit', syncTeardown);

  await must(['ip', 'netns', 'add', switchNs]);
  namespaces.push(switchNs);
  const bridges = Object.values(NETS).map((n) => n.bridge);
  await must(['ip', '-n', switchNs, '-batch', '-'], ['link set lo up', ...bridges.flatMap((b) => [`link add ${b} type bridge`, `link set ${b} up`])].join('\n') + '\n');

  const topo: Topology = {
    id,
    switchNs,
    async addPod(name, opts = {}) {
      if (!/^[a-z0-9]{1,12}$/.test(name)) throw new Error(`pod name ${JSON.stringify(name)}: use 1-12 lower-case letters or digits`);
      if (pods.has(name)) throw new Error(`pod ${name} already exists in ${id}`);
      const host = pods.size + 2;
      if (host > 250) throw new Error('at most 249 pods per topology');
      const ns = `${id}-${name}`;
      await must(['ip', 'netns', 'add', ns]);
      namespaces.push(ns);
      const ifaces = opts.net2 === true ? (['eth0', 'net1', 'net2'] as const) : (['eth0', 'net1'] as const);
      const sw: string[] = [];
      const inPod: string[] = ['link set lo up'];
      const addrs: Partial<Record<'eth0' | 'net1' | 'net2', Addr>> = {};
      for (const ifname of ifaces) {
        const net = NETS[ifname];
        const peer = `p${host}${ifname}`;
        if (ifname === 'net1' && opts.node !== undefined) {
          // A macvlan child of the node's parent, moved into the pod and renamed, as Multus does.
          const child = `m${host}net1`;
          await must(['ip', '-n', opts.node.ns, '-batch', '-'], `link add ${child} link ${opts.node.parent} type macvlan mode bridge\nlink set ${child} netns ${ns}\n`);
          inPod.push(`link set ${child} name net1`);
        } else {
          sw.push(`link add ${peer} type veth peer name ${ifname} netns ${ns}`, `link set ${peer} master ${net.bridge} up`);
        }
        const a = { ipv4: `${net.v4}.${host}`, ipv6: `${net.v6}${host.toString(16)}` };
        addrs[ifname] = a;
        // eth0 gets host addresses (/32, /128) and only a default route to a gateway nobody
        // answers for: a reply to a pod's eth0 address is lost, so traffic between pods works
        // only on the secondary networks, and a request sent from the wrong source gets no answer.
        const [p4, p6] = ifname === 'eth0' ? [32, 128] : [24, 64];
        inPod.push(`link set ${ifname} up`, `addr add ${a.ipv4}/${p4} dev ${ifname}`, `addr add ${a.ipv6}/${p6} dev ${ifname} nodad`);
      }
      inPod.push(`route add default via ${NETS.eth0.gw4} dev eth0 onlink`, `route add default via ${NETS.eth0.gw6} dev eth0 onlink`);
      await must(['ip', '-n', switchNs, '-batch', '-'], sw.join('\n') + '\n');
      await must(['ip', '-n', ns, '-batch', '-'], inPod.join('\n') + '\n');
      const pod: Pod = {
        name,
        ns,
        eth0: addrs.eth0 ?? { ipv4: '', ipv6: '' },
        net1: addrs.net1 ?? { ipv4: '', ipv6: '' },
        ...(addrs.net2 !== undefined ? { net2: addrs.net2 } : {}),
      };
      pods.set(name, pod);
      return pod;
    },
    async addNode(name) {
      if (!/^[a-z0-9]{1,12}$/.test(name)) throw new Error(`node name ${JSON.stringify(name)}: use 1-12 lower-case letters or digits`);
      if (pods.has(name) || nodes.has(name)) throw new Error(`${name} already exists in ${id}`);
      const ns = `${id}-${name}`;
      await must(['ip', 'netns', 'add', ns]);
      namespaces.push(ns);
      nodes.add(name);
      const peer = `n${nodes.size}eth1`;
      await must(['ip', '-n', switchNs, '-batch', '-'], `link add ${peer} type veth peer name eth1 netns ${ns}\nlink set ${peer} master ${NETS.net1.bridge} up\n`);
      await must(['ip', '-n', ns, '-batch', '-'], 'link set lo up\nlink set eth1 up\n');
      for (const key of ['net.ipv4.ip_forward=1', 'net.ipv6.conf.all.forwarding=1']) await must(['ip', 'netns', 'exec', ns, 'sysctl', '-qw', key]);
      return { name, ns, parent: 'eth1' };
    },
    pod(name) {
      const p = pods.get(name);
      if (p === undefined) throw new Error(`no pod ${name} in ${id}`);
      return p;
    },
    async run(pod, cmd, opts = {}) {
      const argv = ['ip', 'netns', 'exec', pod.ns, ...cmd];
      const r = await runCommand(argv, opts.input);
      if (r.code !== 0 && opts.allowFail !== true) throw new Error(`${cmd.join(' ')} in ${pod.name} failed (exit ${r.code}): ${r.stderr.trim()}`);
      return r;
    },
    spawn(pod, cmd) {
      const child = spawn('ip', ['netns', 'exec', pod.ns, ...cmd], { stdio: ['pipe', 'pipe', 'pipe'] });
      children.add(child);
      child.on('exit', () => children.delete(child));
      return child;
    },
    async teardown() {
      if (torn) return;
      torn = true;
      const exits = [...children].map((c) => new Promise<void>((resolve) => (c.exitCode !== null || c.signalCode !== null ? resolve() : c.once('exit', () => resolve()))));
      for (const c of children) c.kill('SIGKILL');
      await Promise.all(exits);
      for (const ns of [...namespaces].reverse()) await runCommand(['ip', 'netns', 'del', ns]);
      namespaces.length = 0;
      process.removeListener('exit', syncTeardown);
    },
  };
  return topo;
}

/** Namespaces of this topology still present (for teardown tests). */
export function existingNamespaces(id: string): string[] {
  return listNetns().filter((n) => n.startsWith(`${id}-`));
}

// ---------------------------------------------------------------------------------------------
// Small servers and clients, run with this Node binary inside a pod namespace.

/**
 * HTTP and UDP echo answering `{"name":..., "peer":...}` with the peer's address as the server saw
 * it. Listens only on the given addresses (the pod's net1 ones), prints "ready" when listening.
 */
const BACKEND_JS = `
const http = require('node:http'); const dgram = require('node:dgram');
const [name, addrList, httpPort, udpPort] = process.argv.slice(1);
const addrs = addrList.split(',');
let pending = addrs.length * 2;
const up = () => { if (--pending === 0) console.log('ready'); };
for (const a of addrs) {
  const s = http.createServer((req, res) => { res.setHeader('connection', 'close'); res.end(JSON.stringify({ name, peer: req.socket.remoteAddress })); });
  s.listen(Number(httpPort), a, up);
  const u = dgram.createSocket(a.includes(':') ? 'udp6' : 'udp4');
  u.on('message', (m, r) => u.send(JSON.stringify({ name, peer: r.address, data: m.toString() }), r.port, r.address));
  u.bind(Number(udpPort), a, up);
}
`;

export interface Backend {
  readonly pod: Pod;
  readonly process: ChildProcess;
}

export async function startBackend(topo: Topology, pod: Pod, opts: { httpPort?: number; udpPort?: number; addresses?: readonly string[] } = {}): Promise<Backend> {
  const addrs = opts.addresses ?? [pod.net1.ipv4, pod.net1.ipv6];
  const child = topo.spawn(pod, [process.execPath, '-e', BACKEND_JS, pod.name, addrs.join(','), String(opts.httpPort ?? 80), String(opts.udpPort ?? 5353)]);
  await new Promise<void>((resolve, reject) => {
    let out = '';
    let errText = '';
    const timer = setTimeout(() => reject(new Error(`backend ${pod.name} did not start: ${errText}`)), 10_000);
    child.stderr?.on('data', (b: Buffer) => (errText += b.toString()));
    child.stdout?.on('data', (b: Buffer) => {
      out += b.toString();
      if (out.includes('ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`backend ${pod.name} exited (${code}): ${errText}`));
    });
  });
  return { pod, process: child };
}

export interface Reply {
  /** Backend name, when a reply came. */
  readonly name?: string;
  readonly peer?: string;
  /** Error code (ECONNREFUSED, ETIMEDOUT, ...) when none came. */
  readonly error?: string;
  readonly ms: number;
}

/** `count` sequential HTTP GETs, each on a new connection (so each is load-balanced anew). */
const HTTP_CLIENT_JS = `
const http = require('node:http');
const [url, count, timeoutMs] = process.argv.slice(1);
const one = () => new Promise((resolve) => {
  const t0 = Date.now();
  const req = http.get(url, { agent: false, timeout: Number(timeoutMs) }, (res) => {
    let body = ''; res.on('data', (d) => (body += d));
    res.on('end', () => { try { const j = JSON.parse(body); resolve({ name: j.name, peer: j.peer, ms: Date.now() - t0 }); } catch { resolve({ error: 'BADBODY', ms: Date.now() - t0 }); } });
  });
  req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
  req.on('error', (e) => resolve({ error: e.code || e.message, ms: Date.now() - t0 }));
});
(async () => { const out = []; for (let i = 0; i < Number(count); i++) out.push(await one()); console.log(JSON.stringify(out)); })();
`;

export async function httpRequests(topo: Topology, pod: Place, url: string, count: number, timeoutMs = 2000): Promise<Reply[]> {
  const r = await topo.run(pod, [process.execPath, '-e', HTTP_CLIENT_JS, url, String(count), String(timeoutMs)]);
  return JSON.parse(r.stdout) as Reply[];
}

/**
 * `count` UDP datagrams, one after another, each waiting for its echo, from one socket (one
 * conntrack entry, so one backend) unless `socketEach` (a new socket, so a new flow, per datagram).
 * With `localPort` every datagram has the same 5-tuple, across calls too.
 */
const UDP_CLIENT_JS = `
const dgram = require('node:dgram');
const [host, port, count, timeoutMs, localPort, socketEach] = process.argv.slice(1);
let s;
const out = [];
let i = 0; let timer;
const open = (then) => {
  s = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
  // Connected, so ICMP errors (port unreachable) come back as ECONNREFUSED instead of silence.
  s.on('error', (e) => { clearTimeout(timer); out.push({ error: e.code || e.message, ms: 0 }); s.removeAllListeners('message'); step(); });
  s.bind(Number(localPort) || 0, () => s.connect(Number(port), host, then));
};
const step = () => { if (socketEach === '1' && i > 0 && i < Number(count)) { s.close(); open(next); } else next(); };
const next = () => {
  if (i++ >= Number(count)) { s.close(); console.log(JSON.stringify(out)); return; }
  const t0 = Date.now();
  timer = setTimeout(() => { out.push({ error: 'ETIMEDOUT', ms: Date.now() - t0 }); s.removeAllListeners('message'); step(); }, Number(timeoutMs));
  s.once('message', (m) => { clearTimeout(timer); const j = JSON.parse(m.toString()); out.push({ name: j.name, peer: j.peer, ms: Date.now() - t0 }); step(); });
  s.send('ping');
};
open(next);
`;

export async function udpRequests(
  topo: Topology,
  pod: Place,
  host: string,
  port: number,
  count: number,
  opts: { localPort?: number; timeoutMs?: number; socketEach?: boolean } = {},
): Promise<Reply[]> {
  const r = await topo.run(pod, [
    process.execPath,
    '-e',
    UDP_CLIENT_JS,
    host,
    String(port),
    String(count),
    String(opts.timeoutMs ?? 1000),
    String(opts.localPort ?? 0),
    opts.socketEach === true ? '1' : '0',
  ]);
  return JSON.parse(r.stdout) as Reply[];
}
