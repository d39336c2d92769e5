/**
 * A small plain-HTTP server for /healthz, /readyz and /metrics, shared by the controller and the
 * sidecar (the webhook serves the same paths on its HTTPS port). Readiness is a function so each
 * program decides what "ready" means (caches synced, first rule sync done).
 */
import http from 'node:http';
import type { AddressInfo, Server } from 'node:net';
import type { Registry } from './metrics.js';

export interface HealthChecks {
  /** Liveness: false only when the process is wedged and should be restarted. */
  live(): boolean;
  /** Readiness, with a reason when not ready (shown in the response body). */
  ready(): { ready: boolean; reason?: string };
}

/**
 * `::` accepts IPv4 and IPv6 on Linux, so kubelet's probes work in IPv4-only, IPv6-only and
 * dual-stack pods alike; 0.0.0.0 would fail every probe in an IPv6-only pod.
 */
export const ANY_HOST = '::';

/**
 * Listens on `host`; for `::` on a kernel without IPv6 (booted with ipv6.disable=1) it falls back
 * to 0.0.0.0 instead of failing to start.
 */
export async function listenDualStack(server: Server, port: number, host: string): Promise<void> {
  const attempt = (h: string): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const onError = (e: Error): void => reject(e);
      server.once('error', onError);
      server.listen(port, h, () => {
        server.removeListener('error', onError);
        resolve();
      });
    });
  try {
    await attempt(host);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (host !== ANY_HOST || (code !== 'EAFNOSUPPORT' && code !== 'EADDRNOTAVAIL')) throw e;
    await attempt('0.0.0.0');
  }
}

/**
 * Set by the launcher native/health-listen.c, which opens the health port before it execs Node.js
 * and passes the listening socket as this file descriptor: the kubelet's first probe then finds the
 * port listening however slowly Node.js starts (its request waits in the socket's backlog).
 */
export const HEALTH_FD_ENV = 'MULTUS_PROXY_HEALTH_FD';

/** The inherited listening socket's descriptor named in `env`; undefined without one (no launcher: dev, demo, tests). */
export function inheritedHealthFd(env: NodeJS.ProcessEnv): number | undefined {
  const v = env[HEALTH_FD_ENV];
  if (v === undefined || v === '') return undefined;
  if (!/^\d+$/.test(v) || Number(v) < 3) {
    throw new Error(`${HEALTH_FD_ENV}=${JSON.stringify(v)} is not an inherited file descriptor (an integer >= 3, set by health-listen); unset it to let the program bind its health port itself`);
  }
  return Number(v);
}

/** Serves on an inherited listening socket, which must be on `port` (0: any). */
async function listenInherited(server: Server, fd: number, port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const onError = (e: Error): void => reject(new Error(`${HEALTH_FD_ENV}=${fd}: cannot serve on the inherited socket: ${e.message}; unset it to let the program bind its health port itself`));
    server.once('error', onError);
    server.listen({ fd }, () => {
      server.removeListener('error', onError);
      resolve();
    });
  });
  const got = (server.address() as AddressInfo | null)?.port;
  if (port !== 0 && got !== port) {
    server.close();
    throw new Error(`${HEALTH_FD_ENV}=${fd}: the inherited socket listens on port ${got}, not on the health port ${port}; give health-listen and the program the same HEALTH_PORT`);
  }
}

/** The longest `/readyz?wait=` honoured, in seconds: a probe's timeout is well under this. */
export const MAX_READY_WAIT_S = 60;
const READY_POLL_MS = 20;

/**
 * `/readyz?wait=<seconds>`: when not ready, hold the answer until ready or the wait is over. A
 * startup probe that asks this way succeeds the moment the program is ready instead of failing
 * (and leaving an Unhealthy Event) every period until then; its timeoutSeconds must exceed the wait.
 * Undefined without a usable `wait`.
 */
export function readyWaitMs(query: string): number | undefined {
  const v = new URLSearchParams(query).get('wait');
  if (v === null || !/^\d+(\.\d+)?$/.test(v)) return undefined;
  return Math.min(Number(v), MAX_READY_WAIT_S) * 1000;
}

export type Readiness = ReturnType<HealthChecks['ready']>;

/** Answers /readyz: at once, or with `?wait=` (readyWaitMs) when ready or when the wait is over. Shared by this server and the webhook's. */
export function replyReady(ready: () => Readiness, query: string, res: http.ServerResponse): void {
  const send = (r: Readiness): void => {
    res.writeHead(r.ready ? 200 : 503, { 'content-type': 'text/plain' }).end(r.ready ? 'ok\n' : `not ready: ${r.reason ?? 'starting'}\n`);
  };
  const first = ready();
  const waitMs = readyWaitMs(query);
  if (first.ready || waitMs === undefined) return send(first);
  // Polled: readiness is a function, and a held probe lasts seconds at most, during start-up.
  const until = Date.now() + waitMs;
  const timer = setInterval(() => {
    const now = ready();
    if (now.ready || Date.now() >= until || res.destroyed) {
      clearInterval(timer);
      if (!res.destroyed) send(now);
    }
  }, READY_POLL_MS);
  res.on('close', () => clearInterval(timer));
}

export interface HealthServer {
  readonly port: number;
  close(): Promise<void>;
}

/** A program's own extra paths (the node agent's per-Service health): undefined means 404. */
export type ExtraRoute = (path: string) => { status: number; body: string } | undefined;

export async function startHealthServer(
  checks: HealthChecks,
  registry: Registry | undefined,
  port: number,
  host = ANY_HOST,
  extra?: ExtraRoute,
  /** An inherited listening socket (inheritedHealthFd) to serve on instead of binding `host`:`port`. */
  inheritedFd?: number,
): Promise<HealthServer> {
  const server = http.createServer((req, res) => {
    const [path = '/', query = ''] = (req.url ?? '/').split('?');
    const own = extra?.(path);
    if (own !== undefined) {
      res.writeHead(own.status, { 'content-type': 'application/json' }).end(own.body);
    } else if (path === '/healthz' || path === '/livez') {
      const live = checks.live();
      res.writeHead(live ? 200 : 500, { 'content-type': 'text/plain' }).end(live ? 'ok\n' : 'not live\n');
    } else if (path === '/readyz') {
      replyReady(() => checks.ready(), query, res);
    } else if (path === '/metrics' && registry !== undefined) {
      registry
        .metrics()
        .then((text) => res.writeHead(200, { 'content-type': registry.contentType }).end(text))
        .catch((e: unknown) => res.writeHead(500).end(String(e)));
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
    }
  });
  // Probes must not hang on a half-open client.
  server.requestTimeout = 5000;
  if (inheritedFd !== undefined) await listenInherited(server, inheritedFd, port);
  else await listenDualStack(server, port, host);
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
