/**
 * The IO edge of `diagnose`: reads, with the project's own client, the objects the pure diagnosis
 * needs. Only the object asked about is required (a clear error names it and the fix when it is
 * missing); everything else that cannot be read (RBAC, an API not installed) is noted and the
 * diagnosis goes on without it, saying so.
 */
import { isNotFound, KubeApiError, getIfExists, type KubeClient } from '../../../src/kube/client.js';
import { apiPath } from '../../../src/kube/paths.js';
import type { CoreV1Event, KubeObject, V1EndpointSlice, V1Namespace, V1Pod, V1Service } from '../../../src/kube/types.js';
import { servedNetworks } from '../../../src/annotations/served-networks.js';
import { networkKey } from '../../../src/annotations/service-network.js';
import { networkLabelValue } from '../../../src/annotations/network-label.js';
import {
  MANAGED_BY,
  MANAGED_BY_LABEL,
  MULTI_NETWORK_POLICY_GROUP,
  MULTI_NETWORK_POLICY_RESOURCE,
  MULTI_NETWORK_POLICY_VERSIONS,
  NETWORK_LABEL,
  PROXY_NAME,
  PROXY_NAME_LABEL,
  WEBHOOK_CONFIGURATION_NAME,
} from '../../../src/keys.js';
import { ADDRESS_GROUP_MANAGED_BY } from '../../../src/policy/address-group.js';
import type { MultiNetworkPolicy } from '../../../src/policy/api.js';
import type { PolicyProbe } from './policy.js';
import { hasSidecar } from '../../../src/injection-policy.js';
import { ourSlicesSelector } from '../plan.js';
import { readServiceSpec } from '../service-spec.js';
import { nodeAddressList } from '../slim.js';
import type { PodFacts } from './pod.js';
import type { NadFact, ServiceFacts } from './service.js';

/** The object asked about cannot be diagnosed (missing, forbidden, apiserver unreachable); the message says what to do. */
export class DiagnoseError extends Error {
  override readonly name = 'DiagnoseError';
}

export interface WebhookSettings {
  readonly healthPort: number;
  readonly podSecurityDefault?: string;
}

function why(e: unknown): string {
  return e instanceof KubeApiError ? `${e.status}${e.reason ? ` ${e.reason}` : ''}: ${e.apiMessage}` : e instanceof Error ? e.message : String(e);
}

/** The object asked about: its absence or an unreadable one ends the diagnosis with the fix. */
async function required<T>(client: KubeClient, path: string, object: string, listCommand: string): Promise<T> {
  try {
    return await client.get<T>(path);
  } catch (e) {
    if (isNotFound(e)) throw new DiagnoseError(`${object} not found: check the name and the namespace (${listCommand}); give the namespace with -n NAMESPACE or as NAMESPACE/NAME`);
    if (e instanceof KubeApiError && e.status === 403)
      throw new DiagnoseError(`${object}: forbidden (${e.apiMessage}); diagnose needs read access to it: run it with credentials that may get it (e.g. the cluster admin's kubeconfig)`);
    throw new DiagnoseError(`${object} could not be read: ${why(e)}; is the apiserver reachable with this kubeconfig (kubectl get --raw /readyz)?`);
  }
}

/** Everything else: undefined when it cannot be read, with a note of what and why. */
async function optional<T>(unreadable: string[], what: string, read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (e) {
    unreadable.push(`${what} (${why(e)})`);
    return undefined;
  }
}

async function eventsAbout(client: KubeClient, unreadable: string[], kind: string, ns: string, name: string): Promise<CoreV1Event[] | undefined> {
  const list = await optional(unreadable, `the Events of ${kind} ${ns}/${name}`, () =>
    client.list<CoreV1Event>(apiPath('', 'v1', 'events', ns), { fieldSelector: `involvedObject.kind=${kind},involvedObject.name=${name}` }),
  );
  return list?.items;
}

/**
 * The namespace's MultiNetworkPolicies, newest version first (v1beta2 keeps endPort); none when no
 * version is served (the CRD is not installed); undefined when they cannot be read.
 */
async function readPolicies(client: KubeClient, unreadable: string[], ns: string): Promise<MultiNetworkPolicy[] | undefined> {
  for (const version of [...MULTI_NETWORK_POLICY_VERSIONS].reverse()) {
    try {
      return (await client.list<MultiNetworkPolicy>(apiPath(MULTI_NETWORK_POLICY_GROUP, version, MULTI_NETWORK_POLICY_RESOURCE, ns))).items;
    } catch (e) {
      if (isNotFound(e)) continue;
      unreadable.push(`the MultiNetworkPolicies of namespace ${ns} (${why(e)})`);
      return undefined;
    }
  }
  return [];
}

export async function readPodFacts(client: KubeClient, ns: string, name: string, webhook: WebhookSettings, probe?: PolicyProbe): Promise<PodFacts> {
  const pod = await required<V1Pod>(client, apiPath('', 'v1', 'pods', ns, name), `Pod ${ns}/${name}`, `kubectl get pods -n ${ns}`);
  const unreadable: string[] = [];
  const namespace = await optional(unreadable, `Namespace ${ns}`, () => client.get<V1Namespace>(apiPath('', 'v1', 'namespaces', undefined, ns)));
  const events = await eventsAbout(client, unreadable, 'Pod', ns, name);
  // Only asked when the sidecar is missing: a pod the webhook would inject now may never have met it.
  const webhookRegistered = hasSidecar(pod)
    ? undefined
    : await optional(
        unreadable,
        `MutatingWebhookConfiguration ${WEBHOOK_CONFIGURATION_NAME}`,
        async () => (await getIfExists(client, apiPath('admissionregistration.k8s.io', 'v1', 'mutatingwebhookconfigurations', undefined, WEBHOOK_CONFIGURATION_NAME))) !== undefined,
      );
  const services = await optional(unreadable, `the Services labelled ${PROXY_NAME_LABEL}=${PROXY_NAME}`, () =>
    client.list<V1Service>(apiPath('', 'v1', 'services'), { labelSelector: `${PROXY_NAME_LABEL}=${PROXY_NAME}` }),
  );
  // Our slices on the pod's networks, selected as the sidecar selects them (the network label).
  const served = servedNetworks(pod.metadata?.annotations, ns);
  const labels = served.ok ? [...new Set(served.value.networks.map(networkLabelValue))] : [];
  const slices =
    labels.length === 0
      ? { items: [] as V1EndpointSlice[] }
      : await optional(unreadable, 'the EndpointSlices of its networks', () =>
          client.list<V1EndpointSlice>(apiPath('discovery.k8s.io', 'v1', 'endpointslices'), { labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY},${NETWORK_LABEL} in (${labels.join(',')})` }),
        );
  const policies = await readPolicies(client, unreadable, ns);
  // The address groups as the sidecar sees them: every one of its namespace.
  const groups =
    policies === undefined || policies.length === 0
      ? undefined
      : await optional(unreadable, `the address groups (EndpointSlices labelled ${MANAGED_BY_LABEL}=${ADDRESS_GROUP_MANAGED_BY}) of namespace ${ns}`, () =>
          client.list<V1EndpointSlice>(apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns), { labelSelector: `${MANAGED_BY_LABEL}=${ADDRESS_GROUP_MANAGED_BY}` }),
        );
  return {
    pod,
    namespaceLabels: namespace === undefined ? undefined : (namespace.metadata?.labels ?? {}),
    events,
    webhookRegistered,
    services: services?.items,
    slices: slices?.items ?? [],
    healthPort: webhook.healthPort,
    ...(webhook.podSecurityDefault !== undefined ? { podSecurityDefault: webhook.podSecurityDefault } : {}),
    unreadable,
    // Without the groups every peer would look unwritten: no policy part then (the note says why).
    ...(policies !== undefined && (policies.length === 0 || groups !== undefined) ? { policies, addressGroups: groups?.items ?? [] } : {}),
    ...(probe !== undefined ? { probe } : {}),
  };
}

async function readNad(client: KubeClient, unreadable: string[], ns: string, name: string): Promise<NadFact> {
  const what = `NetworkAttachmentDefinition ${ns}/${name}`;
  try {
    const nad = await getIfExists<KubeObject>(client, apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', ns, name));
    if (nad !== undefined) return { exists: true, annotations: nad.metadata?.annotations ?? {} };
    // A 404 also comes when the NAD API itself is missing: say which.
    const served = await getIfExists(client, '/apis/k8s.cni.cncf.io/v1').catch(() => ({}));
    if (served === undefined) unreadable.push(`${what} (the API k8s.cni.cncf.io/v1 is not served: Multus' CRD is not installed)`);
    return { exists: false };
  } catch (e) {
    unreadable.push(`${what} (${why(e)})`);
    return { exists: undefined };
  }
}

export async function readServiceFacts(client: KubeClient, ns: string, name: string): Promise<ServiceFacts> {
  const service = await required<V1Service>(client, apiPath('', 'v1', 'services', ns, name), `Service ${ns}/${name}`, `kubectl get services -n ${ns}`);
  const unreadable: string[] = [];
  const spec = readServiceSpec(service);
  const nads = new Map<string, NadFact>();
  if (spec.kind === 'serve') for (const ref of spec.networks) nads.set(networkKey(ref), await readNad(client, unreadable, ref.namespace, ref.name));
  // All the namespace's pods, filtered by the pure side with the controller's own matcher.
  const pods = await optional(unreadable, `the pods of namespace ${ns}`, () => client.list<V1Pod>(apiPath('', 'v1', 'pods', ns)));
  const slices = await optional(unreadable, `the EndpointSlices of Service ${ns}/${name}`, () =>
    client.list<V1EndpointSlice>(apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns), { labelSelector: ourSlicesSelector(name) }),
  );
  const nodes = await optional(unreadable, 'the Nodes (their own addresses, which pods may not claim)', () => client.list<KubeObject>(apiPath('', 'v1', 'nodes')));
  const events = await eventsAbout(client, unreadable, 'Service', ns, name);
  return {
    service,
    nads,
    pods: pods?.items,
    slices: slices?.items ?? [],
    nodeAddresses: nodes === undefined ? undefined : [...new Set(nodes.items.flatMap(nodeAddressList))],
    events,
    unreadable,
  };
}
