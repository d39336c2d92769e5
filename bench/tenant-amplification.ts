/**
 * Tenant amplification: what one tenant object of each kind costs each component (sidecar, node
 * agent, controller, webhook), at a typical size and at the largest the apiserver accepts (about
 * 1.5 MiB per object, 256 KiB of annotations).
 * An in-process probe run by hand (not a numbered benchmark): per object, the informer transform's
 * CPU, the heap the cached form keeps (heapUsed growth over many copies, after a GC, divided by the
 * copies), and the CPU and targets of planning it (the sidecar's StateFeed with its cap and the
 * client's own namespace elsewhere; the node agent's planNode). Objects over the budgets
 * (src/object-budgets.ts, src/cache-budget.ts) are cached as stubs and plan nothing.
 *
 * The controller: its informer transform of a Service and of a Pod (slimPod keeps the
 * network-status text, so each copy is decoded anew, as a watch event is), the first parse of the
 * network-status (later reconciles reuse it: it is parsed once per text), and planSlices of the
 * Service with 10 pods on the network, or of a typical Service selecting the pod. The webhook: one
 * AdmissionReview's body parsed, its envelope checked and its handler run (fake cluster lookups,
 * every NAD existing and shared), CPU per review, the heap held per review in flight (`copies`
 * at once), the NAD lookups made and the verdict.
 *
 *   node --expose-gc --import tsx bench/tenant-amplification.ts [copies=200]
 */
import os from 'node:os';
import { slimService } from '../cmd/sidecar/slim.js';
import { StateFeed } from '../cmd/sidecar/state-feed.js';
import { slimNad, slimNodeService } from '../cmd/node-agent/slim.js';
import { planNode } from '../cmd/node-agent/state.js';
import { DEFAULT_MASQUERADE_MARK } from '../cmd/node-agent/rules.js';
import { NODE_ADDRESSES_ANNOTATION, NODE_PARENTS_ANNOTATION, PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NAME_LABEL, SERVICE_NAMESPACES_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../src/keys.js';
import type { NetworkAttachmentDefinition, V1EndpointSlice, V1Service } from '../src/kube/types.js';
import { DEFAULT_MAX_SERVICES_PER_NETWORK } from '../src/sidecar-contract.js';
import { NETWORK_STATUS_ANNOTATION, NETWORKS_ANNOTATION } from '../src/keys.js';
import { parseNetworkStatus } from '../src/annotations/network-status.js';
import type { V1Pod } from '../src/kube/types.js';
import { slimPod as controllerSlimPod, slimService as controllerSlimService } from '../cmd/controller/slim.js';
import { planSlices } from '../cmd/controller/plan.js';
import { decodeReview } from '../cmd/webhook/server.js';
import { podHandler, serviceValidationHandler, type Handler } from '../cmd/webhook/handlers.js';
import { ENABLED, fakeCluster, SIDECAR } from '../test/webhook/fixtures.js';
import { admissionReview, podOfSize } from './lib/pods.js';

const copies = Number(process.argv[2] ?? 200);
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with node --expose-gc');
const NET = 'demo/net-a';

function service(name: string, o: { ports: number; ranges?: number; labelBytes?: number }): V1Service {
  return {
    metadata: {
      name,
      namespace: 'tenant',
      labels: {
        [PROXY_NAME_LABEL]: PROXY_NAME,
        ...(o.labelBytes !== undefined ? { filler: 'x', ...Object.fromEntries(Array.from({ length: Math.floor(o.labelBytes / 100) }, (_, i) => [`k${i}`, 'v'.repeat(63)])) } : {}),
      },
      annotations: { [SERVICE_NETWORK_ANNOTATION]: NET },
    },
    spec: {
      type: o.ranges !== undefined ? 'LoadBalancer' : 'ClusterIP',
      clusterIP: '10.96.0.10',
      clusterIPs: ['10.96.0.10'],
      ports: Array.from({ length: o.ports }, (_, i) => ({ name: `p${i}`, port: 1 + i, protocol: 'TCP', targetPort: 1 + i, ...(o.ranges !== undefined ? { nodePort: 30000 + (i % 2000) } : {}) })),
      ...(o.ranges !== undefined ? { loadBalancerSourceRanges: Array.from({ length: o.ranges }, (_, i) => `10.${(i >> 8) & 255}.${i & 255}.0/24`) } : {}),
      selector: { app: 'x' },
    },
    status: o.ranges !== undefined ? { loadBalancer: { ingress: [{ ip: '192.168.101.240', ipMode: 'VIP' }] } } : {},
  };
}

const nad = (configBytes: number): NetworkAttachmentDefinition => ({
  metadata: { name: 'net-a', namespace: 'demo', annotations: { [SERVICE_NAMESPACES_ANNOTATION]: '*' } },
  spec: {
    config: JSON.stringify({
      cniVersion: '0.3.1',
      type: 'macvlan',
      master: 'ens4',
      ipam: { type: 'whereabouts', range: '192.168.101.0/24' },
      ...(configBytes > 300 ? { pad: 'x'.repeat(configBytes) } : {}),
    }),
  },
});

/** Heap kept per transformed copy, bytes. */
function keptBytes<T>(make: () => T): number {
  const hold: T[] = [];
  gc?.();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < copies; i++) hold.push(make());
  gc?.();
  const after = process.memoryUsage().heapUsed;
  if (hold.length !== copies) throw new Error('unreachable');
  return Math.max(0, (after - before) / copies);
}

function cpuMs(f: () => unknown, rounds = 5): number {
  const xs: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const c0 = process.cpuUsage();
    f();
    const c = process.cpuUsage(c0);
    xs.push((c.user + c.system) / 1e3);
  }
  return xs.sort((a, b) => a - b)[Math.floor(rounds / 2)] as number;
}

const served = [{ namespace: 'demo', name: 'net-a' }];
/** The controller's slice of a Service on the network, 10 endpoints. */
const sliceOf = (svc: V1Service): V1EndpointSlice => ({
  metadata: {
    name: `${svc.metadata?.name ?? ''}-1`,
    namespace: svc.metadata?.namespace,
    labels: { [SERVICE_NAME_LABEL]: svc.metadata?.name ?? '' },
    annotations: { [SERVICE_NETWORK_ANNOTATION]: NET },
  },
  addressType: 'IPv4',
  ports: (svc.spec?.ports ?? []).map((p) => ({ name: p.name, port: p.port, protocol: 'TCP' })),
  endpoints: Array.from({ length: 10 }, (_, i) => ({ addresses: [`192.168.101.${10 + i}`], conditions: { ready: true } })),
});
const iface = { network: served[0] as { namespace: string; name: string }, interface: 'net1', ipv4: ['192.168.101.9'], ipv6: [] };
function sidecarPlan(svc: V1Service): { ms: number; targets: number } {
  let targets = 0;
  const ms = cpuMs(() => {
    const feed = new StateFeed(DEFAULT_MAX_SERVICES_PER_NETWORK, 'client-ns');
    // The tenant's Service on another namespace's network counts where the controller wrote a slice (shared).
    targets = feed.compute({ served, interfaces: [iface], services: () => [svc], slices: () => [sliceOf(svc)] }).state.targets.length;
  });
  return { ms, targets };
}
function nodePlan(svc: V1Service, n: NetworkAttachmentDefinition): { ms: number; targets: number } {
  let targets = 0;
  const input = {
    nodeName: 'w1',
    node: {
      metadata: { name: 'w1', annotations: { [NODE_ADDRESSES_ANNOTATION]: `${NET}=192.168.101.211/24`, [NODE_PARENTS_ANNOTATION]: `${NET}=ens4` } },
      status: { addresses: [{ type: 'InternalIP', address: '10.0.0.11' }] },
    },
    masqueradeMark: DEFAULT_MASQUERADE_MARK,
    nads: [n],
    services: [svc],
    slices: [sliceOf(svc)],
  };
  const ms = cpuMs(() => {
    const p = planNode(input);
    targets = p.state.clusterTargets.length + p.state.nodePorts.length + (p.state.loadBalancers?.length ?? 0);
  });
  return { ms, targets };
}

const size = (o: unknown): string => `${(JSON.stringify(o).length / 1024).toFixed(1)} KiB`;
const kib = (b: number): string => `${(b / 1024).toFixed(1)} KiB`;
const rows: string[] = [];
const typicalNad = slimNad(nad(200));
const cases: { name: string; svc: V1Service }[] = [
  { name: 'Service, typical (2 ports)', svc: service('typical', { ports: 2 }) },
  { name: 'Service, 256 ports (the budget)', svc: service('at-budget', { ports: 256 }) },
  { name: 'Service, 20,000 ports', svc: service('ports', { ports: 20_000 }) },
  { name: 'LoadBalancer, 90,000 source ranges', svc: service('ranges', { ports: 1, ranges: 90_000 }) },
  { name: 'Service, 1 MiB of labels', svc: service('labels', { ports: 2, labelBytes: 1_000_000 }) },
];
for (const { name, svc } of cases) {
  const sTransform = cpuMs(() => slimService(svc));
  const sKept = keptBytes(() => slimService(svc));
  const sPlan = sidecarPlan(slimService(svc));
  const nTransform = cpuMs(() => slimNodeService(svc));
  const nKept = keptBytes(() => slimNodeService(svc));
  const nPlan = nodePlan(slimNodeService(svc), typicalNad);
  rows.push(
    `| ${name} | ${size(svc)} | ${sTransform.toFixed(2)} | ${kib(sKept)} | ${sPlan.ms.toFixed(2)} / ${sPlan.targets} | ${nTransform.toFixed(2)} | ${kib(nKept)} | ${nPlan.ms.toFixed(2)} / ${nPlan.targets} |`,
  );
}
for (const [name, bytes] of [
  ['NAD, typical', 200],
  ['NAD, 1.4 MiB config', 1_400_000],
] as const) {
  const n = nad(bytes);
  rows.push(
    `| ${name} | ${size(n)} | - | - | - | ${cpuMs(() => slimNad(n)).toFixed(2)} | ${kib(keptBytes(() => slimNad(n)))} | ${nodePlan(slimNodeService(service('typical', { ports: 2 })), slimNad(n)).ms.toFixed(2)} / - |`,
  );
}
process.stdout.write(`tenant amplification: one object, ${copies} copies for the kept heap; CPU ms (median of 5)\n`);
process.stdout.write(
  '| object | as written | sidecar transform ms | sidecar kept | sidecar plan ms / targets | node agent transform ms | node agent kept | node agent plan ms / targets |\n|---|---|---|---|---|---|---|---|\n',
);
for (const r of rows) process.stdout.write(`${r}\n`);

// The controller.
const netA = [{ namespace: 'demo', name: 'net-a' }];
/** A pod on net-a whose network-status is about `bytes` (entries of other networks after its own, up to `entries`, padded with search domains). */
function pod(name: string, o: { bytes: number; entries?: number }): V1Pod {
  const own = { name: NET, interface: 'net1', ips: ['192.168.101.20'], mac: '02:00:00:00:00:01', dns: {} };
  const status: unknown[] = [{ name: 'cbr0', interface: 'eth0', ips: ['10.244.0.20'], default: true, dns: {} }, own];
  for (let i = 0; JSON.stringify(status).length < o.bytes && status.length < (o.entries ?? Infinity); i++)
    status.push({ name: `tenant/n${i}`, interface: `net${i + 2}`, ips: [`10.${i & 255}.0.20`, `10.${i & 255}.0.21`, `10.${i & 255}.0.22`], mac: '02:00:00:00:00:02', dns: {} });
  const text = JSON.stringify(status);
  const pad = o.bytes - text.length > 200 ? JSON.stringify([...status.slice(0, -1), { ...(status.at(-1) as object), dns: { search: ['x'.repeat(o.bytes - text.length - 40)] } }]) : text;
  return {
    metadata: { name, namespace: 'tenant', labels: { app: 'x' }, annotations: { [NETWORK_STATUS_ANNOTATION]: pad } },
    spec: { nodeName: 'w1', containers: [{ name: 'app', image: 'app', ports: [{ containerPort: 1 }] }] },
    status: { phase: 'Running', podIP: '10.244.0.20', conditions: [{ type: 'Ready', status: 'True' }] },
  };
}
const tenPods = Array.from({ length: 10 }, (_, i) => pod(`p${i}`, { bytes: 300 }));
function controllerPlan(svc: V1Service, pods: readonly V1Pod[]): { ms: number; endpoints: number } {
  let endpoints = 0;
  const ms = cpuMs(() => {
    endpoints = planSlices({ service: svc, networks: netA, pods, existing: [] }).endpoints;
  });
  return { ms, endpoints };
}
const cRows: string[] = [];
for (const { name, svc } of cases) {
  const slim = controllerSlimService(svc);
  const plan = slim.overBudget === undefined ? controllerPlan(slim, tenPods) : { ms: 0, endpoints: 0 };
  cRows.push(
    `| ${name} | ${size(svc)} | ${cpuMs(() => controllerSlimService(svc)).toFixed(2)} | ${kib(keptBytes(() => controllerSlimService(svc)))} | - | ${slim.overBudget === undefined ? `${plan.ms.toFixed(2)} / ${plan.endpoints}` : `refused (${slim.overBudget.budget})`} |`,
  );
}
const typicalSvc = controllerSlimService(service('typical', { ports: 2 }));
for (const [name, p] of [
  ['Pod, typical network-status (2 entries)', pod('typical', { bytes: 300 })],
  ['Pod, network-status at the budget (64 entries)', pod('budget', { bytes: 60 * 1024, entries: 64 })],
  ["Pod, 256 KiB network-status (the apiserver's limit)", pod('max', { bytes: 255 * 1024 })],
] as const) {
  const json = JSON.stringify(p);
  const text = p.metadata?.annotations?.[NETWORK_STATUS_ANNOTATION] ?? '';
  const parsed = parseNetworkStatus(text);
  const plan = controllerPlan(typicalSvc, [controllerSlimPod(p)]);
  cRows.push(
    `| ${name} | ${size(p)} | ${cpuMs(() => controllerSlimPod(JSON.parse(json) as V1Pod)).toFixed(2)} | ${kib(keptBytes(() => controllerSlimPod(JSON.parse(json) as V1Pod)))} | ${cpuMs(() => parseNetworkStatus(text)).toFixed(2)}${parsed.ok ? '' : ' (refused)'} | ${plan.ms.toFixed(2)} / ${plan.endpoints} |`,
  );
}

// The webhook.
const nets = (n: number): string => Array.from({ length: n }, (_, i) => `demo/net${i}`).join(',');
const cluster = fakeCluster({ namespaces: { tenant: ENABLED }, nadAnnotations: Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`demo/net${i}`, { [SERVICE_NAMESPACES_ANNOTATION]: '*' }])) });
const handlers: Record<'Pod' | 'Service', Handler> = {
  Pod: podHandler({ cluster, sidecar: SIDECAR }),
  Service: serviceValidationHandler({ cluster }),
};
function podReview(o: { networks: number; bytes?: number }): { kind: 'Pod'; body: string } {
  const p = o.bytes === undefined ? podOfSize(4 * 1024, { namespace: 'tenant' }) : podOfSize(o.bytes, { namespace: 'tenant' });
  // Attached and served: the same list in both annotations.
  p.metadata = { ...p.metadata, annotations: { ...p.metadata?.annotations, [NETWORKS_ANNOTATION]: nets(o.networks), [SERVICE_NETWORK_ANNOTATION]: nets(o.networks) } };
  return { kind: 'Pod', body: JSON.stringify(admissionReview(p)) };
}
function serviceReview(o: { networks: number; labelBytes?: number }): { kind: 'Service'; body: string } {
  const svc = service('web', { ports: 2, ...(o.labelBytes !== undefined ? { labelBytes: o.labelBytes } : {}) });
  svc.metadata = { ...svc.metadata, annotations: { [SERVICE_NETWORK_ANNOTATION]: nets(o.networks) } };
  const review = admissionReview(svc as V1Pod) as { request: Record<string, unknown> };
  review.request = { ...review.request, kind: { group: '', version: 'v1', kind: 'Service' }, resource: { group: '', version: 'v1', resource: 'services' } };
  return { kind: 'Service', body: JSON.stringify(review) };
}
async function review(kind: 'Pod' | 'Service', body: string): Promise<{ allowed: boolean; response: unknown }> {
  const req = decodeReview(JSON.parse(body));
  if (!req.ok) throw new Error(req.error);
  const h = await handlers[kind](req.value);
  if (process.env['AMP_DEBUG'] !== undefined && !h.response.allowed) process.stderr.write(`${kind}: ${h.reason} ${JSON.stringify(h.response.status)}\n`);
  return { allowed: h.response.allowed, response: h };
}
async function cpuMsAsync(f: () => Promise<unknown>, rounds = 5): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const c0 = process.cpuUsage();
    await f();
    const c = process.cpuUsage(c0);
    xs.push((c.user + c.system) / 1e3);
  }
  return xs.sort((a, b) => a - b)[Math.floor(rounds / 2)] as number;
}
/** Heap held per review while `copies` are in flight: each body parsed and answered, all held, after a GC. */
async function inFlightBytes(kind: 'Pod' | 'Service', body: string): Promise<number> {
  gc?.();
  const before = process.memoryUsage().heapUsed;
  const held = await Promise.all(Array.from({ length: copies }, async () => ({ request: JSON.parse(body) as unknown, answer: await review(kind, body) })));
  gc?.();
  const after = process.memoryUsage().heapUsed;
  if (held.length !== copies) throw new Error('unreachable');
  return Math.max(0, (after - before) / copies);
}
const wRows: string[] = [];
for (const [name, r] of [
  ['Pod, 1 network (typical)', podReview({ networks: 1 })],
  ['Pod naming 32 networks (the most allowed)', podReview({ networks: 32 })],
  ['Pod naming 33 networks', podReview({ networks: 33 })],
  ['Pod of 1.4 MiB naming 32 networks', podReview({ networks: 32, bytes: 1_400_000 })],
  ['Service, 1 network (typical)', serviceReview({ networks: 1 })],
  ['Service naming 32 networks', serviceReview({ networks: 32 })],
  ['Service naming 33 networks', serviceReview({ networks: 33 })],
  ['Service of 1 MiB naming 32 networks', serviceReview({ networks: 32, labelBytes: 1_000_000 })],
] as const) {
  cluster.calls.length = 0;
  const verdict = await review(r.kind, r.body);
  const lookups = cluster.calls.filter((c) => c.startsWith('nad:')).length;
  wRows.push(
    `| ${name} | ${(r.body.length / 1024).toFixed(1)} KiB | ${(await cpuMsAsync(() => review(r.kind, r.body))).toFixed(2)} | ${kib(await inFlightBytes(r.kind, r.body))} | ${lookups} | ${verdict.allowed ? 'allowed' : 'denied'} |`,
  );
}
process.stdout.write('\ncontroller: CPU ms (median of 5)\n| object | as written | transform ms | kept | network-status parse ms | plan ms / endpoints |\n|---|---|---|---|---|---|\n');
for (const r of cRows) process.stdout.write(`${r}\n`);
process.stdout.write('\nwebhook: one AdmissionReview, CPU ms (median of 5)\n| review | body | CPU ms | heap per review in flight | NAD lookups | verdict |\n|---|---|---|---|---|---|\n');
for (const r of wRows) process.stdout.write(`${r}\n`);
process.stdout.write(
  `node ${process.version}, load average ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}\n`,
);
