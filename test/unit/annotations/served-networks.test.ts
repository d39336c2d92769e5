import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { servedNetworks } from '../../../src/annotations/served-networks.js';
import { networkKey } from '../../../src/annotations/service-network.js';
import { NETWORKS_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../../../src/keys.js';
import { assertWellFormed, expectOk, ifname, mutated, networkRef, RUNS } from './arbitraries.js';

const attachment = fc.tuple(networkRef, fc.option(ifname, { nil: undefined }), fc.boolean());

void describe('servedNetworks: the service-network annotation narrows, else every attached network', () => {
  void test('examples: short form, JSON with a namespace and an interface name, duplicates, narrowing', () => {
    assert.deepEqual(expectOk(servedNetworks({ [NETWORKS_ANNOTATION]: 'macvlan1' }, 'default')), { source: NETWORKS_ANNOTATION, networks: [{ namespace: 'default', name: 'macvlan1' }] });
    assert.deepEqual(expectOk(servedNetworks({ [NETWORKS_ANNOTATION]: '[{"name":"core","interface":"core"},{"name":"b","namespace":"o"},{"name":"core","interface":"core2"}]' }, 'default')).networks, [
      { namespace: 'default', name: 'core' },
      { namespace: 'o', name: 'b' },
    ]);
    assert.deepEqual(expectOk(servedNetworks({ [NETWORKS_ANNOTATION]: 'a,b', [SERVICE_NETWORK_ANNOTATION]: 'b' }, 'ns')), {
      source: SERVICE_NETWORK_ANNOTATION,
      networks: [{ namespace: 'ns', name: 'b' }],
    });
    assert.deepEqual(expectOk(servedNetworks(undefined, 'ns')).networks, []);
    assert.deepEqual(expectOk(servedNetworks({ [NETWORKS_ANNOTATION]: '' }, 'ns')).networks, []);
  });

  void test('property: every attached network once, first occurrence order, in either form', () => {
    fc.assert(
      fc.property(fc.array(attachment, { maxLength: 8 }), fc.boolean(), (items, json) => {
        const text = json
          ? JSON.stringify(items.map(([r, i]) => ({ name: r.name, namespace: r.namespace, ...(i === undefined ? {} : { interface: i }) })))
          : items.map(([r, i]) => `${r.namespace}/${r.name}${i === undefined ? '' : `@${i}`}`).join(',');
        const served = expectOk(servedNetworks({ [NETWORKS_ANNOTATION]: text }, 'pods'));
        const expected = [...new Set(items.map(([r]) => networkKey(r)))];
        assert.deepEqual(served.networks.map(networkKey), expected);
      }),
      RUNS,
    );
  });

  void test('property: never throws on mangled input; a failure names the annotation it read', () => {
    fc.assert(
      fc.property(mutated(fc.constantFrom('a,b@net1', '[{"name":"a"}]')), fc.boolean(), (text, narrowed) => {
        const key = narrowed ? SERVICE_NETWORK_ANNOTATION : NETWORKS_ANNOTATION;
        const r = servedNetworks({ [key]: text }, 'pods');
        assertWellFormed(r, text);
        if (!r.ok) assert.equal(r.error.key, key);
      }),
      RUNS,
    );
  });
});
