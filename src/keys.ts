/**
 * Every label, annotation and name that docs/design.md fixes, in one place, so the
 * controller, webhook and sidecar can never disagree about a spelling.
 */

/** Label that makes kube-proxy ignore a Service and marks it as ours. */
export const PROXY_NAME_LABEL = 'service.kubernetes.io/service-proxy-name';
export const PROXY_NAME = 'multus-proxy';

/** On a Service: the networks its endpoints live on. On a client pod: the networks it wants to reach. */
export const SERVICE_NETWORK_ANNOTATION = 'k8s.v1.cni.cncf.io/service-network';
/** Kubernetes' EndpointSlice annotation: when the change behind the slice's last update happened (network programming latency). */
export const LAST_CHANGE_TRIGGER_TIME_ANNOTATION = 'endpoints.kubernetes.io/last-change-trigger-time';
/** Label selector string used when `spec.selector` is empty (the only way for headless Services). */
export const SERVICE_SELECTOR_ANNOTATION = 'k8s.v1.cni.cncf.io/service-selector';
/** Multus: the networks a pod asks to be attached to. */
export const NETWORKS_ANNOTATION = 'k8s.v1.cni.cncf.io/networks';
/** Multus: what was actually attached (interfaces, addresses). */
export const NETWORK_STATUS_ANNOTATION = 'k8s.v1.cni.cncf.io/network-status';

/** Namespace label that enables sidecar injection. */
export const INJECTION_LABEL = 'multus-proxy-injection';
export const INJECTION_ENABLED = 'enabled';
/** Pod annotation: "false" opts the pod out of its namespace's injection ("true" is the default there). */
export const INJECT_ANNOTATION = 'multus-proxy.k8s.cni.cncf.io/inject';

/** EndpointSlice labels. */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
export const MANAGED_BY_LABEL = 'endpointslice.kubernetes.io/managed-by';
export const MANAGED_BY = 'multus-proxy-controller';
/** Network label on our slices, so a sidecar can select its networks server-side. */
export const NETWORK_LABEL = 'multus-proxy/network';

/** net-service-controller's API, served by the optional component deploy/components/netservice. */
export const NETSERVICE_GROUP = 'svcctl.metaswitch.com';
export const NETSERVICE_VERSION = 'v1alpha1';
export const NETSERVICE_KIND = 'NetService';
export const NETSERVICE_RESOURCE = 'netservices';
/** On the headless Service the controller keeps for a NetService: the NetService's name. */
export const NETSERVICE_LABEL = 'multus-proxy/netservice';

/** multus-service's EndpointSlices, which the controller removes for Services it serves. */
export const MULTUS_SERVICE_MANAGED_BY = 'multus-endpointslice-controller.npwg.k8s.io';

/** The injected sidecar container's name. */
export const SIDECAR_CONTAINER_NAME = 'multus-proxy';

/** The webhook configurations (mutating and validating) the install creates. */
export const WEBHOOK_CONFIGURATION_NAME = 'multus-proxy-webhook';

/** Where the project installs itself. */
export const INSTALL_NAMESPACE = 'multus-proxy-system';

/** The optional node agent's DaemonSet (deploy/components/node-agent): the webhook reads whether it runs. */
export const NODE_AGENT_NAMESPACE = 'multus-proxy-node';
export const NODE_AGENT_DAEMONSET = 'multus-proxy-node';

/** At most this many endpoints per EndpointSlice (the Kubernetes default). */
export const MAX_ENDPOINTS_PER_SLICE = 100;

/**
 * Node agent: the node's own address on a secondary network (its host-side interface's address).
 * On a Node, the admin's: `<namespace>/<nad>=<ip>/<prefix>[,<ip>/<prefix>]` entries separated by
 * ';' (at most one address per family per network; docs/node-agent.md). The only source: the NAD
 * range below is ignored.
 */
export const NODE_ADDRESSES_ANNOTATION = 'multus-proxy.k8s.cni.cncf.io/node-addresses';
/**
 * Node agent: the parent of the node's own interface on each network (a macvlan's or ipvlan's
 * link, a bridge network's bridge). On a Node, the admin's: `<namespace>/<nad>=<ifname>` entries
 * separated by ';'. A NAD's `master`/`bridge` is its owner's, a tenant's, and no longer chooses it.
 */
export const NODE_PARENTS_ANNOTATION = 'multus-proxy.k8s.cni.cncf.io/node-parents';
/** Once the NAD's source of node addresses; now ignored (a NAD is a tenant's), with an Event. */
export const NODE_ADDRESS_RANGE_ANNOTATION = 'multus-proxy.k8s.cni.cncf.io/node-address-range';

/**
 * On a NAD: the namespaces whose Services may name it (comma separated, or `*`). A Service always
 * may name a NAD of its own namespace; another namespace's only where that NAD's owner listed it.
 */
export const SERVICE_NAMESPACES_ANNOTATION = 'multus-proxy.k8s.cni.cncf.io/service-namespaces';

/**
 * MultiNetworkPolicy (multi-networkpolicy's API, served by the optional component
 * deploy/components/multi-networkpolicy): v1beta1 and v1beta2 (which adds `endPort`).
 */
export const MULTI_NETWORK_POLICY_GROUP = 'k8s.cni.cncf.io';
export const MULTI_NETWORK_POLICY_VERSIONS = ['v1beta1', 'v1beta2'] as const;
export const MULTI_NETWORK_POLICY_KIND = 'MultiNetworkPolicy';
export const MULTI_NETWORK_POLICY_RESOURCE = 'multi-networkpolicies';
export const MULTI_NETWORK_POLICY_CRD = `${MULTI_NETWORK_POLICY_RESOURCE}.${MULTI_NETWORK_POLICY_GROUP}`;
/** On a MultiNetworkPolicy: the networks it is for (`<nad>`, `<namespace>/<nad>`, a comma list; bare = the policy's namespace). */
export const POLICY_FOR_ANNOTATION = 'k8s.v1.cni.cncf.io/policy-for';
