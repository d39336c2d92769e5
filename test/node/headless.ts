/**
 * A headless Service (service-selector annotation) over a StatefulSet, resolved by real CoreDNS
 * from the controller's slices: the Service name, per-pod names and SRV records.
 */
import { dump } from 'js-yaml';
import type { RealNode } from '../harness/node.js';
import { blogFile, createNamespace, net1Addresses, pods, sliceAddresses } from './cluster.js';

export const NS = 'headless-check';
const SVC = 'web';

export interface HeadlessObservations {
  net1: Record<string, string>;
  eth0: string[];
  slice: string[];
  serviceA: string[];
  web0A: string[];
  srv: string[];
  /** Per StatefulSet pod: the node it ran on, and what its own name resolved to. */
  nodeOf: Record<string, string>;
  perPodA: Record<string, string[]>;
}

/** Two nodes (startNode({ nodes: 2 })): one member per node, the dig pod on `digOn`. */
export interface HeadlessOptions {
  spread?: boolean;
  digOn?: string;
}

// One member per node when asked: the hostname topology key with DoNotSchedule.
const spreadConstraint = { maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'DoNotSchedule', labelSelector: { matchLabels: { app: 'web' } } };

const objects = (o: HeadlessOptions = {}): object[] => [
  {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: SVC,
      annotations: { 'k8s.v1.cni.cncf.io/service-network': 'macvlan1', 'k8s.v1.cni.cncf.io/service-selector': 'app=web' },
    },
    spec: { clusterIP: 'None', ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
  },
  {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: SVC },
    spec: {
      serviceName: SVC,
      replicas: 2,
      podManagementPolicy: 'Parallel',
      selector: { matchLabels: { app: 'web' } },
      template: {
        metadata: { labels: { app: 'web' }, annotations: { 'k8s.v1.cni.cncf.io/networks': 'macvlan1' } },
        spec: {
          ...(o.spread ? { topologySpreadConstraints: [spreadConstraint] } : {}),
          containers: [{ name: 'web', image: 'ghcr.io/redhat-nfvpe/multus-service-demo:fedora-nginx', ports: [{ name: 'http', containerPort: 80 }] }],
        },
      },
    },
  },
  {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'dig' },
    spec: { ...(o.digOn ? { nodeName: o.digOn } : {}), containers: [{ name: 'dig', image: 'ghcr.io/redhat-nfvpe/multus-service-demo:fedora-tools' }] },
  },
];

async function dig(node: RealNode, args: string[]): Promise<string[]> {
  const r = await node.exec(NS, 'dig', ['dig', '+short', ...args]);
  return r.stdout.trim().split('\n').filter(Boolean).sort();
}

export async function runHeadless(node: RealNode, opts: HeadlessOptions = {}): Promise<HeadlessObservations> {
  await createNamespace(node, NS, false);
  await node.apply(blogFile('net-attach.yml'), NS);
  await node.apply(
    objects(opts)
      .map((o) => dump(o))
      .join('---\n'),
    NS,
  );
  await node.wait('statefulset/web', 'jsonpath={.status.readyReplicas}=2', { namespace: NS, timeoutMs: 180_000 });
  await node.wait('pod/dig', 'condition=Ready', { namespace: NS, timeoutMs: 120_000 });
  const net1: Record<string, string> = {};
  const eth0: string[] = [];
  const nodeOf: Record<string, string> = {};
  for (const p of await pods(node, NS, 'app=web')) {
    net1[p.metadata?.name ?? ''] = net1Addresses(p)[0] ?? '';
    nodeOf[p.metadata?.name ?? ''] = p.spec?.nodeName ?? '';
    eth0.push(...(p.status?.podIPs ?? []).map((x) => x.ip));
  }
  const want = JSON.stringify(Object.values(net1).sort());
  let slice: string[] = [];
  for (let i = 0; i < 100 && JSON.stringify(slice) !== want; i++) {
    slice = await sliceAddresses(node, NS, SVC);
    if (JSON.stringify(slice) !== want) await new Promise((r) => setTimeout(r, 200));
  }
  // CoreDNS caches for up to 5 s: ask until the answer is the slice's (or give up with what it says).
  const fqdn = `${SVC}.${NS}.svc.cluster.local`;
  let serviceA: string[] = [];
  for (let i = 0; i < 30; i++) {
    serviceA = await dig(node, [fqdn]);
    if (JSON.stringify(serviceA) === want) break;
    await new Promise((r) => setTimeout(r, 500));
  }
  const web0A = await dig(node, [`web-0.${fqdn}`]);
  const srv = await dig(node, ['SRV', `_http._tcp.${fqdn}`]);
  const perPodA: Record<string, string[]> = {};
  for (const name of Object.keys(net1)) perPodA[name] = name === 'web-0' ? web0A : await dig(node, [`${name}.${fqdn}`]);
  await node.kubectl(['delete', 'namespace', NS, '--wait=true', '--timeout=180s'], { timeoutMs: 190_000 });
  return { net1, eth0, slice, serviceA, web0A, srv, nodeOf, perPodA };
}
