/**
 * `k8s.v1.cni.cncf.io/service-network`: which NetworkAttachmentDefinitions a Service's endpoints
 * live on (on a Service) or which networks a client pod wants to reach (on a Pod).
 *
 * Syntax: `<nad>`, `<namespace>/<nad>`, or a comma list of them. A bare name means `defaultNamespace`
 * (the object's own namespace). Spaces around items are ignored; empty items are errors (a stray
 * comma is more likely a typo than an intent). Duplicates are dropped, first occurrence kept.
 */
import { SERVICE_NETWORK_ANNOTATION } from '../keys.js';
import { err, inputError, ok, type Result } from '../result.js';
import { checkDns1123Label, checkDns1123Subdomain, DNS1123_LABEL_RULE, DNS1123_SUBDOMAIN_RULE } from './names.js';
import { notAStringError } from './json.js';

export interface NetworkRef {
  namespace: string;
  name: string;
}

/** The one spelling of a network everywhere (maps, messages, the slice annotation): `ns/name`. */
export function networkKey(ref: NetworkRef): string {
  return `${ref.namespace}/${ref.name}`;
}

const EXAMPLE = 'e.g. "my-net" or "other-namespace/my-net,my-net2"';

/**
 * The most networks one annotation may name. Every name costs a NAD lookup in the webhook, a
 * sharing check, and possibly an Event and a slice in the controller; a pod rarely has more than a
 * handful of secondary networks, so 32 leaves room and keeps one object's cost small.
 */
export const MAX_NETWORKS_PER_ANNOTATION = 32;

/**
 * Checks one `[namespace/]name` item and resolves a bare name to `defaultNamespace`. Also used by
 * the short form of the networks annotation, which shares this syntax before its `@ifname`.
 * `what` describes the item for messages, e.g. `item 2 ("a/B")`.
 */
export function parseNetworkItem(item: string, defaultNamespace: string, what: string): Result<NetworkRef, { reason: string; fix: string }> {
  const slash = item.indexOf('/');
  if (slash >= 0 && item.indexOf('/', slash + 1) >= 0) {
    return err({ reason: `${what} has more than one '/'`, fix: `write "<namespace>/<name>" or just "<name>", ${EXAMPLE}` });
  }
  const explicitNamespace = slash >= 0;
  const namespace = explicitNamespace ? item.slice(0, slash) : defaultNamespace;
  const name = explicitNamespace ? item.slice(slash + 1) : item;
  if (explicitNamespace && namespace.length === 0) {
    return err({ reason: `${what} has an empty namespace before '/'`, fix: `write the namespace before '/' or drop the '/', ${EXAMPLE}` });
  }
  const nameWhy = checkDns1123Subdomain(name);
  if (nameWhy !== undefined) {
    return err({ reason: `${what}: the network name ${JSON.stringify(name)} ${nameWhy}`, fix: `a NetworkAttachmentDefinition name is ${DNS1123_SUBDOMAIN_RULE}` });
  }
  const nsWhy = checkDns1123Label(namespace);
  if (nsWhy !== undefined) {
    return explicitNamespace
      ? err({ reason: `${what}: the namespace ${JSON.stringify(namespace)} ${nsWhy}`, fix: `a namespace is ${DNS1123_LABEL_RULE}` })
      : err({
          reason: `${what} has no namespace, and the object's own namespace ${JSON.stringify(namespace)} ${nsWhy}`,
          fix: `write the namespace explicitly as "<namespace>/${name}"`,
        });
  }
  return ok({ namespace, name });
}

/** Splits a comma list and trims each item; empty strings mark empty items (the caller reports them). */
export function splitCommaList(value: string): string[] {
  return value.split(',').map((s) => s.trim());
}

export function parseServiceNetwork(value: string, defaultNamespace: string, key: string = SERVICE_NETWORK_ANNOTATION): Result<NetworkRef[]> {
  // The declared type says string, but values come from JSON objects: be defensive at run time.
  if (typeof value !== 'string') {
    return err(notAStringError(key, value, `write a network name, ${EXAMPLE}`));
  }
  if (value.trim().length === 0) {
    return err(inputError(key, value, 'is empty', `name at least one NetworkAttachmentDefinition, ${EXAMPLE}, or remove the annotation`));
  }
  const items = splitCommaList(value);
  if (items.length > MAX_NETWORKS_PER_ANNOTATION) {
    return err(
      inputError(
        key,
        value,
        `names ${items.length} networks, more than the ${MAX_NETWORKS_PER_ANNOTATION} one object may name`,
        `name at most ${MAX_NETWORKS_PER_ANNOTATION} NetworkAttachmentDefinitions (split the Service into several, one per group of networks)`,
      ),
    );
  }
  const refs: NetworkRef[] = [];
  const seen = new Set<string>();
  for (const [i, item] of items.entries()) {
    const what = `item ${i + 1}${items.length > 1 ? ` of ${items.length}` : ''}`;
    if (item.length === 0) {
      return err(inputError(key, value, `${what} is empty (a stray comma?)`, `remove the extra comma; separate networks with single commas, ${EXAMPLE}`));
    }
    const parsed = parseNetworkItem(item, defaultNamespace, `${what} (${JSON.stringify(item)})`);
    if (!parsed.ok) return err(inputError(key, value, parsed.error.reason, parsed.error.fix));
    const k = networkKey(parsed.value);
    if (!seen.has(k)) {
      seen.add(k);
      refs.push(parsed.value);
    }
  }
  return ok(refs);
}

/** Always writes the explicit `ns/name` form, so the value means the same in any namespace. */
export function formatServiceNetwork(refs: readonly NetworkRef[]): string {
  return refs.map(networkKey).join(',');
}
