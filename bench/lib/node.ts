/**
 * The synthetic cluster of services.ts as the node agent sees it: the same Services as NodePort
 * (node ports 30000 + i; every fourth `externalTrafficPolicy: Local`), their slices with every
 * other endpoint on this node, a macvlan NAD and this node's Node object with its address on the
 * network. The agent's own planner (cmd/node-agent/state.ts) turns them into its NodeState.
 */
import { NODE_ADDRESSES_ANNOTATION, NODE_PARENTS_ANNOTATION } from '../../src/keys.js';
import { networkKey } from '../../src/annotations/service-network.js';
import type { NetworkAttachmentDefinition, V1EndpointSlice, V1Node, V1Service } from '../../src/kube/types.js';
import { planNode, type NodeInput, type NodePlan } from '../../cmd/node-agent/state.js';
import { DEFAULT_MASQUERADE_MARK, type NodeState } from '../../cmd/node-agent/rules.js';
import { ENDPOINT_PREFIX_LEN, NETWORK, endpointSlice, service } from './services.js';

export const NODE_NAME = 'bench-node';
/** The node's own address on the network (inside the endpoints' /16, as a macvlan sibling). */
export const NODE_ADDRESS = '10.100.255.250';
export const NODE_PORT_BASE = 30000;

export function nodePortService(i: number): V1Service {
  const s = service(i);
  const spec = s.spec ?? {};
  return {
    ...s,
    spec: { ...spec, type: 'NodePort', externalTrafficPolicy: i % 4 === 3 ? 'Local' : 'Cluster', ports: (spec.ports ?? []).map((p) => ({ ...p, nodePort: NODE_PORT_BASE + i })) },
  };
}

/** endpointSlice() with endpoint j on this node when j is even, else on another node. */
export function nodeSlice(i: number, perService: number, generation = 0): V1EndpointSlice {
  const s = endpointSlice(i, perService, generation);
  return { ...s, endpoints: s.endpoints.map((e, j) => ({ ...e, nodeName: j % 2 === 0 ? NODE_NAME : 'other-node' })) };
}

export function benchNad(parent: string): NetworkAttachmentDefinition {
  return {
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    metadata: { name: NETWORK.name, namespace: NETWORK.namespace },
    spec: { config: JSON.stringify({ cniVersion: '0.4.0', type: 'macvlan', master: parent, mode: 'bridge' }) },
  };
}

/** The admin's Node annotations: the node's address and its parent (the same link the NAD names). */
export function benchNode(parent = 'eth1'): V1Node {
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: NODE_NAME,
      annotations: { [NODE_ADDRESSES_ANNOTATION]: `${networkKey(NETWORK)}=${NODE_ADDRESS}/${ENDPOINT_PREFIX_LEN}`, [NODE_PARENTS_ANNOTATION]: `${networkKey(NETWORK)}=${parent}` },
    },
    status: { addresses: [{ type: 'InternalIP', address: '10.0.0.11' }] },
  };
}

/** The agent's input with n Services loaded (the parent interface only names the admin's parent). */
export function nodeInput(n: number, perService: number, slices?: readonly V1EndpointSlice[]): NodeInput {
  return {
    nodeName: NODE_NAME,
    node: benchNode(),
    services: Array.from({ length: n }, (_, i) => nodePortService(i)),
    slices: slices ?? Array.from({ length: n }, (_, i) => nodeSlice(i, perService)),
    nads: [benchNad('eth1')],
    masqueradeMark: DEFAULT_MASQUERADE_MARK,
  };
}

export function nodeState(input: NodeInput): NodeState {
  return checkedState(planNode(input));
}

/** The plan's state, after checking the bench's cluster is what it means to be: one network served, no problems. */
export function checkedState(plan: NodePlan): NodeState {
  if (plan.problems.length > 0 || plan.state.networks.length !== 1)
    throw new Error(`bench node plan: ${plan.state.networks.length} networks served; problems: ${plan.problems.map((p) => p.message).join('; ')}`);
  return plan.state;
}
