/** The real node's rendered configuration keeps the quirks docs/node-harness.md found necessary. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { load } from 'js-yaml';
import { containerdConfig, corefile, hostsToml, kubeletConfig, kubeletFlags, kubeProxyConfig, multusConf, NODE1_ZONED_SPEC, NODE2_SPEC, registryPath } from '../../harness/node-config.js';
import { iptablesUndo, newNftTables, ownedCgroups } from '../../harness/node-host.js';

const layout = { dir: '/tmp/n', cniBin: '/c/cni-bin', kubeconfig: '/tmp/n/admin.kubeconfig', ca: '/tmp/n/pki/ca.crt' };

void test('containerd: runc works without CAP_SYS_RESOURCE, pause 3.10.1, certs.d honoured, private paths', () => {
  const c = containerdConfig(layout);
  assert.match(c, /restrict_oom_score_adj = true/);
  assert.match(c, /sandbox_image = "registry\.k8s\.io\/pause:3\.10\.1"/);
  assert.match(c, /config_path = "\/tmp\/n\/containerd\/certs\.d"/);
  assert.match(c, /SystemdCgroup = false/);
  assert.match(c, /bin_dir = "\/c\/cni-bin"/);
  for (const line of c.split('\n').filter((l) => /^\s*(root|state|address|Root|conf_dir) = "\//.test(l))) assert.match(line, /"\/tmp\/n\//, line);
});

void test('hosts.toml sends pulls to the local registry only', () => {
  const h = hostsToml();
  assert.match(h, /^server = "http:\/\/127\.0\.0\.1:5000"/);
  assert.match(h, /\[host\."http:\/\/127\.0\.0\.1:5000"\]\n\s+capabilities = \["pull", "resolve"\]/);
});

void test('kubelet: cgroup v1 and swap tolerated, cluster DNS only, cgroupfs', () => {
  const k = load(kubeletConfig(layout)) as Record<string, unknown>;
  assert.equal(k['failCgroupV1'], false);
  assert.equal(k['failSwapOn'], false);
  assert.equal(k['cgroupDriver'], 'cgroupfs');
  assert.deepEqual(k['clusterDNS'], ['10.96.0.10']);
  assert.equal(k['resolvConf'], '/tmp/n/resolv.conf');
});

void test('kubelet: a stopped container is restarted within 2 s (crash-loop back-off capped behind its v1.34 gate)', () => {
  const k = load(kubeletConfig(layout)) as Record<string, unknown>;
  assert.deepEqual(k['featureGates'], { KubeletCrashLoopBackOffMax: true });
  assert.deepEqual(k['crashLoopBackOff'], { maxContainerRestartPeriod: '2s' });
});

void test('kube-proxy: iptables mode, leaves conntrack sysctls and route_localnet alone', () => {
  const k = load(kubeProxyConfig(layout)) as Record<string, unknown>;
  assert.equal(k['mode'], 'iptables');
  assert.deepEqual(k['conntrack'], { maxPerCore: 0, min: 0, tcpEstablishedTimeout: '0s', tcpCloseWaitTimeout: '0s' });
  assert.deepEqual(k['nodePortAddresses'], ['primary']);
});

void test('Multus thin config delegates to the bridge network; CoreDNS has no forwarder', () => {
  const m = JSON.parse(multusConf(layout)) as { type: string; binDir: string; delegates: { plugins: { type: string; bridge: string }[] }[] };
  assert.equal(m.type, 'multus');
  assert.equal(m.binDir, '/c/cni-bin');
  assert.equal(m.delegates[0]?.plugins[0]?.bridge, 'rnbr0');
  const c = corefile(layout);
  assert.match(c, /bind 127\.0\.0\.1 10\.244\.0\.1/);
  assert.match(c, /pods insecure/);
  assert.doesNotMatch(c, /forward/);
});

void test('second node: its own cgroup root, pod range, bridge and kube-proxy identity; the first node has no cgroupRoot line', () => {
  const l2 = { ...layout, dir: '/tmp/n/node2', node: NODE2_SPEC };
  const k = load(kubeletConfig(l2)) as Record<string, unknown>;
  assert.equal(k['cgroupRoot'], '/realnode2');
  assert.equal(k['address'], '10.244.1.1');
  assert.equal((load(kubeletConfig(layout)) as Record<string, unknown>)['cgroupRoot'], undefined);
  const kp = load(kubeProxyConfig(l2)) as Record<string, unknown>;
  assert.equal(kp['hostnameOverride'], 'realnode2');
  assert.equal(kp['clusterCIDR'], '10.244.1.0/24');
  // Polled from the host's namespace: not node 2's loopback.
  assert.equal(kp['healthzBindAddress'], '10.244.1.1:10256');
  const m = JSON.parse(multusConf(l2)) as { delegates: { plugins: { bridge: string; ipam: { ranges: { subnet: string; gateway: string }[][] } }[] }[] };
  assert.equal(m.delegates[0]?.plugins[0]?.bridge, 'rn2br0');
  assert.deepEqual(m.delegates[0]?.plugins[0]?.ipam.ranges[0]?.[0], { subnet: '10.244.1.0/24', rangeStart: '10.244.1.10', gateway: '10.244.1.1' });
  for (const line of containerdConfig(l2)
    .split('\n')
    .filter((x) => /^\s*(root|state|address|Root|conf_dir) = "\//.test(x)))
    assert.match(line, /"\/tmp\/n\/node2\//, line);
});

void test('zones: with two nodes the kubelets register in zone-a and zone-b; the single node has no zone label', () => {
  const labels = (node?: typeof NODE2_SPEC): string | undefined => kubeletFlags({ ...layout, ...(node ? { node } : {}) }, '/k').find((f) => f.startsWith('--node-labels='));
  assert.equal(labels(), '--node-labels=multusservicedemo=true');
  assert.equal(labels(NODE1_ZONED_SPEC), '--node-labels=multusservicedemo=true,topology.kubernetes.io/zone=zone-a');
  assert.equal(labels(NODE2_SPEC), '--node-labels=multusservicedemo=true,topology.kubernetes.io/zone=zone-b');
});

void test('registryPath: upstream path without the host, docker.io library names', () => {
  assert.deepEqual(registryPath('ghcr.io/redhat-nfvpe/multus-service-demo:fedora-nginx'), { host: 'ghcr.io', path: 'redhat-nfvpe/multus-service-demo:fedora-nginx' });
  assert.deepEqual(registryPath('multus-proxy:0.1.0'), { host: 'docker.io', path: 'library/multus-proxy:0.1.0' });
  assert.deepEqual(registryPath('docker.io/library/multus-proxy:0.1.0'), { host: 'docker.io', path: 'library/multus-proxy:0.1.0' });
  assert.deepEqual(registryPath('registry.k8s.io/pause:3.10.1'), { host: 'registry.k8s.io', path: 'pause:3.10.1' });
});

void test('iptablesUndo deletes only added rules and chains, in reverse, keeping duplicates that were there', () => {
  const before = ['*filter', ':INPUT ACCEPT [0:0]', ':FORWARD ACCEPT [0:0]', ':OTHER - [0:0]', '-A FORWARD -j OTHER', '-A INPUT -j ACCEPT', 'COMMIT', ''].join('\n');
  const after = [
    '*filter',
    ':INPUT ACCEPT [0:0]',
    ':FORWARD ACCEPT [0:0]',
    ':OTHER - [0:0]',
    ':KUBE-FORWARD - [0:0]',
    '-A FORWARD -j KUBE-FORWARD',
    '-A FORWARD -j OTHER',
    '-A INPUT -j ACCEPT',
    '-A INPUT -j ACCEPT',
    '-A KUBE-FORWARD -j ACCEPT',
    'COMMIT',
    '*mangle',
    ':FORWARD ACCEPT [0:0]',
    '-A FORWARD -i rnbr0 -o eth0 -j DROP',
    'COMMIT',
    '',
  ].join('\n');
  assert.equal(
    iptablesUndo(before, after),
    ['*filter', '-D INPUT -j ACCEPT', '-D FORWARD -j KUBE-FORWARD', '-F KUBE-FORWARD', '-X KUBE-FORWARD', 'COMMIT', '*mangle', '-D FORWARD -i rnbr0 -o eth0 -j DROP', 'COMMIT', ''].join('\n'),
  );
  assert.equal(iptablesUndo(before, before), '');
});

void test("ownedCgroups: only the nodes' own top-level cgroups (kubepods, a second node's root), never another test's", () => {
  assert.deepEqual(ownedCgroups(['kubepods', 'mpx-imgtest-26777'], {}), ['kubepods']);
  assert.deepEqual(ownedCgroups(['kubepods', 'realnode2', 'other'], { moreCgroupRoots: ['/realnode2'] }), ['kubepods', 'realnode2']);
  assert.deepEqual(ownedCgroups(['realnode2'], {}), []);
});

void test("newNftTables: tables the node added, not iptables-nft's own nor those there before", () => {
  const before = ['ip filter', 'inet other_firewall'];
  const now = ['ip filter', 'ip nat', 'ip6 mangle', 'inet other_firewall', 'inet multus_proxy_node', 'bridge filter', 'ip mynat'];
  assert.deepEqual(newNftTables(before, now), ['inet multus_proxy_node', 'ip mynat']);
  assert.deepEqual(newNftTables(now, now), []);
});
