/**
 * Whether a pod gets the sidecar, and if not, why: skipped (nothing to do, with a reason that
 * becomes a metric label and a debug log) or denied (a message for the user naming the object,
 * key, bad value and the fix). Pure: the namespace's labels are passed in.
 */
import { INJECTION_ENABLED, INJECTION_LABEL, NETWORKS_ANNOTATION, SERVICE_NETWORK_ANNOTATION, SIDECAR_CONTAINER_NAME } from '../src/keys.js';
import { networkKey, parseServiceNetwork, type NetworkRef } from '../src/annotations/service-network.js';
import { parseNetworks } from '../src/annotations/networks.js';
import type { V1Pod } from '../src/kube/types.js';
import { formatInputError, inputError, type InputError } from '../src/result.js';
import type { Operation } from './responses.js';

export type SkipReason = 'not-create' | 'no-annotation' | 'namespace-not-enabled' | 'already-injected';
export type DenyReason = 'invalid-annotation' | 'network-not-attached' | 'host-network' | 'pod-security' | 'port-conflict';

export type PodDecision =
  | { readonly action: 'skip'; readonly reason: SkipReason; readonly detail: string; readonly warnings: string[] }
  | { readonly action: 'deny'; readonly reason: DenyReason; readonly code: 400 | 403; readonly message: string }
  | { readonly action: 'inject'; readonly networks: NetworkRef[] };

/** The Pod Security Admission label; `baseline` and `restricted` both forbid adding NET_ADMIN. */
export const POD_SECURITY_ENFORCE_LABEL = 'pod-security.kubernetes.io/enforce';
const PSA_FORBIDS_NET_ADMIN = new Set(['baseline', 'restricted']);

export interface PodPolicyInput {
  readonly operation: Operation;
  readonly pod: V1Pod;
  /** The request's namespace: a pod being created may not carry metadata.namespace yet. */
  readonly namespace: string;
  /** Labels of that Namespace; undefined when it could not be found. */
  readonly namespaceLabels: Readonly<Record<string, string>> | undefined;
  readonly healthPort: number;
}

/** `Pod ns/name`, or `Pod ns/web-7d4b9-* (generateName)` before the apiserver has named it. */
export function describePod(pod: V1Pod, namespace: string): string {
  const name = pod.metadata?.name;
  if (name) return `Pod ${namespace}/${name}`;
  const gen = pod.metadata?.generateName;
  return gen ? `Pod ${namespace}/${gen}* (generateName)` : `Pod ${namespace}/(no name)`;
}

function allContainers(pod: V1Pod): { name?: string; ports?: { containerPort?: number; protocol?: string }[] }[] {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
}

export function hasSidecar(pod: V1Pod): boolean {
  return allContainers(pod).some((c) => c.name === SIDECAR_CONTAINER_NAME);
}

function deny(reason: DenyReason, code: 400 | 403, object: string, e: InputError): PodDecision {
  return { action: 'deny', reason, code, message: formatInputError(object, e) };
}

/** What to write into the networks annotation so the missing networks are attached, in the form the pod already uses. */
function attachFix(attachedText: string | undefined, missing: readonly NetworkRef[]): string {
  const current = attachedText?.trim() ?? '';
  const short = missing.map(networkKey).join(',');
  if (current === '') return `attach it: add the annotation ${NETWORKS_ANNOTATION}: "${short}"`;
  if (current.startsWith('[')) {
    return `attach it: add ${missing.map((r) => JSON.stringify({ namespace: r.namespace, name: r.name })).join(', ')} to the JSON list in ${NETWORKS_ANNOTATION}`;
  }
  return `attach it: write ${NETWORKS_ANNOTATION}: "${current},${short}"`;
}

export function decideInjection(input: PodPolicyInput): PodDecision {
  const { pod, namespace } = input;
  const object = describePod(pod, namespace);
  if (input.operation !== 'CREATE') return { action: 'skip', reason: 'not-create', detail: `operation ${input.operation}: the sidecar is only added at creation`, warnings: [] };
  const annotations = pod.metadata?.annotations ?? {};
  const wanted = annotations[SERVICE_NETWORK_ANNOTATION];
  if (wanted === undefined) return { action: 'skip', reason: 'no-annotation', detail: `no ${SERVICE_NETWORK_ANNOTATION} annotation`, warnings: [] };
  if (input.namespaceLabels?.[INJECTION_LABEL] !== INJECTION_ENABLED) {
    const detail = `namespace ${namespace} is not labelled ${INJECTION_LABEL}=${INJECTION_ENABLED}`;
    return {
      action: 'skip',
      reason: 'namespace-not-enabled',
      detail,
      warnings: [`${object}: ${detail}, so no multus-proxy sidecar was added; label the namespace to enable it`],
    };
  }
  if (hasSidecar(pod)) return { action: 'skip', reason: 'already-injected', detail: `the pod already has a container named ${SIDECAR_CONTAINER_NAME}`, warnings: [] };

  if (pod.spec?.hostNetwork === true) {
    return deny('host-network', 403, object, inputError('spec.hostNetwork', 'true', "the multus-proxy sidecar would program iptables in the node's network namespace", `remove hostNetwork: true or remove the ${SERVICE_NETWORK_ANNOTATION} annotation`));
  }
  const refs = parseServiceNetwork(wanted, namespace);
  if (!refs.ok) return deny('invalid-annotation', 400, object, refs.error);
  const attachedText = annotations[NETWORKS_ANNOTATION];
  const attached = parseNetworks(attachedText ?? '', namespace);
  if (!attached.ok) return deny('invalid-annotation', 400, object, attached.error);
  const attachedKeys = new Set(attached.value.map(networkKey));
  const missing = refs.value.filter((r) => !attachedKeys.has(networkKey(r)));
  if (missing.length > 0) {
    const names = missing.map(networkKey);
    return deny(
      'network-not-attached',
      400,
      object,
      inputError(
        SERVICE_NETWORK_ANNOTATION,
        wanted,
        `${names.length > 1 ? 'networks' : 'network'} ${names.join(', ')} ${names.length > 1 ? 'are' : 'is'} not attached to the pod by ${NETWORKS_ANNOTATION}`,
        attachFix(attachedText, missing),
      ),
    );
  }

  const level = input.namespaceLabels?.[POD_SECURITY_ENFORCE_LABEL];
  if (level !== undefined && PSA_FORBIDS_NET_ADMIN.has(level)) {
    return deny(
      'pod-security',
      403,
      object,
      inputError(
        `namespace ${namespace} label ${POD_SECURITY_ENFORCE_LABEL}`,
        level,
        `the multus-proxy sidecar needs the NET_ADMIN and NET_RAW capabilities, which the "${level}" Pod Security level forbids, so the pod would be rejected`,
        `label the namespace ${POD_SECURITY_ENFORCE_LABEL}=privileged (kubectl label ns ${namespace} ${POD_SECURITY_ENFORCE_LABEL}=privileged --overwrite), or run this client in a namespace that allows NET_ADMIN`,
      ),
    );
  }

  for (const c of allContainers(pod)) {
    const clash = (c.ports ?? []).find((p) => p.containerPort === input.healthPort && (p.protocol ?? 'TCP') === 'TCP');
    if (clash !== undefined) {
      return deny(
        'port-conflict',
        400,
        object,
        inputError(
          `container ${c.name ?? '?'} ports`,
          String(input.healthPort),
          `the multus-proxy sidecar serves its health checks on TCP port ${input.healthPort} in the same network namespace`,
          'move the container to another port, or change sidecar.healthPort in the multus-proxy-webhook ConfigMap',
        ),
      );
    }
  }
  return { action: 'inject', networks: refs.value };
}
