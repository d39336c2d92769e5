/**
 * The controller's informers: Services (ours), pods, our EndpointSlices, the address-group
 * EndpointSlices (MultiNetworkPolicy peers, another managed-by value), namespaces (the injection
 * label for sidecar RBAC, and labels for policies' namespaceSelectors), and by option nodes (zones and addresses) and NADs (sharing and IPAM ranges, when the API is
 * served). Only what the reconciler reads is kept (cmd/controller/slim.ts).
 */
import { createInformer, type Informer } from '../../src/kube/informer.js';
import { getIfExists, type KubeClient } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { KubeObject, V1EndpointSlice, V1Namespace, V1Pod, V1Service } from '../../src/kube/types.js';
import type { Logger } from '../../src/log.js';
import { MANAGED_BY_LABEL, PROXY_NAME, PROXY_NAME_LABEL } from '../../src/keys.js';
import { ADDRESS_GROUP_MANAGED_BY } from '../../src/policy/address-group.js';
import type { ControllerOptions } from './options.js';
import { ourSlicesSelector } from './plan.js';
import { slimNad, slimNamespace, slimNode, slimPod, slimService, type SlimNad } from './slim.js';

export interface ControllerInformers {
  readonly services: Informer<V1Service>;
  readonly pods: Informer<V1Pod>;
  readonly slices: Informer<V1EndpointSlice>;
  readonly groupSlices: Informer<V1EndpointSlice>;
  readonly namespaces?: Informer<V1Namespace> | undefined;
  readonly nodes?: Informer<KubeObject> | undefined;
  readonly nads?: Informer<SlimNad> | undefined;
}

export async function createControllerInformers(client: KubeClient, opts: ControllerOptions, logger: Logger): Promise<ControllerInformers> {
  const ns = opts.namespace;
  const services = createInformer<V1Service>(client, { logger, name: 'services', path: apiPath('', 'v1', 'services', ns), labelSelector: `${PROXY_NAME_LABEL}=${PROXY_NAME}`, transform: slimService });
  const pods = createInformer<V1Pod>(client, { logger, name: 'pods', path: apiPath('', 'v1', 'pods', ns), transform: slimPod });
  const slices = createInformer<V1EndpointSlice>(client, { logger, name: 'endpointslices', path: apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns), labelSelector: ourSlicesSelector() });
  // Address groups: their own managed-by value, so neither informer ever sees the other's slices.
  const groupSlices = createInformer<V1EndpointSlice>(client, {
    logger,
    name: 'address-group-endpointslices',
    path: apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns),
    labelSelector: `${MANAGED_BY_LABEL}=${ADDRESS_GROUP_MANAGED_BY}`,
  });
  const namespaces = createInformer<V1Namespace>(client, { logger, name: 'namespaces', path: apiPath('', 'v1', 'namespaces'), transform: slimNamespace });
  const nodes = opts.watchNodes ? createInformer<KubeObject>(client, { logger, name: 'nodes', path: apiPath('', 'v1', 'nodes'), transform: slimNode }) : undefined;
  // NADs, for whether another namespace's NAD is shared (src/annotations/nad-sharing.ts) and for
  // the range its IPAM hands out (src/annotations/nad-ipam.ts): only those are kept. Without the
  // NAD API, every cross-namespace reference is refused and no range is known.
  const nadApi = (await getIfExists(client, '/apis/k8s.cni.cncf.io/v1')) !== undefined;
  const nads = nadApi ? createInformer<SlimNad>(client, { logger, name: 'nads', path: apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions'), transform: slimNad }) : undefined;
  if (!nadApi) logger.warn("the NetworkAttachmentDefinition API (k8s.cni.cncf.io/v1) is not served: Services naming another namespace's NAD get no slices");
  return { services, pods, slices, groupSlices, namespaces, nodes, nads };
}

/** Every informer above, in start order. */
export function allInformers(i: ControllerInformers): Informer<KubeObject>[] {
  return [i.services, i.pods, i.slices, i.groupSlices, ...(i.namespaces ? [i.namespaces] : []), ...(i.nodes ? [i.nodes] : []), ...(i.nads ? [i.nads] : [])] as Informer<KubeObject>[];
}
