/**
 * Pure informer transforms (InformerOptions.transform): the sidecar's caches keep only the fields
 * it reads, so 1,000 Services and their slices do not hold managedFields, status, targetRefs and
 * annotations nobody looks at (B5 in docs/benchmarks.md: managedFields alone were about 2.3 MiB
 * of the heap at 1,000 Services).
 *
 * What is kept, and who reads it:
 * - metadata: name, namespace (objectKey, messages), uid, resourceVersion (the informer's
 *   change detection), deletionTimestamp (a Service being deleted is served, as kube-proxy does,
 *   but is the first of its namespace to give way in the per-network share), only the labels in
 *   `*_LABELS` and the annotations in `*_ANNOTATIONS` below (a tenant can put 256 KiB of labels on
 *   an object);
 * - Service spec: type, clusterIP(s), sessionAffinity(+Config), internalTrafficPolicy, externalIPs, ports' name/protocol/port
 *   (state.ts);
 * - EndpointSlice: addressType, ports' name/protocol/port, endpoints' addresses, conditions,
 *   nodeName, zone and hints (state.ts); the trigger-time annotation (programming-latency metric, runtime.ts);
 * - Pod: the service-network, networks and network-status annotations (state.ts).
 * Anything state.ts starts to read must be added here too; test/sidecar/runtime-slim.test.ts
 * checks that the state built from slimmed objects equals the one built from full objects.
 *
 * A Service over the sidecar's budget (src/cache-budget.ts) is cached as a stub that names it and
 * serves nothing; `refusalOf` says why (the runtime logs it, counts it and says it in an Event).
 */
import { LAST_CHANGE_TRIGGER_TIME_ANNOTATION, NETWORK_STATUS_ANNOTATION, NETWORKS_ANNOTATION, PROXY_NAME_LABEL, SERVICE_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { serviceOverBudget, SIDECAR_SERVICE_BUDGET, slimOverBudget, type Refusal } from '../../src/cache-budget.js';
import type { V1EndpointSlice, V1Pod, V1Service } from '../../src/kube/types.js';
import { slimMeta } from '../../src/kube/slim-meta.js';

// The slice's trigger time is kept for the loop's latency metric (src/dataplane/sync-loop.ts).
export { LAST_CHANGE_TRIGGER_TIME_ANNOTATION };

export const POD_ANNOTATIONS: readonly string[] = [SERVICE_NETWORK_ANNOTATION, NETWORKS_ANNOTATION, NETWORK_STATUS_ANNOTATION];
export const SERVICE_ANNOTATIONS: readonly string[] = [SERVICE_NETWORK_ANNOTATION];
export const SLICE_ANNOTATIONS: readonly string[] = [SERVICE_NETWORK_ANNOTATION, LAST_CHANGE_TRIGGER_TIME_ANNOTATION];
export const SERVICE_LABELS: readonly string[] = [PROXY_NAME_LABEL];
export const SLICE_LABELS: readonly string[] = [SERVICE_NAME_LABEL];

type Conditions = NonNullable<NonNullable<V1EndpointSlice['endpoints']>[number]['conditions']>;

/*
 * Every object here is built as one literal with all its keys, in a fixed order, even where a
 * value is undefined (readers use `?.` and `??`; JSON drops undefined): objects of one kind then
 * share one hidden class. Built by spreading or by adding keys conditionally, each of 1,000
 * objects got its own (measured in a heap snapshot: 6,000 extra maps, about 1 MiB).
 */

const slimPorts = <P extends { name?: string; protocol?: string; port?: number }>(ports: readonly P[] | undefined): P[] | undefined =>
  ports?.map((p) => ({ name: p.name, protocol: p.protocol, port: p.port }) as P);

/**
 * Endpoint conditions are one of a few combinations (almost always ready, serving, not
 * terminating): share one frozen object per combination instead of one per endpoint.
 */
const conditionsCache = new Map<string, Conditions>();
function sharedConditions(c: Conditions | undefined): Conditions | undefined {
  if (c === undefined) return undefined;
  const key = `${String(c.ready)}|${String(c.serving)}|${String(c.terminating)}`;
  let shared = conditionsCache.get(key);
  if (shared === undefined) {
    shared = Object.freeze({ ready: c.ready, serving: c.serving, terminating: c.terminating });
    conditionsCache.set(key, shared);
  }
  return shared;
}

export function slimPod(pod: V1Pod): V1Pod {
  return { metadata: slimMeta(pod.metadata, [], POD_ANNOTATIONS) };
}

/** Why the sidecar refused a Service it cached (a stub from slimService); undefined: it is served. */
const refusals = new WeakMap<V1Service, Refusal>();
export const refusalOf = (svc: V1Service): Refusal | undefined => refusals.get(svc);

/** The stub a refused Service is cached as: its identity, no networks, no ports. */
function refusedStub(svc: V1Service, refusal: Refusal): V1Service {
  const stub: V1Service = { metadata: slimMeta(svc.metadata, SERVICE_LABELS, []), spec: undefined };
  refusals.set(stub, refusal);
  return stub;
}

export function slimService(svc: V1Service): V1Service {
  const over = serviceOverBudget(svc, SIDECAR_SERVICE_BUDGET);
  if (over !== undefined) return refusedStub(svc, over);
  const slim = slimServiceFields(svc);
  const big = slimOverBudget('Service', slim, SIDECAR_SERVICE_BUDGET.maxBytes, SIDECAR_SERVICE_BUDGET.component);
  return big === undefined ? slim : refusedStub(svc, big);
}

function slimServiceFields(svc: V1Service): V1Service {
  const spec = svc.spec;
  return {
    metadata: slimMeta(svc.metadata, SERVICE_LABELS, SERVICE_ANNOTATIONS),
    spec:
      spec === undefined
        ? undefined
        : {
            type: spec.type,
            clusterIP: spec.clusterIP,
            clusterIPs: spec.clusterIPs,
            sessionAffinity: spec.sessionAffinity,
            sessionAffinityConfig: spec.sessionAffinityConfig,
            internalTrafficPolicy: spec.internalTrafficPolicy,
            // Served only inside the admin's allowed CIDRs (state.ts re-checks them).
            externalIPs: spec.externalIPs,
            ports: slimPorts(spec.ports),
            // A LoadBalancer's: which ingress IPs the client reaches directly, and from where.
            ...(spec.type === 'LoadBalancer' ? { loadBalancerSourceRanges: spec.loadBalancerSourceRanges } : {}),
          },
    ...(spec?.type === 'LoadBalancer' ? { status: { loadBalancer: { ingress: svc.status?.loadBalancer?.ingress?.map((i) => ({ ip: i.ip, ipMode: i.ipMode })) } } } : {}),
  };
}

export function slimEndpointSlice(slice: V1EndpointSlice): V1EndpointSlice {
  return {
    metadata: slimMeta(slice.metadata, SLICE_LABELS, SLICE_ANNOTATIONS),
    addressType: slice.addressType,
    ports: slimPorts(slice.ports),
    // Required by the API; `?? []` only for a server that sends null for an empty slice.
    // nodeName, zone and hints: internalTrafficPolicy Local and topology (state.ts).
    endpoints: (slice.endpoints ?? []).map((ep) => ({ addresses: ep.addresses, conditions: sharedConditions(ep.conditions), nodeName: ep.nodeName, zone: ep.zone, hints: ep.hints })),
  };
}
