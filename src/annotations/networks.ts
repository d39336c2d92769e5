/**
 * `k8s.v1.cni.cncf.io/networks` (Multus): the networks a pod asks to be attached to.
 *
 * Two forms, as Multus reads them:
 * - short: a comma list of `[namespace/]name[@interface]`;
 * - JSON: a list of objects `{ "name", "namespace"?, "interface"?, "ips"?, "mac"?, ... }`; fields we
 *   do not use (`default-route`, `cni-args`, ...) are ignored.
 * A value whose first non-blank character is '[' is JSON, anything else is the short form. Bare
 * names resolve to the pod's namespace. An empty value means "no networks" (an empty list).
 * The same network may be listed twice (two interfaces on one NAD), so nothing is deduplicated.
 */
import { NETWORKS_ANNOTATION } from '../keys.js';
import { err, inputError, ok, showValue, type Result } from '../result.js';
import { checkDns1123Label, checkInterfaceName, DNS1123_LABEL_RULE, IFNAME_RULE } from './names.js';
import { isJsonObject, jsonKind, notAStringError, optionalString, ownField, optionalStringList, parseJson, type JsonObject } from './json.js';
import { isMac, parseIp } from './ip.js';
import { parseNetworkItem, splitCommaList } from './service-network.js';

export interface NetworkSelection {
  namespace: string;
  name: string;
  interface?: string;
  ips?: string[];
  mac?: string;
}

const KEY = NETWORKS_ANNOTATION;
const SHORT_EXAMPLE = 'e.g. "net-a,other-ns/net-b@net2"';
const JSON_EXAMPLE = 'e.g. [{"name":"net-a","namespace":"ns","interface":"net1"}]';

type ItemResult<T> = Result<T, { reason: string; fix: string }>;

function checkInterface(ifname: string, what: string): ItemResult<string> {
  const why = checkInterfaceName(ifname);
  if (why === undefined) return ok(ifname);
  return err({ reason: `${what}: the interface name ${showValue(ifname)} ${why}`, fix: `a Linux interface name is ${IFNAME_RULE}` });
}

function parseShortItem(item: string, podNamespace: string, what: string): ItemResult<NetworkSelection> {
  const at = item.indexOf('@');
  if (at >= 0 && item.indexOf('@', at + 1) >= 0) {
    return err({ reason: `${what} has more than one '@'`, fix: `write "[namespace/]name[@interface]", ${SHORT_EXAMPLE}` });
  }
  const ref = parseNetworkItem(at >= 0 ? item.slice(0, at) : item, podNamespace, what);
  if (!ref.ok) return ref;
  if (at < 0) return ok({ namespace: ref.value.namespace, name: ref.value.name });
  const ifname = checkInterface(item.slice(at + 1), what);
  if (!ifname.ok) return ifname;
  return ok({ namespace: ref.value.namespace, name: ref.value.name, interface: ifname.value });
}

function parseShortForm(value: string, podNamespace: string): Result<NetworkSelection[]> {
  const items = splitCommaList(value);
  const out: NetworkSelection[] = [];
  for (const [i, item] of items.entries()) {
    const what = `item ${i + 1} (${showValue(item)})`;
    if (item.length === 0) {
      return err(inputError(KEY, value, `item ${i + 1} is empty (a stray comma?)`, `remove the extra comma, ${SHORT_EXAMPLE}`));
    }
    const parsed = parseShortItem(item, podNamespace, what);
    if (!parsed.ok) return err(inputError(KEY, value, parsed.error.reason, parsed.error.fix));
    out.push(parsed.value);
  }
  return ok(out);
}

function parseJsonEntry(entry: JsonObject, podNamespace: string, what: string): ItemResult<NetworkSelection> {
  const fieldFix = `write each entry as an object with string fields, ${JSON_EXAMPLE}`;
  const name = optionalString(entry, 'name');
  if (!name.ok) return err({ reason: `${what}: ${name.error}`, fix: fieldFix });
  if (name.value === undefined || name.value.length === 0) {
    return err({ reason: `${what} has no "name"`, fix: `give every entry the NetworkAttachmentDefinition's name, ${JSON_EXAMPLE}` });
  }
  const namespace = optionalString(entry, 'namespace');
  if (!namespace.ok) return err({ reason: `${what}: ${namespace.error}`, fix: fieldFix });
  if (name.value.includes('/')) {
    return err({ reason: `${what}: the name ${showValue(name.value)} contains '/'`, fix: `put the namespace in the "namespace" field, ${JSON_EXAMPLE}` });
  }
  if (namespace.value !== undefined) {
    // An explicit empty namespace is as wrong as a bad one; do not silently fall back to the pod's.
    const why = checkDns1123Label(namespace.value);
    if (why !== undefined) return err({ reason: `${what}: the namespace ${showValue(namespace.value)} ${why}`, fix: `a namespace is ${DNS1123_LABEL_RULE}` });
  }
  const ref = parseNetworkItem(name.value, namespace.value ?? podNamespace, what);
  if (!ref.ok) return ref;
  const sel: NetworkSelection = { namespace: ref.value.namespace, name: ref.value.name };

  const ifname = optionalString(entry, 'interface');
  if (!ifname.ok) return err({ reason: `${what}: ${ifname.error}`, fix: fieldFix });
  if (ifname.value !== undefined) {
    const checked = checkInterface(ifname.value, what);
    if (!checked.ok) return checked;
    sel.interface = checked.value;
  }

  const ips = optionalStringList(entry, 'ips');
  if (!ips.ok) return err({ reason: `${what}: ${ips.error}`, fix: `write "ips" as a list of strings, e.g. ["10.1.1.5/24","fd00::5/64"]` });
  if (ips.value !== undefined) {
    for (const ip of ips.value) {
      const parsed = parseIp(ip);
      if (!parsed.ok) {
        return err({ reason: `${what}: the IP ${showValue(ip)} ${parsed.error}`, fix: 'write IPv4 or IPv6 addresses, optionally with a /prefix, e.g. "10.1.1.5/24"' });
      }
    }
    // Kept as written: Multus passes them on to the CNI plugin, which wants its own spelling.
    sel.ips = ips.value;
  }

  const mac = optionalString(entry, 'mac');
  if (!mac.ok) return err({ reason: `${what}: ${mac.error}`, fix: fieldFix });
  if (mac.value !== undefined) {
    if (!isMac(mac.value)) return err({ reason: `${what}: the MAC address ${showValue(mac.value)} is not valid`, fix: 'write six hex pairs separated by colons, e.g. "02:00:5e:10:00:01"' });
    sel.mac = mac.value;
  }
  return ok(sel);
}

function parseJsonForm(value: string, podNamespace: string): Result<NetworkSelection[]> {
  const parsed = parseJson(value);
  if (!parsed.ok) return err(inputError(KEY, value, parsed.error, `write a JSON list of objects, ${JSON_EXAMPLE}, or the short form ${SHORT_EXAMPLE}`));
  const list = parsed.value;
  if (!Array.isArray(list)) return err(inputError(KEY, value, `is ${jsonKind(list)}, expected a JSON list`, `wrap the entries in [ ], ${JSON_EXAMPLE}`));
  const out: NetworkSelection[] = [];
  for (const [i, entry] of (list as unknown[]).entries()) {
    const entryName = isJsonObject(entry) ? ownField(entry, 'name') : undefined;
    const label = typeof entryName === 'string' ? ` (name ${showValue(entryName)})` : '';
    const what = `entry ${i + 1}${label}`;
    if (!isJsonObject(entry)) {
      return err(inputError(KEY, value, `${what} is ${jsonKind(entry)}, expected an object`, `write each entry as an object, ${JSON_EXAMPLE}`));
    }
    const sel = parseJsonEntry(entry, podNamespace, what);
    if (!sel.ok) return err(inputError(KEY, value, sel.error.reason, sel.error.fix));
    out.push(sel.value);
  }
  return ok(out);
}

export function parseNetworks(value: string, podNamespace: string): Result<NetworkSelection[]> {
  if (typeof value !== 'string') {
    return err(notAStringError(KEY, value, `write a network list, ${SHORT_EXAMPLE}`));
  }
  const trimmed = value.trim();
  if (trimmed.length === 0) return ok([]);
  if (trimmed.startsWith('[')) return parseJsonForm(value, podNamespace);
  if (trimmed.startsWith('{')) {
    return err(inputError(KEY, value, 'is a single JSON object, expected a JSON list', `wrap it in [ ], ${JSON_EXAMPLE}`));
  }
  return parseShortForm(value, podNamespace);
}
