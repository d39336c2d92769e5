/**
 * Per-cluster-IP routes: `<clusterIP>/32 dev <net1> src <net1 address> proto 241` (and /128).
 *
 * Why routes: the source address of a connection is chosen at the first route lookup, before
 * nat OUTPUT rewrites the destination. Without a route the cluster IP would follow the default
 * route (eth0) and take eth0's address; with it, the socket binds the secondary address and, after
 * DNAT, the kernel re-routes the packet to the backend over net1's connected route. No MASQUERADE,
 * so the backend sees the client's real secondary address.
 *
 * Ours are marked with a dedicated routing protocol number, so leftovers of an earlier run are found
 * (and only ours are touched) by `ip route show proto 241`.
 */
import type { IpFamily, ResolvedTarget, Route } from './model.js';
import type { Exec } from './exec.js';
import { SIDECAR_LAYOUT } from './names.js';
import { checkInterfaceName } from '../../annotations/names.js';

/** Routing protocol number that marks our routes (unassigned in /etc/iproute2/rt_protos). */
export const ROUTE_PROTO = SIDECAR_LAYOUT.routeProto;

export interface RoutePlan {
  /** Routes to create or correct (`ip route replace`). */
  readonly replace: readonly Route[];
  /** Routes of ours to delete. */
  readonly remove: readonly Route[];
}

function same(a: Route, b: Route): boolean {
  return a.dev === b.dev && a.src === b.src && a.family === b.family;
}

/** Pure diff between the routes present (ours) and the routes wanted. */
export function diffRoutes(current: readonly Route[], wanted: readonly Route[]): RoutePlan {
  const have = new Map(current.map((r) => [r.dst, r]));
  const want = new Map(wanted.map((r) => [r.dst, r]));
  const replace = wanted.filter((r) => {
    const h = have.get(r.dst);
    return h === undefined || !same(h, r);
  });
  const remove = current.filter((r) => !want.has(r.dst));
  return { replace, remove };
}

/** A bare address gets its host prefix; a destination read back with another prefix (or `default`) is kept as read, so it can be deleted. */
function prefix(r: Route): string {
  return ADDRESS.test(r.dst) ? `${r.dst}/${r.family === 4 ? 32 : 128}` : r.dst;
}

const ADDRESS = /^[0-9A-Fa-f:.]+$/;
const DESTINATION = /^(?:[0-9A-Fa-f:.]+(?:\/\d{1,3})?|default)$/;

/**
 * Every word of a batch line is one token of a known shape: a value with a space or newline would
 * become words or lines of its own, and `ip -batch` runs as root. Values are checked where they
 * enter (network-status); this is the last line of defence, and it throws rather than writes.
 */
function checkRoute(r: Route, op: 'replace' | 'remove', devChecked: Set<string>): void {
  if (!DESTINATION.test(r.dst)) throw new Error(`refusing route to ${JSON.stringify(r.dst)}: not an address`);
  if (op === 'remove') return;
  // Every route of a batch names one of a few devices: each is checked once.
  if (!devChecked.has(r.dev)) {
    const devWhy = checkInterfaceName(r.dev);
    if (devWhy !== undefined) throw new Error(`refusing route to ${r.dst}: the device ${JSON.stringify(r.dev)} ${devWhy}`);
    devChecked.add(r.dev);
  }
  if (!ADDRESS.test(r.src)) throw new Error(`refusing route to ${r.dst}: the source ${JSON.stringify(r.src)} is not an address`);
}

/** `ip -batch` lines; the family follows from the address, so one batch serves both. */
export function routeBatch(routes: readonly Route[], op: 'replace' | 'remove', proto: number = ROUTE_PROTO): string {
  const devChecked = new Set<string>();
  // One string grown line by line (10,000 routes at a first start: no array per step).
  let text = '';
  for (const r of routes) {
    checkRoute(r, op, devChecked);
    text += op === 'replace' ? `route replace ${prefix(r)} dev ${r.dev} src ${r.src} proto ${proto}\n` : `route del ${prefix(r)} proto ${proto}\n`;
  }
  return text;
}

/** The route batch's command line (one process per batch, or a spare started ahead: create.ts). */
export const ROUTE_BATCH_ARGS = ['-force', '-batch', '-'] as const;

interface IpRouteJson {
  dst?: string;
  dev?: string;
  prefsrc?: string;
  pref?: string;
  /** Printed for any table but main. */
  table?: string;
}

/** The rows of an `ip -j` listing; malformed or empty output gives []. */
export function ipJsonRows(json: string): unknown[] {
  try {
    const rows: unknown = JSON.parse(json === '' ? '[]' : json);
    return Array.isArray(rows) ? (rows as unknown[]) : [];
  } catch {
    return [];
  }
}

/** A row's family in a listing of both: its destination's, or for `default`, IPv6 when it has a `pref` (every IPv6 route does). */
function rowFamily(row: IpRouteJson & { dst: string }): IpFamily {
  if (row.dst !== 'default') return row.dst.includes(':') ? 6 : 4;
  return row.pref !== undefined ? 6 : 4;
}

/**
 * Parses `ip -j route show table all proto 241` (both families, every table; `family` for a
 * listing of one); only the main table's routes are ours. Pure.
 */
export function parseRoutes(json: string, family?: IpFamily): Route[] {
  const rows = ipJsonRows(json);
  const out: Route[] = [];
  for (const row of rows as IpRouteJson[]) {
    if (typeof row.dst !== 'string' || typeof row.dev !== 'string' || row.table !== undefined) continue;
    const f = family ?? rowFamily({ ...row, dst: row.dst });
    // Ours are host routes; anything else carrying our protocol number (never written by us) keeps
    // its prefix, so the diff deletes it as read instead of turning it into `<net>/<len>/32`.
    const host = f === 4 ? '/32' : '/128';
    const dst = row.dst.endsWith(host) ? row.dst.slice(0, -host.length) : row.dst;
    out.push({ family: f, dst, dev: row.dev, src: row.prefsrc ?? '' });
  }
  return out;
}

/**
 * Our routes (`proto`: the layout's routing protocol number, 241 for the sidecar), both families
 * in one command: `table all` lifts ip's default of IPv4 only (a first sync starts this before
 * rendering, and a second read would start only when rendering ends: its event loop is busy).
 */
/** The `ip` arguments that list our routes (read-ahead.ts starts them ahead of a first sync). */
export const routesReadArgs = (proto: number = ROUTE_PROTO): string[] => ['-j', 'route', 'show', 'table', 'all', 'proto', String(proto)];

export async function readRoutes(exec: Exec, proto: number = ROUTE_PROTO): Promise<Route[]> {
  const r = await exec('ip', routesReadArgs(proto));
  if (r.code !== 0) throw new Error(`ip route show table all proto ${proto} failed: ${r.stderr.trim()}`);
  return parseRoutes(r.stdout);
}

/** Applies one batch; `-force` so one bad line (e.g. an address that just vanished) does not stop the rest. */
export async function applyRoutes(exec: Exec, routes: readonly Route[], op: 'replace' | 'remove', proto: number = ROUTE_PROTO): Promise<void> {
  if (routes.length === 0) return;
  const r = await exec('ip', ROUTE_BATCH_ARGS, routeBatch(routes, op, proto));
  if (r.code !== 0) throw new Error(`ip route ${op} failed: ${r.stderr.trim()}`);
}

/** One route per served cluster IP: out of the Service's network interface, from the pod's address there. */
export function planRoutes(targets: readonly ResolvedTarget[]): Route[] {
  const routes = new Map<string, Route>();
  for (const r of targets) {
    if (!routes.has(r.clusterIP)) routes.set(r.clusterIP, r.route);
  }
  return [...routes.values()];
}
