/**
 * The HTTP layer: express on node:https. Decodes and checks the AdmissionReview envelope,
 * bounds the body, echoes the uid, times each request into the metrics, and turns anything that
 * goes wrong into a clear answer: a malformed request gets a 4xx with a message, a failure while
 * deciding gets HTTP 200 with allowed:false and code 500 (the apiserver then applies the
 * configuration's failurePolicy). /healthz, /readyz and /metrics share the HTTPS port.
 */
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { listenDualStack, replyReady } from '../../src/health.js';
import express, { type NextFunction, type Request, type Response } from 'express';
import type { Logger } from '../../src/log.js';
import { err, ok, type Result } from '../../src/result.js';
import type { Handler } from './handlers.js';
import type { WebhookMetrics } from './metrics.js';
import { ADMISSION_API_VERSION, ADMISSION_KIND, allowed, errored, review, type AdmissionRequest, type Operation } from './responses.js';
import type { CertificateSource } from './tls.js';
import { BODY_BYTES_IN_FLIGHT, createIntake } from './intake.js';

export const PATHS = {
  mutatePods: '/mutate-pods',
  /** Pods of namespaces without the injection label: injected only when a MultiNetworkPolicy selects them. */
  mutateSelectedPods: '/mutate-selected-pods',
  mutateServices: '/mutate-services',
  validateServices: '/validate-services',
  validatePolicies: '/validate-multi-networkpolicies',
} as const;

export interface Endpoint {
  /** The object kind this endpoint decides on; another kind means a misconfigured webhook rule. */
  readonly kind: string;
  readonly handler: Handler;
}

export interface AppOptions {
  readonly endpoints: Readonly<Record<string, Endpoint>>;
  readonly maxBodyBytes: number;
  readonly metrics?: WebhookMetrics;
  readonly logger?: Logger;
  readonly ready?: () => { ready: boolean; reason?: string };
  /** An answer after the apiserver's timeout (5 s in our configurations) is wasted: give up before. */
  readonly handlerTimeoutMs?: number;
}

const OPERATIONS: readonly Operation[] = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'];

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Checks the envelope; the message says what is wrong and what the sender should do. */
export function decodeReview(body: unknown): Result<AdmissionRequest, string> {
  if (!isObject(body)) return err('body is not a JSON object; send an AdmissionReview (admission.k8s.io/v1)');
  if (body['kind'] !== ADMISSION_KIND) return err(`kind ${JSON.stringify(body['kind'])} is not ${ADMISSION_KIND}; send an AdmissionReview (admission.k8s.io/v1)`);
  if (body['apiVersion'] !== ADMISSION_API_VERSION) {
    return err(`apiVersion ${JSON.stringify(body['apiVersion'])} is not supported; only ${ADMISSION_API_VERSION} is: set admissionReviewVersions: [v1] in the webhook configuration`);
  }
  const req = body['request'];
  if (!isObject(req)) return err('request is missing or not an object; an AdmissionReview sent to a webhook must carry a request');
  const uid = req['uid'];
  if (typeof uid !== 'string' || uid === '') return err('request.uid is missing or empty; the answer must echo it');
  const operation = req['operation'];
  if (typeof operation !== 'string' || !OPERATIONS.includes(operation as Operation)) {
    return err(`request.operation ${JSON.stringify(operation)} is not one of ${OPERATIONS.join(', ')}`);
  }
  if ((operation === 'CREATE' || operation === 'UPDATE') && !isObject(req['object'])) return err(`request.object is missing or not an object for ${operation}`);
  const obj = req['object'];
  if (isObject(obj) && obj['metadata'] !== undefined && !isObject(obj['metadata'])) return err('request.object.metadata is not an object');
  if (req['namespace'] !== undefined && typeof req['namespace'] !== 'string') return err('request.namespace is not a string');
  return ok(req as unknown as AdmissionRequest);
}

function seconds(start: bigint): number {
  return Number(process.hrtime.bigint() - start) / 1e9;
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`no decision within ${ms} ms (apiserver lookups too slow)`)), ms)));
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

export function createApp(opts: AppOptions): express.Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  const log = opts.logger;
  const badRequest = (res: Response, endpoint: string, status: number, message: string, start: bigint): void => {
    opts.metrics?.request(endpoint, 'bad-request', String(status), seconds(start));
    log?.warn({ endpoint, status, message }, 'malformed admission request');
    res.status(status).type('text/plain').send(`${message}\n`);
  };

  app.get('/healthz', (_req, res) => void res.type('text/plain').send('ok\n'));
  app.get('/readyz', (req, res) => replyReady(() => opts.ready?.() ?? { ready: true }, req.url.split('?')[1] ?? '', res));
  app.get('/metrics', (_req, res, next) => {
    if (opts.metrics === undefined) return void res.status(404).send('no metrics\n');
    opts.metrics.registry.metrics().then((text) => void res.type(opts.metrics?.registry.contentType ?? 'text/plain').send(text), next);
  });

  const json = express.json({ limit: opts.maxBodyBytes, type: ['application/json', 'application/*+json'] });
  const intake = createIntake(BODY_BYTES_IN_FLIGHT, opts.maxBodyBytes);
  for (const [path, endpoint] of Object.entries(opts.endpoints)) {
    app.post(
      path,
      intake.middleware,
      (req, res, next) => {
        (req as Request & { startedAt?: bigint }).startedAt = process.hrtime.bigint();
        json(req, res, next);
      },
      async (req: Request & { startedAt?: bigint }, res: Response) => {
        const start = req.startedAt ?? process.hrtime.bigint();
        if (req.body === undefined)
          return badRequest(res, path, 415, `Content-Type ${JSON.stringify(req.headers['content-type'] ?? '')} is not JSON; send the AdmissionReview as application/json`, start);
        const decoded = decodeReview(req.body);
        if (!decoded.ok) return badRequest(res, path, 400, decoded.error, start);
        const request = decoded.value;
        let handled;
        if (request.operation === 'DELETE' || request.operation === 'CONNECT') {
          handled = { response: allowed(request.uid), outcome: 'allowed' as const, reason: 'operation-ignored' };
        } else if (request.kind?.kind !== undefined && request.kind.kind !== endpoint.kind) {
          const message = `${path} decides on ${endpoint.kind} objects, not ${request.kind.kind}; fix the rules of the webhook configuration that calls it`;
          handled = { response: errored(request.uid, message), outcome: 'error' as const, reason: 'wrong-kind' };
        } else {
          try {
            handled = await withTimeout(endpoint.handler(request), opts.handlerTimeoutMs ?? 4_000);
          } catch (e) {
            log?.error({ err: e, endpoint: path, uid: request.uid }, 'admission failed');
            handled = { response: errored(request.uid, `multus-proxy webhook could not decide: ${(e as Error).message}`), outcome: 'error' as const, reason: 'exception' };
          }
        }
        opts.metrics?.request(path, handled.outcome, handled.reason, seconds(start));
        res.status(200).json(review(handled.response));
      },
    );
  }

  app.use((req: Request, res: Response) => void res.status(404).type('text/plain').send(`no such endpoint: ${req.method} ${req.path}\n`));
  // Body-parser failures (too large, not JSON, bad charset) arrive here with their HTTP status.
  app.use((e: unknown, req: Request & { startedAt?: bigint }, res: Response, _next: NextFunction) => {
    const error = e as { status?: number; type?: string; message?: string; length?: number; limit?: number };
    const status = typeof error.status === 'number' && error.status >= 400 && error.status < 500 ? error.status : 500;
    const message =
      error.type === 'entity.too.large'
        ? `request body of ${error.length ?? '?'} bytes exceeds the limit of ${error.limit ?? opts.maxBodyBytes} bytes; raise maxBodyBytes (--max-body-bytes) if such objects are expected`
        : error.type === 'entity.parse.failed'
          ? `body is not valid JSON (${error.message ?? 'parse error'}); send an AdmissionReview (admission.k8s.io/v1)`
          : `${error.message ?? 'request failed'}`;
    if (status === 500) log?.error({ err: e }, 'webhook request failed');
    badRequest(res, req.path, status, message, req.startedAt ?? process.hrtime.bigint());
  });
  return app;
}

export interface WebhookServer {
  readonly port: number;
  readonly server: https.Server;
  close(): Promise<void>;
}

/**
 * HTTPS with TLS 1.2 or newer. A new certificate from `tls` is swapped in with
 * setSecureContext: connections opened afterwards get it, open ones keep theirs.
 */
export async function startWebhookServer(app: express.Express, tls: CertificateSource, listen: { port: number; host: string }): Promise<WebhookServer> {
  const context = () => ({ cert: tls.current().cert, key: tls.current().key, minVersion: 'TLSv1.2' as const });
  const server = https.createServer(context(), app);
  tls.onChange(() => server.setSecureContext(context()));
  // The apiserver (Go) keeps idle connections up to 90 s; closing ours later means it never
  // sends a request on a connection we are closing at that moment.
  server.keepAliveTimeout = 120_000;
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  await listenDualStack(server, listen.port, listen.host);
  return {
    port: (server.address() as AddressInfo).port,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
