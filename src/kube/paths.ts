/**
 * REST paths for the Kubernetes API. One function so nobody hand-builds `/apis/...` strings and
 * gets the core group (`/api/v1`) or the namespace segment wrong.
 */

/**
 * `apiPath('', 'v1', 'pods', 'ns', 'web')` -> `/api/v1/namespaces/ns/pods/web`;
 * `apiPath('discovery.k8s.io', 'v1', 'endpointslices')` -> `/apis/discovery.k8s.io/v1/endpointslices` (all namespaces).
 * Append `/status` or `/token` for a subresource.
 */
export function apiPath(group: string, version: string, resource: string, namespace?: string, name?: string): string {
  const base = group === '' ? `/api/${version}` : `/apis/${group}/${version}`;
  const ns = namespace ? `/namespaces/${encodeURIComponent(namespace)}` : '';
  const item = name ? `/${encodeURIComponent(name)}` : '';
  return `${base}${ns}/${resource}${item}`;
}
