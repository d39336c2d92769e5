/**
 * Leadership under a partition, with two real controller processes on one Lease. The leader
 * (ctl-a) reaches the apiserver through the harness's TCP proxy; the standby (ctl-b) directly.
 * The proxy then goes `deaf`: ctl-a's requests no longer arrive but its open watches still
 * deliver, so it keeps seeing pod changes and keeps wanting to write (the dangerous case: with the
 * old flag-based check its renew hung for the client's 60 s request timeout and it kept writing).
 *
 * Shown: ctl-a sends no write (create/update/patch/delete, lease renews included) after its renew
 * deadline, counted from its own request counter on /metrics, sampled every 100 ms; it exits 1
 * within a moment of that deadline; ctl-b takes over after a lease duration and converges the
 * slices. The hand-over time (cut -> ctl-b holds the lease) is printed.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { apiPath } from '../../src/kube/paths.js';
import { useControlPlane, uniqueName, type ControlPlane } from '../harness/controlplane.js';
import { startTcpProxy, type TcpProxy } from '../harness/tcpproxy.js';
import { waitFor } from '../harness/wait.js';
import { networkStatus } from '../unit/controller/fixtures.js';
import { createPod, createService, ourSlices, sliceAddresses } from './helpers.js';
import { leaseHolder, readyz, startControllerProc, tail, type Proc } from './procs.js';

const LEASE_MS = 3000;
const RENEW_MS = 2000;
const RETRY_MS = 500;
const SERVICES = 12;
/** Sampling period of ctl-a's request counter. */
const SAMPLE_MS = 100;
const WRITE_VERBS = ['create', 'update', 'patch', 'delete'];

interface Sample {
  at: number;
  writes: number;
}

/** Sum of ctl-a's write requests from its /metrics (undefined once it has exited). */
async function writesOf(p: Proc): Promise<number | undefined> {
  try {
    const text = await (await fetch(`http://127.0.0.1:${p.port ?? 0}/metrics`, { signal: AbortSignal.timeout(1000) })).text();
    let n = 0;
    for (const m of text.matchAll(/^multus_proxy_controller_kube_requests_total\{verb="(\w+)"\} (\d+)$/gm)) if (WRITE_VERBS.includes(m[1] ?? '')) n += Number(m[2]);
    return n;
  } catch {
    return undefined;
  }
}

void describe('controller leadership under a partition (two processes, TCP proxy)', () => {
  let cp: ControlPlane;
  let ns: string;
  let proxy: TcpProxy | undefined;
  const procs: Proc[] = [];
  const holder = (): Promise<string | undefined> => leaseHolder(cp.client, ns);
  const start = (identity: string, kubeconfig: string): Proc => {
    const p = startControllerProc({ kubeconfig, namespace: ns, identity, leaseMs: LEASE_MS, renewMs: RENEW_MS, retryMs: RETRY_MS, extraArgs: ['--workers', String(SERVICES)] });
    procs.push(p);
    return p;
  };

  before(async () => {
    cp = await useControlPlane();
    ns = uniqueName('part');
    await cp.createNamespace(ns);
  });

  after(async () => {
    for (const p of procs) if (p.exitCode === undefined) p.child.kill('SIGKILL');
    await proxy?.close();
    await cp?.client.delete(apiPath('', 'v1', 'namespaces', undefined, ns));
    await cp?.stop();
  });

  void test('a leader cut off sends no write after its renew deadline; the standby takes over after a lease duration', async () => {
    const server = new URL(cp.server);
    proxy = await startTcpProxy(Number(server.port));
    const viaProxy = join(cp.dir, `${ns}-via-proxy.kubeconfig`);
    writeFileSync(viaProxy, readFileSync(cp.kubeconfigPath, 'utf8').replace(cp.server, `https://127.0.0.1:${proxy.port}`), { mode: 0o600 });

    const a = start('ctl-a', viaProxy);
    await waitFor(
      'ctl-a leads',
      async () => (await holder()) === 'ctl-a',
      30_000,
      () => tail(a),
    );
    const b = start('ctl-b', cp.kubeconfigPath);
    await waitFor(
      'both ready',
      async () => a.port !== undefined && b.port !== undefined && (await readyz(a)) === 200 && (await readyz(b)) === 200,
      30_000,
      () => tail(b),
    );

    const status = (ip: string): string => networkStatus([{ name: `${ns}/macvlan1`, ips: [ip] }]);
    for (let i = 0; i < SERVICES; i++) await createService(cp.client, ns, `web${i}`, { network: 'macvlan1', selector: { app: `web${i}` } });
    await createPod(cp.client, ns, 'p0', { labels: { app: 'web0' }, status: status('10.8.0.100') });
    await waitFor(
      'ctl-a writes',
      async () => sliceAddresses(await ourSlices(cp.client, ns, 'web0')).join() === '10.8.0.100',
      15_000,
      () => tail(a),
    );

    // Sample ctl-a's write counter until the end of the test.
    const samples: Sample[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const writes = await writesOf(a);
        if (writes !== undefined) samples.push({ at: Date.now(), writes });
        await delay(SAMPLE_MS);
      }
    })();

    const cutAt = Date.now();
    proxy.setMode('deaf');
    // Pod changes keep coming, one Service after another, so ctl-a (which still hears its
    // watches) has new work before and after its deadline, and ctl-b has work once it leads.
    const pods: string[] = ['10.8.0.100'];
    let creating = true;
    const creator = (async () => {
      for (let k = 1; creating && k < 60; k++) {
        const ip = `10.8.0.${k}`;
        await createPod(cp.client, ns, `p${k}`, { labels: { app: `web${k % SERVICES}` }, status: status(ip) });
        pods.push(ip);
        await delay(300);
      }
    })();

    let handover: number;
    try {
      await waitFor(
        'ctl-b takes over',
        async () => (await holder()) === 'ctl-b',
        20_000,
        () => `${tail(a)}\n---\n${tail(b)}`,
      );
      handover = Date.now() - cutAt;
      // More pod changes after the hand-over, then ctl-a has had ample time to exit.
      await delay(Math.max(1500, cutAt + RENEW_MS + 3000 - Date.now()));
    } finally {
      creating = false;
      sampling = false;
      await creator;
      await sampler;
    }

    const deadline = cutAt + RENEW_MS;
    const atDeadline = samples.filter((s) => s.at >= deadline);
    const before = samples.filter((s) => s.at < deadline);
    const lastBefore = before[before.length - 1]?.writes ?? 0;
    // The first sample after the deadline may include writes sent up to the deadline; nothing after it may grow.
    const first = atDeadline[0]?.writes ?? lastBefore;
    const late = atDeadline.filter((s) => s.writes > first);
    assert.ok(samples.length > 5, `ctl-a was sampled (${samples.length} samples)`);
    assert.deepEqual(late, [], `ctl-a sent writes after its renew deadline (${first} at the deadline): ${JSON.stringify(late)}`);
    assert.notEqual(a.exitCode, undefined, `ctl-a still runs ${Date.now() - cutAt} ms after the cut: ${tail(a)}`);
    const exitAfter = (a.exitedAt ?? 0) - cutAt;
    assert.equal(a.exitCode, 1, tail(a));
    assert.ok(
      a.logs.some((l) => l.includes('could not renew within the renew deadline')),
      tail(a),
    );
    // Its last successful renew was sent before the cut, so its deadline is at most cut + RENEW_MS.
    assert.ok(exitAfter <= RENEW_MS + 1000, `ctl-a exited ${exitAfter} ms after the cut (renew deadline ${RENEW_MS} ms)`);
    assert.ok(handover >= LEASE_MS - RETRY_MS, `hand-over ${handover} ms is shorter than a lease duration: the standby took a live lease`);
    assert.ok(handover <= LEASE_MS + RENEW_MS + 3 * RETRY_MS, `hand-over took ${handover} ms`);

    // ctl-b converges every Service to the pods created, those made during the partition included.
    const want = (i: number): string =>
      pods
        .filter((_, k) => k % SERVICES === i)
        .sort()
        .join();
    await waitFor(
      'ctl-b converges',
      async () => {
        for (let i = 0; i < SERVICES; i++) if (sliceAddresses(await ourSlices(cp.client, ns, `web${i}`)).join() !== want(i)) return false;
        return true;
      },
      20_000,
      () => tail(b),
    );
    process.stdout.write(
      `# partition: hand-over ${handover} ms (lease ${LEASE_MS} ms, renew deadline ${RENEW_MS} ms, retry ${RETRY_MS} ms); ctl-a exited ${exitAfter} ms after the cut; ` +
        `its writes: ${lastBefore} before the deadline, ${samples[samples.length - 1]?.writes ?? lastBefore} at its last sample\n`,
    );
  });
});
