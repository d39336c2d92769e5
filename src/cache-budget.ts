/**
 * What one tenant object may cost the sidecar's and the node agent's caches. Every Service and NAD
 * is tenant input, and some reach these consumers without the webhook (being deleted, label only,
 * written while it was down), so each checks its budget where the object enters: in its informer's
 * transform, before the object is cached. An object over budget is refused whole (cached as a
 * stub: its name and why), never half-served, with a log line, an Event and a metric.
 *
 * The project's budgets per Service are in src/object-budgets.ts (ports, kept bytes; the webhook
 * denies past them up front); these consumers add what only they read:
 * - loadBalancerSourceRanges: 1,000, and LoadBalancer ingress IPs: 100 (each range is parsed and
 *   checked per client; a real LoadBalancer has a handful);
 * - networks named in the service-network annotation: 32, the annotation's own bound;
 * - a NAD's spec.config: 64 KiB (a CNI config is a few hundred bytes).
 * The per-network share (src/service-cap.ts) then bounds how many targets all of them make.
 */
import { SERVICE_NETWORK_ANNOTATION } from './keys.js';
import type { NetworkAttachmentDefinition, V1Service } from './kube/types.js';
import { MAX_SERVICE_KEPT_BYTES, MAX_SERVICE_PORTS } from './object-budgets.js';
import { MAX_SOURCE_RANGES } from './annotations/load-balancer.js';

export interface ServiceBudget {
  readonly component: string;
  readonly maxBytes: number;
  readonly maxPorts: number;
  readonly maxSourceRanges: number;
  readonly maxIngress: number;
  readonly maxNetworks: number;
}

export interface NadBudget {
  readonly component: string;
  /** Bytes of spec.config (the CNI config). */
  readonly maxConfigBytes: number;
}

// Source ranges: the webhook's bound, so a Service written without it is refused whole, never served
// with only the ranges the parser reads.
const SERVICE_LIMITS = { maxBytes: MAX_SERVICE_KEPT_BYTES, maxPorts: MAX_SERVICE_PORTS, maxSourceRanges: MAX_SOURCE_RANGES, maxIngress: 100, maxNetworks: 32 } as const;

export const SIDECAR_SERVICE_BUDGET: ServiceBudget = { component: 'sidecar', ...SERVICE_LIMITS };
export const NODE_AGENT_SERVICE_BUDGET: ServiceBudget = { component: 'node agent', ...SERVICE_LIMITS };
export const NODE_AGENT_NAD_BUDGET: NadBudget = { component: 'node agent', maxConfigBytes: 64 * 1024 };

/** Why an object was refused: its budget key (the metric's label) and the message. */
export interface Refusal {
  readonly key: 'bytes' | 'ports' | 'source-ranges' | 'ingress' | 'networks';
  readonly message: string;
}

const objectName = (kind: string, o: { metadata?: { namespace?: string; name?: string } }): string => `${kind} ${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

/** Counts whole-object fields; linear in the object, and stops counting at nothing larger than the object. */
export function serviceOverBudget(svc: V1Service, budget: ServiceBudget): Refusal | undefined {
  const name = objectName('Service', svc);
  const refuse = (key: Refusal['key'], what: string, n: number, max: number, fix: string): Refusal => ({
    key,
    message: `${name} has ${n} ${what}; the ${budget.component} serves at most ${max} per Service, so it serves none of this Service: ${fix}`,
  });
  const ports = svc.spec?.ports?.length ?? 0;
  if (ports > budget.maxPorts) return refuse('ports', 'ports (spec.ports)', ports, budget.maxPorts, `split it into Services of at most ${budget.maxPorts} ports`);
  const ranges = svc.spec?.loadBalancerSourceRanges?.length ?? 0;
  if (ranges > budget.maxSourceRanges) return refuse('source-ranges', 'spec.loadBalancerSourceRanges entries', ranges, budget.maxSourceRanges, 'merge the ranges into fewer, wider prefixes');
  const ingress = svc.status?.loadBalancer?.ingress?.length ?? 0;
  if (ingress > budget.maxIngress) return refuse('ingress', 'status.loadBalancer.ingress entries', ingress, budget.maxIngress, 'give the Service fewer ingress IPs');
  const value = svc.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION];
  const networks = value === undefined ? 0 : value.split(',').length;
  if (networks > budget.maxNetworks) return refuse('networks', `networks in the annotation ${SERVICE_NETWORK_ANNOTATION}`, networks, budget.maxNetworks, 'name fewer networks');
  return undefined;
}

/** The size check, on what the component keeps (its slimmed form). */
export function slimOverBudget(kind: string, slim: { metadata?: { namespace?: string; name?: string } }, maxBytes: number, component: string): Refusal | undefined {
  const bytes = JSON.stringify(slim).length;
  if (bytes <= maxBytes) return undefined;
  return {
    key: 'bytes',
    message: `${objectName(kind, slim)} is ${bytes} bytes in the fields the ${component} reads; it keeps at most ${maxBytes} per object, so it serves none of it: shorten its annotations, port names or ranges`,
  };
}

export function nadOverBudget(nad: NetworkAttachmentDefinition, budget: NadBudget): Refusal | undefined {
  const bytes = nad.spec?.config?.length ?? 0;
  if (bytes <= budget.maxConfigBytes) return undefined;
  return {
    key: 'bytes',
    message: `${objectName('NetworkAttachmentDefinition', nad)} has a spec.config of ${bytes} characters; the ${budget.component} reads at most ${budget.maxConfigBytes}, so it serves nothing on this network: shorten the CNI config`,
  };
}
