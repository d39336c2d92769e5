/**
 * The sidecar at its budget stays under its container limit (128 Mi), counting everything its
 * cgroup is charged for: the real sidecar program in a network namespace, against a real
 * kube-apiserver, in a memory cgroup (v1) of its own with the container's limit, so the `nft` or
 * `iptables-restore` child and the kernel memory of the rules it loads count as they do in a pod.
 *
 * The load is the largest one tenant objects can make on one network within the budgets
 * (src/object-budgets.ts, src/service-cap.ts): the default cap of 2,000 targets, as 20 Services
 * of 100 ports (as many as one EndpointSlice carries), each with a slice of 10 endpoints. Asserted: the sidecar
 * becomes ready with every target programmed, the cgroup never hit its limit, and the peak is
 * under it. The peak, the sidecar's and its largest child's private memory are printed (the
 * numbers in docs/decisions/0153-sidecar-memory-at-the-budget.md and
 * docs/decisions/0195-first-fill-in-bounded-transactions.md come from here). The cgroup is
 * cgroup v1's memory controller, which this machine has; the test fails where it is missing.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { binDir, useControlPlane } from '../harness/controlplane.js';
import { startBackend, type Topology } from '../harness/netns.js';
import type { V1Service } from '../../src/kube/types.js';
import { waitFor } from '../harness/wait.js';
import { apiPath } from '../../src/kube/paths.js';
import { DEFAULT_MAX_SERVICES_PER_NETWORK } from '../../src/sidecar-contract.js';
import { MALLOC_ENV } from '../../src/memory-settings.js';
import { serviceObject, sliceObject } from './state-fixtures.js';
import { createClientPod, metricsText, probe, spawnSidecar, startHttpLoop, startSidecarEnv, type SidecarEnv } from './runtime-harness.js';

const LIMIT = 128 * 1024 * 1024;
const CGROUP_ROOT = '/sys/fs/cgroup/memory';
/** The EndpointSlice API's limit on ports per slice (a Service's budget, 256, is above it). */
const PORTS = 100;
const SERVICES = DEFAULT_MAX_SERVICES_PER_NETWORK / PORTS;
const ENDPOINTS = 10;
/** The first Service port of every Service. */
const PORTS_BASE = 1000;
const MiB = (b: number): string => (b / 1024 / 1024).toFixed(1);

/** Private (anonymous) bytes of a process, 0 once it is gone. */
function privateBytes(pid: number): number {
  try {
    const m = /^Anonymous:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return Number(m?.[1] ?? 0) * 1024;
  } catch {
    return 0;
  }
}

/** A process's command line, its words joined by spaces ('' once it is gone). */
function commandOf(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
}

function children(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((t) => readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
  } catch {
    return [];
  }
}

void describe('sidecar memory at the budget, child and rules included', () => {
  let env: SidecarEnv;
  let topo: Topology;
  let distDir = '';
  /** Service s0's cluster IP, whose endpoints answer on PORTS_BASE. */
  let webIP = '';

  before(async () => {
    // The program as the image runs it (one bundle), not the TypeScript sources through tsx, whose
    // compiler would be charged to the cgroup too.
    distDir = mkdtempSync(join(tmpdir(), 'mpx-dist-'));
    execFileSync(process.execPath, ['scripts/build.mjs', '--only', 'sidecar', '--outdir', distDir], { stdio: 'pipe' });
    env = await startSidecarEnv({ controlPlane: useControlPlane, nsPrefix: 'mem', backends: [] });
    topo = env.topo;
    const { cp, ns, client } = env;
    await createClientPod(env);
    // Service s0's endpoints answer (on its first port): ten addresses of one backend pod.
    const web = await topo.addPod('web');
    const webAddrs = Array.from({ length: ENDPOINTS }, (_, e) => `192.168.101.${200 + e}`);
    for (const a of webAddrs) await topo.run(web, ['ip', 'addr', 'add', `${a}/24`, 'dev', 'net1']);
    await startBackend(topo, web, { httpPort: PORTS_BASE, addresses: webAddrs });
    const ports = Array.from({ length: PORTS }, (_, i) => ({ name: `p${i}`, port: PORTS_BASE + i }));
    for (let s = 0; s < SERVICES; s += 1) {
      const svc = await cp.client.create<V1Service>(apiPath('', 'v1', 'services', ns), serviceObject(ns, `s${s}`, { networks: 'net-a', ports }));
      if (s === 0) webIP = svc.spec?.clusterIP ?? '';
      await cp.client.create(
        apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns),
        sliceObject(ns, `s${s}-v4`, {
          service: `s${s}`,
          network: `${ns}/net-a`,
          family: 4,
          ports,
          endpoints: Array.from({ length: ENDPOINTS }, (_, e) => ({ ip: s === 0 ? (webAddrs[e] as string) : `198.18.${s}.${e + 1}`, ready: true })),
        }),
      );
    }
    await env.relay.attach(client);
  });
  after(async () => {
    await env?.close();
    if (distDir !== '') rmSync(distDir, { recursive: true, force: true });
  });

  /**
   * nftables as the image runs it (its first load in bounded transactions, the elements through
   * nfnl-batch), the same with the element writer off (the elements as `nft -f` text chunks), and
   * iptables. Each first from nothing, then restarted over the rules the first run left (the
   * sidecar exits without removing them): the same cgroup, which still holds those rules' kernel
   * memory, its peak counted again from the restart, with a client looping on a Service whose
   * endpoints answer.
   */
  const cases = [
    { name: 'nftables', backend: 'nftables', port: 19184, env: { ELEMENT_WRITER: join(binDir(), 'nfnl-batch') } },
    { name: 'nftables, elements as text', backend: 'nftables', port: 19186, env: { ELEMENT_WRITER: 'off' } },
    { name: 'iptables', backend: 'iptables', port: 19185, env: {} },
  ] as const;
  for (const { name, backend, port, env: extraEnv } of cases) {
    void test(`${name}: ${SERVICES} Services × ${PORTS} ports × ${ENDPOINTS} endpoints: ready, every target programmed, cgroup peak under 128 Mi, first start and restart`, async () => {
      assert.ok(existsSync(CGROUP_ROOT), 'a cgroup v1 memory hierarchy');
      const cg = `${CGROUP_ROOT}/mp-test-${process.pid}-${port}`;
      mkdirSync(cg);
      try {
        writeFileSync(`${cg}/memory.limit_in_bytes`, String(LIMIT));
        if (env.sidecar !== undefined && !env.sidecar.exited()) await env.sidecar.terminate(5000);
        // The rules of the previous back end are the new one's to remove; start from none.
        await topo.run(env.client, ['nft', 'flush', 'ruleset'], { allowFail: true });
        await runMeasured(cg, `${name}, first start`, backend, port, extraEnv);
        // The restart: the rules stay, and so do their kernel memory's charges to this cgroup.
        for (const f of ['memory.max_usage_in_bytes', 'memory.kmem.max_usage_in_bytes', 'memory.failcnt']) writeFileSync(`${cg}/${f}`, '0');
        const loop = startHttpLoop(topo, env.client, `http://${webIP}:${PORTS_BASE}/`);
        await new Promise((r) => setTimeout(r, 300));
        await runMeasured(cg, `${name}, restart`, backend, port, extraEnv);
        // A while on the rules the restart wrote, then no request may have failed at any point.
        await new Promise((r) => setTimeout(r, 300));
        const replies = await loop.stop();
        const failed = replies.filter((r) => r.error !== undefined);
        process.stdout.write(`# ${name}, restart: ${replies.length} requests, ${failed.length} failed\n`);
        assert.ok(replies.length >= 10, `the client kept sending (${replies.length} requests)`);
        assert.deepEqual(failed.slice(0, 5), [], `${failed.length} of ${replies.length} requests failed across the restart`);
      } finally {
        if (env.sidecar !== undefined && !env.sidecar.exited()) await env.sidecar.terminate(5000);
        // Empty before removal: the processes left are the sidecar's, already ended above.
        for (const p of readFileSync(`${cg}/cgroup.procs`, 'utf8').trim().split('\n').filter(Boolean)) writeFileSync(`${CGROUP_ROOT}/cgroup.procs`, p);
        rmdirSync(cg);
      }
    });
  }

  /** Starts the sidecar in cgroup `cg`, waits for it to be ready with every target programmed, prints and asserts its peak, and stops it (its rules stay). */
  async function runMeasured(cg: string, name: string, backend: string, port: number, extraEnv: Record<string, string>): Promise<void> {
    env.sidecar = spawnSidecar(topo, env.client, {
      podName: 'client',
      podNamespace: env.ns,
      kubeconfig: env.cp.kubeconfigPath,
      healthPort: port,
      bundle: join(distDir, 'sidecar.js'),
      env: { ...MALLOC_ENV, ...extraEnv, DATAPLANE_BACKEND: backend, LOG_LEVEL: 'info' },
    });
    const s = env.sidecar;
    const pid = s.process.pid as number;
    writeFileSync(`${cg}/cgroup.procs`, String(pid));
    let childPeak = 0;
    let childCmd = '';
    let sidecarPeak = 0;
    const sample = setInterval(() => {
      sidecarPeak = Math.max(sidecarPeak, privateBytes(pid));
      for (const c of children(pid)) {
        const b = privateBytes(c);
        if (b > childPeak) [childPeak, childCmd] = [b, commandOf(c)];
      }
    }, 5);
    try {
      const why = (): string =>
        `exited ${String(s.exited())}, limit hits ${readFileSync(`${cg}/memory.failcnt`, 'utf8').trim()}, usage ${MiB(Number(readFileSync(`${cg}/memory.max_usage_in_bytes`, 'utf8')))} MiB; ${s.stderr().slice(-1000)} ${JSON.stringify(s.logs().slice(-5))}`;
      await waitFor(
        '/readyz 200',
        async () => {
          if (s.exited()) throw new Error(`${name}: the sidecar exited before it was ready: ${why()}`);
          return (await probe(topo, env.client, port, '/readyz')) === 200;
        },
        240_000,
        why,
      );
      await waitFor(
        'every target programmed',
        async () => /multus_proxy_sidecar_targets (\d+)/.exec(await metricsText(topo, env.client, port))?.[1] === String(SERVICES * PORTS),
        30_000,
        () => 'targets metric',
      );
    } finally {
      clearInterval(sample);
    }
    const peak = Number(readFileSync(`${cg}/memory.max_usage_in_bytes`, 'utf8'));
    const failcnt = Number(readFileSync(`${cg}/memory.failcnt`, 'utf8'));
    const kmem = Number(readFileSync(`${cg}/memory.kmem.max_usage_in_bytes`, 'utf8'));
    process.stdout.write(
      `# ${name}: cgroup peak ${MiB(peak)} MiB (kernel ${MiB(kmem)}), sidecar private peak ${MiB(sidecarPeak)} MiB, largest child private ${MiB(childPeak)} MiB (${childCmd}), limit hits ${failcnt}\n`,
    );
    assert.equal(s.exited(), false, `${name}: not killed`);
    assert.equal(failcnt, 0, `${name}: the cgroup never reached its limit`);
    assert.ok(peak < LIMIT, `${name}: peak ${MiB(peak)} MiB`);
    await s.terminate(5000);
  }
});
