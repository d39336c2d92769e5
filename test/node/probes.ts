/**
 * Spurious probe failures under CPU contention: a Deployment of injected pods
 * scaled 0 → N → 0 a few times while busy loops started here keep both cores saturated, counting
 * the Unhealthy Events of the project's containers (the sidecar's startup probe above all) and
 * measuring each sidecar's start: container start → Node.js serving its health port, → first
 * sync, → the app container's start (which the startup probe holds back).
 *
 * The contention is what made the 2-hour soak's two refusals: the sidecar's CPU request is 10m
 * (cpu.shares 10), so with the cores busy Node.js took up to 2.3 s to listen, past the probe's
 * first try (docs/benchmarks.md, soak). Busy loops at nice 0 in this test's own cgroup compete with
 * the whole kubepods tree at the top level, as the soak's benchmark did.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import { setTimeout as delay } from 'node:timers/promises';
import type { RealNode } from '../harness/node.js';
import { blogFile, createNamespace, pods, SERVICE } from './cluster.js';
import { watchEvents, type ProjectEvent } from './soak.js';
import { watchSidecarStarts, type SidecarStart, type StartWatch } from './sidecar-starts.js';
import { SIDECAR_CONTAINER_NAME } from '../../src/keys.js';

export const PROBES_NS = 'probe-cycle';

export interface ProbeCycleOptions {
  /** Replicas at the top of each cycle. */
  readonly replicas: number;
  readonly cycles: number;
  /** Busy loops at nice 0 for the whole run (0: no contention). */
  readonly busyLoops: number;
}

export const PROBE_CYCLE: ProbeCycleOptions = { replicas: 6, cycles: 2, busyLoops: 4 };

export interface ProbeCycleRecord {
  readonly options: ProbeCycleOptions;
  /** Every Unhealthy Event of a project container in the namespace during the cycles, with its count. */
  readonly unhealthy: ProjectEvent[];
  readonly starts: SidecarStart[];
  /** How many of the scaled-up pods got each injected sidecar command's program (its first word). */
  readonly launchers: Record<string, number>;
  /** 1-minute load average sampled at each step. */
  readonly load: number[];
  readonly ms: number;
}

/** Busy `sh` loops (no Node.js start cost; each takes a whole core while it runs), stopped by stop() or at this process's exit should a test time out first. */
function busy(n: number): { stop(): void } {
  const loops: ChildProcess[] = Array.from({ length: n }, () => spawn('sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' }));
  const kill = (): void => loops.forEach((p) => p.kill('SIGKILL'));
  process.once('exit', kill);
  return {
    stop() {
      kill();
      process.removeListener('exit', kill);
    },
  };
}

async function replicasGone(node: RealNode, deadlineMs: number): Promise<void> {
  for (const until = Date.now() + deadlineMs; Date.now() < until; await delay(500)) {
    if ((await pods(node, PROBES_NS, `app=${SERVICE}`)).length === 0) return;
  }
  throw new Error(`probe cycle: pods of ${PROBES_NS}/${SERVICE} still there after ${deadlineMs} ms`);
}

/** Until the start watch has listen, first-sync and app times for a start (since t0) of each pod named, or deadlineMs. */
async function scanned(starts: StartWatch, names: ReadonlySet<string>, t0: number, deadlineMs: number): Promise<void> {
  const done = (): boolean => {
    const whole = new Set(
      starts
        .starts()
        .filter((s) => s.startedAt >= t0 && s.listenMs !== undefined && s.readyMs !== undefined && s.appMs !== undefined)
        .map((s) => s.pod),
    );
    return [...names].every((n) => whole.has(n));
  };
  for (const until = Date.now() + deadlineMs; !done() && Date.now() < until;) await delay(250);
}

export async function runProbeCycle(node: RealNode, o: ProbeCycleOptions, log: (m: string) => void): Promise<ProbeCycleRecord> {
  await createNamespace(node, PROBES_NS, true);
  await node.apply(blogFile('net-attach.yml'), PROBES_NS);
  await node.apply(blogFile('deployment.yml').replace(/replicas: \d+/, 'replicas: 0'), PROBES_NS);
  const events = await watchEvents(node);
  events.baseline();
  const starts = watchSidecarStarts(node, PROBES_NS, 1000);
  const load: number[] = [];
  const launchers: Record<string, number> = {};
  const t0 = Date.now();
  const loops = busy(o.busyLoops);
  try {
    for (let c = 0; c < o.cycles; c++) {
      await node.kubectl(['scale', '-n', PROBES_NS, `deployment/${SERVICE}`, `--replicas=${o.replicas}`]);
      await node.kubectl(['rollout', 'status', '-n', PROBES_NS, `deployment/${SERVICE}`, '--timeout=300s'], { timeoutMs: 310_000 });
      const up = await pods(node, PROBES_NS, `app=${SERVICE}`);
      for (const p of up) {
        const first = (p.spec?.initContainers ?? []).find((c) => c.name === SIDECAR_CONTAINER_NAME)?.command?.[0] ?? '(none)';
        launchers[first] = (launchers[first] ?? 0) + 1;
      }
      load.push(os.loadavg()[0] ?? 0);
      log(`cycle ${c + 1}: ${o.replicas} ready at ${Date.now() - t0} ms, load ${load[load.length - 1]?.toFixed(1)}`);
      // The scan has read each pod's start (listening, first sync, app start) before the pods go; a
      // start it missed shows in the test's count of starts.
      await scanned(starts, new Set(up.map((p) => p.metadata?.name ?? '')), t0, 30_000);
      await node.kubectl(['scale', '-n', PROBES_NS, `deployment/${SERVICE}`, '--replicas=0']);
      await replicasGone(node, 180_000);
      load.push(os.loadavg()[0] ?? 0);
      log(`cycle ${c + 1}: 0 at ${Date.now() - t0} ms, load ${load[load.length - 1]?.toFixed(1)}`);
    }
  } finally {
    loops.stop();
  }
  // Events are written asynchronously by the kubelet (and deduplicated into counts): a moment to land.
  await delay(3000);
  await starts.stop();
  const unhealthy = events.events(() => 'unknown').filter((e) => e.reason === 'Unhealthy' && e.namespace === PROBES_NS);
  events.stop();
  // Only this run's: containers of an earlier run's pods in a namespace of the same name can linger until the kubelet collects them.
  return { options: o, unhealthy, starts: starts.starts().filter((s) => s.startedAt >= t0), launchers, load, ms: Date.now() - t0 };
}

export async function tearDownProbeCycle(node: RealNode): Promise<void> {
  await node.kubectl(['delete', 'namespace', PROBES_NS, '--ignore-not-found', '--wait=true', '--timeout=240s'], { timeoutMs: 250_000 });
}
