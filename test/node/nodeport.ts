/**
 * The node agent on the real node: the DaemonSet from the project's image, installed as
 * docs/node-agent.md says (the bootstrap install plus the node-agent component), the Node given
 * its address and parent (ens4) on the blog's network by the documented annotations, and two NodePort Services on
 * the blog's nginx pods (Cluster and Local). A client in a network namespace the test creates,
 * attached to the other end of ens4's veth (a macvlan on `ens4-peer`), curls
 * `<node address>:<nodePort>`. Afterwards the agent is removed as the docs' Uninstall says
 * (`--cleanup` in each agent pod, then delete), and the host is checked for anything of it left.
 *
 * The client's address is off the pods' subnet (198.51.100.0/24, TEST-NET-2, on the same L2 segment,
 * routed by the node through its agent interface): with Local the pods answer the client's own
 * address, and only an off-link client's replies go back through the node (docs/node-agent.md,
 * "Local needs the reply path through the node").
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { promisify } from 'node:util';
import { dump, loadAll } from 'js-yaml';
import type { RealNode } from '../harness/node.js';
import { NODE } from '../harness/node-config.js';
import { arrivals, burstArrivals, curlBurst, pods, ROOT, SERVICE, sliceAddresses, type Burst } from './cluster.js';
import { buildOverlay } from './netservice.js';
import { NODE_ADDRESSES_ANNOTATION, NODE_PARENTS_ANNOTATION } from '../../src/keys.js';
import { NFT_FAMILY } from '../../src/dataplane/nftables/render.js';
import { NODE_NFT_TABLE } from '../../cmd/node-agent/nft-rules.js';

const run = promisify(execFile);

/** The node's address on the blog's network (whereabouts hands out the low end of 10.1.1.0/24). */
export const NODE_ADDRESS = '10.1.1.250';
const CLIENT_NS = 'mpxtest-nodeport-client';
const CLIENT_LINK = 'mpxtestnp0';
export const CLIENT_ADDRESS = '198.51.100.10';
const CLIENT_SUBNET = '198.51.100.0/24';
/** The component's own namespace (Pod Security 'privileged'; deploy/components/node-agent). */
export const AGENT_NAMESPACE = 'multus-proxy-node';
export const AGENT_SELECTOR = 'app.kubernetes.io/component=node-agent';

export interface NodePortObservations {
  /** Seconds from apply to the agent pod Ready (its first sync). */
  readyMs: number;
  agentInterface: string;
  nodePorts: { cluster: number; local: number };
  backends: string[];
  /** Per policy: curl results ("ok"/"fail:<code>") and arrivals per backend by source address. */
  cluster: { curls: string[]; answeredBy: Record<string, number>; sources: string[] };
  local: { curls: string[]; answeredBy: Record<string, number>; sources: string[] };
  /** A hostNetwork pod (dnsPolicy ClusterFirstWithHostNet) curling the blog Service by name: per curl "ok"/"fail:<code>", and the sources the backends saw. */
  hostNetwork: { curls: string[]; sources: string[] };
  /** After the docs' uninstall: agent links, MPXN rules and proto-242 routes still on the host. */
  leftAfterCleanup: string[];
}

/** The bootstrap install plus the node-agent component, as an overlay in the node's folder. */
export function agentOverlay(node: RealNode, withAgent: boolean): string {
  const dir = join(node.dir, withAgent ? 'node-agent-install' : 'bootstrap-install');
  mkdirSync(dir, { recursive: true });
  const k: Record<string, unknown> = { resources: [relative(dir, join(ROOT, 'deploy', 'overlays', 'bootstrap'))] };
  if (withAgent) k['components'] = [relative(dir, join(ROOT, 'deploy', 'components', 'node-agent'))];
  writeFileSync(join(dir, 'kustomization.yaml'), dump(k));
  return dir;
}

interface Obj {
  kind: string;
  metadata: { name: string; namespace?: string };
}
const key = (o: Obj): string => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;

/** The objects the component adds to the install: what its uninstall deletes, nothing more. */
async function componentObjects(node: RealNode): Promise<string> {
  const docs = async (withAgent: boolean): Promise<Obj[]> => (loadAll(await node.sh(buildOverlay(agentOverlay(node, withAgent)))) as Obj[]).filter(Boolean);
  const base = new Set((await docs(false)).map(key));
  return (await docs(true))
    .filter((o) => !base.has(key(o)))
    .map((o) => dump(o))
    .join('---\n');
}

/**
 * The commands of docs/node-agent.md's Uninstall block (continuation lines joined), with its
 * `kubectl delete -k deploy/overlays/node-agent` (the cert-manager flavour) replaced by `deleteLine`.
 */
export function agentUninstallCommands(deleteLine: string): string[] {
  const doc = readFileSync(join(ROOT, 'docs', 'node-agent.md'), 'utf8');
  const block = /\*\*Uninstall\.\*\*[\s\S]*?```sh\n([\s\S]*?)```/.exec(doc)?.[1];
  if (!block) throw new Error('docs/node-agent.md has no Uninstall sh block');
  // One command per line; a line ending in "|" or "\\", or inside an open single quote, continues.
  const cmds: string[] = [];
  let cur = '';
  for (const raw of block.split('\n')) {
    const l = raw.trim();
    if (cur === '' && (l === '' || l.startsWith('#'))) continue;
    cur = cur ? `${cur} ${l}` : l;
    const openQuote = (cur.match(/'/g)?.length ?? 0) % 2 === 1;
    if (openQuote || /[|\\]$/.test(l)) {
      cur = cur.replace(/\\$/, '');
      continue;
    }
    cmds.push(cur);
    cur = '';
  }
  const out = cmds.map((c) => (/^kubectl delete -k deploy\/overlays\/node-agent$/.test(c) ? deleteLine : c));
  if (!out.includes(deleteLine)) throw new Error(`docs/node-agent.md's Uninstall block has no "kubectl delete -k deploy/overlays/node-agent": ${cmds.join(' ;; ')}`);
  const patchFile = /--patch-file (\S+)/.exec(cmds.join('\n'))?.[1];
  const patch = patchFile === undefined ? '' : readFileSync(join(ROOT, patchFile), 'utf8');
  if (!out.some((c) => c.includes('--cleanup')) && !patch.includes('--cleanup')) throw new Error("docs/node-agent.md's Uninstall block does not run --cleanup (in a command or its --patch-file)");
  return out;
}

async function host(args: string[], input?: string): Promise<string> {
  const [cmd = '', ...rest] = args;
  const p = run(cmd, rest, { encoding: 'utf8' });
  if (input !== undefined) p.child.stdin?.end(input);
  return (await p).stdout;
}

/** What of the agent is on the host: its links, its chains/rules, its routes. */
export async function agentOnHost(): Promise<string[]> {
  const out: string[] = [];
  for (const l of (await host(['ip', '-o', 'link', 'show'])).split('\n')) {
    const m = /^\d+: (mpx[hb][^:@]*)/.exec(l);
    if (m?.[1]) out.push(`link ${m[1]}`);
  }
  for (const save of ['iptables-save', 'ip6tables-save', 'iptables-legacy-save', 'ip6tables-legacy-save']) {
    const r = await host([save]).catch(() => '');
    for (const l of r.split('\n')) if (l.includes('MPXN')) out.push(`${save}: ${l}`);
  }
  const table = await host(['nft', 'list', 'table', NFT_FAMILY, NODE_NFT_TABLE]).catch(() => '');
  if (table.trim()) out.push(`nft table ${NFT_FAMILY} ${NODE_NFT_TABLE}`);
  for (const fam of ['-4', '-6']) for (const l of (await host(['ip', fam, 'route', 'show', 'table', 'all', 'proto', '242'])).split('\n')) if (l.trim()) out.push(`route ${l.trim()}`);
  return out;
}

function nodePortService(name: string, policy: 'Cluster' | 'Local'): unknown {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: 'default', labels: { 'service.kubernetes.io/service-proxy-name': 'multus-proxy' }, annotations: { 'k8s.v1.cni.cncf.io/service-network': 'macvlan1' } },
    spec: { type: 'NodePort', externalTrafficPolicy: policy, selector: { app: SERVICE }, ports: [{ protocol: 'TCP', port: 80 }] },
  };
}

async function curls(url: string, n: number): Promise<string[]> {
  const script = `for i in $(seq ${n}); do if curl -s -m 2 -o /tmp/${CLIENT_NS}.body ${url} && grep -q 'multus-nginx-macvlan' /tmp/${CLIENT_NS}.body; then echo ok; else echo "fail:$?"; fi; done; rm -f /tmp/${CLIENT_NS}.body`;
  return (await host(['ip', 'netns', 'exec', CLIENT_NS, 'sh', '-c', script])).trim().split('\n');
}

const burst = (node: RealNode, names: string[], url: string, n: number): Promise<Burst> => burstArrivals(node, 'default', names, () => curls(url, n));

async function until<T>(what: string, timeoutMs: number, f: () => Promise<T | undefined>): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await f().catch(() => undefined);
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await delay(250);
  }
}

type Measured = Omit<NodePortObservations, 'leftAfterCleanup'>;

/** Runs the check; the agent is uninstalled (as the docs say) whether it passed or not. */
export async function runNodePort(node: RealNode, log: (m: string) => void, n = 30): Promise<NodePortObservations> {
  let measured: Measured;
  try {
    measured = await measure(node, log, n);
  } catch (e) {
    await uninstallAgent(node, log).catch((u: Error) => log(`uninstall after the failure failed too: ${u.message}`));
    throw e;
  }
  await uninstallAgent(node, log);
  return { ...measured, leftAfterCleanup: await agentOnHost() };
}

async function measure(node: RealNode, log: (m: string) => void, n: number): Promise<Measured> {
  const overlay = agentOverlay(node, true);
  const t0 = Date.now();
  await node.sh(`${buildOverlay(overlay)} | kubectl apply -f -`);
  // The admin's: the node's address and parent on the blog's network (docs/node-agent.md).
  await node.kubectl(['annotate', 'node', NODE.name, '--overwrite', `${NODE_ADDRESSES_ANNOTATION}=default/macvlan1=${NODE_ADDRESS}/24`, `${NODE_PARENTS_ANNOTATION}=default/macvlan1=${NODE.parent}`]);
  await node.kubectl(['rollout', 'status', '-n', AGENT_NAMESPACE, 'daemonset/multus-proxy-node', '--timeout=180s'], { timeoutMs: 190_000 });
  await node.kubectl(['wait', '-n', AGENT_NAMESPACE, '--for=condition=Ready', 'pod', '-l', AGENT_SELECTOR, '--timeout=120s'], { timeoutMs: 130_000 });
  const readyMs = Date.now() - t0;
  log(`node agent Ready (first sync) ${readyMs} ms after apply`);

  await node.apply([nodePortService('nginx-nodeport', 'Cluster'), nodePortService('nginx-nodeport-local', 'Local')].map((o) => dump(o)).join('---\n'));
  const nodePort = async (svc: string): Promise<number> => Number(await node.kubectl(['get', 'service', '-n', 'default', svc, '-o', 'jsonpath={.spec.ports[0].nodePort}']));
  const nodePorts = { cluster: await nodePort('nginx-nodeport'), local: await nodePort('nginx-nodeport-local') };
  const backendPods = (await pods(node, 'default', `app=${SERVICE}`)).filter((p) => !p.metadata?.deletionTimestamp);
  const names = backendPods.map((p) => p.metadata?.name ?? '');
  for (const svc of ['nginx-nodeport', 'nginx-nodeport-local']) {
    await until(`the slices of ${svc}`, 30_000, async () => ((await sliceAddresses(node, 'default', svc)).length === names.length ? true : undefined));
  }
  const agentInterface = await until('the agent interface on ens4 with the node address', 30_000, async () => {
    const out = await host(['ip', '-o', '-4', 'addr', 'show', 'to', `${NODE_ADDRESS}/32`]);
    return /^\d+: (mpxh[^\s@]*)/.exec(out)?.[1];
  });
  log(`agent interface ${agentInterface} holds ${NODE_ADDRESS}; node ports Cluster ${nodePorts.cluster}, Local ${nodePorts.local}`);

  let cluster: NodePortObservations['cluster'];
  let local: NodePortObservations['local'];
  try {
    // This machine's uplink has used TEST-NET-1: refuse a client subnet the host already has.
    const taken = (await host(['ip', '-4', 'route', 'show', 'table', 'all'])).split('\n').filter((l) => l.includes(CLIENT_SUBNET.replace(/0\/24$/, '')));
    if (taken.length > 0) throw new Error(`the client subnet ${CLIENT_SUBNET} is in use on this host: ${taken.join('; ')}`);
    await host(['ip', 'netns', 'add', CLIENT_NS]);
    await host(
      ['ip', '-batch', '-'],
      [
        `link add ${CLIENT_LINK} link ${NODE.parentPeer} type macvlan mode bridge`,
        `link set ${CLIENT_LINK} netns ${CLIENT_NS}`,
        // The node reaches the client's subnet through its own interface on the segment.
        `route add ${CLIENT_SUBNET} dev ${agentInterface}`,
        '',
      ].join('\n'),
    );
    await host(
      ['ip', '-n', CLIENT_NS, '-batch', '-'],
      ['link set lo up', `addr add ${CLIENT_ADDRESS}/24 dev ${CLIENT_LINK}`, `link set ${CLIENT_LINK} up`, `route add ${NODE_ADDRESS}/32 dev ${CLIENT_LINK}`, ''].join('\n'),
    );
    // The rules follow the slices within a sync; the first answer tells they are in place.
    await until('a first answer through the node port', 30_000, async () => ((await curls(`http://${NODE_ADDRESS}:${nodePorts.cluster}/`, 1))[0] === 'ok' ? true : undefined));
    cluster = await burst(node, names, `http://${NODE_ADDRESS}:${nodePorts.cluster}/`, n);
    log(`Cluster: ${cluster.curls.filter((c) => c === 'ok').length}/${n} ok, by ${JSON.stringify(cluster.answeredBy)}, sources ${cluster.sources.join(', ')}`);
    local = await burst(node, names, `http://${NODE_ADDRESS}:${nodePorts.local}/`, n);
    log(`Local: ${local.curls.filter((c) => c === 'ok').length}/${n} ok, by ${JSON.stringify(local.answeredBy)}, sources ${local.sources.join(', ')}`);
  } finally {
    await host(['ip', 'netns', 'del', CLIENT_NS]).catch(() => '');
    await host(['ip', 'route', 'del', CLIENT_SUBNET, 'dev', agentInterface]).catch(() => '');
  }
  const hostNetwork = await hostNetworkClient(node, names, log);
  return { readyMs, agentInterface, nodePorts, backends: names, cluster, local, hostNetwork };
}

const HOSTNET_POD = 'hostnet-client';

/**
 * The agent's other half: the cluster IP for the node and hostNetwork pods. The pod resolves the
 * blog Service's name through CoreDNS (ClusterFirstWithHostNet) and its traffic leaves from the
 * node's address on the network. It attaches no network, so the webhook never sees it.
 */
async function hostNetworkClient(node: RealNode, names: string[], log: (m: string) => void): Promise<{ curls: string[]; sources: string[] }> {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: HOSTNET_POD, namespace: 'default' },
    spec: {
      hostNetwork: true,
      dnsPolicy: 'ClusterFirstWithHostNet',
      terminationGracePeriodSeconds: 1,
      containers: [{ name: 'client', image: 'ghcr.io/redhat-nfvpe/multus-service-demo:fedora-tools', command: ['/sbin/init'] }],
    },
  };
  try {
    await node.apply(dump(pod));
    await node.kubectl(['wait', '-n', 'default', '--for=condition=Ready', `pod/${HOSTNET_POD}`, '--timeout=120s'], { timeoutMs: 130_000 });
    const before = new Map<string, number>();
    for (const p of names) before.set(p, (await arrivals(node, 'default', p)).length);
    const curls = await curlBurst(node, 'default', HOSTNET_POD, `http://${SERVICE}.default.svc.cluster.local/`, 10, 'client');
    const sources = new Set<string>();
    for (const p of names) for (const a of (await arrivals(node, 'default', p)).slice(before.get(p) ?? 0)) sources.add(a.from);
    log(`hostNetwork pod by name: ${curls.filter((c) => c === 'ok').length}/10 ok, sources ${[...sources].join(', ')}`);
    return { curls, sources: [...sources].sort() };
  } finally {
    await node.kubectl(['delete', 'pod', '-n', 'default', '--ignore-not-found', '--wait=true', HOSTNET_POD]).catch(() => '');
  }
}

/** The test's Services and annotation go, then docs/node-agent.md's Uninstall: --cleanup in each agent pod, then the delete. */
export async function uninstallAgent(node: RealNode, log: (m: string) => void): Promise<void> {
  const t0 = Date.now();
  await node.kubectl(['delete', 'service', '-n', 'default', '--ignore-not-found', 'nginx-nodeport', 'nginx-nodeport-local', '--wait=true']);
  await node.kubectl(['annotate', 'node', NODE.name, `${NODE_ADDRESSES_ANNOTATION}-`, `${NODE_PARENTS_ANNOTATION}-`]);
  const objects = await componentObjects(node);
  const deleteFile = join(node.dir, 'node-agent-component.yaml');
  writeFileSync(deleteFile, objects);
  for (const c of agentUninstallCommands(`kubectl delete --wait=true -f ${deleteFile}`)) {
    log(`$ ${c}`);
    await node.sh(c, { timeoutMs: 180_000 });
  }
  await until('the agent pods to be gone', 120_000, async () =>
    (await node.kubectlResult(['get', 'pods', '-n', AGENT_NAMESPACE, '-l', AGENT_SELECTOR, '-o', 'name'], { allowFail: true })).stdout.trim() === '' ? true : undefined,
  );
  log(`node agent uninstalled in ${Date.now() - t0} ms`);
}
