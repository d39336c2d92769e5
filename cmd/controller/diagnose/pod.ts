/**
 * Why traffic from a client pod does or does not flow, from objects already read. Pure.
 *
 * Three questions, in the order traffic depends on them:
 * 1. was the sidecar injected, and if not, why: the webhook's own decision (src/injection-policy.ts)
 *    run on the pod and its namespace as they are now, after the two filters the apiserver applies
 *    before it ever calls the webhook (the namespace label, the excluded namespaces);
 * 2. is the sidecar ready and synced: its container status, and the Events it writes on its pod
 *    (SidecarSyncFailed / SidecarSyncRecovered, ServiceCapReached);
 * 3. which networks it serves (its own annotations, as the sidecar reads them) and which Services
 *    on them, with how many ready endpoints our slices give each.
 */
import { decideInjection, hasSidecar } from '../../../src/injection-policy.js';
import { findNetworkStatus, parseNetworkStatus, type NetworkStatusEntry } from '../../../src/annotations/network-status.js';
import { servedNetworks } from '../../../src/annotations/served-networks.js';
import { networkKey, type NetworkRef } from '../../../src/annotations/service-network.js';
import {
  INJECT_ANNOTATION,
  INJECTION_ENABLED,
  INJECTION_LABEL,
  INSTALL_NAMESPACE,
  NETWORKS_ANNOTATION,
  NETWORK_STATUS_ANNOTATION,
  SERVICE_NAME_LABEL,
  SERVICE_NETWORK_ANNOTATION,
  SIDECAR_CONTAINER_NAME,
  WEBHOOK_CONFIGURATION_NAME,
} from '../../../src/keys.js';
import { formatInputError } from '../../../src/result.js';
import { REASON_INVALID_ANNOTATION, REASON_SERVICE_CAP_REACHED, REASON_SYNC_FAILED, REASON_SYNC_RECOVERED } from '../../../src/sidecar-contract.js';
import type { CoreV1Event, V1EndpointSlice, V1Pod, V1Service } from '../../../src/kube/types.js';
import { eventTimeMs } from '../../../src/kube/events.js';
import { compareText } from '../../../src/order.js';
import { readServiceSpec } from '../service-spec.js';
import { verdictOf, type Finding, type PodNetwork, type PodPolicyReport, type PodReport, type ServedService, type SidecarState } from './report.js';
import { explainPodPolicy, type PolicyProbe } from './policy.js';
import type { MultiNetworkPolicy } from '../../../src/policy/api.js';

/** Namespaces the webhook configuration's namespaceSelector leaves out (deploy/base/webhook-configurations.yaml). */
export const NEVER_INJECTED_NAMESPACES: readonly string[] = [INSTALL_NAMESPACE, 'kube-system'];

export interface PodFacts {
  readonly pod: V1Pod;
  /** The namespace's labels; undefined when it could not be read. */
  readonly namespaceLabels: Readonly<Record<string, string>> | undefined;
  /** Events about the pod; undefined when they could not be read. */
  readonly events: readonly CoreV1Event[] | undefined;
  /** Services with the proxy-name label, every namespace; undefined when they could not be read. */
  readonly services: readonly V1Service[] | undefined;
  /** Whether the MutatingWebhookConfiguration exists; undefined when not read (the pod has the sidecar) or unreadable. */
  readonly webhookRegistered: boolean | undefined;
  /** Our EndpointSlices on the pod's networks. */
  readonly slices: readonly V1EndpointSlice[];
  /** The webhook's sidecar health port and its podSecurityDefault, as its decision uses them. */
  readonly healthPort: number;
  readonly podSecurityDefault?: string;
  /** What could not be read, said as it is (e.g. `Events of Pod a/b: 403 Forbidden: ...`). */
  readonly unreadable: readonly string[];
  /** The MultiNetworkPolicies of the pod's namespace; undefined when they could not be read (no policy part then). */
  readonly policies?: readonly MultiNetworkPolicy[];
  /** The address-group EndpointSlices of the pod's namespace. */
  readonly addressGroups?: readonly V1EndpointSlice[];
  /** A connection to explain against the policy. */
  readonly probe?: PolicyProbe;
}

const finding = (severity: Finding['severity'], topic: string, code: string, message: string, fix?: string): Finding => ({ severity, topic, code, message, ...(fix !== undefined ? { fix } : {}) });

/** The latest Event of any of `reasons`, or undefined. */
function latest(events: readonly CoreV1Event[], reasons: readonly string[]): CoreV1Event | undefined {
  let best: CoreV1Event | undefined;
  for (const e of events) if (reasons.includes(e.reason ?? '') && (best === undefined || eventTimeMs(e) >= eventTimeMs(best))) best = e;
  return best;
}

/** Why a pod without the sidecar has none: the first filter, in the order the apiserver and the webhook apply them. */
function whyNotInjected(f: PodFacts, ns: string, object: string, recreate: string): Finding {
  const topic = 'injection';
  if (NEVER_INJECTED_NAMESPACES.includes(ns)) {
    return finding('error', topic, 'NamespaceExcluded', `${object} has no sidecar: the webhook is never called for pods in namespace ${ns}`, 'run the client in an application namespace');
  }
  const labels = f.namespaceLabels;
  if (labels !== undefined && labels[INJECTION_LABEL] !== INJECTION_ENABLED) {
    const now = labels[INJECTION_LABEL] === undefined ? 'it has no such label' : `it has ${INJECTION_LABEL}=${labels[INJECTION_LABEL]}`;
    return finding(
      'error',
      topic,
      'NamespaceNotEnabled',
      `${object} has no sidecar: namespace ${ns} is not labelled ${INJECTION_LABEL}=${INJECTION_ENABLED} (${now}), so the webhook injects its pods only when a MultiNetworkPolicy selects them`,
      `kubectl label namespace ${ns} ${INJECTION_LABEL}=${INJECTION_ENABLED} --overwrite, then ${recreate}`,
    );
  }
  const decision = decideInjection({
    operation: 'CREATE',
    pod: f.pod,
    namespace: ns,
    namespaceLabels: labels,
    healthPort: f.healthPort,
    ...(f.podSecurityDefault !== undefined ? { podSecurityDefault: f.podSecurityDefault } : {}),
  });
  if (decision.action === 'inject' && f.webhookRegistered === false) {
    return finding(
      'error',
      topic,
      'WebhookNotRegistered',
      `${object} has no sidecar: the MutatingWebhookConfiguration ${WEBHOOK_CONFIGURATION_NAME} does not exist, so the apiserver calls no webhook when pods are created`,
      `install multus-proxy (docs/install.md; kubectl -n ${INSTALL_NAMESPACE} get deploy shows whether the rest is there), then ${recreate}`,
    );
  }
  if (decision.action === 'inject') {
    return finding(
      'error',
      topic,
      'NotInjected',
      `${object} has no sidecar, though the webhook would inject it now: it was created before its namespace was labelled, or while the webhook was not registered`,
      recreate,
    );
  }
  if (decision.action === 'deny') {
    return finding('error', topic, 'WouldBeDenied', `${object} has no sidecar, and the webhook would now refuse to create it: ${decision.message}`);
  }
  switch (decision.reason) {
    case 'opted-out':
      return finding('error', topic, 'OptedOut', `${object} has no sidecar: it opts out with ${INJECT_ANNOTATION}: "false"`, `remove that annotation, then ${recreate}`);
    case 'no-networks':
      return finding(
        'error',
        topic,
        'NoSecondaryNetwork',
        `${object} has no sidecar: it attaches no secondary network (${NETWORKS_ANNOTATION}), so there is nothing for a sidecar to serve`,
        `attach the network of the Service, e.g. ${NETWORKS_ANNOTATION}: "macvlan1", then ${recreate}`,
      );
    case 'host-network':
      return finding('error', topic, 'HostNetwork', `${object} has no sidecar: ${decision.detail}`, 'install the node agent (docs/node-agent.md), which serves cluster IPs to hostNetwork pods');
    case 'pod-security':
      return finding('error', topic, 'PodSecurity', `${object} has no sidecar: ${decision.detail}`);
    case 'port-conflict':
      return finding('error', topic, 'PortConflict', `${object} has no sidecar: ${decision.detail}`);
    case 'invalid-networks':
      return finding('error', topic, 'InvalidNetworks', `${object} has no sidecar: ${decision.detail}`);
    default:
      return finding('error', topic, 'NotInjected', `${object} has no sidecar (${decision.detail})`, recreate);
  }
}

type ContainerStatus = NonNullable<NonNullable<V1Pod['status']>['containerStatuses']>[number];

function stateText(s: ContainerStatus | undefined): string {
  if (s === undefined) return 'unknown';
  if (s.state?.running) return 'running';
  if (s.state?.waiting) return `waiting: ${s.state.waiting.reason ?? '?'}`;
  if (s.state?.terminated) return `terminated: ${s.state.terminated.reason ?? '?'} (exit ${s.state.terminated.exitCode})`;
  return 'unknown';
}

/** Ready and synced: the container status, then what the sidecar last said about its syncs. */
function sidecarState(f: PodFacts, object: string, logs: string, out: Finding[]): SidecarState {
  const pod = f.pod;
  const native = (pod.spec?.initContainers ?? []).some((c) => c.name === SIDECAR_CONTAINER_NAME && c.restartPolicy === 'Always');
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  const status = statuses.find((s) => s.name === SIDECAR_CONTAINER_NAME);
  const ready = status?.ready === true;
  const restarts = status?.restartCount ?? 0;
  const state = stateText(status);
  const topic = 'sidecar';
  if (status === undefined) {
    out.push(
      finding(
        'error',
        topic,
        'SidecarNotStarted',
        `${object}: the sidecar has no container status yet (pod phase ${pod.status?.phase ?? 'unknown'}); it has not started`,
        `kubectl describe pod -n ${pod.metadata?.namespace ?? ''} ${pod.metadata?.name ?? ''} (scheduling, image pull, volumes)`,
      ),
    );
  } else if (!ready) {
    const last = status.lastState?.terminated;
    const lastText = last ? `; last exit: ${last.reason ?? '?'} (exit ${last.exitCode})${last.message ? `: ${last.message.trim().slice(0, 300)}` : ''}` : '';
    out.push(
      finding(
        'error',
        topic,
        'SidecarNotReady',
        `${object}: the sidecar is not ready (${state}, ${restarts} restarts${lastText}); it turns ready after its first complete rule sync, and until then a native sidecar holds the app containers back`,
        logs,
      ),
    );
  } else {
    out.push(finding('ok', topic, 'SidecarReady', `${object}: the sidecar is ready (${native ? 'native sidecar' : 'regular container'}, ${restarts} restarts)`));
  }

  let synced: boolean | undefined = ready ? true : undefined;
  const events = f.events ?? [];
  const sync = latest(events, [REASON_SYNC_FAILED, REASON_SYNC_RECOVERED]);
  if (sync?.reason === REASON_SYNC_FAILED) {
    synced = false;
    out.push(finding('error', topic, 'SidecarSyncFailed', `${object}: the sidecar's rule sync is failing: ${sync.message ?? ''}`, logs));
  } else if (sync?.reason === REASON_SYNC_RECOVERED) {
    out.push(finding('info', topic, 'SidecarSyncRecovered', `${object}: the sidecar's rule sync failed earlier and has recovered`));
  }
  const cap = latest(events, [REASON_SERVICE_CAP_REACHED]);
  if (cap !== undefined) out.push(finding('warning', topic, REASON_SERVICE_CAP_REACHED, `${object}: ${cap.message ?? ''}`));
  const invalid = latest(events, [REASON_INVALID_ANNOTATION]);
  // Only a pointer: the annotations are checked as they are now below, which is what counts.
  if (invalid !== undefined) out.push(finding('info', topic, REASON_INVALID_ANNOTATION, `${object}: the sidecar said earlier: ${invalid.message ?? ''}`));
  return { mode: native ? 'native' : 'regular', ready, restarts, state, synced };
}

function portText(p: NonNullable<NonNullable<V1Service['spec']>['ports']>[number]): string {
  return `${p.port}/${p.protocol ?? 'TCP'}`;
}

/** Endpoints of one Service on one network, from our slices. */
function endpointCounts(slices: readonly V1EndpointSlice[], svc: V1Service, network: string): { ready: number; all: number } {
  let ready = 0;
  let all = 0;
  for (const s of slices) {
    if (s.metadata?.namespace !== svc.metadata?.namespace || s.metadata?.labels?.[SERVICE_NAME_LABEL] !== svc.metadata?.name) continue;
    if (s.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] !== network) continue;
    for (const e of s.endpoints ?? []) {
      all++;
      if (e.conditions?.ready !== false) ready++;
    }
  }
  return { ready, all };
}

/** The Services of `network` (their own annotation names it), in namespace/name order. */
function servicesOn(services: readonly V1Service[], network: string, slices: readonly V1EndpointSlice[]): ServedService[] {
  const out: ServedService[] = [];
  for (const svc of services) {
    const spec = readServiceSpec(svc);
    if (spec.kind !== 'serve' || !spec.networks.some((r) => networkKey(r) === network)) continue;
    const counts = endpointCounts(slices, svc, network);
    out.push({
      service: `${svc.metadata?.namespace ?? ''}/${svc.metadata?.name ?? ''}`,
      clusterIP: svc.spec?.clusterIP ?? '',
      ports: (svc.spec?.ports ?? []).map(portText),
      readyEndpoints: counts.ready,
      endpoints: counts.all,
    });
  }
  return out.sort((a, b) => compareText(a.service, b.service));
}

function networksOf(f: PodFacts, object: string, injected: boolean, out: Finding[]): PodNetwork[] {
  const pod = f.pod;
  const ns = pod.metadata?.namespace ?? '';
  const annotations = pod.metadata?.annotations ?? {};
  const served = servedNetworks(annotations, ns);
  if (!served.ok) {
    out.push(finding('error', 'networks', 'InvalidAnnotation', formatInputError(object, served.error)));
    return [];
  }
  const refs: NetworkRef[] = served.value.networks;
  const statusText = annotations[NETWORK_STATUS_ANNOTATION];
  let status: NetworkStatusEntry[] | undefined;
  if (statusText === undefined) {
    if (refs.length > 0) {
      out.push(
        finding(
          injected ? 'error' : 'warning',
          'networks',
          'NetworkStatusMissing',
          `${object}: no ${NETWORK_STATUS_ANNOTATION} annotation: Multus has not reported the pod's networks, and the sidecar serves none until it does`,
          `check that Multus runs on node ${pod.spec?.nodeName ?? '(not scheduled)'} and attached the networks: kubectl describe pod -n ${ns} ${pod.metadata?.name ?? ''}`,
        ),
      );
    }
  } else {
    const parsed = parseNetworkStatus(statusText);
    if (parsed.ok) status = parsed.value;
    else out.push(finding('error', 'networks', 'NetworkStatusInvalid', formatInputError(object, parsed.error)));
  }
  const result: PodNetwork[] = [];
  for (const ref of refs) {
    const key = networkKey(ref);
    const entry = status === undefined ? undefined : findNetworkStatus(status, ref);
    if (status !== undefined && entry === undefined) {
      const attached = status.map((e) => e.name).join(', ') || 'none';
      out.push(
        finding(
          'error',
          'networks',
          'NetworkNotAttached',
          `${object}: serves network ${key}, but ${NETWORK_STATUS_ANNOTATION} has no entry for it (attached: ${attached}), so the sidecar has no interface to reach its Services through`,
          `attach it with ${NETWORKS_ANNOTATION} and recreate the pod, or check Multus' log for the attachment`,
        ),
      );
    }
    const services = f.services === undefined ? [] : servicesOn(f.services, key, f.slices);
    if (f.services !== undefined && services.length === 0) out.push(finding('info', 'networks', 'NoServices', `no Service names network ${key} (${SERVICE_NETWORK_ANNOTATION})`));
    for (const s of services) {
      if (s.readyEndpoints === 0) {
        out.push(
          finding(
            'warning',
            'networks',
            'ServiceWithoutEndpoints',
            `Service ${s.service} has no ready endpoint on network ${key} (${s.endpoints} published): connections to it from this pod are refused`,
            `diagnose service ${s.service}`,
          ),
        );
      }
    }
    result.push({ network: key, ...(entry?.interface !== undefined ? { interface: entry.interface } : {}), addresses: entry === undefined ? [] : [...entry.ipv4, ...entry.ipv6], services });
  }
  if (refs.length > 0 && result.every((n) => n.services.length === 0) && f.services !== undefined) {
    out.push(
      finding(
        'warning',
        'networks',
        'NothingServed',
        `${object}: no Service is on any network it serves (${refs.map(networkKey).join(', ')})`,
        `annotate a Service with ${SERVICE_NETWORK_ANNOTATION} naming one of them`,
      ),
    );
  }
  return result;
}

export function diagnosePod(f: PodFacts): PodReport {
  const pod = f.pod;
  const ns = pod.metadata?.namespace ?? '';
  const name = pod.metadata?.name ?? '';
  const object = `Pod ${ns}/${name}`;
  const owned = (pod.metadata?.ownerReferences ?? []).length > 0;
  const recreate = owned ? `recreate the pod (kubectl delete pod -n ${ns} ${name}; its controller creates a new one)` : `recreate the pod (kubectl delete pod -n ${ns} ${name}, then create it again)`;
  const logs = `kubectl logs -n ${ns} ${name} -c ${SIDECAR_CONTAINER_NAME}`;
  const findings: Finding[] = f.unreadable.map((u) => finding('warning', 'access', 'Unreadable', `could not read ${u}; the diagnosis below is without it`));

  const injected = hasSidecar(pod);
  let sidecar: SidecarState | undefined;
  if (injected) {
    findings.push(finding('ok', 'injection', 'Injected', `${object} has the ${SIDECAR_CONTAINER_NAME} sidecar`));
    sidecar = sidecarState(f, object, logs, findings);
  } else {
    findings.push(whyNotInjected(f, ns, object, recreate));
  }
  const phase = pod.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed') findings.push(finding('info', 'pod', 'PodFinished', `${object} has finished (phase ${phase}); it sends no traffic`));
  const networks = networksOf(f, object, injected, findings);
  let policy: PodPolicyReport | undefined;
  if (f.policies !== undefined) {
    const explained = explainPodPolicy(
      { pod, policies: f.policies, addressGroups: f.addressGroups ?? [], namespaceLabels: f.namespaceLabels, ...(f.probe !== undefined ? { probe: f.probe } : {}) },
      object,
      recreate,
    );
    policy = explained.report;
    findings.push(...explained.findings);
  }
  return { kind: 'Pod', namespace: ns, name, verdict: verdictOf(findings), injected, ...(sidecar !== undefined ? { sidecar } : {}), networks, ...(policy !== undefined ? { policy } : {}), findings };
}
