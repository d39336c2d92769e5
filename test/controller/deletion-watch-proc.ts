/**
 * The watcher process of deletion-watch.ts: `node --import tsx deletion-watch-proc.ts KUBECONFIG
 * NAMESPACE`. Watches the namespace's pods and EndpointSlices and does nothing else, so a receipt
 * time is the time the event arrived. Prints `synced` once both informers listed, then one JSON
 * line per first sighting (a `Sighting`); exits on SIGTERM.
 */
import { performance } from 'node:perf_hooks';
import { createKubeClient } from '../../src/kube/client.js';
import { fromKubeconfigFiles } from '../../src/kube/config.js';
import { createInformer } from '../../src/kube/informer.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1EndpointSlice, V1Pod } from '../../src/kube/types.js';
import { MANAGED_BY_LABEL } from '../../src/keys.js';
import { createLogger } from '../../src/log.js';
import type { Sighting } from './deletion-watch.js';

const [kubeconfig = '', namespace = ''] = process.argv.slice(2);
const client = createKubeClient(fromKubeconfigFiles([kubeconfig]));
const logger = createLogger('deletion-watch', 'error');
const now = (): number => performance.timeOrigin + performance.now();

/** First sightings only: the parent keeps the first anyway, and fewer lines cost less. */
const sent = new Set<string>();
const send = (x: Sighting): void => {
  const key = `${x.kind}\u0000${x.pod}\u0000${'manager' in x ? x.manager : ''}`;
  if (sent.has(key)) return;
  sent.add(key);
  process.stdout.write(`${JSON.stringify(x)}\n`);
};

function isReady(p: V1Pod): boolean {
  return (p.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');
}

const onPod = (p: V1Pod): void => {
  const at = now();
  const pod = p.metadata?.name ?? '';
  if (p.metadata?.deletionTimestamp != null) send({ kind: 'deleting', pod, at });
  else if (isReady(p)) send({ kind: 'ready', pod, at });
};
const onSlice = (sl: V1EndpointSlice): void => {
  const at = now();
  const manager = sl.metadata?.labels?.[MANAGED_BY_LABEL] ?? '';
  for (const e of sl.endpoints ?? []) {
    const pod = e.targetRef?.name;
    if (pod === undefined) continue;
    send({ kind: 'listed', pod, manager, at });
    if (e.conditions?.terminating === true) send({ kind: 'terminating', pod, manager, at });
    if (e.conditions?.ready === true) send({ kind: 'sliceReady', pod, manager, at });
  }
};

const pods = createInformer<V1Pod>(client, { logger, name: 'pods', path: apiPath('', 'v1', 'pods', namespace) });
const slices = createInformer<V1EndpointSlice>(client, { logger, name: 'slices', path: apiPath('discovery.k8s.io', 'v1', 'endpointslices', namespace) });
pods.on({ add: onPod, update: onPod, delete: () => undefined });
slices.on({ add: onSlice, update: onSlice, delete: () => undefined });
pods.start();
slices.start();
await Promise.all([pods.synced, slices.synced]);
process.stdout.write('synced\n');
process.once('SIGTERM', () => {
  pods.stop();
  slices.stop();
  process.exit(0);
});
