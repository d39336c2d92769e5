/**
 * The real node's configuration files, rendered by pure functions from one layout (no IO here).
 * Every quirk of docs/node-harness.md that lives in a config file is encoded here, with the
 * reason beside it; test/unit/harness/node-config.test.ts pins them.
 */
import { dump } from 'js-yaml';

/** Fixed facts of the node: one per machine (test/harness/node.ts takes a machine-wide lock). */
export const NODE = {
  name: 'realnode',
  /** On the pod bridge: kubelet refuses a loopback node IP, and pods reach it as 10.96.0.1's endpoint. */
  ip: '10.244.0.1',
  podCidr: '10.244.0.0/24',
  bridge: 'rnbr0',
  /** The macvlan parent the blog's NAD names; one end of a veth pair (this kernel has no dummy driver). */
  parent: 'ens4',
  parentPeer: 'ens4-peer',
  serviceCidrs: ['10.96.0.0/16', 'fd00:10:96::/112'],
  apiServiceIp: '10.96.0.1',
  dnsIp: '10.96.0.10',
  clusterDomain: 'cluster.local',
  apiPort: 6443,
  etcdPort: 2379,
  etcdPeerPort: 2380,
  registry: '127.0.0.1:5000',
  labels: { multusservicedemo: 'true' },
} as const;

/**
 * What differs between the nodes of one cluster: the configuration renderers below take it from
 * the layout (the first node's values when the layout names none), so the single-node files are
 * exactly as before.
 */
export interface NodeSpec {
  name: string;
  /** On the node's pod bridge (the kubelet refuses a loopback node IP). */
  ip: string;
  podCidr: string;
  /** First address host-local hands out (below it: the gateway and spare addresses). */
  podRangeStart: string;
  bridge: string;
  /** The parent the blog's NAD names, in the node's own network namespace. */
  parent: string;
  /** The kubelet's cgroup root ('/' for the first node; its pods go under <root>/kubepods). */
  cgroupRoot: string;
  /** Where kube-proxy's /healthz listens (polled from the host's namespace). */
  proxyHealthz: string;
  labels: Record<string, string>;
}

export const NODE1_SPEC: NodeSpec = {
  name: NODE.name,
  ip: NODE.ip,
  podCidr: NODE.podCidr,
  podRangeStart: '10.244.0.10',
  bridge: NODE.bridge,
  parent: NODE.parent,
  cgroupRoot: '/',
  proxyHealthz: '127.0.0.1:10256',
  labels: NODE.labels,
};

/**
 * The first node as it registers in the two-node cluster: with a zone label, as the second node
 * (zone-b), so the nodes are in two zones for topology (the single node keeps no zone).
 */
export const NODE1_ZONED_SPEC: NodeSpec = { ...NODE1_SPEC, labels: { ...NODE1_SPEC.labels, 'topology.kubernetes.io/zone': 'zone-a' } };

/**
 * The second node (startNode({ nodes: 2 })): its own network namespace `netns`, joined to the host
 * by a veth pair (`uplink` on the host, `eth0` inside) on the point-to-point subnet `linkCidr`;
 * its own mount namespace and cgroup root. Its `ens4` is one end of a veth whose other end is a
 * port of the segment bridge, beside the first node's ens4 peer (docs/decisions/0040-test-harness.md).
 */
export const NODE2 = {
  name: 'realnode2',
  ip: '10.244.1.1',
  podCidr: '10.244.1.0/24',
  bridge: 'rn2br0',
  netns: 'realnode2',
  /** Host end of the link to node 2's namespace, and the addresses on both ends. */
  uplink: 'rn2-up',
  hostLinkIp: '10.244.255.1',
  nodeLinkIp: '10.244.255.2',
  linkPrefix: 30,
  /** Host end of node 2's ens4 veth (a port of the segment bridge). */
  parentPeer: 'rn2-ens4',
  cgroupRoot: '/realnode2',
  labels: { multusservicedemo: 'true', 'topology.kubernetes.io/zone': 'zone-b' },
} as const;

export const NODE2_SPEC: NodeSpec = {
  name: NODE2.name,
  ip: NODE2.ip,
  podCidr: NODE2.podCidr,
  podRangeStart: '10.244.1.10',
  bridge: NODE2.bridge,
  parent: NODE.parent,
  cgroupRoot: NODE2.cgroupRoot,
  proxyHealthz: `${NODE2.ip}:10256`,
  labels: NODE2.labels,
};

/**
 * The shared L2 segment of the two-node cluster: a bridge in a network namespace of its own (so
 * the host's br_netfilter and iptables never see the bridged frames), with ports to both nodes'
 * ens4 and to external clients.
 */
export const SEGMENT = { netns: 'realnode-seg', bridge: 'seg0' } as const;

/** Where the node's files live: everything under `dir` except what the binaries hard-code. */
export interface NodeLayout {
  dir: string;
  cniBin: string;
  kubeconfig: string;
  ca: string;
  /** The node these files are for; the first node's when absent. */
  node?: NodeSpec;
}

export const layoutPaths = (dir: string) => ({
  containerdConfig: `${dir}/containerd/config.toml`,
  containerdSocket: `${dir}/containerd/containerd.sock`,
  cniConfDir: `${dir}/cni/net.d`,
  certsD: `${dir}/containerd/certs.d`,
  kubeletConfig: `${dir}/kubelet.yaml`,
  kubeletRoot: `${dir}/kubelet`,
  kubeProxyConfig: `${dir}/kube-proxy.yaml`,
  resolvConf: `${dir}/resolv.conf`,
  corefile: `${dir}/Corefile`,
  registryConfig: `${dir}/registry.yml`,
  logs: `${dir}/logs`,
});

/** The hard-coded place whereabouts reads its flat config from, whatever containerd's conf_dir is. */
export const WHEREABOUTS_FLAT_CONFIG = '/etc/cni/net.d/whereabouts.d/whereabouts.conf';

export function containerdConfig(l: NodeLayout): string {
  const p = layoutPaths(l.dir);
  return `version = 2
root = "${l.dir}/containerd/root"
state = "${l.dir}/containerd/state"
# Only the overlayfs snapshotter is used; the others probe the host for nothing.
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "${p.containerdSocket}"

[metrics]
  address = ""

[plugins."io.containerd.grpc.v1.cri"]
  # 1.6.20 defaults to pause:3.6, which the local registry does not carry.
  sandbox_image = "registry.k8s.io/pause:3.10.1"
  # root lacks CAP_SYS_RESOURCE here: runc cannot write a negative oom_score_adj without this.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "${l.dir}/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    # Debian's plugins live in /usr/lib/cni; containerd and Multus default to /opt/cni/bin.
    bin_dir = "${l.cniBin}"
    conf_dir = "${p.cniConfDir}"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".registry]
    # Without config_path the certs.d hosts.toml files are ignored.
    config_path = "${p.certsD}"
`;
}

/** certs.d/<host>/hosts.toml: every pull of that upstream host goes to the local registry only. */
export function hostsToml(): string {
  // server is the local registry too, so a missing image fails here instead of leaving the machine.
  return `server = "http://${NODE.registry}"

[host."http://${NODE.registry}"]
  capabilities = ["pull", "resolve"]
`;
}

/** The upstream hosts whose names the local registry serves. */
export const MIRRORED_HOSTS = ['docker.io', 'ghcr.io', 'registry.k8s.io', 'quay.io'] as const;

/** Multus thin plugin: the primary network (bridge + host-local) is its one delegate. */
export function multusConf(l: NodeLayout): string {
  const n = l.node ?? NODE1_SPEC;
  return JSON.stringify(
    {
      cniVersion: '0.3.1',
      name: 'multus-cni-network',
      type: 'multus',
      kubeconfig: l.kubeconfig,
      binDir: l.cniBin,
      cniDir: `${l.dir}/cni/multus`,
      logFile: `${l.dir}/logs/multus.log`,
      logLevel: 'error',
      delegates: [
        {
          cniVersion: '0.3.1',
          name: 'rnnet',
          plugins: [
            {
              type: 'bridge',
              bridge: n.bridge,
              isGateway: true,
              // Nothing leaves the machine, so no masquerade rules are needed.
              ipMasq: false,
              hairpinMode: true,
              ipam: {
                type: 'host-local',
                ranges: [[{ subnet: n.podCidr, rangeStart: n.podRangeStart, gateway: n.ip }]],
                routes: [{ dst: '0.0.0.0/0' }],
                dataDir: `${l.dir}/cni/host-local`,
              },
            },
          ],
        },
      ],
    },
    null,
    2,
  );
}

export function whereaboutsFlatConfig(l: NodeLayout): string {
  return JSON.stringify({ datastore: 'kubernetes', kubernetes: { kubeconfig: l.kubeconfig }, log_file: `${l.dir}/logs/whereabouts.log`, log_level: 'error' }, null, 2);
}

export function kubeletConfig(l: NodeLayout): string {
  const p = layoutPaths(l.dir);
  const n = l.node ?? NODE1_SPEC;
  return dump({
    apiVersion: 'kubelet.config.k8s.io/v1beta1',
    kind: 'KubeletConfiguration',
    // This VM mounts cgroup v1: v1.34 only warns when told not to fail.
    cgroupDriver: 'cgroupfs',
    failCgroupV1: false,
    failSwapOn: false,
    containerRuntimeEndpoint: `unix://${p.containerdSocket}`,
    address: n.ip,
    port: 10250,
    // The second node's pods live under their own root, beside the first node's /kubepods.
    ...(n.cgroupRoot === '/' ? {} : { cgroupRoot: n.cgroupRoot }),
    readOnlyPort: 0,
    healthzBindAddress: '127.0.0.1',
    healthzPort: 10248,
    clusterDNS: [NODE.dnsIp],
    clusterDomain: NODE.clusterDomain,
    // Only the cluster DNS: a pod's lookup never leaves the machine.
    resolvConf: p.resolvConf,
    authentication: { anonymous: { enabled: false }, webhook: { enabled: false }, x509: { clientCAFile: l.ca } },
    authorization: { mode: 'AlwaysAllow' },
    // A small shared test disk must not evict pods; images are never collected during a run.
    evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '1%', 'imagefs.available': '1%' },
    imageGCHighThresholdPercent: 100,
    imageGCLowThresholdPercent: 99,
    serializeImagePulls: false,
    // Faster status for tests: pods are seen Ready/NotReady sooner.
    nodeStatusUpdateFrequency: '4s',
    syncFrequency: '10s',
    // The tests stop containers on purpose (a sidecar under crictl stop, a killed policy sidecar)
    // and wait for the restart: the default crash-loop back-off (10 s doubling to 5 min) only adds
    // idle minutes. The node admin's knob (alpha in v1.34), not the product's.
    featureGates: { KubeletCrashLoopBackOffMax: true },
    crashLoopBackOff: { maxContainerRestartPeriod: '2s' },
  });
}

/** The kubelet's command line (both nodes): its files under the layout, its identity from the spec. */
export function kubeletFlags(l: NodeLayout, kubeconfig: string): string[] {
  const p = layoutPaths(l.dir);
  const n = l.node ?? NODE1_SPEC;
  return [
    `--config=${p.kubeletConfig}`,
    `--kubeconfig=${kubeconfig}`,
    `--root-dir=${p.kubeletRoot}`,
    `--cert-dir=${p.kubeletRoot}/pki`,
    `--hostname-override=${n.name}`,
    `--node-ip=${n.ip}`,
    `--node-labels=${Object.entries(n.labels)
      .map(([k, v]) => `${k}=${v}`)
      .join(',')}`,
    '--v=1',
  ];
}

export function kubeletResolvConf(): string {
  return `nameserver ${NODE.dnsIp}\n`;
}

export function kubeProxyConfig(l: NodeLayout): string {
  const n = l.node ?? NODE1_SPEC;
  return dump({
    apiVersion: 'kubeproxy.config.k8s.io/v1alpha1',
    kind: 'KubeProxyConfiguration',
    mode: 'iptables',
    clientConnection: { kubeconfig: l.kubeconfig },
    hostnameOverride: n.name,
    clusterCIDR: n.podCidr,
    bindAddress: n.ip,
    healthzBindAddress: n.proxyHealthz,
    metricsBindAddress: '127.0.0.1:10249',
    // Zeros mean "leave the host's conntrack sysctls alone".
    conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' },
    // Not "all addresses": that would set route_localnet for localhost node ports.
    nodePortAddresses: ['primary'],
    iptables: { localhostNodePorts: false },
  });
}

export function corefile(l: NodeLayout): string {
  // No forward plugin: names outside the cluster are not resolved, so nothing leaves the machine.
  return `.:53 {
    bind 127.0.0.1 ${NODE.ip}
    errors
    kubernetes ${NODE.clusterDomain} in-addr.arpa ip6.arpa {
        kubeconfig ${l.kubeconfig} test
        pods insecure
        ttl 5
    }
    cache 5
}
`;
}

export function registryConfig(storage: string): string {
  return dump({
    version: 0.1,
    log: { level: 'warn', accesslog: { disabled: true } },
    storage: { filesystem: { rootdirectory: storage }, delete: { enabled: true } },
    // The package's own config listens on every address; this one only on loopback.
    http: { addr: NODE.registry },
  });
}

/** The kube-dns Service and its hand-written slice to CoreDNS on the host. */
export function kubeDnsObjects(): object[] {
  const ports = [
    { name: 'dns', port: 53, protocol: 'UDP' },
    { name: 'dns-tcp', port: 53, protocol: 'TCP' },
  ];
  return [
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'kube-dns', namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns' } },
      spec: { clusterIP: NODE.dnsIp, ports: ports.map((p) => ({ ...p, targetPort: 53 })) },
    },
    {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: 'kube-dns-host',
        namespace: 'kube-system',
        labels: { 'kubernetes.io/service-name': 'kube-dns', 'endpointslice.kubernetes.io/managed-by': 'multus-proxy-test-harness' },
      },
      addressType: 'IPv4',
      endpoints: [{ addresses: [NODE.ip], conditions: { ready: true } }],
      ports,
    },
  ];
}

/**
 * Where an image named `name` is stored in the local registry: the upstream path without its host
 * (`multus-proxy:0.1.0` is docker.io's `library/multus-proxy:0.1.0`, as containerd normalises it).
 */
export function registryPath(name: string): { host: string; path: string } {
  const first = name.split('/')[0] ?? '';
  const hasHost = name.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
  if (hasHost) return { host: first, path: name.slice(first.length + 1) };
  return { host: 'docker.io', path: name.includes('/') ? name : `library/${name}` };
}
