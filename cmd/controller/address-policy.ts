/**
 * Which of a pod's claimed secondary addresses may be published. Pure.
 *
 * `network-status` is written by Multus, but a pod's owner can write it too: an address
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
import { specialAddress } from '../../src/annotations/address-class.js';
import { describeIpam, ipamAllows, type ReadableIpam } from '../../src/annotations/nad-ipam.js';

export interface AddressPolicy {
  /** Every address of every Node's status.addresses, normalised as network-status is. */
  readonly nodeAddresses: ReadonlySet<string>;
  /** The readable IPAM ranges of the networks being planned, by network key (`<namespace>/<nad>`). */
  readonly ipam?: ReadonlyMap<string, ReadableIpam>;
}

/**
 * Why `address` (normalised, family 4 or 6) must not be published on `network` (its key), or
 * undefined when it may be.
 */
export function refusedAddress(address: string, family: 4 | 6, policy: AddressPolicy, network?: string): string | undefined {
  const special = specialAddress(address, family);
  if (special !== undefined) return special;
  if (policy.nodeAddresses.has(address)) return `${address} is a Node's own address`;
  const ipam = network === undefined ? undefined : policy.ipam?.get(network);
  if (ipam !== undefined && !ipamAllows(ipam, address, family)) {
    return `${address} is outside the IPAM range of NetworkAttachmentDefinition ${network ?? ''} (${describeIpam(ipam)})`;
  }
  return undefined;
}

export const OPEN_POLICY: AddressPolicy = { nodeAddresses: new Set() };
