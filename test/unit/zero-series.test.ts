/**
 * Labelled counters an alert or a dashboard selects by one label value have a zero series for each
 * known value from the start, so the expression returns data on a healthy program (and a rate has
 * two samples once the first event comes), as Prometheus client practice recommends.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { prom } from '../../src/metrics.js';
import { createControllerMetrics, ERROR_STAGES } from '../../cmd/controller/metrics.js';
import { createWebhookMetrics } from '../../cmd/webhook/metrics.js';

void test('controller: errors by every stage it counts and refused slice writes by verb start at 0', async () => {
  const registry = new prom.Registry();
  createControllerMetrics(registry);
  const text = await registry.metrics();
  for (const stage of ERROR_STAGES) assert.match(text, new RegExp(`^multus_proxy_controller_errors_total\\{stage="${stage}"\\} 0$`, 'm'));
  for (const verb of ['create', 'update']) assert.match(text, new RegExp(`^multus_proxy_controller_slice_writes_refused_total\\{verb="${verb}"\\} 0$`, 'm'));
});

void test("webhook: certificate loads by result, and each served endpoint's error and bad-request outcomes, start at 0; a counted error adds to its series", async () => {
  const registry = new prom.Registry();
  const m = createWebhookMetrics(registry);
  m.serves('/validate-services');
  let text = await registry.metrics();
  for (const result of ['loaded', 'failed']) assert.match(text, new RegExp(`^multus_proxy_webhook_certificate_loads_total\\{result="${result}"\\} 0$`, 'm'));
  for (const [outcome, reason] of [
    ['error', 'wrong-kind'],
    ['error', 'exception'],
    ['bad-request', '400'],
    ['bad-request', '415'],
  ])
    assert.match(text, new RegExp(`^multus_proxy_webhook_requests_total\\{endpoint="/validate-services",outcome="${outcome}",reason="${reason}"\\} 0$`, 'm'));
  assert.doesNotMatch(text, /endpoint="\/mutate-pods"/, 'only endpoints the server serves');
  m.request('/validate-services', 'error', 'wrong-kind', 0.001);
  text = await registry.metrics();
  assert.match(text, /^multus_proxy_webhook_requests_total\{endpoint="\/validate-services",outcome="error",reason="wrong-kind"\} 1$/m);
});
