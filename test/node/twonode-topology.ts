/**
 * Where a client is, on two real nodes in two zones (test/node/twonode.test.ts): the nodes register
 * with topology.kubernetes.io/zone zone-a and zone-b (test/harness/node-config.ts), the apiserver
 * copies the label onto pods (PodTopologyLabels), and the webhook's NODE_NAME and NODE_ZONE reach
 * each client's sidecar (docs/decisions/0161-sidecar-node-and-zone.md). Over the blog's two nginx
 * replicas (one per node) and its two clients (one per node):
 * - what each sidecar runs with: its node and zone in its process environment;
 * - internalTrafficPolicy Local: each client reaches only its own node's replica; with that replica
 *   out of the Service, the client's connections are dropped (time out, not refused) and the
 *   other client is unaffected;
 * - trafficDistribution PreferClose: each client stays in its zone; with its zone's replica out of
 *   the Service, the client falls back to the other zone's.
 * Each Service selects the replicas by a label of its own, so one node's endpoint leaves the
 * Service while the pod keeps running (the later tests use the blog's replicas as they were).
 */
import { readFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';
import { dump } from 'js-yaml';
import type { RealNode } from '../harness/node.js';
import { NODE, NODE2 } from '../harness/node-config.js';
import { arrivals, CLIENT, net1Addresses, pod, pods, SERVICE } from './cluster.js';
import { waitFor } from './blog.js';
import { CLIENTS } from './twonode.js';
import { MANAGED_BY, SIDECAR_CONTAINER_NAME } from '../../src/keys.js';
import type { V1EndpointSlice } from '../../src/kube/types.js';
import { apiPath } from '../../src/kube/paths.js';

const NS = 'default';
export const ZONE_LABEL = 'topology.kubernetes.io/zone';
/** The zone each node registers with in the two-node cluster. */
export const ZONES: Record<string, string> = { [NODE.name]: 'zone-a', [NODE2.name]: 'zone-b' };
/** Requests per client and step. */
export const REQUESTS = 40;
/** Requests sent to a client that should be dropped (in parallel: each waits out its timeout). */
export const DROP_REQUESTS = 10;

/** One client's view: its node, the zone its pod was labelled with, and what its sidecar's process sees. */
export interface ClientPlace {
  pod: string;
  node: string;
  podZoneLabel: string | undefined;
  sidecarEnv: { NODE_NAME?: string | undefined; NODE_ZONE?: string | undefined };
}

/** A replica of the blog: its pod, node and net1 address. */
export interface Replica {
  pod: string;
  node: string;
  net1: string;
}

/** One client's requests: each "ok" or "fail:<curl exit code>", and how many each replica logged from the client. */
export interface ClientBurst {
  curls: string[];
  answeredBy: Record<string, number>;
}

/** One endpoint of our slice: where the controller says it is and which zones it is hinted for. */
export interface SliceEndpoint {
  address: string;
  nodeName: string | undefined;
  zone: string | undefined;
  forZones: string[];
}

/** Node name -> the blog's replica and client on it. */
export interface Topology {
  replicas: Record<string, Replica>;
  clients: Record<string, { pod: string; net1: string }>;
}

export async function topology(node: RealNode): Promise<Topology> {
  const replicas: Record<string, Replica> = {};
  for (const p of await pods(node, NS, `app=${SERVICE}`)) {
    if (p.metadata?.deletionTimestamp) continue;
    const n = p.spec?.nodeName ?? '';
    replicas[n] = { pod: p.metadata?.name ?? '', node: n, net1: net1Addresses(p)[0] ?? '' };
  }
  const clients: Topology['clients'] = {};
  for (const [n, name] of Object.entries(CLIENTS)) clients[n] = { pod: name, net1: net1Addresses(await pod(node, NS, name))[0] ?? '' };
  return { replicas, clients };
}

/** The process environment of a running container, read from /proc on the host (both nodes share its pid namespace). */
async function containerEnv(crictl: (args: string[]) => Promise<string>, podName: string, container: string): Promise<Record<string, string>> {
  const sandbox = (await crictl(['pods', '--name', `^${podName}$`, '--namespace', NS, '-q'])).trim().split('\n')[0] ?? '';
  const id = (await crictl(['ps', '--pod', sandbox, '--name', `^${container}$`, '-q'])).trim().split('\n')[0] ?? '';
  const info = JSON.parse(await crictl(['inspect', id])) as { info: { pid: number } };
  const env: Record<string, string> = {};
  for (const kv of readFileSync(`/proc/${info.info.pid}/environ`, 'utf8').split('\0')) {
    const i = kv.indexOf('=');
    if (i > 0) env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  return env;
}

/** Each client's zone label and its sidecar's NODE_NAME and NODE_ZONE, as its running process has them. */
export async function clientPlaces(node: RealNode): Promise<ClientPlace[]> {
  const out: ClientPlace[] = [];
  for (const [n, name] of Object.entries(CLIENTS)) {
    const p = await pod(node, NS, name);
    const second = node.second;
    if (n === NODE2.name && !second) throw new Error(`no crictl for ${n}`);
    const crictl = (args: string[]): Promise<string> => (n === NODE2.name && second ? second.crictl(args) : node.crictl(args));
    const env = await containerEnv(crictl, name, SIDECAR_CONTAINER_NAME);
    out.push({ pod: name, node: p.spec?.nodeName ?? '', podZoneLabel: p.metadata?.labels?.[ZONE_LABEL], sidecarEnv: { NODE_NAME: env['NODE_NAME'], NODE_ZONE: env['NODE_ZONE'] } });
  }
  return out;
}

/** A Service over the replicas labelled `<selectLabel>=yes`, on the blog's network. */
function service(name: string, selectLabel: string, spec: Record<string, unknown>): string {
  return dump({
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: NS, labels: { 'service.kubernetes.io/service-proxy-name': 'multus-proxy' }, annotations: { 'k8s.v1.cni.cncf.io/service-network': 'macvlan1' } },
    spec: { selector: { app: SERVICE, [selectLabel]: 'yes' }, ports: [{ protocol: 'TCP', port: 80 }], ...spec },
  });
}

export async function sliceEndpoints(node: RealNode, svc: string): Promise<SliceEndpoint[]> {
  const s = await node.client.list<V1EndpointSlice>(apiPath('discovery.k8s.io', 'v1', 'endpointslices', NS), {
    labelSelector: `kubernetes.io/service-name=${svc},endpointslice.kubernetes.io/managed-by=${MANAGED_BY}`,
  });
  return s.items
    .flatMap((x) => x.endpoints ?? [])
    .filter((e) => e.conditions?.ready !== false)
    .flatMap((e) => e.addresses.map((address) => ({ address, nodeName: e.nodeName ?? undefined, zone: e.zone ?? undefined, forZones: (e.hints?.forZones ?? []).map((z) => z.name).sort() })))
    .sort((a, b) => (a.address < b.address ? -1 : 1));
}

/**
 * `n` requests from a client to `ip`, one after another (`parallel`: all at once, for requests
 * expected to time out), each a new connection with a 1 s connect timeout; the replicas' access
 * logs counted for requests from the client's net1 address.
 */
async function clientBurst(node: RealNode, t: Topology, clientNode: string, ip: string, n: number, parallel = false): Promise<ClientBurst> {
  const client = t.clients[clientNode];
  if (!client) throw new Error(`no client on ${clientNode}`);
  const replicas = Object.values(t.replicas);
  const before: Record<string, number> = {};
  for (const r of replicas) before[r.pod] = (await arrivals(node, NS, r.pod)).length;
  const one = `if curl -s --connect-timeout 1 -m 3 -o /tmp/body-$i http://${ip}/ && grep -q '${SERVICE}' /tmp/body-$i; then echo ok; else echo "fail:$?"; fi; rm -f /tmp/body-$i`;
  const script = parallel ? `for i in $(seq ${n}); do (${one}) & done; wait` : `for i in $(seq ${n}); do ${one}; done`;
  const r = await node.exec(NS, client.pod, ['sh', '-c', script], { container: CLIENT });
  if (r.code !== 0) throw new Error(`curl loop in ${client.pod} failed: ${r.stderr}`);
  const curls = r.stdout.trim().split('\n');
  // The access logs reach the container log a moment after the answers: read until every answered
  // request is there (or 5 s passed; a missing one then fails the counts).
  const answered = curls.filter((c) => c === 'ok').length;
  const answeredBy: Record<string, number> = {};
  for (let i = 0; ; i++) {
    for (const rep of replicas) answeredBy[rep.pod] = (await arrivals(node, NS, rep.pod)).slice(before[rep.pod] ?? 0).filter((a) => a.from === client.net1).length;
    if (Object.values(answeredBy).reduce((a, b) => a + b, 0) >= answered || i >= 25) return { curls, answeredBy };
    await delay(200);
  }
}

/** Waits until one request of the client is answered by `replica` (its sidecar has the rules this step is about). */
async function untilAnsweredBy(node: RealNode, t: Topology, clientNode: string, ip: string, replica: string, what: string): Promise<void> {
  await waitFor(what, 60_000, async () => ((await clientBurst(node, t, clientNode, ip, 1)).answeredBy[replica] === 1 ? true : undefined));
}

async function clusterIP(node: RealNode, svc: string): Promise<string> {
  return (await node.kubectl(['get', 'service', '-n', NS, svc, '-o', 'jsonpath={.spec.clusterIP}'])).trim();
}

const sorted = (a: string[]): string => JSON.stringify([...a].sort());

/** Labels the replicas on `nodes` `<label>=yes` (and only them), then waits for our slice to list exactly their addresses. */
async function selectReplicas(node: RealNode, t: Topology, svc: string, label: string, nodes: string[]): Promise<SliceEndpoint[]> {
  for (const r of Object.values(t.replicas)) await node.kubectl(['label', 'pod', '-n', NS, r.pod, nodes.includes(r.node) ? `${label}=yes` : `${label}-`, '--overwrite']);
  const want = sorted(nodes.map((n) => t.replicas[n]?.net1 ?? ''));
  return waitFor(`${svc}'s slice to list the replicas on ${nodes.join(', ')}`, 60_000, async () => {
    const e = await sliceEndpoints(node, svc);
    return sorted(e.map((x) => x.address)) === want ? e : undefined;
  });
}

/** A Service over both replicas: its slice, and each client's burst once its own replica answered it. */
export interface OverBoth {
  topology: Topology;
  slice: SliceEndpoint[];
  /** Client node -> its burst with a replica on each node (in each zone). */
  own: Record<string, ClientBurst>;
}

/** Creates the Service over both replicas, bursts from each client, runs `then`, and removes the Service. */
async function overBoth<R>(node: RealNode, svc: string, label: string, spec: Record<string, unknown>, log: (m: string) => void, then: (t: Topology, ip: string) => Promise<R>): Promise<OverBoth & R> {
  const t = await topology(node);
  try {
    await node.apply(service(svc, label, spec));
    const slice = await selectReplicas(node, t, svc, label, [NODE.name, NODE2.name]);
    const ip = await clusterIP(node, svc);
    log(`${svc} ${ip}: slice ${JSON.stringify(slice)}`);
    const own: Record<string, ClientBurst> = {};
    for (const n of [NODE.name, NODE2.name]) {
      await untilAnsweredBy(node, t, n, ip, t.replicas[n]?.pod ?? '', `the client on ${n} (${ZONES[n]}) answered through ${svc}`);
      own[n] = await clientBurst(node, t, n, ip, REQUESTS);
      log(`${svc}, a replica on each node: client on ${n} (${ZONES[n]}): ${own[n].curls.filter((c) => c === 'ok').length}/${REQUESTS} ok, by ${JSON.stringify(own[n].answeredBy)}`);
    }
    return { topology: t, slice, own, ...(await then(t, ip)) };
  } finally {
    await node.kubectl(['delete', 'service', '-n', NS, svc, '--ignore-not-found', '--wait=true']);
    await node.kubectl(['label', 'pod', '-n', NS, '-l', `app=${SERVICE}`, `${label}-`]);
  }
}

export const LOCAL_SERVICE = 'nginx-itp-local';

/** internalTrafficPolicy Local; then the second node's replica leaves: its client (in parallel) and the first's. */
export function runLocalPolicy(node: RealNode, log: (m: string) => void): Promise<OverBoth & { dropped: ClientBurst; unaffected: ClientBurst }> {
  const label = 'twonode-itp';
  return overBoth(node, LOCAL_SERVICE, label, { internalTrafficPolicy: 'Local' }, log, async (t, ip) => {
    await selectReplicas(node, t, LOCAL_SERVICE, label, [NODE.name]);
    await waitFor(`the client on ${NODE2.name} no longer answered`, 60_000, async () => ((await clientBurst(node, t, NODE2.name, ip, 1)).curls[0] !== 'ok' ? true : undefined));
    const dropped = await clientBurst(node, t, NODE2.name, ip, DROP_REQUESTS, true);
    const unaffected = await clientBurst(node, t, NODE.name, ip, REQUESTS);
    log(
      `Local, no replica on ${NODE2.name}: its client ${[...new Set(dropped.curls)].join(',')} by ${JSON.stringify(dropped.answeredBy)}; client on ${NODE.name} ${unaffected.curls.filter((c) => c === 'ok').length}/${REQUESTS} ok by ${JSON.stringify(unaffected.answeredBy)}`,
    );
    return { dropped, unaffected };
  });
}

export const CLOSE_SERVICE = 'nginx-prefer-close';

/** trafficDistribution PreferClose (hinted from the slice's first write); then the second zone's replica leaves: each client's burst. */
export function runPreferClose(node: RealNode, log: (m: string) => void): Promise<OverBoth & { fallback: Record<string, ClientBurst> }> {
  const label = 'twonode-close';
  return overBoth(node, CLOSE_SERVICE, label, { trafficDistribution: 'PreferClose' }, log, async (t, ip) => {
    await selectReplicas(node, t, CLOSE_SERVICE, label, [NODE.name]);
    await untilAnsweredBy(node, t, NODE2.name, ip, t.replicas[NODE.name]?.pod ?? '', `the client in ${ZONES[NODE2.name]} answered from ${ZONES[NODE.name]}`);
    const fallback: Record<string, ClientBurst> = {};
    for (const n of [NODE2.name, NODE.name]) {
      fallback[n] = await clientBurst(node, t, n, ip, REQUESTS);
      log(`PreferClose, no replica in ${ZONES[NODE2.name]}: client in ${ZONES[n]}: ${fallback[n].curls.filter((c) => c === 'ok').length}/${REQUESTS} ok, by ${JSON.stringify(fallback[n].answeredBy)}`);
    }
    return { fallback };
  });
}
