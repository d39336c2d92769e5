/**
 * MetalLB on the real node: the load-balancer implementation beside multus-proxy's
 * LoadBalancer support. Built from its Go module by scripts/setup.sh (v0.15.2; docs/decisions/0042-image-and-build.md
 * says why not v0.16.2) into images named as its own `config/manifests/metallb-native.yaml`
 * names them, and installed from that manifest unchanged: its CRDs, its RBAC (the controller's
 * and the speaker's ServiceAccounts, nothing more), its securityContexts (the controller drops every
 * capability; the speaker runs in the host network with NET_RAW only, for ARP), its webhook.
 *
 * The configuration is docs/loadbalancer.md's, read from its tested block: an IPAddressPool on the
 * blog's network (10.1.1.0/24, ens4's macvlan segment) and an L2Advertisement that answers ARP on
 * ens4 only. No address of that subnet is outside whereabouts' range (the blog's NAD names the whole
 * /24), so the pool sits high (.200-.207), far above what whereabouts hands out from the low end and
 * apart from the node addresses the suite gives (.250; the tenant test's .240-.254); `poolTaken`
 * checks that no pod holds one.
 */
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { dump, loadAll } from 'js-yaml';
import { imagesDir, manifestsDir, type RealNode } from '../harness/node.js';
import { NODE } from '../harness/node-config.js';
import { net1Addresses, pods, ROOT, SERVICE } from './cluster.js';
import { until } from './tenant.js';
import { PROXY_NAME, PROXY_NAME_LABEL } from '../../src/keys.js';

const run = promisify(execFile);

export const METALLB_NAMESPACE = 'metallb-system';
export const metallbManifest = (): string => join(manifestsDir(), 'metallb-native.yaml');

/** MetalLB's Service annotation choosing the pool (MetalLB >= 0.13; `metallb.universe.tf/address-pool` before). */
export const POOL_ANNOTATION = 'metallb.io/address-pool';

/** The heading in docs/loadbalancer.md whose first yaml block is the tested MetalLB configuration. */
const CONFIG_HEADING = '### MetalLB: the pool and the announcement';

export interface PoolConfig {
  /** The pool's name: Services ask for it with the metallb.io/address-pool annotation. */
  name: string;
  first: string;
  last: string;
  /** The L2Advertisement's interfaces. */
  interfaces: string[];
  yaml: string;
}

interface MetalLBObject {
  kind: string;
  metadata: { name: string; namespace?: string };
  spec: { addresses?: string[]; ipAddressPools?: string[]; interfaces?: string[]; autoAssign?: boolean };
}

/** The IPv6 pool's heading there (the dual-stack test's, test/node/loadbalancer6.ts). */
export const CONFIG_HEADING_V6 = '### MetalLB: an IPv6 pool';

/** The yaml block under `heading` of docs/loadbalancer.md's MetalLB section, and what it says. */
export function poolConfig(doc = readFileSync(join(ROOT, 'docs', 'loadbalancer.md'), 'utf8'), heading = CONFIG_HEADING): PoolConfig {
  const at = doc.indexOf(heading);
  const yaml = at < 0 ? undefined : /```yaml\n([\s\S]*?)```/.exec(doc.slice(at))?.[1];
  if (yaml === undefined) throw new Error(`docs/loadbalancer.md has no yaml block under "${heading}"`);
  const objs = (loadAll(yaml) as MetalLBObject[]).filter(Boolean);
  const pool = objs.find((o) => o.kind === 'IPAddressPool');
  const l2 = objs.find((o) => o.kind === 'L2Advertisement');
  const range = /^(\d+\.\d+\.\d+\.\d+|[0-9a-f:]+)-(\d+\.\d+\.\d+\.\d+|[0-9a-f:]+)$/.exec(pool?.spec.addresses?.[0] ?? '');
  if (!pool || !l2 || !range?.[1] || !range[2]) throw new Error(`docs/loadbalancer.md's MetalLB block needs an IPAddressPool with a first-last range and an L2Advertisement: ${yaml}`);
  if (!l2.spec.ipAddressPools?.includes(pool.metadata.name)) throw new Error(`the L2Advertisement ${l2.metadata.name} does not name the pool ${pool.metadata.name}`);
  return { name: pool.metadata.name, first: range[1], last: range[2], interfaces: l2.spec.interfaces ?? [], yaml };
}

/** Pods holding a net1 address inside the pool: the pool would hand out an address in use. */
export async function poolTaken(node: RealNode, pool: PoolConfig): Promise<string[]> {
  const n = (ip: string): number => ip.split('.').reduce((a, b) => a * 256 + Number(b), 0);
  const [lo, hi] = [n(pool.first), n(pool.last)];
  const all = await pods(node, '', '');
  return all.flatMap((p) =>
    net1Addresses(p)
      .filter((a) => !a.includes(':') && n(a) >= lo && n(a) <= hi)
      .map((a) => `${p.metadata?.namespace}/${p.metadata?.name} ${a}`),
  );
}

export interface MetalLBInstall {
  /** ms from `kubectl apply -f metallb-native.yaml` to the controller Available and the speaker rolled out. */
  readyMs: number;
  /** ms until the pool and advertisement were accepted (MetalLB's own webhook serves once its certificate is made). */
  configuredMs: number;
  pool: PoolConfig;
}

/** MetalLB's manifest as its docs say (`kubectl apply -f metallb-native.yaml`), then docs/loadbalancer.md's pool. */
export async function installMetalLB(node: RealNode, log: (m: string) => void): Promise<MetalLBInstall> {
  const images = (JSON.parse(readFileSync(join(imagesDir(), 'images.json'), 'utf8')) as { name: string }[]).map((i) => i.name);
  if (!existsSync(metallbManifest()) || !images.some((n) => n.startsWith('quay.io/metallb/speaker:'))) {
    throw new Error(`MetalLB is not built: ${metallbManifest()} or its images in ${join(imagesDir(), 'images.json')} are missing; run scripts/setup.sh (it builds MetalLB from its Go module)`);
  }
  const pool = poolConfig();
  const taken = await poolTaken(node, pool);
  if (taken.length > 0) throw new Error(`pods hold addresses of the MetalLB pool ${pool.first}-${pool.last}: ${taken.join(', ')}`);
  const t0 = Date.now();
  await node.apply(metallbManifest());
  await node.kubectl(['rollout', 'status', '-n', METALLB_NAMESPACE, 'deployment/controller', '--timeout=180s'], { timeoutMs: 190_000 });
  await node.kubectl(['rollout', 'status', '-n', METALLB_NAMESPACE, 'daemonset/speaker', '--timeout=180s'], { timeoutMs: 190_000 });
  const readyMs = Date.now() - t0;
  log(`MetalLB controller and speaker ready ${readyMs} ms after apply`);
  // Its webhook answers only once the controller wrote its certificate and the caBundle: the
  // configuration is retried while the apiserver cannot call it yet, as a user would.
  for (let i = 0; ; i++) {
    const r = await node.kubectlResult(['apply', '-f', '-'], { input: pool.yaml, allowFail: true });
    if (r.code === 0) break;
    if (i >= 60 || !/failed calling webhook|connection refused|no endpoints available|x509|context deadline/.test(r.stderr)) throw new Error(`MetalLB configuration refused: ${r.stderr.trim()}`);
    await delay(1_000);
  }
  const configuredMs = Date.now() - t0;
  log(`MetalLB pool ${pool.name} (${pool.first}-${pool.last}) and L2Advertisement on ${pool.interfaces.join(', ')} applied ${configuredMs} ms after apply`);
  return { readyMs, configuredMs, pool };
}

/**
 * MetalLB and something independent of it (the node agent) installed side by side: both settle
 * before either's failure is thrown, so no install is still running when the caller cleans up.
 */
export async function besideMetalLB<T>(node: RealNode, log: (m: string) => void, other: Promise<T>): Promise<[T, MetalLBInstall]> {
  const [o, m] = await Promise.allSettled([other, installMetalLB(node, log)]);
  if (o.status === 'rejected') throw o.reason;
  if (m.status === 'rejected') throw m.reason;
  return [o.value, m.value];
}

/** The configuration, then MetalLB's manifest, deleted; resolves once its pods are gone. */
export async function uninstallMetalLB(node: RealNode): Promise<void> {
  await node.kubectlResult(['delete', '--ignore-not-found', '--wait=true', '-f', '-'], { input: poolConfig().yaml, allowFail: true });
  await node.kubectl(['delete', '--ignore-not-found', '--wait=true', '-f', metallbManifest()], { timeoutMs: 180_000 });
}

/** The ingress IPs MetalLB wrote into a Service's status (empty until it assigned one). */
export async function ingressIps(node: RealNode, namespace: string, service: string): Promise<string[]> {
  const out = await node.kubectl(['get', 'service', '-n', namespace, service, '-o', 'jsonpath={range .status.loadBalancer.ingress[*]}{.ip}{" "}{end}']);
  return out.trim().split(/\s+/).filter(Boolean);
}

/** MetalLB's record of who announces a Service in L2 mode: one ServiceL2Status per announcing node. */
export async function l2Announcers(node: RealNode, namespace: string, service: string): Promise<{ node: string; interfaces: string[] }[]> {
  const out = await node.kubectl(['get', 'servicel2statuses.metallb.io', '-n', METALLB_NAMESPACE, '-o', 'json']);
  const items = (JSON.parse(out) as { items: { status?: { node?: string; serviceName?: string; serviceNamespace?: string; interfaces?: { name?: string }[] } }[] }).items;
  return items
    .filter((i) => i.status?.serviceName === service && i.status.serviceNamespace === namespace)
    .map((i) => ({ node: i.status?.node ?? '', interfaces: (i.status?.interfaces ?? []).map((x) => x.name ?? '') }));
}

export interface AssignObservations {
  vip: string;
  announcers: { node: string; interfaces: string[] }[];
  /** Who answered ARP for the VIP from ens4's segment, and ens4's own MAC. */
  arpMac: string | undefined;
  ens4Mac: string;
  /** Host nat rules naming the VIP: kube-proxy must write none for a Service labelled for another proxy. */
  kubeProxyRules: string[];
  /** After the Service's deletion: MetalLB's announcement records and the ARP answer. */
  afterDelete: { announcers: number; arpMac: string | undefined };
}

const PROBE_SERVICE = 'metallb-probe';

/**
 * MetalLB and our Service label: a LoadBalancer Service labelled
 * `service.kubernetes.io/service-proxy-name: multus-proxy` (kube-proxy's opt-out) asks for the
 * pool. Does MetalLB assign and announce it, on ens4 only, and does kube-proxy stay away from it?
 */
export async function metallbAssigns(node: RealNode, pool: PoolConfig, probe: SegmentProbe): Promise<AssignObservations> {
  const svc = {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: PROBE_SERVICE, namespace: 'default', labels: { [PROXY_NAME_LABEL]: PROXY_NAME }, annotations: { [POOL_ANNOTATION]: pool.name } },
    spec: { type: 'LoadBalancer', selector: { app: SERVICE }, ports: [{ protocol: 'TCP', port: 80 }] },
  };
  await node.apply(dump(svc));
  try {
    const vip = await until(`MetalLB's address for ${PROBE_SERVICE}`, 30_000, async () => (await ingressIps(node, 'default', PROBE_SERVICE))[0]);
    const announcers = await until(`MetalLB's ServiceL2Status for ${PROBE_SERVICE}`, 30_000, async () => {
      const a = await l2Announcers(node, 'default', PROBE_SERVICE);
      return a.length > 0 ? a : undefined;
    });
    const arpMac = await probe.arpOwner(vip);
    const nat = (await host(['iptables-save', '-t', 'nat'])).split('\n');
    const kubeProxyRules = nat.filter((l) => l.includes(` ${vip}/32`) || l.includes(` ${vip} `));
    await node.kubectl(['delete', 'service', '-n', 'default', PROBE_SERVICE, '--wait=true']);
    await until(`the ServiceL2Status of ${PROBE_SERVICE} to go`, 30_000, async () => ((await l2Announcers(node, 'default', PROBE_SERVICE)).length === 0 ? true : undefined)).catch(() => false);
    const afterDelete = { announcers: (await l2Announcers(node, 'default', PROBE_SERVICE)).length, arpMac: await probe.arpOwner(vip) };
    return { vip, announcers, arpMac, ens4Mac: hostMac(NODE.parent), kubeProxyRules, afterDelete };
  } finally {
    await node.kubectl(['delete', 'service', '-n', 'default', '--ignore-not-found', PROBE_SERVICE]);
  }
}

export interface MetalLBObservations {
  install: MetalLBInstall;
  assign: AssignObservations;
  /** MetalLB objects left after its uninstall (CRDs, namespace). */
  leftAfterUninstall: string[];
}

/** Install, the assignment check from ens4's segment, uninstall (whether it passed or not). */
export async function runMetalLB(node: RealNode, log: (m: string) => void): Promise<MetalLBObservations> {
  const probe = new SegmentProbe('mpxtest-metallb', 'mpxtestmlb0', '198.51.100.20/24');
  let install: MetalLBInstall;
  let assign: AssignObservations;
  try {
    install = await installMetalLB(node, log);
    await probe.create();
    assign = await metallbAssigns(node, install.pool, probe);
    log(
      `MetalLB gave ${assign.vip}, announced by ${JSON.stringify(assign.announcers)}, ARP answered by ${assign.arpMac} (ens4 ${assign.ens4Mac}); after deletion ${JSON.stringify(assign.afterDelete)}`,
    );
  } finally {
    await probe.remove();
    await uninstallMetalLB(node);
  }
  const crds = (await node.kubectl(['get', 'crd', '-o', 'name'])).split('\n').filter((l) => l.includes('metallb.io'));
  const ns = (await node.kubectlResult(['get', 'namespace', METALLB_NAMESPACE, '-o', 'name'], { allowFail: true })).stdout.trim();
  return { install, assign, leftAfterUninstall: [...crds, ...(ns ? [ns] : [])] };
}

/** A network namespace on ens4's segment (a macvlan on the far end of its veth), to look at ARP from outside. */
export class SegmentProbe {
  constructor(
    readonly ns: string,
    readonly link: string,
    readonly address: string,
  ) {}

  async create(): Promise<void> {
    await host(['ip', 'netns', 'add', this.ns]);
    await host(['ip', 'link', 'add', this.link, 'link', NODE.parentPeer, 'type', 'macvlan', 'mode', 'bridge']);
    await host(['ip', 'link', 'set', this.link, 'netns', this.ns]);
    await host(['ip', '-n', this.ns, '-batch', '-'], ['link set lo up', `addr add ${this.address} dev ${this.link}`, `link set ${this.link} up`, ''].join('\n'));
  }

  /** The MAC address that answers ARP for `ip` on the segment, or undefined when nobody does. */
  async arpOwner(ip: string): Promise<string | undefined> {
    await host(['ip', '-n', this.ns, 'neigh', 'flush', 'dev', this.link]).catch(() => '');
    await this.onLink(ip);
    // Any packet makes the kernel ask; the answer (or not) is what the neighbour table holds after.
    await host(['ip', 'netns', 'exec', this.ns, 'ping', '-c', '1', '-W', '1', ip]).catch(() => '');
    const out = await host(['ip', '-n', this.ns, 'neigh', 'show', ip, 'dev', this.link]);
    return /lladdr (\S+)/.exec(out)?.[1];
  }

  /** Another address on the probe's link (a second client, e.g. outside loadBalancerSourceRanges). */
  async addAddress(cidr: string): Promise<void> {
    await host(['ip', '-n', this.ns, 'addr', 'add', cidr, 'dev', this.link]);
  }

  /** `ip` is on the segment: the probe asks ARP (NDP for IPv6) for it instead of using a gateway. */
  async onLink(ip: string): Promise<void> {
    await host(['ip', '-n', this.ns, 'route', 'replace', `${ip}/${ip.includes(':') ? 128 : 32}`, 'dev', this.link]);
  }

  /**
   * n curls of `url` from the probe, each "ok" (answered with `expect` in the body) or
   * "fail:<curl exit code>"; `from` picks the source address (curl --interface).
   */
  async curls(url: string, n: number, opts: { from?: string; expect?: string; timeoutS?: number } = {}): Promise<string[]> {
    const body = `/tmp/${this.ns}.body`;
    const from = opts.from ? `--interface ${opts.from} ` : '';
    const check = opts.expect ? ` && grep -q '${opts.expect}' ${body}` : '';
    const script = `for i in $(seq ${n}); do if curl -s -m ${opts.timeoutS ?? 2} ${from}-o ${body} ${url}${check}; then echo ok; else echo "fail:$?"; fi; done; rm -f ${body}`;
    return (await host(['ip', 'netns', 'exec', this.ns, 'sh', '-c', script])).trim().split('\n');
  }

  /** One HTTP GET from the probe: status and body (status 0 when nothing answered). */
  async get(url: string): Promise<{ status: number; body: string }> {
    const out = await host(['ip', 'netns', 'exec', this.ns, 'curl', '-s', '-m', '3', '-w', '\n%{http_code}', url]).catch((e: { stdout?: string }) => e.stdout ?? '\n0');
    const i = out.lastIndexOf('\n');
    return { status: Number(out.slice(i + 1)) || 0, body: out.slice(0, i) };
  }

  async remove(): Promise<void> {
    await host(['ip', 'netns', 'del', this.ns]).catch(() => '');
  }
}

/** The hardware address of a host interface (what MetalLB answers ARP with on it). */
export function hostMac(ifname: string): string {
  return readFileSync(`/sys/class/net/${ifname}/address`, 'utf8').trim();
}

async function host(args: string[], input?: string): Promise<string> {
  const [cmd = '', ...rest] = args;
  const p = run(cmd, rest, { encoding: 'utf8' });
  if (input !== undefined) p.child.stdin?.end(input);
  return (await p).stdout;
}
