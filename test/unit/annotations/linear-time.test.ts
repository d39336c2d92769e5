/**
 * Every annotation parser a tenant's object reaches: time grows linearly with the input (the time
 * of an input eight times larger is measured against a smaller one; a quadratic step would make it
 * about 64 times, the bound is 24: test/harness/property.ts assertLinear), and no input makes it
 * throw. The parsers of whole objects (Services, pods, NADs, AdmissionReviews) are in
 * test/unit/tenant-parsers.test.ts.
 */
import { test, describe } from 'node:test';
import fc from 'fast-check';
import { parseServiceNetwork } from '../../../src/annotations/service-network.js';
import { parseLabelSelector } from '../../../src/annotations/label-selector.js';
import { parseNetworkStatus } from '../../../src/annotations/network-status.js';
import { parseNetworkConfig } from '../../../src/annotations/nad-config.js';
import { parseNetworks } from '../../../src/annotations/networks.js';
import { FEW_RUNS } from './arbitraries.js';
import { assertLinear } from '../../harness/property.js';

const ips = (n: number): string[] => Array.from({ length: n }, (_, i) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);

void describe('parsers are linear in their input', () => {
  void test('network-status: many addresses in one entry (de-duplication), and many entries', () => {
    assertLinear('network-status ips', (n) => JSON.stringify([{ name: 'ns/net', interface: 'net1', ips: ips(n) }]), parseNetworkStatus, 600);
    assertLinear('network-status entries', (n) => JSON.stringify(Array.from({ length: n }, (_, i) => ({ name: `ns/net${i}`, ips: [] }))), parseNetworkStatus, 200);
  });

  void test('service-network: a long list of names', () => {
    assertLinear(
      'service-network',
      (n) => Array.from({ length: n }, (_, i) => `ns/n${i}`).join(','),
      (s) => parseServiceNetwork(s, 'ns'),
      1_000,
    );
  });

  void test('label-selector: a long set and many requirements', () => {
    assertLinear(
      'label-selector set',
      (n) => `app in (${Array.from({ length: n }, (_, i) => `v${i}`).join(',')})`,
      (s) => parseLabelSelector(s),
      1_000,
    );
    assertLinear(
      'label-selector requirements',
      (n) => Array.from({ length: n }, (_, i) => `k${i}=v`).join(','),
      (s) => parseLabelSelector(s),
      500,
    );
  });

  void test('networks: a long comma list and a long JSON list', () => {
    assertLinear(
      'networks list',
      (n) => Array.from({ length: n }, (_, i) => `ns/n${i}@net${i % 10}`).join(','),
      (s) => parseNetworks(s, 'ns'),
      500,
    );
    assertLinear(
      'networks JSON',
      (n) => JSON.stringify(Array.from({ length: n }, (_, i) => ({ name: `n${i}`, namespace: 'ns' }))),
      (s) => parseNetworks(s, 'ns'),
      500,
    );
  });

  void test('nad-config: a config with many plugins and ranges', () => {
    const config = (n: number): string =>
      JSON.stringify({
        cniVersion: '0.4.0',
        name: 'x',
        plugins: [{ type: 'macvlan', master: 'eth1', ipam: { type: 'host-local', ranges: Array.from({ length: n }, (_, i) => [{ subnet: `10.${(i >> 8) & 255}.${i & 255}.0/24` }]) } }],
      });
    assertLinear('nad-config', config, (s) => parseNetworkConfig(s), 60);
  });
});

void describe('parsers never throw', () => {
  const text = fc.oneof(
    fc.string(),
    fc.string({ unit: 'binary' }),
    fc.json(),
    fc.jsonValue().map((v) => JSON.stringify(v)),
  );
  void test('on any text or JSON', () => {
    fc.assert(
      fc.property(text, (s) => {
        parseNetworkStatus(s);
        parseServiceNetwork(s, 'ns');
        parseLabelSelector(s);
        parseNetworks(s, 'ns');
        parseNetworkConfig(s);
      }),
      FEW_RUNS,
    );
  });
  void test('on values of the wrong type', () => {
    fc.assert(
      fc.property(fc.anything(), (v) => {
        parseNetworkStatus(v as string);
        parseServiceNetwork(v as string, 'ns');
        parseLabelSelector(v as string);
        parseNetworks(v as string, 'ns');
        parseNetworkConfig(v);
      }),
      FEW_RUNS,
    );
  });
});
