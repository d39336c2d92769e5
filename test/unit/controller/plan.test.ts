import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { planSlices, isEmptyDiff, type SliceDiff, type PlanInput } from '../../../cmd/controller/plan.js';
import { readServiceSpec } from '../../../cmd/controller/service-spec.js';
import type { V1EndpointSlice, V1Pod, V1Service } from '../../../src/kube/types.js';
import { MANAGED_BY, MANAGED_BY_LABEL, NETWORK_LABEL, PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NAME_LABEL, SERVICE_NETWORK_ANNOTATION } from '../../../src/keys.js';
import { networkStatus, pod, service } from './fixtures.js';

/** Applies a diff the way the apiserver would: names from generateName, bumped resourceVersions. */
let serial = 0;
function apply(existing: readonly V1EndpointSlice[], diff: SliceDiff): V1EndpointSlice[] {
  const byName = new Map(existing.map((s) => [s.metadata?.name ?? '', s]));
  for (const d of diff.delete) byName.delete(d.metadata?.name ?? '');
  for (const u of diff.update) {
    const name = u.metadata?.name ?? '';
    assert.ok(byName.has(name), `update of unknown slice ${name}`);
    assert.equal(u.metadata?.resourceVersion, byName.get(name)?.metadata?.resourceVersion, 'update carries the current resourceVersion');
    byName.set(name, structuredClone({ ...u, metadata: { ...u.metadata, resourceVersion: String(++serial) } }));
  }
  for (const c of diff.create) {
    const name = `${c.metadata?.generateName ?? ''}${(++serial).toString(36).padStart(5, 'x')}`;
    byName.set(name, structuredClone({ ...c, metadata: { ...c.metadata, name, resourceVersion: String(serial), uid: `s-${serial}` } }));
  }
  return [...byName.values()];
}

function converge(input: Omit<PlanInput, 'existing'>, existing: V1EndpointSlice[] = []): V1EndpointSlice[] {
  const first = planSlices({ ...input, existing });
  const after = apply(existing, first.diff);
  const second = planSlices({ ...input, existing: after });
  assert.ok(isEmptyDiff(second.diff), `second plan must be empty: ${JSON.stringify(second.diff).slice(0, 500)}`);
  return after;
}

function networksOf(svc: V1Service): PlanInput['networks'] {
  const spec = readServiceSpec(svc);
  assert.equal(spec.kind, 'serve');
  return spec.kind === 'serve' ? spec.networks : [];
}

const MACVLAN = 'default/macvlan1';
const blogService = (): V1Service => {
  const s = service('multus-nginx-macvlan', { network: 'macvlan1', selector: { app: 'web' } });
  // As the apiserver allocates it: a ClusterIP Service (the fixture leaves it unset, which is headless).
  if (s.spec) s.spec.clusterIP = '10.96.0.20';
  return s;
};
const webPod = (name: string, ip: string, extra: Parameters<typeof pod>[1] = {}): V1Pod => pod(name, { status: networkStatus([{ name: MACVLAN, ips: [ip] }]), ...extra });

function addresses(slices: readonly V1EndpointSlice[]): string[] {
  return slices.flatMap((s) => s.endpoints.flatMap((e) => e.addresses)).sort();
}

void describe('planSlices', () => {
  void test('blog scenario: one IPv4 slice with exactly the secondary addresses, labels, annotation, owner', () => {
    const svc = blogService();
    const pods = [webPod('nginx-a', '10.2.128.10'), webPod('nginx-b', '10.2.128.11')];
    const plan = planSlices({ service: svc, networks: networksOf(svc), pods, existing: [] });
    assert.equal(plan.diff.create.length, 1);
    assert.equal(plan.diff.update.length + plan.diff.delete.length, 0);
    const s = plan.diff.create[0];
    assert.ok(s);
    assert.equal(s.addressType, 'IPv4');
    assert.deepEqual(addresses([s]), ['10.2.128.10', '10.2.128.11']);
    assert.equal(s.metadata?.generateName, 'multus-nginx-macvlan-');
    assert.equal(s.metadata?.namespace, 'default');
    assert.deepEqual(s.metadata?.labels, {
      [PROXY_NAME_LABEL]: PROXY_NAME,
      [SERVICE_NAME_LABEL]: 'multus-nginx-macvlan',
      [MANAGED_BY_LABEL]: MANAGED_BY,
      [NETWORK_LABEL]: 'default.macvlan1',
    });
    assert.deepEqual(s.metadata?.annotations, { [SERVICE_NETWORK_ANNOTATION]: MACVLAN });
    assert.deepEqual(s.metadata?.ownerReferences, [{ apiVersion: 'v1', kind: 'Service', name: 'multus-nginx-macvlan', uid: 'uid-multus-nginx-macvlan', controller: true, blockOwnerDeletion: true }]);
    assert.deepEqual(s.ports, [{ name: 'http', port: 80, protocol: 'TCP' }]);
    for (const e of s.endpoints) {
      assert.deepEqual(e.conditions, { ready: true, serving: true, terminating: false });
      assert.equal(e.targetRef?.kind, 'Pod');
      assert.equal(e.targetRef?.uid, `uid-${e.targetRef?.name ?? ''}`);
    }
  });

  void test('a converged Service plans no write', () => {
    const svc = blogService();
    const pods = [webPod('nginx-a', '10.2.128.10'), webPod('nginx-b', '10.2.128.11')];
    const existing = converge({ service: svc, networks: networksOf(svc), pods });
    // Server-set fields and endpoint order do not count as differences.
    const shuffled = existing.map((s) => ({
      ...s,
      metadata: { ...s.metadata, managedFields: [{ manager: 'x' }], creationTimestamp: new Date() },
      endpoints: [...s.endpoints].reverse(),
    }));
    assert.ok(isEmptyDiff(planSlices({ service: svc, networks: networksOf(svc), pods, existing: shuffled }).diff));
  });

  void test('pod becomes unready: the slice is updated in place with ready false', () => {
    const svc = blogService();
    const existing = converge({ service: svc, networks: networksOf(svc), pods: [webPod('nginx-a', '10.2.128.10'), webPod('nginx-b', '10.2.128.11')] }).map((s) => ({
      ...s,
      metadata: { ...s.metadata, managedFields: [{ manager: 'multus-proxy' }] },
    }));
    const pods = [webPod('nginx-a', '10.2.128.10', { ready: false }), webPod('nginx-b', '10.2.128.11')];
    const { diff } = planSlices({ service: svc, networks: networksOf(svc), pods, existing });
    assert.equal(diff.create.length + diff.delete.length, 0);
    assert.equal(diff.update.length, 1);
    assert.equal(diff.update[0]?.metadata?.name, existing[0]?.metadata?.name);
    assert.equal(diff.update[0]?.metadata?.managedFields, undefined, 'server bookkeeping is not sent back');
    const a = diff.update[0]?.endpoints.find((e) => e.targetRef?.name === 'nginx-a');
    assert.deepEqual(a?.conditions, { ready: false, serving: false, terminating: false });
  });

  void test('terminating pods: ready false, serving from the Ready condition; publishNotReadyAddresses keeps ready', () => {
    const pods = [webPod('t', '10.0.0.1', { terminating: true })];
    const svc = blogService();
    const e = planSlices({ service: svc, networks: networksOf(svc), pods, existing: [] }).diff.create[0]?.endpoints[0];
    assert.deepEqual(e?.conditions, { ready: false, serving: true, terminating: true });
    const pub = service('p', { network: 'macvlan1', selector: { app: 'web' }, publishNotReadyAddresses: true });
    const unready = [webPod('u', '10.0.0.2', { ready: false })];
    const e2 = planSlices({ service: pub, networks: networksOf(pub), pods: unready, existing: [] }).diff.create[0]?.endpoints[0];
    assert.deepEqual(e2?.conditions, { ready: true, serving: false, terminating: false });
  });

  void test('pod deleted: its endpoint goes; last pod gone: the slice is deleted', () => {
    const svc = blogService();
    const input = { service: svc, networks: networksOf(svc) };
    const existing = converge({ ...input, pods: [webPod('nginx-a', '10.2.128.10'), webPod('nginx-b', '10.2.128.11')] });
    const one = planSlices({ ...input, pods: [webPod('nginx-b', '10.2.128.11')], existing });
    assert.equal(one.diff.update.length, 1);
    assert.deepEqual(addresses(one.diff.update), ['10.2.128.11']);
    const none = planSlices({ ...input, pods: [], existing });
    assert.deepEqual(
      none.diff.delete.map((s) => s.metadata?.name),
      existing.map((s) => s.metadata?.name),
    );
    assert.equal(none.diff.create.length + none.diff.update.length, 0);
  });

  void test('dual-stack network-status: one IPv4 and one IPv6 slice, every address of the network', () => {
    const svc = blogService();
    const p = pod('d', { status: networkStatus([{ name: MACVLAN, ips: ['10.1.1.1', '10.1.1.2', 'fd00::1'] }]) });
    const { diff } = planSlices({ service: svc, networks: networksOf(svc), pods: [p], existing: [] });
    assert.deepEqual(diff.create.map((s) => s.addressType).sort(), ['IPv4', 'IPv6']);
    const v4 = diff.create.find((s) => s.addressType === 'IPv4');
    const v6 = diff.create.find((s) => s.addressType === 'IPv6');
    assert.deepEqual(v4?.endpoints[0]?.addresses, ['10.1.1.1', '10.1.1.2']);
    assert.deepEqual(v6?.endpoints[0]?.addresses, ['fd00::1']);
  });

  void test('named targetPort resolves per pod; a pod without it is left out of that port', () => {
    const svc = service('named', {
      network: 'macvlan1',
      selector: { app: 'web' },
      ports: [
        { name: 'http', port: 80, targetPort: 'web', protocol: 'TCP' },
        { name: 'dns', port: 53, targetPort: 5353, protocol: 'UDP', appProtocol: 'dns' },
      ],
    });
    const pods = [
      webPod('a', '10.0.0.1', { containerPorts: [{ name: 'web', containerPort: 8080 }] }),
      webPod('b', '10.0.0.2', { containerPorts: [{ name: 'web', containerPort: 9090 }] }),
      webPod('c', '10.0.0.3', { containerPorts: [{ name: 'web', containerPort: 8080, protocol: 'UDP' }] }),
    ];
    const { diff } = planSlices({ service: svc, networks: networksOf(svc), pods, existing: [] });
    assert.equal(diff.create.length, 3);
    const byAddr = new Map(diff.create.map((s) => [s.endpoints[0]?.addresses[0], s.ports]));
    assert.deepEqual(byAddr.get('10.0.0.1'), [
      { name: 'dns', port: 5353, protocol: 'UDP', appProtocol: 'dns' },
      { name: 'http', port: 8080, protocol: 'TCP' },
    ]);
    assert.deepEqual(byAddr.get('10.0.0.2')?.find((p) => p.name === 'http')?.port, 9090);
    // Port name matches but protocol does not: only the numeric UDP port remains.
    assert.deepEqual(byAddr.get('10.0.0.3'), [{ name: 'dns', port: 5353, protocol: 'UDP', appProtocol: 'dns' }]);
  });

  void test('several networks, one across namespaces: one slice each with its own label and annotation', () => {
    const svc = service('multi', { network: 'macvlan1, other/net', selector: { app: 'web' } });
    const p = pod('m', {
      status: networkStatus([
        { name: MACVLAN, ips: ['10.0.0.1'] },
        { name: 'other/net', ips: ['192.168.5.1'] },
      ]),
    });
    const { diff } = planSlices({ service: svc, networks: networksOf(svc), pods: [p], existing: [] });
    const got = diff.create.map((s) => [s.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION], s.metadata?.labels?.[NETWORK_LABEL], s.endpoints[0]?.addresses[0]]);
    assert.deepEqual(got.sort(), [
      ['default/macvlan1', 'default.macvlan1', '10.0.0.1'],
      ['other/net', 'other.net', '192.168.5.1'],
    ]);
  });

  void test('250 pods: three slices of at most 100; one pod change touches one slice', () => {
    const svc = blogService();
    const input = { service: svc, networks: networksOf(svc) };
    const mk = (i: number, ready = true): V1Pod => webPod(`p${String(i).padStart(3, '0')}`, `10.3.${Math.floor(i / 250)}.${i % 250}`, { ready });
    const pods = Array.from({ length: 250 }, (_, i) => mk(i));
    const existing = converge({ ...input, pods });
    assert.equal(existing.length, 3);
    assert.deepEqual(existing.map((s) => s.endpoints.length).sort(), [100, 100, 50]);

    const changed = pods.map((p, i) => (i === 137 ? mk(137, false) : p));
    const d1 = planSlices({ ...input, pods: changed, existing }).diff;
    assert.deepEqual([d1.create.length, d1.update.length, d1.delete.length], [0, 1, 0]);

    const more = [...pods, mk(250)];
    const d2 = planSlices({ ...input, pods: more, existing }).diff;
    assert.deepEqual([d2.create.length, d2.update.length, d2.delete.length], [0, 1, 0], 'a new pod fills the slice with room');

    const fewer = pods.filter((_, i) => i !== 3);
    const d3 = planSlices({ ...input, pods: fewer, existing }).diff;
    assert.deepEqual([d3.create.length, d3.update.length, d3.delete.length], [0, 1, 0]);
  });

  void test('bad or missing network-status: the pod is skipped with a reason naming it, others are published', () => {
    const svc = blogService();
    const pods = [
      webPod('good', '10.0.0.1'),
      pod('bad', { status: '[{"name": "default/macvlan1", "ips": [' }),
      pod('nostatus', { phase: 'Pending' }),
      pod('elsewhere', { status: networkStatus([{ name: 'default/other', ips: ['10.9.9.9'] }]) }),
      pod('done', { status: networkStatus([{ name: MACVLAN, ips: ['10.0.0.8'] }]), phase: 'Succeeded' }),
      pod('failed', { status: networkStatus([{ name: MACVLAN, ips: ['10.0.0.9'] }]), phase: 'Failed' }),
      pod('pending', { status: networkStatus([{ name: MACVLAN, ips: ['10.0.0.2'] }]), phase: 'Pending', ready: false }),
    ];
    const plan = planSlices({ service: svc, networks: networksOf(svc), pods, existing: [] });
    assert.deepEqual(addresses(plan.diff.create), ['10.0.0.1', '10.0.0.2'], 'Running and Pending pods only');
    const skips = new Map(plan.skips.map((s) => [s.pod, s]));
    assert.equal(skips.get('bad')?.reason, 'NetworkStatusInvalid');
    assert.match(skips.get('bad')?.message ?? '', /Pod default\/bad: k8s\.v1\.cni\.cncf\.io\/network-status/);
    assert.equal(skips.get('nostatus')?.reason, 'NetworkStatusMissing');
    assert.equal(skips.get('nostatus')?.expected, true);
    assert.equal(skips.get('elsewhere')?.reason, 'NetworkNotAttached');
    assert.match(skips.get('elsewhere')?.message ?? '', /default\/other/);
    assert.equal(skips.has('done'), false, 'finished pods are not endpoints and not problems');
  });

  void test('network removed from the annotation: its slices are deleted, the others kept', () => {
    const both = service('multi', { network: 'macvlan1,other/net', selector: { app: 'web' } });
    const p = pod('m', {
      status: networkStatus([
        { name: MACVLAN, ips: ['10.0.0.1'] },
        { name: 'other/net', ips: ['192.168.5.1'] },
      ]),
    });
    const existing = converge({ service: both, networks: networksOf(both), pods: [p] });
    const one = service('multi', { network: 'macvlan1', selector: { app: 'web' } });
    const { diff } = planSlices({ service: one, networks: networksOf(one), pods: [p], existing });
    assert.equal(diff.create.length + diff.update.length, 0);
    assert.deepEqual(
      diff.delete.map((s) => s.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION]),
      ['other/net'],
    );
  });

  void test('Service port changed: slices are rewritten in place, not deleted and recreated', () => {
    const svc = blogService();
    const pods = [webPod('a', '10.0.0.1')];
    const existing = converge({ service: svc, networks: networksOf(svc), pods });
    const moved = service('multus-nginx-macvlan', { network: 'macvlan1', selector: { app: 'web' }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] });
    const { diff } = planSlices({ service: moved, networks: networksOf(moved), pods, existing });
    assert.deepEqual([diff.create.length, diff.update.length, diff.delete.length], [0, 1, 0]);
    assert.equal(diff.update[0]?.ports?.[0]?.port, 8080);
  });

  void test('Service recreated with a new uid: owner references follow', () => {
    const svc = blogService();
    const pods = [webPod('a', '10.0.0.1')];
    const existing = converge({ service: svc, networks: networksOf(svc), pods });
    const again = service('multus-nginx-macvlan', { network: 'macvlan1', selector: { app: 'web' }, uid: 'new-uid' });
    const { diff } = planSlices({ service: again, networks: networksOf(again), pods, existing });
    assert.equal(diff.update.length, 1);
    assert.equal(diff.update[0]?.metadata?.ownerReferences?.[0]?.uid, 'new-uid');
  });

  void test('nodeName and zone are carried; headless pods with a matching subdomain get a hostname', () => {
    const svc = service('hl', { network: 'macvlan1', selectorAnnotation: 'app in (web)', headless: true });
    const spec = readServiceSpec(svc);
    assert.equal(spec.kind, 'serve');
    const p = webPod('h', '10.0.0.1', { nodeName: 'node-1' });
    if (p.spec) {
      p.spec.hostname = 'h';
      p.spec.subdomain = 'hl';
    }
    const zones = new Map([['node-1', 'zone-a']]);
    const e = planSlices({ service: svc, networks: networksOf(svc), pods: [p], existing: [], zoneOf: (n) => zones.get(n) }).diff.create[0]?.endpoints[0];
    assert.equal(e?.nodeName, 'node-1');
    assert.equal(e?.zone, 'zone-a');
    assert.equal(e?.hostname, 'h');
  });
});

void describe('planSlices properties', () => {
  const podArb = fc.record({
    id: fc.integer({ min: 0, max: 60 }),
    ready: fc.boolean(),
    v6: fc.boolean(),
    terminating: fc.boolean(),
  });
  const mkPod = (p: { id: number; ready: boolean; v6: boolean; terminating: boolean }): V1Pod =>
    webPod(`p${p.id}`, `10.4.0.${p.id}`, {
      ready: p.ready,
      terminating: p.terminating,
      status: networkStatus([{ name: MACVLAN, ips: p.v6 ? [`10.4.0.${p.id}`, `fd00::${p.id}`] : [`10.4.0.${p.id}`] }]),
    });

  void test('from any state to any state: converges in one step, slices hold each pod once, within the limit', () => {
    const svc = blogService();
    const networks = networksOf(svc);
    fc.assert(
      fc.property(fc.uniqueArray(podArb, { selector: (p) => p.id }), fc.uniqueArray(podArb, { selector: (p) => p.id }), fc.integer({ min: 1, max: 7 }), (before, after, max) => {
        const base = { service: svc, networks, maxPerSlice: max };
        let existing = apply([], planSlices({ ...base, pods: before.map(mkPod), existing: [] }).diff);
        const plan = planSlices({ ...base, pods: after.map(mkPod), existing });
        existing = apply(existing, plan.diff);
        assert.ok(isEmptyDiff(planSlices({ ...base, pods: after.map(mkPod), existing }).diff));
        for (const family of ['IPv4', 'IPv6']) {
          const slices = existing.filter((s) => s.addressType === family);
          const names = slices.flatMap((s) => s.endpoints.map((e) => e.targetRef?.name));
          assert.equal(new Set(names).size, names.length, 'no pod twice');
          const want = after.filter((p) => family === 'IPv4' || p.v6).map((p) => `p${p.id}`);
          assert.deepEqual([...names].sort(), [...want].sort());
          for (const s of slices) assert.ok(s.endpoints.length > 0 && s.endpoints.length <= max);
        }
      }),
      { numRuns: 200 },
    );
  });

  void test('changing one pod writes at most one slice per family', () => {
    const svc = blogService();
    const networks = networksOf(svc);
    fc.assert(
      fc.property(fc.uniqueArray(podArb, { selector: (p) => p.id, minLength: 1 }), fc.nat(), fc.integer({ min: 1, max: 7 }), (pods, pick, max) => {
        const base = { service: svc, networks, maxPerSlice: max };
        const existing = apply([], planSlices({ ...base, pods: pods.map(mkPod), existing: [] }).diff);
        const i = pick % pods.length;
        const changed = pods.map((p, j) => (j === i ? { ...p, ready: !p.ready } : p));
        const { diff } = planSlices({ ...base, pods: changed.map(mkPod), existing });
        assert.equal(diff.create.length + diff.delete.length, 0);
        assert.ok(diff.update.length <= 2 && diff.update.length >= 1);
        assert.equal(new Set(diff.update.map((s) => s.addressType)).size, diff.update.length);
      }),
      { numRuns: 200 },
    );
  });
});
