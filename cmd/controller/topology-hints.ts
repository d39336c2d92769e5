/**
 * Topology hints on our slices, as Kubernetes' EndpointSlice controller writes them on its own,
 * pure: the endpoints of one network and address family in, the same endpoints with their hints
 * set (or cleared) out, and the Event the upstream controller would record.
 *
 * - `service.kubernetes.io/topology-mode: Auto` (or the older `topology-aware-hints` annotation
 *   when the first is absent; values `Auto`/`auto`) wins over `trafficDistribution`. Hints are
 *   allocated in proportion to each zone's share of allocatable CPU, with upstream's safeguards:
 *   no hints when node information is insufficient (a ready, non-control-plane node without a zone
 *   or CPU, or fewer than two zones), when there are fewer ready endpoints than zones, when the
 *   per-zone minimums (desired / 1.2) exceed the endpoints, or when a ready endpoint has no zone.
 * - `trafficDistribution` PreferClose, PreferSameZone: each ready endpoint hinted for its own
 *   zone; PreferSameNode: also for its own node.
 * - Otherwise every hint is removed.
 * Only ready endpoints carry hints (upstream's rule; consumers look only at ready ones).
 *
 * Upstream keeps the hints of unchanged slices and hands out the rest; this planner recomputes
 * every endpoint's hint from scratch in a fixed order (zones and endpoints sorted), so the same
 * input always yields the same hints and a converged Service plans no write.
 */
import { compareText } from '../../src/order.js';
import type { V1Endpoint, V1Service } from '../../src/kube/types.js';
import { serviceSubject, type EventRecorder } from './events.js';

type V1EndpointHints = NonNullable<V1Endpoint['hints']>;

export const TOPOLOGY_MODE_ANNOTATION = 'service.kubernetes.io/topology-mode';
export const TOPOLOGY_AWARE_HINTS_ANNOTATION = 'service.kubernetes.io/topology-aware-hints';
export const ZONE_LABEL = 'topology.kubernetes.io/zone';

/** The largest overload any endpoint should see (upstream's overloadThreshold). */
const OVERLOAD_THRESHOLD = 0.2;

export type HintMode = { readonly kind: 'none' } | { readonly kind: 'auto' } | { readonly kind: 'close'; readonly sameNode: boolean };

/** Which hints a Service asks for, with upstream's precedence. */
export function hintMode(svc: V1Service): HintMode {
  const a = svc.metadata?.annotations ?? {};
  const value = a[TOPOLOGY_MODE_ANNOTATION] ?? a[TOPOLOGY_AWARE_HINTS_ANNOTATION];
  if (value === 'Auto' || value === 'auto') return { kind: 'auto' };
  const td = svc.spec?.trafficDistribution;
  if (td === 'PreferClose' || td === 'PreferSameZone') return { kind: 'close', sameNode: false };
  if (td === 'PreferSameNode') return { kind: 'close', sameNode: true };
  return { kind: 'none' };
}

/** What the planner needs of a Node. */
export interface NodeTopology {
  readonly name: string;
  readonly zone: string | undefined;
  /** Allocatable CPU in millicores (0 when unknown or unreadable). */
  readonly cpuMilli: number;
  readonly ready: boolean;
  /** Labelled control-plane (or master): left out of the capacity, as upstream does. */
  readonly controlPlane: boolean;
}

/** Each zone's share of the cluster's allocatable CPU, or why there is none. */
export type ZoneCapacity = { readonly ok: true; readonly ratios: ReadonlyMap<string, number> } | { readonly ok: false; readonly reason: string };

export const INSUFFICIENT_NODE_INFO = 'Insufficient Node information: allocatable CPU or zone not specified on one or more nodes';
export const ONE_ZONE_ONLY = 'Nodes only ready in one zone';

/** Zone CPU shares from the ready, non-control-plane Nodes (upstream's SetNodes). */
export function zoneCapacity(nodes: Iterable<NodeTopology>): ZoneCapacity {
  const byZone = new Map<string, number>();
  let total = 0;
  for (const n of nodes) {
    if (n.controlPlane || !n.ready) continue;
    if (n.zone === undefined || n.zone === '' || !(n.cpuMilli > 0)) return { ok: false, reason: INSUFFICIENT_NODE_INFO };
    byZone.set(n.zone, (byZone.get(n.zone) ?? 0) + n.cpuMilli);
    total += n.cpuMilli;
  }
  if (total === 0) return { ok: false, reason: INSUFFICIENT_NODE_INFO };
  if (byZone.size < 2) return { ok: false, reason: ONE_ZONE_ONLY };
  return { ok: true, ratios: new Map([...byZone].map(([z, cpu]) => [z, cpu / total])) };
}

/** A Kubernetes resource quantity of CPU in millicores; NaN when it is not one. Linear. */
export function cpuMillis(q: unknown): number {
  if (typeof q === 'number') return Number.isFinite(q) && q >= 0 ? q * 1000 : NaN;
  if (typeof q !== 'string' || q.length > 64) return NaN;
  const m = /^(\d+(?:\.\d*)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/.exec(q.trim());
  if (m === null) return NaN;
  // Millicores per unit of each suffix.
  const scale: Record<string, number> = {
    m: 1,
    '': 1e3,
    k: 1e6,
    M: 1e9,
    G: 1e12,
    T: 1e15,
    P: 1e18,
    E: 1e21,
    Ki: 2 ** 10 * 1e3,
    Mi: 2 ** 20 * 1e3,
    Gi: 2 ** 30 * 1e3,
    Ti: 2 ** 40 * 1e3,
    Pi: 2 ** 50 * 1e3,
    Ei: 2 ** 60 * 1e3,
  };
  return Number(m[1]) * (scale[m[2] ?? ''] ?? NaN);
}

export interface HintEvent {
  readonly type: 'Normal' | 'Warning';
  readonly reason: 'TopologyAwareHintsEnabled' | 'TopologyAwareHintsDisabled';
  readonly message: string;
}

export interface HintResult {
  /** The same endpoints, in the same order, hints set or cleared. */
  readonly endpoints: V1Endpoint[];
  /** Auto mode only: why hints are off, or that they are on. */
  readonly event?: HintEvent;
}

function ready(e: V1Endpoint): boolean {
  return e.conditions?.ready === true;
}

function withHints(e: V1Endpoint, hints: V1EndpointHints | undefined): V1Endpoint {
  if (hints === undefined && e.hints === undefined) return e;
  const { hints: _old, ...rest } = e;
  return hints === undefined ? rest : { ...rest, hints };
}

function cleared(endpoints: readonly V1Endpoint[]): V1Endpoint[] {
  return endpoints.map((e) => withHints(e, undefined));
}

function closeHints(endpoints: readonly V1Endpoint[], sameNode: boolean): V1Endpoint[] {
  return endpoints.map((e) => {
    if (!ready(e)) return withHints(e, undefined);
    const zone = e.zone ?? undefined;
    const node = sameNode ? (e.nodeName ?? undefined) : undefined;
    if (zone === undefined && node === undefined) return withHints(e, undefined);
    return withHints(e, { ...(zone !== undefined ? { forZones: [{ name: zone }] } : {}), ...(node !== undefined ? { forNodes: [{ name: node }] } : {}) });
  });
}

interface Allocation {
  readonly minimum: number;
  readonly desired: number;
}

function disabled(endpoints: readonly V1Endpoint[], message: string, family: string): HintResult {
  return { endpoints: cleared(endpoints), event: { type: 'Warning', reason: 'TopologyAwareHintsDisabled', message: `${message}, addressType: ${family}` } };
}

/** Upstream's allocation per zone: desired by CPU share, minimum so no endpoint is overloaded past the threshold. */
function allocations(ratios: ReadonlyMap<string, number>, total: number): Map<string, Allocation> | string {
  if (ratios.size > total) return `Insufficient number of endpoints (${total} endpoints, ${ratios.size} zones)`;
  const out = new Map<string, Allocation>();
  let remaining = total;
  for (const zone of [...ratios.keys()].sort(compareText)) {
    const desired = (ratios.get(zone) ?? 0) * total;
    const minimum = Math.ceil(desired * (1 / (1 + OVERLOAD_THRESHOLD)));
    out.set(zone, { minimum, desired: Math.max(desired, minimum) });
    remaining -= minimum;
    if (remaining < 0) return `Unable to allocate minimum required endpoints to each zone without exceeding overload threshold (${total} endpoints, ${ratios.size} zones)`;
  }
  return out;
}

/** The zone with the most left to give or receive; ties to the first in name order. */
function most(m: Map<string, number>): [string, number] {
  let best: [string, number] = ['', 0];
  for (const zone of [...m.keys()].sort(compareText)) {
    const n = m.get(zone) ?? 0;
    if (n > best[1]) best = [zone, n];
  }
  return best;
}

function givingAndReceiving(alloc: ReadonlyMap<string, Allocation>, byZone: ReadonlyMap<string, number>): { giving: Map<string, number>; receiving: Map<string, number> } {
  const giveWant = new Map<string, number>();
  const takeWant = new Map<string, number>();
  for (const [zone, a] of alloc) {
    const have = byZone.get(zone) ?? 0;
    if (have > a.desired) giveWant.set(zone, have - a.desired);
    else if (have < a.desired) takeWant.set(zone, a.desired - have);
  }
  const giving = new Map<string, number>();
  const receiving = new Map<string, number>();
  for (;;) {
    const [gz, g] = most(giveWant);
    const [rz, r] = most(takeWant);
    if (gz === '' || rz === '' || (g < 1 && r < 1) || g < 0.5 || r < 0.5) break;
    giving.set(gz, (giving.get(gz) ?? 0) + 1);
    giveWant.set(gz, g - 1);
    receiving.set(rz, (receiving.get(rz) ?? 0) + 1);
    takeWant.set(rz, r - 1);
  }
  return { giving, receiving };
}

function autoHints(endpoints: readonly V1Endpoint[], capacity: ZoneCapacity, family: string): HintResult {
  if (!capacity.ok) return disabled(endpoints, capacity.reason, family);
  const total = endpoints.filter(ready).length;
  const alloc = allocations(capacity.ratios, total);
  if (typeof alloc === 'string') return disabled(endpoints, alloc, family);
  if (endpoints.some((e) => ready(e) && (e.zone ?? '') === '')) return disabled(endpoints, 'One or more endpoints do not have a zone specified', family);

  // 1. Every ready endpoint hinted for its own zone.
  const hintZone = endpoints.map((e) => (ready(e) ? (e.zone as string) : undefined));
  const byZone = new Map<string, number>();
  for (const z of hintZone) if (z !== undefined) byZone.set(z, (byZone.get(z) ?? 0) + 1);
  // 2-3. Zones above their share give endpoints to zones below it, in endpoint order.
  const { giving, receiving } = givingAndReceiving(alloc, byZone);
  for (let i = 0; i < hintZone.length && giving.size > 0 && receiving.size > 0; i++) {
    const own = hintZone[i];
    if (own === undefined || (giving.get(own) ?? 0) <= 0) continue;
    const to = [...receiving.keys()].sort(compareText).find((z) => (receiving.get(z) ?? 0) > 0);
    if (to === undefined) break;
    hintZone[i] = to;
    const g = (giving.get(own) ?? 0) - 1;
    if (g <= 0) giving.delete(own);
    else giving.set(own, g);
    const r = (receiving.get(to) ?? 0) - 1;
    if (r <= 0) receiving.delete(to);
    else receiving.set(to, r);
  }
  return {
    endpoints: endpoints.map((e, i) => {
      const z = hintZone[i];
      return withHints(e, z === undefined ? undefined : { forZones: [{ name: z }] });
    }),
    event: { type: 'Normal', reason: 'TopologyAwareHintsEnabled', message: `Topology Aware Hints has been enabled, addressType: ${family}` },
  };
}

/**
 * Hints for the endpoints of one network and address family of a Service (pass them in a fixed
 * order: the allocation hands endpoints to other zones in that order).
 */
export function planHints(mode: HintMode, endpoints: readonly V1Endpoint[], capacity: ZoneCapacity, family: string): HintResult {
  if (mode.kind === 'none') return { endpoints: cleared(endpoints) };
  if (mode.kind === 'close') return { endpoints: closeHints(endpoints, mode.sameNode) };
  return autoHints(endpoints, capacity, family);
}

/**
 * Records the hint Events of one plan: a Disabled Warning whenever Auto cannot hint (rate-limited
 * by the recorder), the Normal Enabled one only with a write (when hints may have just appeared).
 */
export function reportHints(events: EventRecorder, svc: V1Service, hintEvents: readonly { readonly network: string; readonly event: HintEvent }[], writing: boolean): void {
  for (const { network, event } of hintEvents) {
    if (event.type === 'Normal' && !writing) continue;
    events.record(serviceSubject(svc), event.type, `hints|${network}`, event.reason, `${event.message}, network: ${network}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Nodes.

/** A Node object (full or slimmed) as the planner needs it. */
export function nodeTopology(n: { metadata?: { name?: string; labels?: Record<string, string> }; status?: unknown }): NodeTopology {
  const labels = n.metadata?.labels ?? {};
  const status = (n.status ?? {}) as { allocatable?: Record<string, unknown>; conditions?: { type?: unknown; status?: unknown }[] };
  const conditions = Array.isArray(status.conditions) ? status.conditions : [];
  const cpu = cpuMillis(status.allocatable?.cpu);
  return {
    name: n.metadata?.name ?? '',
    zone: labels[ZONE_LABEL],
    cpuMilli: Number.isFinite(cpu) ? cpu : 0,
    ready: conditions.some((c) => c.type === 'Ready' && c.status === 'True'),
    controlPlane: 'node-role.kubernetes.io/control-plane' in labels || 'node-role.kubernetes.io/master' in labels,
  };
}

/** The Nodes as last seen; capacity recomputed on demand, a change reported so Auto Services are planned again. */
export class NodeCapacity {
  private readonly nodes = new Map<string, NodeTopology>();
  private cached: ZoneCapacity | undefined;

  /** Returns whether the zone shares (or the reason for none) changed. */
  set(name: string, node: NodeTopology | undefined): boolean {
    const before = this.capacity();
    if (node === undefined) this.nodes.delete(name);
    else this.nodes.set(name, node);
    this.cached = undefined;
    return !sameCapacity(before, this.capacity());
  }

  capacity(): ZoneCapacity {
    this.cached ??= zoneCapacity(this.nodes.values());
    return this.cached;
  }
}

function sameCapacity(a: ZoneCapacity, b: ZoneCapacity): boolean {
  if (!a.ok || !b.ok) return !a.ok && !b.ok && a.reason === b.reason;
  return a.ratios.size === b.ratios.size && [...a.ratios].every(([z, r]) => b.ratios.get(z) === r);
}
