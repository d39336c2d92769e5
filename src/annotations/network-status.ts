/**
 * `k8s.v1.cni.cncf.io/network-status` (written by Multus): what was actually attached to a pod.
 *
 * A JSON list of `{ "name", "interface"?, "ips"?, "mac"?, "default"?, "dns"?, "device-info"?, ... }`.
 * Secondary networks are named `<namespace>/<nad>`; the cluster's primary network is written by
 * Multus under its bare CNI name (e.g. "kindnet") with `"default": true`, so a name without '/' is
 * kept as written with `namespace`/`nad` undefined. Addresses are split by family, a `/prefix` is
 * dropped, IPv6 is normalised (see ip.ts) so addresses compare as strings. Fields we do not use
 * (`dns`, `device-info`, `gateway`, ...) are ignored whatever their content. `interface` must be a
 * valid Linux interface name: it is tenant input that reaches `ip` and netfilter in the sidecar.
 *
 * An empty value means nothing is attached yet (an empty list). Any bad entry makes the whole value
 * an error naming that entry: half-read status could publish a wrong set of endpoints. So does a
 * value over the budget below (its bytes, entries or addresses): a pod's owner writes it, and every
 * reader holds and parses it.
 */
import { NETWORK_STATUS_ANNOTATION } from '../keys.js';
import { err, inputError, ok, showValue, type Result } from '../result.js';
import { parseIp } from './ip.js';
import { isJsonObject, jsonKind, notAStringError, optionalBoolean, optionalString, optionalStringList, ownField, parseJson, type JsonObject } from './json.js';
import { checkDns1123Label, checkDns1123Subdomain, checkInterfaceName, IFNAME_RULE } from './names.js';
import type { NetworkRef } from './service-network.js';

export interface NetworkStatusEntry {
  /** As written: "ns/nad" for secondary networks. */
  name: string;
  /** Split from `name` when it has the `ns/nad` form. */
  namespace?: string;
  nad?: string;
  interface?: string;
  /** Addresses without prefix, in the order written, duplicates dropped. */
  ipv4: string[];
  /** Normalised (RFC 5952) addresses without prefix. */
  ipv6: string[];
  mac?: string;
  /** `true` for the pod's primary (cluster default) network. */
  default: boolean;
}

const KEY = NETWORK_STATUS_ANNOTATION;
const EXAMPLE = 'e.g. [{"name":"ns/net-a","interface":"net1","ips":["10.1.1.5"],"mac":"02:00:5e:10:00:01"}]';
const FIX_ENTRY = `each entry must be an object with a string "name", optional string "interface" and "mac", a list of IP strings "ips" and a boolean "default" (Multus writes it so; ${EXAMPLE})`;

type EntryResult = Result<NetworkStatusEntry, string>;

/**
 * The budget of one network-status. Multus writes an entry per attachment, with a few addresses
 * and some device info: a few KiB. These are far above that and keep one pod's cost small.
 */
export const MAX_NETWORK_STATUS_BYTES = 64 * 1024;
export const MAX_NETWORK_STATUS_ENTRIES = 64;
export const MAX_NETWORK_STATUS_ADDRESSES = 256;
const BUDGET_FIX = `a pod lists at most ${MAX_NETWORK_STATUS_ENTRIES} attachments and ${MAX_NETWORK_STATUS_ADDRESSES} addresses in at most ${MAX_NETWORK_STATUS_BYTES} bytes; check what wrote it (Multus writes it)`;

function splitName(name: string): Result<{ namespace?: string; nad?: string }, string> {
  const slash = name.indexOf('/');
  if (slash < 0) return ok({});
  if (name.indexOf('/', slash + 1) >= 0) return err(`the name ${showValue(name)} has more than one '/'`);
  const namespace = name.slice(0, slash);
  const nad = name.slice(slash + 1);
  const nsWhy = checkDns1123Label(namespace);
  if (nsWhy !== undefined) return err(`the namespace ${showValue(namespace)} in the name ${nsWhy}`);
  const nadWhy = checkDns1123Subdomain(nad);
  if (nadWhy !== undefined) return err(`the network name ${showValue(nad)} in the name ${nadWhy}`);
  return ok({ namespace, nad });
}

function parseEntry(entry: JsonObject): EntryResult {
  const name = optionalString(entry, 'name');
  if (!name.ok) return err(name.error);
  if (name.value === undefined || name.value.length === 0) return err('the "name" is missing or empty');
  const split = splitName(name.value);
  if (!split.ok) return err(split.error);
  const ifname = optionalString(entry, 'interface');
  if (!ifname.ok) return err(ifname.error);
  // The pod's owner can write this annotation, and the name reaches `ip` and netfilter as root in
  // the sidecar: the kernel's own rule here, so no whitespace, newline or '/' gets past.
  if (ifname.value !== undefined) {
    const why = checkInterfaceName(ifname.value);
    if (why !== undefined) return err(`the "interface" ${showValue(ifname.value)} ${why}; an interface name is ${IFNAME_RULE}`);
  }
  const mac = optionalString(entry, 'mac');
  if (!mac.ok) return err(mac.error);
  const isDefault = optionalBoolean(entry, 'default');
  if (!isDefault.ok) return err(isDefault.error);
  const ips = optionalStringList(entry, 'ips');
  if (!ips.ok) return err(ips.error);

  const out: NetworkStatusEntry = { name: name.value, ipv4: [], ipv6: [], default: isDefault.value ?? false };
  if (split.value.namespace !== undefined) out.namespace = split.value.namespace;
  if (split.value.nad !== undefined) out.nad = split.value.nad;
  if (ifname.value !== undefined) out.interface = ifname.value;
  if (mac.value !== undefined) out.mac = mac.value;
  // A Set, not includes(): linear in the addresses, whatever their number.
  const seen = new Set<string>();
  for (const text of ips.value ?? []) {
    const ip = parseIp(text);
    if (!ip.ok) return err(`the IP ${showValue(text)} ${ip.error}`);
    if (seen.has(ip.value.address)) continue;
    seen.add(ip.value.address);
    (ip.value.family === 4 ? out.ipv4 : out.ipv6).push(ip.value.address);
  }
  return ok(out);
}

/** Starts what a cache keeps in place of an over-budget network-status: the text's length only. */
const OVERSIZE_MARK = '\u0000multus-proxy:oversize:';

/**
 * The network-status text as an informer should cache it: itself, or for a text over the budget a
 * short stand-in holding its length, which parseNetworkStatus refuses with the same message. So a
 * pod's cost in a cache is bounded whatever its owner writes.
 */
export function networkStatusForCache(value: string): string {
  return typeof value === 'string' && value.length > MAX_NETWORK_STATUS_BYTES ? `${OVERSIZE_MARK}${value.length}` : value;
}

function oversizeError(value: string, length: number): Result<NetworkStatusEntry[]> {
  return err(inputError(KEY, value, `is ${length} characters long, more than the ${MAX_NETWORK_STATUS_BYTES} multus-proxy reads`, BUDGET_FIX));
}

export function parseNetworkStatus(value: string): Result<NetworkStatusEntry[]> {
  if (typeof value !== 'string') {
    return err(notAStringError(KEY, value, `it must hold a JSON list, ${EXAMPLE}`));
  }
  if (value.trim().length === 0) return ok([]);
  if (value.length > MAX_NETWORK_STATUS_BYTES) return oversizeError(value, value.length);
  if (value.startsWith(OVERSIZE_MARK)) return oversizeError(`<${value.slice(OVERSIZE_MARK.length)} characters>`, Number(value.slice(OVERSIZE_MARK.length)));
  const parsed = parseJson(value);
  if (!parsed.ok) return err(inputError(KEY, value, parsed.error, `it must hold a JSON list, ${EXAMPLE}; check what wrote it`));
  if (!Array.isArray(parsed.value)) {
    return err(inputError(KEY, value, `is ${jsonKind(parsed.value)}, expected a JSON list`, `wrap the entries in [ ], ${EXAMPLE}`));
  }
  if (parsed.value.length > MAX_NETWORK_STATUS_ENTRIES) return err(inputError(KEY, value, `lists ${parsed.value.length} entries, more than ${MAX_NETWORK_STATUS_ENTRIES}`, BUDGET_FIX));
  const out: NetworkStatusEntry[] = [];
  let addresses = 0;
  for (const [i, entry] of (parsed.value as unknown[]).entries()) {
    const entryName = isJsonObject(entry) ? ownField(entry, 'name') : undefined;
    const what = `entry ${i + 1}${typeof entryName === 'string' ? ` (name ${showValue(entryName)})` : ''}`;
    if (!isJsonObject(entry)) return err(inputError(KEY, value, `${what} is ${jsonKind(entry)}, expected an object`, FIX_ENTRY));
    const e = parseEntry(entry);
    if (!e.ok) return err(inputError(KEY, value, `${what}: ${e.error}`, FIX_ENTRY));
    addresses += e.value.ipv4.length + e.value.ipv6.length;
    if (addresses > MAX_NETWORK_STATUS_ADDRESSES) return err(inputError(KEY, value, `lists more than ${MAX_NETWORK_STATUS_ADDRESSES} addresses (at ${what})`, BUDGET_FIX));
    out.push(e.value);
  }
  return ok(out);
}

/**
 * The status of network `ref` (matched on the `ns/nad` form), or undefined when it is not attached
 * (yet). When one NAD is attached twice, the first entry wins, as Multus lists them in the order
 * of the pod's networks annotation.
 */
export function findNetworkStatus(entries: readonly NetworkStatusEntry[], ref: NetworkRef): NetworkStatusEntry | undefined {
  return entries.find((e) => e.namespace === ref.namespace && e.nad === ref.name);
}
