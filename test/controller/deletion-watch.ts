/**
 * The watches behind "pod deletion → slice write": a pod informer and an EndpointSlice informer on
 * one namespace, each event timestamped on receipt (performance.now()). Per pod: when its
 * deletionTimestamp was first seen, when it was first seen Ready, and, per slice manager
 * (`endpointslice.kubernetes.io/managed-by`), when a slice first listed its endpoint terminating
 * and ready. B9 and its test read our controller's slices in a private apiserver; the soak on the
 * real node reads ours and the kube endpointslice-controller's side by side.
 */
import { performance } from 'node:perf_hooks';
import type { KubeClient } from '../../src/kube/client.js';
import { createInformer } from '../../src/kube/informer.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1EndpointSlice, V1Pod } from '../../src/kube/types.js';
import { MANAGED_BY_LABEL } from '../../src/keys.js';
import { createLogger } from '../../src/log.js';

/** Any manager: for a namespace where only one writes slices. */
export const ANY_MANAGER = '*';

interface Seen {
  deleting?: number;
  ready?: number;
  /** By manager (and ANY_MANAGER). */
  terminating: Map<string, number>;
  sliceReady: Map<string, number>;
  /** First listed in a slice at all (any condition). */
  listed: Map<string, number>;
}

export interface DeletionLatencies {
  /** ms, one per victim whose terminating endpoint was seen after its deletion was. */
  readonly ms: number[];
  /** Victims whose deletion or terminating endpoint was never seen. */
  readonly missing: string[];
  /** Victims no slice of the manager listed before their deletion (deleted before they had an address): not counted. */
  readonly neverListed: string[];
}

export interface DeletionWatch {
  /** Both informers listed. */
  readonly synced: Promise<void>;
  /** Pods whose deletionTimestamp was seen, in the order seen. */
  deleted(): string[];
  /** Whether a slice of `manager` listed the pod's endpoint terminating. */
  terminatingSeen(pod: string, manager?: string): boolean;
  /** Deletion seen → endpoint terminating seen in a slice of `manager`, for each victim. */
  deletionToTerminating(victims: readonly string[], manager?: string): DeletionLatencies;
  /** When the pod was first seen Ready and seen deleting, ms since the epoch. */
  times(pod: string): { readyAt?: number; deletingAt?: number };
  /** Pod Ready seen → its endpoint ready in a slice of `manager` seen, ms, per pod that has both. */
  readyToReady(manager?: string): number[];
  stop(): void;
}

function isReady(p: V1Pod): boolean {
  return (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

export function watchDeletions(client: KubeClient, namespace: string): DeletionWatch {
  const seen = new Map<string, Seen>();
  const order: string[] = [];
  const at = (name: string): Seen => {
    let s = seen.get(name);
    if (s === undefined) seen.set(name, (s = { terminating: new Map(), sliceReady: new Map(), listed: new Map() }));
    return s;
  };
  const logger = createLogger('deletion-watch', 'error');
  const pods = createInformer<V1Pod>(client, { logger, name: 'pods', path: apiPath('', 'v1', 'pods', namespace) });
  const slices = createInformer<V1EndpointSlice>(client, { logger, name: 'slices', path: apiPath('discovery.k8s.io', 'v1', 'endpointslices', namespace) });
  const onPod = (p: V1Pod): void => {
    const now = performance.now();
    const name = p.metadata?.name ?? '';
    const s = at(name);
    if (s.deleting === undefined && p.metadata?.deletionTimestamp != null) {
      s.deleting = now;
      order.push(name);
    }
    if (s.ready === undefined && isReady(p) && p.metadata?.deletionTimestamp == null) s.ready = now;
  };
  const first = (m: Map<string, number>, manager: string, now: number): void => {
    for (const k of [manager, ANY_MANAGER]) if (!m.has(k)) m.set(k, now);
  };
  const onSlice = (sl: V1EndpointSlice): void => {
    const now = performance.now();
    const manager = sl.metadata?.labels?.[MANAGED_BY_LABEL] ?? '';
    for (const e of sl.endpoints ?? []) {
      const name = e.targetRef?.name;
      if (name === undefined) continue;
      const s = at(name);
      first(s.listed, manager, now);
      if (e.conditions?.terminating === true) first(s.terminating, manager, now);
      if (e.conditions?.ready === true) first(s.sliceReady, manager, now);
    }
  };
  pods.on({ add: onPod, update: onPod, delete: () => undefined });
  slices.on({ add: onSlice, update: onSlice, delete: () => undefined });
  pods.start();
  slices.start();
  return {
    synced: Promise.all([pods.synced, slices.synced]).then(() => undefined),
    deleted: () => [...order],
    terminatingSeen: (pod, manager = ANY_MANAGER) => seen.get(pod)?.terminating.has(manager) ?? false,
    deletionToTerminating(victims, manager = ANY_MANAGER) {
      const ms: number[] = [];
      const missing: string[] = [];
      const neverListed: string[] = [];
      for (const v of victims) {
        const s = seen.get(v);
        const t = s?.terminating.get(manager);
        const listed = s?.listed.get(manager);
        if (s?.deleting !== undefined && t !== undefined) ms.push(t - s.deleting);
        else if (s?.deleting !== undefined && (listed === undefined || listed > s.deleting)) neverListed.push(v);
        else missing.push(v);
      }
      return { ms, missing, neverListed };
    },
    times(pod) {
      const s = seen.get(pod);
      const epoch = (t: number | undefined): { at?: number } => (t === undefined ? {} : { at: performance.timeOrigin + t });
      const r = epoch(s?.ready).at;
      const d = epoch(s?.deleting).at;
      return { ...(r !== undefined ? { readyAt: r } : {}), ...(d !== undefined ? { deletingAt: d } : {}) };
    },
    readyToReady: (manager = ANY_MANAGER) =>
      [...seen.values()].flatMap((s) => {
        const t = s.sliceReady.get(manager);
        return s.ready !== undefined && t !== undefined ? [t - s.ready] : [];
      }),
    stop() {
      pods.stop();
      slices.stop();
    },
  };
}
