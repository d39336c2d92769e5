/**
 * The node agent's start-up probe table: its own nftables table (nft-rules.ts) for a node with one
 * network and one Service port of every frontend shape, rendered by renderNode, so `nft -c`
 * checks the hooks (prerouting, postrouting, input, forward), marks, masquerade and source ranges
 * the agent will write, besides the sidecar's shapes. Documentation addresses; check mode creates nothing.
 */
import type { BackendEndpoint, IpFamily, Protocol, ServicePortTarget } from '../../src/dataplane/index.js';
import { fullText } from '../../src/dataplane/node.js';
import { DEFAULT_MASQUERADE_MARK, type LoadBalancerTarget, type NodePortTarget, type NodeState } from './rules.js';
import { renderNode } from './stages.js';

const NET = { namespace: 'probe', name: 'probe' };
const ep = (ip: string): BackendEndpoint => ({ ip, port: 8080, ready: true, serving: true, terminating: false });

function target(family: IpFamily, protocol: Protocol, clusterIP: string, endpoints: readonly BackendEndpoint[], affinityTimeoutSeconds?: number): ServicePortTarget {
  return {
    service: `probe/${protocol.toLowerCase()}${family}`,
    portName: '',
    protocol,
    clusterIP,
    port: 80,
    family,
    network: NET,
    endpoints,
    ...(affinityTimeoutSeconds !== undefined ? { affinityTimeoutSeconds } : {}),
  };
}

const V4 = [ep('192.0.2.1'), ep('192.0.2.2')];
const V6 = [ep('2001:db8::1'), ep('2001:db8::2')];

export function nodeProbeState(): NodeState {
  const web4 = target(4, 'TCP', '198.51.100.1', V4);
  const dns6 = target(6, 'UDP', '2001:db8:96::1', V6, 60);
  const sctp4 = target(4, 'SCTP', '198.51.100.2', []);
  const np = (base: ServicePortTarget, nodePort: number, policy: NodePortTarget['policy'], local: readonly BackendEndpoint[]): NodePortTarget => ({ base, nodePort, policy, localEndpoints: local });
  const lb = (base: ServicePortTarget, ingressIP: string, policy: LoadBalancerTarget['policy'], sourceRanges?: readonly string[]): LoadBalancerTarget => ({
    base,
    ingressIP,
    policy,
    localEndpoints: [],
    ...(sourceRanges !== undefined ? { sourceRanges } : {}),
  });
  return {
    networks: [{ network: NET, interface: 'mpxhprobe', ipv4: '192.0.2.10', ipv6: '2001:db8::10' }],
    masqueradeMark: DEFAULT_MASQUERADE_MARK,
    clusterTargets: [web4, dns6, sctp4],
    nodePorts: [np(web4, 30080, 'Cluster', []), np(dns6, 30053, 'Local', V6.slice(0, 1)), np(sctp4, 30132, 'Cluster', [])],
    loadBalancers: [lb(web4, '192.0.2.240', 'Cluster', ['203.0.113.0/24']), lb(web4, '192.0.2.241', 'Local'), lb(dns6, '2001:db8::f0', 'Cluster')],
  };
}

export function nodeProbeText(): string {
  const nft = renderNode(nodeProbeState(), undefined, { nft: true }).nft;
  if (nft === undefined) throw new Error('renderNode gave no nftables table');
  return fullText(nft);
}
