/**
 * Certificate reload under a running server, with the files laid out as kubelet lays out a
 * Secret volume: `tls.crt -> ..data/tls.crt`, `..data -> ..<timestamp>/`, and an update swaps
 * the `..data` symlink in one rename.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import tls from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { createCA, createServingCert, type CertKeyPair } from '../../cmd/certs/pki.js';
import { createApp, startWebhookServer, type WebhookServer } from '../../cmd/webhook/server.js';
import { loadCertificatePair, watchCertificateFiles, type CertificateSource } from '../../cmd/webhook/tls.js';
import { httpsGet, loopbackLookup } from '../certs/tls-client.js';

const NAME = 'multus-proxy-webhook.multus-proxy-system.svc';

/** Writes a pair the way kubelet updates a Secret volume: a new folder, then an atomic swap of ..data. */
function secretVolumeWrite(dir: string, pair: CertKeyPair, version: number): void {
  const folder = `..2026_${version}`;
  mkdirSync(join(dir, folder));
  writeFileSync(join(dir, folder, 'tls.crt'), pair.certPem);
  writeFileSync(join(dir, folder, 'tls.key'), pair.keyPem);
  symlinkSync(folder, join(dir, '..data_tmp'));
  renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
  if (version === 1) {
    symlinkSync('..data/tls.crt', join(dir, 'tls.crt'));
    symlinkSync('..data/tls.key', join(dir, 'tls.key'));
  } else {
    rmSync(join(dir, `..2026_${version - 1}`), { recursive: true });
  }
}

/** Opens a fresh TLS connection and returns the fingerprint of the certificate the server presented. */
function servedFingerprint(port: number, ca: string, opts: tls.ConnectionOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: NAME, servername: NAME, port, ca, lookup: loopbackLookup, ...opts }, () => {
      const fp = socket.getPeerCertificate().fingerprint256;
      socket.end();
      resolve(fp);
    });
    socket.on('error', reject);
  });
}

async function until(what: string, check: () => Promise<boolean>, ms = 5000): Promise<number> {
  const start = Date.now();
  while (Date.now() - start < ms) {
    if (await check()) return Date.now() - start;
    await delay(20);
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

void describe('webhook/tls certificate reload', () => {
  let dir: string;
  let source: CertificateSource;
  let server: WebhookServer;
  const caA = createCA();
  const caB = createCA();
  const leafA = createServingCert(caA, { service: 'multus-proxy-webhook', namespace: 'multus-proxy-system' });
  const leafB = createServingCert(caB, { service: 'multus-proxy-webhook', namespace: 'multus-proxy-system' });
  const fp = (p: CertKeyPair): string => new X509Certificate(p.certPem).fingerprint256;
  const bothCAs = caA.certPem + caB.certPem;
  const loads: string[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tls-reload-'));
    secretVolumeWrite(dir, leafA, 1);
    // A long poll: within this test only the folder watch can explain a quick reload.
    source = watchCertificateFiles(join(dir, 'tls.crt'), join(dir, 'tls.key'), { pollMs: 60_000, onLoad: (r) => loads.push(r) });
    const app = createApp({ endpoints: {}, maxBodyBytes: 1024 * 1024 });
    server = await startWebhookServer(app, source, { port: 0, host: '127.0.0.1' });
  });
  after(async () => {
    await server.close();
    source.close();
    rmSync(dir, { recursive: true, force: true });
  });

  void test('a Secret-volume swap is served to new connections while the server keeps running', async () => {
    assert.equal(await servedFingerprint(server.port, bothCAs), fp(leafA));
    assert.equal(await httpsGet(server.port, NAME, caA.certPem, '/healthz'), 'ok\n');
    const port = server.port;
    secretVolumeWrite(dir, leafB, 2);
    await until('the new certificate to be served', async () => (await servedFingerprint(port, bothCAs)) === fp(leafB));
    assert.equal(server.port, port);
    // A client that trusts only the new CA now connects; one that trusts only the old CA no longer does.
    assert.equal(await httpsGet(port, NAME, caB.certPem, '/healthz'), 'ok\n');
    await assert.rejects(httpsGet(port, NAME, caA.certPem, '/healthz'));
    assert.deepEqual(loads, ['loaded', 'loaded']);
  });

  void test('a half-written pair (new certificate, old key) is not taken; the served one stays', async () => {
    const before = source.current().fingerprint256;
    const other = createServingCert(caA, { service: 'x', namespace: 'y' });
    // Plain files this time (no symlinks): certificate first, key later.
    const plain = mkdtempSync(join(tmpdir(), 'tls-plain-'));
    try {
      writeFileSync(join(plain, 'tls.crt'), leafA.certPem);
      writeFileSync(join(plain, 'tls.key'), leafA.keyPem);
      const s = watchCertificateFiles(join(plain, 'tls.crt'), join(plain, 'tls.key'), { pollMs: 60_000 });
      writeFileSync(join(plain, 'tls.crt'), other.certPem);
      assert.equal(s.reload(), false);
      assert.equal(s.current().fingerprint256, fp(leafA));
      writeFileSync(join(plain, 'tls.key'), other.keyPem);
      assert.equal(s.reload(), true);
      assert.equal(s.current().fingerprint256, fp(other));
      s.close();
    } finally {
      rmSync(plain, { recursive: true, force: true });
    }
    assert.equal(source.current().fingerprint256, before);
  });

  void test('TLS 1.2 is accepted and TLS 1.1 refused', async () => {
    assert.equal(await servedFingerprint(server.port, bothCAs, { minVersion: 'TLSv1.2', maxVersion: 'TLSv1.2' }), fp(leafB));
    await assert.rejects(servedFingerprint(server.port, bothCAs, { minVersion: 'TLSv1', maxVersion: 'TLSv1.1' }), /version|protocol|alert/i);
  });

  void test('startup without usable files fails with a message naming the file and the fix', () => {
    const r = loadCertificatePair('/nonexistent/tls.crt', '/nonexistent/tls.key');
    assert.equal(r.ok, false);
    assert.match((r as { error: string }).error, /cannot read \/nonexistent\/tls\.crt .*mount the webhook's TLS Secret there or pass --tls-cert-file/);
    const bad = mkdtempSync(join(tmpdir(), 'tls-bad-'));
    try {
      writeFileSync(join(bad, 'tls.crt'), 'garbage');
      writeFileSync(join(bad, 'tls.key'), leafA.keyPem);
      assert.throws(() => watchCertificateFiles(join(bad, 'tls.crt'), join(bad, 'tls.key')), /tls\.crt is not a PEM certificate/);
      writeFileSync(join(bad, 'tls.crt'), leafB.certPem);
      assert.throws(() => watchCertificateFiles(join(bad, 'tls.crt'), join(bad, 'tls.key')), /tls\.key is not the private key of .*tls\.crt/);
    } finally {
      rmSync(bad, { recursive: true, force: true });
    }
  });
});
