/**
 * Name rules shared by the annotation parsers: DNS-1123 labels and subdomains, label keys and
 * values, Linux interface names. Each check returns `undefined` when the name is fine, or a short
 * reason saying exactly what is wrong (which character, how long), so callers can build a message
 * that names the bad part. Checks scan characters instead of running one big regular expression,
 * so a pathological input costs linear time and the reason can point at the first bad character.
 */

export const DNS1123_LABEL_MAX = 63;
export const DNS1123_SUBDOMAIN_MAX = 253;
export const LABEL_VALUE_MAX = 63;
export const LABEL_NAME_MAX = 63;
/** Linux IFNAMSIZ is 16 including the terminating NUL. */
export const IFNAME_MAX = 15;

/** What to write instead, for each kind of name; used as the `fix` of an InputError. */
export const DNS1123_LABEL_RULE = `at most ${DNS1123_LABEL_MAX} characters of lower-case letters, digits and '-', starting and ending with a letter or digit`;
export const DNS1123_SUBDOMAIN_RULE = `at most ${DNS1123_SUBDOMAIN_MAX} characters of lower-case letters, digits, '-' and '.', each dot-separated part starting and ending with a letter or digit`;
export const LABEL_VALUE_RULE = `empty, or at most ${LABEL_VALUE_MAX} characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit`;
export const LABEL_KEY_RULE = `an optional DNS subdomain prefix and '/', then a name of at most ${LABEL_NAME_MAX} characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit (e.g. "app" or "example.com/tier")`;
export const IFNAME_RULE = `1 to ${IFNAME_MAX} characters without '/', ':' or whitespace, and not "." or ".."`;

const isLowerAlnum = (c: string): boolean => (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
const isAlnum = (c: string): boolean => isLowerAlnum(c) || (c >= 'A' && c <= 'Z');

/** Describes one character for a message: printable ones quoted, others as a code point. */
export function describeChar(c: string): string {
  const code = c.codePointAt(0) ?? 0;
  if (c === ' ') return 'a space';
  // Control, blank and lone-surrogate characters would be invisible or garble a message.
  if (code < 0x20 || (code >= 0x7f && code <= 0x9f) || (code >= 0xd800 && code <= 0xdfff) || /\s/u.test(c)) return `the invisible character U+${code.toString(16).toUpperCase().padStart(4, '0')}`;
  if (c >= 'A' && c <= 'Z') return `the upper-case letter '${c}'`;
  return `'${c}'`;
}

/**
 * Shared scan: `value` must be non-empty, at most `max` long, made of `inner` characters and start
 * and end with an `edge` character (`edgeText` describes those for the reason).
 */
function checkChars(value: string, max: number, edge: (c: string) => boolean, inner: (c: string) => boolean, edgeText: string): string | undefined {
  if (value.length === 0) return 'is empty';
  if (value.length > max) return `is ${value.length} characters long, more than ${max}`;
  // Iterate by code point so a surrogate pair is reported as one character.
  let position = 0;
  for (const c of value) {
    position += 1;
    if (!inner(c)) return `contains ${describeChar(c)} at position ${position}`;
  }
  const first = value[0] ?? '';
  const last = value[value.length - 1] ?? '';
  if (!edge(first)) return `starts with ${describeChar(first)}; it must start with ${edgeText}`;
  if (!edge(last)) return `ends with ${describeChar(last)}; it must end with ${edgeText}`;
  return undefined;
}

const isDnsLabelChar = (c: string): boolean => isLowerAlnum(c) || c === '-';

/** DNS-1123 label (namespace names, Kubernetes object names of that kind). */
export function checkDns1123Label(value: string): string | undefined {
  return checkChars(value, DNS1123_LABEL_MAX, isLowerAlnum, isDnsLabelChar, 'a lower-case letter or digit');
}

/** DNS-1123 subdomain (most object names, e.g. NetworkAttachmentDefinitions; label-key prefixes). */
export function checkDns1123Subdomain(value: string): string | undefined {
  if (value.length === 0) return 'is empty';
  if (value.length > DNS1123_SUBDOMAIN_MAX) return `is ${value.length} characters long, more than ${DNS1123_SUBDOMAIN_MAX}`;
  const parts = value.split('.');
  for (const [n, part] of parts.entries()) {
    if (part.length === 0) return parts.length === 1 ? 'is empty' : `has an empty part between dots (part ${n + 1})`;
    // Part length is bounded by the total only (as in Kubernetes' IsDNS1123Subdomain).
    const why = checkChars(part, DNS1123_SUBDOMAIN_MAX, isLowerAlnum, isDnsLabelChar, 'a lower-case letter or digit');
    if (why !== undefined) return parts.length === 1 ? why : `has a part ${JSON.stringify(part)} that ${why}`;
  }
  return undefined;
}

const isLabelChar = (c: string): boolean => isAlnum(c) || c === '-' || c === '_' || c === '.';

/** Label value: may be empty. */
export function checkLabelValue(value: string): string | undefined {
  if (value.length === 0) return undefined;
  return checkChars(value, LABEL_VALUE_MAX, isAlnum, isLabelChar, 'a letter or digit');
}

/** Label key (a "qualified name"): `[prefix/]name`. */
export function checkLabelKey(value: string): string | undefined {
  if (value.length === 0) return 'is empty';
  const slash = value.indexOf('/');
  if (slash >= 0 && value.indexOf('/', slash + 1) >= 0) return "contains more than one '/'";
  const prefix = slash >= 0 ? value.slice(0, slash) : undefined;
  const name = slash >= 0 ? value.slice(slash + 1) : value;
  if (prefix !== undefined) {
    const why = checkDns1123Subdomain(prefix);
    if (why !== undefined) return `has the prefix ${JSON.stringify(prefix)}, which is not a DNS subdomain: it ${why}`;
  }
  const why = checkChars(name, LABEL_NAME_MAX, isAlnum, isLabelChar, 'a letter or digit');
  if (why !== undefined) return prefix === undefined ? why : `has the name part ${JSON.stringify(name)}, which ${why}`;
  return undefined;
}

/** Linux network interface name, as the kernel's dev_valid_name() accepts it. */
export function checkInterfaceName(value: string): string | undefined {
  if (value.length === 0) return 'is empty';
  if (value === '.' || value === '..') return `is ${JSON.stringify(value)}`;
  // The kernel counts bytes, not characters.
  const bytes = Buffer.byteLength(value, 'utf8');
  if (bytes > IFNAME_MAX) return `is ${bytes} bytes long, more than ${IFNAME_MAX}`;
  for (const c of value) {
    if (c === '/' || c === ':' || /\s/u.test(c) || c === '\0') return `contains ${describeChar(c)}`;
  }
  return undefined;
}
