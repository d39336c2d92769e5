/**
 * The second real node of `startNode({ nodes: 2 })`: a real containerd, kubelet and kube-proxy with
 * the Multus thin plugin, whereabouts and its own CNI configuration, joined to the first node's
 * control plane. kind runs each node as a container; without a container engine here, the same
 * isolation is built from its parts (docs/decisions/0040-test-harness.md):
 *
 * - network: its own namespace (NODE2.netns) joined to the host by a veth pair on a /30; the host
 *   routes node 2's pod CIDR to it and node 2's default route is the host, so it reaches the
 *   apiserver, CoreDNS and the first node's pods at their usual addresses (no new SAN, no relay).
 *   containerd runs there, so the CNI plugins it runs put the pods' veths there too.
 * - registry: the registry listens on the host's 127.0.0.1 only; a relay pair (TCP in node 2's
 *   namespace -> a Unix socket -> TCP on the host) serves 127.0.0.1:5000 inside node 2, so the
 *   containerd configuration is the first node's.
 * - mounts: its own mount namespace, kept by a bind of its nsfs file under the node's folder, with
 *   tmpfs over the paths the binaries hard-code and the first node also uses (the device-plugin
 *   socket in /var/lib/kubelet, /var/log/pods which each kubelet's log GC would empty of the other's
 *   pods, /run/containerd, /var/lib/cni, the sandboxes' /run/netns entries). It dies with its last
 *   process once teardown unmounts that file.
 * - cgroups: cgroupRoot NODE2.cgroupRoot, so its pods live in /<root>/kubepods beside /kubepods.
 * - ens4: one end of a veth whose other end is a port of the segment bridge (SEGMENT), as is the
 *   first node's ens4 peer: macvlan pods on both nodes, the node agents and external clients share
 *   one L2 segment.
 *
 * Everything it creates is recorded in the NodeState before it exists, so the one teardown in
 * node-host.ts (stop(), the exit hook, the reaper) removes it: processes by the folder in their
 * command line, the namespaces by `ip netns del`, the cgroup root as a new top-level cgroup.
 */
import { type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  containerdConfig,
  hostsToml,
  kubeletConfig,
  kubeletFlags,
  kubeletResolvConf,
  kubeProxyConfig,
  layoutPaths,
  MIRRORED_HOSTS,
  multusConf,
  NODE,
  NODE2,
  NODE2_SPEC,
  SEGMENT,
  type NodeLayout,
} from './node-config.js';
import { host, saveState, uplinks, type NodeState } from './node-host.js';

/** The second node as the tests see it. */
export interface SecondNode {
  readonly name: string;
  readonly ip: string;
  readonly netns: string;
  /** Bring-up time of this node alone, in ms (the control plane and first node were up already). */
  readonly startMs: number;
  /** `crictl` against node 2's containerd. */
  crictl(args: string[]): Promise<string>;
  /** Runs a command in node 2's network namespace (ip, iptables, curl), as root. */
  inNetns(cmd: string[], input?: string): Promise<string>;
  /** Stops node 2's kubelet (SIGKILL: no goodbye to the apiserver, as when a node dies). */
  stopKubelet(): void;
  /** Starts node 2's kubelet again (same flags, same root dir); resolves when it is running. */
  startKubelet(): void;
}

/** What the bring-up borrows from node.ts: its process starter, its step timer, its exec. */
export interface SecondNodeContext {
  dir: string;
  state: NodeState;
  cniBin: string;
  /** The admin kubeconfig (server at the first node's IP, reachable from node 2's namespace). */
  kubeconfig: string;
  ca: string;
  /** kubeconfig with node 2's own client certificate (CN system:node:realnode2). */
  kubeletKubeconfig: string;
  bin: (name: string) => string;
  startProcess: (name: string, file: string, args: string[], env?: NodeJS.ProcessEnv) => ChildProcess;
  exited: (name: string) => () => string | undefined;
  step: (what: string, f: () => Promise<void>) => Promise<void>;
  poll: (what: string, timeoutMs: number, f: () => Promise<boolean>, exited?: () => string | undefined) => Promise<void>;
  nodeRegistered: (name: string) => Promise<boolean>;
  nodeReady: (name: string) => Promise<boolean>;
  httpOk: (url: string) => Promise<boolean>;
  exec: (cmd: string, args: string[], input?: string) => Promise<string>;
}

/** Paths node 2 gets a private tmpfs over: hard-coded by kubelet, containerd or CNI, and used by node 1 too. */
export const NODE2_PRIVATE_PATHS = ['/var/lib/kubelet', '/var/log/pods', '/var/log/containers', '/run/containerd', '/var/lib/cni', '/run/netns'] as const;

/**
 * A byte relay (`node -e RELAY <listen> <connect>`), each side `tcp:<host>:<port>` or
 * `unix:<path>`. Started once on each side of the namespace boundary, since a process listens in
 * one network namespace only. Its command line names the node's folder, so teardown finds it.
 */
const RELAY_JS = `
const net = require('node:net');
const fs = require('node:fs');
const addr = (s) => s.startsWith('unix:') ? { path: s.slice(5) } : { host: s.split(':')[1], port: Number(s.split(':')[2]) };
const [listen, connect] = process.argv.slice(1);
const l = addr(listen);
if (l.path) fs.rmSync(l.path, { force: true });
net.createServer((c) => { const u = net.connect(addr(connect)); c.pipe(u); u.pipe(c); c.on('error', () => u.destroy()); u.on('error', () => c.destroy()); })
  .listen(l, () => console.log('ready'));
`;

export async function startSecondNode(ctx: SecondNodeContext): Promise<SecondNode> {
  const t0 = Date.now();
  const d2 = join(ctx.dir, 'node2');
  const p = layoutPaths(d2);
  const layout: NodeLayout = { dir: d2, cniBin: ctx.cniBin, kubeconfig: ctx.kubeconfig, ca: ctx.ca, node: NODE2_SPEC };
  for (const d of [p.logs, p.cniConfDir, p.kubeletRoot, join(d2, 'containerd')]) mkdirSync(d, { recursive: true });
  const mntns = join(d2, 'mntns');
  const netnsPath = `/run/netns/${NODE2.netns}`;
  const st = ctx.state;
  st.netns ??= [];
  st.moreContainerdSockets = [p.containerdSocket];
  st.moreCgroupRoots = [NODE2.cgroupRoot];
  const logName = (prog: string): string => `${prog}@${NODE2.name}`;
  // Programs of node 2 run in both of its namespaces; nsenter execs them (same pid, same command line).
  const inNode2 = (file: string, args: string[]): [string, string[]] => ['nsenter', [`--mount=${mntns}`, `--net=${netnsPath}`, '--', file, ...args]];
  const start = (prog: string, file: string, args: string[], env?: NodeJS.ProcessEnv): ChildProcess => {
    const [f, a] = inNode2(file, args);
    return ctx.startProcess(logName(prog), f, a, env);
  };
  const nsExec = (cmd: string[], input?: string): Promise<string> => ctx.exec('nsenter', [`--net=${netnsPath}`, '--', ...cmd], input);

  await ctx.step(`${NODE2.name}: network namespace, link to the host, segment bridge`, async () => {
    for (const ns of [NODE2.netns, SEGMENT.netns]) {
      if (existsSync(`/run/netns/${ns}`)) throw new Error(`network namespace ${ns} already exists: a two-node cluster is running or a crashed one left it (ip netns del ${ns})`);
    }
    if (!existsSync(`/sys/class/net/${NODE.parentPeer}`)) {
      throw new Error(`the host has its own ${NODE.parent} (no ${NODE.parentPeer} made by the harness): the two-node segment needs the harness's veth`);
    }
    for (const ns of [NODE2.netns, SEGMENT.netns]) {
      st.netns?.push(ns);
      saveState(st);
      host('ip', ['netns', 'add', ns]);
    }
    st.links.push(NODE2.uplink);
    saveState(st);
    host('ip', ['link', 'add', NODE2.uplink, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', NODE2.netns]);
    host('ip', ['addr', 'add', `${NODE2.hostLinkIp}/${NODE2.linkPrefix}`, 'dev', NODE2.uplink]);
    host('ip', ['link', 'set', NODE2.uplink, 'up']);
    const n2 = (args: string[]): string => host('ip', ['-n', NODE2.netns, ...args]);
    n2(['link', 'set', 'lo', 'up']);
    n2(['addr', 'add', `${NODE2.nodeLinkIp}/${NODE2.linkPrefix}`, 'dev', 'eth0']);
    n2(['link', 'set', 'eth0', 'up']);
    n2(['link', 'add', NODE2.bridge, 'type', 'bridge']);
    n2(['addr', 'add', `${NODE2.ip}/24`, 'dev', NODE2.bridge]);
    n2(['link', 'set', NODE2.bridge, 'up']);
    n2(['route', 'add', 'default', 'via', NODE2.hostLinkIp]);
    // As on the first node: service addresses are routed onto the pod bridge, never elsewhere.
    for (const cidr of NODE.serviceCidrs) n2([cidr.includes(':') ? '-6' : '-4', 'route', 'add', cidr, 'dev', NODE2.bridge]);
    await nsExec(['sh', '-c', 'echo 1 > /proc/sys/net/ipv4/ip_forward']);
    host('ip', ['route', 'add', NODE2.podCidr, 'via', NODE2.nodeLinkIp]);
    // Nothing of node 2 leaves the machine either (its default route is the host).
    for (const up of uplinks()) {
      host('iptables', ['-t', 'mangle', '-A', 'FORWARD', '-i', NODE2.uplink, '-o', up, '-j', 'DROP']);
      host('ip6tables', ['-t', 'mangle', '-A', 'FORWARD', '-i', NODE2.uplink, '-o', up, '-j', 'DROP']);
    }
    // The segment: a bridge in its own namespace, so the host's br_netfilter never sees its frames.
    const seg = (args: string[]): string => host('ip', ['-n', SEGMENT.netns, ...args]);
    seg(['link', 'set', 'lo', 'up']);
    seg(['link', 'add', SEGMENT.bridge, 'type', 'bridge']);
    seg(['link', 'set', SEGMENT.bridge, 'up']);
    await ctx.exec('nsenter', [`--net=/run/netns/${SEGMENT.netns}`, '--', 'sh', '-c', 'for f in /proc/sys/net/bridge/bridge-nf-call-*; do echo 0 > $f; done 2>/dev/null; true']);
    host('ip', ['link', 'set', NODE.parentPeer, 'netns', SEGMENT.netns]);
    seg(['link', 'set', NODE.parentPeer, 'master', SEGMENT.bridge, 'up']);
    host('ip', ['link', 'add', NODE2.parentPeer, 'netns', SEGMENT.netns, 'type', 'veth', 'peer', 'name', NODE.parent, 'netns', NODE2.netns]);
    seg(['link', 'set', NODE2.parentPeer, 'master', SEGMENT.bridge, 'up']);
    n2(['link', 'set', NODE.parent, 'up']);
  });

  await ctx.step(`${NODE2.name}: mount namespace, cgroup root`, async () => {
    writeFileSync(mntns, '');
    for (const path of NODE2_PRIVATE_PATHS) mkdirSync(path, { recursive: true });
    const mounts = NODE2_PRIVATE_PATHS.map((path) => `mount -t tmpfs -o mode=755 ${NODE2.name} ${path}`).join(' && ');
    await ctx.exec('unshare', [`--mount=${mntns}`, '--propagation', 'private', 'sh', '-c', mounts]);
    // cgroup v1 here: the root exists in every hierarchy before the kubelet starts (it checks);
    // a cpuset child needs cpus and mems before anything can join it.
    for (const h of cgroupHierarchies()) {
      const d = join('/sys/fs/cgroup', h, NODE2.cgroupRoot);
      mkdirSync(d, { recursive: true });
      if (h === 'cpuset') {
        for (const f of ['cpuset.cpus', 'cpuset.mems']) writeFileSync(join(d, f), readFileSync(join('/sys/fs/cgroup', h, f), 'utf8').trim() || '0');
      }
    }
  });

  await ctx.step(`${NODE2.name}: registry relay`, async () => {
    const sock = join(d2, 'registry.sock');
    const hostSide = ctx.startProcess(logName('registry-relay-host'), process.execPath, ['-e', RELAY_JS, `unix:${sock}`, `tcp:${NODE.registry}`]);
    await ctx.poll(
      'registry relay (host side)',
      10_000,
      async () => existsSync(sock),
      () => (hostSide.exitCode !== null ? 'host-side relay exited' : undefined),
    );
    start('registry-relay', process.execPath, ['-e', RELAY_JS, `tcp:${NODE.registry}`, `unix:${sock}`]);
    await ctx.poll(
      'registry through the relay in node 2',
      10_000,
      async () => (await nsExec(['sh', '-c', `curl -s -o /dev/null -w '%{http_code}' http://${NODE.registry}/v2/ || true`])).trim() === '200',
      ctx.exited(logName('registry-relay')),
    );
  });

  await ctx.step(`${NODE2.name}: containerd`, async () => {
    writeFileSync(p.containerdConfig, containerdConfig(layout));
    for (const h of MIRRORED_HOSTS) {
      mkdirSync(join(p.certsD, h), { recursive: true });
      writeFileSync(join(p.certsD, h, 'hosts.toml'), hostsToml());
    }
    // Written before containerd starts (1.6 wedges on CNI config changes). whereabouts' flat config
    // is the first node's file (same kubeconfig), seen through the shared /etc.
    writeFileSync(join(p.cniConfDir, '00-multus.conf'), multusConf(layout));
    const env = { ...process.env, PATH: `${process.env['PATH'] ?? ''}:/usr/sbin:/sbin` };
    start('containerd', 'containerd', ['--config', p.containerdConfig, '--log-level', 'warn'], env);
    await ctx.poll(`${NODE2.name} containerd socket`, 30_000, async () => existsSync(p.containerdSocket), ctx.exited(logName('containerd')));
  });

  const kubeletArgs = kubeletFlags(layout, ctx.kubeletKubeconfig);
  let kubelet: ChildProcess | undefined;
  await ctx.step(`${NODE2.name}: kubelet`, async () => {
    writeFileSync(p.kubeletConfig, kubeletConfig(layout));
    writeFileSync(p.resolvConf, kubeletResolvConf());
    kubelet = start('kubelet', ctx.bin('kubelet'), kubeletArgs);
    await ctx.poll(`Node ${NODE2.name} registered`, 60_000, () => ctx.nodeRegistered(NODE2.name), ctx.exited(logName('kubelet')));
  });

  await ctx.step(`${NODE2.name}: kube-proxy`, async () => {
    writeFileSync(p.kubeProxyConfig, kubeProxyConfig(layout));
    start('kube-proxy', ctx.bin('kube-proxy'), [`--config=${p.kubeProxyConfig}`, '--v=1']);
    await ctx.poll(`${NODE2.name} kube-proxy healthz`, 60_000, () => ctx.httpOk(`http://${NODE2_SPEC.proxyHealthz}/healthz`), ctx.exited(logName('kube-proxy')));
  });

  await ctx.step(`${NODE2.name}: Node Ready`, async () => {
    await ctx.poll(`Node ${NODE2.name} Ready`, 120_000, () => ctx.nodeReady(NODE2.name), ctx.exited(logName('kubelet')));
  });
  const startMs = Date.now() - t0;
  const crictlArgs = ['--runtime-endpoint', `unix://${p.containerdSocket}`, '--image-endpoint', `unix://${p.containerdSocket}`];
  return {
    name: NODE2.name,
    ip: NODE2.ip,
    netns: NODE2.netns,
    startMs,
    crictl: (args) => ctx.exec(ctx.bin('crictl'), [...crictlArgs, ...args]),
    inNetns: nsExec,
    stopKubelet() {
      if (kubelet?.pid !== undefined && kubelet.exitCode === null) process.kill(kubelet.pid, 'SIGKILL');
    },
    startKubelet() {
      kubelet = start('kubelet', ctx.bin('kubelet'), kubeletArgs);
    },
  };
}

function cgroupHierarchies(): string[] {
  // v1 hierarchies only (the unified mount of a hybrid host is not the kubelet's here).
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' '))
    .filter((f) => f[f.indexOf('-') + 1] === 'cgroup' && (f[4] ?? '').startsWith('/sys/fs/cgroup/'))
    .map((f) => (f[4] ?? '').slice('/sys/fs/cgroup/'.length));
}
