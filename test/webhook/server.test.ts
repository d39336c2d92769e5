import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { rmSync } from 'node:fs';
import fc from 'fast-check';
import supertest from 'supertest';
import { podHandler, serviceDefaultingHandler, serviceValidationHandler } from '../../cmd/webhook/handlers.js';
import { createWebhookMetrics } from '../../cmd/webhook/metrics.js';
import { createApp, decodeReview, PATHS, startWebhookServer, type WebhookServer } from '../../cmd/webhook/server.js';
import { watchCertificateFiles, type CertificateSource } from '../../cmd/webhook/tls.js';
import type { AdmissionReview } from '../../cmd/webhook/responses.js';
import { prom } from '../../src/metrics.js';
import { httpsRequest, type Reply } from '../certs/tls-client.js';
import { admissionRequest, applyResponse, ENABLED, fakeCluster, servingPairFolder, SIDECAR, WEBHOOK_DNS_NAME } from './fixtures.js';

const MAX_BODY = 2 * 1024 * 1024;

function buildApp(metrics = createWebhookMetrics(new prom.Registry()), ready?: () => { ready: boolean; reason?: string }) {
  const deps = { cluster: fakeCluster({ namespaces: { apps: ENABLED } }), sidecar: SIDECAR };
  return createApp({
    endpoints: {
      [PATHS.mutatePods]: { kind: 'Pod', handler: podHandler(deps) },
      [PATHS.mutateServices]: { kind: 'Service', handler: serviceDefaultingHandler({}) },
      [PATHS.validateServices]: { kind: 'Service', handler: serviceValidationHandler(deps) },
      '/boom': { kind: 'Pod', handler: () => Promise.reject(new Error('lookup exploded')) },
      '/slow': { kind: 'Pod', handler: () => new Promise(() => undefined) },
    },
    maxBodyBytes: MAX_BODY,
    metrics,
    handlerTimeoutMs: 200,
    ...(ready !== undefined ? { ready } : {}),
  });
}

function request(port: number, ca: string, method: string, path: string, body?: string | Buffer, contentType?: string): Promise<Reply> {
  return httpsRequest(port, WEBHOOK_DNS_NAME, ca, method, path, body, contentType);
}

const pod = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { generateName: 'web-', annotations: { 'k8s.v1.cni.cncf.io/service-network': 'net-a', 'k8s.v1.cni.cncf.io/networks': 'net-a' } },
  spec: { containers: [{ name: 'app', image: 'busybox' }] },
};

function reviewBody(object: unknown, namespace = 'apps', kind = 'Pod'): string {
  return JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: admissionRequest(object, namespace, 'CREATE', kind) });
}

void describe('webhook/server over HTTPS', () => {
  let dir: string;
  let tls: CertificateSource;
  let server: WebhookServer;
  let ca: string;
  const metrics = createWebhookMetrics(new prom.Registry());

  before(async () => {
    const pair = servingPairFolder('webhook-');
    dir = pair.dir;
    ca = pair.caPem;
    tls = watchCertificateFiles(pair.certFile, pair.keyFile);
    server = await startWebhookServer(buildApp(metrics), tls, { port: 0, host: '127.0.0.1' });
  });
  after(async () => {
    await server.close();
    tls.close();
    rmSync(dir, { recursive: true, force: true });
  });

  void test('a pod review is answered 200 with the uid echoed and a patch that applies', async () => {
    const body = reviewBody(pod);
    const r = await request(server.port, ca, 'POST', PATHS.mutatePods, body);
    assert.equal(r.status, 200);
    const review = JSON.parse(r.text) as AdmissionReview;
    assert.equal(review.apiVersion, 'admission.k8s.io/v1');
    assert.equal(review.response?.uid, (JSON.parse(body) as AdmissionReview).request?.uid);
    assert.equal(review.response?.patchType, 'JSONPatch');
    const out = applyResponse(pod, review.response ?? { uid: '', allowed: false });
    assert.equal(out.spec.containers.length, 1);
    assert.equal((out.spec as { initContainers?: { name: string }[] }).initContainers?.[0]?.name, 'multus-proxy');
  });

  void test('errors and health answer over TLS too (the HTTP layer itself is tested in process below)', async () => {
    const r = await request(server.port, ca, 'POST', PATHS.mutatePods, '{not json', 'application/json');
    assert.equal(r.status, 400);
    assert.match(r.text, /body is not valid JSON/);
    assert.equal((await request(server.port, ca, 'GET', '/healthz')).text, 'ok\n', 'still serving');
  });

  void test('a real-sized pod (1.5 MB of annotations, etcd’s object limit) fits under the body limit', async () => {
    const big = structuredClone(pod) as typeof pod & { metadata: { annotations: Record<string, string> } };
    big.metadata.annotations['example.com/blob'] = 'x'.repeat(1_500_000);
    const r = await request(server.port, ca, 'POST', PATHS.mutatePods, reviewBody(big));
    assert.equal(r.status, 200);
    assert.equal((JSON.parse(r.text) as AdmissionReview).response?.allowed, true);
  });
});

/**
 * The HTTP layer in process (supertest drives the express app without a socket of its own): content
 * type, body limit, uid echo, status codes for malformed reviews, health, readiness and metrics.
 * TLS and certificate reload are what the HTTPS tests above are for.
 */
void describe('webhook/server HTTP layer (supertest, in process)', () => {
  const metrics = createWebhookMetrics(new prom.Registry());
  let notReady: string | undefined;
  const app = buildApp(metrics, () => (notReady === undefined ? { ready: true } : { ready: false, reason: notReady }));
  const post = (path: string, body: string, type = 'application/json') => supertest(app).post(path).set('Content-Type', type).send(body);

  void test('a review is answered 200, as application/json, with the uid echoed', async () => {
    const body = reviewBody(pod);
    const r = await post(PATHS.mutatePods, body);
    assert.equal(r.status, 200);
    assert.match(r.headers['content-type'] ?? '', /^application\/json/);
    const review = r.body as AdmissionReview;
    assert.equal(review.kind, 'AdmissionReview');
    assert.equal(review.apiVersion, 'admission.k8s.io/v1');
    assert.equal(review.response?.uid, (JSON.parse(body) as AdmissionReview).request?.uid);
    for (const uid of ['a', 'ünïcode-uid', 'x'.repeat(200)]) {
      const withUid = JSON.stringify({ ...(JSON.parse(body) as AdmissionReview), request: { ...(JSON.parse(body) as AdmissionReview).request, uid } });
      assert.equal(((await post(PATHS.mutatePods, withUid)).body as AdmissionReview).response?.uid, uid);
    }
  });

  void test('content type: JSON and +json types are read, anything else is 415', async () => {
    assert.equal((await post(PATHS.mutatePods, reviewBody(pod), 'application/json; charset=utf-8')).status, 200);
    assert.equal((await post(PATHS.mutatePods, reviewBody(pod), 'application/vnd.kubernetes+json')).status, 200);
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/yaml']) {
      const r = await post(PATHS.mutatePods, reviewBody(pod), type);
      assert.equal(r.status, 415, type);
      assert.match(r.text, /is not JSON; send the AdmissionReview as application\/json/);
      assert.match(r.headers['content-type'] ?? '', /^text\/plain/);
    }
  });

  void test('body limit: up to the limit is read, one byte over is 413 naming the limit and the flag', async () => {
    const review = reviewBody(pod);
    const pad = (n: number) => `${review}${' '.repeat(n - Buffer.byteLength(review))}`;
    assert.equal((await post(PATHS.mutatePods, pad(MAX_BODY))).status, 200);
    const over = await post(PATHS.mutatePods, pad(MAX_BODY + 1));
    assert.equal(over.status, 413);
    assert.match(over.text, new RegExp(`request body of ${MAX_BODY + 1} bytes exceeds the limit of ${MAX_BODY} bytes; raise maxBodyBytes \\(--max-body-bytes\\)`));
  });

  void test('malformed reviews get a 4xx with a message saying what is wrong', async () => {
    const cases: [string | Buffer, string, number, RegExp][] = [
      ['{not json', 'application/json', 400, /body is not valid JSON/],
      ['hello', 'text/plain', 415, /Content-Type "text\/plain" is not JSON/],
      [
        JSON.stringify({ apiVersion: 'admission.k8s.io/v1beta1', kind: 'AdmissionReview', request: { uid: 'u' } }),
        'application/json',
        400,
        /apiVersion "admission\.k8s\.io\/v1beta1" is not supported.*admissionReviewVersions: \[v1\]/,
      ],
      [JSON.stringify({ apiVersion: 'v1', kind: 'Pod' }), 'application/json', 400, /kind "Pod" is not AdmissionReview/],
      [JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }), 'application/json', 400, /request is missing/],
      [JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { operation: 'CREATE', object: {} } }), 'application/json', 400, /request\.uid is missing/],
      [JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u', operation: 'CREATE' } }), 'application/json', 400, /request\.object is missing/],
      ['[1,2]', 'application/json', 400, /body is not a JSON object/],
      [Buffer.alloc(MAX_BODY + 10, 0x20), 'application/json', 413, /request body of \d+ bytes exceeds the limit of 2097152 bytes/],
    ];
    for (const [body, type, status, message] of cases) {
      const r = await supertest(app).post(PATHS.mutatePods).set('Content-Type', type).send(body);
      assert.equal(r.status, status, `${String(body).slice(0, 60)} -> ${r.text}`);
      assert.match(r.text, message);
    }
    assert.equal((await supertest(app).get('/healthz')).text, 'ok\n', 'still serving');
  });

  void test('DELETE and CONNECT are allowed without a decision; GET on an admission path is 404', async () => {
    const del = JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'd', operation: 'DELETE' } });
    const r = await post(PATHS.mutatePods, del);
    assert.equal(r.status, 200);
    assert.deepEqual((r.body as AdmissionReview).response, { uid: 'd', allowed: true });
    assert.equal((await supertest(app).get(PATHS.mutatePods)).status, 404);
  });

  void test('failures while deciding are HTTP 200, allowed:false, code 500 with the reason; a wrong kind says which rule to fix', async () => {
    const boom = (await post('/boom', reviewBody(pod))).body as AdmissionReview;
    assert.deepEqual(boom.response?.status, { code: 500, message: 'multus-proxy webhook could not decide: lookup exploded', reason: 'InternalError' });
    const slow = (await post('/slow', reviewBody(pod))).body as AdmissionReview;
    assert.match(slow.response?.status?.message ?? '', /no decision within 200 ms/);
    const wrong = (await post(PATHS.mutatePods, reviewBody({ metadata: {} }, 'apps', 'Service'))).body as AdmissionReview;
    assert.match(wrong.response?.status?.message ?? '', /\/mutate-pods decides on Pod objects, not Service; fix the rules/);
  });

  void test('health, readiness and metrics on the same port; requests counted by outcome and reason', async () => {
    const h = await supertest(app).get('/healthz');
    assert.equal(h.status, 200);
    assert.equal(h.text, 'ok\n');
    notReady = 'shutting down';
    const nr = await supertest(app).get('/readyz');
    assert.equal(nr.status, 503);
    assert.equal(nr.text, 'not ready: shutting down\n');
    const t0 = Date.now();
    const held = await supertest(app).get('/readyz?wait=0.2');
    assert.equal(held.status, 503, '?wait= holds the answer for the wait, then says why');
    assert.ok(Date.now() - t0 >= 180, `held ${Date.now() - t0} ms`);
    notReady = undefined;
    assert.equal((await supertest(app).get('/readyz')).status, 200);
    const m = await supertest(app).get('/metrics');
    assert.equal(m.status, 200);
    assert.match(m.text, /multus_proxy_webhook_requests_total\{endpoint="\/mutate-pods",outcome="injected",reason="native"\} \d+/);
    assert.match(m.text, /multus_proxy_webhook_requests_total\{endpoint="\/mutate-pods",outcome="bad-request",reason="413"\} 2/, 'the two over-limit bodies above');
    assert.match(m.text, /multus_proxy_webhook_request_duration_seconds_bucket\{le="0\.0001",endpoint="\/mutate-pods"\}/);
    assert.equal((await supertest(app).get('/nope')).status, 404);
  });
});

void describe('webhook/server fuzz (plain HTTP, same express app)', () => {
  let srv: http.Server;
  let port: number;
  before(async () => {
    srv = http.createServer(buildApp());
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    port = (srv.address() as AddressInfo).port;
  });
  after(() => new Promise<void>((r) => srv.close(() => r())));

  const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
  const post = (path: string, body: string): Promise<Reply> =>
    new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path, method: 'POST', agent, headers: { 'content-type': 'application/json' } }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      });
      req.on('error', reject);
      req.end(body);
    });

  const anyJson = fc.jsonValue({ maxDepth: 4 });
  const reviewish = fc.record(
    {
      apiVersion: fc.oneof(fc.constant('admission.k8s.io/v1'), fc.string()),
      kind: fc.oneof(fc.constant('AdmissionReview'), fc.string()),
      request: fc.record(
        {
          uid: fc.oneof(fc.uuid(), fc.constant(''), fc.integer()),
          operation: fc.constantFrom('CREATE', 'UPDATE', 'DELETE', 'CONNECT', 'PATCH'),
          namespace: fc.oneof(fc.constant('apps'), fc.string()),
          kind: fc.oneof(fc.constant({ group: '', version: 'v1', kind: 'Pod' }), fc.constant({ group: '', version: 'v1', kind: 'Service' }), anyJson),
          object: fc.oneof(
            fc.constant(pod),
            fc.record(
              {
                metadata: fc.oneof(
                  fc.record(
                    {
                      annotations: fc.dictionary(
                        fc.constantFrom('k8s.v1.cni.cncf.io/service-network', 'k8s.v1.cni.cncf.io/networks', 'k8s.v1.cni.cncf.io/service-selector', 'x'),
                        fc.oneof(fc.string(), anyJson),
                      ),
                      labels: anyJson,
                    },
                    { requiredKeys: [] },
                  ),
                  anyJson,
                ),
                spec: anyJson,
              },
              { requiredKeys: [] },
            ),
            anyJson,
          ),
        },
        { requiredKeys: [] },
      ),
    },
    { requiredKeys: [] },
  );

  void test('random bodies never crash the handler: 200 with the uid echoed, or a 4xx', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(PATHS.mutatePods, PATHS.mutateServices, PATHS.validateServices),
        fc.oneof(
          reviewish.map((r) => JSON.stringify(r)),
          anyJson.map((j) => JSON.stringify(j)),
          fc.string(),
        ),
        async (path, body) => {
          const r = await post(path, body);
          assert.ok(r.status === 200 || (r.status >= 400 && r.status < 500), `status ${r.status} for ${body.slice(0, 200)}: ${r.text}`);
          if (r.status === 200) {
            const review = JSON.parse(r.text) as AdmissionReview;
            const sent = decodeReview(JSON.parse(body));
            assert.ok(sent.ok);
            assert.equal(review.response?.uid, sent.value.uid);
          } else {
            assert.ok(r.text.length > 10, 'a 4xx carries a message');
          }
        },
      ),
      { numRuns: 400 },
    );
    agent.destroy();
  });
});
