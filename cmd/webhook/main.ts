/**
 * The admission webhook process: options -> certificate source -> apiserver client -> handlers
 * -> HTTPS server. Everything with logic lives in the modules it wires together.
 */
import { readFileSync } from 'node:fs';
import { createKubeClient } from '../../src/kube/client.js';
import { loadKubeConnection } from '../../src/kube/config.js';
import { createLogger } from '../../src/log.js';
import { createClusterLookups, serviceEventWriter } from './cluster.js';
import { withExternalIPs } from './external-ips.js';
import { podHandler, serviceDefaultingHandler, serviceValidationHandler } from './handlers.js';
import { createWebhookMetrics } from './metrics.js';
import { parseOptions, webhookHelp } from './options.js';
import { wantsHelp } from '../../src/cli.js';
import { createApp, PATHS, startWebhookServer } from './server.js';
import { watchCertificateFiles } from './tls.js';

function readIfExists(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

async function main(): Promise<void> {
  if (wantsHelp(process.argv.slice(2))) {
    process.stdout.write(webhookHelp());
    return;
  }
  const parsed = parseOptions(process.env, process.argv.slice(2), readIfExists);
  if (!parsed.ok) {
    process.stderr.write(`${parsed.error}\n`);
    process.exit(2);
  }
  const opts = parsed.value;
  const logger = createLogger('webhook', opts.logLevel);
  const metrics = createWebhookMetrics();
  const tls = watchCertificateFiles(opts.tlsCertFile, opts.tlsKeyFile, {
    pollMs: opts.certPollMs,
    logger,
    onLoad: (result, c) => metrics.certificate(result, c?.notAfter),
  });
  const client = createKubeClient(loadKubeConnection(opts.kubeconfig !== undefined ? { kubeconfig: opts.kubeconfig } : {}));
  const cluster = createClusterLookups(client, { namespaceCacheMs: opts.namespaceCacheMs, nadTimeoutMs: opts.nadLookupTimeoutMs, nodeAgentNamespace: opts.nodeAgentNamespace, logger });
  const deps = { cluster, sidecar: opts.sidecar, podSecurityDefault: opts.podSecurityDefault, logger, events: serviceEventWriter(client, logger), nadLookupTimeoutMs: opts.nadLookupTimeoutMs };
  const app = createApp({
    endpoints: {
      [PATHS.mutatePods]: { kind: 'Pod', handler: podHandler(deps) },
      [PATHS.mutateServices]: { kind: 'Service', handler: serviceDefaultingHandler(deps) },
      [PATHS.validateServices]: { kind: 'Service', handler: withExternalIPs(serviceValidationHandler(deps), opts.externalIPs, deps.events) },
    },
    maxBodyBytes: opts.maxBodyBytes,
    metrics,
    logger,
  });
  const server = await startWebhookServer(app, tls, { port: opts.port, host: opts.host });
  logger.info({ port: server.port, sidecarImage: opts.sidecar.image, mode: opts.sidecar.mode }, 'webhook listening');

  // Keep answering while the endpoint removal reaches the apiserver, then stop: a webhook that
  // closes at once turns pod creations into failures for a few seconds at every rollout. Still
  // ready meanwhile: a deleted pod's endpoint is already not ready in its Service's slices, and
  // a /readyz that failed during the drain only left an Unhealthy Event per deletion (issue 25).
  const shutdown = (signal: string): void => {
    logger.info({ signal, drainMs: opts.drainMs }, 'shutting down');
    setTimeout(() => {
      tls.close();
      void server.close().then(() => process.exit(0));
    }, opts.drainMs);
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

main().catch((e: unknown) => {
  process.stderr.write(`webhook: ${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
