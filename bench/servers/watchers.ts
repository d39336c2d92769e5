/**
 * B7's load: `count` watchers in one process, each built as the sidecar builds its informers (its
 * own client and connection; a pod informer by field selector, a Service informer by the proxy
 * label, an EndpointSlice informer by network label, with the sidecar's transforms). Reports over
 * IPC: `synced` once every informer has listed, `seen` for each watcher that receives an update of
 * the probe slice (with the time), and `counts` every 250 ms: cumulative list and watch requests,
 * failed ones, and TLS connections opened / completed / failed in the handshake (tls.connect is
 * wrapped for the count: this process is the bench's, not the product's).
 * argv: count mode(cache|quorum|h2; h2 = cache over one HTTP/2 connection per client).
 * Connection from MULTUS_PROXY_BENCH_CONN (JSON).
 */
import tls from 'node:tls';
import { createKubeClient, type KubeClient, type ListOptions } from '../../src/kube/client.js';
import type { KubeConnection } from '../../src/kube/config.js';
import { createInformer, type Informer } from '../../src/kube/informer.js';
import { apiPath } from '../../src/kube/paths.js';
import { MANAGED_BY, MANAGED_BY_LABEL, NETWORK_LABEL, PROXY_NAME, PROXY_NAME_LABEL } from '../../src/keys.js';
import { networkLabelValue } from '../../src/annotations/network-label.js';
import type { KubeObject, V1EndpointSlice, V1Pod, V1Service } from '../../src/kube/types.js';
import { createLogger } from '../../src/log.js';
import { slimEndpointSlice, slimPod, slimService } from '../../cmd/sidecar/slim.js';
import { BENCH_NAMESPACE, NETWORK } from '../lib/services.js';
import { PROBE_SLICE, ZERO_COUNTS, type WatcherCounts } from '../lib/watchers-ipc.js';

const count = Number(process.argv[2]);
const mode = process.argv[3];
const listFrom = mode === 'quorum' ? 'quorum' : 'cache';
const raw = JSON.parse(process.env['MULTUS_PROXY_BENCH_CONN'] ?? '{}') as KubeConnection & { ca?: string };
const conn: KubeConnection = { ...raw, ...(raw.ca ? { ca: Buffer.from(raw.ca) } : {}) };
const logger = createLogger('b7');
const send = (m: unknown): void => void process.send?.(m);

const counts: WatcherCounts = { ...ZERO_COUNTS };
const connect = tls.connect.bind(tls) as (...args: unknown[]) => tls.TLSSocket;
(tls as { connect: unknown }).connect = (...args: unknown[]): tls.TLSSocket => {
  const socket = connect(...args);
  counts.tlsOpened++;
  let secure = false;
  socket.once('secureConnect', () => {
    secure = true;
    counts.tlsDone++;
  });
  socket.once('close', () => {
    if (!secure) counts.tlsFailed++;
  });
  return socket;
};

/** The client, counting list and watch requests that failed (the informer then backs off). */
function counted(inner: KubeClient): KubeClient {
  const fail = (e: unknown): never => {
    counts.failed++;
    throw e;
  };
  return {
    get: (p, o) => inner.get(p, o),
    create: (p, b, o) => inner.create(p, b, o),
    replace: (p, b, o) => inner.replace(p, b, o),
    patch: (p, b, t, o) => inner.patch(p, b, t, o),
    delete: (p, o) => inner.delete(p, o),
    requestCount: () => inner.requestCount(),
    list: <T>(p: string, o?: ListOptions) => {
      counts.lists++;
      return inner.list<T>(p, o).catch(fail);
    },
    watch: (p, o, on, s) => {
      counts.watches++;
      return inner.watch(p, o, on, s).catch(fail);
    },
  };
}

const informers: Informer<KubeObject>[] = [];
// The old behaviour: quorum lists and an immediate relist after 410.
const common = { logger, listFrom, ...(listFrom === 'quorum' ? { relistJitterMs: 0 } : {}) } as const;
for (let i = 0; i < count; i++) {
  const client = counted(createKubeClient(conn, { http2: mode === 'h2' }));
  const pods = createInformer<V1Pod>(client, { ...common, name: 'pod', path: apiPath('', 'v1', 'pods', BENCH_NAMESPACE), fieldSelector: `metadata.name=b7-client-${i}`, transform: slimPod });
  const services = createInformer<V1Service>(client, { ...common, name: 'services', path: apiPath('', 'v1', 'services'), labelSelector: `${PROXY_NAME_LABEL}=${PROXY_NAME}`, transform: slimService });
  const slices = createInformer<V1EndpointSlice>(client, {
    ...common,
    name: 'endpointslices',
    path: apiPath('discovery.k8s.io', 'v1', 'endpointslices'),
    labelSelector: `${MANAGED_BY_LABEL}=${MANAGED_BY},${NETWORK_LABEL} in (${networkLabelValue(NETWORK)})`,
    transform: slimEndpointSlice,
  });
  slices.on({
    update: (s) => {
      if (s.metadata?.name === PROBE_SLICE) send({ type: 'seen', watcher: i, at: Date.now(), rv: s.metadata.resourceVersion });
    },
  });
  informers.push(pods, services, slices);
}
for (const inf of informers) inf.start();
void Promise.all(informers.map((i) => i.synced)).then(() => send({ type: 'synced' }));
setInterval(() => send({ type: 'counts', at: Date.now(), counts }), 250);
if (process.env['B7_TRACE'] === '1') {
  const started = Date.now();
  const progress = setInterval(() => {
    const n = informers.filter((i) => i.hasSynced()).length;
    process.stderr.write(`watchers ${process.pid}: +${Math.round((Date.now() - started) / 1000)} s, ${n} of ${informers.length} informers synced, ${JSON.stringify(counts)}\n`);
    if (n === informers.length) clearInterval(progress);
  }, 5000);
}
process.on('disconnect', () => process.exit(0));
