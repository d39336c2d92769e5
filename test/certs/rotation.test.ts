import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { createCA, createServingCert } from '../../cmd/certs/pki.js';
import { inspectCert, isIssuedBy, splitPemBundle } from '../../src/cert-info.js';
import { normalizeIp, planCertificates, type CaStore, type RotationOptions, type ServingStore } from '../../cmd/certs/rotation.js';
import { fetchOverTls } from './tls-client.js';

const DAY = 86_400_000;
const base: RotationOptions = { service: 'hook', namespace: 'sys', caValidityDays: 30, leafValidityDays: 9, caRenewBeforeDays: 10, leafRenewBeforeDays: 3 };

function fingerprints(bundle: string): string[] {
  return splitPemBundle(bundle).map((p) => inspectCert(p)?.fingerprint256 ?? '?');
}

void describe('certs/rotation planCertificates', () => {
  void test('from nothing: a CA and a leaf it issued; the bundle is the CA', () => {
    const plan = planCertificates(undefined, undefined, base);
    assert.equal(plan.caChanged, true);
    assert.equal(plan.servingChanged, true);
    assert.ok(isIssuedBy(plan.serving.certPem, plan.ca.certPem));
    assert.deepEqual(fingerprints(plan.serving.caBundlePem), fingerprints(plan.ca.certPem));
    assert.equal(plan.ca.previousPem, '');
    assert.deepEqual(plan.reasons, ['new CA: no CA stored yet', 'new serving certificate: no serving certificate stored yet']);
  });

  void test('a second run with the stored result changes nothing', () => {
    const first = planCertificates(undefined, undefined, base);
    const second = planCertificates(first.ca, first.serving, base);
    assert.equal(second.caChanged, false);
    assert.equal(second.servingChanged, false);
    assert.deepEqual(second.reasons, []);
    assert.equal(second.serving.certPem, first.serving.certPem);
  });

  void test('a leaf close to expiry is renewed by the same CA; the bundle stays', () => {
    const t0 = new Date();
    const first = planCertificates(undefined, undefined, { ...base, now: t0 });
    const later = planCertificates(first.ca, first.serving, { ...base, now: new Date(t0.getTime() + 7 * DAY) });
    assert.equal(later.caChanged, false);
    assert.equal(later.servingChanged, true);
    assert.notEqual(later.serving.certPem, first.serving.certPem);
    assert.ok(isIssuedBy(later.serving.certPem, first.ca.certPem));
    assert.equal(later.serving.caBundlePem, first.serving.caBundlePem);
    assert.match(later.reasons.join(), /serving certificate expires in 2\.0 days \(renewing 3 days before\)/);
  });

  void test('different SANs (a new IP) give a new leaf; the same IP written differently does not', () => {
    const first = planCertificates(undefined, undefined, { ...base, ips: ['::1'] });
    const same = planCertificates(first.ca, first.serving, { ...base, ips: ['0:0:0:0:0:0:0:1'] });
    assert.equal(same.servingChanged, false);
    const more = planCertificates(first.ca, first.serving, { ...base, ips: ['::1', '127.0.0.1'] });
    assert.equal(more.servingChanged, true);
    assert.deepEqual(inspectCert(more.serving.certPem)?.ips.map(normalizeIp).sort(), ['127.0.0.1', '::1']);
    assert.match(more.reasons.join(), /names hook,hook\.sys.*wanted/);
  });

  void test('garbage or mismatched stores are replaced, each with its reason', () => {
    const good = planCertificates(undefined, undefined, base);
    const cases: [CaStore, ServingStore | undefined, RegExp][] = [
      [{ certPem: 'junk', keyPem: 'junk' }, undefined, /new CA: the stored CA certificate does not parse/],
      [{ certPem: good.serving.certPem, keyPem: good.serving.keyPem }, undefined, /is not a CA/],
      [{ certPem: good.ca.certPem, keyPem: createCA().keyPem }, undefined, /CA key does not belong/],
      [good.ca, { certPem: good.serving.certPem, keyPem: good.ca.keyPem, caBundlePem: good.serving.caBundlePem }, /serving key does not belong/],
      [good.ca, { ...createServingCert(createCA(), { service: 'hook', namespace: 'sys' }), caBundlePem: '' }, /not issued by the current CA/],
    ];
    for (const [ca, serving, why] of cases) {
      const plan = planCertificates(ca, serving, base);
      assert.match(plan.reasons.join('\n'), why);
      assert.ok(isIssuedBy(plan.serving.certPem, plan.ca.certPem));
    }
  });

  void test('renew-before not shorter than the validity is refused (it would renew on every run)', () => {
    assert.throws(() => planCertificates(undefined, undefined, { ...base, leafRenewBeforeDays: 9 }), /must be shorter than the validity/);
  });

  void test('CA rotation overlaps: the bundle holds new and old CA until the old one expires', async () => {
    // Certificates made 25 days ago: the 30-day CA has 5 days left, inside its 10-day renew window.
    const now = new Date();
    const past = new Date(now.getTime() - 25 * DAY);
    const first = planCertificates(undefined, undefined, { ...base, leafValidityDays: 29, leafRenewBeforeDays: 1, now: past });
    const rotated = planCertificates(first.ca, first.serving, { ...base, leafValidityDays: 29, leafRenewBeforeDays: 1, now });
    assert.equal(rotated.caChanged, true);
    assert.equal(rotated.servingChanged, true);
    assert.match(rotated.reasons[0] ?? '', /new CA: the CA expires in 5\.0 days/);
    assert.deepEqual(fingerprints(rotated.serving.caBundlePem), [...fingerprints(rotated.ca.certPem), ...fingerprints(first.ca.certPem)]);
    assert.deepEqual(fingerprints(rotated.ca.previousPem), fingerprints(first.ca.certPem));
    assert.ok(isIssuedBy(rotated.serving.certPem, rotated.ca.certPem));

    // A client that trusts the new bundle reaches the webhook whether it still serves the old
    // leaf (Secret volume not yet updated) or already the new one.
    const bundle = rotated.serving.caBundlePem;
    assert.equal(await fetchOverTls(first.serving, bundle, 'hook.sys.svc'), 'hello');
    assert.equal(await fetchOverTls(rotated.serving, bundle, 'hook.sys.svc'), 'hello');
    // The old bundle alone would not trust the new leaf: this is why the bundle is patched first.
    await assert.rejects(fetchOverTls(rotated.serving, first.serving.caBundlePem, 'hook.sys.svc'));

    // The next run keeps the old CA while it is valid, and drops it once it has expired.
    const again = planCertificates(rotated.ca, rotated.serving, { ...base, leafValidityDays: 29, leafRenewBeforeDays: 1, now });
    assert.equal(again.caChanged || again.servingChanged, false);
    const afterExpiry = planCertificates(rotated.ca, rotated.serving, { ...base, leafValidityDays: 29, leafRenewBeforeDays: 1, now: new Date(now.getTime() + 6 * DAY) });
    assert.deepEqual(fingerprints(afterExpiry.serving.caBundlePem), fingerprints(rotated.ca.certPem));
    assert.equal(afterExpiry.ca.previousPem, '');
  });

  void test('a lost CA Secret still trusts the CA that signed the leaf being served', () => {
    const first = planCertificates(undefined, undefined, base);
    const plan = planCertificates(undefined, first.serving, base);
    assert.deepEqual(fingerprints(plan.serving.caBundlePem), [...fingerprints(plan.ca.certPem), ...fingerprints(first.ca.certPem)]);
  });
});
