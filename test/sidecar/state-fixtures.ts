/**
 * Builders for the Kubernetes objects the sidecar reads (its pod, opted-in Services, our
 * EndpointSlices), shared by the pure state tests and the runtime tests that create them in a
 * real apiserver. They write exactly the labels and annotations docs/design.md fixes.
 */
import { MANAGED_BY, MANAGED_BY_LABEL, NETWORK_LABEL, NETWORK_STATUS_ANNOTATION, PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { networkLabelValue } from '../../src/annotations/network-label.js';
import type { V1EndpointSlice, V1Pod, V1Service } from '../../src/kube/types.js';

export interface StatusEntry {
  /** `ns/nad`, or a bare name for the primary network. */
  name: string;
  interface?: string;
  ips?: string[];
  default?: boolean;
}

export function podObject(ns: string, name: string, opts: { serviceNetwork?: string; status?: StatusEntry[] } = {}): V1Pod {
  const annotations: Record<string, string> = {};
  if (opts.serviceNetwork !== undefined) annotations[SERVICE_NETWORK_ANNOTATION] = opts.serviceNetwork;
  if (opts.status !== undefined) annotations[NETWORK_STATUS_ANNOTATION] = JSON.stringify(opts.status);
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { namespace: ns, name, annotations },
    spec: { containers: [{ name: 'app', image: 'example.invalid/app' }] },
  };
}

export interface PortSpec {
  name?: string;
  port: number;
  protocol?: 'TCP' | 'UDP' | 'SCTP';
  targetPort?: number;
}

export function serviceObject(
  ns: string,
  name: string,
  opts: { networks: string; clusterIPs?: string[]; headless?: boolean; ports: PortSpec[]; affinitySeconds?: number | 'default'; type?: string; ipFamilies?: string[] },
): V1Service {
  const spec: NonNullable<V1Service['spec']> = {
    ports: opts.ports.map((p) => ({ ...(p.name !== undefined ? { name: p.name } : {}), port: p.port, protocol: p.protocol ?? 'TCP', targetPort: p.targetPort ?? p.port })),
  };
  if (opts.type !== undefined) spec.type = opts.type;
  if (opts.headless === true) {
    spec.clusterIP = 'None';
    spec.clusterIPs = ['None'];
  } else if (opts.clusterIPs !== undefined) {
    spec.clusterIP = opts.clusterIPs[0];
    spec.clusterIPs = opts.clusterIPs;
  }
  if (opts.ipFamilies !== undefined) {
    spec.ipFamilies = opts.ipFamilies;
    spec.ipFamilyPolicy = opts.ipFamilies.length > 1 ? 'RequireDualStack' : 'SingleStack';
  }
  if (opts.affinitySeconds !== undefined) {
    spec.sessionAffinity = 'ClientIP';
    if (opts.affinitySeconds !== 'default') spec.sessionAffinityConfig = { clientIP: { timeoutSeconds: opts.affinitySeconds } };
  }
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { namespace: ns, name, labels: { [PROXY_NAME_LABEL]: PROXY_NAME }, annotations: { [SERVICE_NETWORK_ANNOTATION]: opts.networks } },
    spec,
  };
}

export interface EndpointSpec {
  ip: string;
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
  /** The node the endpoint runs on (the node agent's NodePort Local). */
  nodeName?: string;
}

export function sliceObject(ns: string, name: string, opts: { service: string; network: string; family: 4 | 6; ports: PortSpec[]; endpoints: EndpointSpec[]; triggerTime?: string }): V1EndpointSlice {
  const [netNs = ns, nad = ''] = opts.network.split('/');
  const annotations: Record<string, string> = { [SERVICE_NETWORK_ANNOTATION]: `${netNs}/${nad}` };
  if (opts.triggerTime !== undefined) annotations['endpoints.kubernetes.io/last-change-trigger-time'] = opts.triggerTime;
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      namespace: ns,
      name,
      labels: {
        [SERVICE_NAME_LABEL]: opts.service,
        [MANAGED_BY_LABEL]: MANAGED_BY,
        [NETWORK_LABEL]: networkLabelValue({ namespace: netNs, name: nad }),
      },
      annotations,
    },
    addressType: opts.family === 4 ? 'IPv4' : 'IPv6',
    ports: opts.ports.map((p) => ({ ...(p.name !== undefined ? { name: p.name } : {}), port: p.targetPort ?? p.port, protocol: p.protocol ?? 'TCP' })),
    endpoints: opts.endpoints.map((e) => {
      const conditions: { ready?: boolean; serving?: boolean; terminating?: boolean } = {};
      if (e.ready !== undefined) conditions.ready = e.ready;
      if (e.serving !== undefined) conditions.serving = e.serving;
      if (e.terminating !== undefined) conditions.terminating = e.terminating;
      return { addresses: [e.ip], conditions, ...(e.nodeName !== undefined ? { nodeName: e.nodeName } : {}) };
    }),
  };
}
