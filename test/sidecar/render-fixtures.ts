/**
 * Sample desired states for render and dataplane tests. Cluster IPs are inside the test service
 * ranges (10.96.0.0/16, fd00:10:96::/112); they are only ever reached inside test namespaces.
 */
import type { BackendEndpoint, DesiredState, IpFamily, PodInterface, Protocol, ServicePortTarget } from '../../src/dataplane/core/model.js';

export const BLUE = { namespace: 'demo', name: 'blue' };
export const RED = { namespace: 'demo', name: 'red' };

export function ep(ip: string, port: number, state: 'ready' | 'unready' | 'terminating' = 'ready'): BackendEndpoint {
  return { ip, port, ready: state === 'ready', serving: state !== 'unready', terminating: state === 'terminating' };
}

export function target(
  service: string,
  clusterIP: string,
  port: number,
  endpoints: readonly BackendEndpoint[],
  extra: Partial<Omit<ServicePortTarget, 'service' | 'clusterIP' | 'port' | 'endpoints'>> = {},
): ServicePortTarget {
  const family: IpFamily = clusterIP.includes(':') ? 6 : 4;
  const protocol: Protocol = extra.protocol ?? 'TCP';
  return { service, portName: '', protocol, clusterIP, port, family, network: BLUE, endpoints, ...extra };
}

export const CLIENT_BLUE: PodInterface = { network: BLUE, interface: 'net1', ipv4: ['192.168.101.2'], ipv6: ['fd00:101::2'] };

/** The sample used by the golden files: one of each case the renderer distinguishes. */
export function sampleState(): DesiredState {
  return {
    interfaces: [CLIENT_BLUE],
    targets: [
      target('demo/web', '10.96.0.10', 80, [ep('192.168.101.3', 8080), ep('192.168.101.4', 8080), ep('192.168.101.5', 8080), ep('192.168.101.6', 8080, 'unready')], {
        portName: 'http',
      }),
      target('demo/web', 'fd00:10:96::a', 80, [ep('fd00:101::3', 8080), ep('fd00:101::4', 8080)], { portName: 'http' }),
      target('demo/dns', '10.96.0.53', 53, [ep('192.168.101.3', 5353), ep('192.168.101.4', 5353)], { protocol: 'UDP', portName: 'dns', affinityTimeoutSeconds: 10800 }),
      target('demo/draining', '10.96.0.20', 443, [ep('192.168.101.7', 8443, 'terminating'), ep('192.168.101.8', 8443, 'unready')]),
      target('demo/empty', '10.96.0.30', 8080, []),
      target('demo/empty', 'fd00:10:96::1e', 5000, [], { protocol: 'UDP' }),
      target('demo/sig', '10.96.0.40', 9999, [ep('192.168.101.3', 9999)], { protocol: 'SCTP' }),
      target('demo/elsewhere', '10.96.0.50', 80, [ep('192.168.102.3', 80)], { network: RED }),
    ],
  };
}

export const RED_IFACE: PodInterface = { network: RED, interface: 'net2', ipv4: ['192.168.102.2'], ipv6: [] };

/** The smallest states that show each rule shape, shared by both back ends' golden tests. */
export const SHAPE_STATES: Readonly<Record<'shape-dual-stack' | 'shape-sctp' | 'shape-terminating-only' | 'shape-networks' | 'shape-load-balancer', DesiredState>> = {
  'shape-dual-stack': {
    interfaces: [CLIENT_BLUE],
    targets: [
      target('demo/dual', '10.96.1.20', 80, [ep('192.168.101.3', 8080), ep('192.168.101.4', 8080)], { portName: 'http' }),
      target('demo/dual', 'fd00:10:96::114', 80, [ep('fd00:101::3', 8080), ep('fd00:101::4', 8080)], { portName: 'http' }),
      target('demo/dual', 'fd00:10:96::114', 81, [], { portName: 'admin' }),
    ],
  },
  'shape-sctp': {
    interfaces: [CLIENT_BLUE],
    targets: [
      target('demo/sctp', '10.96.1.30', 3868, [ep('192.168.101.3', 3868), ep('192.168.101.4', 3868)], { protocol: 'SCTP', portName: 'diameter' }),
      target('demo/sctp', '10.96.1.30', 2905, [], { protocol: 'SCTP', portName: 'm3ua' }),
      target('demo/sctp', 'fd00:10:96::11e', 3868, [ep('fd00:101::3', 3868)], { protocol: 'SCTP', portName: 'diameter' }),
      target('demo/sctp', 'fd00:10:96::11e', 2905, [], { protocol: 'SCTP', portName: 'm3ua' }),
    ],
  },
  'shape-terminating-only': {
    interfaces: [CLIENT_BLUE],
    targets: [
      target('demo/rolling', '10.96.1.40', 80, [ep('192.168.101.3', 8080, 'terminating'), ep('192.168.101.4', 8080, 'terminating'), ep('192.168.101.5', 8080, 'unready')]),
      target('demo/gone', '10.96.1.41', 80, [ep('192.168.101.6', 8080, 'unready'), { ip: '192.168.101.7', port: 8080, ready: false, serving: false, terminating: true }]),
    ],
  },
  'shape-networks': {
    interfaces: [CLIENT_BLUE, RED_IFACE],
    targets: [
      target('demo/blue-svc', '10.96.1.50', 80, [ep('192.168.101.3', 8080)]),
      target('demo/red-svc', '10.96.1.51', 80, [ep('192.168.102.3', 8080), ep('192.168.102.4', 8080)], { network: RED }),
      target('demo/both', '10.96.1.52', 80, [ep('192.168.101.4', 80)]),
      target('demo/both', '10.96.1.52', 80, [ep('192.168.102.5', 80)], { network: RED }),
    ],
  },
  // A LoadBalancer Service: its cluster IP and its ingress IPs (ipMode VIP, one per family) reach
  // the same endpoints directly; a UDP port without endpoints is refused on the ingress IP too.
  'shape-load-balancer': {
    interfaces: [CLIENT_BLUE],
    targets: [
      target('demo/lb', '10.96.1.60', 80, [ep('192.168.101.3', 8080), ep('192.168.101.4', 8080)], { portName: 'http' }),
      target('demo/lb', '192.168.101.240', 80, [ep('192.168.101.3', 8080), ep('192.168.101.4', 8080)], { portName: 'http', ingress: true }),
      target('demo/lb', '192.168.101.240', 53, [], { portName: 'dns', protocol: 'UDP', ingress: true }),
      target('demo/lb', 'fd00:101::f0', 80, [ep('fd00:101::3', 8080)], { portName: 'http', ingress: true }),
    ],
  },
};

/** An `nft list table` listing's lines sorted, element lists split: the kernel's order of set elements is not ours. */
export function nftListingLines(listing: string): string[] {
  return listing
    .split(/[\n,{}]/)
    .map((l) => l.trim().replace(/^elements = /, ''))
    .filter((l) => l !== '')
    .sort();
}

/** `ports` Service ports of `endpoints` each over seven Services on `prefix`.1-7: a state whose load takes several chunks. */
export function manyPortsState(ports: number, endpoints: number, prefix: string): DesiredState {
  return {
    interfaces: [CLIENT_BLUE],
    targets: Array.from({ length: ports }, (_, i) =>
      target(
        `demo/b${i % 7}`,
        `${prefix}.${(i % 7) + 1}`,
        1000 + i,
        Array.from({ length: endpoints }, (_, e) => ep(`192.168.101.${e + 10}`, 1000 + i)),
        { portName: `p${i}` },
      ),
    ),
  };
}

/**
 * A sidecar's state before and after a restart, for a client with these net1 addresses: the
 * sample's shapes and `ports` ports of 9 endpoints, some with affinity; `later`, the first sample
 * port gone, three in four of the rest, half of those with 5 endpoints, a third on other
 * endpoints, affinity on other ports, and one Service added.
 */
export function restartState(net1: { ipv4: string; ipv6: string }, ports: number, later: boolean): DesiredState {
  const s = sampleState();
  const n = later ? Math.floor((ports * 3) / 4) : ports;
  const more = Array.from({ length: n }, (_, i) =>
    target(
      `demo/many${i % 4}`,
      `10.96.2.${(i % 4) + 1}`,
      6000 + i,
      Array.from({ length: later && i % 2 === 1 ? 5 : 9 }, (_, e) => ep(`192.168.101.${e + (later && i % 3 === 0 ? 70 : 60)}`, 6000 + i)),
      { portName: `p${i}`, ...(i % 10 === (later ? 5 : 3) ? { affinityTimeoutSeconds: 300 } : {}) },
    ),
  );
  const added = later ? [target('demo/added', '10.96.3.1', 7000, [ep('192.168.101.80', 7000)])] : [];
  return { interfaces: [{ ...CLIENT_BLUE, ipv4: [net1.ipv4], ipv6: [net1.ipv6] }], targets: [...(later ? s.targets.slice(1) : s.targets), ...more, ...added] };
}
