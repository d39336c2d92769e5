/**
 * Tenant amplification, sidecar and node agent: what one tenant object of each kind costs each
 * component, at a typical size and at the largest the apiserver accepts (about 1.5 MiB per object).
 * An in-process probe run by hand (not a numbered benchmark): per object, the informer transform's
 * CPU, the heap the cached form keeps (heapUsed growth over many copies, after a GC, divided by the
 * copies), and the CPU and targets of planning it (the sidecar's StateFeed with its cap and the
 * client's own namespace elsewhere; the node agent's planNode). Objects over the budgets
 * (src/object-budgets.ts, src/cache-budget.ts) are cached as stubs and plan nothing.
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
process.stdout.write(
  `node ${process.version}, load average ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}\n`,
);
