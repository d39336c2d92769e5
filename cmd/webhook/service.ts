/**
 * Services that opt in with the service-network annotation: defaulting (the proxy-name label
 * that makes kube-proxy ignore them) and validation (annotation syntax, supported types, the
 * headless selector rule, a conflicting proxy-name, a LoadBalancer's source ranges). NodePort and
 * LoadBalancer are allowed with a warning saying what they need (the node agent; and for
 * LoadBalancer an implementation that allocates and announces the address). Pure; whether the
 * named NetworkAttachmentDefinitions exist and whether the node agent runs are looked up by the
 * caller and become warnings.
 */
import {
  NODE_ADDRESS_RANGE_ANNOTATION,
  NODE_ADDRESSES_ANNOTATION,
  NODE_PARENTS_ANNOTATION,
  PROXY_NAME,
  PROXY_NAME_LABEL,
  SERVICE_NETWORK_ANNOTATION,
  SERVICE_SELECTOR_ANNOTATION,
} from '../../src/keys.js';
import { parseServiceNetwork, type NetworkRef } from '../../src/annotations/service-network.js';
import { formatLabelSelector, parseLabelSelector, selectorFromMap } from '../../src/annotations/label-selector.js';
import type { V1Service } from '../../src/kube/types.js';
import { formatInputError, inputError, type InputError } from '../../src/result.js';
import { MAX_SOURCE_RANGES, parseSourceRange, SOURCE_RANGES_KEY } from '../../src/annotations/load-balancer.js';
import { servicePortsOverBudget } from '../../src/object-budgets.js';

export type ServiceDenyReason = 'invalid-annotation' | 'unsupported-type' | 'headless-with-selector' | 'proxy-name-conflict' | 'invalid-field' | 'over-budget';

/** The cloud providers' annotation for source ranges; kube-proxy, and so multus-proxy, reads only the spec field. */
export const SOURCE_RANGES_ANNOTATION = 'service.beta.kubernetes.io/load-balancer-source-ranges';

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

const SUPPORTED_TYPES = new Set(['ClusterIP', 'NodePort', 'LoadBalancer', undefined]);
/** Why each other type cannot work, in the user's terms. */
const UNSUPPORTED_WHY: Record<string, string> = {
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

/**
 * What a LoadBalancer Service needs beyond this webhook: the node agent serves its ingress IPs (and
 * node ports), and an implementation of the cluster's own allocates and announces the address;
 * multus-proxy does neither (docs/node-agent.md, "LoadBalancer").
 */
export function loadBalancerWarning(object: string, networks: readonly NetworkRef[]): string {
  const nets = networks.map((n) => `${n.namespace}/${n.name}`).join(', ');
  return (
    `${object}: type LoadBalancer on ${nets}: its status.loadBalancer.ingress IPs are served on the secondary network by the multus-proxy-node agent on every node, ` +
    'and client pods with the sidecar reach them directly; the address itself must be allocated and announced on that network by a load-balancer implementation ' +
    "(e.g. MetalLB with an IPAddressPool in the network's subnet and an L2Advertisement on the nodes' interface there): multus-proxy does neither"
  );
}

/** Why the node agent cannot serve a LoadBalancer or NodePort Service right now, or undefined when it can. */
export function nodeAgentProblem(object: string, type: string, presence: NodeAgentPresence): string | undefined {
  switch (presence) {
    case 'ready':
      return undefined;
    case 'absent':
      return `${object}: type ${type} is not served on the secondary network: the multus-proxy-node agent is not installed (its DaemonSet multus-proxy-node was not found); install the node-agent component (docs/node-agent.md, "Install") or use type ClusterIP`;
    case 'not-ready':
      return `${object}: type ${type} is not served on the secondary network yet: the multus-proxy-node agent has no ready pod (DaemonSet multus-proxy-node); see its pods' status and events`;
    case 'unknown':
      return `${object}: type ${type} needs the multus-proxy-node agent, and whether it runs could not be checked; make sure the node-agent component is installed`;
  }
}

/** Whether the node agent's DaemonSet is there and has a ready pod (cmd/webhook/cluster.ts looks it up). */
export type NodeAgentPresence = 'ready' | 'not-ready' | 'absent' | 'unknown';

/**
 * Everything validateService and the NAD-sharing check read: two Services with the same view get
 * the same verdict.
 */
export function checkedView(svc: V1Service | undefined): string {
  const annotations = svc?.metadata?.annotations ?? {};
  return JSON.stringify([
    annotations[SERVICE_NETWORK_ANNOTATION] ?? null,
    annotations[SERVICE_SELECTOR_ANNOTATION] ?? null,
    annotations[SOURCE_RANGES_ANNOTATION] ?? null,
    svc?.metadata?.labels?.[PROXY_NAME_LABEL] ?? null,
    svc?.spec?.type ?? null,
    svc?.spec?.clusterIP ?? null,
    svc?.spec?.selector ?? null,
    svc?.spec?.loadBalancerSourceRanges ?? null,
    svc?.spec?.ports?.length ?? 0,
  ]);
}

function beingDeleted(svc: V1Service | undefined): boolean {
  return svc?.metadata?.deletionTimestamp !== undefined && svc.metadata.deletionTimestamp !== null;
}

/**
 * `old` is the stored object on UPDATE. A Service being deleted whose update leaves every checked
 * field as it was (a finalizer removed, say) passes unchecked, so its cleanup is never blocked;
 * any other update of it is checked as a live Service's: a finalizer of the tenant's own keeps it
 * alive, and it is served while it lives.
 */
export function validateService(svc: V1Service, namespace: string, old?: V1Service): ServiceVerdict {
  const object = describeService(svc, namespace);
  const deny = (reason: ServiceDenyReason, code: 400 | 403, e: InputError): ServiceVerdict => ({ allowed: false, reason, code, message: formatInputError(object, e) });
  const annotations = svc.metadata?.annotations ?? {};
  const labels = svc.metadata?.labels ?? {};
  const value = annotations[SERVICE_NETWORK_ANNOTATION];
  if (value === undefined) {
    const warnings =
      labels[PROXY_NAME_LABEL] === PROXY_NAME
        ? [
            `${object}: label ${PROXY_NAME_LABEL}=${PROXY_NAME} without the ${SERVICE_NETWORK_ANNOTATION} annotation: kube-proxy ignores this Service and multus-proxy serves nothing for it; add the annotation or remove the label`,
          ]
        : [];
    return { allowed: true, networks: [], warnings, reason: 'not-opted-in' };
  }
  if ((beingDeleted(svc) || beingDeleted(old)) && old !== undefined && checkedView(svc) === checkedView(old)) return { allowed: true, networks: [], warnings: [], reason: 'being-deleted' };

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
        `multus-proxy serves ClusterIP, headless, NodePort and LoadBalancer Services only: ${UNSUPPORTED_WHY[String(type)] ?? 'it is not a type Kubernetes knows'}`,
        `set spec.type: ClusterIP (with clusterIP: None for headless), NodePort or LoadBalancer (both served on the network by the multus-proxy-node agent), or remove the ${SERVICE_NETWORK_ANNOTATION} annotation`,
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

  const overPorts = servicePortsOverBudget(object, svc.spec?.ports?.length ?? 0);
  if (overPorts !== undefined) return { allowed: false, reason: 'over-budget', code: 400, message: overPorts.message };

  const warnings: string[] = type === 'NodePort' ? [nodePortWarning(object, refs.value)] : type === 'LoadBalancer' ? [loadBalancerWarning(object, refs.value)] : [];
  if (type === 'LoadBalancer') {
    const lbDenied = checkLoadBalancer(svc, annotations, object, warnings, deny);
    if (lbDenied !== undefined) return lbDenied;
  }
  const selDenied = checkSelector(annotations, hasSpecSelector, object, warnings, deny);
  if (selDenied !== undefined) return selDenied;
  return { allowed: true, networks: refs.value, warnings, reason: 'valid' };
}

type Deny = (reason: ServiceDenyReason, code: 400 | 403, e: InputError) => ServiceVerdict;

/** A LoadBalancer's source ranges (they become firewall rules on every node): checked where they enter; warnings added in place. */
function checkLoadBalancer(svc: V1Service, annotations: Record<string, string>, object: string, warnings: string[], deny: Deny): ServiceVerdict | undefined {
  // The ranges become firewall rules on every node: checked here, as where they enter (the
  // apiserver checks them too; this names the entry and the fix in our words).
  const ranges = svc.spec?.loadBalancerSourceRanges ?? [];
  if (ranges.length > MAX_SOURCE_RANGES) {
    return deny(
      'invalid-field',
      400,
      inputError(
        SOURCE_RANGES_KEY,
        `${ranges.length} entries`,
        `lists more than ${MAX_SOURCE_RANGES} ranges, each a rule per ingress IP and port on every node`,
        'merge them into fewer, larger CIDRs',
      ),
    );
  }
  for (const [i, raw] of ranges.entries()) {
    const r = parseSourceRange(raw);
    if (typeof r === 'string') return deny('invalid-field', 400, inputError(`${SOURCE_RANGES_KEY}[${i}]`, raw, r, 'write a CIDR such as "203.0.113.0/24" or "2001:db8::/48"'));
  }
  if (annotations[SOURCE_RANGES_ANNOTATION] !== undefined && (svc.spec?.loadBalancerSourceRanges ?? []).length === 0) {
    warnings.push(`${object}: annotation ${SOURCE_RANGES_ANNOTATION} is not read by multus-proxy (nor by kube-proxy): every source is admitted; move the ranges to spec.loadBalancerSourceRanges`);
  }
  return undefined;
}

/** The service-selector annotation: parsed, non-empty, and not beside spec.selector; warnings added in place. */
function checkSelector(annotations: Record<string, string>, hasSpecSelector: boolean, object: string, warnings: string[], deny: Deny): ServiceVerdict | undefined {
  const selectorText = annotations[SERVICE_SELECTOR_ANNOTATION];
  if (selectorText !== undefined) {
    const sel = parseLabelSelector(selectorText);
    if (!sel.ok) return deny('invalid-annotation', 400, sel.error);
    if (sel.value.requirements.length === 0) {
      return deny(
        'invalid-annotation',
        400,
        inputError(SERVICE_SELECTOR_ANNOTATION, selectorText, 'is empty, which would select every pod in the namespace', 'write a selector such as "app=web", or remove the annotation'),
      );
    }
    if (hasSpecSelector) warnings.push(`${object}: ${SERVICE_SELECTOR_ANNOTATION} is ignored because spec.selector is set; keep only one of them`);
  } else if (!hasSpecSelector) {
    warnings.push(`${object}: no spec.selector and no ${SERVICE_SELECTOR_ANNOTATION} annotation, so no pods are selected; add the annotation, e.g. "app=web"`);
  }
  return undefined;
}
