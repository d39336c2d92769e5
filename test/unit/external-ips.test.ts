/**
 * External IPs on secondary networks (src/external-ips.ts): not served without the admin's CIDR
 * list; with it, new addresses outside it are denied (the DenyServiceExternalIPs reasoning,
 * CVE-2020-8554), addresses the Service already had are kept on update.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { EXTERNAL_IPS_NOT_CONFIGURED, externalIPAllowed, externalIPsVerdict, parseExternalIPPolicy, type ExternalIPPolicy } from '../../src/external-ips.js';
import type { V1Service } from '../../src/kube/types.js';

const svc = (ips: string[]): V1Service => ({ metadata: { name: 'web', namespace: 'app' }, spec: { externalIPs: ips } });
function policy(cidrs: string[] | undefined): ExternalIPPolicy {
  const p = parseExternalIPPolicy(cidrs, 'externalIPs.allowedCIDRs');
  assert.ok(p.ok, p.ok ? '' : p.error);
  return p.value;
}
const OBJ = 'Service app/web';

void describe('externalIPsVerdict', () => {
  void test('no external IPs: nothing to say', () => {
    assert.deepEqual(externalIPsVerdict(svc([]), undefined, EXTERNAL_IPS_NOT_CONFIGURED, OBJ), {});
  });
  void test('no list configured: admitted with a warning that names the addresses, the risk and the setting', () => {
    const v = externalIPsVerdict(svc(['192.0.2.10']), undefined, EXTERNAL_IPS_NOT_CONFIGURED, OBJ);
    assert.equal(v.deny, undefined);
    assert.match(v.warning ?? '', /Service app\/web: spec\.externalIPs \(192\.0\.2\.10\) are not served.*CVE-2020-8554.*externalIPs\.allowedCIDRs/);
  });
  void test('configured: inside an allowed CIDR is admitted silently', () => {
    assert.deepEqual(externalIPsVerdict(svc(['192.0.2.10', '2001:db8::5']), undefined, policy(['192.0.2.0/24', '2001:db8::/64']), OBJ), {});
  });
  void test('configured: a new address outside every CIDR is denied, naming it, the list and the fix', () => {
    const v = externalIPsVerdict(svc(['192.0.2.10', '198.51.100.7']), undefined, policy(['192.0.2.0/24']), OBJ);
    assert.match(v.deny ?? '', /Service app\/web: spec\.externalIPs "198\.51\.100\.7": is outside the CIDRs .*\(192\.0\.2\.0\/24\).*CVE-2020-8554.*externalIPs\.allowedCIDRs/);
  });
  void test('configured empty: every new external IP is denied', () => {
    assert.match(externalIPsVerdict(svc(['192.0.2.10']), undefined, policy([]), OBJ).deny ?? '', /none \(every external IP is denied\)/);
  });
  void test('update: an address the Service already had is kept (with a warning), a new one outside is denied', () => {
    const old = svc(['198.51.100.7']);
    const kept = externalIPsVerdict(svc(['198.51.100.7']), old, policy(['192.0.2.0/24']), OBJ);
    assert.equal(kept.deny, undefined);
    assert.match(kept.warning ?? '', /198\.51\.100\.7 are outside the allowed CIDRs .* not served/);
    assert.ok(externalIPsVerdict(svc(['198.51.100.7', '203.0.113.1']), old, policy(['192.0.2.0/24']), OBJ).deny?.includes('203.0.113.1'));
  });
});

void describe('the admin list', () => {
  void test('a bad CIDR names the entry and the fix', () => {
    const p = parseExternalIPPolicy(['192.0.2.0/24', '192.0.2.1'], 'externalIPs.allowedCIDRs');
    assert.ok(!p.ok);
    assert.match(p.error, /externalIPs\.allowedCIDRs\[1\].*192\.0\.2\.1.*has no prefix length.*write a CIDR/);
  });
  void test('externalIPAllowed: never without a list; host bits and families handled', () => {
    assert.equal(externalIPAllowed(EXTERNAL_IPS_NOT_CONFIGURED, '192.0.2.1'), false);
    const p = policy(['192.0.2.128/25', '2001:db8::/32']);
    assert.equal(externalIPAllowed(p, '192.0.2.200'), true);
    assert.equal(externalIPAllowed(p, '192.0.2.1'), false);
    assert.equal(externalIPAllowed(p, '2001:db8:0:0::1'), true);
    assert.equal(externalIPAllowed(p, '::ffff:192.0.2.200'), false, 'an IPv4-mapped IPv6 address is IPv6');
    assert.equal(externalIPAllowed(p, 'not-an-ip'), false);
  });
  void test('property: with a configured list, every admitted new address is inside it', () => {
    const p = policy(['10.0.0.0/8', '192.0.2.0/24']);
    fc.assert(
      fc.property(fc.array(fc.ipV4(), { maxLength: 5 }), (ips) => {
        const v = externalIPsVerdict(svc(ips), undefined, p, OBJ);
        if (v.deny === undefined) for (const ip of ips) assert.ok(externalIPAllowed(p, ip), ip);
        else assert.ok(ips.some((ip) => !externalIPAllowed(p, ip)));
      }),
      { seed: 8554, numRuns: 300 },
    );
  });
});
