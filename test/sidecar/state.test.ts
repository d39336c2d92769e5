import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_AFFINITY_TIMEOUT_SECONDS, networkLabelValues, podInterfaces, readNetworkStatus, readServedNetworks, stateFingerprint, type StateInput } from '../../src/dataplane/core/state.js';
import { buildDesiredState } from '../../src/dataplane/core/incremental.js';
import type { PodInterface, ServicePortTarget } from '../../src/dataplane/core/model.js';
import type { V1Service } from '../../src/kube/types.js';
import { podObject, serviceObject, sliceObject } from './state-fixtures.js';

const NET_A = { namespace: 'net', name: 'a' };
const NET_B = { namespace: 'net', name: 'b' };

const ifaceA: PodInterface = { network: NET_A, interface: 'net1', ipv4: ['10.1.0.10'], ipv6: ['fd00:a::10'] };
const ifaceB: PodInterface = { network: NET_B, interface: 'net2', ipv4: ['10.2.0.10'], ipv6: [] };

function build(input: Partial<StateInput>) {
  return buildDesiredState({ interfaces: [ifaceA], services: [], slices: [], ...input });
}

const only = (targets: readonly ServicePortTarget[]): ServicePortTarget => {
  assert.equal(targets.length, 1, `expected one target, got ${JSON.stringify(targets)}`);
  return targets[0]!;
};

void describe('pod annotations', () => {
  void test('bare names are the pod namespace; missing annotations mean nothing', () => {
    const pod = podObject('app', 'client', { serviceNetwork: 'a, net/b' });
    assert.deepEqual(readServedNetworks(pod), { ok: true, value: [{ namespace: 'app', name: 'a' }, NET_B] });
    assert.deepEqual(readServedNetworks(podObject('app', 'c')), { ok: true, value: [] });
    // Namespace-wide injection: without service-network, every attached network (JSON form, interface name).
    const inherited = podObject('app', 'c');
    inherited.metadata!.annotations!['k8s.v1.cni.cncf.io/networks'] = '[{"name":"core","interface":"core"},{"name":"b","namespace":"net"}]';
    assert.deepEqual(readServedNetworks(inherited), { ok: true, value: [{ namespace: 'app', name: 'core' }, NET_B] });
    assert.deepEqual(readNetworkStatus(podObject('app', 'c')), { ok: true, value: [] });
  });

  void test('a malformed annotation yields the parser message naming pod, key and value', () => {
    const bad = readServedNetworks(podObject('app', 'client', { serviceNetwork: 'a,,b' }));
    assert.equal(bad.ok, false);
    if (!bad.ok) {
      assert.match(bad.error, /^Pod app\/client: k8s\.v1\.cni\.cncf\.io\/service-network "a,,b": /);
      assert.match(bad.error, /comma/);
    }
    const pod = podObject('app', 'client');
    pod.metadata!.annotations!['k8s.v1.cni.cncf.io/network-status'] = '{not json';
    const st = readNetworkStatus(pod);
    assert.equal(st.ok, false);
    if (!st.ok) assert.match(st.error, /^Pod app\/client: k8s\.v1\.cni\.cncf\.io\/network-status "\{not json": /);
  });

  void test('interfaces only for served networks that network-status shows attached', () => {
    const pod = podObject('app', 'client', {
      serviceNetwork: 'net/a,net/b,net/c',
      status: [
        { name: 'kindnet', interface: 'eth0', ips: ['10.244.0.5'], default: true },
        { name: 'net/b', interface: 'net2', ips: ['10.2.0.10/24'] },
        { name: 'net/a', interface: 'net1', ips: ['10.1.0.10/24', 'fd00:a:0::10/64'] },
        { name: 'net/c' }, // listed but no interface: not attached
        { name: 'net/d', interface: 'net4', ips: ['10.4.0.1'] }, // attached but not served
      ],
    });
    const served = readServedNetworks(pod);
    const status = readNetworkStatus(pod);
    assert.ok(served.ok && status.ok);
    assert.deepEqual(podInterfaces(served.value, status.value), [ifaceA, ifaceB]);
    assert.deepEqual(networkLabelValues(served.value), ['net.a', 'net.b', 'net.c']);
  });
});

void describe('buildDesiredState', () => {
  const web = serviceObject('app', 'web', { networks: 'net/a', clusterIPs: ['10.96.0.10'], ports: [{ name: 'http', port: 80, targetPort: 8080 }] });

  void test('one target per port with endpoints of the matching port name and protocol', () => {
    const svc = serviceObject('app', 'web', {
      networks: 'net/a',
      clusterIPs: ['10.96.0.10'],
      ports: [
        { name: 'http', port: 80, targetPort: 8080 },
        { name: 'dns', port: 53, protocol: 'UDP', targetPort: 5353 },
      ],
    });
    const slice = sliceObject('app', 'web-1', {
      service: 'web',
      network: 'net/a',
      family: 4,
      ports: [
        { name: 'http', port: 8080 },
        { name: 'dns', port: 5353, protocol: 'UDP' },
        { name: 'dns', port: 9999, protocol: 'TCP' }, // same name, other protocol: not ours
      ],
      endpoints: [{ ip: '10.1.0.21', ready: true }, { ip: '10.1.0.20' }],
    });
    const { state, problems } = build({ services: [svc], slices: [slice] });
    assert.deepEqual(problems, []);
    assert.deepEqual(
      state.targets.map((t) => [t.portName, t.protocol, t.port, t.endpoints.map((e) => `${e.ip}:${e.port}`)]),
      [
        ['dns', 'UDP', 53, ['10.1.0.20:5353', '10.1.0.21:5353']],
        ['http', 'TCP', 80, ['10.1.0.20:8080', '10.1.0.21:8080']],
      ],
    );
    // Missing conditions: ready and serving default to true, terminating to false.
    assert.deepEqual(state.targets[0]!.endpoints[0], { ip: '10.1.0.20', port: 5353, ready: true, serving: true, terminating: false });
    assert.equal(state.targets[0]!.affinityTimeoutSeconds, undefined);
    assert.deepEqual(state.interfaces, [ifaceA]);
  });

  void test('dual stack: one target per cluster IP family, each with endpoints of its family only', () => {
    const svc = serviceObject('app', 'web', { networks: 'net/a', clusterIPs: ['fd00:96::10', '10.96.0.10'], ports: [{ port: 80 }] });
    const v4 = sliceObject('app', 'web-v4', { service: 'web', network: 'net/a', family: 4, ports: [{ port: 80 }], endpoints: [{ ip: '10.1.0.20' }] });
    const v6 = sliceObject('app', 'web-v6', { service: 'web', network: 'net/a', family: 6, ports: [{ port: 80 }], endpoints: [{ ip: 'FD00:A:0:0::20' }] });
    const { state } = build({ services: [svc], slices: [v6, v4] });
    assert.deepEqual(
      state.targets.map((t) => [t.family, t.clusterIP, t.endpoints.map((e) => e.ip)]),
      [
        [4, '10.96.0.10', ['10.1.0.20']],
        [6, 'fd00:96::10', ['fd00:a::20']],
      ],
    );
  });

  void test('an IPv6 cluster IP gets no target when the pod has no IPv6 address on the network', () => {
    const svc = serviceObject('app', 'web', { networks: 'net/b', clusterIPs: ['10.96.0.10', 'fd00:96::10'], ports: [{ port: 80 }] });
    const { state } = build({ interfaces: [ifaceB], services: [svc] });
    assert.deepEqual(
      state.targets.map((t) => t.clusterIP),
      ['10.96.0.10'],
    );
  });

  void test('multiple networks: each Service on its own network; slices of other networks ignored', () => {
    const onA = serviceObject('app', 'svc-a', { networks: 'net/a', clusterIPs: ['10.96.0.1'], ports: [{ port: 80 }] });
    const onB = serviceObject('app', 'svc-b', { networks: 'net/b', clusterIPs: ['10.96.0.2'], ports: [{ port: 80 }] });
    const slices = [
      sliceObject('app', 'a-1', { service: 'svc-a', network: 'net/a', family: 4, ports: [{ port: 80 }], endpoints: [{ ip: '10.1.0.20' }] }),
      sliceObject('app', 'a-2', { service: 'svc-a', network: 'net/b', family: 4, ports: [{ port: 80 }], endpoints: [{ ip: '10.2.0.99' }] }),
      sliceObject('app', 'b-1', { service: 'svc-b', network: 'net/b', family: 4, ports: [{ port: 80 }], endpoints: [{ ip: '10.2.0.20' }] }),
    ];
    const { state } = build({ interfaces: [ifaceB, ifaceA], services: [onB, onA], slices });
    assert.deepEqual(
      state.targets.map((t) => [t.service, `${t.network.namespace}/${t.network.name}`, t.endpoints.map((e) => e.ip)]),
      [
        ['app/svc-a', 'net/a', ['10.1.0.20']],
        ['app/svc-b', 'net/b', ['10.2.0.20']],
      ],
    );
    assert.deepEqual(
      state.interfaces.map((i) => i.interface),
      ['net1', 'net2'],
    );
  });

  void test("a Service on two networks the pod has is served on the Service's first", () => {
    const svc = serviceObject('app', 'web', { networks: 'net/b, net/a', clusterIPs: ['10.96.0.10'], ports: [{ port: 80 }] });
    const t = only(build({ interfaces: [ifaceA, ifaceB], services: [svc] }).state.targets);
    assert.deepEqual(t.network, NET_B);
  });

  void test('a Service on a network the pod lacks gets no targets', () => {
    const svc = serviceObject('app', 'web', { networks: 'net/b', clusterIPs: ['10.96.0.10'], ports: [{ port: 80 }] });
    const slice = sliceObject('app', 'web-1', { service: 'web', network: 'net/b', family: 4, ports: [{ port: 80 }], endpoints: [{ ip: '10.2.0.20' }] });
    assert.deepEqual(build({ services: [svc], slices: [slice] }).state.targets, []);
  });

  void test('headless and unlabelled Services get nothing; NodePort and LoadBalancer Services get their cluster IP', () => {
    const headless = serviceObject('app', 'db', { networks: 'net/a', headless: true, ports: [{ port: 5432 }] });
    const nodePort = serviceObject('app', 'np', { networks: 'net/a', clusterIPs: ['10.96.0.11'], ports: [{ port: 80 }], type: 'NodePort' });
    const loadBalancer = serviceObject('app', 'lb', { networks: 'net/a', clusterIPs: ['10.96.0.13'], ports: [{ port: 80 }], type: 'LoadBalancer' });
    const unlabelled = serviceObject('app', 'other', { networks: 'net/a', clusterIPs: ['10.96.0.12'], ports: [{ port: 80 }] });
    delete unlabelled.metadata!.labels!['service.kubernetes.io/service-proxy-name'];
    const slice = sliceObject('app', 'db-1', { service: 'db', network: 'net/a', family: 4, ports: [{ port: 5432 }], endpoints: [{ ip: '10.1.0.20' }] });
    const { state } = build({ services: [headless, nodePort, loadBalancer, unlabelled, web], slices: [slice] });
    // NodePort: its node ports are the node agent's, its cluster IP is served like any other; so
    // is a LoadBalancer's (it has no ingress IP yet).
    assert.deepEqual(
      state.targets.map((t) => `${t.service} ${t.clusterIP}`),
      ['app/lb 10.96.0.13', 'app/np 10.96.0.11', 'app/web 10.96.0.10'],
    );
  });

  void describe('LoadBalancer ingress IPs: the client reaches them directly (kube-proxy short-circuit)', () => {
    const lb = (ingress: { ip?: string; ipMode?: string; hostname?: string }[], over: { ranges?: string[]; clusterIPs?: string[] } = {}): V1Service => {
      const svc = serviceObject('app', 'lb', {
        networks: 'net/a',
        clusterIPs: over.clusterIPs ?? ['10.96.0.13'],
        ports: [{ port: 80 }, { name: 'dns', port: 53, protocol: 'UDP' }],
        type: 'LoadBalancer',
      });
      if (over.ranges !== undefined) svc.spec!.loadBalancerSourceRanges = over.ranges;
      svc.status = { loadBalancer: { ingress } };
      return svc;
    };
    const slice = sliceObject('app', 'lb-1', { service: 'lb', network: 'net/a', family: 4, ports: [{ port: 80 }, { name: 'dns', port: 53, protocol: 'UDP' }], endpoints: [{ ip: '10.1.0.20' }] });
    const frontends = (svc: V1Service): string[] =>
      build({ services: [svc], slices: [slice] })
        .state.targets.map((t) => `${t.clusterIP}:${t.port}/${t.protocol}${t.ingress === true ? ' ingress' : ''} -> ${t.endpoints.map((e) => e.ip).join(',')}`)
        .sort();

    void test('VIP (and ipMode unset): every port on the ingress IP, to the same endpoints as the cluster IP', () => {
      assert.deepEqual(frontends(lb([{ ip: '10.1.0.200', ipMode: 'VIP' }, { ip: '10.1.0.201' }])), [
        '10.1.0.200:53/UDP ingress -> 10.1.0.20',
        '10.1.0.200:80/TCP ingress -> 10.1.0.20',
        '10.1.0.201:53/UDP ingress -> 10.1.0.20',
        '10.1.0.201:80/TCP ingress -> 10.1.0.20',
        '10.96.0.13:53/UDP -> 10.1.0.20',
        '10.96.0.13:80/TCP -> 10.1.0.20',
      ]);
    });
    void test('ipMode Proxy and hostname-only entries: not programmed (the load balancer forwards itself)', () => {
      assert.deepEqual(frontends(lb([{ ip: '10.1.0.200', ipMode: 'Proxy' }, { hostname: 'lb.example.com' }])), ['10.96.0.13:53/UDP -> 10.1.0.20', '10.96.0.13:80/TCP -> 10.1.0.20']);
    });
    void test('loadBalancerSourceRanges: short-circuited only when the client address is inside them', () => {
      assert.equal(frontends(lb([{ ip: '10.1.0.200' }], { ranges: ['10.1.0.0/24'] })).filter((f) => f.includes('ingress')).length, 2);
      assert.equal(frontends(lb([{ ip: '10.1.0.200' }], { ranges: [' 192.0.2.0/24 ', '10.1.0.10/32'] })).filter((f) => f.includes('ingress')).length, 2);
      assert.equal(frontends(lb([{ ip: '10.1.0.200' }], { ranges: ['192.0.2.0/24'] })).filter((f) => f.includes('ingress')).length, 0);
      // Only IPv6 ranges: no IPv4 source is admitted (fail closed).
      assert.equal(frontends(lb([{ ip: '10.1.0.200' }], { ranges: ['fd00::/8'] })).filter((f) => f.includes('ingress')).length, 0);
      // A bad range is dropped, never widened to "everyone".
      const bad = build({ services: [lb([{ ip: '10.1.0.200' }], { ranges: ['not-a-cidr'] })], slices: [slice] });
      assert.equal(bad.state.targets.filter((t) => t.ingress === true).length, 0);
      assert.match(bad.problems.join('\n'), /Service app\/lb: spec\.loadBalancerSourceRanges\[0\] "not-a-cidr": has no prefix length/);
    });
    void test("refused ingress IPs: not an IP, a prefix, loopback, link-local, multicast, the client's own address; each named with the fix", () => {
      const out = build({
        services: [
          lb([{ ip: 'nope' }, { ip: '10.1.0.0/24' }, { ip: '127.0.0.1' }, { ip: '169.254.1.1' }, { ip: '224.0.0.1' }, { ip: '10.1.0.10' }, { ip: 'fe80::1' }, { ip: '10.1.0.200', ipMode: 'Bogus' }]),
        ],
        slices: [slice],
      });
      assert.equal(out.state.targets.filter((t) => t.ingress === true).length, 0);
      const text = out.problems.join('\n');
      for (const want of [
        /ingress\[0\]\.ip "nope": is not an IPv4 or IPv6 address/,
        /ingress\[1\]\.ip "10\.1\.0\.0\/24": has a prefix length/,
        /127\.0\.0\.1 is a loopback address/,
        /169\.254\.1\.1 is a link-local/,
        /224\.0\.0\.1 is a multicast/,
        /is a node's or the reading pod's own address 10\.1\.0\.10/,
        /fe80::1 is a link-local/,
        /ingress\[7\]\.ipMode "Bogus": is neither VIP nor Proxy/,
      ]) {
        assert.match(text, want);
      }
      assert.match(text, /the load-balancer implementation must assign a unicast address/);
    });
    void test('IPv6 ingress IP on a dual-stack Service: served on the IPv6 side only', () => {
      const v6slice = sliceObject('app', 'lb-2', { service: 'lb', network: 'net/a', family: 6, ports: [{ port: 80 }], endpoints: [{ ip: 'fd00:a::20' }] });
      const { state } = build({ services: [lb([{ ip: 'fd00:a::200' }, { ip: '10.1.0.200' }], { clusterIPs: ['10.96.0.13', 'fd00:96::d'] })], slices: [slice, v6slice] });
      const v6 = state.targets.filter((t) => t.ingress === true && t.family === 6);
      assert.deepEqual(
        v6.map((t) => `${t.clusterIP}:${t.port} ${t.endpoints.map((e) => e.ip).join(',')}`),
        ['fd00:a::200:80 fd00:a::20', 'fd00:a::200:53 '],
      );
    });
  });

  void test('session affinity: configured timeout, Kubernetes default when unset', () => {
    const fixed = serviceObject('app', 'fixed', { networks: 'net/a', clusterIPs: ['10.96.0.1'], ports: [{ port: 80 }], affinitySeconds: 60 });
    const dflt = serviceObject('app', 'dflt', { networks: 'net/a', clusterIPs: ['10.96.0.2'], ports: [{ port: 80 }], affinitySeconds: 'default' });
    const { state } = build({ services: [fixed, dflt] });
    assert.deepEqual(
      state.targets.map((t) => [t.service, t.affinityTimeoutSeconds]),
      [
        ['app/dflt', DEFAULT_AFFINITY_TIMEOUT_SECONDS],
        ['app/fixed', 60],
      ],
    );
    assert.equal(DEFAULT_AFFINITY_TIMEOUT_SECONDS, 10800);
  });

  void test('terminating-only endpoints are kept with their conditions (the renderer falls back to them)', () => {
    const slice = sliceObject('app', 'web-1', {
      service: 'web',
      network: 'net/a',
      family: 4,
      ports: [{ name: 'http', port: 8080 }],
      endpoints: [
        { ip: '10.1.0.20', ready: false, serving: true, terminating: true },
        { ip: '10.1.0.21', ready: false, serving: false, terminating: true },
      ],
    });
    const t = only(build({ services: [web], slices: [slice] }).state.targets);
    assert.deepEqual(t.endpoints, [
      { ip: '10.1.0.20', port: 8080, ready: false, serving: true, terminating: true },
      { ip: '10.1.0.21', port: 8080, ready: false, serving: false, terminating: true },
    ]);
  });

  void test('an endpoint listed by two slices appears once, with its better conditions', () => {
    const mk = (name: string, ready: boolean) =>
      sliceObject('app', name, { service: 'web', network: 'net/a', family: 4, ports: [{ name: 'http', port: 8080 }], endpoints: [{ ip: '10.1.0.20', ready }] });
    for (const order of [
      [mk('s1', false), mk('s2', true)],
      [mk('s2', true), mk('s1', false)],
    ]) {
      const t = only(build({ services: [web], slices: order }).state.targets);
      assert.deepEqual(
        t.endpoints.map((e) => [e.ip, e.ready]),
        [['10.1.0.20', true]],
      );
    }
  });

  void test('a port without any matching slice port has a target with no endpoints (the renderer rejects)', () => {
    const slice = sliceObject('app', 'web-1', { service: 'web', network: 'net/a', family: 4, ports: [{ name: 'other', port: 9 }], endpoints: [{ ip: '10.1.0.20' }] });
    assert.deepEqual(only(build({ services: [web], slices: [slice] }).state.targets).endpoints, []);
  });

  void test('slices of a same-named Service in another namespace are not used', () => {
    const slice = sliceObject('other', 'web-1', { service: 'web', network: 'net/a', family: 4, ports: [{ name: 'http', port: 8080 }], endpoints: [{ ip: '10.1.0.20' }] });
    assert.deepEqual(only(build({ services: [web], slices: [slice] }).state.targets).endpoints, []);
  });

  void test('a Service with a malformed service-network is reported and skipped, others still served', () => {
    const bad = serviceObject('app', 'bad', { networks: 'net/a/x', clusterIPs: ['10.96.0.9'], ports: [{ port: 80 }] });
    const { state, problems } = build({ services: [bad, web] });
    assert.deepEqual(
      state.targets.map((t) => t.service),
      ['app/web'],
    );
    assert.equal(problems.length, 1);
    assert.match(problems[0]!, /^Service app\/bad: k8s\.v1\.cni\.cncf\.io\/service-network "net\/a\/x": .*'\/'/);
  });

  void test('output is sorted: input order does not change the fingerprint', () => {
    const services = ['c', 'a', 'b'].map((n, i) => serviceObject('app', n, { networks: 'net/a', clusterIPs: [`10.96.0.${i + 1}`], ports: [{ port: 80 }, { name: 'x', port: 81 }] }));
    const slices = ['c', 'a', 'b'].map((n) =>
      sliceObject('app', `${n}-1`, {
        service: n,
        network: 'net/a',
        family: 4,
        ports: [{ port: 80 }, { name: 'x', port: 81 }],
        endpoints: [{ ip: '10.1.0.30' }, { ip: '10.1.0.4' }, { ip: '10.1.0.200' }],
      }),
    );
    const a = build({ services, slices }).state;
    const b = build({ services: [...services].reverse(), slices: [...slices].reverse() }).state;
    assert.equal(stateFingerprint(a), stateFingerprint(b));
    assert.deepEqual(
      a.targets.map((t) => `${t.service}:${t.portName}`),
      ['app/a:', 'app/a:x', 'app/b:', 'app/b:x', 'app/c:', 'app/c:x'],
    );
    // A change of one endpoint condition changes the fingerprint.
    slices[0]!.endpoints[0]!.conditions = { ready: false };
    assert.notEqual(stateFingerprint(build({ services, slices }).state), stateFingerprint(a));
  });
});
