/**
 * What an opted-in Service asks the controller for: the networks its endpoints live on and the
 * selector of its pods. Pure: reads the Service object, never the API.
 *
 * Outcomes are three, not two, because they lead to different actions:
 * - `serve`: publish slices for these networks and this selector;
 * - `withdraw`: the Service no longer asks for anything (annotation or selector gone), so our
 *   slices for it are deleted;
 * - `invalid`: the Service asks for something we cannot read. Existing slices are kept exactly as
 *   they are (a typo must not take a working Service down) and a Warning Event says what to fix;
 * - `refuse`: the Service is over a per-object budget (src/object-budgets.ts: networks, ports,
 *   bytes). It is not served at all, never half: its slices are deleted and a Warning says which
 *   budget and the fix.
 */
import { MAX_NETWORKS_PER_ANNOTATION, parseServiceNetwork, splitCommaList, type NetworkRef } from '../../src/annotations/service-network.js';
import { servicePortsOverBudget, type BudgetedService, type OverBudget } from '../../src/object-budgets.js';
import { parseLabelSelector, selectorFromMap, type LabelSelector } from '../../src/annotations/label-selector.js';
import { SERVICE_NETWORK_ANNOTATION, SERVICE_SELECTOR_ANNOTATION } from '../../src/keys.js';
import { formatInputError } from '../../src/result.js';
import type { V1Service } from '../../src/kube/types.js';

export type ServiceSpec =
  | { readonly kind: 'serve'; readonly networks: readonly NetworkRef[]; readonly selector: LabelSelector }
  | { readonly kind: 'withdraw'; readonly reason: string }
  | { readonly kind: 'invalid'; readonly message: string }
  | { readonly kind: 'refuse'; readonly budget: OverBudget['budget']; readonly message: string };

export function serviceName(svc: V1Service): string {
  return `Service ${svc.metadata?.namespace ?? ''}/${svc.metadata?.name ?? ''}`;
}

export function readServiceSpec(svc: V1Service): ServiceSpec {
  const namespace = svc.metadata?.namespace ?? 'default';
  const annotations = svc.metadata?.annotations ?? {};
  const networkValue = annotations[SERVICE_NETWORK_ANNOTATION];
  // Over a budget first: a Service that carries only the proxy-name label (it never reaches the
  // webhook) is still one of ours, and its owner is told why it is refused, not left in silence.
  const over = serviceOverBudget(svc);
  if (over !== undefined) return { kind: 'refuse', budget: over.budget, message: over.message };
  if (networkValue === undefined || networkValue.trim() === '') {
    return { kind: 'withdraw', reason: `no ${SERVICE_NETWORK_ANNOTATION} annotation` };
  }
  const networks = parseServiceNetwork(networkValue, namespace, SERVICE_NETWORK_ANNOTATION);
  if (!networks.ok) return { kind: 'invalid', message: formatInputError(serviceName(svc), networks.error) };

  const specSelector = svc.spec?.selector ?? {};
  if (Object.keys(specSelector).length > 0) {
    return { kind: 'serve', networks: networks.value, selector: selectorFromMap(specSelector) };
  }
  const selectorValue = annotations[SERVICE_SELECTOR_ANNOTATION];
  if (selectorValue === undefined || selectorValue.trim() === '') {
    // Like Kubernetes: a Service without a selector gets no managed endpoints.
    return { kind: 'withdraw', reason: `no spec.selector and no ${SERVICE_SELECTOR_ANNOTATION} annotation` };
  }
  const selector = parseLabelSelector(selectorValue, SERVICE_SELECTOR_ANNOTATION);
  if (!selector.ok) return { kind: 'invalid', message: formatInputError(serviceName(svc), selector.error) };
  if (selector.value.requirements.length === 0) {
    // An empty selector string would match every pod in the namespace; nobody means that.
    return {
      kind: 'invalid',
      message: `${serviceName(svc)}: ${SERVICE_SELECTOR_ANNOTATION} ${JSON.stringify(selectorValue)}: selects every pod; write a selector such as "app=web"`,
    };
  }
  return { kind: 'serve', networks: networks.value, selector: selector.value };
}

/** The budget the Service is over, if any: as its cache marked it (bytes), networks named, ports. */
export function serviceOverBudget(svc: V1Service & BudgetedService): OverBudget | undefined {
  if (svc.overBudget !== undefined) return svc.overBudget;
  const networkValue = svc.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION];
  const named = typeof networkValue === 'string' ? splitCommaList(networkValue).length : 0;
  if (named > MAX_NETWORKS_PER_ANNOTATION) {
    return {
      budget: 'networks',
      message: `${serviceName(svc)}: ${SERVICE_NETWORK_ANNOTATION} names ${named} networks, more than the ${MAX_NETWORKS_PER_ANNOTATION} one Service may name; name at most ${MAX_NETWORKS_PER_ANNOTATION} (split the Service into several)`,
    };
  }
  return servicePortsOverBudget(serviceName(svc), svc.spec?.ports?.length ?? 0);
}
