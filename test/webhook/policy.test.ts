import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { decideInjection, describePod, parseInjectAnnotation, type PodDecision } from '../../src/injection-policy.js';
import { injectSidecar, launchedByHealthListen, sidecarContainer, uniqueName } from '../../cmd/webhook/mutate.js';
import { podHandler } from '../../cmd/webhook/handlers.js';
import type { V1Pod } from '../../src/kube/types.js';
import { admissionRequest, applyResponse, ENABLED, fakeCluster, SIDECAR } from './fixtures.js';

const SN = 'k8s.v1.cni.cncf.io/service-network';
const NETS = 'k8s.v1.cni.cncf.io/networks';
const INJECT = 'multus-proxy.k8s.cni.cncf.io/inject';

function pod(annotations: Record<string, string> | undefined, spec: Partial<NonNullable<V1Pod['spec']>> = {}): V1Pod {
  return { metadata: { name: 'p', ...(annotations ? { annotations } : {}) }, spec: { containers: [{ name: 'app', image: 'x' }], ...spec } };
}

function decide(p: V1Pod, labels: Record<string, string> | null = ENABLED, operation: 'CREATE' | 'UPDATE' = 'CREATE'): PodDecision {
  return decideInjection({ operation, pod: p, namespace: 'ns', namespaceLabels: labels ?? undefined, healthPort: 9180 });
}

void describe('src/injection-policy decideInjection', () => {
  void test('skips with a reason: not a create, no network, opted out, already injected', () => {
    const asks = pod({ [SN]: 'a', [NETS]: 'a' });
    assert.equal((decide(asks, ENABLED, 'UPDATE') as { reason: string }).reason, 'not-create');
    assert.equal((decide(pod(undefined)) as { reason: string }).reason, 'no-networks');
    assert.equal((decide(pod({ [NETS]: ' ' })) as { reason: string }).reason, 'no-networks');
    assert.deepEqual(decide(pod({ [NETS]: 'a', [INJECT]: 'false' })), { action: 'skip', reason: 'opted-out', detail: `${INJECT}: "false"`, warnings: [] });
    // The opt-out wins over an explicit service network too.
    assert.equal((decide(pod({ [SN]: 'a', [NETS]: 'a', [INJECT]: 'false' })) as { reason: string }).reason, 'opted-out');
    const injected = injectSidecar(asks, SIDECAR, true);
    assert.equal((decide(injected) as { reason: string }).reason, 'already-injected');
    const regular = injectSidecar(asks, SIDECAR, false);
    assert.equal((decide(regular) as { reason: string }).reason, 'already-injected');
  });

  void test('namespace-wide: a pod attaching networks gets every one of them, each once, in any form', () => {
    assert.deepEqual(decide(pod({ [NETS]: 'a@net1, other/b,a@net2' })), {
      action: 'inject',
      networks: [
        { namespace: 'ns', name: 'a' },
        { namespace: 'other', name: 'b' },
      ],
    });
    assert.deepEqual(decide(pod({ [NETS]: '[{"name":"core","interface":"core"},{"name":"b","namespace":"other"}]', [INJECT]: 'true' })), {
      action: 'inject',
      networks: [
        { namespace: 'ns', name: 'core' },
        { namespace: 'other', name: 'b' },
      ],
    });
    // The service-network annotation narrows.
    assert.deepEqual(decide(pod({ [NETS]: 'a,b', [SN]: 'b' })), { action: 'inject', networks: [{ namespace: 'ns', name: 'b' }] });
  });

  void test('an inherited pod is never denied for policy: admitted unchanged with a warning and the reason', () => {
    const inherits = (spec: Partial<NonNullable<V1Pod['spec']>> = {}) => pod({ [NETS]: 'a' }, spec);
    const cases: [PodDecision, string, RegExp][] = [
      [decide(inherits(), { ...ENABLED, 'pod-security.kubernetes.io/enforce': 'baseline' }), 'pod-security', /"baseline" Pod Security level forbids/],
      [decide(inherits({ hostNetwork: true })), 'host-network', /spec\.hostNetwork "true".*node agent serves host-network pods/],
      [decide(inherits({ containers: [{ name: 'app', ports: [{ containerPort: 9180 }] }] })), 'port-conflict', /container app ports "9180"/],
      [decide(pod({ [NETS]: 'a,,b' })), 'invalid-networks', /k8s\.v1\.cni\.cncf\.io\/networks "a,,b": item 2 is empty/],
    ];
    for (const [d, reason, text] of cases) {
      assert.equal(d.action, 'skip', reason);
      assert.equal((d as { reason: string }).reason, reason);
      const warnings = (d as { warnings: string[] }).warnings;
      assert.equal(warnings.length, 1);
      assert.match(warnings[0] ?? '', /^no multus-proxy sidecar added \(namespace-wide injection\): Pod ns\/p: /);
      assert.match(warnings[0] ?? '', text);
    }
    // The same pods asking explicitly are denied.
    assert.equal(decide(pod({ [NETS]: 'a', [SN]: 'a' }, { hostNetwork: true })).action, 'deny');
    assert.equal(decide(pod({ [NETS]: 'a,,b', [SN]: 'a' })).action, 'deny');
  });

  void test('a bad inject value is denied, naming the annotation, the value and the fix', () => {
    for (const [value, fix] of [
      ['False', /write "false" exactly/],
      [' true', /write "true" exactly/],
      ['no', /write "false" to opt the pod out, or remove the annotation/],
    ] as const) {
      const d = decide(pod({ [NETS]: 'a', [INJECT]: value }));
      assert.equal(d.action, 'deny');
      assert.match((d as { message: string }).message, new RegExp(`^Pod ns/p: multus-proxy\\.k8s\\.cni\\.cncf\\.io/inject ${JSON.stringify(value)}: is neither "true" nor "false"; `));
      assert.match((d as { message: string }).message, fix);
    }
  });

  void test('parseInjectAnnotation: only "true", "false" and absence parse; never throws', () => {
    fc.assert(
      fc.property(fc.option(fc.string(), { nil: undefined }), (v) => {
        const r = parseInjectAnnotation(v);
        if (v === undefined || v === 'true') return r.ok && r.value;
        if (v === 'false') return r.ok && !r.value;
        return !r.ok && r.error.key === INJECT && r.error.value === v && r.error.fix.length > 0;
      }),
    );
  });

  void test('injects when every service network is attached, with the parsed networks', () => {
    const d = decide(pod({ [SN]: 'a, other/b', [NETS]: 'a@net1,other/b' }));
    assert.deepEqual(d, {
      action: 'inject',
      networks: [
        { namespace: 'ns', name: 'a' },
        { namespace: 'other', name: 'b' },
      ],
    });
  });

  void test('an explicit pod: PodSecurity baseline and restricted deny with 403; privileged and unlabelled do not', () => {
    const asks = pod({ [SN]: 'a', [NETS]: 'a' });
    for (const level of ['baseline', 'restricted']) {
      const d = decide(asks, { ...ENABLED, 'pod-security.kubernetes.io/enforce': level });
      assert.equal(d.action, 'deny');
      assert.equal((d as { code: number }).code, 403);
      assert.match((d as { message: string }).message, new RegExp(`"${level}": the multus-proxy sidecar needs the NET_ADMIN.*enforce=privileged`));
    }
    assert.equal(decide(asks, { ...ENABLED, 'pod-security.kubernetes.io/enforce': 'privileged' }).action, 'inject');
  });

  void test('describePod names generateName pods', () => {
    assert.equal(describePod({ metadata: { generateName: 'web-' } }, 'ns'), 'Pod ns/web-* (generateName)');
    assert.equal(describePod({}, 'ns'), 'Pod ns/(no name)');
  });
});

void describe('webhook/mutate', () => {
  void test('uniqueName picks the first free suffix', () => {
    assert.equal(uniqueName('v', new Set()), 'v');
    assert.equal(uniqueName('v', new Set(['v', 'v-1', 'v-3'])), 'v-2');
  });

  void test('privileged only when configured, and then without allowPrivilegeEscalation (the apiserver refuses both)', () => {
    const normal = sidecarContainer(SIDECAR, 'tok', true).securityContext;
    assert.equal(normal?.privileged, undefined);
    assert.equal(normal?.allowPrivilegeEscalation, false);
    const priv = sidecarContainer({ ...SIDECAR, privileged: true }, 'tok', true).securityContext;
    assert.equal(priv?.privileged, true);
    assert.equal(priv?.allowPrivilegeEscalation, undefined);
  });

  void test("the startup probe tries 1 s after the start under health-listen, 2 s after it with a command of the operator's own (Node.js binds the port itself)", () => {
    const probe = (command: readonly string[]): unknown => sidecarContainer({ ...SIDECAR, command }, 'tok', true).startupProbe;
    assert.equal(SIDECAR.command[0], '/usr/local/bin/health-listen');
    assert.deepEqual(probe(SIDECAR.command), { httpGet: { path: '/readyz?wait=20', port: 9180 }, initialDelaySeconds: 1, periodSeconds: 1, timeoutSeconds: 23, failureThreshold: 14 });
    assert.equal((probe(['health-listen', 'node', 'x.js']) as { initialDelaySeconds: number }).initialDelaySeconds, 1);
    for (const own of [['node', '/app/dist/sidecar.js'], ['/opt/health-listener', 'node'], []]) {
      assert.equal((probe(own) as { initialDelaySeconds: number }).initialDelaySeconds, 2, own.join(' '));
    }
    assert.equal(launchedByHealthListen(['/usr/local/bin/health-listen']), true);
  });

  void test('the input pod is not modified; the token and the pod annotations are mounted into the sidecar only', () => {
    const p = pod({ [SN]: 'a', [NETS]: 'a' }, { automountServiceAccountToken: false });
    const before = structuredClone(p);
    const out = injectSidecar(p, SIDECAR, true);
    assert.deepEqual(p, before);
    const mounts = [...(out.spec?.initContainers ?? []), ...(out.spec?.containers ?? [])].map((c) => [c.name, (c.volumeMounts ?? []).map((m) => m.mountPath)]);
    assert.deepEqual(mounts, [
      ['multus-proxy', ['/var/run/secrets/kubernetes.io/serviceaccount', '/run/multus-proxy', '/etc/multus-proxy/podinfo']],
      ['app', []],
    ]);
    assert.equal(out.spec?.automountServiceAccountToken, false);
  });

  void test('regular mode keeps an existing default-container annotation', () => {
    const p = pod({ [SN]: 'a', [NETS]: 'a', 'kubectl.kubernetes.io/default-container': 'other' }, { containers: [{ name: 'app' }, { name: 'other' }] });
    const out = injectSidecar(p, SIDECAR, false);
    assert.equal(out.metadata?.annotations?.['kubectl.kubernetes.io/default-container'], 'other');
    assert.deepEqual(
      out.spec?.containers.map((c) => c.name),
      ['multus-proxy', 'app', 'other'],
    );
  });
});

void describe('webhook/handlers podHandler', () => {
  void test('auto mode asks the cluster version: 1.29+ native, older regular', async () => {
    const p = pod({ [SN]: 'a', [NETS]: 'a' });
    for (const native of [true, false]) {
      const cluster = fakeCluster({ namespaces: { ns: ENABLED }, native });
      const h = podHandler({ cluster, sidecar: { ...SIDECAR, mode: 'auto' } });
      const r = await h(admissionRequest(p, 'ns'));
      assert.equal(r.outcome, 'injected');
      assert.equal(r.reason, native ? 'native' : 'regular');
      const out = applyResponse(p, r.response);
      assert.equal((native ? out.spec?.initContainers : out.spec?.containers)?.[0]?.name, 'multus-proxy');
      assert.ok(cluster.calls.includes('version'));
    }
  });

  void test('pods that attach no network cost no apiserver lookup; the namespace is read once otherwise, cached', async () => {
    const cluster = fakeCluster({ namespaces: { ns: ENABLED } });
    const h = podHandler({ cluster, sidecar: SIDECAR });
    const r = await h(admissionRequest(pod(undefined), 'ns'));
    assert.equal(r.reason, 'no-networks');
    assert.deepEqual(cluster.calls, []);
    const inherited = await h(admissionRequest(pod({ [NETS]: 'a' }), 'ns'));
    assert.equal(inherited.outcome, 'injected');
    assert.deepEqual(cluster.calls, ['ns:ns']);
  });

  void test('an inherited pod refused for policy: allowed, no patch, the warning, outcome skipped with the reason (the metric label)', async () => {
    const h = podHandler({ cluster: fakeCluster({ namespaces: { ns: { ...ENABLED, 'pod-security.kubernetes.io/enforce': 'restricted' } } }), sidecar: SIDECAR });
    const r = await h(admissionRequest(pod({ [NETS]: 'a' }), 'ns'));
    assert.equal(r.outcome, 'skipped');
    assert.equal(r.reason, 'pod-security');
    assert.equal(r.response.allowed, true);
    assert.equal(r.response.patch, undefined);
    assert.match(r.response.warnings?.[0] ?? '', /"restricted" Pod Security level forbids/);
  });

  void test("a namespace without the enforce label is held to the cluster's default level the webhook was told (podSecurityDefault); its own label wins", async () => {
    const cluster = fakeCluster({ namespaces: { ns: ENABLED, priv: { ...ENABLED, 'pod-security.kubernetes.io/enforce': 'privileged' } } });
    const h = podHandler({ cluster, sidecar: SIDECAR, podSecurityDefault: 'baseline' });
    const asked = await h(admissionRequest(pod({ [SN]: 'a', [NETS]: 'a' }), 'ns'));
    assert.equal(asked.response.allowed, false);
    assert.equal(asked.reason, 'pod-security');
    assert.match(
      asked.response.status?.message ?? '',
      /namespace ns \(no pod-security\.kubernetes\.io\/enforce label; the cluster default, webhook option podSecurityDefault\) "baseline".*label the namespace pod-security\.kubernetes\.io\/enforce=privileged/,
    );
    const labelled = await h(admissionRequest(pod({ [SN]: 'a', [NETS]: 'a' }), 'priv'));
    assert.equal(labelled.outcome, 'injected');
    // Unset (Kubernetes' own default, privileged): injected as before.
    const unset = await podHandler({ cluster, sidecar: SIDECAR })(admissionRequest(pod({ [SN]: 'a', [NETS]: 'a' }), 'ns'));
    assert.equal(unset.outcome, 'injected');
  });

  void test('injection is idempotent: the injected pod, sent again (reinvocation), is left alone', async () => {
    const h = podHandler({ cluster: fakeCluster({ namespaces: { ns: ENABLED } }), sidecar: SIDECAR });
    const p = pod({ [SN]: 'a', [NETS]: 'a' });
    const once = applyResponse(p, (await h(admissionRequest(p, 'ns'))).response);
    const again = await h(admissionRequest(once, 'ns'));
    assert.equal(again.reason, 'already-injected');
    assert.equal(again.response.patch, undefined);
  });
});
