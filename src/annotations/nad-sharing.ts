/**
 * Whether a Service may name a NetworkAttachmentDefinition. Pure.
 *
 * A NAD's owner decides who may use it from another namespace (the trust model in docs/security.md):
 * a Service in the NAD's own namespace always may; a Service in another namespace only when the
 * NAD carries `multus-proxy.k8s.cni.cncf.io/service-namespaces` listing that namespace, or `*`.
 * Without it, a tenant could publish its pods as a Service on someone else's network and have
 * every client there route to them.
 */
import { SERVICE_NAMESPACES_ANNOTATION } from '../keys.js';
import { networkKey, type NetworkRef } from './service-network.js';

export type Sharing = { readonly allowed: true } | { readonly allowed: false; readonly message: string };

/** `annotations` are the NAD's; undefined when the NAD does not exist (or cannot be read). */
export function nadSharedWith(ref: NetworkRef, serviceNamespace: string, annotations: Readonly<Record<string, string>> | undefined, exists: boolean): Sharing {
  if (ref.namespace === serviceNamespace) return { allowed: true };
  const key = networkKey(ref);
  const fix = `its owner adds the annotation ${SERVICE_NAMESPACES_ANNOTATION}: "${serviceNamespace}" (a comma list of namespaces, or "*") to NetworkAttachmentDefinition ${key}, or the Service names a NAD of its own namespace`;
  if (!exists)
    return {
      allowed: false,
      message: `NetworkAttachmentDefinition ${key} of another namespace does not exist (or cannot be read), so it cannot be shared with namespace ${serviceNamespace}; once it exists, ${fix}`,
    };
  const value = annotations?.[SERVICE_NAMESPACES_ANNOTATION];
  const listed = (value ?? '').split(',').map((s) => s.trim());
  if (listed.includes('*') || listed.includes(serviceNamespace)) return { allowed: true };
  const now = value === undefined ? 'it has no such annotation' : `it lists ${JSON.stringify(value)}`;
  return { allowed: false, message: `NetworkAttachmentDefinition ${key} belongs to another namespace and is not shared with namespace ${serviceNamespace} (${now}): ${fix}` };
}
