/**
 * Informer transforms for the controller's pod, node and namespace caches (like cmd/sidecar/slim.ts
 * for the sidecar): keep only what the controller reads, so a cluster's pods do not sit in its
 * heap with managedFields, env, volumes and the like. `podChangeMatters` (reconcile.ts) lists
 * everything read from a pod; anything added there must be kept here too
 * (test/unit/controller/slim.test.ts compares planner inputs from full and slim pods).
 *
 * Kept:
 * - Pod: name, namespace, uid, resourceVersion, labels, deletionTimestamp and
 *   deletionGracePeriodSeconds, the network-status annotation; spec nodeName, hostname, subdomain,
 *   containers' and initContainers' name, restartPolicy and ports; status phase and conditions'
 *   type and status (readiness), the Ready condition's lastTransitionTime (trigger time).
 * - Node: name, resourceVersion, labels (the zone label), addresses, allocatable CPU, Ready status.
 * - Namespace: name, resourceVersion, labels (the injection label), deletionTimestamp, status phase.
 * - NAD: name, namespace, resourceVersion, the service-namespaces annotation, and its spec.config's
 *   IPAM range, parsed once here (the config itself is dropped).
 * - MultiNetworkPolicy: see slimPolicy (the spec is kept whole, within a byte budget).
 * - Service: name, namespace, uid, resourceVersion, creation and deletion timestamps, labels (they
 *   are copied to its slices), the service-network and service-selector annotations; spec
 *   clusterIP, ports, selector and publishNotReadyAddresses. When that is over the byte budget
 *   (src/object-budgets.ts), only its identity and the two labels other parts read are kept, with
 *   the budget it is over: the reconciler refuses it whole.
 */
import {
  MULTI_NETWORK_POLICY_KIND,
  NETSERVICE_LABEL,
  NETWORK_STATUS_ANNOTATION,
  POLICY_FOR_ANNOTATION,
  PROXY_NAME_LABEL,
  SERVICE_NAMESPACES_ANNOTATION,
  SERVICE_NETWORK_ANNOTATION,
  SERVICE_SELECTOR_ANNOTATION,
} from '../../src/keys.js';
import { keptBytesOverBudget, type BudgetedService } from '../../src/object-budgets.js';
import { serviceOverBudget } from './service-spec.js';
import { TOPOLOGY_AWARE_HINTS_ANNOTATION, TOPOLOGY_MODE_ANNOTATION } from './topology-hints.js';
import { parseIp } from '../../src/annotations/ip.js';
import { networkStatusForCache } from '../../src/annotations/network-status.js';
import { parseNadIpam, type NadIpam } from '../../src/annotations/nad-ipam.js';
import type { InputError, Result } from '../../src/result.js';
import type { KubeObject, V1Namespace, V1ObjectMeta, V1Pod, V1Service } from '../../src/kube/types.js';
import type { MultiNetworkPolicy } from '../../src/policy/api.js';

type Container = NonNullable<NonNullable<V1Pod['spec']>['containers']>[number];

function meta(m: V1ObjectMeta | undefined, annotation?: string, bound: (value: string) => string = (v) => v): V1ObjectMeta {
  const kept = annotation === undefined ? undefined : m?.annotations?.[annotation];
  const value = kept === undefined ? undefined : bound(kept);
  return {
    name: m?.name,
    namespace: m?.namespace,
    uid: m?.uid,
    resourceVersion: m?.resourceVersion,
    labels: m?.labels,
    annotations: value === undefined || annotation === undefined ? undefined : { [annotation]: value },
    deletionTimestamp: m?.deletionTimestamp,
    // With the timestamp, when the deletion was asked for (the slices' trigger time).
    deletionGracePeriodSeconds: m?.deletionGracePeriodSeconds,
  };
}

function container(c: Container): Container {
  return { name: c.name, restartPolicy: c.restartPolicy, ports: c.ports?.map((p) => ({ name: p.name, containerPort: p.containerPort, protocol: p.protocol })) };
}

export function slimPod(p: V1Pod): V1Pod {
  return {
    // Over its budget, only the length is kept: the parser refuses it alike (src/annotations/network-status.ts).
    metadata: meta(p.metadata, NETWORK_STATUS_ANNOTATION, networkStatusForCache),
    spec: {
      nodeName: p.spec?.nodeName,
      // The sidecar RBAC binds the ServiceAccounts of injected pods (cmd/controller/sidecar-rbac.ts).
      serviceAccountName: p.spec?.serviceAccountName,
      hostname: p.spec?.hostname,
      subdomain: p.spec?.subdomain,
      containers: (p.spec?.containers ?? []).map(container),
      initContainers: p.spec?.initContainers?.map(container),
    },
    status: {
      phase: p.status?.phase,
      // The Ready condition's lastTransitionTime is the pod's trigger time for our slices.
      conditions: p.status?.conditions?.map((c) => (c.type === 'Ready' ? { type: c.type, status: c.status, lastTransitionTime: c.lastTransitionTime } : { type: c.type, status: c.status })),
    },
  };
}

/** A NAD as the controller reads it: who it is shared with, and the range its IPAM hands out. */
export interface SlimNad extends KubeObject {
  readonly ipam: Result<NadIpam, InputError>;
}

/** Its name, its service-namespaces annotation and its parsed IPAM range. */
export function slimNad(n: KubeObject): SlimNad {
  const config = (n as { spec?: { config?: unknown } }).spec?.config;
  return { metadata: meta(n.metadata, SERVICE_NAMESPACES_ANNOTATION), ipam: parseNadIpam(config) };
}

/** Whether a NAD changed in what the controller reads (sharing or IPAM range): every Service is planned again. */
export function nadChanged(n: SlimNad, old: SlimNad): boolean {
  return n.metadata?.annotations?.[SERVICE_NAMESPACES_ANNOTATION] !== old.metadata?.annotations?.[SERVICE_NAMESPACES_ANNOTATION] || JSON.stringify(n.ipam) !== JSON.stringify(old.ipam);
}

/**
 * Labels (the zone), status.addresses (pods may not claim them), and for topology-mode Auto's
 * zone CPU shares (topology-hints.ts) the allocatable CPU and the Ready condition's status.
 */
export function slimNode(n: KubeObject): KubeObject {
  const addresses = nodeAddressList(n);
  const raw = (n as { status?: { allocatable?: { cpu?: unknown }; conditions?: unknown } }).status;
  const cpu = raw?.allocatable?.cpu;
  const ready = Array.isArray(raw?.conditions) ? (raw.conditions as { type?: unknown; status?: unknown }[]).find((c) => c.type === 'Ready') : undefined;
  const status: { addresses?: { address: string }[]; allocatable?: { cpu: string }; conditions?: { type: string; status: string }[] } = {};
  if (addresses.length > 0) status.addresses = addresses.map((address) => ({ address }));
  if (typeof cpu === 'string') status.allocatable = { cpu };
  if (typeof ready?.status === 'string') status.conditions = [{ type: 'Ready', status: ready.status }];
  const out: KubeObject & { status?: typeof status } = { metadata: meta(n.metadata) };
  if (Object.keys(status).length > 0) out.status = status;
  return out;
}

/** A Node's status.addresses that are IPs, normalised as network-status addresses are (host names dropped). */
export function nodeAddressList(n: KubeObject): string[] {
  const raw = (n as { status?: { addresses?: unknown } }).status?.addresses;
  if (!Array.isArray(raw)) return [];
  const out: string[] = [];
  for (const a of raw as unknown[]) {
    const text = typeof a === 'object' && a !== null ? (a as { address?: unknown }).address : undefined;
    if (typeof text !== 'string') continue;
    const ip = parseIp(text);
    if (ip.ok && ip.value.prefix === undefined && !out.includes(ip.value.address)) out.push(ip.value.address);
  }
  return out.sort();
}

export function slimNamespace(n: V1Namespace): V1Namespace {
  return { metadata: meta(n.metadata), status: { phase: n.status?.phase } };
}

/** Only the keys listed, of those present (undefined when none is). */
function pick(m: Readonly<Record<string, string>> | undefined, keys: readonly string[]): Record<string, string> | undefined {
  if (m === undefined) return undefined;
  const out: Record<string, string> = {};
  for (const k of keys) if (m[k] !== undefined) out[k] = m[k];
  return Object.keys(out).length === 0 ? undefined : out;
}

export function slimService(svc: V1Service): V1Service & BudgetedService {
  const m = svc.metadata;
  const identity: V1ObjectMeta = {
    name: m?.name,
    namespace: m?.namespace,
    uid: m?.uid,
    resourceVersion: m?.resourceVersion,
    creationTimestamp: m?.creationTimestamp,
    deletionTimestamp: m?.deletionTimestamp,
  };
  const slim: V1Service = {
    metadata: {
      ...identity,
      labels: m?.labels,
      annotations: pick(m?.annotations, [SERVICE_NETWORK_ANNOTATION, SERVICE_SELECTOR_ANNOTATION, TOPOLOGY_MODE_ANNOTATION, TOPOLOGY_AWARE_HINTS_ANNOTATION]),
    },
    spec: {
      type: svc.spec?.type,
      clusterIP: svc.spec?.clusterIP,
      trafficDistribution: svc.spec?.trafficDistribution,
      ports: svc.spec?.ports?.map((p) => ({ name: p.name, port: p.port, targetPort: p.targetPort, protocol: p.protocol, appProtocol: p.appProtocol })),
      selector: svc.spec?.selector,
      publishNotReadyAddresses: svc.spec?.publishNotReadyAddresses,
    },
  };
  // The most specific budget first (networks, ports), then the bytes of everything kept.
  const over = serviceOverBudget(slim) ?? keptBytesOverBudget(`Service ${m?.namespace ?? ''}/${m?.name ?? ''}`, JSON.stringify(slim).length);
  if (over === undefined) return slim;
  return {
    metadata: {
      ...identity,
      labels: pick(m?.labels, [PROXY_NAME_LABEL, NETSERVICE_LABEL]),
      annotations: pick(m?.annotations, [SERVICE_NETWORK_ANNOTATION]) === undefined ? undefined : { [SERVICE_NETWORK_ANNOTATION]: '(over budget)' },
    },
    overBudget: over,
  };
}

/** A MultiNetworkPolicy's kept bytes past this are refused whole (the checked form is bounded by POLICY_BUDGETS; this bounds the raw text). */
export const MAX_POLICY_KEPT_BYTES = 256 * 1024;

/** A MultiNetworkPolicy as the controller caches it: marked when over the byte budget (then its spec is dropped). */
export type SlimPolicy = MultiNetworkPolicy & BudgetedService;

/**
 * MultiNetworkPolicy: name, namespace, uid, resourceVersion, generation (the address groups carry
 * it), deletionTimestamp, the policy-for annotation, and the spec (checkPolicy reads it all).
 */
export function slimPolicy(p: MultiNetworkPolicy): SlimPolicy {
  const m = p.metadata;
  const forNetworks = m?.annotations?.[POLICY_FOR_ANNOTATION];
  const metadata = {
    name: m?.name,
    namespace: m?.namespace,
    uid: m?.uid,
    resourceVersion: (m as { resourceVersion?: string } | undefined)?.resourceVersion,
    generation: m?.generation,
    deletionTimestamp: m?.deletionTimestamp,
    ...(forNetworks !== undefined ? { annotations: { [POLICY_FOR_ANNOTATION]: forNetworks } } : {}),
  };
  const slim: MultiNetworkPolicy = { apiVersion: p.apiVersion, kind: p.kind, metadata, ...(p.spec !== undefined ? { spec: p.spec } : {}) };
  const bytes = JSON.stringify(slim).length;
  if (bytes <= MAX_POLICY_KEPT_BYTES) return slim;
  const message = `${MULTI_NETWORK_POLICY_KIND} ${m?.namespace ?? ''}/${m?.name ?? ''}: its spec comes to ${bytes} bytes, more than the ${MAX_POLICY_KEPT_BYTES} multus-proxy reads for one policy; split it into several smaller policies`;
  return { apiVersion: p.apiVersion, kind: p.kind, metadata, overBudget: { budget: 'bytes', message } };
}
