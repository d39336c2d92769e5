/**
 * The watches behind "pod deletion → slice write": a pod informer and an EndpointSlice informer on
 * one namespace, each event timestamped on receipt. Per pod: when its deletionTimestamp was first
 * seen, when it was first seen Ready, and, per slice manager
 * (`endpointslice.kubernetes.io/managed-by`), when a slice first listed its endpoint terminating
 * and ready. B9 and its test read our controller's slices in a private apiserver; the soak on the
 * real node reads ours and the kube endpointslice-controller's side by side.
 *
 * The watches run in a child process of their own (deletion-watch-proc.ts), which does nothing but
 * watch and timestamp: in the benchmark or test process a receipt time waits for whatever that
 * process is doing (the soak reads smaps, runs crictl and kubectl, the churn script writes pods),
 * and two events that arrive while it is busy get the same time. The child streams each first
 * sighting as a line with its own receipt time; the parent only records them (`DeletionRecord`),
 * so the parent's own delays cannot change a latency.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import os from 'node:os';
import { resolve as resolvePath } from 'node:path';
import { createInterface } from 'node:readline';

/** Any manager: for a namespace where only one writes slices. */
export const ANY_MANAGER = '*';

/**
 * One first sighting, as the watcher process sends it. `at` is ms since the epoch with sub-ms
 * precision (the watcher's performance.timeOrigin + performance.now()); only differences between
 * sightings of the one watcher are used as latencies.
 */
export type Sighting =
  | { readonly kind: 'deleting' | 'ready'; readonly pod: string; readonly at: number }
  | { readonly kind: 'listed' | 'terminating' | 'sliceReady'; readonly pod: string; readonly manager: string; readonly at: number };

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

/** A pod's sightings, ms since the epoch (the watcher's clock). */
export interface PodTimes {
  readonly readyAt?: number;
  readonly deletingAt?: number;
  readonly terminatingAt?: number;
}

/** What the sightings say; no IO. */
export class DeletionRecord {
  private readonly seen = new Map<string, Seen>();
  private readonly order: string[] = [];

  private at(name: string): Seen {
    let s = this.seen.get(name);
    if (s === undefined) this.seen.set(name, (s = { terminating: new Map(), sliceReady: new Map(), listed: new Map() }));
    return s;
  }

  /** Records a sighting; only the first of each kind (per pod, and per manager for slices) counts. */
  add(x: Sighting): void {
    const s = this.at(x.pod);
    switch (x.kind) {
      case 'deleting':
        if (s.deleting === undefined) {
          s.deleting = x.at;
          this.order.push(x.pod);
        }
        return;
      case 'ready':
        s.ready ??= x.at;
        return;
      default:
        for (const k of [x.manager, ANY_MANAGER]) if (!s[x.kind].has(k)) s[x.kind].set(k, x.at);
    }
  }

  /** Pods whose deletionTimestamp was seen, in the order seen. */
  deleted(): string[] {
    return [...this.order];
  }

  terminatingSeen(pod: string, manager = ANY_MANAGER): boolean {
    return this.seen.get(pod)?.terminating.has(manager) ?? false;
  }

  deletionToTerminating(victims: readonly string[], manager = ANY_MANAGER): DeletionLatencies {
    const ms: number[] = [];
    const missing: string[] = [];
    const neverListed: string[] = [];
    for (const v of victims) {
      const s = this.seen.get(v);
      const t = s?.terminating.get(manager);
      const listed = s?.listed.get(manager);
      if (s?.deleting !== undefined && t !== undefined) ms.push(t - s.deleting);
      else if (s?.deleting !== undefined && (listed === undefined || listed > s.deleting)) neverListed.push(v);
      else missing.push(v);
    }
    return { ms, missing, neverListed };
  }

  times(pod: string, manager = ANY_MANAGER): PodTimes {
    const s = this.seen.get(pod);
    const t = s?.terminating.get(manager);
    return { ...(s?.ready !== undefined ? { readyAt: s.ready } : {}), ...(s?.deleting !== undefined ? { deletingAt: s.deleting } : {}), ...(t !== undefined ? { terminatingAt: t } : {}) };
  }

  readyToReady(manager = ANY_MANAGER): number[] {
    return [...this.seen.values()].flatMap((s) => {
      const t = s.sliceReady.get(manager);
      return s.ready !== undefined && t !== undefined ? [t - s.ready] : [];
    });
  }
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
  /** When the pod was first seen Ready, seen deleting, and seen terminating in a slice of `manager`. */
  times(pod: string, manager?: string): PodTimes;
  /** Pod Ready seen → its endpoint ready in a slice of `manager` seen, ms, per pod that has both. */
  readyToReady(manager?: string): number[];
  /** Stops the watcher process; resolves once its last sighting is recorded. */
  stop(): Promise<void>;
}

const PROC = resolvePath(import.meta.dirname, 'deletion-watch-proc.ts');
/** The watcher's scheduling priority (root only; ignored otherwise): its receipt times are the measurement. */
const WATCHER_NICE = -5;

/** Starts the watcher process on `namespace` (admin via `kubeconfig`). */
export function watchDeletions(kubeconfig: string, namespace: string): DeletionWatch {
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', PROC, kubeconfig, namespace], { stdio: ['ignore', 'pipe', 'pipe'] });
  try {
    if (child.pid !== undefined) os.setPriority(child.pid, WATCHER_NICE);
  } catch {
    // not root: the default priority
  }
  const record = new DeletionRecord();
  const stderr: string[] = [];
  const exited = once(child, 'exit');
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const closed = once(lines, 'close');
  let onSynced = (): void => undefined;
  const synced = new Promise<void>((resolve, reject) => {
    onSynced = resolve;
    void exited.then(([code]) => reject(new Error(`deletion watcher (${namespace}) exited with ${String(code)} before it synced: ${stderr.join('').slice(-1000)}`)));
  });
  synced.catch(() => undefined);
  lines.on('line', (l) => {
    if (l === 'synced') return onSynced();
    record.add(JSON.parse(l) as Sighting);
  });
  (child.stderr as NodeJS.ReadableStream).on('data', (d: Buffer) => void stderr.push(d.toString()));
  return {
    synced,
    deleted: () => record.deleted(),
    terminatingSeen: (pod, manager) => record.terminatingSeen(pod, manager),
    deletionToTerminating: (victims, manager) => record.deletionToTerminating(victims, manager),
    times: (pod, manager) => record.times(pod, manager),
    readyToReady: (manager) => record.readyToReady(manager),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await Promise.all([exited, closed]);
    },
  };
}
