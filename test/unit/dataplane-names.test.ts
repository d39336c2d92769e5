/**
 * names.ts hashName: the one-shot digest it uses where Node has crypto.hash names exactly what a
 * Hash object's digest names (chain and map names must not change between versions: a restarted
 * sidecar adopts its chains by name).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { base32, hashName, serviceChainName } from '../../src/dataplane/core/names.js';
import { endpointMapName } from '../../src/dataplane/nftables/render.js';

void test('hashName is the prefix and 16 base32 characters of the sha256 of its parts joined by NUL', () => {
  const cases: [string, (string | number)[]][] = [
    ['MPX-SVC-', ['demo/web', 'http', 'TCP', 4, '10.96.0.10']],
    ['MPX-EPS-', ['MPX-SVC-ABCDEFGHIJKLMNOP']],
    ['MPX-SEP-', ['MPX-SVC-X', 'fd00:101::5', 8080]],
    ['P-', ['', 'ü', 0]],
  ];
  for (const [prefix, parts] of cases) assert.equal(hashName(prefix, ...parts), prefix + base32(createHash('sha256').update(parts.join('\u0000')).digest(), 16));
  // Pinned: the name this Service port had before the one-shot digest (main at 9139229).
  assert.equal(serviceChainName({ service: 'demo/web', portName: 'http', protocol: 'TCP', family: 4, clusterIP: '10.96.0.10' }), 'MPX-SVC-A4FUV7V663JYDOTL');
});

void test("an endpoint map is named by its Service chain's hash part (no second digest); any other chain name is hashed", () => {
  const chain = serviceChainName({ service: 'demo/web', portName: 'http', protocol: 'TCP', family: 4, clusterIP: '10.96.0.10' });
  assert.equal(endpointMapName(chain), 'MPX-EPS-A4FUV7V663JYDOTL');
  assert.notEqual(endpointMapName('MPX-SVC-AAAAAAAAAAAAAAAA'), endpointMapName('MPX-SVC-AAAAAAAAAAAAAAAB'));
  assert.equal(endpointMapName('OTHER-CHAIN'), hashName('MPX-EPS-', 'OTHER-CHAIN'));
});
