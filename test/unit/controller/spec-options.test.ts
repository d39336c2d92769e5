import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { readServiceSpec } from '../../../cmd/controller/service-spec.js';
import { parseDuration, parseOptions } from '../../../cmd/controller/options.js';
import { podChangeMatters } from '../../../cmd/controller/reconcile.js';
import { SERVICE_NETWORK_ANNOTATION } from '../../../src/keys.js';
import { networkStatus, pod, service } from './fixtures.js';

void describe('readServiceSpec', () => {
  void test('spec.selector wins; the annotation is used when spec.selector is empty', () => {
    const a = readServiceSpec(service('a', { network: 'n1, other/n2', selector: { app: 'x' }, selectorAnnotation: 'app=y' }));
    assert.equal(a.kind, 'serve');
    if (a.kind === 'serve') {
      assert.deepEqual(a.networks, [
        { namespace: 'default', name: 'n1' },
        { namespace: 'other', name: 'n2' },
      ]);
      assert.deepEqual(a.selector.requirements, [{ key: 'app', operator: 'In', values: ['x'] }]);
    }
    const b = readServiceSpec(service('b', { network: 'n1', selectorAnnotation: 'tier in (db,cache)' }));
    assert.equal(b.kind === 'serve' ? b.selector.requirements[0]?.operator : b.kind, 'In');
  });

  void test('no annotation or no selector at all: withdraw (slices are removed)', () => {
    assert.equal(readServiceSpec(service('a', { selector: { app: 'x' } })).kind, 'withdraw');
    assert.equal(readServiceSpec(service('a', { network: '  ', selector: { app: 'x' } })).kind, 'withdraw');
    assert.equal(readServiceSpec(service('a', { network: 'n1' })).kind, 'withdraw');
  });

  void test('malformed annotations: invalid, with a message naming the Service, key and value', () => {
    const bad = readServiceSpec(service('web', { namespace: 'shop', network: 'Bad_Name', selector: { app: 'x' } }));
    assert.equal(bad.kind, 'invalid');
    assert.match(bad.kind === 'invalid' ? bad.message : '', new RegExp(`^Service shop/web: ${SERVICE_NETWORK_ANNOTATION.replace(/\./g, '\\.')} "Bad_Name"`));
    const sel = readServiceSpec(service('web', { network: 'n1', selectorAnnotation: 'app in (x' }));
    assert.equal(sel.kind, 'invalid');
    assert.match(sel.kind === 'invalid' ? sel.message : '', /service-selector/);
  });
});

void describe('podChangeMatters', () => {
  const base = pod('p', { status: networkStatus([{ name: 'default/n1', ips: ['10.0.0.1'] }]) });
  void test('status noise and unrelated annotations do not matter', () => {
    const noisy = structuredClone(base);
    if (noisy.metadata) {
      noisy.metadata.resourceVersion = '99';
      noisy.metadata.annotations = { ...noisy.metadata.annotations, unrelated: 'x' };
    }
    if (noisy.status) noisy.status.message = 'heartbeat';
    assert.equal(podChangeMatters(base, noisy), false);
  });
  void test('labels, network-status, readiness, deletion and ports matter', () => {
    const changes = [
      pod('p', { labels: { app: 'other' }, status: networkStatus([{ name: 'default/n1', ips: ['10.0.0.1'] }]) }),
      pod('p', { status: networkStatus([{ name: 'default/n1', ips: ['10.0.0.2'] }]) }),
      pod('p', { ready: false, status: networkStatus([{ name: 'default/n1', ips: ['10.0.0.1'] }]) }),
      pod('p', { terminating: true, status: networkStatus([{ name: 'default/n1', ips: ['10.0.0.1'] }]) }),
      pod('p', { containerPorts: [{ name: 'web', containerPort: 80 }], status: networkStatus([{ name: 'default/n1', ips: ['10.0.0.1'] }]) }),
    ];
    for (const c of changes) assert.equal(podChangeMatters(base, c), true);
  });
});

void describe('controller options', () => {
  void test('defaults as documented', () => {
    const r = parseOptions([], { POD_NAMESPACE: 'mp', POD_NAME: 'ctl-0' });
    if (!r.ok || r.value === 'help') return assert.fail(`options: ${r.ok ? 'help' : r.error}`);
    assert.equal(r.value.leaseNamespace, 'mp');
    assert.equal(r.value.identity, 'ctl-0');
    assert.deepEqual([r.value.leaseDurationMs, r.value.renewDeadlineMs, r.value.retryPeriodMs], [15_000, 10_000, 2_000]);
    assert.equal(r.value.leaderElect, true);
    assert.equal(r.value.maxEndpointsPerSlice, 100);
    assert.equal(r.value.netServices, 'auto');
    assert.equal(r.value.removeMultusServiceSlices, true);
    assert.equal(r.value.urgentPodChanges, true);
  });

  void test('--urgent-pod-changes false turns the urgent lane off', () => {
    const r = parseOptions(['--urgent-pod-changes', 'false'], {});
    if (!r.ok || r.value === 'help') return assert.fail('options');
    assert.equal(r.value.urgentPodChanges, false);
  });

  void test('--netservices auto|true|false and --remove-multus-service-slices; bad values named with the fix', () => {
    const r = parseOptions(['--netservices', 'false', '--remove-multus-service-slices', 'false'], {});
    if (!r.ok || r.value === 'help') return assert.fail('options');
    assert.equal(r.value.netServices, 'false');
    assert.equal(r.value.removeMultusServiceSlices, false);
    const bad = parseOptions(['--netservices', 'yes please', '--remove-multus-service-slices', 'maybe'], {});
    assert.match(bad.ok ? '' : bad.error, /--netservices "yes please": is not a mode; write auto, true or false/);
    assert.match(bad.ok ? '' : bad.error, /--remove-multus-service-slices "maybe": is not a boolean; write true or false/);
  });

  void test('durations in ms, s, m and plain seconds; bad values named with the fix', () => {
    assert.deepEqual(
      ['500ms', '15s', '2m', '3', '1.5s'].map((v) => parseDuration('--x', v)),
      [500, 15_000, 120_000, 3000, 1500].map((value) => ({ ok: true, value })),
    );
    const bad = parseOptions(['--lease-duration', 'soon', '--workers', '0'], {});
    assert.equal(bad.ok, false);
    if (!bad.ok) {
      assert.match(bad.error, /--lease-duration "soon": is not a duration; write e\.g\. 500ms/);
      assert.match(bad.error, /--workers "0"/);
    }
  });

  void test('renew deadline must sit between retry period and lease duration', () => {
    const r = parseOptions(['--lease-duration', '5s', '--renew-deadline', '6s'], {});
    assert.equal(r.ok, false);
    assert.match(r.ok ? '' : r.error, /--renew-deadline/);
  });

  void test('unknown flags are refused with the usage', () => {
    const r = parseOptions(['--nope'], {});
    assert.equal(r.ok, false);
    assert.match(r.ok ? '' : r.error, /--kubeconfig PATH/);
  });
});
