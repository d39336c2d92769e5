/**
 * The node's own interface on each served secondary network, as a plan of `ip -batch` lines.
 *
 * Why one: Linux never delivers a macvlan child's frames to its parent (nor the parent's to the
 * children), so the node cannot reach the pods of a macvlan network through `master`, however it
 * is addressed. A macvlan of its own in bridge mode on the same parent is a peer of the pods'
 * macvlans: it reaches them, and the segment reaches it. ipvlan (l2) is the same with an ipvlan.
 * A bridge network gets a veth pair whose far end is a port of the bridge (the bridge itself is
 * not ours to address).
 *
 * Ownership: names are `mpxh` + 11 base32 characters of a hash of the network (`mpxb` for a veth's
 * bridge end), at most 15 bytes; and every interface carries the alias `multus-proxy-node:<ns>/<nad>`.
 * Only a link with both is ours: a link that merely has our prefix is never changed or deleted.
 *
 * Pure: from what should exist and what `ip -d -j addr show` lists, the commands that get there.
 */
import { createHash } from 'node:crypto';
import { networkKey, type NetworkRef } from '../../src/annotations/service-network.js';
import type { ServableNetwork } from '../../src/annotations/nad-config.js';
import { parseIp } from '../../src/annotations/ip.js';
import { parseJson } from '../../src/annotations/json.js';
import type { HostAddress } from './addresses.js';
import { NODE_PARENTS_ANNOTATION } from '../../src/keys.js';

export const HOST_PREFIX = 'mpxh';
export const BRIDGE_PORT_PREFIX = 'mpxb';
export const ALIAS_PREFIX = 'multus-proxy-node:';
export const IFNAME_MAX = 15;

export type HostKind = 'macvlan' | 'ipvlan' | 'veth';

export interface HostInterface {
  readonly network: NetworkRef;
  readonly name: string;
  readonly kind: HostKind;
  /** macvlan/ipvlan: the parent (`link`); veth: the bridge its peer is a port of. */
  readonly parent: string;
  /** macvlan: always bridge; ipvlan: l2; veth: ''. */
  readonly mode: string;
  /** veth only: the bridge end. */
  readonly peer?: string;
  readonly addresses: readonly HostAddress[];
}

/** A link as the node lists it. */
export interface ExistingLink {
  readonly name: string;
  /** linkinfo.info_kind ('' for a physical device). */
  readonly kind: string;
  /** `link` (macvlan/ipvlan parent) or `master` (bridge port), when listed. */
  readonly link?: string;
  readonly master?: string;
  readonly mode?: string;
  readonly alias?: string;
  readonly up: boolean;
  readonly addresses: readonly HostAddress[];
}

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

function hashOf(ref: NetworkRef, chars: number): string {
  const digest = createHash('sha256').update(networkKey(ref)).digest();
  let out = '';
  for (let i = 0; out.length < chars; i += 1) out += BASE32[(digest[i] ?? 0) & 31];
  return out;
}

export function hostInterfaceName(ref: NetworkRef): string {
  return HOST_PREFIX + hashOf(ref, IFNAME_MAX - HOST_PREFIX.length);
}

export function bridgePortName(ref: NetworkRef): string {
  return BRIDGE_PORT_PREFIX + hashOf(ref, IFNAME_MAX - BRIDGE_PORT_PREFIX.length);
}

export function aliasFor(ref: NetworkRef): string {
  return `${ALIAS_PREFIX}${networkKey(ref)}`;
}

/** What the node should have for one network (addresses decided by addresses.ts). */
export function hostInterfaceFor(network: NetworkRef, config: ServableNetwork, addresses: readonly HostAddress[]): HostInterface {
  const name = hostInterfaceName(network);
  const sorted = [...addresses].sort((a, b) => a.family - b.family);
  switch (config.plugin) {
    case 'macvlan':
      // Bridge mode whatever the pods use: it is the mode in which macvlans on one parent reach each other.
      return { network, name, kind: 'macvlan', parent: config.parent, mode: 'bridge', addresses: sorted };
    case 'ipvlan':
      return { network, name, kind: 'ipvlan', parent: config.parent, mode: 'l2', addresses: sorted };
    case 'bridge':
      return { network, name, kind: 'veth', parent: config.parent, mode: '', peer: bridgePortName(network), addresses: sorted };
  }
}

/** Ours: our name prefix and our alias. Anything else is never touched. */
export function isOurs(link: ExistingLink): boolean {
  return (link.name.startsWith(HOST_PREFIX) || link.name.startsWith(BRIDGE_PORT_PREFIX)) && (link.alias ?? '').startsWith(ALIAS_PREFIX);
}

function sameShape(want: HostInterface, have: ExistingLink, all: readonly ExistingLink[]): boolean {
  if (have.kind !== want.kind) return false;
  if (want.kind === 'veth') {
    const peer = all.find((l) => l.name === want.peer);
    return peer !== undefined && isOurs(peer) && peer.master === want.parent;
  }
  return have.link === want.parent && (have.mode ?? '') === want.mode;
}

const addrKey = (a: HostAddress): string => `${a.address}/${a.prefix}`;

function addrLine(op: 'add' | 'del', a: HostAddress, dev: string): string {
  // nodad: usable at once (the address is the node's own, chosen by the operator).
  return `address ${op} ${addrKey(a)} dev ${dev}${op === 'add' && a.family === 6 ? ' nodad' : ''}`;
}

function createLines(w: HostInterface): string[] {
  const alias = aliasFor(w.network);
  const lines: string[] = [];
  if (w.kind === 'veth') {
    const peer = w.peer ?? bridgePortName(w.network);
    lines.push(`link add ${w.name} type veth peer name ${peer}`, `link set dev ${peer} alias ${alias}`, `link set dev ${peer} master ${w.parent}`, `link set dev ${peer} up`);
  } else {
    lines.push(`link add ${w.name} link ${w.parent} type ${w.kind} mode ${w.mode}`);
  }
  lines.push(`link set dev ${w.name} alias ${alias}`);
  for (const a of w.addresses) lines.push(addrLine('add', a, w.name));
  lines.push(`link set dev ${w.name} up`);
  return lines;
}

export interface HostInterfacePlan {
  /** `ip -batch` lines, in order: deletions, creations, address changes, links up. '' work: []. */
  readonly lines: readonly string[];
  readonly created: readonly string[];
  readonly deleted: readonly string[];
  /** Interfaces kept whose addresses changed. */
  readonly readdressed: readonly string[];
}

/**
 * From what exists to what is wanted. An interface of ours with the wrong kind, parent or mode is
 * deleted and made again (a macvlan's parent cannot change); one with the right shape only gets
 * its addresses corrected (`address del` of what should not be there, `address add` of what is
 * missing: IPv6 link-local addresses are the kernel's and left alone) and is set up. Interfaces of
 * ours that no network wants are deleted. A name we want that is held by a link that is not ours
 * is reported by `conflicts` and left alone.
 */
/**
 * What the node's own networking runs on: the links that hold one of the node's InternalIPs or
 * carry a default route. The agent never hangs an interface of its own off one of these
 * (a NAD naming the uplink or the pod bridge put tenant-chosen addresses beside the node's own).
 * The parent is the admin's now (parents.ts), or the NAD's under --parent-from-nad; the check holds
 * for both (an admin's slip on the uplink is refused too).
 */
export interface ProtectedLinks {
  readonly internalIPs: readonly string[];
  readonly defaultRouteDevs: readonly string[];
}

/** Why `w`'s parent must not be used, or undefined. Pure. */
export function parentRefusal(w: HostInterface, existing: readonly ExistingLink[], protect: ProtectedLinks): string | undefined {
  const parent = existing.find((l) => l.name === w.parent);
  const held = parent?.addresses.find((a) => protect.internalIPs.includes(a.address));
  if (held !== undefined) return `its parent ${w.parent} holds the node's InternalIP ${held.address}`;
  if (protect.defaultRouteDevs.includes(w.parent)) return `its parent ${w.parent} carries the node's default route`;
  return undefined;
}

export function planHostInterfaces(
  wanted: readonly HostInterface[],
  existing: readonly ExistingLink[],
  protect: ProtectedLinks = { internalIPs: [], defaultRouteDevs: [] },
): HostInterfacePlan & { conflicts: readonly string[]; refused: readonly string[] } {
  const byName = new Map(existing.map((l) => [l.name, l]));
  const refused: string[] = [];
  const del: string[] = [];
  const create: string[] = [];
  const fix: string[] = [];
  const created: string[] = [];
  const deleted: string[] = [];
  const readdressed: string[] = [];
  const conflicts: string[] = [];
  const keep = new Set<string>();
  for (const w of wanted) {
    const why = parentRefusal(w, existing, protect);
    if (why !== undefined) {
      // Not kept: an interface of ours already there (made before this check) is deleted below.
      refused.push(
        `network ${networkKey(w.network)} is not served on this node: ${why}. The node agent never adds an interface beside the node's own networking. Give the secondary network its own interface on the node and name it in the Node annotation ${NODE_PARENTS_ANNOTATION}`,
      );
      continue;
    }
    const names = w.peer !== undefined ? [w.name, w.peer] : [w.name];
    const foreign = names.map((n) => byName.get(n)).find((l) => l !== undefined && !isOurs(l));
    if (foreign !== undefined) {
      conflicts.push(
        `interface ${foreign.name} exists and is not the node agent's (no alias ${aliasFor(w.network)}); network ${networkKey(w.network)} is not served on this node until it is renamed or removed`,
      );
      continue;
    }
    names.forEach((n) => keep.add(n));
    const have = byName.get(w.name);
    if (have !== undefined && sameShape(w, have, existing)) {
      const want = new Set(w.addresses.map(addrKey));
      const present = have.addresses.filter((a) => !(a.family === 6 && a.address.startsWith('fe80:')));
      const presentKeys = new Set(present.map(addrKey));
      const changes = [
        ...present.filter((a) => !want.has(addrKey(a))).map((a) => addrLine('del', a, w.name)),
        ...w.addresses.filter((a) => !presentKeys.has(addrKey(a))).map((a) => addrLine('add', a, w.name)),
      ];
      if (changes.length > 0) readdressed.push(w.name);
      fix.push(...changes);
      if (!have.up) fix.push(`link set dev ${w.name} up`);
      continue;
    }
    if (have !== undefined) {
      del.push(`link del dev ${have.name}`);
      deleted.push(have.name);
    }
    // A stale peer of ours left without its host end (or a peer of the wrong bridge) goes too.
    const stalePeer = w.peer !== undefined ? byName.get(w.peer) : undefined;
    if (stalePeer !== undefined && (have === undefined || have.kind !== 'veth')) {
      del.push(`link del dev ${stalePeer.name}`);
      deleted.push(stalePeer.name);
    }
    create.push(...createLines(w));
    created.push(w.name);
  }
  for (const l of existing) {
    if (!isOurs(l) || keep.has(l.name) || deleted.includes(l.name)) continue;
    // Deleting a veth's host end deletes its peer too; a second `del` of the peer would fail the batch.
    const peerOfDeleted = l.name.startsWith(BRIDGE_PORT_PREFIX) && deleted.includes(HOST_PREFIX + l.name.slice(BRIDGE_PORT_PREFIX.length));
    if (peerOfDeleted) continue;
    del.push(`link del dev ${l.name}`);
    deleted.push(l.name);
    if (l.kind === 'veth' && l.name.startsWith(HOST_PREFIX)) deleted.push(BRIDGE_PORT_PREFIX + l.name.slice(HOST_PREFIX.length));
  }
  return { lines: [...del, ...create, ...fix], created, deleted: [...new Set(deleted)], readdressed, conflicts, refused };
}

/** Every interface of ours, to delete (`--cleanup`). Deleting a veth's host end takes its peer along. */
export function planRemoveAll(existing: readonly ExistingLink[]): string[] {
  const ours = existing.filter(isOurs);
  const names = new Set(ours.map((l) => l.name));
  return ours.filter((l) => !(l.name.startsWith(BRIDGE_PORT_PREFIX) && names.has(HOST_PREFIX + l.name.slice(BRIDGE_PORT_PREFIX.length)))).map((l) => `link del dev ${l.name}`);
}

interface IpAddrJson {
  ifname?: unknown;
  ifalias?: unknown;
  link?: unknown;
  master?: unknown;
  flags?: unknown;
  linkinfo?: { info_kind?: unknown; info_data?: { mode?: unknown } };
  addr_info?: { family?: unknown; local?: unknown; prefixlen?: unknown }[];
}

/** Parses `ip -d -j address show`. Pure; anything malformed is skipped, never thrown. */
export function parseLinks(json: string): ExistingLink[] {
  const parsed = parseJson(json === '' ? '[]' : json);
  if (!parsed.ok || !Array.isArray(parsed.value)) return [];
  const rows: unknown[] = parsed.value;
  const out: ExistingLink[] = [];
  for (const row of rows as IpAddrJson[]) {
    if (typeof row !== 'object' || row === null || typeof row.ifname !== 'string') continue;
    const addresses: HostAddress[] = [];
    for (const a of Array.isArray(row.addr_info) ? row.addr_info : []) {
      if (typeof a.local !== 'string' || typeof a.prefixlen !== 'number') continue;
      const p = parseIp(a.local);
      if (p.ok) addresses.push({ family: p.value.family, address: p.value.address, prefix: a.prefixlen });
    }
    const kind = row.linkinfo?.info_kind;
    const mode = row.linkinfo?.info_data?.mode;
    out.push({
      name: row.ifname,
      kind: typeof kind === 'string' ? kind : '',
      ...(typeof row.link === 'string' ? { link: row.link } : {}),
      ...(typeof row.master === 'string' ? { master: row.master } : {}),
      ...(typeof mode === 'string' ? { mode } : {}),
      ...(typeof row.ifalias === 'string' ? { alias: row.ifalias } : {}),
      up: Array.isArray(row.flags) && row.flags.includes('UP'),
      addresses,
    });
  }
  return out;
}
