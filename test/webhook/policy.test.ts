import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { decideInjection, describePod, type PodDecision } from '../../webhook/policy.js';
import { injectSidecar, sidecarContainer, uniqueName } from '../../webhook/mutate.js';
import { podHandler } from '../../webhook/handlers.js';
import type { V1Pod } from '../../src/kube/types.js';
import { admissionRequest, applyResponse, ENABLED, fakeCluster, SIDECAR } from './fixtures.js';

const SN = 'k8s.v1.cni.cncf.io/service-network';
const NETS = 'k8s.v1.cni.cncf.io/networks';

function pod(annotations: Record<string, string> | undefined, spec: Partial<NonNullable<V1Pod['spec']>> = {}): V1Pod {
  return { metadata: { name: 'p', ...(annotations ? { annotations } : {}) }, spec: { containers: [{ name: 'app', image: 'x' }], ...spec } };
}

function decide(p: V1Pod, labels: Record<string, string> | null = ENABLED, operation: 'CREATE' | 'UPDATE' = 'CREATE'): PodDecision {
  return decideInjection({ operation, pod: p, namespace: 'ns', namespaceLabels: labels ?? undefined, healthPort: 9180 });
}

void describe('webhook/policy decideInjection', () => {
  void test('skips with a reason: not a create, no annotation, namespace not enabled, already injected', () => {
    const asks = pod({ [SN]: 'a', [NETS]: 'a' });
    assert.equal((decide(asks, ENABLED, 'UPDATE') as { reason: string }).reason, 'not-create');
    assert.equal((decide(pod({ [NETS]: 'a' })) as { reason: string }).reason, 'no-annotation');
    const notEnabled = decide(asks, { 'multus-proxy-injection': 'disabled' });
    assert.equal(notEnabled.action, 'skip');
    assert.equal((notEnabled as { reason: string }).reason, 'namespace-not-enabled');
    assert.match((notEnabled as { warnings: string[] }).warnings[0] ?? '', /Pod ns\/p: namespace ns is not labelled multus-proxy-injection=enabled/);
    assert.equal((decide(asks, null) as { reason: string }).reason, 'namespace-not-enabled');
    const injected = injectSidecar(asks, SIDECAR, true);
    assert.equal((decide(injected) as { reason: string }).reason, 'already-injected');
    const regular = injectSidecar(asks, SIDECAR, false);
    assert.equal((decide(regular) as { reason: string }).reason, 'already-injected');
  });

  void test('injects when every service network is attached, with the parsed networks', () => {
    const d = decide(pod({ [SN]: 'a, other/b', [NETS]: 'a@net1,other/b' }));
    assert.deepEqual(d, { action: 'inject', networks: [{ namespace: 'ns', name: 'a' }, { namespace: 'other', name: 'b' }] });
  });

  void test('PodSecurity baseline and restricted deny with 403; privileged and unlabelled do not', () => {
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

  void test('the input pod is not modified; the token is mounted into the sidecar only', () => {
    const p = pod({ [SN]: 'a', [NETS]: 'a' }, { automountServiceAccountToken: false });
    const before = structuredClone(p);
    const out = injectSidecar(p, SIDECAR, true);
    assert.deepEqual(p, before);
    const mounts = [...(out.spec?.initContainers ?? []), ...(out.spec?.containers ?? [])].map((c) => [c.name, (c.volumeMounts ?? []).map((m) => m.mountPath)]);
    assert.deepEqual(mounts, [
      ['multus-proxy', ['/var/run/secrets/kubernetes.io/serviceaccount', '/run/multus-proxy']],
      ['app', []],
    ]);
    assert.equal(out.spec?.automountServiceAccountToken, false);
  });

  void test('regular mode keeps an existing default-container annotation', () => {
    const p = pod({ [SN]: 'a', [NETS]: 'a', 'kubectl.kubernetes.io/default-container': 'other' }, { containers: [{ name: 'app' }, { name: 'other' }] });
    const out = injectSidecar(p, SIDECAR, false);
    assert.equal(out.metadata?.annotations?.['kubectl.kubernetes.io/default-container'], 'other');
    assert.deepEqual(out.spec?.containers.map((c) => c.name), ['multus-proxy', 'app', 'other']);
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

  void test('a stale cached namespace without the label is looked up again, uncached', async () => {
    let fresh = 0;
    const cluster = fakeCluster();
    cluster.namespaceLabels = async (_n, f) => {
      if (f) fresh += 1;
      return f ? ENABLED : {};
    };
    const r = await podHandler({ cluster, sidecar: SIDECAR })(admissionRequest(pod({ [SN]: 'a', [NETS]: 'a' }), 'ns'));
    assert.equal(r.outcome, 'injected');
    assert.equal(fresh, 1);
  });

  void test('pods that do not ask cost no apiserver lookup', async () => {
    const cluster = fakeCluster({ namespaces: { ns: ENABLED } });
    const r = await podHandler({ cluster, sidecar: SIDECAR })(admissionRequest(pod(undefined), 'ns'));
    assert.equal(r.reason, 'no-annotation');
    assert.deepEqual(cluster.calls, []);
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
