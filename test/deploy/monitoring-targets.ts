/**
 * The scrape targets the chart's ServiceMonitors and PodMonitor select, found as the Prometheus
 * Operator and Prometheus's Kubernetes discovery find them: a ServiceMonitor's Services by label in
 * its namespace, their EndpointSlices' addresses on the named port; a PodMonitor's pods (every
 * container, init containers too) through its relabelings. Each target gets the labels Prometheus
 * gives it (namespace, pod, container, service, endpoint, job, instance), which the alerts group by.
 */
import type { V1EndpointSlice, V1Pod, V1Service } from '../../src/kube/types.js';

export interface Relabel {
  readonly sourceLabels?: readonly string[];
  readonly separator?: string;
  readonly regex?: string;
  readonly targetLabel?: string;
  readonly replacement?: string;
  readonly action?: string;
}

export interface ServiceMonitor {
  readonly metadata: { readonly name: string; readonly namespace: string };
  readonly spec: {
    readonly selector: { readonly matchLabels?: Readonly<Record<string, string>> };
    readonly namespaceSelector?: { readonly any?: boolean; readonly matchNames?: readonly string[] };
    readonly endpoints: readonly { readonly port?: string; readonly path?: string; readonly scheme?: string }[];
  };
}

export interface PodMonitor {
  readonly metadata: { readonly name: string; readonly namespace: string };
  readonly spec: {
    readonly selector: { readonly matchLabels?: Readonly<Record<string, string>> };
    readonly namespaceSelector?: { readonly any?: boolean; readonly matchNames?: readonly string[] };
    readonly podMetricsEndpoints: readonly { readonly port?: string; readonly path?: string; readonly scheme?: string; readonly relabelings?: readonly Relabel[] }[];
  };
}

/** A target: its URL and the labels its series get. */
export interface Target {
  readonly url: string;
  readonly labels: Readonly<Record<string, string>>;
}

/**
 * One relabel step on a label set; undefined when a keep or drop step drops the target. The regex
 * is anchored at both ends and `$1`-style groups expand in the replacement, as in Prometheus.
 */
export function relabel(labels: Readonly<Record<string, string>>, r: Relabel): Record<string, string> | undefined {
  const value = (r.sourceLabels ?? []).map((l) => labels[l] ?? '').join(r.separator ?? ';');
  const m = new RegExp(`^(?:${r.regex ?? '(.*)'})$`).exec(value);
  const action = r.action ?? 'replace';
  if (action === 'keep') return m === null ? undefined : { ...labels };
  if (action === 'drop') return m === null ? { ...labels } : undefined;
  if (action !== 'replace') throw new Error(`relabel action ${action} is not modelled here`);
  if (m === null || r.targetLabel === undefined) return { ...labels };
  const out = (r.replacement ?? '$1').replace(/\$\{?(\d+)\}?/g, (_, g: string) => m[Number(g)] ?? '');
  const next = { ...labels };
  if (out === '') delete next[r.targetLabel];
  else next[r.targetLabel] = out;
  return next;
}

const matches = (labels: Readonly<Record<string, string>> | undefined, want: Readonly<Record<string, string>> | undefined): boolean =>
  Object.entries(want ?? {}).every(([k, v]) => labels?.[k] === v);

function inNamespaces(sel: ServiceMonitor['spec']['namespaceSelector'], own: string, ns: string | undefined): boolean {
  if (sel?.any === true) return true;
  return (sel?.matchNames ?? [own]).includes(ns ?? '');
}

const hostPort = (address: string, port: number | string): string => (address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`);

/** The targets of a ServiceMonitor: each address of each selected Service's slices, on the named port. */
export function serviceMonitorTargets(sm: ServiceMonitor, services: readonly V1Service[], slices: readonly V1EndpointSlice[]): Target[] {
  const out: Target[] = [];
  for (const svc of services) {
    const ns = svc.metadata?.namespace ?? '';
    const name = svc.metadata?.name ?? '';
    if (!inNamespaces(sm.spec.namespaceSelector, sm.metadata.namespace, ns) || !matches(svc.metadata?.labels, sm.spec.selector.matchLabels)) continue;
    for (const ep of sm.spec.endpoints) {
      for (const slice of slices) {
        if (slice.metadata?.namespace !== ns || slice.metadata.labels?.['kubernetes.io/service-name'] !== name) continue;
        const port = slice.ports?.find((p) => p.name === ep.port)?.port;
        if (port === undefined) continue;
        for (const e of slice.endpoints) {
          // Prometheus scrapes unready endpoints too (its endpointslice discovery keeps them); not one on its way out.
          if (e.conditions?.terminating === true) continue;
          for (const a of e.addresses) {
            const instance = hostPort(a, port);
            const pod = e.targetRef?.kind === 'Pod' ? e.targetRef.name : undefined;
            out.push({
              url: `${ep.scheme ?? 'http'}://${instance}${ep.path ?? '/metrics'}`,
              labels: { namespace: ns, service: name, endpoint: ep.port ?? '', job: name, instance, ...(pod === undefined ? {} : { pod }) },
            });
          }
        }
      }
    }
  }
  return out;
}

/** The targets of a PodMonitor: one per container of each running selected pod, through its relabelings. */
export function podMonitorTargets(pm: PodMonitor, pods: readonly V1Pod[]): Target[] {
  const out: Target[] = [];
  for (const p of pods) {
    const ns = p.metadata?.namespace ?? '';
    const ip = p.status?.podIP;
    if (p.status?.phase !== 'Running' || ip === undefined || p.metadata?.deletionTimestamp !== undefined) continue;
    if (!inNamespaces(pm.spec.namespaceSelector, pm.metadata.namespace, ns) || !matches(p.metadata?.labels, pm.spec.selector.matchLabels)) continue;
    const containers = [...(p.spec?.initContainers ?? []).map((c) => ({ c, init: 'true' })), ...(p.spec?.containers ?? []).map((c) => ({ c, init: 'false' }))];
    for (const ep of pm.spec.podMetricsEndpoints) {
      for (const { c, init } of containers) {
        const port = ep.port === undefined ? undefined : c.ports?.find((x) => x.name === ep.port);
        if (ep.port !== undefined && port === undefined) continue;
        let labels: Record<string, string> | undefined = {
          __address__: port === undefined ? ip : hostPort(ip, port.containerPort),
          __meta_kubernetes_namespace: ns,
          __meta_kubernetes_pod_name: p.metadata?.name ?? '',
          __meta_kubernetes_pod_ip: ip,
          __meta_kubernetes_pod_container_name: c.name,
          __meta_kubernetes_pod_container_init: init,
          namespace: ns,
          pod: p.metadata?.name ?? '',
          container: c.name,
          job: `${pm.metadata.namespace}/${pm.metadata.name}`,
          ...(ep.port === undefined ? {} : { endpoint: ep.port }),
        };
        for (const r of ep.relabelings ?? []) {
          labels = relabel(labels, r);
          if (labels === undefined) break;
        }
        if (labels === undefined) continue;
        const address = labels['__address__'] ?? '';
        const kept = Object.fromEntries(Object.entries(labels).filter(([k]) => !k.startsWith('__')));
        out.push({ url: `${ep.scheme ?? 'http'}://${address}${ep.path ?? '/metrics'}`, labels: { ...kept, instance: kept['instance'] ?? address } });
      }
    }
  }
  return out;
}
