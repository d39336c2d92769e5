/**
 * `diagnose`'s pure side: each cause a client pod or a Service can have, from objects built here,
 * must come out as its own finding code with the object named; the renderers print them; the
 * argument parser takes kubectl's forms. The slices are the ones the controller's own planner
 * writes for the same objects, so "published" means what it means in a cluster.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { diagnosePod, type PodFacts } from '../../../cmd/controller/diagnose/pod.js';
import { diagnoseService, type NadFact, type ServiceFacts } from '../../../cmd/controller/diagnose/service.js';
import { renderReport } from '../../../cmd/controller/diagnose/render.js';
import { parseDiagnoseArgs } from '../../../cmd/controller/diagnose/command.js';
import type { Finding, Report } from '../../../cmd/controller/diagnose/report.js';
import { planSlices } from '../../../cmd/controller/plan.js';
import { readServiceSpec } from '../../../cmd/controller/service-spec.js';
import type { CoreV1Event, V1EndpointSlice, V1Pod, V1Service } from '../../../src/kube/types.js';
import { INJECT_ANNOTATION, NETWORKS_ANNOTATION, PROXY_NAME_LABEL, SERVICE_NETWORK_ANNOTATION, SERVICE_NAMESPACES_ANNOTATION, SIDECAR_CONTAINER_NAME } from '../../../src/keys.js';
import { DEFAULT_HEALTH_PORT, REASON_SERVICE_CAP_REACHED, REASON_SYNC_FAILED, REASON_SYNC_RECOVERED } from '../../../src/sidecar-contract.js';
import { networkStatus, pod, service } from './fixtures.js';

const NS = 'app';
const NET = `${NS}/macvlan1`;
const ENABLED = { 'multus-proxy-injection': 'enabled' };

function codes(r: Report, severity?: Finding['severity']): string[] {
  return r.findings.filter((f) => severity === undefined || f.severity === severity).map((f) => f.code);
}

function find(r: Report, code: string): Finding {
  const f = r.findings.find((x) => x.code === code);
  assert.ok(f, `no ${code} finding in ${JSON.stringify(r.findings, null, 1)}`);
  return f;
}

/** The slices the controller's planner writes for these objects. */
function slicesFor(svc: V1Service, pods: V1Pod[], nodeAddresses: string[] = []): V1EndpointSlice[] {
  const spec = readServiceSpec(svc);
  assert.equal(spec.kind, 'serve');
  if (spec.kind !== 'serve') return [];
  const selected = pods.filter((p) => Object.entries(svc.spec?.selector ?? {}).every(([k, v]) => p.metadata?.labels?.[k] === v));
  return planSlices({ service: svc, networks: spec.networks, pods: selected, existing: [], addressPolicy: { nodeAddresses: new Set(nodeAddresses) } }).diff.create.map((s, i) => ({
    ...s,
    metadata: { ...s.metadata, name: `${svc.metadata?.name ?? ''}-${i}`, namespace: svc.metadata?.namespace ?? '' },
  }));
}

// ---- client pods -------------------------------------------------------------------------------

function client(o: { annotations?: Record<string, string>; injected?: boolean; ready?: boolean; hostNetwork?: boolean; status?: string | null } = {}): V1Pod {
  const p = pod('client', { namespace: NS, labels: { app: 'client' } });
  const meta = p.metadata ?? {};
  meta.annotations = {
    [NETWORKS_ANNOTATION]: 'macvlan1',
    ...(o.status === null ? {} : { 'k8s.v1.cni.cncf.io/network-status': o.status ?? networkStatus([{ name: NET, ips: ['10.1.1.9'] }]) }),
    ...(o.annotations ?? {}),
  };
  const spec = p.spec ?? { containers: [] };
  if (o.hostNetwork === true) spec.hostNetwork = true;
  if (o.injected !== false) {
    spec.initContainers = [{ name: SIDECAR_CONTAINER_NAME, image: 'multus-proxy:0.1.0', restartPolicy: 'Always' }];
    p.status = {
      ...p.status,
      initContainerStatuses: [
        {
          name: SIDECAR_CONTAINER_NAME,
          image: 'x',
          imageID: 'x',
          ready: o.ready !== false,
          restartCount: o.ready === false ? 4 : 0,
          started: true,
          state: o.ready === false ? { waiting: { reason: 'CrashLoopBackOff' } } : { running: {} },
          ...(o.ready === false ? { lastState: { terminated: { exitCode: 1, reason: 'Error', message: 'iptables-restore: permission denied' } } } : {}),
        },
      ],
    };
  }
  return p;
}

const web = (): V1Service => ({
  ...service('web', { namespace: NS, network: 'macvlan1', selector: { app: 'web' } }),
  spec: { ...service('web').spec, selector: { app: 'web' }, clusterIP: '10.96.0.10' },
});
const backend = (name: string, o: Parameters<typeof pod>[1] = {}): V1Pod =>
  pod(name, { namespace: NS, labels: { app: 'web' }, status: networkStatus([{ name: NET, ips: [`10.1.1.${name.length + 10}`] }]), ...o });

function podFacts(p: V1Pod, o: Partial<PodFacts> = {}): PodFacts {
  const svc = web();
  return {
    pod: p,
    namespaceLabels: ENABLED,
    events: [],
    webhookRegistered: true,
    services: [svc],
    slices: slicesFor(svc, [backend('web-a'), backend('web-bb')]),
    healthPort: DEFAULT_HEALTH_PORT,
    unreadable: [],
    ...o,
  };
}

function event(reason: string, message: string, at: string, type = 'Warning'): CoreV1Event {
  return { metadata: { name: `e-${reason}-${at}` }, involvedObject: { kind: 'Pod', name: 'client' }, reason, message, type, lastTimestamp: at as unknown as Date };
}

void describe('diagnose pod', () => {
  void test('injected, ready, synced, serving a Service with two ready endpoints: ok, with the networks and Services it serves', () => {
    const r = diagnosePod(podFacts(client()));
    assert.equal(r.verdict, 'ok', JSON.stringify(r.findings));
    assert.equal(r.injected, true);
    assert.deepEqual(r.sidecar, { mode: 'native', ready: true, restarts: 0, state: 'running', synced: true });
    assert.deepEqual(r.networks, [
      { network: NET, interface: 'net1', addresses: ['10.1.1.9'], services: [{ service: `${NS}/web`, clusterIP: '10.96.0.10', ports: ['80/TCP'], readyEndpoints: 2, endpoints: 2 }] },
    ]);
    assert.deepEqual(codes(r, 'error'), []);
  });

  void test('not injected: namespace without the injection label names the label and the command', () => {
    const r = diagnosePod(podFacts(client({ injected: false }), { namespaceLabels: {} }));
    assert.equal(r.verdict, 'problem');
    const f = find(r, 'NamespaceNotEnabled');
    assert.match(f.message, /namespace app is not labelled multus-proxy-injection=enabled/);
    assert.match(f.fix ?? '', /kubectl label namespace app multus-proxy-injection=enabled/);
  });

  void test('not injected: the install and kube-system namespaces are never injected', () => {
    const p = client({ injected: false });
    if (p.metadata) p.metadata.namespace = 'kube-system';
    assert.ok(codes(diagnosePod(podFacts(p)), 'error').includes('NamespaceExcluded'));
  });

  void test('not injected: the opt-out annotation', () => {
    const r = diagnosePod(podFacts(client({ injected: false, annotations: { [INJECT_ANNOTATION]: 'false' } })));
    assert.match(find(r, 'OptedOut').message, /multus-proxy\.k8s\.cni\.cncf\.io\/inject: "false"/);
  });

  void test('not injected: PodSecurity baseline on the namespace, or the webhook default', () => {
    const r = diagnosePod(podFacts(client({ injected: false }), { namespaceLabels: { ...ENABLED, 'pod-security.kubernetes.io/enforce': 'baseline' } }));
    assert.match(find(r, 'PodSecurity').message, /"baseline" Pod Security level forbids/);
    const byDefault = diagnosePod(podFacts(client({ injected: false }), { podSecurityDefault: 'restricted' }));
    assert.ok(codes(byDefault).includes('PodSecurity'));
  });

  void test('not injected: hostNetwork', () => {
    const r = diagnosePod(podFacts(client({ injected: false, hostNetwork: true })));
    assert.match(find(r, 'HostNetwork').message, /spec\.hostNetwork/);
  });

  void test('not injected: no secondary network attached', () => {
    const r = diagnosePod(podFacts(client({ injected: false, annotations: { [NETWORKS_ANNOTATION]: '' }, status: null })));
    assert.ok(codes(r, 'error').includes('NoSecondaryNetwork'));
  });

  void test('not injected although the webhook would inject it now: created before the label, recreate', () => {
    const r = diagnosePod(podFacts(client({ injected: false })));
    assert.match(find(r, 'NotInjected').fix ?? '', /recreate the pod/);
  });

  void test('not injected, and the webhook configuration does not exist: install it', () => {
    const r = diagnosePod(podFacts(client({ injected: false }), { webhookRegistered: false }));
    assert.deepEqual(codes(r, 'error'), ['WebhookNotRegistered']);
    assert.match(find(r, 'WebhookNotRegistered').message, /MutatingWebhookConfiguration multus-proxy-webhook does not exist/);
    // A pod that would not get it anyway is explained by its own cause.
    assert.deepEqual(codes(diagnosePod(podFacts(client({ injected: false, annotations: { [INJECT_ANNOTATION]: 'false' } }), { webhookRegistered: false })), 'error'), ['OptedOut']);
  });

  void test('not injected: a container on the sidecar health port', () => {
    const p = client({ injected: false });
    const c = p.spec?.containers[0];
    if (c) c.ports = [{ containerPort: DEFAULT_HEALTH_PORT }];
    assert.ok(codes(diagnosePod(podFacts(p))).includes('PortConflict'));
  });

  void test('sidecar not ready: its state, restarts and last exit', () => {
    const r = diagnosePod(podFacts(client({ ready: false })));
    const f = find(r, 'SidecarNotReady');
    assert.match(f.message, /waiting: CrashLoopBackOff, 4 restarts; last exit: Error \(exit 1\): iptables-restore: permission denied/);
    assert.match(f.fix ?? '', /kubectl logs -n app client -c multus-proxy/);
    assert.equal(r.sidecar?.ready, false);
  });

  void test('sidecar sync: the latest of SidecarSyncFailed and SidecarSyncRecovered decides', () => {
    const failed = event(REASON_SYNC_FAILED, 'rule sync failed (3 in a row): iptables-restore: line 4 failed', '2026-11-26T10:00:00Z');
    const recovered = event(REASON_SYNC_RECOVERED, 'rule sync succeeded again', '2026-11-26T10:05:00Z', 'Normal');
    const bad = diagnosePod(podFacts(client(), { events: [failed] }));
    assert.equal(bad.verdict, 'problem');
    assert.match(find(bad, 'SidecarSyncFailed').message, /line 4 failed/);
    assert.equal(bad.sidecar?.synced, false);
    const good = diagnosePod(podFacts(client(), { events: [failed, recovered] }));
    assert.equal(good.verdict, 'ok');
    assert.equal(good.sidecar?.synced, true);
    assert.ok(codes(good).includes('SidecarSyncRecovered'));
  });

  void test('the Service cap Event is a warning', () => {
    const r = diagnosePod(podFacts(client(), { events: [event(REASON_SERVICE_CAP_REACHED, 'network app/macvlan1 has 5 Services', '2026-11-26T10:00:00Z')] }));
    assert.equal(find(r, REASON_SERVICE_CAP_REACHED).severity, 'warning');
  });

  void test('a served network missing from network-status, or no network-status at all', () => {
    const other = diagnosePod(podFacts(client({ status: networkStatus([{ name: `${NS}/other`, ips: ['10.9.9.9'] }]) })));
    assert.match(find(other, 'NetworkNotAttached').message, /serves network app\/macvlan1, but .*network-status has no entry for it \(attached: cbr0, app\/other\)/);
    const none = diagnosePod(podFacts(client({ status: null })));
    assert.equal(find(none, 'NetworkStatusMissing').severity, 'error');
  });

  void test('a malformed service-network on the pod is named with the fix', () => {
    const r = diagnosePod(podFacts(client({ annotations: { [SERVICE_NETWORK_ANNOTATION]: 'a,,b' } })));
    assert.match(find(r, 'InvalidAnnotation').message, /^Pod app\/client: k8s\.v1\.cni\.cncf\.io\/service-network "a,,b"/);
  });

  void test('a Service on its network without ready endpoints is a warning that points at diagnose service', () => {
    const r = diagnosePod(podFacts(client(), { slices: [] }));
    const f = find(r, 'ServiceWithoutEndpoints');
    assert.equal(f.severity, 'warning');
    assert.equal(f.fix, 'diagnose service app/web');
  });

  void test('what could not be read is said, and the rest is still diagnosed', () => {
    const r = diagnosePod(podFacts(client(), { events: undefined, unreadable: ['the Events of Pod app/client (403 Forbidden: no)'] }));
    assert.match(find(r, 'Unreadable').message, /Events of Pod app\/client \(403 Forbidden/);
    assert.ok(codes(r).includes('SidecarReady'));
  });
});

// ---- Services ----------------------------------------------------------------------------------

function serviceFacts(svc: V1Service, pods: V1Pod[], o: Partial<ServiceFacts> & { published?: V1Pod[] } = {}): ServiceFacts {
  const nads = new Map<string, NadFact>([[NET, { exists: true, annotations: {} }]]);
  return { service: svc, nads, pods, slices: slicesFor(svc, o.published ?? pods, [...(o.nodeAddresses ?? [])]), nodeAddresses: [], events: [], unreadable: [], ...o };
}

const rowOf = (r: Report, name: string): { state: string; reasons: string[] } => {
  assert.equal(r.kind, 'Service');
  const row = r.kind === 'Service' ? r.pods.find((p) => p.pod === name) : undefined;
  assert.ok(row, `no row for ${name}`);
  return { state: row.state, reasons: row.reasons.map((x) => x.code) };
};

void describe('diagnose service', () => {
  void test('healthy: the annotation, the NAD, every pod ready', () => {
    const r = diagnoseService(serviceFacts(web(), [backend('web-a'), backend('web-bb')]));
    assert.equal(r.verdict, 'ok', JSON.stringify(r.findings));
    assert.deepEqual(r.networks, [{ network: NET, nad: 'exists', shared: true }]);
    assert.equal(r.selector, 'app=web');
    assert.equal(r.readyEndpoints, 2);
    assert.deepEqual(
      r.pods.map((p) => [p.pod, p.state]),
      [
        ['web-a', 'ready'],
        ['web-bb', 'ready'],
      ],
    );
    assert.ok(codes(r, 'ok').includes('AnnotationValid'));
  });

  void test("LoadBalancer: pending without an ingress IP; served ingress with its ranges; ipMode Proxy left alone; a node's address refused as the agents refuse it", () => {
    const lb = (ingress: { ip?: string; ipMode?: string }[], ranges?: string[]): V1Service => {
      const svc = web();
      svc.spec = { ...svc.spec, type: 'LoadBalancer', ...(ranges !== undefined ? { loadBalancerSourceRanges: ranges } : {}) };
      svc.status = { loadBalancer: { ingress } };
      return svc;
    };
    const pending = diagnoseService({ ...serviceFacts(web(), [backend('web-a')]), service: lb([]) });
    assert.equal(pending.verdict, 'ok', 'still served on the cluster IP');
    assert.match(find(pending, 'LoadBalancerPending').message, /no load-balancer implementation has written an ingress IP/);
    const served = diagnoseService({ ...serviceFacts(web(), [backend('web-a')]), service: lb([{ ip: '10.1.1.200' }, { ip: '10.1.1.201', ipMode: 'Proxy' }], ['198.51.100.0/24']) });
    assert.match(find(served, 'LoadBalancerIngress').message, /ingress 10\.1\.1\.200 served by the node agent on every node .*from 198\.51\.100\.0\/24/);
    assert.match(find(served, 'LoadBalancerProxyMode').message, /10\.1\.1\.201 has ipMode Proxy/);
    assert.ok(!codes(served).includes('LoadBalancerPending'));
    const refused = diagnoseService({ ...serviceFacts(web(), [backend('web-a')], { nodeAddresses: ['10.0.0.11'] }), service: lb([{ ip: '10.0.0.11' }]) });
    assert.equal(refused.verdict, 'problem');
    assert.match(find(refused, 'LoadBalancerInputRefused').message, /status\.loadBalancer\.ingress\[0\]\.ip "10\.0\.0\.11": is a node's or the reading pod's own address 10\.0\.0\.11/);
  });

  void test('a malformed service-network annotation: the parser message, slices kept', () => {
    const svc = web();
    if (svc.metadata?.annotations) svc.metadata.annotations[SERVICE_NETWORK_ANNOTATION] = 'macvlan1,';
    const r = diagnoseService({ ...serviceFacts(web(), [backend('web-a')]), service: svc });
    assert.equal(r.verdict, 'problem');
    assert.match(find(r, 'InvalidAnnotation').message, /Service app\/web: k8s\.v1\.cni\.cncf\.io\/service-network "macvlan1,": .* keeps the Service's existing EndpointSlices \(1\) unchanged/);
  });

  void test('the NAD does not exist', () => {
    const r = diagnoseService(serviceFacts(web(), [backend('web-a')], { nads: new Map([[NET, { exists: false }]]) }));
    assert.match(find(r, 'NadMissing').message, /NetworkAttachmentDefinition app\/macvlan1 does not exist/);
    assert.deepEqual(r.networks, [{ network: NET, nad: 'missing', shared: true }]);
  });

  void test("another namespace's NAD not shared with the Service's namespace", () => {
    const svc = service('web', { namespace: NS, network: 'infra/shared', selector: { app: 'web' } });
    const pods = [pod('web-a', { namespace: NS, status: networkStatus([{ name: 'infra/shared', ips: ['10.3.0.5'] }]) })];
    const facts = { ...serviceFacts(svc, pods), nads: new Map<string, NadFact>([['infra/shared', { exists: true, annotations: { [SERVICE_NAMESPACES_ANNOTATION]: 'other' } }]]), slices: [] };
    const r = diagnoseService(facts);
    assert.match(find(r, 'NetworkNotShared').message, /not shared with namespace app \(it lists "other"\)/);
    assert.equal(find(r, 'NoReadyEndpoints').severity, 'error');
  });

  void test('a pod without network-status is missing, and why', () => {
    const r = diagnoseService(serviceFacts(web(), [backend('web-a'), pod('web-new', { namespace: NS, labels: { app: 'web' } })]));
    assert.deepEqual(rowOf(r, 'web-new'), { state: 'missing', reasons: ['NetworkStatusMissing'] });
    assert.match(find(r, 'NetworkStatusMissing').message, /^Pod app\/web-new on app\/macvlan1 \(missing\): .*no k8s\.v1\.cni\.cncf\.io\/network-status annotation yet/);
    assert.equal(r.verdict, 'ok', 'the other pod still serves');
  });

  void test('a pod that is not ready is published with ready=false', () => {
    const r = diagnoseService(serviceFacts(web(), [backend('web-a', { ready: false })]));
    assert.deepEqual(rowOf(r, 'web-a'), { state: 'not-ready', reasons: ['NotReady'] });
    assert.match(find(r, 'NotReady').message, /Ready condition is False/);
    assert.ok(codes(r, 'error').includes('NoReadyEndpoints'));
  });

  void test('a pod on another network', () => {
    const r = diagnoseService(serviceFacts(web(), [pod('web-a', { namespace: NS, status: networkStatus([{ name: `${NS}/macvlan2`, ips: ['10.2.0.5'] }]) })]));
    assert.deepEqual(rowOf(r, 'web-a'), { state: 'missing', reasons: ['NetworkNotAttached'] });
    assert.match(find(r, 'NetworkNotAttached').message, /attached: cbr0, app\/macvlan2/);
  });

  void test('a refused address: loopback, and a Node address', () => {
    const pods = [
      pod('web-a', { namespace: NS, status: networkStatus([{ name: NET, ips: ['127.0.0.1'] }]) }),
      pod('web-b', { namespace: NS, status: networkStatus([{ name: NET, ips: ['10.1.1.1', '10.1.1.20'] }]) }),
    ];
    const r = diagnoseService(serviceFacts(web(), pods, { nodeAddresses: ['10.1.1.1'] }));
    assert.deepEqual(rowOf(r, 'web-a'), { state: 'missing', reasons: ['AddressRefused'] });
    assert.deepEqual(rowOf(r, 'web-b'), { state: 'ready', reasons: ['AddressRefused'] });
    const texts = r.findings
      .filter((f) => f.code === 'AddressRefused')
      .map((f) => f.message)
      .join('\n');
    assert.match(texts, /127\.0\.0\.1 is a loopback address/);
    assert.match(texts, /10\.1\.1\.1 is a Node's own address/);
  });

  void test('a pod the controller would publish but has not: the controller is not running or behind', () => {
    const r = diagnoseService(serviceFacts(web(), [backend('web-a'), backend('web-late')], { published: [backend('web-a')] }));
    assert.deepEqual(rowOf(r, 'web-late'), { state: 'missing', reasons: ['NotPublished'] });
    assert.match(find(r, 'NotPublished').message, /kubectl -n multus-proxy-system logs deploy\/multus-proxy-controller/);
  });

  void test('a finished pod is listed as not eligible, not as a problem', () => {
    const r = diagnoseService(serviceFacts(web(), [backend('web-a'), backend('job', { phase: 'Succeeded' })]));
    assert.deepEqual(rowOf(r, 'job'), { state: 'not-eligible', reasons: ['PodFinished'] });
    assert.equal(r.verdict, 'ok');
  });

  void test('no pod matches the selector', () => {
    const r = diagnoseService(serviceFacts(web(), [pod('other', { namespace: NS, labels: { app: 'other' } })], { published: [] }));
    assert.match(find(r, 'NoPodsMatch').message, /no pod in namespace app matches the selector app=web/);
  });

  void test('the proxy-name label missing, or no annotation at all', () => {
    const svc = web();
    delete svc.metadata?.labels?.[PROXY_NAME_LABEL];
    assert.match(
      find(diagnoseService({ ...serviceFacts(web(), [backend('web-a')]), service: svc }), 'ProxyLabelMissing').fix ?? '',
      /kubectl label service -n app web service\.kubernetes\.io\/service-proxy-name=multus-proxy/,
    );
    const plain = web();
    delete plain.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION];
    assert.ok(codes(diagnoseService({ ...serviceFacts(web(), []), service: plain })).includes('NotOptedIn'));
  });

  void test("the controller's own Warning Events beyond the derived causes are shown; other components' are not", () => {
    const ev = (reason: string, component: string): CoreV1Event => ({ ...event(reason, `${reason} happened`, '2026-11-26T10:00:00Z'), reportingComponent: component });
    const r = diagnoseService(
      serviceFacts(web(), [backend('web-a')], { events: [ev('FailedToWriteSlices', 'multus-proxy-controller'), ev('ClusterIPNotAllocated', 'ipallocator-repair-controller')] }),
    );
    assert.match(find(r, 'FailedToWriteSlices').message, /FailedToWriteSlices happened/);
    assert.ok(!codes(r).includes('ClusterIPNotAllocated'));
  });

  void test('an Event message with escape sequences and a forged verdict line is printed escaped: one verdict line, no escape byte', () => {
    const forged = '\x1b]0;owned\x07\x1b[2K\x1b[1Aok\n\nverdict: ok, nothing found that stops traffic';
    const ev: CoreV1Event = { ...event('FailedToWriteSlices', forged, '2026-11-26T10:00:00Z'), reportingComponent: 'multus-proxy-controller' };
    const r = diagnoseService(serviceFacts(web(), [], { events: [ev] }));
    const text = renderReport(r, 'text');
    assert.ok(!text.includes('\x1b'), 'no ESC byte reaches the terminal');
    assert.equal(text.split('\n').filter((l) => l.startsWith('verdict:')).length, 1, 'only the report writes a verdict line');
    assert.match(text, /\\x1b\]0;owned\\x07\\x1b\[2K\\x1b\[1Aok\\n\\nverdict: ok/);
  });

  void test('a pod listed in our slices that is no longer selected: stale', () => {
    const r = diagnoseService(serviceFacts(web(), [backend('web-a')], { published: [backend('web-a'), backend('gone')] }));
    assert.match(find(r, 'StaleEndpoint').message, /Pod app\/gone/);
  });
});

void describe('diagnose output and arguments', () => {
  void test('text names every finding code and the fix; json is the report itself', () => {
    const r = diagnosePod(podFacts(client({ injected: false }), { namespaceLabels: {} }));
    const text = renderReport(r, 'text');
    assert.match(text, /^Pod app\/client\n {2}sidecar: not injected\n/);
    assert.match(text, /\n {2}ERROR {2}NamespaceNotEnabled: Pod app\/client has no sidecar/);
    assert.match(text, /fix: kubectl label namespace app multus-proxy-injection=enabled/);
    assert.match(text, /verdict: problem: NamespaceNotEnabled\n$/);
    assert.deepEqual(JSON.parse(renderReport(r, 'json')), JSON.parse(JSON.stringify(r)));
    const s = renderReport(diagnoseService(serviceFacts(web(), [backend('web-a'), pod('web-new', { namespace: NS, labels: { app: 'web' } })])), 'text');
    assert.match(s, /web-new +missing +\(NetworkStatusMissing\)/);
    assert.match(s, /verdict: ok/);
  });

  void test("kubectl's forms: kind NAME -n NS, kind/NAME, NS/NAME, -o json", () => {
    const p = (argv: string[]): unknown => {
      const r = parseDiagnoseArgs(argv);
      return r.ok ? (r.value === 'help' ? 'help' : [r.value.kind, r.value.namespace, r.value.name, r.value.output]) : r.error;
    };
    assert.deepEqual(p(['pod', 'client', '-n', 'app']), ['pod', 'app', 'client', 'text']);
    assert.deepEqual(p(['svc/web', '-o', 'json']), ['service', undefined, 'web', 'json'], "no namespace: the context's, decided when the kubeconfig is read");
    assert.deepEqual(p(['service', 'app/web']), ['service', 'app', 'web', 'text']);
    assert.deepEqual(p(['--help']), 'help');
    assert.match(String(p(['deployment', 'x'])), /unknown kind "deployment": write pod or service/);
    assert.match(String(p(['pod'])), /expected a kind and a name/);
    assert.match(String(p(['pod', 'a/b', '-n', 'c'])), /names namespace a, but --namespace says c/);
    assert.match(String(p(['pod', 'x', '-o', 'yaml'])), /write text or json/);
  });
});
