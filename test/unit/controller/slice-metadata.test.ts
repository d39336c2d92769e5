import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { HEADLESS_LABEL, podTriggerMs, sliceLabels, triggerTimeMs } from '../../../cmd/controller/slice-metadata.js';
import { planSlices } from '../../../cmd/controller/plan.js';
import { LAST_CHANGE_TRIGGER_TIME_ANNOTATION, MANAGED_BY, MANAGED_BY_LABEL, NETWORK_LABEL, SERVICE_NAME_LABEL } from '../../../src/keys.js';
import type { V1EndpointSlice, V1Pod, V1Service } from '../../../src/kube/types.js';
import { networkStatus, pod, service } from './fixtures.js';

const NET = { namespace: 'default', name: 'macvlan1' };
const at = (iso: string): number => Date.parse(iso);
const withReady = (p: V1Pod, iso: string): V1Pod => ({ ...p, status: { ...p.status, conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: iso as unknown as Date }] } });
const slice = (trigger?: string): V1EndpointSlice => ({
  addressType: 'IPv4',
  endpoints: [],
  metadata: trigger === undefined ? {} : { annotations: { [LAST_CHANGE_TRIGGER_TIME_ANNOTATION]: trigger } },
});
const svcAt = (iso: string): V1Service => {
  const s = service('web', { network: 'macvlan1', selector: { app: 'web' } });
  if (s.metadata) s.metadata.creationTimestamp = iso as unknown as Date;
  if (s.spec) s.spec.clusterIP = '10.96.0.9';
  return s;
};

void describe('slice labels', () => {
  void test('Service labels copied, reserved keys ours, headless only without a cluster IP', () => {
    const s = svcAt('2026-01-01T00:00:00Z');
    s.metadata!.labels = { team: 'a', [SERVICE_NAME_LABEL]: 'x', [MANAGED_BY_LABEL]: 'x', [NETWORK_LABEL]: 'x', [HEADLESS_LABEL]: 'x' };
    assert.deepEqual(sliceLabels(s, NET), { team: 'a', [SERVICE_NAME_LABEL]: 'web', [MANAGED_BY_LABEL]: MANAGED_BY, [NETWORK_LABEL]: 'default.macvlan1' });
    s.spec!.clusterIP = 'None';
    assert.equal(sliceLabels(s, NET)[HEADLESS_LABEL], '');
  });
  void test('property: reserved keys always ours, every other Service label copied', () => {
    fc.assert(
      fc.property(fc.dictionary(fc.constantFrom('a', 'b', SERVICE_NAME_LABEL, MANAGED_BY_LABEL, NETWORK_LABEL, HEADLESS_LABEL), fc.string()), (labels) => {
        const s = svcAt('2026-01-01T00:00:00Z');
        s.metadata!.labels = labels;
        const out = sliceLabels(s, NET);
        assert.equal(out[SERVICE_NAME_LABEL], 'web');
        assert.equal(out[MANAGED_BY_LABEL], MANAGED_BY);
        assert.equal(out[HEADLESS_LABEL], undefined);
        for (const k of ['a', 'b']) assert.equal(out[k], labels[k]);
      }),
    );
  });
});

void describe('trigger time', () => {
  const p = (name: string, iso: string): V1Pod => withReady(pod(name, {}), iso);
  void test('a new Service over running pods: its creation', () => {
    assert.equal(triggerTimeMs(svcAt('2026-01-01T00:00:10Z'), [p('a', '2026-01-01T00:00:01Z')], []), at('2026-01-01T00:00:10Z'));
  });
  void test('with a known trigger: the earliest newer change; none newer: none', () => {
    const svc = svcAt('2026-01-01T00:00:00Z');
    const pods = [p('a', '2026-01-01T00:00:05Z'), p('b', '2026-01-01T00:00:20Z'), p('c', '2026-01-01T00:00:30Z')];
    assert.equal(triggerTimeMs(svc, pods, [slice('2026-01-01T00:00:10Z'), slice()]), at('2026-01-01T00:00:20Z'));
    assert.equal(triggerTimeMs(svc, pods, [slice('2026-01-01T00:00:30Z')]), undefined);
  });
  void test('a deletion counts from when it was asked for (deletionTimestamp minus the grace period)', () => {
    const d = p('a', '2026-01-01T00:00:05Z');
    d.metadata = { ...d.metadata, deletionTimestamp: '2026-01-01T00:01:00Z' as unknown as Date, deletionGracePeriodSeconds: 30 };
    assert.equal(podTriggerMs(d), at('2026-01-01T00:00:30Z'));
  });
  void test('planSlices writes the annotation on created and updated slices, drops it when no change is known', () => {
    const svc = svcAt('2026-01-01T00:00:00Z');
    const a = withReady(pod('a', { status: networkStatus([{ name: 'default/macvlan1', ips: ['10.0.0.1'] }]) }), '2026-01-01T00:00:05Z');
    const first = planSlices({ service: svc, networks: [NET], pods: [a], existing: [] });
    const created = first.diff.create[0];
    assert.equal(created?.metadata?.annotations?.[LAST_CHANGE_TRIGGER_TIME_ANNOTATION], '2026-01-01T00:00:05.000Z');
    const existing = { ...created, metadata: { ...created.metadata, name: 'web-1' } };
    const b = withReady(pod('b', { status: networkStatus([{ name: 'default/macvlan1', ips: ['10.0.0.2'] }]) }), '2026-01-01T00:00:09Z');
    const up = planSlices({ service: svc, networks: [NET], pods: [a, b], existing: [existing] }).diff.update[0];
    assert.equal(up?.metadata?.annotations?.[LAST_CHANGE_TRIGGER_TIME_ANNOTATION], '2026-01-01T00:00:09.000Z');
    const gone = planSlices({ service: svc, networks: [NET], pods: [], existing: [up] });
    assert.equal(gone.diff.delete.length, 1);
    const left = planSlices({ service: svc, networks: [NET], pods: [a], existing: [up] }).diff.update[0];
    assert.equal(left?.metadata?.annotations?.[LAST_CHANGE_TRIGGER_TIME_ANNOTATION], undefined);
  });
  void test('a Service being deleted: no creates, updates still happen', () => {
    const svc = svcAt('2026-01-01T00:00:00Z');
    svc.metadata!.deletionTimestamp = '2026-01-01T00:00:01Z' as unknown as Date;
    const a = pod('a', { status: networkStatus([{ name: 'default/macvlan1', ips: ['10.0.0.1'] }]) });
    assert.equal(planSlices({ service: svc, networks: [NET], pods: [a], existing: [] }).diff.create.length, 0);
  });
});
