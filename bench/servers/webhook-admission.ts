/**
 * B1's subject: the real webhook app (cmd/webhook/server.ts createApp + startWebhookServer, the pod
 * handler, metrics and certificate loading, wired as cmd/webhook/main.ts wires them) on 127.0.0.1.
 * Only the cluster lookups are replaced by answers that need no apiserver (namespace enabled,
 * native sidecars supported, NAD present), as a warm namespace cache gives in a cluster: B1
 * measures the webhook's own work, not the apiserver's.
 * Env: TLS_CERT_FILE, TLS_KEY_FILE. Prints `LISTENING <port>`.
 */
import { INJECTION_ENABLED, INJECTION_LABEL } from '../../src/keys.js';
import { createLogger } from '../../src/log.js';
import type { ClusterLookups } from '../../cmd/webhook/cluster.js';
import { podHandler } from '../../cmd/webhook/handlers.js';
import { createWebhookMetrics } from '../../cmd/webhook/metrics.js';
import { parseOptions } from '../../cmd/webhook/options.js';
import { createApp, PATHS, startWebhookServer } from '../../cmd/webhook/server.js';
import { watchCertificateFiles } from '../../cmd/webhook/tls.js';

/** How B1 starts this server and what it checks in each answer (an injection is a JSONPatch). */
export const WEBHOOK_SERVER = {
  name: 'multus-proxy webhook',
  script: 'bench/servers/webhook-admission.ts',
  path: PATHS.mutatePods,
  expect: '"patch":',
  description: 'bench/servers/webhook-admission.ts: the real webhook app and pod handler (cmd/webhook/server.ts, cmd/webhook/handlers.ts) with in-memory cluster lookups',
};

const warmCluster: ClusterLookups = {
  namespaceLabels: async () => ({ [INJECTION_LABEL]: INJECTION_ENABLED }),
  nativeSidecarsSupported: async () => true,
  nadExists: async () => ({ state: 'exists' }),
  nodeAgent: async () => 'ready',
};

async function main(): Promise<void> {
  const parsed = parseOptions({ ...process.env, SIDECAR_IMAGE: 'registry.example/multus-proxy:bench' }, [], () => undefined);
  if (!parsed.ok) throw new Error(parsed.error);
  const opts = parsed.value;
  const logger = createLogger('webhook', opts.logLevel);
  const metrics = createWebhookMetrics();
  const tls = watchCertificateFiles(opts.tlsCertFile, opts.tlsKeyFile, { pollMs: opts.certPollMs, logger });
  const app = createApp({
    endpoints: { [PATHS.mutatePods]: { kind: 'Pod', handler: podHandler({ cluster: warmCluster, sidecar: opts.sidecar, logger }) } },
    maxBodyBytes: opts.maxBodyBytes,
    metrics,
    logger,
  });
  const server = await startWebhookServer(app, tls, { port: 0, host: '127.0.0.1' });
  process.stdout.write(`LISTENING ${server.port}\n`);
  process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
}

if (process.argv[1]?.endsWith('webhook-admission.ts')) await main();
