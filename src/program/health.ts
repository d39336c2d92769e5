/**
 * The health and metrics server as a runnable, and what readiness answers while the program
 * drains. Each program picks that: the sidecar answers ready (a startup probe held or still to come
 * ends in a success), the webhook and the controller keep their answer (their endpoints leave the
 * Service's slices on their own), and a program may also turn not ready.
 */
import { startHealthServer, type ExtraRoute, type HealthChecks, type HealthServer, type Readiness } from '../health.js';
import type { Registry } from '../metrics.js';
import type { Runnable } from './program.js';

export type WhileDraining = 'ready' | 'unchanged' | 'not-ready';

export const DRAINING_REASON = 'stopping';

/** `ready` as seen from outside: unchanged until `draining()`, then as `whileDraining` says. */
export function drainAwareReadiness(ready: () => Readiness, draining: () => boolean, whileDraining: WhileDraining): () => Readiness {
  return () => {
    if (!draining() || whileDraining === 'unchanged') return ready();
    return whileDraining === 'ready' ? { ready: true } : { ready: false, reason: DRAINING_REASON };
  };
}

export interface HealthRunnableOptions {
  readonly checks: HealthChecks;
  readonly registry?: Registry | undefined;
  readonly port: number;
  readonly host?: string | undefined;
  readonly extra?: ExtraRoute;
  /** An inherited listening socket (src/health.ts inheritedHealthFd). */
  readonly inheritedFd?: number | undefined;
}

export interface HealthRunnable extends Runnable {
  /** The listening server; set once started. */
  server(): HealthServer;
}

/** /healthz, /readyz and /metrics: started first and stopped last, so probes are answered throughout. */
export function healthRunnable(o: HealthRunnableOptions): HealthRunnable {
  let server: HealthServer | undefined;
  return {
    name: 'health server',
    async start() {
      server = await startHealthServer(o.checks, o.registry, o.port, o.host, o.extra, o.inheritedFd);
    },
    stop: () => server?.close(),
    server: () => {
      if (server === undefined) throw new Error('the health server has not started');
      return server;
    },
  };
}
