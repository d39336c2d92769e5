/**
 * The webhook's Prometheus metrics (prefix `multus_proxy_webhook_`), served on /metrics of the
 * same HTTPS port. Requests are counted by endpoint, outcome and reason, so "why was my pod not
 * injected" shows up as e.g. outcome="skipped",reason="pod-security" (an inherited pod admitted without it).
 */
import { createRegistry, FINE_SECONDS_BUCKETS, prom, type Registry } from '../../src/metrics.js';

export const METRIC_PREFIX = 'multus_proxy_webhook';

/**
 * injected / patched (a Service label) / allowed (nothing to change) / skipped (pod not for us) /
 * denied (user error or policy) / error (we could not decide) / bad-request (not an AdmissionReview).
 */
export type Outcome = 'injected' | 'patched' | 'allowed' | 'skipped' | 'denied' | 'error' | 'bad-request';

export interface WebhookMetrics {
  readonly registry: Registry;
  request(endpoint: string, outcome: Outcome, reason: string, seconds: number): void;
  /** An endpoint the server serves: its failure outcomes get zero series, so error rates have data before the first error. */
  serves(endpoint: string): void;
  /** A certificate (re)load: its expiry, and whether the load worked. */
  certificate(result: 'loaded' | 'failed', notAfter?: Date): void;
}

/** The failures the server counts on every endpoint, as outcome and reason (server.ts): a wrong kind, a handler that threw, a body that is not JSON or not a review. */
const FAILURES: readonly (readonly [Outcome, string])[] = [
  ['error', 'wrong-kind'],
  ['error', 'exception'],
  ['bad-request', '400'],
  ['bad-request', '415'],
];

export function createWebhookMetrics(registry: Registry = createRegistry(METRIC_PREFIX)): WebhookMetrics {
  const n = (s: string): string => `${METRIC_PREFIX}_${s}`;
  const requests = new prom.Counter({
    name: n('requests_total'),
    help: 'Admission requests by endpoint, outcome (injected, patched, allowed, skipped, denied, error, bad-request) and reason.',
    labelNames: ['endpoint', 'outcome', 'reason'],
    registers: [registry],
  });
  const duration = new prom.Histogram({
    name: n('request_duration_seconds'),
    help: 'Time from receiving an admission request to sending the answer, by endpoint.',
    labelNames: ['endpoint'],
    buckets: FINE_SECONDS_BUCKETS,
    registers: [registry],
  });
  const reloads = new prom.Counter({ name: n('certificate_loads_total'), help: 'Serving certificate loads by result.', labelNames: ['result'], registers: [registry] });
  const expiry = new prom.Gauge({ name: n('certificate_expiry_timestamp_seconds'), help: 'notAfter of the serving certificate in use (Unix seconds).', registers: [registry] });
  for (const result of ['loaded', 'failed'] as const) reloads.inc({ result }, 0);
  return {
    registry,
    request(endpoint, outcome, reason, seconds) {
      requests.inc({ endpoint, outcome, reason });
      duration.observe({ endpoint }, seconds);
    },
    serves(endpoint) {
      for (const [outcome, reason] of FAILURES) requests.inc({ endpoint, outcome, reason }, 0);
    },
    certificate(result, notAfter) {
      reloads.inc({ result });
      if (notAfter !== undefined) expiry.set(notAfter.getTime() / 1000);
    },
  };
}
