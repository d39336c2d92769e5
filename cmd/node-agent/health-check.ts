/**
 * Health of `externalTrafficPolicy: Local` NodePort and LoadBalancer Services on this node, as
 * kube-proxy serves healthCheckNodePort: 200 with the count of local endpoints when this node has
 * one and the agent is syncing, 503 otherwise, so an external load balancer sends traffic only to
 * nodes that keep the client's address and have somewhere to send it. The body has kube-proxy's
 * shape (`{"service":{"namespace","name"},"localEndpoints":N,"serviceProxyHealthy":bool}`), so a
 * checker written for kube-proxy reads it unchanged. Always at `/services/<namespace>/<name>` on
 * the agent's health port; also on healthCheckNodePort itself when a Service has one (the
 * apiserver allocates it for LoadBalancer Local), one listener per port on every address, the
 * node's secondary-network address included: the balancer checks on the network the traffic uses.
 */
import http from 'node:http';
import type { Logger } from '../../src/log.js';
import { listenDualStack } from '../../src/health.js';
import type { HealthCheck } from './state.js';

export interface HealthCheckServers {
  /** Opens, updates and closes listeners to match `checks`. */
  update(checks: readonly HealthCheck[]): Promise<void>;
  /** `/services/<namespace>/<name>` on the agent's health server. */
  route(path: string): { status: number; body: string } | undefined;
  close(): Promise<void>;
  ports(): number[];
}

/** kube-proxy's answer for one Service: 200 only with a local endpoint and a proxy that is syncing. Pure. */
export function healthAnswer(c: HealthCheck, proxyHealthy: boolean): { status: number; body: string } {
  const [namespace, name] = c.service.split('/');
  return { status: c.localEndpoints > 0 && proxyHealthy ? 200 : 503, body: JSON.stringify({ service: { namespace, name }, localEndpoints: c.localEndpoints, serviceProxyHealthy: proxyHealthy }) };
}

/** `healthy`: whether the agent's sync loop is alive (kube-proxy's serviceProxyHealthy). */
export function createHealthCheckServers(log: Logger, host = '::', healthy: () => boolean = () => true): HealthCheckServers {
  const servers = new Map<number, { server: http.Server; check: HealthCheck }>();
  let byService = new Map<string, HealthCheck>();
  const answer = (c: HealthCheck): { status: number; body: string } => healthAnswer(c, healthy());
  const close = (server: http.Server): Promise<void> =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return {
    route(path) {
      const m = /^\/services\/([^/]+)\/([^/]+)$/.exec(path);
      if (m === null) return undefined;
      const c = byService.get(`${m[1] ?? ''}/${m[2] ?? ''}`);
      return c === undefined ? { status: 404, body: JSON.stringify({ error: 'no Local NodePort or LoadBalancer Service of that name on this node' }) } : answer(c);
    },
    async update(checks) {
      byService = new Map(checks.map((c) => [c.service, c]));
      const want = new Map(checks.flatMap((c) => (c.port !== undefined ? [[c.port, c] as const] : [])));
      for (const [port, s] of servers) {
        if (want.has(port)) continue;
        servers.delete(port);
        await close(s.server);
      }
      for (const [port, check] of want) {
        const have = servers.get(port);
        if (have !== undefined) {
          have.check = check;
          continue;
        }
        const entry = { server: http.createServer(), check };
        entry.server.on('request', (_req, res) => {
          const a = answer(entry.check);
          res.writeHead(a.status, { 'content-type': 'application/json', 'x-content-type-options': 'nosniff' }).end(a.body);
        });
        entry.server.requestTimeout = 5000;
        try {
          await listenDualStack(entry.server, port, host);
          servers.set(port, entry);
        } catch (e) {
          // A port someone else holds: say so, serve the rest; retried at the next sync.
          log.warn({ err: e, port, service: check.service }, 'cannot serve healthCheckNodePort');
        }
      }
    },
    async close() {
      for (const s of servers.values()) await close(s.server);
      servers.clear();
    },
    ports: () => [...servers.keys()].sort((a, b) => a - b),
  };
}
