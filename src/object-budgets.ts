/**
 * What one tenant object may cost a component that reads it: stated once, here, for the webhook
 * (which denies past them up front) and every consumer (which refuses such an object with an Event
 * and a metric, never serving half of it). The networks an annotation may name are bounded where
 * the annotation is parsed (MAX_NETWORKS_PER_ANNOTATION in annotations/service-network.ts), and the
 * addresses of a network-status in annotations/network-status.ts.
 */

/**
 * Ports of one opted-in Service. Each port is a target in every client on its networks and a port
 * in every EndpointSlice of it; Services with more are rare (port ranges are not a Service feature),
 * and 256 keeps one Service at a few hundred rules.
 */
export const MAX_SERVICE_PORTS = 256;

/**
 * Bytes of what a consumer keeps of one Service after slimming (JSON text): its labels, the
 * annotations it reads, its ports and selector. A real Service is a few KiB; 64 KiB is far above
 * that and far below the 1.5 MiB the apiserver accepts.
 */
export const MAX_SERVICE_KEPT_BYTES = 64 * 1024;

/**
 * One MultiNetworkPolicy's parts. Each rule, peer, port and except entry becomes rule text or set
 * elements in every sidecar of every pod it selects, and each selector term is matched against
 * every candidate peer pod; NetworkPolicies in real use have a handful of each. The bounds keep
 * one object's cost in every sidecar to a few thousand elements, far above real use.
 */
export const POLICY_BUDGETS = {
  /** Rules in `ingress`, and in `egress`. */
  rules: 64,
  /** Peers in one rule's `from` or `to`. */
  peers: 64,
  /** Entries in one rule's `ports`. */
  ports: 64,
  /** CIDRs in one `ipBlock.except`. */
  except: 64,
  /** `matchLabels` pairs plus `matchExpressions` in one label selector. */
  selectorTerms: 32,
  /** Values of one `matchExpressions` entry. */
  selectorValues: 64,
} as const;

export type PolicyBudget = keyof typeof POLICY_BUDGETS;

/** What a consumer says of an object over budget: which budget, the value, and the fix. */
export interface OverBudget {
  /** Short and stable, for the metric label: `ports`, `bytes`. */
  readonly budget: 'networks' | 'ports' | 'bytes' | PolicyBudget;
  readonly message: string;
}

/** A Service as a consumer caches it: slimmed, and marked when what it carries is over a budget. */
export interface BudgetedService {
  readonly overBudget?: OverBudget;
}

/** The Service's ports over the budget, or undefined. Pure. */
export function servicePortsOverBudget(object: string, ports: number): OverBudget | undefined {
  if (ports <= MAX_SERVICE_PORTS) return undefined;
  return {
    budget: 'ports',
    message: `${object}: spec.ports lists ${ports} ports, more than the ${MAX_SERVICE_PORTS} multus-proxy serves for one Service; split it into several Services of at most ${MAX_SERVICE_PORTS} ports each`,
  };
}

/** The kept part of an object over the byte budget, or undefined. Pure. */
export function keptBytesOverBudget(object: string, keptBytes: number, limit: number = MAX_SERVICE_KEPT_BYTES): OverBudget | undefined {
  if (keptBytes <= limit) return undefined;
  return {
    budget: 'bytes',
    message: `${object}: its labels, annotations, ports and selector come to ${keptBytes} bytes, more than the ${limit} multus-proxy keeps for one object; remove labels or annotations it does not need`,
  };
}
