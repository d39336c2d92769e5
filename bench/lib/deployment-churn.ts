/**
 * A Deployment scaling between two sizes, without a ReplicaSet controller or a kubelet (the
 * harness has neither): scale-down deletes the surplus pods with their grace period (they are
 * scheduled, so the apiserver keeps them with a deletionTimestamp), and a second later the
 * "kubelet" writes Ready=False and removes them; scale-up creates pods and writes them Running and
 * Ready. Each new pod gets a new secondary address, as a real one would. What the soak
 * did on the real node (nginx between 2 and 4 replicas), faster, for the memory bench (B12).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeClient } from '../../src/kube/client.js';
import { createPod, createService, podPath, setPodStatus, svcPath } from '../../test/controller/helpers.js';
import { networkStatus } from '../../test/unit/controller/fixtures.js';

export interface ScaleChurn {
  /** Scale steps done so far (each one a scale-down or a scale-up). */
  steps(): number;
  /** Deletes every pod and creates as many new ones (a rollout restart). */
  replaceAll(): Promise<void>;
  /** Stops after the current step and waits for the pending removals. */
  stop(): Promise<void>;
}

export interface ScaleChurnOptions {
  readonly namespace: string;
  /** The Service's network as its annotation names it (`name` in its namespace, or `ns/name`). */
  readonly network: string;
  /** The network's `namespace/name`, as Multus writes it in network-status. */
  readonly networkKey: string;
  readonly high: number;
  readonly low: number;
  readonly stepMs: number;
  /** Second octet pair of the pods' addresses (10.<a>.x.y), distinct per churn. */
  readonly addressBase: number;
  /** The node the pods are scheduled to (graceful deletion needs one). */
  readonly nodeName: string;
  readonly onError: (e: unknown) => void;
}

const APP = 'web';
const STOP_AFTER_MS = 1_000;

/** Creates the Service `web` (NodePort, so a node agent serves it too) and starts scaling. */
export async function startScaleChurn(client: KubeClient, o: ScaleChurnOptions): Promise<ScaleChurn> {
  await createService(client, o.namespace, APP, { network: o.network, selector: { app: APP } });
  await client.patch(svcPath(o.namespace, APP), { spec: { type: 'NodePort' } }, 'merge');
  const live: string[] = [];
  const removals = new Set<Promise<void>>();
  let serial = 0;
  let steps = 0;
  let stopped = false;
  const address = (i: number): string => `10.${o.addressBase}.${Math.floor(i / 250) % 250}.${(i % 250) + 1}`;
  const up = async (to: number): Promise<void> => {
    const names: string[] = [];
    while (live.length + names.length < to) names.push(`${APP}-${serial++}`);
    await Promise.all(
      names.map((n) =>
        createPod(client, o.namespace, n, { labels: { app: APP }, status: networkStatus([{ name: o.networkKey, ips: [address(Number(n.slice(APP.length + 1)))] }]), nodeName: o.nodeName }),
      ),
    );
    live.push(...names);
  };
  const remove = (name: string): void => {
    const p = (async (): Promise<void> => {
      await sleep(STOP_AFTER_MS);
      await setPodStatus(client, o.namespace, name, { ready: false });
      await client.delete(podPath(o.namespace, name), { gracePeriodSeconds: 0 });
    })()
      .catch(o.onError)
      .finally(() => removals.delete(p));
    removals.add(p);
  };
  const down = async (to: number): Promise<void> => {
    const victims = live.splice(0, Math.max(0, live.length - to));
    await Promise.all(victims.map((n) => client.delete(podPath(o.namespace, n))));
    victims.forEach(remove);
  };
  await up(o.high);
  const loop = (async (): Promise<void> => {
    while (!stopped) {
      await sleep(o.stepMs);
      if (stopped) break;
      try {
        await (live.length > o.low ? down(o.low) : up(o.high));
        steps++;
      } catch (e) {
        o.onError(e);
      }
    }
  })();
  return {
    steps: () => steps,
    async replaceAll() {
      const n = live.length;
      await down(0);
      await up(n);
    },
    async stop() {
      stopped = true;
      await loop;
      await Promise.all([...removals]);
    },
  };
}
