import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ServiceCap } from '../../../cmd/sidecar/service-cap.js';
import { serviceObject } from '../../sidecar/state-fixtures.js';
import type { V1Service } from '../../../src/kube/types.js';

const a = { namespace: 'app', name: 'net-a' };
const b = { namespace: 'app', name: 'net-b' };
const svc = (ns: string, name: string, networks: string): V1Service => serviceObject(ns, name, { networks, ports: [{ port: 80 }], clusterIPs: ['10.96.0.1'] });
const names = (l: readonly V1Service[]): string[] => l.map((s) => `${s.metadata?.namespace ?? ''}/${s.metadata?.name ?? ''}`);

void describe('sidecar service cap', () => {
  void test('under the cap: the same list, nothing over', () => {
    const list = [svc('app', 'x', 'net-a'), svc('app', 'y', 'net-a')];
    const r = new ServiceCap(2).apply(list, [a]);
    assert.equal(r.services, list);
    assert.deepEqual(r.over, []);
  });

  void test('over the cap: the first in namespace/name order are kept whatever the input order; the rest are named in order', () => {
    const list = [svc('z', 's1', 'app/net-a'), svc('app', 's3', 'net-a'), svc('app', 's1', 'net-a'), svc('b', 's0', 'app/net-a'), svc('app', 's2', 'net-a')];
    const r = new ServiceCap(3).apply(list, [a]);
    // In input order.
    assert.deepEqual(names(r.services), ['app/s3', 'app/s1', 'app/s2']);
    assert.deepEqual(r.over, [{ network: 'app/net-a', total: 5, dropped: ['b/s0', 'z/s1'] }]);
  });

  void test('a Service on two networks is kept when it is within the cap on either; networks the pod does not serve do not count', () => {
    const list = [svc('app', 'a1', 'net-a'), svc('app', 'a2', 'net-a'), svc('app', 'z-both', 'net-a,net-b'), svc('app', 'other', 'net-c'), svc('app', 'o2', 'net-c')];
    const r = new ServiceCap(1).apply(list, [a, b]);
    assert.deepEqual(names(r.services).sort(), ['app/a1', 'app/o2', 'app/other', 'app/z-both']);
    assert.deepEqual(r.over, [{ network: 'app/net-a', total: 3, dropped: ['app/a2'] }]);
  });

  void test('property: at most cap × the served networks, the kept set does not depend on input order, dropped ones are not served', () => {
    const arb = fc.uniqueArray(fc.tuple(fc.constantFrom('n1', 'n2', 'n3'), fc.stringMatching(/^[a-z]{1,4}$/), fc.subarray(['net-a', 'net-b'], { minLength: 1 })), {
      selector: ([ns, name]) => `${ns}/${name}`,
      maxLength: 40,
    });
    fc.assert(
      fc.property(arb, fc.integer({ min: 1, max: 10 }), fc.integer(), (specs, cap, seed) => {
        const list = specs.map(([ns, name, nets]) => svc(ns, name, nets.map((n) => `app/${n}`).join(',')));
        const shuffled = [...list].sort((x, y) => ((names([x])[0]?.length ?? 0) * seed) % 7 - ((names([y])[0]?.length ?? 0) * seed) % 7);
        const r1 = new ServiceCap(cap).apply(list, [a, b]);
        const r2 = new ServiceCap(cap).apply(shuffled, [a, b]);
        assert.deepEqual(names(r1.services).sort(), names(r2.services).sort());
        assert.ok(r1.services.length <= 2 * cap || r1.over.length === 0);
        for (const net of ['app/net-a', 'app/net-b']) {
          const kept = r1.services.filter((s) => (s.metadata?.annotations?.['k8s.v1.cni.cncf.io/service-network'] ?? '').split(',').includes(net));
          const over = r1.over.find((o) => o.network === net);
          if (over === undefined) continue;
          for (const d of over.dropped) assert.ok(!names(r1.services).includes(d));
          assert.ok(over.total > cap);
          assert.ok(kept.length >= cap);
        }
      }),
      { numRuns: 300 },
    );
  });
});
