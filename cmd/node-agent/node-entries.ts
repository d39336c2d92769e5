/**
 * The shape shared by the admin's per-network Node annotations (node-addresses, node-parents):
 * `<namespace>/<nad>=<value>` entries separated by ';' (a trailing ';' is allowed). This module
 * splits and checks the entries and the network names; each annotation parses its own values.
 * Pure; bad input gives an InputError naming the key, the value and the fix.
 */
import { parseNetworkItem, networkKey } from '../../src/annotations/service-network.js';
import { err, inputError, ok, type InputError, type Result } from '../../src/result.js';

export interface NetworkEntry {
  /** 1-based, for messages. */
  readonly index: number;
  /** `<namespace>/<nad>`. */
  readonly network: string;
  /** What follows '=', trimmed. */
  readonly text: string;
}

/** Annotations are at most 256 KiB together; one of these is a handful of networks. */
export const MAX_NODE_ENTRIES_LENGTH = 16 * 1024;

/**
 * Entries in order. `fix` is the annotation's general fix; `twiceFix` the one for a network listed
 * twice (which entry was meant is unknowable, so that is an error, not "the last wins").
 */
export function parseNetworkEntries(value: string, key: string, fix: string, twiceFix: string): Result<NetworkEntry[], InputError> {
  if (value.length > MAX_NODE_ENTRIES_LENGTH) return err(inputError(key, value, `is ${value.length} characters long`, fix));
  const raws = value.split(';');
  const out: NetworkEntry[] = [];
  for (const [i, raw] of raws.entries()) {
    const entry = raw.trim();
    if (entry === '') {
      if (i === raws.length - 1 && i > 0) continue; // a trailing ';'
      return err(inputError(key, value, `entry ${i + 1} is empty`, fix));
    }
    const eq = entry.indexOf('=');
    if (eq < 0) return err(inputError(key, value, `entry ${i + 1} (${JSON.stringify(entry)}) has no "="`, fix));
    const netText = entry.slice(0, eq).trim();
    if (!netText.includes('/')) return err(inputError(key, value, `entry ${i + 1} names the network ${JSON.stringify(netText)} without its namespace (a Node has none)`, fix));
    const ref = parseNetworkItem(netText, '', `entry ${i + 1} (${JSON.stringify(netText)})`);
    if (!ref.ok) return err(inputError(key, value, ref.error.reason, ref.error.fix));
    const network = networkKey(ref.value);
    if (out.some((e) => e.network === network)) return err(inputError(key, value, `network ${network} is listed twice`, twiceFix));
    out.push({ index: i + 1, network, text: entry.slice(eq + 1).trim() });
  }
  return ok(out);
}
