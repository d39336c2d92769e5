/**
 * The apiserver's own write time beside a running soak: the floor under any
 * controller's "pod deletion -> slice write". Once a second (jittered) it replaces an EndpointSlice
 * of its own, the write our controller makes when it marks an endpoint terminating (PUT with the
 * last answer's resourceVersion, the same client as the controller's), and times the round trip.
 * It also reads the apiserver's and etcd's own histograms at the start and the end, so the server
 * side of every EndpointSlice write in the window (ours, kube's controller's and this probe's) is
 * reported too.
 *
 * With --watch NS it also writes the moment it sees a pod of NS get its deletionTimestamp, beside
 * the controller's own write for that deletion: the floor where it matters, as a scale-down makes
 * the kubelet, the ReplicaSet controller and both slice controllers write at once.
 *
 *   node --import tsx bench/apiserver-floor.ts --kubeconfig F --namespace PREFIX --minutes M [--watch NS] [--out F]
 *
 * The slice carries managed-by `apiserver-floor` and no service-name label, so no controller, kube's
 * included, and no load balancer reads it; it lives in a namespace of its own, deleted at the end.
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { get as httpsGet } from 'node:https';
import { createKubeClient, isNotFound } from '../src/kube/client.js';
import { fromKubeconfigFiles, type KubeConnection } from '../src/kube/config.js';
import { createInformer } from '../src/kube/informer.js';
import { apiPath } from '../src/kube/paths.js';
import type { V1Pod } from '../src/kube/types.js';
import { createLogger } from '../src/log.js';
import { histogram, shareUnder } from './lib/prom-histogram.js';
import { summarize, type Summary } from '../test/harness/stats.js';

interface Slice {
  apiVersion: 'discovery.k8s.io/v1';
  kind: 'EndpointSlice';
  metadata: { name: string; namespace: string; resourceVersion?: string; labels: Record<string, string> };
  addressType: 'IPv4';
  endpoints: { addresses: string[]; conditions: { ready: boolean; serving: boolean; terminating: boolean } }[];
  ports: { name: string; port: number; protocol: 'TCP' }[];
}

const NAME = 'apiserver-floor';

function slice(ns: string, round: number): Slice {
  // Four endpoints, one of them flipping to terminating each round: the shape and size of our write.
  const endpoints = [1, 2, 3, 4].map((i) => {
    const terminating = i === 1 + (round % 4);
    return { addresses: [`192.0.2.${i}`], conditions: { ready: !terminating, serving: true, terminating } };
  });
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: NAME, namespace: ns, labels: { 'endpointslice.kubernetes.io/managed-by': 'apiserver-floor' } },
    addressType: 'IPv4',
    endpoints,
    ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
  };
}

const SERIES = [
  { name: 'apiserver: EndpointSlice PUT', metric: 'apiserver_request_duration_seconds', match: { verb: 'PUT', resource: 'endpointslices' } },
  { name: 'apiserver: EndpointSlice POST', metric: 'apiserver_request_duration_seconds', match: { verb: 'POST', resource: 'endpointslices' } },
  { name: 'apiserver: Pod PATCH', metric: 'apiserver_request_duration_seconds', match: { verb: 'PATCH', resource: 'pods' } },
  { name: 'etcd (from the apiserver): EndpointSlice update', metric: 'etcd_request_duration_seconds', match: { operation: 'update', type: 'endpointslices.discovery.k8s.io' } },
] as const;

/** /metrics is text, which the client (JSON only) does not read: one plain HTTPS GET with the same credentials. */
function metrics(conn: KubeConnection): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = httpsGet(
      `${conn.server}/metrics`,
      {
        ...(conn.ca ? { ca: conn.ca } : {}),
        ...(conn.cert ? { cert: conn.cert } : {}),
        ...(conn.key ? { key: conn.key } : {}),
        ...(conn.token ? { headers: { authorization: `Bearer ${conn.token}` } } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => (res.statusCode === 200 ? resolve(Buffer.concat(chunks).toString('utf8')) : reject(new Error(`GET /metrics: HTTP ${res.statusCode}`))));
      },
    );
    req.on('error', reject);
  });
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { kubeconfig: { type: 'string' }, namespace: { type: 'string' }, minutes: { type: 'string' }, out: { type: 'string' }, watch: { type: 'string' } } });
  if (!values.kubeconfig || !values.namespace || !values.minutes) throw new Error('usage: --kubeconfig F --namespace NS --minutes M [--out F]');
  // A fresh name each run: a namespace deleted by the previous run may still be terminating.
  const ns = `${values.namespace}-${Date.now().toString(36)}`;
  const conn = fromKubeconfigFiles([values.kubeconfig]);
  const client = createKubeClient(conn);
  const path = `/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`;
  // A namespace of its own, removed at the end, so the soak's objects and watchers never see the probe's.
  await client.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } }).catch((e: unknown) => {
    if (!String(e).includes('AlreadyExists') && !String(e).includes('409')) throw e;
  });
  const before = await metrics(conn).catch((e: unknown) => `# ${String(e)}`);
  let rv = (await client.create<Slice>(path, slice(ns, 0))).metadata.resourceVersion;
  const samples: { at: string; ms: number; trigger: 'timer' | 'deletion' }[] = [];
  let round = 1;
  let gone = false;
  // One write at a time, as the controller writes one Service's slice at a time.
  let chain: Promise<void> = Promise.resolve();
  const write = (trigger: 'timer' | 'deletion'): Promise<void> =>
    (chain = chain.then(async () => {
      if (gone) return;
      const body = slice(ns, round++);
      body.metadata.resourceVersion = rv;
      const t0 = performance.now();
      try {
        rv = (await client.replace<Slice>(`${path}/${NAME}`, body)).metadata.resourceVersion;
        samples.push({ at: new Date().toISOString(), ms: performance.now() - t0, trigger });
      } catch (e) {
        if (isNotFound(e)) gone = true;
        else {
          console.error(`write ${round}: ${String(e)}`);
          rv = (await client.get<Slice>(`${path}/${NAME}`).catch(() => undefined))?.metadata.resourceVersion;
        }
      }
    }));
  const seen = new Set<string>();
  let stopWatch = (): void => undefined;
  if (values.watch) {
    const pods = createInformer<V1Pod>(client, { logger: createLogger('apiserver-floor', 'error'), name: 'pods', path: apiPath('', 'v1', 'pods', values.watch) });
    const onPod = (p: V1Pod): void => {
      const name = p.metadata?.name ?? '';
      if (p.metadata?.deletionTimestamp == null || seen.has(name)) return;
      seen.add(name);
      void write('deletion');
    };
    pods.on({ add: onPod, update: onPod, delete: () => undefined });
    pods.start();
    await pods.synced;
    stopWatch = () => pods.stop();
  }
  const end = Date.now() + Number(values.minutes) * 60_000;
  let stop = false;
  process.on('SIGTERM', () => (stop = true));
  process.on('SIGINT', () => (stop = true));
  while (!stop && !gone && Date.now() < end) {
    await new Promise((r) => setTimeout(r, 500 + Math.random() * 1000));
    await write('timer');
    const timed = samples.filter((x) => x.trigger === 'timer');
    if (timed.length % 300 === 0 && timed.length > 0) {
      const s = summarize(timed.slice(-300).map((x) => x.ms));
      const d = summarize(samples.filter((x) => x.trigger === 'deletion').map((x) => x.ms));
      console.log(
        `${new Date().toISOString()} last 300 timed writes p50 ${s.median.toFixed(1)} p90 ${s.p90.toFixed(1)} p99 ${s.p99.toFixed(1)} max ${s.max.toFixed(1)} ms; at deletions so far (${d.n}) p50 ${d.median.toFixed(1)} p90 ${d.p90.toFixed(1)} p99 ${d.p99.toFixed(1)} max ${d.max.toFixed(1)} ms`,
      );
    }
  }
  stopWatch();
  await chain;
  const after = await metrics(conn).catch((e: unknown) => `# ${String(e)}`);
  await client.delete(`${path}/${NAME}`).catch(() => undefined);
  await client.delete(`/api/v1/namespaces/${ns}`).catch(() => undefined);
  const timer: Summary = summarize(samples.filter((x) => x.trigger === 'timer').map((x) => x.ms));
  const atDeletion: Summary = summarize(samples.filter((x) => x.trigger === 'deletion').map((x) => x.ms));
  const server = SERIES.map((s) => ({ series: s.name, ...shareUnder(histogram(before, s.metric, s.match), histogram(after, s.metric, s.match)) }));
  const over50 = (k: 'timer' | 'deletion'): number => samples.filter((x) => x.trigger === k && x.ms > 50).length;
  const result = { command: process.argv.join(' '), timer, atDeletion, over50ms: { timer: over50('timer'), deletion: over50('deletion') }, server, samples };
  if (values.out) writeFileSync(values.out, `${JSON.stringify(result, null, 1)}\n`);
  console.log(JSON.stringify({ timer, atDeletion, over50ms: result.over50ms, server: server.map((s) => ({ ...s, under: s.under.filter(([b]) => b <= 1) })) }));
}

await main();
