/**
 * The admission webhook process: options -> certificate source -> apiserver client -> handlers
 * -> HTTPS server. Everything with logic lives in the modules it wires together.
 */
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLogger } from '../../src/log.js';
import { connectKube } from '../../src/program/kube.js';
import { runMain, stderrStartFailure } from '../../src/program/main.js';
import { readOptions } from '../../src/program/options.js';
import { Program } from '../../src/program/program.js';
import { createClusterLookups, serviceEventWriter } from './cluster.js';
import { withExternalIPs } from './external-ips.js';
import { podHandler, policyValidationHandler, serviceDefaultingHandler, serviceValidationHandler } from './handlers.js';
import { createWebhookMetrics } from './metrics.js';
import { parseOptions, webhookHelp } from './options.js';
import { createApp, PATHS, startWebhookServer } from './server.js';
import { createPolicyCache } from './policy-cache.js';
import { watchCertificateFiles } from './tls.js';

function readIfExists(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

async function main(): Promise<number | undefined> {
  const argv = process.argv.slice(2);
  const options = readOptions({ argv, help: webhookHelp, parse: () => parseOptions(process.env, argv, readIfExists) });
  if (!options.run) return options.code;
  const opts = options.value;
  const logger = createLogger('webhook', opts.logLevel);
  const metrics = createWebhookMetrics();
  const tls = watchCertificateFiles(opts.tlsCertFile, opts.tlsKeyFile, {
    pollMs: opts.certPollMs,
    logger,
    onLoad: (result, c) => metrics.certificate(result, c?.notAfter),
  });
  const client = connectKube(opts);
  const cluster = createClusterLookups(client, { namespaceCacheMs: opts.namespaceCacheMs, nadTimeoutMs: opts.nadLookupTimeoutMs, nodeAgentNamespace: opts.nodeAgentNamespace, logger });
  const policies = createPolicyCache(client, { logger });
  const deps = {
    cluster,
    sidecar: opts.sidecar,
    podSecurityDefault: opts.podSecurityDefault,
    logger,
    events: serviceEventWriter(client, logger),
    nadLookupTimeoutMs: opts.nadLookupTimeoutMs,
    policies,
  };
  const app = createApp({
    endpoints: {
      [PATHS.mutatePods]: { kind: 'Pod', handler: podHandler(deps) },
      [PATHS.mutateSelectedPods]: { kind: 'Pod', handler: podHandler(deps, { namespaceEnabled: false }) },
      [PATHS.mutateServices]: { kind: 'Service', handler: serviceDefaultingHandler(deps) },
      [PATHS.validateServices]: { kind: 'Service', handler: withExternalIPs(serviceValidationHandler(deps), opts.externalIPs, deps.events) },
      [PATHS.validatePolicies]: { kind: 'MultiNetworkPolicy', handler: policyValidationHandler(deps) },
    },
    maxBodyBytes: opts.maxBodyBytes,
    metrics,
    logger,
    // Not ready until the policies are read (or their API is known not to be served): a replica
    // that cannot tell which pods a policy selects must not admit them.
    ready: () => (policies.state() === 'starting' ? { ready: false, reason: 'MultiNetworkPolicies not read yet' } : { ready: true }),
  });
  const server = await startWebhookServer(app, tls, { port: opts.port, host: opts.host });
  logger.info({ port: server.port, sidecarImage: opts.sidecar.image, mode: opts.sidecar.mode, sourceGuard: opts.sidecar.sourceGuard }, 'webhook listening');

  // Keep answering while the endpoint removal reaches the apiserver, then stop: a webhook that
  // closes at once turns pod creations into failures for a few seconds at every rollout. Still
  // ready meanwhile: a deleted pod's endpoint is already not ready in its Service's slices, and
  // a /readyz that failed during the drain only left an Unhealthy Event per deletion.
  const program = new Program('webhook', logger, { message: 'shutting down', fields: { drainMs: opts.drainMs }, drain: () => sleep(opts.drainMs), errorMessage: 'shutdown failed', errorExitCode: 1 });
  await program.startAll([policies, { name: 'webhook server', stop: () => server.close() }, { name: 'certificate watch', stop: () => tls.close() }]);
  program.handleSignals();
  return undefined;
}

runMain(main, stderrStartFailure('webhook'));
