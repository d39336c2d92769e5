/**
 * Node states with one of each node-agent rule shape, shared by the golden tests of both rule back
 * ends (rules.test.ts for iptables, test/node-agent/nft-rules.test.ts for nftables).
 */
import type { BackendEndpoint, ServicePortTarget } from '../../../src/dataplane/core/model.js';
import { DEFAULT_MASQUERADE_MARK, type LoadBalancerTarget, type NodePortTarget, type NodeState } from '../../../cmd/node-agent/rules.js';

export const NET = { namespace: 'demo', name: 'net-a' };
export const ep = (ip: string, port = 8080, over: Partial<BackendEndpoint> = {}): BackendEndpoint => ({ ip, port, ready: true, serving: true, terminating: false, ...over });

export function base(service: string, over: Partial<ServicePortTarget> = {}): ServicePortTarget {
  return { service, portName: '', protocol: 'TCP', clusterIP: '10.96.0.10', port: 80, family: 4, network: NET, endpoints: [ep('192.168.101.3'), ep('192.168.101.4'), ep('192.168.101.5')], ...over };
}
export function np(service: string, nodePort: number, policy: 'Cluster' | 'Local', over: Partial<ServicePortTarget> = {}, local: BackendEndpoint[] = [ep('192.168.101.3')]): NodePortTarget {
  return { base: base(service, over), nodePort, policy, localEndpoints: local };
}

export const V6_EPS = [ep('fd00:101::3'), ep('fd00:101::4')];
export const SAMPLE: NodeState = {
  networks: [{ network: NET, interface: 'mpxhevwsochhkyu', ipv4: '192.168.101.250', ipv6: 'fd00:101::fa' }],
  masqueradeMark: DEFAULT_MASQUERADE_MARK,
  clusterTargets: [base('demo/web'), base('demo/web', { family: 6, clusterIP: 'fd00:10:96::a', endpoints: V6_EPS })],
  nodePorts: [
    np('demo/web', 30080, 'Cluster'),
    np('demo/web', 30080, 'Cluster', { family: 6, endpoints: V6_EPS }, [ep('fd00:101::3')]),
    np('demo/local', 30081, 'Local'),
    np('demo/nolocal', 30082, 'Local', {}, []),
    np('demo/dns', 30053, 'Cluster', { protocol: 'UDP', port: 53, affinityTimeoutSeconds: 10800, endpoints: [ep('192.168.101.3', 5353), ep('192.168.101.6', 5353)] }),
    np('demo/empty', 30090, 'Cluster', { endpoints: [] }),
  ],
};

export function lbt(service: string, ingressIP: string, policy: 'Cluster' | 'Local', over: Partial<ServicePortTarget> = {}, extra: Partial<LoadBalancerTarget> = {}): LoadBalancerTarget {
  return { base: base(service, over), ingressIP, policy, localEndpoints: [ep('192.168.101.3')], ...extra };
}

/** One of each LoadBalancer rule shape: Cluster, Local, source ranges with and without endpoints, none admitted, UDP, SCTP, IPv6. */
export const LB_SAMPLE: NodeState = {
  networks: SAMPLE.networks,
  masqueradeMark: DEFAULT_MASQUERADE_MARK,
  clusterTargets: [],
  nodePorts: [np('demo/web', 30080, 'Cluster')],
  loadBalancers: [
    lbt('demo/web', '192.168.101.240', 'Cluster'),
    lbt('demo/local', '192.168.101.241', 'Local'),
    lbt('demo/nolocal', '192.168.101.242', 'Local', {}, { localEndpoints: [] }),
    lbt('demo/ranged', '192.168.101.243', 'Cluster', {}, { sourceRanges: ['198.51.100.0/24', '192.168.101.0/25'] }),
    lbt('demo/ranged-empty', '192.168.101.244', 'Cluster', { endpoints: [] }, { sourceRanges: ['198.51.100.0/24'] }),
    lbt('demo/closed', '192.168.101.245', 'Cluster', {}, { sourceRanges: [] }),
    lbt('demo/dns', '192.168.101.246', 'Cluster', { protocol: 'UDP', port: 53, endpoints: [ep('192.168.101.3', 5353), ep('192.168.101.6', 5353)] }),
    lbt('demo/sig', '192.168.101.248', 'Local', { protocol: 'SCTP', port: 3868, endpoints: [ep('192.168.101.3', 3868)] }, { localEndpoints: [ep('192.168.101.3', 3868)] }),
    lbt('demo/web', 'fd00:101::f0', 'Cluster', { family: 6, clusterIP: 'fd00:10:96::a', endpoints: V6_EPS }, { sourceRanges: ['2001:db8::/32'] }),
  ],
};
