/**
 * Why a Service does or does not get traffic to its pods, from objects already read. Pure.
 *
 * It asks what the controller asks, with the controller's own functions, so the answer cannot
 * drift from what the controller does: the Service's annotations (service-spec.ts), whether each
 * network's NAD exists and is shared with the Service's namespace (nad-sharing.ts), and for each
 * selected pod what it contributes (pod-endpoints.ts, with the nodes' addresses refused as
 * address-policy.ts refuses them). Then it compares that with the slices really published: a pod
 * that should be there and is not means the controller is not running or behind.
 */
import { matchesSelector, formatLabelSelector, type LabelSelector } from '../../../src/annotations/label-selector.js';
import { nadSharedWith } from '../../../src/annotations/nad-sharing.js';
import { networkKey, type NetworkRef } from '../../../src/annotations/service-network.js';
import { INSTALL_NAMESPACE, PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NETWORK_ANNOTATION, SERVICE_SELECTOR_ANNOTATION } from '../../../src/keys.js';
import type { CoreV1Event, V1EndpointSlice, V1Pod, V1Service } from '../../../src/kube/types.js';
import { eventTimeMs } from '../../../src/kube/events.js';
import { compareText } from '../../../src/order.js';
import { isPodEligible, isPodReady, isPodTerminating, podEndpoints } from '../pod-endpoints.js';
import { readServiceSpec, type ServiceSpec } from '../service-spec.js';
import { readLoadBalancer } from '../../../src/annotations/load-balancer.js';
import { formatInputError } from '../../../src/result.js';
import { EVENT_COMPONENT as CONTROLLER_COMPONENT } from '../events.js';
import { verdictOf, type Finding, type ServiceNetwork, type ServicePod, type ServiceReport } from './report.js';

/** A NAD as read: exists (with its annotations), does not exist, or could not be read (undefined). */
export interface NadFact {
  readonly exists: boolean | undefined;
  readonly annotations?: Readonly<Record<string, string>>;
}

export interface ServiceFacts {
  readonly service: V1Service;
  /** By `namespace/name` of each network the Service names. */
  readonly nads: ReadonlyMap<string, NadFact>;
  /** Pods of the Service's namespace (a superset of the selected ones is fine); undefined when unreadable. */
  readonly pods: readonly V1Pod[] | undefined;
  /** Our EndpointSlices of the Service. */
  readonly slices: readonly V1EndpointSlice[];
  /** Every Node's own addresses (normalised); undefined when unreadable. */
  readonly nodeAddresses: readonly string[] | undefined;
  /** Events about the Service; undefined when unreadable. */
  readonly events: readonly CoreV1Event[] | undefined;
  readonly unreadable: readonly string[];
}

const finding = (severity: Finding['severity'], topic: string, code: string, message: string, fix?: string): Finding => ({ severity, topic, code, message, ...(fix !== undefined ? { fix } : {}) });

const CONTROLLER_CHECK = `kubectl -n ${INSTALL_NAMESPACE} get pods; kubectl -n ${INSTALL_NAMESPACE} logs deploy/multus-proxy-controller`;

interface Published {
  addresses: string[];
  ready: boolean;
}

/** What our slices list per pod (targetRef name), all networks together. */
function publishedPods(slices: readonly V1EndpointSlice[]): Map<string, Published> {
  const out = new Map<string, Published>();
  for (const s of slices) {
    for (const e of s.endpoints ?? []) {
      const name = e.targetRef?.name;
      if (name === undefined) continue;
      const p = out.get(name) ?? { addresses: [], ready: true };
      p.addresses.push(...e.addresses);
      if (e.conditions?.ready === false) p.ready = false;
      out.set(name, p);
    }
  }
  return out;
}

function readyEndpointCount(slices: readonly V1EndpointSlice[]): number {
  return slices.reduce((n, s) => n + (s.endpoints ?? []).filter((e) => e.conditions?.ready !== false).length, 0);
}

/** The networks the controller writes slices on: those whose NAD is shared with the Service's namespace. */
function checkNetworks(f: ServiceFacts, refs: readonly NetworkRef[], ns: string, object: string, out: Finding[]): { networks: ServiceNetwork[]; allowed: NetworkRef[] } {
  const networks: ServiceNetwork[] = [];
  const allowed: NetworkRef[] = [];
  for (const ref of refs) {
    const key = networkKey(ref);
    const nad = f.nads.get(key) ?? { exists: undefined };
    if (nad.exists === false) {
      out.push(
        finding(
          'error',
          'network',
          'NadMissing',
          `${object}: NetworkAttachmentDefinition ${key} does not exist, so no pod can be attached to that network`,
          `create it (kubectl get network-attachment-definitions -A lists the existing ones), or fix ${SERVICE_NETWORK_ANNOTATION}`,
        ),
      );
    } else if (nad.exists === undefined) {
      out.push(finding('warning', 'network', 'NadUnknown', `${object}: whether NetworkAttachmentDefinition ${key} exists is unknown (it could not be read)`));
    }
    // Unreadable: the controller reads NADs itself; assume its answer is yes rather than invent a cause.
    const sharing = nad.exists === undefined && ref.namespace !== ns ? { allowed: true as const } : nadSharedWith(ref, ns, nad.annotations, nad.exists === true);
    if (!sharing.allowed) out.push(finding('error', 'network', 'NetworkNotShared', `${object}: ${sharing.message}. The controller writes no EndpointSlice on that network until then`));
    else allowed.push(ref);
    networks.push({ network: key, nad: nad.exists === undefined ? 'unknown' : nad.exists ? 'exists' : 'missing', shared: sharing.allowed });
  }
  return { networks, allowed };
}

/** Why a selected pod is not (or not ready) in the slices. */
function podRow(svc: V1Service, allowed: readonly NetworkRef[], pod: V1Pod, published: Map<string, Published>, nodeAddresses: ReadonlySet<string>): ServicePod {
  const name = pod.metadata?.name ?? '';
  if (!isPodEligible(pod)) {
    return { pod: name, state: 'not-eligible', addresses: [], reasons: [{ network: '', code: 'PodFinished', message: `phase ${pod.status?.phase ?? '?'}: finished pods are never endpoints` }] };
  }
  const r = podEndpoints(svc, allowed, pod, undefined, { nodeAddresses });
  const reasons: ServicePod['reasons'][number][] = r.skips.map((s) => ({ network: s.network, code: s.reason, message: s.message }));
  const pub = published.get(name);
  if (pub === undefined) {
    if (r.endpoints.length > 0) {
      const would = r.endpoints.flatMap((e) => e.endpoint.addresses).join(', ');
      reasons.push({
        network: '',
        code: 'NotPublished',
        message: `the controller would publish ${would}, but no EndpointSlice of ours lists the pod: the controller is not running, not leading, or behind (${CONTROLLER_CHECK})`,
      });
    }
    return { pod: name, state: 'missing', addresses: [], reasons };
  }
  if (!pub.ready) {
    const why = isPodTerminating(pod)
      ? 'the pod is terminating'
      : `the pod's Ready condition is ${isPodReady(pod) ? 'True now (the slice is behind)' : ((pod.status?.conditions ?? []).find((c) => c.type === 'Ready')?.status ?? 'missing')}`;
    reasons.push({
      network: '',
      code: 'NotReady',
      message: `published with ready=false, so clients do not use it: ${why}; check its readiness probe (kubectl describe pod -n ${pod.metadata?.namespace ?? ''} ${name})`,
    });
    return { pod: name, state: 'not-ready', addresses: pub.addresses, reasons };
  }
  return { pod: name, state: 'ready', addresses: pub.addresses, reasons };
}

export function diagnoseService(f: ServiceFacts): ServiceReport {
  const svc = f.service;
  const ns = svc.metadata?.namespace ?? '';
  const name = svc.metadata?.name ?? '';
  const object = `Service ${ns}/${name}`;
  const findings: Finding[] = f.unreadable.map((u) => finding('warning', 'access', 'Unreadable', `could not read ${u}; the diagnosis below is without it`));
  const base = { kind: 'Service' as const, namespace: ns, name };
  const done = (extra: Partial<Pick<ServiceReport, 'networks' | 'selector' | 'pods' | 'readyEndpoints'>>): ServiceReport => ({
    ...base,
    verdict: verdictOf(findings),
    networks: extra.networks ?? [],
    ...(extra.selector !== undefined ? { selector: extra.selector } : {}),
    pods: extra.pods ?? [],
    readyEndpoints: extra.readyEndpoints ?? readyEndpointCount(f.slices),
    findings,
  });

  const spec = annotationSpec(svc, f.slices.length, object, findings);
  if (spec === undefined) return done({});
  const annotations = svc.metadata?.annotations ?? {};
  findings.push(
    finding(
      'ok',
      'annotation',
      'AnnotationValid',
      `${object}: ${SERVICE_NETWORK_ANNOTATION} ${JSON.stringify(annotations[SERVICE_NETWORK_ANNOTATION])} names ${spec.networks.map(networkKey).join(', ')}`,
    ),
  );
  if (svc.spec?.type === 'LoadBalancer') findings.push(...loadBalancerFindings(svc, f.nodeAddresses, object));
  if (svc.spec?.clusterIP === 'None' && Object.keys(svc.spec.selector ?? {}).length > 0) {
    findings.push(
      finding(
        'warning',
        'annotation',
        'HeadlessWithSelector',
        `${object} is headless with spec.selector: Kubernetes' own EndpointSlice controller also publishes the pods' primary addresses, which DNS mixes in`,
        `move the selector to the ${SERVICE_SELECTOR_ANNOTATION} annotation and remove spec.selector`,
      ),
    );
  }

  const { networks, allowed } = checkNetworks(f, spec.networks, ns, object, findings);
  const selector = formatLabelSelector(spec.selector);
  const pods = f.pods !== undefined ? podFindings(f, f.pods, svc, spec.selector, allowed, object, findings) : [];
  const readyEndpoints = readyEndpointCount(f.slices);
  findings.push(endpointsFinding(object, readyEndpoints, f.slices.length));
  controllerWarnings(f.events ?? [], findings);
  return done({ networks, selector, pods, readyEndpoints });
}

/** A Service spec the controller serves. */
type ServedSpec = Extract<ServiceSpec, { kind: 'serve' }>;

/** The opt-in and annotation checks: the spec to diagnose further, or undefined when the diagnosis ends here. */
function annotationSpec(svc: V1Service, sliceCount: number, object: string, findings: Finding[]): ServedSpec | undefined {
  const ns = svc.metadata?.namespace ?? '';
  const name = svc.metadata?.name ?? '';
  const annotations = svc.metadata?.annotations ?? {};
  const label = svc.metadata?.labels?.[PROXY_NAME_LABEL];
  const annotate = `kubectl annotate service -n ${ns} ${name} ${SERVICE_NETWORK_ANNOTATION}=<nad or namespace/nad>`;
  if ((annotations[SERVICE_NETWORK_ANNOTATION] ?? '').trim() === '') {
    findings.push(
      finding(
        'error',
        'annotation',
        'NotOptedIn',
        `${object} has no (or an empty) ${SERVICE_NETWORK_ANNOTATION} annotation, so multus-proxy does not serve it (kube-proxy does, on the primary network${label === PROXY_NAME ? ', unless the proxy-name label stops it, as here: then nobody serves it' : ''})`,
        annotate,
      ),
    );
    return undefined;
  }
  if (label !== PROXY_NAME) {
    findings.push(
      finding(
        'error',
        'annotation',
        'ProxyLabelMissing',
        `${object}: label ${PROXY_NAME_LABEL} is ${label === undefined ? 'missing' : `"${label}"`}, so the controller and the sidecars ignore the Service and kube-proxy serves it on the primary network; the webhook adds the label on create and update, so it did not see this Service`,
        `check that the webhook is installed (kubectl get mutatingwebhookconfiguration multus-proxy-webhook), then kubectl label service -n ${ns} ${name} ${PROXY_NAME_LABEL}=${PROXY_NAME} --overwrite`,
      ),
    );
  }
  if (svc.spec?.type === 'ExternalName') {
    findings.push(
      finding(
        'error',
        'annotation',
        'ExternalName',
        `${object} is of type ExternalName, which has no endpoints to publish`,
        `remove ${SERVICE_NETWORK_ANNOTATION}, or make it a ClusterIP or headless Service`,
      ),
    );
    return undefined;
  }
  const spec = readServiceSpec(svc);
  if (spec.kind === 'invalid') {
    findings.push(finding('error', 'annotation', 'InvalidAnnotation', `${spec.message}. The controller keeps the Service's existing EndpointSlices (${sliceCount}) unchanged until this is fixed`));
    return undefined;
  }
  if (spec.kind === 'refuse') {
    findings.push(finding('error', 'annotation', 'OverBudget', `${spec.message}. The controller writes no EndpointSlice for it and deletes those it had`));
    return undefined;
  }
  if (spec.kind === 'withdraw') {
    findings.push(
      finding(
        'error',
        'annotation',
        'NoSelector',
        `${object}: ${spec.reason}, so no pod is selected and no EndpointSlice is written`,
        `set spec.selector, or (headless Services) the ${SERVICE_SELECTOR_ANNOTATION} annotation, e.g. "app=web"`,
      ),
    );
    return undefined;
  }
  return spec;
}

/** Whether any endpoint is ready, as the clients see it. */
function endpointsFinding(object: string, readyEndpoints: number, sliceCount: number): Finding {
  if (readyEndpoints === 0) {
    return finding(
      'error',
      'endpoints',
      'NoReadyEndpoints',
      `${object} has no ready endpoint in its EndpointSlices: client sidecars reject connections to it (connection refused); the findings above say why`,
    );
  } else {
    return finding('ok', 'endpoints', 'ReadyEndpoints', `${object}: ${readyEndpoints} ready endpoint${readyEndpoints === 1 ? '' : 's'} in ${sliceCount} EndpointSlice${sliceCount === 1 ? '' : 's'}`);
  }
}

/**
 * A LoadBalancer's ingress as the node agent reads it (src/annotations/load-balancer.ts, the
 * nodes' addresses refused as the agents refuse them): pending, served, left to the balancer
 * (ipMode Proxy), or refused with the reason.
 */
function loadBalancerFindings(svc: V1Service, nodeAddresses: readonly string[] | undefined, object: string): Finding[] {
  const view = readLoadBalancer(svc, new Set(nodeAddresses ?? []));
  const out: Finding[] = view.problems.map((e) => finding('error', 'loadBalancer', 'LoadBalancerInputRefused', formatInputError(object, e)));
  if ((svc.status?.loadBalancer?.ingress ?? []).every((i) => i.ip === undefined || i.ip === '')) {
    out.push(
      finding(
        'warning',
        'loadBalancer',
        'LoadBalancerPending',
        `${object}: no load-balancer implementation has written an ingress IP (status.loadBalancer.ingress is empty), so only the cluster IP and node ports are served`,
        "run one that allocates from the network's subnet and announces on the nodes' interface there, e.g. MetalLB (docs/loadbalancer.md)",
      ),
    );
  }
  if (view.vips.length > 0) {
    const ranges = view.sourceRanges === undefined ? 'from every source' : `from ${view.sourceRanges.map((r) => r.cidr).join(', ') || 'no source (no valid range)'}`;
    out.push(
      finding(
        'ok',
        'loadBalancer',
        'LoadBalancerIngress',
        `${object}: ingress ${view.vips.map((v) => v.address).join(', ')} served by the node agent on every node and reached directly by sidecars, ${ranges}`,
      ),
    );
  }
  if (view.proxied.length > 0)
    out.push(
      finding(
        'info',
        'loadBalancer',
        'LoadBalancerProxyMode',
        `${object}: ingress ${view.proxied.join(', ')} has ipMode Proxy: the load balancer forwards to the nodes itself, so the node agent and sidecars leave the address alone`,
      ),
    );
  return out;
}

/** One row per selected pod, each problem a finding; and our slices' pods that are no longer selected. */
function podFindings(f: ServiceFacts, all: readonly V1Pod[], svc: V1Service, podSelector: LabelSelector, allowed: readonly NetworkRef[], object: string, findings: Finding[]): ServicePod[] {
  const ns = svc.metadata?.namespace ?? '';
  const selector = formatLabelSelector(podSelector);
  const published = publishedPods(f.slices);
  const pods: ServicePod[] = [];
  const selected = all.filter((p) => matchesSelector(podSelector, p.metadata?.labels)).sort((a, b) => compareText(a.metadata?.name ?? '', b.metadata?.name ?? ''));
  if (selected.length === 0) {
    findings.push(
      finding('error', 'endpoints', 'NoPodsMatch', `${object}: no pod in namespace ${ns} matches the selector ${selector}`, `compare with the pods' labels: kubectl get pods -n ${ns} --show-labels`),
    );
  }
  const nodeAddresses = new Set(f.nodeAddresses ?? []);
  for (const p of selected) {
    const row = podRow(svc, allowed, p, published, nodeAddresses);
    pods.push(row);
    if (row.state === 'ready' && row.reasons.length === 0) continue;
    const severity = row.state === 'ready' || row.state === 'not-eligible' ? 'info' : 'warning';
    const prefix = `Pod ${ns}/${row.pod}: `;
    for (const r of row.reasons) {
      const text = r.message.startsWith(prefix) ? r.message.slice(prefix.length) : r.message;
      findings.push(finding(severity, 'endpoints', r.code, `Pod ${ns}/${row.pod}${r.network !== '' ? ` on ${r.network}` : ''} (${row.state}): ${text}`));
    }
  }
  const selectedNames = new Set(selected.map((p) => p.metadata?.name ?? ''));
  for (const [pod, pub] of published) {
    if (!selectedNames.has(pod))
      findings.push(
        finding(
          'warning',
          'endpoints',
          'StaleEndpoint',
          `${object}: our slices still list Pod ${ns}/${pod} (${pub.addresses.join(', ')}), which is gone or no longer selected: the controller is behind`,
          CONTROLLER_CHECK,
        ),
      );
  }
  return pods;
}

/** The controller's own Warnings, newest first, beyond what the findings already derive (e.g. a write it could not make). */
function controllerWarnings(events: readonly CoreV1Event[], findings: Finding[]): void {
  const derived = new Set(findings.map((x) => x.code));
  const fromController = (e: CoreV1Event): boolean => (e.reportingComponent || e.source?.component) === CONTROLLER_COMPONENT;
  const warnings = events.filter((e) => e.type === 'Warning' && fromController(e) && !derived.has(e.reason ?? '')).sort((a, b) => eventTimeMs(b) - eventTimeMs(a));
  for (const e of warnings.slice(0, 5)) findings.push(finding('info', 'events', e.reason ?? 'Event', `Event ${e.reason ?? ''} (x${e.count ?? 1}): ${e.message ?? ''}`));
}
