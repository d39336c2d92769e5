/**
 * A throwaway first sync's pure part, run while the sidecar's informers list.
 *
 * Why: a first nftables full sync renders every Service port once, in a process that has run none
 * of that code, so it runs in the interpreter and the baseline tier with a small young generation
 * (docs/decisions/0026-first-sync-fills-maps-over-netlink.md). The informers' list is network-bound and
 * leaves this process idle, so rendering a small synthetic state then (render, nftables stage,
 * full plan: the functions the real sync calls) compiles that code before the real state arrives:
 * ~300 Services cost 25–34 ms CPU and the next 1,000-Service render took 26–38 ms instead of 45–69.
 *
 * Nothing of it is kept: its own RenderCache and NftStage, no command, no kernel. The dataplane
 * (create.ts) schedules it with setImmediate and skips it if the first real sync started first, so
 * it never delays one. `warmUpDue` and `warmUpState` are pure; `warmUpRender` is CPU only.
 */
import type { BackendKind } from '../../core/seam.js';
import type { BackendEndpoint, DesiredState, PodInterface, ServicePortTarget } from '../../core/model.js';
import { render, RenderCache } from '../../core/incremental.js';
import { NftStage } from '../stage.js';
import { planNft } from '../render.js';
import { planFirstFill } from './first-fill.js';
import { encodeIntervalMapBatch } from '../netlink-batch.js';

/** A new dataplane: whether its program asks for the warm-up (DataplaneOptions.warmUp), its rule back end. */
export interface WarmUpFor {
  readonly asked: boolean;
  readonly rules: BackendKind;
}

/**
 * Whether a new dataplane warms its first sync's render up: only where its program asks (the
 * sidecar's run mode, idle while its informers list) and that sync is an nftables one (what this
 * warms is the nftables stage and plan; only that was measured). Pure.
 */
export function warmUpDue(p: WarmUpFor): boolean {
  return p.asked && p.rules === 'nftables';
}

/** Service ports in the warm-up: enough for the JIT to compile the per-target code, a fraction of a large state's cost. */
export const WARM_UP_SERVICES = 300;
const ENDPOINTS = 5;

/** Addresses from 198.18.0.0/15 (RFC 2544, benchmarking): never written anywhere, so they only need to be valid. */
function addr(k: number): string {
  return `198.${18 + ((k >> 16) & 1)}.${(k >> 8) & 255}.${k & 255}`;
}

/**
 * N Service ports on one network, shaped as a sidecar's state usually is (one TCP port, ready
 * endpoints in text order), with a few of the rarer shapes (UDP, session affinity, a terminating
 * endpoint) so those paths are compiled too. Valid: it renders without warnings. Pure.
 */
export function warmUpState(services: number = WARM_UP_SERVICES): DesiredState {
  const network = { namespace: 'multus-proxy-warm-up', name: 'net' };
  const iface: PodInterface = { network, interface: 'net1', ipv4: [addr(0x1fffe)], ipv6: [] };
  const targets: ServicePortTarget[] = [];
  for (let i = 0; i < services; i++) {
    const endpoints: BackendEndpoint[] = [];
    for (let j = 0; j < ENDPOINTS; j++) {
      const terminating = i % 10 === 3 && j === 0;
      endpoints.push({ ip: addr(0x10000 + i * ENDPOINTS + j + 1), port: 8080, ready: !terminating, serving: true, terminating });
    }
    targets.push({
      service: `warm-up/svc-${i}`,
      portName: 'http',
      protocol: i % 10 === 7 ? 'UDP' : 'TCP',
      clusterIP: addr(i + 10),
      port: 80,
      family: 4,
      network,
      endpoints,
      ...(i % 10 === 5 ? { affinityTimeoutSeconds: 10800 } : {}),
    });
  }
  return { targets, interfaces: [iface] };
}

/** The table's shape the real sync uses (the dataplane's options), so the same paths are warmed. */
export interface WarmUpShape {
  readonly maxEndpointMaps?: number;
  readonly portsPerShard?: number;
}

/**
 * One render + nftables stage step + full plan of the synthetic state, with caches of its own, and
 * the first fill's plan and batch (first-fill.ts: what a first sync into an empty namespace
 * sends); returns the texts' and the batch's lengths (kept live, so nothing is optimised away).
 */
export function warmUpRender(shape: WarmUpShape = {}, state: DesiredState = warmUpState()): number {
  const rendered = render(state, new RenderCache());
  const next = new NftStage(shape.maxEndpointMaps, shape.portsPerShard).step(rendered);
  const fill = planFirstFill(next);
  const batch = fill?.fill === undefined ? 0 : fill.fill.chunks.reduce((n, c) => n + encodeIntervalMapBatch(c.writes, 1).bytes.length, 0);
  return planNft(next, undefined, true, []).text.length + (fill?.text.length ?? 0) + batch;
}
