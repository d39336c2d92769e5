/**
 * Small helpers over a RealNode for the real-node tests and `npm run demo:node`: pods, their
 * Multus network-status, the Service's slices, and curls from a client pod.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { RealNode } from '../harness/node.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1Pod, V1EndpointSlice } from '../../src/kube/types.js';
import { NETWORK_STATUS_ANNOTATION, INJECTION_LABEL, INJECTION_ENABLED } from '../../src/keys.js';

export const ROOT = resolve(import.meta.dirname, '..', '..');
export const BLOG = join(import.meta.dirname, 'blog');
export const BLOG_FILES = ['net-attach.yml', 'service.yml', 'deployment.yml', 'pod.yml'] as const;
export const SERVICE = 'multus-nginx-macvlan';
export const CLIENT = 'fedora-net1';
export const GREETING = 'This is multus-nginx-macvlan!';

export function blogFile(name: (typeof BLOG_FILES)[number]): string {
  return readFileSync(join(BLOG, name), 'utf8');
}

interface NetworkStatus {
  name: string;
  interface?: string;
  ips?: string[];
}

/** The addresses Multus recorded for `iface` (net1 by default) in the pod's network-status. */
export function net1Addresses(pod: V1Pod, iface = 'net1'): string[] {
  const raw = pod.metadata?.annotations?.[NETWORK_STATUS_ANNOTATION];
  if (!raw) return [];
  const list = JSON.parse(raw) as NetworkStatus[];
  return list.find((s) => s.interface === iface)?.ips ?? [];
}

export async function pods(node: RealNode, namespace: string, selector: string): Promise<V1Pod[]> {
  return (await node.client.list<V1Pod>(apiPath('', 'v1', 'pods', namespace), { labelSelector: selector })).items;
}

export async function pod(node: RealNode, namespace: string, name: string): Promise<V1Pod> {
  return node.client.get<V1Pod>(apiPath('', 'v1', 'pods', namespace, name));
}

/** Ready addresses of the project's slices of a Service. */
export async function sliceAddresses(node: RealNode, namespace: string, service: string): Promise<string[]> {
  const slices = await node.client.list<V1EndpointSlice>(apiPath('discovery.k8s.io', 'v1', 'endpointslices', namespace), {
    labelSelector: `kubernetes.io/service-name=${service},endpointslice.kubernetes.io/managed-by=multus-proxy-controller`,
  });
  return slices.items
    .flatMap((s) => s.endpoints ?? [])
    .filter((e) => e.conditions?.ready !== false)
    .flatMap((e) => e.addresses)
    .sort();
}

export async function createNamespace(node: RealNode, name: string, inject = true): Promise<void> {
  await node.kubectl(['create', 'namespace', name]);
  if (inject) await node.kubectl(['label', 'namespace', name, `${INJECTION_LABEL}=${INJECTION_ENABLED}`]);
  // The controller-manager creates the default ServiceAccount; pods are refused until it exists.
  for (let i = 0; i < 100; i++) {
    const r = await node.kubectlResult(['get', 'serviceaccount', 'default', '-n', name], { allowFail: true });
    if (r.code === 0) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`namespace ${name}: no default ServiceAccount after 10 s`);
}

/** Access-log lines `<client> -> <server>:80` of one nginx pod (the stand-in image logs these). */
export async function arrivals(node: RealNode, namespace: string, podName: string): Promise<{ from: string; to: string }[]> {
  const out = await node.kubectl(['logs', '-n', namespace, podName, '-c', 'web']);
  return out
    .split('\n')
    .map((l) => /^(\S+) -> (\S+):\d+$/.exec(l.trim()))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ from: m[1] ?? '', to: m[2] ?? '' }));
}

/** n curls from the client pod in one exec; the result per curl is "ok" or the curl exit code. */
export async function curlBurst(node: RealNode, namespace: string, client: string, url: string, n: number, container = CLIENT): Promise<string[]> {
  const script = `for i in $(seq ${n}); do if curl -s -m 2 -o /tmp/body ${url} && grep -q 'multus-nginx-macvlan' /tmp/body; then echo ok; else echo "fail:$?"; fi; done`;
  const r = await node.exec(namespace, client, ['sh', '-c', script], { container });
  if (r.code !== 0) throw new Error(`curl loop in ${namespace}/${client} failed: ${r.stderr}`);
  return r.stdout.trim().split('\n');
}

/** Curl results and, per backend pod, the arrivals their access logs gained meanwhile. */
export interface Burst {
  curls: string[];
  answeredBy: Record<string, number>;
  sources: string[];
}

/** Runs `send` and counts what each backend's access log gained meanwhile, and from which sources. */
export async function burstArrivals(node: RealNode, namespace: string, names: string[], send: () => Promise<string[]>): Promise<Burst> {
  const before: Record<string, number> = {};
  for (const p of names) before[p] = (await arrivals(node, namespace, p)).length;
  const curls = await send();
  const answeredBy: Record<string, number> = {};
  const sources = new Set<string>();
  for (const p of names) {
    const got = (await arrivals(node, namespace, p)).slice(before[p] ?? 0);
    answeredBy[p] = got.length;
    for (const a of got) sources.add(a.from);
  }
  return { curls, answeredBy, sources: [...sources].sort() };
}

/** The pid of a pod's sandbox (its network namespace, for nsenter). */
export async function podPid(node: RealNode, name: string, namespace: string): Promise<number> {
  const id = (await node.crictl(['pods', '--namespace', namespace, '--name', name, '--state', 'ready', '-q'])).trim().split('\n')[0] ?? '';
  if (id === '') throw new Error(`crictl: no ready sandbox for pod ${namespace}/${name}`);
  const info = JSON.parse(await node.crictl(['inspectp', id])) as { info?: { pid?: number } };
  const pid = info.info?.pid;
  if (pid === undefined || pid <= 0) throw new Error(`crictl inspectp ${id}: no pid`);
  return pid;
}
