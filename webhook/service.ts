/**
 * Services that opt in with the service-network annotation: defaulting (the proxy-name label
 * that makes kube-proxy ignore them) and validation (annotation syntax, supported types, the
 * headless selector rule, a conflicting proxy-name). NodePort is allowed with a warning saying
 * what the node agent needs. Pure; whether the named
 * NetworkAttachmentDefinitions exist is looked up by the caller and becomes warnings.
 */
import { NODE_ADDRESS_RANGE_ANNOTATION, NODE_ADDRESSES_ANNOTATION, NODE_PARENTS_ANNOTATION, PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NETWORK_ANNOTATION, SERVICE_SELECTOR_ANNOTATION } from '../src/keys.js';
import { parseServiceNetwork, type NetworkRef } from '../src/annotations/service-network.js';
import { formatLabelSelector, parseLabelSelector, selectorFromMap } from '../src/annotations/label-selector.js';
import type { V1Service } from '../src/kube/types.js';
import { formatInputError, inputError, type InputError } from '../src/result.js';

export type ServiceDenyReason = 'invalid-annotation' | 'unsupported-type' | 'headless-with-selector' | 'proxy-name-conflict';

export type ServiceVerdict =
  | { readonly allowed: true; readonly networks: NetworkRef[]; readonly warnings: string[]; readonly reason: 'not-opted-in' | 'being-deleted' | 'valid' }
  | { readonly allowed: false; readonly reason: ServiceDenyReason; readonly code: 400 | 403; readonly message: string };

export function describeService(svc: V1Service, namespace: string): string {
  return `Service ${namespace}/${svc.metadata?.name ?? svc.metadata?.generateName ?? '(no name)'}`;
}

/** Adds the proxy-name label when the annotation is there and the label is not. Pure; returns a new object. */
export function defaultService(svc: V1Service): { service: V1Service; labelAdded: boolean } {
  const annotations = svc.metadata?.annotations ?? {};
  const labels = svc.metadata?.labels ?? {};
  if (annotations[SERVICE_NETWORK_ANNOTATION] === undefined || labels[PROXY_NAME_LABEL] !== undefined) return { service: svc, labelAdded: false };
  const out = structuredClone(svc);
  out.metadata = { ...(out.metadata ?? {}), labels: { ...labels, [PROXY_NAME_LABEL]: PROXY_NAME } };
  return { service: out, labelAdded: true };
}

const SUPPORTED_TYPES = new Set(['ClusterIP', 'NodePort', undefined]);
/** Why each other type cannot work, in the user's terms. */
const UNSUPPORTED_WHY: Record<string, string> = {
  LoadBalancer: 'its load balancer is programmed by the cloud provider, which does not see secondary networks',
  ExternalName: 'it is only a DNS alias (CNAME) with no endpoints to serve',
};

/**
 * What a NodePort Service needs beyond this webhook, said once at admission: the optional node
 * agent, and each node's address and parent on the network (docs/node-agent.md).
 */
export function nodePortWarning(object: string, networks: readonly NetworkRef[]): string {
  const nets = networks.map((n) => `${n.namespace}/${n.name}`).join(', ');
  return (
    `${object}: type NodePort on ${nets} is served only by the multus-proxy-node agent (the optional node-agent install component), ` +
    `on the nodes' own addresses on that network: the cluster admin gives each node one with the Node annotation ${NODE_ADDRESSES_ANNOTATION} ` +
    `("<namespace>/<nad>=<ip>/<prefix>"; the NAD annotation ${NODE_ADDRESS_RANGE_ANNOTATION} is no longer read) ` +
    `and its parent interface there with ${NODE_PARENTS_ANNOTATION} ("<namespace>/<nad>=<interface>"; the NAD's master is not followed); ` +
    'the NAD must be macvlan, ipvlan (l2) or bridge with its parent interface in its config'
  );
}

export function validateService(svc: V1Service, namespace: string): ServiceVerdict {
  const object = describeService(svc, namespace);
  const deny = (reason: ServiceDenyReason, code: 400 | 403, e: InputError): ServiceVerdict => ({ allowed: false, reason, code, message: formatInputError(object, e) });
  const annotations = svc.metadata?.annotations ?? {};
  const labels = svc.metadata?.labels ?? {};
  const value = annotations[SERVICE_NETWORK_ANNOTATION];
  if (value === undefined) {
    const warnings =
      labels[PROXY_NAME_LABEL] === PROXY_NAME
        ? [`${object}: label ${PROXY_NAME_LABEL}=${PROXY_NAME} without the ${SERVICE_NETWORK_ANNOTATION} annotation: kube-proxy ignores this Service and multus-proxy serves nothing for it; add the annotation or remove the label`]
        : [];
    return { allowed: true, networks: [], warnings, reason: 'not-opted-in' };
  }
  // A Service being deleted only loses finalizers (e.g. a load balancer's cleanup): never block that.
  if (svc.metadata?.deletionTimestamp !== undefined && svc.metadata.deletionTimestamp !== null) return { allowed: true, networks: [], warnings: [], reason: 'being-deleted' };

  const refs = parseServiceNetwork(value, namespace);
  if (!refs.ok) return deny('invalid-annotation', 400, refs.error);

  const proxyName = labels[PROXY_NAME_LABEL];
  if (proxyName !== undefined && proxyName !== PROXY_NAME) {
    return deny(
      'proxy-name-conflict',
      403,
      inputError(
        `label ${PROXY_NAME_LABEL}`,
        proxyName,
        `conflicts with the ${SERVICE_NETWORK_ANNOTATION} annotation: this Service would be handed to proxy "${proxyName}" and to multus-proxy at once`,
        `set the label to ${PROXY_NAME} (or remove it; it is then added for you), or remove the annotation`,
      ),
    );
  }

  const type = svc.spec?.type;
  if (!SUPPORTED_TYPES.has(type)) {
    return deny(
      'unsupported-type',
      400,
      inputError(
        'spec.type',
        String(type),
        `multus-proxy serves ClusterIP, headless and NodePort Services only: ${UNSUPPORTED_WHY[String(type)] ?? 'it is not a type Kubernetes knows'}`,
        `set spec.type: ClusterIP (with clusterIP: None for headless) or NodePort (served on the nodes' own addresses on the network by the multus-proxy-node agent), or remove the ${SERVICE_NETWORK_ANNOTATION} annotation`,
      ),
    );
  }

  const specSelector = svc.spec?.selector ?? {};
  const hasSpecSelector = Object.keys(specSelector).length > 0;
  const headless = svc.spec?.clusterIP === 'None';
  if (headless && hasSpecSelector) {
    const moved = formatLabelSelector(selectorFromMap(specSelector));
    return deny(
      'headless-with-selector',
      403,
      inputError(
        'spec.selector',
        JSON.stringify(specSelector),
        "on a headless Service the built-in EndpointSlice controller would publish the pods' primary-network IPs, and DNS would mix them into the answers with the secondary ones",
        `move the selector into the annotation ${SERVICE_SELECTOR_ANNOTATION}: "${moved}" and remove spec.selector`,
      ),
    );
  }

  const warnings: string[] = type === 'NodePort' ? [nodePortWarning(object, refs.value)] : [];
  const selectorText = annotations[SERVICE_SELECTOR_ANNOTATION];
  if (selectorText !== undefined) {
    const sel = parseLabelSelector(selectorText);
    if (!sel.ok) return deny('invalid-annotation', 400, sel.error);
    if (sel.value.requirements.length === 0) {
      return deny('invalid-annotation', 400, inputError(SERVICE_SELECTOR_ANNOTATION, selectorText, 'is empty, which would select every pod in the namespace', 'write a selector such as "app=web", or remove the annotation'));
    }
    if (hasSpecSelector) warnings.push(`${object}: ${SERVICE_SELECTOR_ANNOTATION} is ignored because spec.selector is set; keep only one of them`);
  } else if (!hasSpecSelector) {
    warnings.push(`${object}: no spec.selector and no ${SERVICE_SELECTOR_ANNOTATION} annotation, so no pods are selected; add the annotation, e.g. "app=web"`);
  }
  return { allowed: true, networks: refs.value, warnings, reason: 'valid' };
}
