import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { defaultService, validateService } from '../../cmd/webhook/service.js';
import { serviceDefaultingHandler, serviceValidationHandler } from '../../cmd/webhook/handlers.js';
import type { V1Service } from '../../src/kube/types.js';
import { admissionRequest, applyResponse, fakeCluster } from './fixtures.js';
import { EVENT_INTERVAL_MS, lookupNads, serviceEventWriter } from '../../cmd/webhook/cluster.js';

const SN = 'k8s.v1.cni.cncf.io/service-network';
const SEL = 'k8s.v1.cni.cncf.io/service-selector';
const LABEL = 'service.kubernetes.io/service-proxy-name';

function svc(annotations: Record<string, string>, spec: V1Service['spec'] = { selector: { app: 'web' }, ports: [{ port: 80 }] }, labels?: Record<string, string>): V1Service {
  return { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', ...(labels ? { labels } : {}), annotations }, spec };
}

function denial(s: V1Service): { code: number; message: string; reason: string } {
  const v = validateService(s, 'ns');
  assert.equal(v.allowed, false, 'expected a denial');
  return v;
}

void describe('webhook/service defaulting', () => {
  void test('adds the proxy-name label when the annotation is there and the label is not', async () => {
    const s = svc({ [SN]: 'net-a' });
    const { service, labelAdded } = defaultService(s);
    assert.equal(labelAdded, true);
    assert.equal(service.metadata?.labels?.[LABEL], 'multus-proxy');
    assert.equal(s.metadata?.labels, undefined, 'input untouched');
    const r = await serviceDefaultingHandler({})(admissionRequest(s, 'ns', 'CREATE', 'Service'));
    assert.equal(r.outcome, 'patched');
    assert.deepEqual(applyResponse(s, r.response), service);
  });

  void test('leaves an existing label (any value) and Services without the annotation alone', async () => {
    for (const s of [svc({ [SN]: 'a' }, undefined, { [LABEL]: 'multus-proxy' }), svc({ [SN]: 'a' }, undefined, { [LABEL]: 'other' }), svc({})]) {
      const r = await serviceDefaultingHandler({})(admissionRequest(s, 'ns', 'UPDATE', 'Service'));
      assert.equal(r.response.patch, undefined);
      assert.equal(r.response.allowed, true);
    }
  });
});

void describe('webhook/service validation', () => {
  void test('ClusterIP with a spec.selector and headless with the selector annotation are valid', () => {
    assert.equal(validateService(svc({ [SN]: 'net-a,other/net-b' }), 'ns').allowed, true);
    const headless = validateService(svc({ [SN]: 'net-a', [SEL]: 'app=web' }, { clusterIP: 'None', ports: [{ port: 80 }] }), 'ns');
    assert.deepEqual(headless, { allowed: true, networks: [{ namespace: 'ns', name: 'net-a' }], warnings: [], reason: 'valid' });
  });

  void test('ExternalName is denied naming the type and the fix', () => {
    const d = denial(svc({ [SN]: 'net-a' }, { type: 'ExternalName', selector: { app: 'web' } }));
    assert.equal(d.code, 400);
    assert.match(
      d.message,
      /^Service ns\/web: spec.type "ExternalName": multus-proxy serves ClusterIP, headless, NodePort and LoadBalancer Services only: it is only a DNS alias.*; set spec.type: ClusterIP .*, NodePort or LoadBalancer \(both served on the network by the multus-proxy-node agent\)/,
    );
  });

  void test('LoadBalancer is allowed, with a warning saying it needs the node agent and a load-balancer implementation', () => {
    const v = validateService(
      svc({ [SN]: 'net-a' }, { type: 'LoadBalancer', selector: { app: 'web' }, externalTrafficPolicy: 'Local', loadBalancerSourceRanges: ['203.0.113.0/24', ' 2001:db8::/32 '] }),
      'ns',
    );
    assert.ok(v.allowed && v.reason === 'valid');
    assert.equal(v.warnings.length, 1);
    assert.match(v.warnings[0] ?? '', /^Service ns\/web: type LoadBalancer on ns\/net-a: its status\.loadBalancer\.ingress IPs are served on the secondary network by the multus-proxy-node agent/);
    assert.match(v.warnings[0] ?? '', /allocated and announced on that network by a load-balancer implementation \(e\.g\. MetalLB/);
  });

  void test("LoadBalancer source ranges: a bad one is denied naming the entry and the fix; too many are denied; the providers' annotation alone is a warning", () => {
    const bad = denial(svc({ [SN]: 'net-a' }, { type: 'LoadBalancer', selector: { app: 'web' }, loadBalancerSourceRanges: ['10.0.0.0/8', '10.0.0.1'] }));
    assert.equal(bad.reason, 'invalid-field');
    assert.equal(bad.message, 'Service ns/web: spec.loadBalancerSourceRanges[1] "10.0.0.1": has no prefix length; write a CIDR such as "203.0.113.0/24" or "2001:db8::/48"');
    const many = denial(
      svc({ [SN]: 'net-a' }, { type: 'LoadBalancer', selector: { app: 'web' }, loadBalancerSourceRanges: Array.from({ length: 257 }, (_, i) => `10.${i % 256}.${Math.floor(i / 256)}.0/24`) }),
    );
    assert.match(many.message, /lists more than 256 ranges/);
    const annotated = validateService(svc({ [SN]: 'net-a', 'service.beta.kubernetes.io/load-balancer-source-ranges': '10.0.0.0/8' }, { type: 'LoadBalancer', selector: { app: 'web' } }), 'ns');
    assert.ok(annotated.allowed);
    assert.match(
      annotated.warnings.join('\n'),
      /annotation service\.beta\.kubernetes\.io\/load-balancer-source-ranges is not read by multus-proxy \(nor by kube-proxy\): every source is admitted; move the ranges to spec\.loadBalancerSourceRanges/,
    );
  });

  void test('the node agent not installed or not ready: a warning and a Warning Event on the Service (not for a dry run); ready: neither', async () => {
    const lb = svc({ [SN]: 'net-a' }, { type: 'LoadBalancer', selector: { app: 'web' }, ports: [{ port: 80 }] });
    for (const [presence, want] of [
      ['absent', /the multus-proxy-node agent is not installed \(its DaemonSet multus-proxy-node was not found\); install the node-agent component/],
      ['not-ready', /the multus-proxy-node agent has no ready pod/],
      ['unknown', /could not be checked/],
    ] as const) {
      const events: string[] = [];
      const handler = serviceValidationHandler({
        cluster: fakeCluster({ nodeAgent: presence }),
        events: async (s, ns, reason, message) => void events.push(`${ns}/${s.metadata?.name ?? ''} ${reason}: ${message}`),
      });
      const r = await handler(admissionRequest(lb, 'ns', 'CREATE', 'Service'));
      assert.equal(r.response.allowed, true);
      assert.match(r.response.warnings?.join('\n') ?? '', want);
      assert.equal(events.length, 1);
      assert.match(events[0] ?? '', /^ns\/web NodeAgentMissing: Service ns\/web: type LoadBalancer is not served|^ns\/web NodeAgentMissing: Service ns\/web: type LoadBalancer needs/);
      const dry = await handler({ ...admissionRequest(lb, 'ns', 'CREATE', 'Service'), dryRun: true });
      assert.match(dry.response.warnings?.join('\n') ?? '', want);
      assert.equal(events.length, 1, 'no Event for a dry run');
    }
    const events: string[] = [];
    const nodePort = await serviceValidationHandler({ cluster: fakeCluster({ nodeAgent: 'absent' }), events: async (_s, _ns, reason) => void events.push(reason) })(
      admissionRequest(svc({ [SN]: 'net-a' }, { type: 'NodePort', selector: { app: 'web' } }), 'ns', 'CREATE', 'Service'),
    );
    assert.match(nodePort.response.warnings?.join('\n') ?? '', /type NodePort is not served on the secondary network: the multus-proxy-node agent is not installed/);
    assert.deepEqual(events, ['NodeAgentMissing']);
    const ready = await serviceValidationHandler({ cluster: fakeCluster({ nodeAgent: 'ready' }), events: async () => assert.fail('no Event when the agent runs') })(
      admissionRequest(lb, 'ns', 'CREATE', 'Service'),
    );
    assert.ok(!(ready.response.warnings ?? []).some((w) => w.includes('not served') || w.includes('not installed')));
    const plain = fakeCluster({ nodeAgent: 'absent' });
    await serviceValidationHandler({ cluster: plain })(admissionRequest(svc({ [SN]: 'net-a' }), 'ns', 'CREATE', 'Service'));
    assert.ok(!plain.calls.includes('node-agent'), 'a ClusterIP Service does not ask');
  });

  void test('NodePort is allowed, with a warning saying what the node agent needs', () => {
    const v = validateService(svc({ [SN]: 'net-a,other/net-b' }, { type: 'NodePort', selector: { app: 'web' }, externalTrafficPolicy: 'Local' }), 'ns');
    assert.ok(v.allowed && v.reason === 'valid');
    assert.equal(v.warnings.length, 1);
    assert.match(v.warnings[0] ?? '', /^Service ns\/web: type NodePort on ns\/net-a, other\/net-b is served only by the multus-proxy-node agent/);
    assert.match(v.warnings[0] ?? '', /multus-proxy\.k8s\.cni\.cncf\.io\/node-addresses .*multus-proxy\.k8s\.cni\.cncf\.io\/node-address-range/);
    assert.match(v.warnings[0] ?? '', /multus-proxy\.k8s\.cni\.cncf\.io\/node-parents \("<namespace>\/<nad>=<interface>"/);
  });

  void test('headless with spec.selector is denied with the selector to move into the annotation, and why', () => {
    const d = denial(svc({ [SN]: 'net-a' }, { clusterIP: 'None', selector: { tier: 'db', app: 'web' } }));
    assert.equal(d.reason, 'headless-with-selector');
    assert.match(d.message, /spec\.selector "\{\\"tier\\":\\"db\\",\\"app\\":\\"web\\"\}"/);
    assert.match(d.message, /EndpointSlice controller would publish the pods' primary-network IPs/);
    assert.match(d.message, /move the selector into the annotation k8s\.v1\.cni\.cncf\.io\/service-selector: "app=web,tier=db" and remove spec\.selector/);
  });

  void test('bad annotation syntax is denied with the parser message', () => {
    assert.match(denial(svc({ [SN]: 'a//b' })).message, /^Service ns\/web: k8s\.v1\.cni\.cncf\.io\/service-network "a\/\/b": /);
    assert.match(denial(svc({ [SN]: 'a', [SEL]: 'app in (web' }, { clusterIP: 'None' })).message, /^Service ns\/web: k8s\.v1\.cni\.cncf\.io\/service-selector "app in \(web": /);
    assert.match(denial(svc({ [SN]: 'a', [SEL]: ' ' }, { clusterIP: 'None' })).message, /is empty, which would select every pod/);
  });

  void test('a different proxy-name is a conflict (403)', () => {
    const d = denial(svc({ [SN]: 'a' }, undefined, { [LABEL]: 'other-proxy' }));
    assert.equal(d.code, 403);
    assert.match(d.message, /label service\.kubernetes\.io\/service-proxy-name "other-proxy": conflicts with/);
  });

  void test('warnings: no selector at all, both selectors, label without annotation', () => {
    const none = validateService(svc({ [SN]: 'a' }, { clusterIP: 'None' }), 'ns');
    assert.match((none as { warnings: string[] }).warnings.join(), /no spec\.selector and no k8s\.v1\.cni\.cncf\.io\/service-selector/);
    const both = validateService(svc({ [SN]: 'a', [SEL]: 'app=x' }), 'ns');
    assert.match((both as { warnings: string[] }).warnings.join(), /service-selector is ignored because spec\.selector is set/);
    const labelOnly = validateService(svc({}, undefined, { [LABEL]: 'multus-proxy' }), 'ns');
    assert.match((labelOnly as { warnings: string[] }).warnings.join(), /without the k8s\.v1\.cni\.cncf\.io\/service-network annotation/);
  });

  void test('a Service being deleted: an update that leaves the checked fields passes (finalizer removal); one that changes them is checked', async () => {
    const old = svc({ [SN]: 'a' }, { type: 'ExternalName', selector: { app: 'web' } });
    old.metadata = { ...old.metadata, deletionTimestamp: new Date(), finalizers: ['example.com/keep'] };
    const unfinalized: V1Service = { ...old, metadata: { ...old.metadata, finalizers: [] } };
    // Invalid as it stands (ExternalName), yet its finalizer can go: its cleanup is never blocked.
    assert.deepEqual(validateService(unfinalized, 'ns', old), { allowed: true, networks: [], warnings: [], reason: 'being-deleted' });
    const reannotated: V1Service = { ...old, metadata: { ...old.metadata, annotations: { [SN]: 'b' } } };
    assert.equal(validateService(reannotated, 'ns', old).allowed, false, 'a changed annotation is checked as on a live Service');
    // The attack: a Service of the tenant's own NAD, kept by its own finalizer, re-annotated to an unshared NAD.
    const own = svc({ [SN]: 'own' });
    own.metadata = { ...own.metadata, deletionTimestamp: new Date(), finalizers: ['example.com/keep'] };
    const moved: V1Service = { ...own, metadata: { ...own.metadata, annotations: { [SN]: 'default/macvlan1' } } };
    const cluster = fakeCluster({ nadAnnotations: { 'default/macvlan1': {} } });
    const req = { ...admissionRequest(moved, 'ns', 'UPDATE', 'Service'), oldObject: own };
    const r = await serviceValidationHandler({ cluster })(req);
    assert.equal(r.response.allowed, false);
    assert.equal(r.reason, 'network-not-shared');
    const unchanged = await serviceValidationHandler({ cluster })({ ...admissionRequest({ ...own, metadata: { ...own.metadata, finalizers: [] } }, 'ns', 'UPDATE', 'Service'), oldObject: own });
    assert.equal(unchanged.response.allowed, true);
    assert.deepEqual(cluster.calls, ['nad:default/macvlan1'], 'the unchanged update looks nothing up');
  });

  void test('a missing NetworkAttachmentDefinition, or an unknown one of its own namespace, is a warning naming it, not a denial', async () => {
    const cluster = fakeCluster({ nads: { 'ns/gone': 'missing', 'ns/slow': 'unknown', 'x/later': 'missing' } });
    const r = await serviceValidationHandler({ cluster })(admissionRequest(svc({ [SN]: 'net-a,gone,slow,x/later' }), 'ns', 'CREATE', 'Service'));
    assert.equal(r.response.allowed, true);
    assert.deepEqual(r.response.warnings, [
      'NetworkAttachmentDefinition ns/gone does not exist (yet): the Service has no endpoints on it until it is created',
      'NetworkAttachmentDefinition ns/slow could not be checked; make sure it exists',
      'NetworkAttachmentDefinition x/later does not exist (yet): the Service has no endpoints on it until it is created and its owner shares it with this namespace',
    ]);
    assert.deepEqual(cluster.calls, ['nad:ns/net-a', 'nad:ns/gone', 'nad:ns/slow', 'nad:x/later']);
  });

  void test("another namespace's NAD that cannot be looked up (error or timeout) is denied: the sharing check is never skipped", async () => {
    const cluster = fakeCluster({ nads: { 'victim/net': 'unknown' } });
    const r = await serviceValidationHandler({ cluster })(admissionRequest(svc({ [SN]: 'own,victim/net' }), 'ns', 'CREATE', 'Service'));
    assert.equal(r.response.allowed, false);
    assert.equal(r.response.status?.code, 403);
    assert.equal(r.reason, 'network-unverified');
    assert.match(
      r.response.status?.message ?? '',
      /^Service ns\/web: annotation k8s\.v1\.cni\.cncf\.io\/service-network: NetworkAttachmentDefinition victim\/net of another namespace could not be read just now, .*try again/,
    );
    // A lookup that never answers: denied once the admission's lookup time is up.
    const hung = { ...fakeCluster(), nadExists: () => new Promise<never>(() => undefined) };
    const slow = await serviceValidationHandler({ cluster: hung, nadLookupTimeoutMs: 20 })(admissionRequest(svc({ [SN]: 'victim/net' }), 'ns', 'CREATE', 'Service'));
    assert.equal(slow.reason, 'network-unverified');
  });

  void test('more names than the bound are denied before any lookup, with the fix', async () => {
    const names = Array.from({ length: 3000 }, (_, i) => `victim/n${i}`).join(',');
    const cluster = fakeCluster();
    const r = await serviceValidationHandler({ cluster })(admissionRequest(svc({ [SN]: names }), 'ns', 'CREATE', 'Service'));
    assert.equal(r.response.allowed, false);
    assert.match(r.response.status?.message ?? '', /names 3000 networks, more than the 32 one object may name; name at most 32 NetworkAttachmentDefinitions/);
    assert.ok((r.response.status?.message ?? '').length < 1000, 'the message quotes the value cut short');
    assert.deepEqual(cluster.calls, []);
    const at = Array.from({ length: 32 }, (_, i) => `n${i}`).join(',');
    assert.equal(validateService(svc({ [SN]: at }), 'ns').allowed, true);
  });

  void test('more ports than the budget are denied with the fix', () => {
    const ports = Array.from({ length: 257 }, (_, i) => ({ port: 1000 + i, name: `p${i}` }));
    const d = denial(svc({ [SN]: 'a' }, { selector: { app: 'web' }, ports }));
    assert.equal(d.reason, 'over-budget');
    assert.match(d.message, /spec\.ports lists 257 ports, more than the 256 .*split it into several Services/);
  });

  void test("another namespace's NAD: denied unless its owner shared it with this namespace; shared by name or '*' is allowed", async () => {
    const key = 'multus-proxy.k8s.cni.cncf.io/service-namespaces';
    const cluster = fakeCluster({ nadAnnotations: { 'default/macvlan1': {}, 'team/listed': { [key]: 'a, ns' }, 'team/all': { [key]: '*' }, 'team/other': { [key]: 'a,b' } } });
    const handler = serviceValidationHandler({ cluster });
    const ask = async (net: string) => (await handler(admissionRequest(svc({ [SN]: net }), 'ns', 'CREATE', 'Service'))).response;
    const plain = await ask('default/macvlan1');
    assert.equal(plain.allowed, false);
    assert.equal(plain.status?.code, 403);
    assert.match(
      plain.status?.message ?? '',
      /^Service ns\/web: annotation k8s\.v1\.cni\.cncf\.io\/service-network: NetworkAttachmentDefinition default\/macvlan1 belongs to another namespace and is not shared with namespace ns \(it has no such annotation\): its owner adds the annotation multus-proxy\.k8s\.cni\.cncf\.io\/service-namespaces: "ns"/,
    );
    assert.match((await ask('team/other')).status?.message ?? '', /it lists "a,b"/);
    assert.equal((await ask('team/listed')).allowed, true);
    assert.equal((await ask('team/all')).allowed, true);
    assert.equal((await ask('own')).allowed, true, 'a NAD of its own namespace needs nothing');
  });
});

void describe('webhook Events about Services', () => {
  void test('written in the background, one per Service and reason per interval, none without a name; the Event names the Service', async () => {
    const created: { path: string; body: { reason?: string; involvedObject?: { kind?: string; name?: string; namespace?: string }; message?: string; type?: string } }[] = [];
    let t = 0;
    const write = serviceEventWriter({ create: async (path: string, body: unknown) => void created.push({ path, body: body as (typeof created)[number]['body'] }) } as never, undefined, () => t);
    const lb = svc({ [SN]: 'net-a' }, { type: 'LoadBalancer' });
    await write(lb, 'ns', 'NodeAgentMissing', 'm1');
    await write(lb, 'ns', 'NodeAgentMissing', 'm1 again');
    await write(lb, 'other', 'NodeAgentMissing', 'm2');
    await write({ ...lb, metadata: { generateName: 'web-' } }, 'ns', 'NodeAgentMissing', 'm3');
    t += EVENT_INTERVAL_MS;
    await write(lb, 'ns', 'NodeAgentMissing', 'm4');
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(
      created.map((c) => [c.path, c.body.type, c.body.reason, c.body.involvedObject?.kind, c.body.involvedObject?.namespace, c.body.involvedObject?.name, c.body.message]),
      [
        ['/api/v1/namespaces/ns/events', 'Warning', 'NodeAgentMissing', 'Service', 'ns', 'web', 'm1'],
        ['/api/v1/namespaces/other/events', 'Warning', 'NodeAgentMissing', 'Service', 'other', 'web', 'm2'],
        ['/api/v1/namespaces/ns/events', 'Warning', 'NodeAgentMissing', 'Service', 'ns', 'web', 'm4'],
      ],
    );
  });
});

void describe('NAD lookups of one admission', () => {
  void test('each NAD once, at most the concurrency at a time, in the order of the names; unanswered ones are unknown at the deadline', async () => {
    let running = 0;
    let peak = 0;
    const asked: string[] = [];
    const cluster = {
      async nadExists(ref: { namespace: string; name: string }) {
        asked.push(`${ref.namespace}/${ref.name}`);
        running++;
        peak = Math.max(peak, running);
        await new Promise((r) => setTimeout(r, 2));
        running--;
        return { state: ref.name === 'gone' ? ('missing' as const) : ('exists' as const) };
      },
    };
    const refs = [...Array.from({ length: 30 }, (_, i) => ({ namespace: 'a', name: `n${i}` })), { namespace: 'a', name: 'n3' }, { namespace: 'a', name: 'gone' }];
    const out = await lookupNads(cluster, refs, 5_000, 8);
    assert.equal(peak, 8);
    assert.equal(asked.length, 31, 'the repeated name is asked once');
    assert.equal(out.length, refs.length);
    assert.equal(out[31]?.state, 'missing');
    assert.ok(out.slice(0, 31).every((o) => o.state === 'exists'));
    const never = { nadExists: () => new Promise<never>(() => undefined) };
    assert.deepEqual(await lookupNads(never, [{ namespace: 'a', name: 'x' }], 10), [{ state: 'unknown' }]);
  });
});
