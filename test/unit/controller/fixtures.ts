/**
 * Builders for Services, pods and network-status values shared by the controller's unit and
 * integration tests, so every test writes the objects the same (valid) way.
 */
import type { V1Pod, V1Service } from '../../../src/kube/types.js';
import { NETWORK_STATUS_ANNOTATION, PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NETWORK_ANNOTATION, SERVICE_SELECTOR_ANNOTATION } from '../../../src/keys.js';

export interface StatusEntry {
  name: string;
  ips: string[];
  iface?: string;
  default?: boolean;
}

/** A Multus network-status value: the primary network first, then the given entries. */
export function networkStatus(entries: readonly StatusEntry[]): string {
  const primary = { name: 'cbr0', interface: 'eth0', ips: ['10.244.0.5'], default: true };
  return JSON.stringify([primary, ...entries.map((e, i) => ({ name: e.name, interface: e.iface ?? `net${i + 1}`, ips: e.ips, mac: '0a:58:0a:f4:00:05', default: e.default ?? false }))]);
}

export interface ServiceOptions {
  namespace?: string;
  network?: string;
  selector?: Record<string, string>;
  selectorAnnotation?: string;
  ports?: NonNullable<NonNullable<V1Service['spec']>['ports']>;
  headless?: boolean;
  publishNotReadyAddresses?: boolean;
  uid?: string;
}

export function service(name: string, o: ServiceOptions = {}): V1Service {
  const annotations: Record<string, string> = {};
  if (o.network !== undefined) annotations[SERVICE_NETWORK_ANNOTATION] = o.network;
  if (o.selectorAnnotation !== undefined) annotations[SERVICE_SELECTOR_ANNOTATION] = o.selectorAnnotation;
  const spec: NonNullable<V1Service['spec']> = { ports: o.ports ?? [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 80 }] };
  if (o.selector !== undefined) spec.selector = o.selector;
  if (o.headless === true) spec.clusterIP = 'None';
  if (o.publishNotReadyAddresses === true) spec.publishNotReadyAddresses = true;
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name, namespace: o.namespace ?? 'default', uid: o.uid ?? `uid-${name}`, labels: { [PROXY_NAME_LABEL]: PROXY_NAME }, annotations },
    spec,
  };
}

export interface PodOptions {
  namespace?: string;
  labels?: Record<string, string>;
  status?: string;
  ready?: boolean;
  terminating?: boolean;
  phase?: string;
  nodeName?: string;
  containerPorts?: { name: string; containerPort: number; protocol?: string }[];
}

export function pod(name: string, o: PodOptions = {}): V1Pod {
  const annotations: Record<string, string> = {};
  if (o.status !== undefined) annotations[NETWORK_STATUS_ANNOTATION] = o.status;
  const p: V1Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace: o.namespace ?? 'default', uid: `uid-${name}`, labels: o.labels ?? { app: 'web' }, annotations },
    spec: { containers: [{ name: 'c', image: 'nginx', ports: o.containerPorts ?? [] }] },
    status: { phase: o.phase ?? 'Running', conditions: [{ type: 'Ready', status: o.ready === false ? 'False' : 'True' }] },
  };
  if (o.nodeName !== undefined && p.spec !== undefined) p.spec.nodeName = o.nodeName;
  if (o.terminating === true && p.metadata !== undefined) p.metadata.deletionTimestamp = new Date('2026-01-01T00:00:00Z');
  return p;
}
