import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { nextConditions, planNetService, readNetServiceSpec, readyCondition, resolveNetAttachDef, type NetService } from '../../../cmd/controller/netservice.js';
import { networkKey } from '../../../src/annotations/service-network.js';
import type { V1Service } from '../../../src/kube/types.js';
import { assertWellFormed, RUNS } from '../annotations/arbitraries.js';

const ns = (spec: unknown, uid = 'uid-1'): NetService => ({ metadata: { name: 'web', namespace: 'app', uid, generation: 2 }, spec: spec as NetService['spec'] });

void describe('NetService spec', () => {
  void test('bare and namespaced netAttachDef; the selector map becomes the canonical selector string', () => {
    const r = readNetServiceSpec(ns({ netAttachDef: ' core ', selector: { tier: 'db', app: 'x' } }));
    assert.deepEqual(r, { ok: true, value: { netAttachDef: { text: 'core', explicit: undefined, name: 'core' }, selector: 'app=x,tier=db' } });
    const n = readNetServiceSpec(ns({ netAttachDef: 'networks/core' }));
    assert.deepEqual(n.ok && n.value.netAttachDef.explicit, { namespace: 'networks', name: 'core' });
  });

  void test('bad input names the field, the value and the fix', () => {
    const cases: [unknown, RegExp][] = [
      [{}, /^spec\.netAttachDef "": is missing; write the NetworkAttachmentDefinition's name/],
      [{ netAttachDef: 5 }, /^spec\.netAttachDef "5": is a number, not a string/],
      [{ netAttachDef: 'a/b/c' }, /^spec\.netAttachDef "a\/b\/c": .*more than one '\/'/],
      [{ netAttachDef: 'core', selector: ['app'] }, /^spec\.selector "\[\\"app\\"\]": is not a map of labels; write it as a map/],
      [{ netAttachDef: 'core', selector: { app: 3 } }, /^spec\.selector\.app "3": is not a string; quote the value/],
      [{ netAttachDef: 'core', selector: { 'bad key!': 'x' } }, /^spec\.selector /],
    ];
    for (const [spec, re] of cases) {
      const r = readNetServiceSpec(ns(spec));
      assert.equal(r.ok, false, JSON.stringify(spec));
      if (!r.ok) assert.match(`${r.error.key} ${JSON.stringify(r.error.value)}: ${r.error.reason}; ${r.error.fix}`, re);
    }
  });

  void test('property: any spec value is read or refused with a well-formed error, never a throw', () => {
    fc.assert(
      fc.property(fc.anything(), fc.anything(), (netAttachDef, selector) => {
        const r = readNetServiceSpec(ns({ netAttachDef, selector }));
        assertWellFormed(r, netAttachDef);
        if (!r.ok) assert.match(r.error.key, /^spec\.(netAttachDef|selector)/);
      }),
      RUNS,
    );
  });
});

void describe('NAD resolution (docs/design.md: own namespace, else the one of that name, else candidates)', () => {
  const ref = fc.record({ namespace: fc.constantFrom('app', 'n1', 'n2', 'n3'), name: fc.constantFrom('core', 'other') });
  void test('property: the rule, for any set of NADs', () => {
    fc.assert(
      fc.property(fc.uniqueArray(ref, { selector: networkKey }), (nads) => {
        const spec = readNetServiceSpec(ns({ netAttachDef: 'core' }));
        assert.ok(spec.ok);
        const r = resolveNetAttachDef(spec.value, 'app', nads);
        const same = nads.filter((n) => n.name === 'core');
        const got = r.ok ? networkKey(r.network) : undefined;
        if (same.some((n) => n.namespace === 'app')) assert.equal(got, 'app/core');
        else if (same.length === 1 && same[0] !== undefined) assert.equal(got, networkKey(same[0]));
        else {
          assert.equal(r.ok, false);
          if (!r.ok) assert.deepEqual(r.candidates.map(networkKey), same.map(networkKey).sort());
        }
      }),
      RUNS,
    );
  });
});

void describe('planNetService', () => {
  const nads = [{ namespace: 'networks', name: 'core' }];
  const good = ns({ netAttachDef: 'core', selector: { app: 'x' } });
  void test('create, then nothing to do; a drifted Service is updated keeping what others added', () => {
    const create = planNetService(good, undefined, nads);
    assert.equal(create.kind, 'create');
    const svc = (create as { service: V1Service }).service;
    assert.equal(planNetService(good, svc, nads).kind, 'none');
    const drifted: V1Service = { ...svc, metadata: { ...svc.metadata, annotations: { 'k8s.v1.cni.cncf.io/service-network': 'x/y', 'example.com/keep': '1' } } };
    const upd = planNetService(good, drifted, nads);
    assert.equal(upd.kind, 'update');
    assert.equal((upd as { service: V1Service }).service.metadata?.annotations?.['example.com/keep'], '1');
    assert.equal(planNetService(good, (upd as { service: V1Service }).service, nads).kind, 'none');
  });

  void test("someone else's Service is a clash; ours of a vanished NetService is deleted; a user's one never", () => {
    const mine = (planNetService(good, undefined, nads) as { service: V1Service }).service;
    const users: V1Service = { metadata: { name: 'web', namespace: 'app' } };
    assert.equal(planNetService(good, users, nads).kind, 'clash');
    assert.equal(planNetService(ns({ netAttachDef: 'core' }, 'other-uid'), mine, nads).kind, 'clash');
    assert.deepEqual(planNetService(undefined, mine, nads), { kind: 'delete', service: mine });
    assert.deepEqual(planNetService(undefined, users, nads), { kind: 'none' });
  });

  void test('conditions: written once per change, the transition time kept while the status stays', () => {
    const t0 = new Date('2026-01-01T00:00:00Z');
    const want = readyCondition({ kind: 'none' }, 2);
    const first = nextConditions(undefined, want, t0);
    assert.deepEqual(first, [
      {
        type: 'Ready',
        observedGeneration: 2,
        status: 'True',
        reason: 'ServiceReady',
        message: 'the headless Service of the same name follows this NetService',
        lastTransitionTime: '2026-01-01T00:00:00Z',
      },
    ]);
    assert.equal(nextConditions(first, want, new Date()), undefined);
    const failed = nextConditions(first, readyCondition({ kind: 'unresolved', message: 'm', candidates: [] }, 2), new Date('2026-01-02T00:00:00Z'));
    assert.equal(failed?.[0]?.lastTransitionTime, '2026-01-02T00:00:00Z');
  });
});
