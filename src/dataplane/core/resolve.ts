/**
 * Resolution: for every target of a desired state, whether the pod serves it, through which
 * interface and from which source address, to which endpoints. Pure. No back end's rule text: the
 * iptables lines are the iptables stage's (rules.ts targetLines), so the nftables back end never
 * holds them (B5: ~1.8 MiB of strings at 1,000 Services × 10). The
 * per-target part (targetWork) depends on the target's own fields only, so incremental.ts can
 * keep it from one sync to the next.
 */
import { networkKey } from '../../annotations/service-network.js';
import { compareText } from '../../order.js';
import { normalizeAddress, placedEndpoints, validPort } from './endpoints.js';
import { serviceChainName, SIDECAR_LAYOUT, type Layout } from './names.js';
import { flat } from './flat.js';
import type { ChosenEndpoint, DesiredState, IpFamily, PodInterface, Protocol, Resolution, ResolvedTarget, ServicePortTarget, SkippedTarget } from './model.js';

const PROTOCOLS: readonly Protocol[] = ['TCP', 'UDP', 'SCTP'];
const MAX_AFFINITY_SECONDS = 86400;

/** Per-target work that depends only on the target's own fields: validation, chain, endpoints. */
export type TargetWork =
  | { readonly ok: false; readonly reason: string }
  | {
      readonly ok: true;
      readonly clusterIP: string;
      readonly chain: string;
      /** cluster IP|protocol|port: one target per such triple. */
      readonly portKey: string;
      readonly endpoints: readonly ChosenEndpoint[];
      readonly choice: ResolvedTarget['choice'];
      readonly warnings: readonly string[];
      /** What it resolved to last time (memo; valid while interface and source stay the same). */
      resolved?: ResolvedTarget;
    };

/** Where resolveTargets keeps per-target work between calls (incremental.ts); NO_MEMO keeps none. */
export interface WorkMemo {
  /** Called once per resolution, before it: what the previous one did not use may be forgotten. */
  rotate(): void;
  get(t: ServicePortTarget): TargetWork | undefined;
  set(t: ServicePortTarget, work: TargetWork): void;
  /** Set by resolveTargets: position of each served target of its input in its output. */
  positions: Map<ServicePortTarget, number> | undefined;
}

const NO_MEMO: WorkMemo = {
  rotate: () => undefined,
  get: () => undefined,
  set: () => undefined,
  get positions() {
    return undefined;
  },
  set positions(_: Map<ServicePortTarget, number> | undefined) {},
};

function describe(t: ServicePortTarget): string {
  return `${t.service}:${t.portName === '' ? t.port : t.portName}/${t.protocol} (${t.clusterIP})`;
}

/** Sort key that keeps output stable whatever order the informers delivered things in. */
function targetOrder(a: ServicePortTarget, b: ServicePortTarget): number {
  return (
    compareText(a.service, b.service) ||
    compareText(a.portName, b.portName) ||
    compareText(a.protocol, b.protocol) ||
    a.family - b.family ||
    compareText(a.clusterIP, b.clusterIP) ||
    compareText(networkKey(a.network), networkKey(b.network)) ||
    a.port - b.port
  );
}
/** A target that is not served, and why. */
const bad = (reason: string): TargetWork => ({ ok: false, reason });

export function targetWork(t: ServicePortTarget, layout: Layout = SIDECAR_LAYOUT): TargetWork {
  // No closures here (a first sync calls it per target; a named one costs a defineProperty per call in the bundle, keepNames).
  if (t.family !== 4 && t.family !== 6) return bad(`family ${JSON.stringify(t.family)} is not 4 or 6`);
  const clusterIP = normalizeAddress(t.clusterIP, t.family);
  if (clusterIP === undefined) return bad(`cluster IP ${JSON.stringify(t.clusterIP)} is not an IPv${t.family} address; the Service's spec.clusterIPs must hold plain addresses`);
  if (!PROTOCOLS.includes(t.protocol)) return bad(`protocol ${JSON.stringify(t.protocol)} is not one of TCP, UDP, SCTP`);
  if (!validPort(t.port)) return bad(`port ${JSON.stringify(t.port)} is not a number from 1 to 65535`);
  const aff = t.affinityTimeoutSeconds;
  if (aff !== undefined && !(Number.isInteger(aff) && aff >= 1 && aff <= MAX_AFFINITY_SECONDS)) {
    return bad(`sessionAffinityConfig.clientIP.timeoutSeconds ${JSON.stringify(aff)} is not a whole number from 1 to ${MAX_AFFINITY_SECONDS}`);
  }
  const warnings: string[] = [];
  // The target's description only when an endpoint is dropped (it names the target in the message).
  const chosen = placedEndpoints(
    t,
    (m) => warnings.push(m),
    () => describe(t),
  );
  const chain = serviceChainName(t, layout.serviceChainPrefix, clusterIP);
  return {
    ok: true,
    clusterIP,
    chain,
    portKey: flat(`${clusterIP}|${t.protocol}|${t.port}`),
    endpoints: chosen.endpoints,
    choice: chosen.choice,
    warnings,
  };
}

export function sameNetwork(a: PodInterface['network'], b: PodInterface['network']): boolean {
  return a.name === b.name && a.namespace === b.namespace;
}

function skippedTarget(t: ServicePortTarget, reason: string, level: SkippedTarget['level']): SkippedTarget {
  return { target: describe(t), reason, level };
}
/** One pod interface on a served network, with its source address per family. */
interface PodSource {
  readonly key: string;
  readonly iface: PodInterface;
  readonly source: Partial<Record<IpFamily, string>>;
}

/** The pod's interfaces, the first per network, each with its first valid address per family. The pod has a handful: found by comparing fields, no key string per target. */
function podSources(interfaces: readonly PodInterface[]): PodSource[] {
  const out: PodSource[] = [];
  for (const i of interfaces) {
    if (out.some((x) => sameNetwork(x.iface.network, i.network))) continue;
    const source: Partial<Record<IpFamily, string>> = {};
    for (const family of [4, 6] as const) {
      const found = (family === 4 ? i.ipv4 : i.ipv6).map((a) => normalizeAddress(a, family)).find((a) => a !== undefined);
      if (found !== undefined) source[family] = found;
    }
    out.push({ key: networkKey(i.network), iface: i, source });
  }
  return out;
}

/** A served target through `iface` from `source`, with the work decided for it. */
function resolvedTarget(t: ServicePortTarget, work: Extract<TargetWork, { ok: true }>, iface: string, source: string): ResolvedTarget {
  const { clusterIP, chain } = work;
  const base: ResolvedTarget = {
    target: t,
    clusterIP,
    chain,
    interface: iface,
    source,
    endpoints: work.endpoints,
    choice: work.choice,
    route: { family: t.family, dst: clusterIP, dev: iface, src: source },
  };
  return t.affinityTimeoutSeconds === undefined ? base : { ...base, affinitySeconds: t.affinityTimeoutSeconds };
}

/**
 * Decides, for every target, whether the pod serves it and how. A cluster IP is routed through
 * one interface only (the route carries one source address), so when one cluster IP appears on two
 * networks the pod has, the first network in sort order wins and the other targets are skipped
 * with a warning; the same (cluster IP, protocol, port) twice keeps the first.
 */
export function resolveTargets(state: DesiredState, memo: WorkMemo = NO_MEMO, layout: Layout = SIDECAR_LAYOUT): Resolution {
  memo.rotate();
  const skipped: SkippedTarget[] = [];
  const warnings: string[] = [];
  const ifaces = podSources(state.interfaces);
  const ipOwner = new Map<string, PodSource>(); // cluster IP -> the interface it leaves through
  const portOwner = new Set<string>(); // cluster IP|proto|port
  const chainOwner = new Set<string>();
  const out: ResolvedTarget[] = [];
  // Where each served target of `state` landed in `out`: what a later patchRender edits.
  const positions = new Map<ServicePortTarget, number>();
  memo.positions = positions;
  // No closures in this loop: at 5,000 targets per sync, allocation is what costs.
  const sorted = [...state.targets].sort(targetOrder);
  for (let i = 0; i < sorted.length; i += 1) {
    const t = sorted[i] as ServicePortTarget;
    let work = memo.get(t);
    if (work === undefined) {
      work = targetWork(t, layout);
      memo.set(t, work);
    }
    if (!work.ok) {
      skipped.push(skippedTarget(t, work.reason, 'warn'));
      continue;
    }
    let found: PodSource | undefined;
    for (const x of ifaces) if (sameNetwork(x.iface.network, t.network)) found = x;
    if (found === undefined) {
      skipped.push(skippedTarget(t, `the pod has no interface on network ${networkKey(t.network)}`, 'info'));
      continue;
    }
    const source = found.source[t.family];
    if (source === undefined) {
      skipped.push(skippedTarget(t, `the pod's interface ${found.iface.interface} on network ${found.key} has no IPv${t.family} address`, 'info'));
      continue;
    }
    const { clusterIP, chain } = work;
    const owner = ipOwner.get(clusterIP);
    if (owner !== undefined && owner !== found) {
      skipped.push(skippedTarget(t, `cluster IP ${clusterIP} is already served through network ${owner.key}; one cluster IP can leave through one interface only`, 'warn'));
      continue;
    }
    if (chainOwner.has(chain) || portOwner.has(work.portKey)) {
      skipped.push(skippedTarget(t, `${t.protocol} port ${t.port} of cluster IP ${clusterIP} is listed twice; the first entry is used`, 'warn'));
      continue;
    }
    ipOwner.set(clusterIP, found);
    portOwner.add(work.portKey);
    chainOwner.add(chain);
    if (work.warnings.length > 0) warnings.push(...work.warnings);
    // An unchanged target through the same interface resolves to the very same object as last
    // time: fewer allocations per sync, and identical arrays compare in O(1) downstream.
    const last = work.resolved;
    positions.set(t, out.length);
    if (last !== undefined && last.interface === found.iface.interface && last.source === source) {
      out.push(last);
      continue;
    }
    const resolved = resolvedTarget(t, work, found.iface.interface, source);
    work.resolved = resolved;
    out.push(resolved);
  }
  return { targets: out, skipped, warnings };
}
