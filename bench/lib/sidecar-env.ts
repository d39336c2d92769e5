/**
 * A client pod for B3 and B5: a network namespace from the test harness's topology (with `net1`
 * on a bridge), the real kube-apiserver reachable from inside it through the harness's relay,
 * the pod object the sidecar reads (network-status naming net1 and its address), and the sidecar
 * itself started in that namespace, as the bundle in dist/ when it is built, else with tsx.
 */
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { createTopology, type Pod } from '../../test/harness/netns.js';
import { startApiserverRelay } from '../../test/harness/apiserver-relay.js';
import type { ControlPlane } from '../../test/harness/controlplane.js';
import { LineSplitter } from '../../src/kube/client.js';
import { BENCH_NAMESPACE, clientPod } from './services.js';
import { benchControlPlane, createPod } from './cluster.js';
import { run, startProcess, stopProcess, type Cleanup } from './proc.js';
import { ROOT } from './report.js';
import { SIDECAR_MALLOC_ENV, SIDECAR_NODE_FLAGS } from '../../cmd/webhook/options.js';

export const CLIENT_POD = 'client';
export const SIDECAR_BUNDLE = path.join(ROOT, 'dist', 'sidecar.js');
const BUILD_SCRIPT = path.join(ROOT, 'scripts', 'build.mjs');

export interface SidecarEnv {
  readonly cp: ControlPlane;
  readonly pod: Pod;
  /** The pod object the sidecar reads (default CLIENT_POD). */
  readonly podName?: string;
}

export async function startSidecarEnv(cleanup: Cleanup): Promise<SidecarEnv> {
  const cp = await benchControlPlane(cleanup);
  const topo = await createTopology();
  cleanup.add('topology', () => topo.teardown());
  const pod = await topo.addPod(CLIENT_POD);
  const relay = await startApiserverRelay(topo, cp.server, cp.dir);
  cleanup.add('apiserver relay', () => relay.close());
  await relay.attach(pod);
  await createPod(cp.client, clientPod(CLIENT_POD, pod.net1.ipv4));
  return { cp, pod };
}

/** One parsed pino line of the sidecar's output. */
export interface LogLine {
  readonly time: number;
  readonly msg: string;
  readonly [k: string]: unknown;
}

export interface SidecarProcess {
  readonly child: ChildProcess & { output(): string };
  /** `bundle (dist/sidecar.js)` or `tsx (cmd/sidecar/main.ts)`. */
  readonly how: string;
  /** Called with every log line from now on; returns a function that stops the calls. */
  onLine(fn: (l: LogLine) => void): () => void;
  /** Resolves with the first line (from now on) that `match` accepts. */
  waitFor(match: (l: LogLine) => boolean, timeoutMs: number, what: string): Promise<LogLine>;
  stop(): Promise<void>;
}

/**
 * The sidecar as it ships: a fresh bundle of the current source (scripts/build.mjs into a temp
 * folder, so dist/ is never touched and never stale). Without the build script, dist/sidecar.js if
 * present (its build time is reported), else the source under tsx.
 */
export interface SidecarCommand {
  readonly argv: string[];
  readonly how: string;
  /** How it differs from the injected command (`without --lite-mode`), if it does. */
  readonly label?: string;
  /** Environment the webhook injects besides the sidecar's settings (SIDECAR_MALLOC_ENV). */
  readonly env?: Readonly<Record<string, string>>;
  /** The node binary (default: the machine's `node`); the image's copy for B5's image runtime. */
  readonly binary?: string;
}

/**
 * The V8 flag whose trade (private memory for CPU) B3 and B5 measure in the same run as the
 * injected command: adopted in SIDECAR_NODE_FLAGS only because those runs showed it pays.
 */
export const TRADE_FLAG = '--lite-mode';

/** The command with `flag` taken out if it has it, else added in front (node options come before the script). */
export function toggleFlag(cmd: SidecarCommand, flag: string): SidecarCommand {
  const has = cmd.argv.includes(flag);
  const argv = has ? cmd.argv.filter((a) => a !== flag) : [flag, ...cmd.argv];
  const label = has ? `without ${flag}` : `with ${flag} added`;
  return { ...cmd, argv, how: `${cmd.how}, ${label}`, label };
}

/** The command without the injected malloc settings (glibc's defaults). */
export function withoutMallocEnv(cmd: SidecarCommand): SidecarCommand {
  const label = 'without the malloc settings';
  return { argv: cmd.argv, how: `${cmd.how}, ${label}`, label };
}

/** A fresh bundle of `program` from the current source in a temp folder; undefined without the build script. */
export async function buildBundle(cleanup: Cleanup, program: string): Promise<string | undefined> {
  if (!existsSync(BUILD_SCRIPT)) return undefined;
  const out = mkdtempSync(path.join(os.tmpdir(), 'mp-bench-bundle-'));
  cleanup.add('bundle dir', () => rmSync(out, { recursive: true, force: true }));
  await run('node', [BUILD_SCRIPT, '--outdir', out, '--only', program], { env: process.env });
  return path.join(out, `${program}.js`);
}

/**
 * The sidecar of another source tree (a worktree of another commit), bundled by that tree's own
 * build script and run as injected with one rule back end forced (DATAPLANE_BACKEND, as the
 * webhook's ConfigMap would: `auto` picks nftables wherever it loads); `flags` go before the script.
 */
export async function treeSidecarCommand(cleanup: Cleanup, tree: string, backend: string, flags: readonly string[] = []): Promise<SidecarCommand> {
  const out = mkdtempSync(path.join(os.tmpdir(), 'mp-tree-bundle-'));
  cleanup.add('bundle dir', () => rmSync(out, { recursive: true, force: true }));
  const r = await run('node', [path.join(tree, 'scripts', 'build.mjs'), '--outdir', out, '--only', 'sidecar'], { env: process.env });
  if (r.code !== 0) throw new Error(`building ${tree}'s sidecar failed: ${r.stderr}`);
  return { argv: [...SIDECAR_NODE_FLAGS, ...flags, path.join(out, 'sidecar.js')], env: { ...SIDECAR_MALLOC_ENV, DATAPLANE_BACKEND: backend }, how: `${tree} bundled` };
}

const mallocText = Object.entries(SIDECAR_MALLOC_ENV)
  .map(([k, v]) => `${k}=${v}`)
  .join(' ');

export async function sidecarCommand(cleanup: Cleanup): Promise<SidecarCommand> {
  const bundle = await buildBundle(cleanup, 'sidecar');
  if (bundle !== undefined) {
    return {
      argv: [...SIDECAR_NODE_FLAGS, bundle],
      env: SIDECAR_MALLOC_ENV,
      how: `a bundle of the current source (scripts/build.mjs --only sidecar), node ${SIDECAR_NODE_FLAGS.join(' ')} with ${mallocText} as injected`,
    };
  }
  if (existsSync(SIDECAR_BUNDLE)) {
    return {
      argv: [...SIDECAR_NODE_FLAGS, SIDECAR_BUNDLE],
      env: SIDECAR_MALLOC_ENV,
      how: `bundle (dist/sidecar.js, built ${statSync(SIDECAR_BUNDLE).mtime.toISOString().slice(0, 16)}Z), with ${mallocText}`,
    };
  }
  return { argv: ['--import', 'tsx', path.join(ROOT, 'cmd', 'sidecar', 'main.ts')], env: SIDECAR_MALLOC_ENV, how: 'tsx (cmd/sidecar/main.ts; no bundle could be built)' };
}

export function startSidecar(env: SidecarEnv, cleanup: Cleanup, logLevel: string, cmd: SidecarCommand): SidecarProcess {
  const child = startProcess(cmd.binary ?? 'node', cmd.argv, {
    netns: env.pod.ns,
    cwd: ROOT,
    env: {
      ...process.env,
      ...cmd.env,
      POD_NAME: env.podName ?? CLIENT_POD,
      POD_NAMESPACE: BENCH_NAMESPACE,
      KUBECONFIG: env.cp.kubeconfigPath,
      HEALTH_PORT: '9180',
      HEALTH_HOST: '127.0.0.1',
      LOG_LEVEL: logLevel,
    },
  });
  return logged(child, cmd.how, 'sidecar', cleanup);
}

/**
 * A started program that logs pino JSON lines on stdout (the sidecar, the node agent): its lines
 * to listeners, and a wait for a matching line that fails with its output when it exits or times out.
 */
export function logged(child: ChildProcess & { output(): string }, how: string, name: string, cleanup: Cleanup): SidecarProcess {
  const listeners = new Set<(l: LogLine) => void>();
  const splitter = new LineSplitter();
  child.stdout?.on('data', (c: Buffer) => {
    for (const text of splitter.push(c.toString())) {
      let line: LogLine;
      try {
        line = JSON.parse(text) as LogLine;
      } catch {
        continue;
      }
      for (const fn of listeners) fn(line);
    }
  });
  const stop = (): Promise<void> => stopProcess(child, 10_000);
  cleanup.add(name, stop);
  const onLine = (fn: (l: LogLine) => void): (() => void) => {
    listeners.add(fn);
    return () => listeners.delete(fn);
  };
  return {
    child,
    how,
    onLine,
    stop,
    waitFor: (match, timeoutMs, what) =>
      new Promise((resolve, reject) => {
        const finish = (err: Error | undefined, line?: LogLine): void => {
          clearTimeout(timer);
          off();
          child.off('exit', onExit);
          if (err) reject(err);
          else if (line) resolve(line);
        };
        const onExit = (code: number | null): void => finish(new Error(`${name} exited (${code}) while waiting for ${what}; output: ${child.output().slice(-3000)}`));
        const timer = setTimeout(() => finish(new Error(`${name}: no ${what} within ${timeoutMs} ms; output: ${child.output().slice(-3000)}`)), timeoutMs);
        const off = onLine((l) => {
          if (match(l)) finish(undefined, l);
        });
        child.once('exit', onExit);
      }),
  };
}

/**
 * One change timed to the program's log: runs `write`, then takes the first line with message
 * `msg` (from `lines`, which a listener fills) stamped at or after the write's start for which
 * `landed` is true (checked outside the timing). Returns that line's time minus the start, in ms.
 */
export async function timeToLine(proc: SidecarProcess, lines: readonly LogLine[], msg: string, write: () => Promise<void>, landed: () => Promise<boolean>, what: string): Promise<number> {
  const before = lines.length;
  const start = Date.now();
  await write();
  for (let seen = before; ;) {
    const l = lines[seen] ?? (await proc.waitFor((x) => x.msg === msg, 10_000, what));
    seen = lines[seen] !== undefined ? seen + 1 : lines.length;
    if (l.time >= start && (await landed())) return l.time - start;
  }
}
