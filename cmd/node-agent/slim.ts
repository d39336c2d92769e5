/**
 * The node agent's informer transforms: its caches keep only the fields it reads, and an object
 * over its budget per object (src/cache-budget.ts) is kept as a stub that names it and serves
 * nothing, with the reason in `refusalOf` (state.ts turns it into a Warning Event and the log).
 *
 * What is kept, and who reads it:
 * - Service: name, namespace, uid, resourceVersion, deletionTimestamp, the proxy-name label, the
 *   service-network annotation; spec type, cluster IPs and families, session affinity, traffic
 *   policy, health-check node port, source ranges, ports (name, protocol, port, targetPort,
 *   nodePort); status: the load balancer's ingress IPs and modes (state.ts, rules.ts,
 *   src/dataplane/state.ts, src/annotations/load-balancer.ts). The selector, which a tenant can
 *   make as large as the apiserver allows, is not read here;
 * - NAD: name, namespace, uid, resourceVersion, the sharing and node-address-range annotations,
 *   spec.config (parents.ts, state.ts).
 */
import { NODE_ADDRESS_RANGE_ANNOTATION, PROXY_NAME_LABEL, SERVICE_NAMESPACES_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import type { NetworkAttachmentDefinition, V1ObjectMeta, V1Service } from '../../src/kube/types.js';
import { slimMeta } from '../../src/kube/slim-meta.js';
import { nadOverBudget, NODE_AGENT_NAD_BUDGET, NODE_AGENT_SERVICE_BUDGET, serviceOverBudget, slimOverBudget, type Refusal } from '../../src/cache-budget.js';

const refusals = new WeakMap<object, Refusal>();
/** Why the agent refused an object it cached (a stub); undefined: it is served. */
export const refusalOf = (o: object): Refusal | undefined => refusals.get(o);

function stub<T extends { metadata?: V1ObjectMeta }>(o: T, refusal: Refusal, labels: readonly string[]): T {
  const s = { metadata: slimMeta(o.metadata, labels, []) } as T;
  refusals.set(s, refusal);
  return s;
}

const SERVICE_LABELS = [PROXY_NAME_LABEL];

type Spec = NonNullable<V1Service['spec']>;
/** The spec fields read here, besides the ports; set in this order on every object (one shape). */
const SPEC_KEYS = [
  'type',
  'clusterIP',
  'clusterIPs',
  'ipFamilies',
  'ipFamilyPolicy',
  'sessionAffinity',
  'sessionAffinityConfig',
  'externalTrafficPolicy',
  'healthCheckNodePort',
  'loadBalancerSourceRanges',
  // internalTrafficPolicy Local and allowed external IPs are served on the node's own paths (state.ts).
  'internalTrafficPolicy',
  'externalIPs',
] as const satisfies readonly (keyof Spec)[];

function keptSpec(spec: Spec): Spec {
  const out: Record<string, unknown> = {};
  for (const k of SPEC_KEYS) out[k] = spec[k];
  out['ports'] = spec.ports?.map((p) => ({ name: p.name, protocol: p.protocol, port: p.port, targetPort: p.targetPort, nodePort: p.nodePort }));
  return out;
}

export function slimNodeService(svc: V1Service): V1Service {
  const over = serviceOverBudget(svc, NODE_AGENT_SERVICE_BUDGET);
  if (over !== undefined) return stub(svc, over, SERVICE_LABELS);
  const spec = svc.spec;
  const slim: V1Service = {
    metadata: slimMeta(svc.metadata, SERVICE_LABELS, [SERVICE_NETWORK_ANNOTATION]),
    spec: spec === undefined ? undefined : keptSpec(spec),
    status: { loadBalancer: { ingress: svc.status?.loadBalancer?.ingress?.map((i) => ({ ip: i.ip, ipMode: i.ipMode })) } },
  };
  const big = slimOverBudget('Service', slim, NODE_AGENT_SERVICE_BUDGET.maxBytes, NODE_AGENT_SERVICE_BUDGET.component);
  return big === undefined ? slim : stub(svc, big, SERVICE_LABELS);
}

export function slimNad(nad: NetworkAttachmentDefinition): NetworkAttachmentDefinition {
  const over = nadOverBudget(nad, NODE_AGENT_NAD_BUDGET);
  if (over !== undefined) return stub(nad, over, []);
  return { metadata: slimMeta(nad.metadata, [], [SERVICE_NAMESPACES_ANNOTATION, NODE_ADDRESS_RANGE_ANNOTATION]), spec: { config: nad.spec?.config } };
}
