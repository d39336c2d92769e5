/**
 * Kubernetes object types. They come from @kubernetes/client-node as *type-only* imports: the
 * types cost nothing at run time, while importing client-node's runtime costs ~78 MB of RSS
 * (measured: bare node 41 MB, with client-node 120 MB), too much for a sidecar in every pod.
 * See docs/decisions/0002-lean-kubernetes-client.md.
 */
export type {
  CoreV1Event,
  V1Container,
  DiscoveryV1EndpointPort as V1EndpointPort,
  V1Endpoint,
  V1EndpointSlice,
  V1Lease,
  V1Namespace,
  V1ObjectMeta,
  V1OwnerReference,
  V1Pod,
  V1Service,
  V1ServicePort,
  V1ClusterRole,
  V1ClusterRoleBinding,
  V1RoleBinding,
  V1MutatingWebhookConfiguration,
  V1ValidatingWebhookConfiguration,
  V1Secret,
  V1Node,
} from '@kubernetes/client-node';
import type { V1ObjectMeta } from '@kubernetes/client-node';

/** Anything with metadata; what informers store. */
export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata?: V1ObjectMeta;
}

/** A NetworkAttachmentDefinition (k8s.cni.cncf.io/v1). */
export interface NetworkAttachmentDefinition extends KubeObject {
  spec?: { config?: string };
}

export interface ObjectList<T> {
  metadata?: { resourceVersion?: string; continue?: string };
  items: T[];
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchEvent<T> {
  type: WatchEventType;
  object: T;
}

/** `namespace/name`, or `name` for cluster-scoped objects: the key informers and work queues use. */
export function objectKey(obj: KubeObject): string {
  const ns = obj.metadata?.namespace;
  const name = obj.metadata?.name ?? '';
  return ns ? `${ns}/${name}` : name;
}
