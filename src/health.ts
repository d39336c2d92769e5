/**
 * A small plain-HTTP server for /healthz, /readyz and /metrics, shared by the controller and the
 * sidecar (the webhook serves the same paths on its HTTPS port). Readiness is a function so each
 * program decides what "ready" means (caches synced, first rule sync done).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from './metrics.js';

export interface HealthChecks {
  /** Liveness: false only when the process is wedged and should be restarted. */
  live(): boolean;
  /** Readiness, with a reason when not ready (shown in the response body). */
  ready(): { ready: boolean; reason?: string };
}

export interface HealthServer {
  readonly port: number;
  close(): Promise<void>;
}

export async function startHealthServer(
  checks: HealthChecks,
  registry: Registry | undefined,
  port: number,
  host = '0.0.0.0',
): Promise<HealthServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz' || path === '/livez') {
      const live = checks.live();
      res.writeHead(live ? 200 : 500, { 'content-type': 'text/plain' }).end(live ? 'ok\n' : 'not live\n');
    } else if (path === '/readyz') {
      const r = checks.ready();
      res.writeHead(r.ready ? 200 : 503, { 'content-type': 'text/plain' }).end(r.ready ? 'ok\n' : `not ready: ${r.reason ?? 'starting'}\n`);
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
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
