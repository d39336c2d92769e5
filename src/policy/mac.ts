/**
 * A pod's MAC address on a secondary network, as tenant input: Multus copies it from the CNI
 * result into network-status, and the controller carries it in address groups, where a sidecar
 * binds a peer's address to it (a pod that claims another pod's address keeps its own MAC). Only a
 * unicast, non-zero Ethernet address in six colon-separated octets can be one interface's; its
 * canonical form is lower-case. Pure.
 */

const MAC = /^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$/;

/** Why `text` cannot be one interface's MAC, or undefined when it can. */
export function macProblem(text: string): string | undefined {
  if (!MAC.test(text)) return 'is not six two-digit hexadecimal octets separated by ":" (e.g. 02:00:5e:10:00:01)';
  const first = Number.parseInt(text.slice(0, 2), 16);
  if ((first & 1) === 1) return 'is a multicast or broadcast address, which no interface sends from';
  if (/^00(:00){5}$/.test(text)) return 'is all zeros, which no interface sends from';
  return undefined;
}

/** The canonical (lower-case) MAC of `text`, or undefined when it cannot be one interface's. */
export function checkedMac(text: string): string | undefined {
  return macProblem(text) === undefined ? text.toLowerCase() : undefined;
}

/** Strict form for text the controller wrote: already canonical (lower-case), else refused. */
export function canonicalMac(text: string): string | undefined {
  return checkedMac(text) === text ? text : undefined;
}
