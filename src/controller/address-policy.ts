/**
 * Which of a pod's claimed secondary addresses may be published. Pure.
 *
 * `network-status` is written by Multus, but a pod's owner can write it too (issue 19): an address
 * read there is tenant input. Published, it becomes a DNAT target in every client sidecar and, with
 * NodePort Cluster, a target the node masquerades to with its own identity. So the controller drops,
 * before planning, what is never a pod's address on a secondary network:
 * - loopback, link-local, unspecified, multicast and broadcast addresses, IPv4-mapped IPv6 and
 *   zoned IPv6 (the apiserver also answers 422 for several of these, which froze the whole
 *   Service's slices while one was in the plan);
 * - the nodes' own addresses (a pod claiming one would send its clients to a node);
 * - addresses outside the IPAM range of the network's NAD, where that range can be read
 *   (src/annotations/nad-ipam.ts; elsewhere nothing is known and nothing is refused for it).
 * Each refusal names the address and the class (or the NAD and its range), for the Event.
 */
import { BlockList } from 'node:net';
import { describeIpam, ipamAllows, type ReadableIpam } from '../annotations/nad-ipam.js';

export interface AddressPolicy {
  /** Every address of every Node's status.addresses, normalised as network-status is. */
  readonly nodeAddresses: ReadonlySet<string>;
  /** The readable IPAM ranges of the networks being planned, by network key (`<namespace>/<nad>`). */
  readonly ipam?: ReadonlyMap<string, ReadableIpam>;
}

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
 * Why `address` (normalised, family 4 or 6) must not be published on `network` (its key), or
 * undefined when it may be.
 */
export function refusedAddress(address: string, family: 4 | 6, policy: AddressPolicy, network?: string): string | undefined {
  if (address.includes('%')) return `${address} has an IPv6 zone, which only link-local addresses carry`;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  for (const c of CLASSES) if (c.family === family && c.list.check(address, type)) return `${address} is a ${c.name} address`;
  if (policy.nodeAddresses.has(address)) return `${address} is a Node's own address`;
  const ipam = network === undefined ? undefined : policy.ipam?.get(network);
  if (ipam !== undefined && !ipamAllows(ipam, address, family)) {
    return `${address} is outside the IPAM range of NetworkAttachmentDefinition ${network ?? ''} (${describeIpam(ipam)})`;
  }
  return undefined;
}

export const OPEN_POLICY: AddressPolicy = { nodeAddresses: new Set() };
