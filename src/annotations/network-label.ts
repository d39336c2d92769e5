/**
 * The value of the `multus-proxy/network` label on our EndpointSlices, so a sidecar can select the
 * slices of its networks server-side (`multus-proxy/network in (...)`).
 *
 * Readable form `<namespace>.<nad>` whenever it is a valid label value (at most 63 characters).
 * It cannot be ambiguous: a namespace is a DNS-1123 label and has no '.', so everything before the
 * first '.' is the namespace and the rest is the NAD name.
 *
 * Otherwise (too long, or a ref that is not a valid name at all) the hashed form
 * `<readable prefix>_<32 hex digits>`: the first 128 bits of sha256 over the exact (namespace, name)
 * pair, after a prefix cut from `<namespace>.<nad>` for people reading `kubectl get`. Why it cannot
 * collide in practice:
 * - with the readable form: the hashed form always contains '_' (or, when no readable prefix is
 *   left, is just the hex digits without any '.'), while the readable form always contains '.' and
 *   never '_' (neither namespaces nor NAD names may contain '_');
 * - between two hashed forms: two different networks would need the same 128-bit sha256 prefix;
 *   for a million long-named networks in one cluster the chance is about 10^12 / 2^129 ≈ 10^-27.
 * The hash input is JSON of the pair, so ("a/b", "c") and ("a", "b/c") hash differently.
 */
import { createHash } from 'node:crypto';
import { checkLabelValue, LABEL_VALUE_MAX } from './names.js';
import type { NetworkRef } from './service-network.js';

const HASH_HEX_CHARS = 32;
const PREFIX_MAX = LABEL_VALUE_MAX - HASH_HEX_CHARS - 1;

export function networkLabelValue(ref: NetworkRef): string {
  const readable = `${ref.namespace}.${ref.name}`;
  if (!readable.includes('_') && checkLabelValue(readable) === undefined) return readable;
  const hash = createHash('sha256')
    .update(JSON.stringify([ref.namespace, ref.name]))
    .digest('hex')
    .slice(0, HASH_HEX_CHARS);
  // Keep only label-value characters; a label value must start with a letter or digit, and the
  // '_' plus hex digits that follow supply a valid end.
  const prefix = readable
    .replace(/[^A-Za-z0-9.-]/g, '-')
    .slice(0, PREFIX_MAX)
    .replace(/^[^A-Za-z0-9]+/, '');
  return prefix.length > 0 ? `${prefix}_${hash}` : hash;
}
