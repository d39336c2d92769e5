import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fetchOverTls } from './tls-client.js';
import { createCA, createServingCert, serviceDnsNames } from '../../cmd/certs/pki.js';
import { inspectCert, isIssuedBy, keyMatchesCert, splitPemBundle } from '../../src/cert-info.js';

function openssl(args: string[]): string {
  try {
    return execFileSync('openssl', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (e) {
    const err = e as { code?: string; stdout?: string; stderr?: string };
    if (err.code === 'ENOENT') throw new Error('openssl is not installed: apt-get install openssl', { cause: e });
    throw new Error(`openssl ${args.join(' ')} failed: ${err.stdout ?? ''}${err.stderr ?? ''}`, { cause: e });
  }
}

void describe('certs/pki', () => {
  const ca = createCA({ validityDays: 30 });
  const leaf = createServingCert(ca, { service: 'hook', namespace: 'sys', ips: ['127.0.0.1', '::1'], validityDays: 10 });

  void test('the CA is a CA with the right constraints and usages', () => {
    const x = new X509Certificate(ca.certPem);
    assert.equal(x.ca, true);
    assert.equal(x.checkIssued(x), true, 'self-signed');
    assert.equal(x.verify(x.publicKey), true);
  });

  void test('the serving certificate names the Service four ways plus the IPs, and only serves', () => {
    const info = inspectCert(leaf.certPem);
    assert.ok(info);
    assert.deepEqual(info.dnsNames, serviceDnsNames('hook', 'sys'));
    assert.deepEqual(info.dnsNames, ['hook', 'hook.sys', 'hook.sys.svc', 'hook.sys.svc.cluster.local']);
    assert.deepEqual(info.ips, ['127.0.0.1', '0:0:0:0:0:0:0:1']);
    assert.equal(info.isCA, false);
    const days = (info.notAfter.getTime() - Date.now()) / 86_400_000;
    assert.ok(days > 9.9 && days <= 10.01, `validity ${days} days`);
    assert.equal(keyMatchesCert(leaf.certPem, leaf.keyPem), true);
    assert.equal(keyMatchesCert(leaf.certPem, ca.keyPem), false);
  });

  void test('the chain verifies with node:crypto and a foreign CA does not', () => {
    const other = createCA();
    const x = new X509Certificate(leaf.certPem);
    assert.equal(x.checkIssued(new X509Certificate(ca.certPem)), true);
    assert.equal(x.verify(new X509Certificate(ca.certPem).publicKey), true);
    assert.equal(isIssuedBy(leaf.certPem, ca.certPem), true);
    assert.equal(isIssuedBy(leaf.certPem, other.certPem), false);
  });

  void test('openssl verifies the chain for TLS server use and shows the extensions', () => {
    const dir = mkdtempSync(join(tmpdir(), 'certs-'));
    try {
      writeFileSync(join(dir, 'ca.crt'), ca.certPem);
      writeFileSync(join(dir, 'tls.crt'), leaf.certPem);
      const out = openssl(['verify', '-purpose', 'sslserver', '-CAfile', join(dir, 'ca.crt'), join(dir, 'tls.crt')]);
      assert.match(out, /tls\.crt: OK/);
      const leafText = openssl(['x509', '-noout', '-text', '-in', join(dir, 'tls.crt')]);
      assert.match(leafText, /Basic Constraints: critical\s+CA:FALSE/);
      assert.match(leafText, /Key Usage: critical\s+Digital Signature, Key Encipherment/);
      assert.match(leafText, /Extended Key Usage:\s+TLS Web Server Authentication/);
      assert.match(leafText, /DNS:hook\.sys\.svc\.cluster\.local/);
      const caText = openssl(['x509', '-noout', '-text', '-in', join(dir, 'ca.crt')]);
      assert.match(caText, /Basic Constraints: critical\s+CA:TRUE, pathlen:0/);
      assert.match(caText, /Key Usage: critical\s+Digital Signature, Certificate Sign, CRL Sign/);
      // Names are UTF8String: Go (the apiserver reading caBundle) rejects a PrintableString with '@'.
      for (const f of ['ca.crt', 'tls.crt']) {
        const asn1 = openssl(['asn1parse', '-in', join(dir, f)]);
        assert.match(asn1, /UTF8STRING\s+:multus-proxy-webhook-ca@\d+/);
        assert.doesNotMatch(asn1, /PRINTABLESTRING/);
      }
      // A leaf from another CA must fail the same check.
      const stranger = createServingCert(createCA(), { service: 'hook', namespace: 'sys' });
      writeFileSync(join(dir, 'stranger.crt'), stranger.certPem);
      assert.throws(() => openssl(['verify', '-CAfile', join(dir, 'ca.crt'), join(dir, 'stranger.crt')]), /unable to get local issuer/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  void test('serials are random and positive', () => {
    const serials = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const s = inspectCert(createServingCert(ca, { service: 'a', namespace: 'b' }).certPem)?.serial ?? '';
      assert.match(s, /^[0-7][0-9A-F]{31}$/, `serial ${s} is 16 bytes with the top bit clear`);
      serials.add(s);
    }
    assert.equal(serials.size, 5);
  });

  void test('a leaf never outlives its CA', () => {
    const shortCa = createCA({ validityDays: 2 });
    const l = createServingCert(shortCa, { service: 'a', namespace: 'b', validityDays: 365 });
    assert.equal(inspectCert(l.certPem)?.notAfter.getTime(), inspectCert(shortCa.certPem)?.notAfter.getTime());
  });

  void test('bad inputs are refused with a message', () => {
    assert.throws(() => createServingCert(ca, { service: 'a', namespace: 'b', ips: ['10.0.0.300'] }), /IP SAN "10\.0\.0\.300": not an IPv4 or IPv6 address/);
    assert.throws(() => createCA({ validityDays: 0 }), /must be a positive number of days/);
    assert.equal(inspectCert('not a certificate'), undefined);
    assert.equal(keyMatchesCert('x', 'y'), false);
  });

  void test('splitPemBundle returns every certificate in order', () => {
    const other = createCA();
    const parts = splitPemBundle(ca.certPem + other.certPem);
    assert.equal(parts.length, 2);
    assert.equal(inspectCert(parts[1] ?? '')?.fingerprint256, inspectCert(other.certPem)?.fingerprint256);
  });

  void test('an HTTPS client trusting only the CA connects by every service DNS name', async () => {
    for (const name of serviceDnsNames('hook', 'sys')) {
      assert.equal(await fetchOverTls(leaf, ca.certPem, name), 'hello', name);
    }
    await assert.rejects(fetchOverTls(leaf, ca.certPem, 'other.sys.svc'), /does not match certificate's altnames|ERR_TLS_CERT_ALTNAME_INVALID/);
    await assert.rejects(fetchOverTls(leaf, createCA().certPem, 'hook.sys.svc'), /unable to verify|self.signed|UNABLE_TO_VERIFY/i);
  });
});
