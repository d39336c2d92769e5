/**
 * Addresses that are never a Service's or a pod's on a secondary network: loopback, link-local,
 * unspecified, multicast, broadcast and IPv4-mapped IPv6. Shared by the controller (addresses a pod
 * claims, controller/address-policy.ts) and by every reader of a LoadBalancer's ingress IPs
 * (load-balancer.ts), so both refuse the same classes with the same words. Pure.
 */
import { BlockList } from 'node:net';

interface AddressClass {
  readonly name: string;
  readonly family: 4 | 6;
  readonly list: BlockList;
}

/** One list per class and family: a BlockList also matches IPv4 against IPv4-mapped IPv6 subnets. */
const CLASSES: readonly AddressClass[] = (
  [
    ['unspecified', 4, '0.0.0.0', 8],
    ['unspecified', 6, '::', 128],
    ['loopback', 4, '127.0.0.0', 8],
    ['loopback', 6, '::1', 128],
    ['link-local', 4, '169.254.0.0', 16],
    ['link-local', 6, 'fe80::', 10],
    ['multicast', 4, '224.0.0.0', 4],
    ['multicast', 6, 'ff00::', 8],
    ['broadcast', 4, '255.255.255.255', 32],
    ['IPv4-mapped IPv6', 6, '::ffff:0:0', 96],
  ] as const
).map(([name, family, net, prefix]) => {
  const list = new BlockList();
  list.addSubnet(net, prefix, family === 4 ? 'ipv4' : 'ipv6');
  return { name, family, list };
});

/**
 * Why a normalised address can never be a unicast address on a network ("is a loopback address",
 * "has an IPv6 zone, ..."), or undefined when it can.
 */
export function specialAddress(address: string, family: 4 | 6): string | undefined {
  if (address.includes('%')) return `${address} has an IPv6 zone, which only link-local addresses carry`;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  for (const c of CLASSES) if (c.family === family && c.list.check(address, type)) return `${address} is a ${c.name} address`;
  return undefined;
}
