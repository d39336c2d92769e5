/**
 * Pure informer transforms (InformerOptions.transform): the sidecar's caches keep only the fields
 * it reads, so 1,000 Services and their slices do not hold managedFields, status, targetRefs and
 * annotations nobody looks at (B5 in docs/benchmarks.md: managedFields alone were about 2.3 MiB
 * of the heap at 1,000 Services).
 *
 * What is kept, and who reads it:
 * - metadata: name, namespace (objectKey, messages), uid, resourceVersion (the informer's
 *   change detection), all labels (small by convention; state.ts reads the proxy-name and
 *   service-name labels) and only the annotations in `*_ANNOTATIONS` below;
 * - Service spec: type, clusterIP(s), sessionAffinity(+Config), internalTrafficPolicy, ports'
 *   name/protocol/port (state.ts);
 * - EndpointSlice: addressType, ports' name/protocol/port, endpoints' addresses, conditions,
 *   nodeName, zone and hints (state.ts); the trigger-time annotation (programming-latency metric, runtime.ts);
 * - Pod: the service-network, networks and network-status annotations (state.ts).
 * Anything state.ts starts to read must be added here too; test/sidecar/runtime-slim.test.ts
 * checks that the state built from slimmed objects equals the one built from full objects.
 */
import { LAST_CHANGE_TRIGGER_TIME_ANNOTATION, NETWORK_STATUS_ANNOTATION, NETWORKS_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import type { V1EndpointSlice, V1ObjectMeta, V1Pod, V1Service } from '../../src/kube/types.js';

// The slice's trigger time is kept for the loop's latency metric (src/dataplane/sync-loop.ts).
export { LAST_CHANGE_TRIGGER_TIME_ANNOTATION };

export const POD_ANNOTATIONS: readonly string[] = [SERVICE_NETWORK_ANNOTATION, NETWORKS_ANNOTATION, NETWORK_STATUS_ANNOTATION];
export const SERVICE_ANNOTATIONS: readonly string[] = [SERVICE_NETWORK_ANNOTATION];
export const SLICE_ANNOTATIONS: readonly string[] = [SERVICE_NETWORK_ANNOTATION, LAST_CHANGE_TRIGGER_TIME_ANNOTATION];

type Conditions = NonNullable<NonNullable<V1EndpointSlice['endpoints']>[number]['conditions']>;

/*
 * Every object here is built as one literal with all its keys, in a fixed order, even where a
 * value is undefined (readers use `?.` and `??`; JSON drops undefined): objects of one kind then
 * share one hidden class. Built by spreading or by adding keys conditionally, each of 1,000
 * objects got its own (measured in a heap snapshot: 6,000 extra maps, about 1 MiB).
 */

function slimMeta(meta: V1ObjectMeta | undefined, annotationKeys: readonly string[]): V1ObjectMeta {
  let annotations: Record<string, string> | undefined;
  for (const k of annotationKeys) {
    const v = meta?.annotations?.[k];
    if (v === undefined) continue;
    annotations ??= {};
    annotations[k] = v;
  }
  return { name: meta?.name, namespace: meta?.namespace, uid: meta?.uid, resourceVersion: meta?.resourceVersion, labels: meta?.labels, annotations };
}

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
  return { metadata: slimMeta(pod.metadata, POD_ANNOTATIONS) };
}

export function slimService(svc: V1Service): V1Service {
  const spec = svc.spec;
  return {
    metadata: slimMeta(svc.metadata, SERVICE_ANNOTATIONS),
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
            ports: slimPorts(spec.ports),
            // A LoadBalancer's: which ingress IPs the client reaches directly, and from where.
            ...(spec.type === 'LoadBalancer' ? { loadBalancerSourceRanges: spec.loadBalancerSourceRanges } : {}),
          },
    ...(spec?.type === 'LoadBalancer' ? { status: { loadBalancer: { ingress: svc.status?.loadBalancer?.ingress?.map((i) => ({ ip: i.ip, ipMode: i.ipMode })) } } } : {}),
  };
}

export function slimEndpointSlice(slice: V1EndpointSlice): V1EndpointSlice {
  return {
    metadata: slimMeta(slice.metadata, SLICE_ANNOTATIONS),
    addressType: slice.addressType,
    ports: slimPorts(slice.ports),
    // Required by the API; `?? []` only for a server that sends null for an empty slice.
    // nodeName, zone and hints: internalTrafficPolicy Local and topology (state.ts).
    endpoints: (slice.endpoints ?? []).map((ep) => ({ addresses: ep.addresses, conditions: sharedConditions(ep.conditions), nodeName: ep.nodeName, zone: ep.zone, hints: ep.hints })),
  };
}
