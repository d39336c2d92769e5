/**
 * Deployment-like churn against a real kube-apiserver, and the controller's share of "endpoints
 * leave before their pod stops": from the moment a watch sees a pod's deletionTimestamp to the
 * moment a watch sees the Service's EndpointSlice with that pod's endpoint `terminating: true`.
 * Used by the real-apiserver test (deletion-latency.test.ts) and by benchmark B9.
 *
 * Standing in for the ReplicaSet controller and the kubelet (there are none in the harness):
 * - scale down: the surplus pods are deleted without options, so the apiserver applies their
 *   grace period (they are scheduled: spec.nodeName) and keeps them with deletionTimestamp set;
 * - `stopAfterMs` later the "kubelet" writes Ready=False and then deletes the pod with grace 0;
 * - scale up: new pods are created and their status written Running and Ready.
 * Both watches run in a watcher process of their own (deletion-watch.ts); times are taken there, on receipt.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { resolve as resolvePath } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { createKubeClient, type KubeClient } from '../../src/kube/client.js';
import { NETWORK_STATUS_ANNOTATION } from '../../src/keys.js';
import type { KubeConnection } from '../../src/kube/config.js';
import { networkStatus } from '../unit/controller/fixtures.js';
import { inParallel } from '../harness/parallel.js';
import { createPod, createService, podPath, setPodStatus } from './helpers.js';
import { watchDeletions, type PodTimes } from './deletion-watch.js';

export interface ChurnOptions {
  readonly connection: KubeConnection;
  /** The same admin as a kubeconfig file, for the child processes (the watcher, the background churn). */
  readonly kubeconfig: string;
  readonly namespace: string;
  /** Pods deleted with a grace period before the churn stops. */
  readonly deletions: number;
  /** Replicas alternate between these two. */
  readonly high: number;
  readonly low: number;
  /** Pause after each scale step. */
  readonly stepMs: number;
  /** From the graceful delete until the "kubelet" marks the pod not Ready and removes it. */
  readonly stopAfterMs: number;
  /** Give up on one deletion's slice after this long (it counts as missing). */
  readonly timeoutMs?: number;
  /**
   * Other Services' churn that needs slice writes but is no user-visible event: `services` other
   * Services of one pod each, whose network-status address is rewritten every `everyMs` (all of
   * them at once, as a burst of Multus annotation writes or a rollout elsewhere would be). It
   * fills the controller's queue, which is what a deletion may wait behind. It runs in a child
   * process (background-churn-proc.ts), apart from the churn script and the watcher.
   */
  readonly background?: { readonly services: number; readonly everyMs: number };
}

export interface ChurnResult {
  /** ms, one per deletion whose terminating endpoint was seen. */
  readonly deletionToTerminating: number[];
  /** ms, one per new pod: its Ready seen → its endpoint ready in a slice seen. */
  readonly readyToReady: number[];
  /** Pods whose terminating endpoint was never seen before the pod was removed or the timeout. */
  readonly missing: string[];
  /** Each deleted pod's sightings (the watcher's clock, ms since the epoch), for deletion-breakdown.ts. */
  readonly victims: (PodTimes & { readonly pod: string })[];
}

export const CHURN_SERVICE = 'web';
const LABELS = { app: CHURN_SERVICE };
const WRITE_CONCURRENCY = 16;
const BACKGROUND_PROC = resolvePath(import.meta.dirname, 'background-churn-proc.ts');

/** The background churn: starts it and returns its stop function (which waits for the last round). */
export async function startBackground(admin: KubeClient, ns: string, net: string, b: { readonly services: number; readonly everyMs: number }): Promise<() => Promise<void>> {
  const names = Array.from({ length: b.services }, (_, i) => `bg-${i}`);
  const status = (i: number, round: number): string => networkStatus([{ name: net, ips: [`10.78.${round % 2}.${i + 1}`] }]);
  await inParallel(names, WRITE_CONCURRENCY, async (n, i) => {
    await createService(admin, ns, n, { network: 'net', selector: { app: n } });
    await createPod(admin, ns, n, { labels: { app: n }, status: status(i, 0), nodeName: 'churn-node' });
  });
  let stopped = false;
  const loop = (async (): Promise<void> => {
    for (let round = 1; !stopped; round++) {
      await sleep(b.everyMs);
      if (stopped) break;
      await inParallel(names, WRITE_CONCURRENCY, (n, i) => admin.patch(podPath(ns, n), { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: status(i, round) } } }, 'merge'));
    }
  })();
  return async () => {
    stopped = true;
    await loop;
  };
}

/** The background churn in a child process; resolves once its Services and pods exist. */
async function startBackgroundProc(kubeconfig: string, ns: string, b: NonNullable<ChurnOptions['background']>): Promise<() => Promise<void>> {
  const child = spawn(process.execPath, ['--import', 'tsx', BACKGROUND_PROC, kubeconfig, ns, String(b.services), String(b.everyMs)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(child, 'exit');
  const lines = createInterface({ input: child.stdout });
  const ready = new Promise<void>((resolve, reject) => {
    lines.on('line', (l) => (l === 'ready' ? resolve() : undefined));
    void exited.then(([code]) => reject(new Error(`background churn exited with ${String(code)} before it was ready`)));
  });
  await ready;
  return async () => {
    child.kill('SIGTERM');
    await exited;
  };
}

/** Runs the churn in `namespace` (which must exist, with the controller watching it) and returns the latencies. */
export async function runDeletionChurn(o: ChurnOptions): Promise<ChurnResult> {
  const admin = createKubeClient(o.connection);
  const ns = o.namespace;
  const net = `${ns}/net`;
  const watch = watchDeletions(o.kubeconfig, ns);
  await watch.synced;

  const live: string[] = [];
  const removals: Promise<void>[] = [];
  let serial = 0;
  const status = (i: number): string => networkStatus([{ name: net, ips: [`10.77.${Math.floor(i / 250) % 250}.${(i % 250) + 1}`] }]);
  const scaleUp = async (to: number): Promise<void> => {
    const names: string[] = [];
    while (live.length + names.length < to) names.push(`${CHURN_SERVICE}-${serial++}`);
    await Promise.all(names.map((n, k) => createPod(admin, ns, n, { labels: LABELS, status: status(serial - names.length + k), nodeName: 'churn-node' })));
    live.push(...names);
  };
  const finalize = async (name: string): Promise<void> => {
    await sleep(o.stopAfterMs);
    await setPodStatus(admin, ns, name, { ready: false });
    await admin.delete(podPath(ns, name), { gracePeriodSeconds: 0 });
  };
  let deleted = 0;
  const victims: string[] = [];
  let stopBackground = async (): Promise<void> => undefined;
  try {
    await createService(admin, ns, CHURN_SERVICE, { network: 'net', selector: LABELS });
    await scaleUp(o.high);
    if (o.background !== undefined) stopBackground = await startBackgroundProc(o.kubeconfig, ns, o.background);
    while (deleted < o.deletions) {
      await sleep(o.stepMs);
      const down = live.splice(0, Math.min(live.length - o.low, o.deletions - deleted));
      // As the ReplicaSet controller does: the surplus at once, each with the pod's grace period.
      await Promise.all(down.map((n) => admin.delete(podPath(ns, n))));
      victims.push(...down);
      deleted += down.length;
      for (const n of down) removals.push(finalize(n));
      await sleep(o.stepMs);
      if (deleted < o.deletions) await scaleUp(o.high);
    }
    await Promise.all(removals);
    const deadline = Date.now() + (o.timeoutMs ?? 10_000);
    while (Date.now() < deadline && victims.some((v) => !watch.terminatingSeen(v))) await sleep(50);
  } finally {
    await stopBackground();
    await watch.stop();
  }
  const { ms: deletionToTerminating, missing } = watch.deletionToTerminating(victims);
  return { deletionToTerminating, readyToReady: watch.readyToReady(), missing, victims: victims.map((pod) => ({ pod, ...watch.times(pod) })) };
}
