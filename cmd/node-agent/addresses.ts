/**
 * The node's own address on a secondary network: the address of the host-side interface the agent
 * keeps there (host-interface.ts), which NodePort clients connect to and which is the source of
 * the node's connections to cluster IPs on that network.
 *
 * Two annotations (src/keys.ts), the Node's winning over the NAD's:
 * - on the Node, `multus-proxy.k8s.cni.cncf.io/node-addresses`:
 *   `demo/net-a=192.168.101.250/24,fd00:101::fa/64; demo/net-b=10.20.0.5/16` (a fixed per-node
 *   address, one per family per network);
 * - on the NAD, `multus-proxy.k8s.cni.cncf.io/node-address-range`:
 *   `192.168.101.200-192.168.101.231/24, fd00:101::200-fd00:101::21f/64` (one range per family).
 *   A node takes the address at index `(last 32 bits of its InternalIP) mod (range size)`: no
 *   coordination and no Node list needed (the agent reads only its own Node). Nodes whose
 *   InternalIPs differ only above those bits collide, so a range as large as the nodes' subnet
 *   (or the Node annotation) is the safe choice; docs/node-agent.md has the worked example.
 *
 * Pure; bad input gives an InputError naming the key, the value and the fix.
 */
import { NODE_ADDRESS_RANGE_ANNOTATION, NODE_ADDRESSES_ANNOTATION } from '../../src/keys.js';
import { bigIntToIp, ipToBigInt, parseIp } from '../../src/annotations/ip.js';
import { networkKey, type NetworkRef } from '../../src/annotations/service-network.js';
import { parseNetworkEntries } from './node-entries.js';
import { err, inputError, ok, type InputError, type Result } from '../../src/result.js';

/** 4 or 6 (the dataplane core's IpFamily). */
export type IpFamily = 4 | 6;

/** An address with its on-link prefix length, as it goes on the interface. */
export interface HostAddress {
  readonly family: IpFamily;
  /** Normalised. */
  readonly address: string;
  readonly prefix: number;
}

/** A NAD's range for one family. */
export interface AddressRange {
  readonly family: IpFamily;
  readonly first: bigint;
  readonly last: bigint;
  readonly prefix: number;
}

/** At most this many addresses per range: a range names a few node addresses, not a subnet to scan. */
export const MAX_RANGE_SIZE = 65536;

const NODE_EXAMPLE = 'e.g. "demo/net-a=192.168.101.250/24,fd00:101::fa/64; demo/net-b=10.20.0.5/16"';
const RANGE_EXAMPLE = 'e.g. "192.168.101.200-192.168.101.231/24" or "192.168.101.200-192.168.101.231/24, fd00:101::200-fd00:101::21f/64"';

/** Whether `address/prefix` is usable as a host address (not the IPv4 network or broadcast address of a /0-/30). */
function hostAddressProblem(value: bigint, family: IpFamily, prefix: number): string | undefined {
  if (family !== 4 || prefix >= 31) return undefined;
  const hostBits = BigInt(32 - prefix);
  const host = value & ((1n << hostBits) - 1n);
  if (host === 0n) return 'is the network address of its subnet';
  if (host === (1n << hostBits) - 1n) return 'is the broadcast address of its subnet';
  return undefined;
}

function parseHostAddress(text: string, key: string, fullValue: string, fix: string): Result<HostAddress, InputError> {
  const p = parseIp(text);
  if (!p.ok) return err(inputError(key, fullValue, `the address ${JSON.stringify(text)} ${p.error}`, fix));
  if (p.value.prefix === undefined) return err(inputError(key, fullValue, `the address ${JSON.stringify(text)} has no prefix length`, `write the on-link prefix after it, ${fix}`));
  if (p.value.address.includes('%')) return err(inputError(key, fullValue, `the address ${JSON.stringify(text)} has a zone`, fix));
  const why = hostAddressProblem(ipToBigInt(p.value.address, p.value.family), p.value.family, p.value.prefix);
  if (why !== undefined) return err(inputError(key, fullValue, `the address ${JSON.stringify(text)} ${why}`, `choose a host address, ${fix}`));
  return ok({ family: p.value.family, address: p.value.address, prefix: p.value.prefix });
}

/**
 * The Node annotation: network key (`ns/nad`) -> its addresses (one per family). A repeated
 * network or a second address of one family is an error (which one was meant is unknowable).
 */
export function parseNodeAddresses(value: string): Result<Map<string, HostAddress[]>, InputError> {
  const key = `annotation ${NODE_ADDRESSES_ANNOTATION}`;
  const fix = `write "<namespace>/<nad>=<ip>/<prefix>[,<ip>/<prefix>]" entries separated by ";", ${NODE_EXAMPLE}`;
  const entries = parseNetworkEntries(value, key, fix, `list each network once, with up to one address per family: ${NODE_EXAMPLE}`);
  if (!entries.ok) return entries;
  const out = new Map<string, HostAddress[]>();
  for (const { network: net, text } of entries.value) {
    const addrs: HostAddress[] = [];
    for (const a of text.split(',').map((s) => s.trim())) {
      const parsed = parseHostAddress(a, key, value, fix);
      if (!parsed.ok) return parsed;
      if (addrs.some((x) => x.family === parsed.value.family))
        return err(inputError(key, value, `network ${net} has two IPv${parsed.value.family} addresses`, `give one address per family, ${NODE_EXAMPLE}`));
      addrs.push(parsed.value);
    }
    out.set(net, addrs);
  }
  return ok(out);
}

/** The NAD annotation: one range per family. */
export function parseAddressRanges(value: string): Result<AddressRange[], InputError> {
  const key = `annotation ${NODE_ADDRESS_RANGE_ANNOTATION}`;
  const fix = `write "<first>-<last>/<prefix>" per family, comma separated, ${RANGE_EXAMPLE}`;
  if (value.length > 4096) return err(inputError(key, value, `is ${value.length} characters long`, fix));
  const out: AddressRange[] = [];
  for (const [i, raw] of value.split(',').entries()) {
    const item = raw.trim();
    const m = /^([^-/\s]+)-([^-/\s]+)\/([0-9]{1,3})$/.exec(item);
    if (m === null) return err(inputError(key, value, `item ${i + 1} (${JSON.stringify(item)}) is not "<first>-<last>/<prefix>"`, fix));
    const [, firstText = '', lastText = '', prefixText = ''] = m;
    const first = parseHostAddress(`${firstText}/${prefixText}`, key, value, fix);
    if (!first.ok) return first;
    const last = parseHostAddress(`${lastText}/${prefixText}`, key, value, fix);
    if (!last.ok) return last;
    const family = first.value.family;
    if (last.value.family !== family) return err(inputError(key, value, `item ${i + 1} mixes IPv4 and IPv6`, fix));
    const a = ipToBigInt(first.value.address, family);
    const b = ipToBigInt(last.value.address, family);
    const bits = BigInt((family === 4 ? 32 : 128) - first.value.prefix);
    if (a > b) return err(inputError(key, value, `item ${i + 1} starts after it ends`, `write the lower address first, ${RANGE_EXAMPLE}`));
    if (a >> bits !== b >> bits)
      return err(inputError(key, value, `item ${i + 1}: ${firstText} and ${lastText} are not in one /${prefixText} subnet`, `keep the range inside the network's subnet, ${RANGE_EXAMPLE}`));
    if (b - a + 1n > BigInt(MAX_RANGE_SIZE))
      return err(inputError(key, value, `item ${i + 1} holds ${b - a + 1n} addresses, more than ${MAX_RANGE_SIZE}`, `a range names a few node addresses; ${RANGE_EXAMPLE}`));
    if (out.some((r) => r.family === family)) return err(inputError(key, value, `has two IPv${family} ranges`, `give one range per family, ${RANGE_EXAMPLE}`));
    out.push({ family, first: a, last: b, prefix: first.value.prefix });
  }
  return ok(out);
}

/**
 * This node's address in `range`: index `(last 32 bits of nodeIP) mod size`. `nodeIPs` are the
 * Node's InternalIPs; one of the range's family is preferred, else the first of any.
 */
export function addressFromRange(range: AddressRange, nodeIPs: readonly string[]): HostAddress | undefined {
  const parsed = nodeIPs.map((t) => parseIp(t)).flatMap((p) => (p.ok && p.value.prefix === undefined ? [p.value] : []));
  const base = parsed.find((p) => p.family === range.family) ?? parsed[0];
  if (base === undefined) return undefined;
  const low = ipToBigInt(base.address.split('%')[0] ?? '', base.family) & 0xffffffffn;
  const size = range.last - range.first + 1n;
  // Both ends are host addresses of one subnet (parseAddressRanges), so everything between is too.
  const n = range.first + (low % size);
  return { family: range.family, address: bigIntToIp(n, range.family), prefix: range.prefix };
}

export interface AddressInput {
  readonly network: NetworkRef;
  /** The NAD's range annotation, if any. */
  readonly rangeAnnotation?: string;
  /** The Node's addresses annotation, if any. */
  readonly nodeAnnotation?: string;
  readonly nodeInternalIPs: readonly string[];
}

/**
 * The node's addresses on one network: the Node annotation's entry if it has one, else the NAD's
 * range; none (and no error) when neither says anything. Errors name the annotation's key and
 * value; the caller prefixes the object (Node or NAD).
 */
export function nodeAddressesFor(input: AddressInput): Result<{ addresses: HostAddress[]; from: 'node' | 'range' | 'none' }, { object: 'node' | 'nad'; error: InputError }> {
  if (input.nodeAnnotation !== undefined) {
    const parsed = parseNodeAddresses(input.nodeAnnotation);
    if (!parsed.ok) return err({ object: 'node', error: parsed.error });
    const mine = parsed.value.get(networkKey(input.network));
    if (mine !== undefined) return ok({ addresses: mine, from: 'node' });
  }
  if (input.rangeAnnotation !== undefined) {
    const ranges = parseAddressRanges(input.rangeAnnotation);
    if (!ranges.ok) return err({ object: 'nad', error: ranges.error });
    const addresses = ranges.value.map((r) => addressFromRange(r, input.nodeInternalIPs)).filter((a): a is HostAddress => a !== undefined);
    return ok({ addresses, from: addresses.length > 0 ? 'range' : 'none' });
  }
  return ok({ addresses: [], from: 'none' });
}
