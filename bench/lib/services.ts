/**
 * The synthetic cluster the benchmarks load: N opted-in ClusterIP Services on one secondary
 * network, each with one TCP port and E endpoints in one EndpointSlice written the way the
 * controller writes them. Addresses are deterministic and stay inside ranges that exist only in
 * the benchmarks' own network namespaces (cluster IPs 10.96.0.0/16, endpoints 10.100.0.0/16).
 */
import {
  MANAGED_BY,
  MANAGED_BY_LABEL,
  NETWORK_LABEL,
  NETWORKS_ANNOTATION,
  NETWORK_STATUS_ANNOTATION,
  PROXY_NAME,
  PROXY_NAME_LABEL,
  SERVICE_NAME_LABEL,
  SERVICE_NETWORK_ANNOTATION,
} from '../../src/keys.js';
import { networkLabelValue } from '../../src/annotations/network-label.js';
import type { NetworkRef } from '../../src/annotations/service-network.js';
import type { V1EndpointSlice, V1Pod, V1Service } from '../../src/kube/types.js';
import type { BackendEndpoint, DesiredState, PodInterface, ServicePortTarget } from '../../src/dataplane/core/model.js';

export const BENCH_NAMESPACE = 'bench';
export const NETWORK: NetworkRef = { namespace: BENCH_NAMESPACE, name: 'net-a' };
export const SERVICE_PORT = 80;
export const TARGET_PORT = 8080;
/** The client pod's secondary interface and address (inside its own namespace). */
export const CLIENT_INTERFACE = 'net1';
export const CLIENT_ADDRESS = '10.100.255.254';
export const ENDPOINT_PREFIX_LEN = 16;

function ipv4(base: [number, number], k: number): string {
  return `${base[0]}.${base[1]}.${(k >> 8) & 255}.${k & 255}`;
}

/** Cluster IP of Service i (0-based): 10.96.0.10 upwards, below 10.96.255.255. */
export function clusterIP(i: number): string {
  return ipv4([10, 96], i + 10);
}

/** Address of endpoint j of Service i (10.100.0.1 upwards; 65,000 distinct). */
export function endpointIP(i: number, j: number, perService: number): string {
  return ipv4([10, 100], 1 + ((i * perService + j) % 65000));
}

/**
 * The address that replaces endpoint 0 after change number `generation` (≥ 1): from its own range
 * 10.101.0.0/16, so it is new and unique for each change and easy to look for in the rules.
 */
export function changedEndpointIP(generation: number): string {
  return ipv4([10, 101], generation % 65536);
}

function endpointAddress(i: number, j: number, perService: number, generation: number): string {
  return j === 0 && generation > 0 ? changedEndpointIP(generation) : endpointIP(i, j, perService);
}

export function serviceName(i: number): string {
  return `svc-${String(i).padStart(5, '0')}`;
}

export function service(i: number, namespace = BENCH_NAMESPACE): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name: serviceName(i),
      namespace,
      labels: { [PROXY_NAME_LABEL]: PROXY_NAME, app: serviceName(i) },
      annotations: { [SERVICE_NETWORK_ANNOTATION]: `${NETWORK.namespace}/${NETWORK.name}` },
    },
    spec: {
      type: 'ClusterIP',
      selector: { app: serviceName(i) },
      clusterIP: clusterIP(i),
      clusterIPs: [clusterIP(i)],
      ports: [{ name: 'http', port: SERVICE_PORT, targetPort: TARGET_PORT, protocol: 'TCP' }],
    },
  };
}

export function endpointSlice(i: number, perService: number, generation = 0, namespace = BENCH_NAMESPACE): V1EndpointSlice {
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: `${serviceName(i)}-bench`,
      namespace,
      labels: { [SERVICE_NAME_LABEL]: serviceName(i), [MANAGED_BY_LABEL]: MANAGED_BY, [NETWORK_LABEL]: networkLabelValue(NETWORK) },
      annotations: { [SERVICE_NETWORK_ANNOTATION]: `${NETWORK.namespace}/${NETWORK.name}` },
    },
    addressType: 'IPv4',
    ports: [{ name: 'http', port: TARGET_PORT, protocol: 'TCP' }],
    endpoints: Array.from({ length: perService }, (_, j) => ({
      addresses: [endpointAddress(i, j, perService, generation)],
      conditions: { ready: true, serving: true, terminating: false },
    })),
  };
}

export const clientInterface: PodInterface = { network: NETWORK, interface: CLIENT_INTERFACE, ipv4: [CLIENT_ADDRESS], ipv6: [] };

/** The network-status annotation of a pod attached to NETWORK as net1 with `address`. */
export function networkStatus(address: string): string {
  return JSON.stringify([
    { name: 'cbr0', interface: 'eth0', ips: ['10.244.0.5'], default: true },
    { name: `${NETWORK.namespace}/${NETWORK.name}`, interface: CLIENT_INTERFACE, ips: [address], default: false },
  ]);
}

/** Backend pod j of Service i: selected by the Service, its net1 address in its network-status. */
export function backendPod(i: number, j: number, perService: number, namespace = BENCH_NAMESPACE): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `${serviceName(i)}-p${j}`,
      namespace,
      labels: { app: serviceName(i) },
      annotations: { [NETWORKS_ANNOTATION]: `${NETWORK.namespace}/${NETWORK.name}`, [NETWORK_STATUS_ANNOTATION]: networkStatus(endpointIP(i, j, perService)) },
    },
    spec: { nodeName: 'bench-node', containers: [{ name: 'app', image: 'registry.example/app:1', ports: [{ name: 'http', containerPort: TARGET_PORT }] }] },
  };
}

/** A client pod object as the sidecar reads it (the webhook already ran; Multus already attached net1). */
export function clientPod(name: string, address = CLIENT_ADDRESS, namespace = BENCH_NAMESPACE): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      namespace,
      annotations: {
        [NETWORKS_ANNOTATION]: `${NETWORK.namespace}/${NETWORK.name}`,
        [SERVICE_NETWORK_ANNOTATION]: `${NETWORK.namespace}/${NETWORK.name}`,
        [NETWORK_STATUS_ANNOTATION]: networkStatus(address),
      },
    },
    spec: { containers: [{ name: 'app', image: 'registry.example/app:1' }] },
  };
}

/** The sidecar's desired state for N Services × E endpoints, built directly (no Kubernetes objects). */
export function desiredState(services: number, perService: number, changed?: { service: number; generation: number }): DesiredState {
  const targets: ServicePortTarget[] = [];
  for (let i = 0; i < services; i++) {
    const gen = changed?.service === i ? changed.generation : 0;
    const endpoints: BackendEndpoint[] = Array.from({ length: perService }, (_, j) => ({
      ip: endpointAddress(i, j, perService, gen),
      port: TARGET_PORT,
      ready: true,
      serving: true,
      terminating: false,
    }));
    targets.push({ service: `${BENCH_NAMESPACE}/${serviceName(i)}`, portName: 'http', protocol: 'TCP', clusterIP: clusterIP(i), port: SERVICE_PORT, family: 4, network: NETWORK, endpoints });
  }
  return { targets, interfaces: [clientInterface] };
}
