/**
 * How the injected sidecars of a namespace start on the real node, for the probe timing : per sidecar container, from its start (containerd's startedAt) to its health port
 * listening and to its first sync (the times of its own log lines), and to the start of the pod's
 * app container, which the kubelet holds back until the sidecar's startup probe succeeds. Read
 * from crictl and the containers' log files on the host every `everyMs`, while the pods live.
 */
import { readFileSync } from 'node:fs';
import type { RealNode } from '../harness/node.js';
import { SIDECAR_CONTAINER_NAME } from '../../src/keys.js';

export interface SidecarStart {
  readonly pod: string;
  readonly container: string;
  /** ms since the epoch. */
  readonly startedAt: number;
  /** ms after startedAt: the health port listens (its "health port listening" line, logged right after). */
  readonly listenMs?: number;
  /** ms after startedAt: the first sync is done ("first sync done; ready"). */
  readonly readyMs?: number;
  /** ms after startedAt: the pod's first app container started. */
  readonly appMs?: number;
}

interface CriContainer {
  id: string;
  metadata?: { name?: string };
  labels?: Record<string, string>;
}

/** The epoch ms of the first log line whose msg is `msg` (pino JSON inside the CRI log format `<time> <stream> <tag> <line>`). */
export function logTime(criLog: string, msg: string): number | undefined {
  for (const line of criLog.split('\n')) {
    const json = line.split(' ').slice(3).join(' ');
    if (!json.startsWith('{') || !json.includes(msg)) continue;
    try {
      const o = JSON.parse(json) as { msg?: string; time?: number };
      if (o.msg === msg && typeof o.time === 'number') return o.time;
    } catch {
      // a partial line
    }
  }
  return undefined;
}

/** cmd/sidecar/main.ts's HEALTH_LISTENING (main.ts runs the sidecar when imported). */
const LISTENING = 'health port listening';
const READY = 'first sync done; ready';

export interface StartWatch {
  starts(): SidecarStart[];
  stop(): Promise<void>;
}

export function watchSidecarStarts(node: RealNode, namespace: string, everyMs = 2000): StartWatch {
  const seen = new Map<string, { pod: string; startedAt: number; logPath: string; listenAt?: number; readyAt?: number }>();
  const apps = new Map<string, number>();
  const inspect = async (id: string): Promise<{ startedAt: number; logPath: string } | undefined> => {
    const s = (JSON.parse(await node.crictl(['inspect', id])) as { status?: { startedAt?: string; logPath?: string } }).status;
    const startedAt = Date.parse(s?.startedAt ?? '');
    return Number.isFinite(startedAt) && startedAt > 0 ? { startedAt, logPath: s?.logPath ?? '' } : undefined;
  };
  const scan = async (): Promise<void> => {
    const list = (JSON.parse(await node.crictl(['ps', '-a', '--label', `io.kubernetes.pod.namespace=${namespace}`, '-o', 'json'])) as { containers?: CriContainer[] }).containers ?? [];
    for (const c of list) {
      const pod = c.labels?.['io.kubernetes.pod.name'] ?? '';
      const name = c.metadata?.name ?? '';
      if (name === SIDECAR_CONTAINER_NAME && !seen.has(c.id)) {
        const i = await inspect(c.id).catch(() => undefined);
        if (i) seen.set(c.id, { pod, ...i });
      } else if (name !== SIDECAR_CONTAINER_NAME && !apps.has(pod)) {
        const i = await inspect(c.id).catch(() => undefined);
        if (i) apps.set(pod, i.startedAt);
      }
    }
    for (const s of seen.values()) {
      if (s.readyAt !== undefined) continue;
      let text: string;
      try {
        text = readFileSync(s.logPath, 'utf8');
      } catch {
        continue; // its pod is gone
      }
      s.listenAt ??= logTime(text, LISTENING);
      s.readyAt ??= logTime(text, READY);
    }
  };
  let stopped = false;
  const loop = (async (): Promise<void> => {
    while (!stopped) {
      await scan().catch(() => undefined);
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    starts: () =>
      [...seen.entries()].map(([id, s]) => {
        const app = apps.get(s.pod);
        return {
          pod: s.pod,
          container: id.slice(0, 12),
          startedAt: s.startedAt,
          ...(s.listenAt !== undefined ? { listenMs: s.listenAt - s.startedAt } : {}),
          ...(s.readyAt !== undefined ? { readyMs: s.readyAt - s.startedAt } : {}),
          ...(app !== undefined && app >= s.startedAt ? { appMs: app - s.startedAt } : {}),
        };
      }),
    async stop() {
      stopped = true;
      await loop;
    },
  };
}
