/**
 * Endpoints leave before their pod stops: under Deployment-like churn, with
 * other Services' churn filling the controller's queue, every gracefully deleted pod's endpoint is
 * published `terminating: true` (ready false) while the pod object still exists, and quickly.
 *
 * The bound, p99 ≤ 500 ms over 20 deletions, is 10× the target (p99 ≤ 50 ms) so that a
 * loaded 2-core machine (etcd, apiserver, the controller, the churn script and other test files)
 * does not flake it: B9 measures p99 in the tens of ms here with the urgent lane, and hundreds of
 * ms with it off under the same background (docs/benchmarks.md). With 20 samples, p99 is
 * (interpolated) the worst deletion. That bound holds without the urgent lane too at this
 * background (B9: p99 ~130 ms), so it guards the behaviour, not the fast path; the second test
 * does: one pod change puts BURST Services' writes in the queue, and a deletion that follows must
 * be published before most of them, which a FIFO queue never does. The controller runs as a
 * child process, as deployed.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { createKubeClient } from '../../src/kube/client.js';
import { createInformer } from '../../src/kube/informer.js';
import type { V1EndpointSlice } from '../../src/kube/types.js';
import { createLogger } from '../../src/log.js';
import { NETWORK_STATUS_ANNOTATION, SERVICE_NAME_LABEL } from '../../src/keys.js';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { networkStatus } from '../unit/controller/fixtures.js';
import { createPod, createService, ourSlices, podPath, slicePath } from './helpers.js';
import { leaseHolder, startControllerProc, tail, type Proc } from './procs.js';
import { interpose } from '../harness/interpose.js';
import { parseOptions } from '../../cmd/controller/options.js';
import { startController, type RunningController } from '../../cmd/controller/run.js';
import { runDeletionChurn } from './deletion-churn.js';

const DELETIONS = 20;
/** The controller's default: 2 workers. */
const WORKERS = 2;
const BOUND_P99_MS = 500;
const BURST = 120;
const BURST_ROUNDS = 3;

function p99(samples: readonly number[]): number {
  const s = [...samples].sort((a, b) => a - b);
  const pos = (s.length - 1) * 0.99;
  const lo = s[Math.floor(pos)] ?? NaN;
  const hi = s[Math.ceil(pos)] ?? NaN;
  return lo + (hi - lo) * (pos - Math.floor(pos));
}

void describe('controller: pod deletion → terminating endpoint (real apiserver, controller process)', () => {
  let cp: ControlPlane;
  let ns: string;
  let proc: Proc | undefined;

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('del');
    await cp.createNamespace(ns);
    proc = startControllerProc({ kubeconfig: cp.kubeconfigPath, namespace: ns, identity: 'del-1', leaseMs: 15_000, renewMs: 10_000, retryMs: 2000 });
    await waitFor(
      'controller leading',
      async () => (await leaseHolder(cp.client, ns)) === 'del-1',
      60_000,
      () => tail(proc as Proc),
    );
  });

  after(async () => {
    proc?.child.kill('SIGTERM');
    await cp?.stop();
  });

  void test(`every deleted pod is terminating in the slice before it is gone; p99 over ${DELETIONS} deletions ≤ ${BOUND_P99_MS} ms with a busy queue`, async (t) => {
    const r = await runDeletionChurn({
      connection: cp.connection,
      kubeconfig: cp.kubeconfigPath,
      namespace: ns,
      deletions: DELETIONS,
      high: 4,
      low: 2,
      stepMs: 400,
      stopAfterMs: 1000,
      background: { services: 40, everyMs: 500 },
    });
    const sorted = [...r.deletionToTerminating].sort((a, b) => a - b).map((x) => Math.round(x));
    assert.deepEqual(r.missing, [], `pods removed without their endpoint ever shown terminating; latencies ms: ${sorted.join(' ')}`);
    assert.equal(r.deletionToTerminating.length, DELETIONS);
    t.diagnostic(`deletion → terminating, ms, sorted: ${sorted.join(' ')}`);
    const worst = p99(r.deletionToTerminating);
    assert.ok(worst <= BOUND_P99_MS, `p99 ${worst.toFixed(0)} ms > ${BOUND_P99_MS} ms; latencies ms: ${sorted.join(' ')}\n${tail(proc as Proc)}`);
  });

  void test(`a deletion is published before the burst of ${BURST} other Services' writes queued just before it (the urgent lane)`, async (t) => {
    const net = `${ns}/net`;
    const shared = (round: number): string => networkStatus([{ name: net, ips: [`10.79.0.${round + 1}`] }]);
    const victimIp = (round: number): string => `10.79.1.${round + 1}`;
    // BURST Services that all select one pod: one change of its address is BURST slice writes.
    await createPod(cp.client, ns, 'shared', { labels: { burst: 'yes' }, status: shared(0), nodeName: 'n1' });
    for (let i = 0; i < BURST; i++) await createService(cp.client, ns, `burst-${i}`, { network: 'net', selector: { burst: 'yes' } });
    await createService(cp.client, ns, 'victims', { network: 'net', selector: { victim: 'yes' } });
    for (let round = 0; round < BURST_ROUNDS; round++) {
      await createPod(cp.client, ns, `victim-${round}`, { labels: { victim: 'yes' }, status: networkStatus([{ name: net, ips: [victimIp(round)] }]), nodeName: 'n1' });
    }

    const watcher = createKubeClient(cp.connection);
    const slices = createInformer<V1EndpointSlice>(watcher, { logger: createLogger('test-watch', 'error'), name: 'slices', path: slicePath(ns) });
    const burstSeen = new Map<string, number>();
    let victimSeen: number | undefined;
    let round = 0;
    const onSlice = (sl: V1EndpointSlice): void => {
      const svc = sl.metadata?.labels?.[SERVICE_NAME_LABEL] ?? '';
      const addrs = (sl.endpoints ?? []).flatMap((e) => e.addresses);
      if (svc.startsWith('burst-') && addrs.includes(`10.79.0.${round + 2}`) && !burstSeen.has(svc)) burstSeen.set(svc, performance.now());
      const v = (sl.endpoints ?? []).find((e) => e.addresses.includes(victimIp(round)));
      if (svc === 'victims' && v?.conditions?.terminating === true && victimSeen === undefined) victimSeen = performance.now();
    };
    slices.on({ add: onSlice, update: onSlice, delete: () => undefined });
    slices.start();
    try {
      await slices.synced;
      await waitFor(
        'every burst Service and the victims published',
        () => slices.list().filter((sl) => /^(burst-\d+|victims)$/.test(sl.metadata?.labels?.[SERVICE_NAME_LABEL] ?? '') && (sl.endpoints ?? []).length > 0).length === BURST + 1,
        60_000,
      );
      const report: string[] = [];
      for (; round < BURST_ROUNDS; round++) {
        burstSeen.clear();
        victimSeen = undefined;
        // One write that queues BURST keys, then the deletion right behind it.
        await cp.client.patch(podPath(ns, 'shared'), { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: shared(round + 1) } } }, 'merge');
        await cp.client.delete(podPath(ns, `victim-${round}`));
        await waitFor('the victim terminating and the burst written', () => victimSeen !== undefined && burstSeen.size === BURST, 60_000);
        const at = victimSeen ?? Infinity;
        const before = [...burstSeen.values()].filter((t) => t < at).length;
        report.push(`round ${round}: ${before} of ${BURST} burst writes seen before the victim's`);
        assert.ok(before < BURST / 2, `the deletion waited behind the burst: ${report.join('; ')}\n${tail(proc as Proc)}`);
      }
      t.diagnostic(report.join('; '));
    } finally {
      slices.stop();
    }
  });
});

void describe('controller: a deletion does not wait for a free worker (real apiserver, in-process controller, held writes)', () => {
  let cp: ControlPlane;
  let ns: string;
  let ctl: RunningController | undefined;
  /** Writes of the `held-*` Services' slices wait for this gate while it is closed. */
  let gate: { closed: boolean; open: () => void; opened: Promise<void>; held: number } = { closed: false, open: () => undefined, opened: Promise.resolve(), held: 0 };
  const close = (): void => {
    let open = (): void => undefined;
    const opened = new Promise<void>((r) => (open = r));
    gate = { closed: true, open: () => ((gate.closed = false), open()), opened, held: 0 };
  };
  const hold = async (body: unknown): Promise<void> => {
    const svc = (body as V1EndpointSlice).metadata?.labels?.[SERVICE_NAME_LABEL] ?? '';
    if (!gate.closed || !svc.startsWith('held-')) return;
    gate.held += 1;
    await gate.opened;
  };

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('delw');
    await cp.createNamespace(ns);
    const client = interpose(createKubeClient(cp.connection), {
      create: async (path, body, opts) => (await hold(body), cp.client.create(path, body, opts)),
      replace: async (path, body, opts) => (await hold(body), cp.client.replace(path, body, opts)),
    });
    const r = parseOptions(
      [
        '--health-port',
        '0',
        '--health-host',
        '127.0.0.1',
        '--leader-elect',
        'false',
        '--resync',
        '0',
        '--manage-sidecar-rbac',
        'false',
        '--watch-nodes',
        'false',
        '--namespace',
        ns,
        '--workers',
        String(WORKERS),
      ],
      {},
    );
    if (!r.ok || r.value === 'help') throw new Error('bad test options');
    ctl = await startController(client, r.value, createLogger('controller', process.env['LOG_LEVEL'] ?? 'warn'));
    await waitFor('controller ready', () => ctl?.isReady() === true);
  });

  after(async () => {
    gate.open();
    await ctl?.stop();
    await cp?.stop();
  });

  void test(`with all ${WORKERS} workers stuck in other Services' slice writes, a pod's deletion is still published terminating`, async () => {
    const net = `${ns}/net`;
    const addr = (i: number, round: number): string => networkStatus([{ name: net, ips: [`10.80.${round}.${i + 1}`] }]);
    for (let i = 0; i < WORKERS; i++) {
      await createService(cp.client, ns, `held-${i}`, { network: 'net', selector: { held: String(i) } });
      await createPod(cp.client, ns, `held-${i}`, { labels: { held: String(i) }, status: addr(i, 0), nodeName: 'n1' });
    }
    await createService(cp.client, ns, 'victims', { network: 'net', selector: { victim: 'yes' } });
    await createPod(cp.client, ns, 'victim', { labels: { victim: 'yes' }, status: networkStatus([{ name: net, ips: ['10.80.9.1'] }]), nodeName: 'n1' });
    let last: V1EndpointSlice['endpoints'] = [];
    const endpoint = async (svc: string): Promise<V1EndpointSlice['endpoints']> => (last = (await ourSlices(cp.client, ns, svc)).flatMap((sl) => sl.endpoints ?? []));
    await waitFor(
      'every Service published',
      async () => (await Promise.all([...Array.from({ length: WORKERS }, (_, i) => `held-${i}`), 'victims'].map(endpoint))).every((e) => (e ?? []).length === 1),
      30_000,
    );

    close();
    try {
      // Every worker takes one held Service's write and waits in it.
      for (let i = 0; i < WORKERS; i++) await cp.client.patch(podPath(ns, `held-${i}`), { metadata: { annotations: { [NETWORK_STATUS_ANNOTATION]: addr(i, 1) } } }, 'merge');
      await waitFor(`${WORKERS} writes held`, () => gate.held === WORKERS, 15_000);
      await cp.client.delete(podPath(ns, 'victim'));
      await waitFor(
        'the victim published terminating while the other writes are still held',
        async () => (await endpoint('victims'))?.[0]?.conditions?.terminating === true,
        10_000,
        () => `held writes: ${gate.held}; the last endpoints read: ${JSON.stringify(last)}`,
      );
      assert.equal(gate.closed, true);
    } finally {
      gate.open();
    }
  });
});
