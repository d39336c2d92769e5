/**
 * A NAD's IPAM address range, read from its `spec.config`: the controller refuses a pod
 * address outside the range its network's IPAM hands out. Read where it can be read:
 * - whereabouts: `range` (a CIDR, or `start-end/prefix`) with optional `range_start`, `range_end`
 *   and `exclude` (CIDRs), and the same keys in each item of `ipRanges`;
 * - host-local: `ranges` (a list of range sets, each a list of {subnet, rangeStart, rangeEnd}) and
 *   the older top-level `subnet` with `rangeStart`/`rangeEnd`;
 * - static: the subnet of each `addresses[].address` (the plugin also takes per-pod addresses from
 *   the pod's runtime config, so the subnet is the network's, not one pod's address).
 * Anything else (no IPAM, dhcp, other IPAM plugins, a config kept in a file on the nodes) is
 * "not readable": the caller publishes as before. A config that names one of the three and is
 * malformed is an error naming the key, the value and the fix; the caller publishes as before too
 * and says so. The check is "lies in the range", not "is allocatable" (a subnet's network and
 * broadcast addresses and the gateway are in it).
 *
 * Pure; never throws (a NAD's config is tenant input). Sizes are bounded: the config by
 * `mainPlugin`, the ranges and excludes by the caps below. Bounds are stored as fixed-width hex
 * strings (8 digits IPv4, 32 IPv6), which compare as the numbers do and serialise as JSON.
 */
import { err, inputError, ok, type InputError, type Result } from '../result.js';
import { mainPlugin } from './nad-config.js';
import { ipToBigInt, parseIp } from './ip.js';
import { isJsonObject, jsonKind, ownField, type JsonObject } from './json.js';

export type IpamPlugin = 'whereabouts' | 'host-local' | 'static';

/** Inclusive bounds of one block of addresses of one family, as fixed-width hex. */
export interface AddressBlock {
  readonly family: 4 | 6;
  readonly start: string;
  readonly end: string;
}

export interface IpamRange extends AddressBlock {
  /** Addresses inside the bounds that the IPAM never hands out (whereabouts `exclude`). */
  readonly exclude: readonly AddressBlock[];
  /** As written, for messages: `10.2.128.0/24 from 10.2.128.10 to 10.2.128.99 except 10.2.128.50/31`. */
  readonly text: string;
}

export interface ReadableIpam {
  readonly readable: true;
  readonly plugin: IpamPlugin;
  readonly ranges: readonly IpamRange[];
}

export interface UnreadableIpam {
  readonly readable: false;
  /** Why no range is known (for a debug line; not an error). */
  readonly why: string;
}

export type NadIpam = ReadableIpam | UnreadableIpam;

/** More ranges than any real network has; a config beyond these is refused as malformed. */
export const MAX_IPAM_RANGES = 64;
export const MAX_IPAM_EXCLUDES = 256;

const IPAM_KEY = '"ipam"';

// ---- addresses as numbers ----------------------------------------------------------------------

const width = (family: 4 | 6): number => (family === 4 ? 8 : 32);
const bits = (family: 4 | 6): bigint => (family === 4 ? 32n : 128n);
const hex = (n: bigint, family: 4 | 6): string => n.toString(16).padStart(width(family), '0');

/** The address (normalised, as network-status addresses are) as the hex the bounds use. */
export function addressHex(address: string, family: 4 | 6): string {
  return hex(ipToBigInt(address, family), family);
}

function inBlock(h: string, family: 4 | 6, b: AddressBlock): boolean {
  return b.family === family && b.start <= h && h <= b.end;
}

/** Whether the IPAM hands out `address` (normalised, no zone) on this network. */
export function ipamAllows(ipam: ReadableIpam, address: string, family: 4 | 6): boolean {
  const h = addressHex(address, family);
  return ipam.ranges.some((r) => inBlock(h, family, r) && !r.exclude.some((x) => inBlock(h, family, x)));
}

/** The ranges for a message, at most four of them. */
export function describeIpam(ipam: ReadableIpam): string {
  const shown = ipam.ranges.slice(0, 4).map((r) => r.text);
  const more = ipam.ranges.length - shown.length;
  return `${ipam.plugin} ${shown.join(', ')}${more > 0 ? ` and ${more} more range${more === 1 ? '' : 's'}` : ''}`;
}

// ---- parsing -----------------------------------------------------------------------------------

interface Subnet {
  readonly family: 4 | 6;
  readonly first: bigint;
  readonly last: bigint;
}

type Parsed<T> = Result<T, InputError>;

const show = (v: unknown): string => (typeof v === 'string' ? v : (JSON.stringify(v) ?? String(typeof v)));

function subnetOf(value: unknown, key: string, fix: string): Parsed<Subnet> {
  if (typeof value !== 'string') return err(inputError(key, show(value), `is ${jsonKind(value)}, expected a CIDR`, fix));
  const ip = parseIp(value);
  if (!ip.ok) return err(inputError(key, value, ip.error, fix));
  if (ip.value.prefix === undefined) return err(inputError(key, value, 'has no prefix length', fix));
  if (ip.value.address.includes('%')) return err(inputError(key, value, 'has an IPv6 zone', fix));
  const family = ip.value.family;
  const host = bits(family) - BigInt(ip.value.prefix);
  const first = (ipToBigInt(ip.value.address, family) >> host) << host;
  return ok({ family, first, last: first + (1n << host) - 1n });
}

function addressIn(value: unknown, key: string, subnet: Subnet, subnetText: string, fix: string): Parsed<bigint> {
  if (typeof value !== 'string') return err(inputError(key, show(value), `is ${jsonKind(value)}, expected an IP address`, fix));
  const ip = parseIp(value);
  if (!ip.ok) return err(inputError(key, value, ip.error, fix));
  if (ip.value.prefix !== undefined || ip.value.address.includes('%')) return err(inputError(key, value, 'is not a plain IP address (no prefix length or zone)', fix));
  if (ip.value.family !== subnet.family) return err(inputError(key, value, `is IPv${ip.value.family}, the range ${subnetText} is IPv${subnet.family}`, fix));
  const n = ipToBigInt(ip.value.address, ip.value.family);
  if (n < subnet.first || n > subnet.last) return err(inputError(key, value, `is outside the range ${subnetText}`, fix));
  return ok(n);
}

/** Collects ranges and keeps the caps. */
class Ranges {
  readonly list: IpamRange[] = [];
  private excludes = 0;

  add(r: IpamRange, key: string): Parsed<void> {
    if (this.list.length >= MAX_IPAM_RANGES) return err(inputError(key, r.text, `is one range more than the ${MAX_IPAM_RANGES} read`, `list at most ${MAX_IPAM_RANGES} ranges, or use wider ones`));
    this.excludes += r.exclude.length;
    if (this.excludes > MAX_IPAM_EXCLUDES)
      return err(inputError(key, r.text, `brings the excluded blocks to more than ${MAX_IPAM_EXCLUDES}`, `exclude at most ${MAX_IPAM_EXCLUDES} blocks, or wider ones`));
    this.list.push(r);
    return ok(undefined);
  }
}

/**
 * One range: a subnet with optional first and last address (both inside it, first ≤ last) and
 * optional excluded CIDRs. Names the keys as the plugin spells them.
 */
function range(subnetText: string, key: string, bounds: { start?: [unknown, string]; end?: [unknown, string] }, exclude: [unknown, string] | undefined, fix: string): Parsed<IpamRange> {
  const subnet = subnetOf(subnetText, key, fix);
  if (!subnet.ok) return subnet;
  const s = subnet.value;
  let first = s.first;
  let last = s.last;
  let text = subnetText;
  if (bounds.start !== undefined && bounds.start[0] !== undefined && bounds.start[0] !== null) {
    const a = addressIn(bounds.start[0], bounds.start[1], s, subnetText, fix);
    if (!a.ok) return a;
    first = a.value;
    text += ` from ${show(bounds.start[0])}`;
  }
  if (bounds.end !== undefined && bounds.end[0] !== undefined && bounds.end[0] !== null) {
    const a = addressIn(bounds.end[0], bounds.end[1], s, subnetText, fix);
    if (!a.ok) return a;
    last = a.value;
    text += ` to ${show(bounds.end[0])}`;
  }
  if (first > last) return err(inputError(bounds.end?.[1] ?? key, show(bounds.end?.[0]), `comes before the range's first address ${show(bounds.start?.[0])}`, fix));
  const excluded: AddressBlock[] = [];
  if (exclude !== undefined && exclude[0] !== undefined && exclude[0] !== null) {
    const [list, exKey] = exclude;
    const exFix = 'write "exclude" as a list of CIDRs inside the range, e.g. ["10.1.1.0/30"]';
    if (!Array.isArray(list)) return err(inputError(exKey, show(list), `is ${jsonKind(list)}, expected a list of CIDRs`, exFix));
    if (list.length > MAX_IPAM_EXCLUDES) return err(inputError(exKey, `${list.length} items`, `lists more than ${MAX_IPAM_EXCLUDES} blocks`, exFix));
    for (const [i, item] of (list as unknown[]).entries()) {
      const itemKey = `${exKey} item ${i + 1}`;
      // whereabouts takes a bare address as that one address.
      const asCidr = typeof item === 'string' && !item.includes('/') ? `${item}/${s.family === 4 ? 32 : 128}` : item;
      const x = subnetOf(asCidr, itemKey, exFix);
      if (!x.ok) return err({ ...x.error, value: show(item) });
      if (x.value.family !== s.family) return err(inputError(itemKey, show(item), `is IPv${x.value.family}, the range ${subnetText} is IPv${s.family}`, exFix));
      excluded.push({ family: s.family, start: hex(x.value.first, s.family), end: hex(x.value.last, s.family) });
    }
    if (excluded.length > 0) text += ` except ${(list as unknown[]).slice(0, 3).map(show).join(', ')}${list.length > 3 ? ` and ${list.length - 3} more` : ''}`;
  }
  return ok({ family: s.family, start: hex(first, s.family), end: hex(last, s.family), exclude: excluded, text });
}

const WHEREABOUTS_FIX =
  'write "range" as a CIDR (e.g. "10.1.1.0/24") or "first-last/prefix" (e.g. "10.1.1.10-10.1.1.99/24"), "range_start"/"range_end" as addresses inside it, "exclude" as a list of CIDRs';

/** One whereabouts range object: the top-level ipam or an `ipRanges` item. */
function whereaboutsRange(obj: JsonObject, where: string): Parsed<IpamRange | undefined> {
  const raw = ownField(obj, 'range');
  if (raw === undefined || raw === null || raw === '') return ok(undefined);
  const key = `${where} "range"`;
  if (typeof raw !== 'string') return err(inputError(key, show(raw), `is ${jsonKind(raw)}, expected a CIDR`, WHEREABOUTS_FIX));
  let subnetText = raw;
  let start: [unknown, string] = [ownField(obj, 'range_start'), `${where} "range_start"`];
  let end: [unknown, string] = [ownField(obj, 'range_end'), `${where} "range_end"`];
  // "first-last/prefix": first and last inside the subnet of last/prefix (whereabouts' short form).
  const dash = raw.indexOf('-');
  if (dash >= 0) {
    const slash = raw.indexOf('/');
    if (slash < dash) return err(inputError(key, raw, 'has a "-" but not the form "first-last/prefix"', WHEREABOUTS_FIX));
    subnetText = raw.slice(dash + 1);
    start = [raw.slice(0, dash), key];
    end = [raw.slice(dash + 1, slash), key];
  }
  return range(subnetText, key, { start, end }, [ownField(obj, 'exclude'), `${where} "exclude"`], WHEREABOUTS_FIX);
}

function whereabouts(ipam: JsonObject, where: string, out: Ranges): Parsed<void> {
  const top = whereaboutsRange(ipam, where);
  if (!top.ok) return top;
  if (top.value !== undefined) {
    const added = out.add(top.value, `${where} "range"`);
    if (!added.ok) return added;
  }
  const list = ownField(ipam, 'ipRanges');
  const listKey = `${where} "ipRanges"`;
  if (list !== undefined && list !== null) {
    const fix = 'write "ipRanges": [{"range": "10.1.1.0/24"}, {"range": "fd00:1::/64"}]';
    if (!Array.isArray(list)) return err(inputError(listKey, show(list), `is ${jsonKind(list)}, expected a list of range objects`, fix));
    if (list.length > MAX_IPAM_RANGES) return err(inputError(listKey, `${list.length} items`, `lists more than ${MAX_IPAM_RANGES} ranges`, fix));
    for (const [i, item] of (list as unknown[]).entries()) {
      const itemKey = `${listKey} item ${i + 1}`;
      if (!isJsonObject(item)) return err(inputError(itemKey, show(item), `is ${jsonKind(item)}, expected a range object`, fix));
      const r = whereaboutsRange(item, itemKey);
      if (!r.ok) return r;
      if (r.value === undefined) return err(inputError(`${itemKey} "range"`, '(missing)', 'is missing', fix));
      const added = out.add(r.value, itemKey);
      if (!added.ok) return added;
    }
  }
  if (out.list.length === 0) return err(inputError(`${where} "range"`, '(missing)', 'is missing, and there is no "ipRanges" either', WHEREABOUTS_FIX));
  return ok(undefined);
}

const HOST_LOCAL_FIX = 'write "ranges": [[{"subnet": "10.1.1.0/24", "rangeStart": "10.1.1.10", "rangeEnd": "10.1.1.99"}]] ("rangeStart"/"rangeEnd" optional, inside the subnet)';

function hostLocalRange(obj: JsonObject, where: string): Parsed<IpamRange> {
  const subnet = ownField(obj, 'subnet');
  const key = `${where} "subnet"`;
  if (typeof subnet !== 'string')
    return err(inputError(key, subnet === undefined ? '(missing)' : show(subnet), subnet === undefined ? 'is missing' : `is ${jsonKind(subnet)}, expected a CIDR`, HOST_LOCAL_FIX));
  return range(subnet, key, { start: [ownField(obj, 'rangeStart'), `${where} "rangeStart"`], end: [ownField(obj, 'rangeEnd'), `${where} "rangeEnd"`] }, undefined, HOST_LOCAL_FIX);
}

function hostLocal(ipam: JsonObject, where: string, out: Ranges): Parsed<void> {
  const sets = ownField(ipam, 'ranges');
  const setsKey = `${where} "ranges"`;
  if (sets !== undefined && sets !== null) {
    if (!Array.isArray(sets)) return err(inputError(setsKey, show(sets), `is ${jsonKind(sets)}, expected a list of range sets`, HOST_LOCAL_FIX));
    if (sets.length > MAX_IPAM_RANGES) return err(inputError(setsKey, `${sets.length} items`, `lists more than ${MAX_IPAM_RANGES} range sets`, HOST_LOCAL_FIX));
    for (const [i, set] of (sets as unknown[]).entries()) {
      const setKey = `${setsKey} item ${i + 1}`;
      if (!Array.isArray(set)) return err(inputError(setKey, show(set), `is ${jsonKind(set)}, expected a list of ranges`, HOST_LOCAL_FIX));
      if (set.length > MAX_IPAM_RANGES) return err(inputError(setKey, `${set.length} items`, `lists more than ${MAX_IPAM_RANGES} ranges`, HOST_LOCAL_FIX));
      for (const [j, item] of (set as unknown[]).entries()) {
        const itemKey = `${setKey} item ${j + 1}`;
        if (!isJsonObject(item)) return err(inputError(itemKey, show(item), `is ${jsonKind(item)}, expected a range object`, HOST_LOCAL_FIX));
        const r = hostLocalRange(item, itemKey);
        if (!r.ok) return r;
        const added = out.add(r.value, itemKey);
        if (!added.ok) return added;
      }
    }
  }
  // The older form: one subnet at the top of the ipam object.
  if (ownField(ipam, 'subnet') !== undefined) {
    const r = hostLocalRange(ipam, where);
    if (!r.ok) return r;
    const added = out.add(r.value, `${where} "subnet"`);
    if (!added.ok) return added;
  }
  if (out.list.length === 0) return err(inputError(setsKey, '(missing)', 'is missing, and there is no "subnet" either', HOST_LOCAL_FIX));
  return ok(undefined);
}

const STATIC_FIX = 'write "addresses": [{"address": "10.1.1.5/24"}] (each address with its prefix length)';

function staticIpam(ipam: JsonObject, where: string, out: Ranges): Parsed<'none' | 'ranges'> {
  const list = ownField(ipam, 'addresses');
  const key = `${where} "addresses"`;
  if (list === undefined || list === null) return ok('none');
  if (!Array.isArray(list)) return err(inputError(key, show(list), `is ${jsonKind(list)}, expected a list of address objects`, STATIC_FIX));
  if (list.length > MAX_IPAM_RANGES) return err(inputError(key, `${list.length} items`, `lists more than ${MAX_IPAM_RANGES} addresses`, STATIC_FIX));
  for (const [i, item] of (list as unknown[]).entries()) {
    const itemKey = `${key} item ${i + 1}`;
    if (!isJsonObject(item)) return err(inputError(itemKey, show(item), `is ${jsonKind(item)}, expected {"address": "10.1.1.5/24"}`, STATIC_FIX));
    const address = ownField(item, 'address');
    const addrKey = `${itemKey} "address"`;
    if (typeof address !== 'string')
      return err(
        inputError(
          addrKey,
          address === undefined ? '(missing)' : show(address),
          address === undefined ? 'is missing' : `is ${jsonKind(address)}, expected an address with its prefix length`,
          STATIC_FIX,
        ),
      );
    const r = range(address, addrKey, {}, undefined, STATIC_FIX);
    if (!r.ok) return r;
    const added = out.add(r.value, addrKey);
    if (!added.ok) return added;
  }
  return ok(out.list.length === 0 ? 'none' : 'ranges');
}

/**
 * The IPAM range of a NAD's `spec.config`: readable ranges, "not readable" with why, or an error
 * for a whereabouts/host-local/static config that is malformed. The caller names the NAD.
 */
export function parseNadIpam(config: unknown): Result<NadIpam, InputError> {
  const main = mainPlugin(config);
  if (!main.ok) return main;
  if (main.value === undefined) return ok({ readable: false, why: 'spec.config is empty (the configuration is a file on each node)' });
  const { plugin, where } = main.value;
  const ipam = ownField(plugin, 'ipam');
  const ipamWhere = `${where} ${IPAM_KEY}`;
  if (ipam === undefined || ipam === null) return ok({ readable: false, why: `${where} has no "ipam"` });
  if (!isJsonObject(ipam))
    return err(inputError(ipamWhere, show(ipam), `is ${jsonKind(ipam)}, expected an object`, 'write "ipam": {"type": "whereabouts", "range": "10.1.1.0/24"} (or host-local, static, …)'));
  const type = ownField(ipam, 'type');
  if (typeof type !== 'string') return ok({ readable: false, why: `${ipamWhere} has no "type"` });
  const out = new Ranges();
  switch (type) {
    case 'whereabouts': {
      const r = whereabouts(ipam, ipamWhere, out);
      if (!r.ok) return r;
      return ok({ readable: true, plugin: 'whereabouts', ranges: out.list });
    }
    case 'host-local': {
      const r = hostLocal(ipam, ipamWhere, out);
      if (!r.ok) return r;
      return ok({ readable: true, plugin: 'host-local', ranges: out.list });
    }
    case 'static': {
      const r = staticIpam(ipam, ipamWhere, out);
      if (!r.ok) return r;
      // Without addresses in the config, each pod's come from its own runtime config: no range.
      if (r.value === 'none') return ok({ readable: false, why: `${ipamWhere} is static without "addresses" (each pod's come from its runtime config)` });
      return ok({ readable: true, plugin: 'static', ranges: out.list });
    }
    default:
      return ok({ readable: false, why: `IPAM "${type.slice(0, 64)}" has no range the controller reads (it reads whereabouts, host-local and static)` });
  }
}
