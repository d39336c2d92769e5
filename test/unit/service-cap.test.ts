import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ServiceCap, serviceWeight } from '../../src/service-cap.js';
import { serviceObject } from '../sidecar/state-fixtures.js';
import type { V1Service } from '../../src/kube/types.js';

const a = { namespace: 'app', name: 'net-a' };
const b = { namespace: 'app', name: 'net-b' };
const svc = (ns: string, name: string, networks: string, ports = 1): V1Service =>
  serviceObject(ns, name, { networks, ports: Array.from({ length: ports }, (_, i) => ({ name: `p${i}`, port: 80 + i })), clusterIPs: ['10.96.0.1'] });
const names = (l: readonly V1Service[]): string[] => l.map((s) => `${s.metadata?.namespace ?? ''}/${s.metadata?.name ?? ''}`);
const sharedWithAll = (): boolean => true;

void describe('sidecar service cap: targets per network, shared max-min between namespaces', () => {
  void test('weight: ports × frontend IPs; headless costs nothing', () => {
    assert.equal(serviceWeight(svc('app', 'x', 'net-a', 3)), 3);
    assert.equal(serviceWeight(serviceObject('app', 'd', { networks: 'net-a', ports: [{ port: 1 }, { port: 2 }], clusterIPs: ['10.96.0.1', 'fd00::1'] })), 4);
    assert.equal(serviceWeight(serviceObject('app', 'h', { networks: 'net-a', ports: [{ port: 1 }], headless: true })), 0);
  });

  void test('under the cap: the same list, nothing over', () => {
    const list = [svc('app', 'x', 'net-a'), svc('app', 'y', 'net-a')];
    const r = new ServiceCap(2).apply(list, [a]);
    assert.equal(r.services, list);
    assert.deepEqual(r.over, []);
  });

  void test('ports count, not Services: one Service of 5 ports in a tenant namespace is left out, the others keep theirs', () => {
    const list = [svc('aaa', 'big', 'app/net-a', 5), svc('app', 'blog', 'net-a', 1), svc('zzz', 'web', 'app/net-a', 1)];
    const r = new ServiceCap(4, 'client-ns').apply(list, [a], sharedWithAll);
    assert.deepEqual(names(r.services), ['app/blog', 'zzz/web']);
    assert.deepEqual(r.over, [{ network: 'app/net-a', total: 7, namespaces: [{ namespace: 'aaa', demand: 5, share: 2, dropped: ['aaa/big'] }] }]);
  });

  void test("the name order gives nothing: three Services of 'aaa' on a cap of 3 leave the other namespace's one served", () => {
    const list = [svc('aaa-tenant', 's1', 'app/net-a'), svc('aaa-tenant', 's2', 'app/net-a'), svc('aaa-tenant', 's3', 'app/net-a'), svc('app', 'blog', 'net-a')];
    const r = new ServiceCap(3, 'app').apply(list, [a], sharedWithAll);
    assert.ok(names(r.services).includes('app/blog'));
    assert.deepEqual(
      r.over.map((o) => o.namespaces.map((n) => n.namespace)),
      [['aaa-tenant']],
    );
  });

  void test("another namespace's network counts only where the controller wrote a slice for the Service (shared); unshared ones are not served and cost nothing", () => {
    const list = [svc('aaa', 's1', 'app/net-a'), svc('aaa', 's2', 'app/net-a'), svc('aaa', 's3', 'app/net-a'), svc('app', 'blog', 'net-a'), svc('aaa', 'elsewhere', 'app/net-z')];
    const r = new ServiceCap(2, 'client').apply(list, [a], (s) => s.metadata?.name === 's2');
    assert.deepEqual(r.over, [], 'only app/blog and the shared aaa/s2 count, one each');
    assert.deepEqual(names(r.services), ['aaa/s2', 'app/blog', 'aaa/elsewhere']);
    assert.equal(r.unshared, 2);
  });

  void test('within a namespace over its share, a being-deleted Service gives way first', () => {
    const doomed = svc('t', 'a-doomed', 'app/net-a');
    doomed.metadata = { ...doomed.metadata, deletionTimestamp: new Date(0) };
    const list = [doomed, svc('t', 'b-live', 'app/net-a'), svc('app', 'x', 'net-a')];
    const r = new ServiceCap(2, 'c').apply(list, [a], sharedWithAll);
    assert.deepEqual(names(r.services), ['t/b-live', 'app/x']);
  });

  void test('a Service on two networks is served only when kept on both; networks the pod does not serve do not count', () => {
    const list = [svc('x', 'a1', 'app/net-a', 2), svc('y', 'both', 'app/net-a,app/net-b', 2), svc('z', 'b1', 'app/net-b'), svc('q', 'other', 'app/net-c', 50)];
    const r = new ServiceCap(2, 'c').apply(list, [a, b], sharedWithAll);
    // net-a: x 2 and y 2 over 2: level 1, both left out; net-b: y 2, z 1 over 2: y out.
    assert.deepEqual(names(r.services), ['z/b1', 'q/other']);
  });

  void test('property: per network at most cap targets served; the kept set does not depend on input order', () => {
    const arb = fc.uniqueArray(fc.tuple(fc.constantFrom('n1', 'n2', 'n3'), fc.stringMatching(/^[a-z]{1,4}$/), fc.subarray(['net-a', 'net-b'], { minLength: 1 }), fc.integer({ min: 1, max: 4 })), {
      selector: ([ns, name]) => `${ns}/${name}`,
      maxLength: 40,
    });
    fc.assert(
      fc.property(arb, fc.integer({ min: 1, max: 12 }), fc.integer(), (specs, cap, seed) => {
        const list = specs.map(([ns, name, nets, ports]) => svc(ns, name, nets.map((n) => `app/${n}`).join(','), ports));
        const shuffled = list
          .map((s, i) => ({ s, k: (i * 7919 + seed) % 1009 }))
          .sort((x, y) => x.k - y.k)
          .map((x) => x.s);
        const r1 = new ServiceCap(cap, 'n2').apply(list, [a, b], sharedWithAll);
        const r2 = new ServiceCap(cap, 'n2').apply(shuffled, [a, b], sharedWithAll);
        assert.deepEqual(names(r1.services).sort(), names(r2.services).sort());
        for (const net of ['app/net-a', 'app/net-b']) {
          const on = r1.services.filter((s) => (s.metadata?.annotations?.['k8s.v1.cni.cncf.io/service-network'] ?? '').split(',').includes(net));
          const targets = on.reduce((n, s) => n + serviceWeight(s), 0);
          const demand = list.filter((s) => (s.metadata?.annotations?.['k8s.v1.cni.cncf.io/service-network'] ?? '').split(',').includes(net)).reduce((n, s) => n + serviceWeight(s), 0);
          assert.ok(targets <= cap || demand <= cap, `${net}: ${targets} targets served, cap ${cap}`);
        }
      }),
      { numRuns: 300 },
    );
  });
});
