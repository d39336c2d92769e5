/**
 * B1's baseline: the cheapest sensible admission webhook, an HTTPS express app that parses the
 * AdmissionReview and answers `allowed: true` for its uid. Same TLS certificate, same body limit
 * and same process setup as the real webhook, so the difference is the webhook's own work.
 * Env: TLS_CERT_FILE, TLS_KEY_FILE. Prints `LISTENING <port>` (127.0.0.1, an ephemeral port).
 */
import https from 'node:https';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import express from 'express';

const app = express();
app.use(express.json({ limit: '8mb' }));
app.post('/mutate', (req, res) => {
  const body = req.body as { request?: { uid?: unknown } } | undefined;
  const uid = typeof body?.request?.uid === 'string' ? body.request.uid : '';
  res.json({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid, allowed: true } });
});

const server = https.createServer({ cert: readFileSync(process.env['TLS_CERT_FILE'] ?? ''), key: readFileSync(process.env['TLS_KEY_FILE'] ?? '') }, app);
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`LISTENING ${(server.address() as AddressInfo).port}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
