/**
 * The Helm chart: `helm lint`, golden renders of representative values, clear failures for bad
 * values, and parity with kustomize: for equal settings the chart renders exactly the kustomize
 * install's objects (Helm's own labels aside), so the two cannot drift (docs/decisions/0015-install-manifests-and-image.md).
 * UPDATE_GOLDEN=1 rewrites the golden files.
 */
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { load } from 'js-yaml';
import { CHART, KUBE_VERSION, NAMESPACE, asKustomize, helm, isHook, template, templateText } from './helm.js';
import { DEPLOY, id, render, type Rendered } from './kustomize.js';

const GOLDEN = join(import.meta.dirname, 'helm-golden');

/** Every monitoring object on (deploy/components/monitoring). */
const MONITORING_SET = ['monitoring.serviceMonitor.enabled=true', 'monitoring.podMonitor.enabled=true', 'monitoring.prometheusRule.enabled=true', 'monitoring.dashboard.enabled=true'];

/** Representative values: each golden file is `helm template` with these `--set`s. */
const GOLDENS: Record<string, readonly string[]> = {
  'default': [],
  'bootstrap-node-agent': ['certificates.mode=bootstrap', 'nodeAgent.enabled=true', 'netservice.enabled=true', 'multiNetworkPolicy.crd.enabled=true', 'admissionPolicies.sidecarPodSecurity.enabled=true', 'admissionPolicies.networkStatus.enabled=true'],
  'own-secret-tuned': [
    'certificates.mode=secret',
    'certificates.secret.existingSecret=my-webhook-tls',
    'certificates.secret.caBundle=-----BEGIN CERTIFICATE-----',
    'image.repository=registry.example/multus-proxy',
    'image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef',
    'imagePullSecrets[0].name=registry-pull',
    'webhook.failurePolicy=Ignore',
    'webhook.timeoutSeconds=3',
    'webhook.namespaceSelector.matchExpressions[0].key=tier',
    'webhook.namespaceSelector.matchExpressions[0].operator=NotIn',
    'webhook.namespaceSelector.matchExpressions[0].values[0]=infra',
    'webhook.objectSelector.matchLabels.multus-proxy=yes',
    'sidecar.mode=native',
    'sourceGuard.exemptNamespaces[0]=vip-team',
    'sidecar.resources.limits.memory=96Mi',
    'controller.replicas=3',
    'controller.podDisruptionBudget.enabled=true',
    'controller.priorityClassName=system-cluster-critical',
    'controller.nodeSelector.node-role\\.kubernetes\\.io/control-plane=',
    'controller.tolerations[0].key=node-role.kubernetes.io/control-plane',
    'controller.tolerations[0].operator=Exists',
    'controller.tolerations[0].effect=NoSchedule',
  ],
  'monitoring': ['nodeAgent.enabled=true', ...MONITORING_SET, 'monitoring.labels.release=kube-prometheus-stack'],
  'cert-manager-issuer': ['certificates.certManager.issuerRef.kind=ClusterIssuer', 'certificates.certManager.issuerRef.name=corp-ca', 'certificates.certManager.issuerRef.group=cert-manager.io'],
};

void describe('helm chart', () => {
  void test('helm lint passes with the default and with every golden set of values', async () => {
    for (const [name, set] of Object.entries(GOLDENS)) {
      const args = ['lint', CHART, '--strict', '--kube-version', KUBE_VERSION, '--namespace', NAMESPACE];
      for (const s of set) args.push('--set', s);
      const { stdout } = await helm(args);
      assert.match(stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/, `${name}: ${stdout}`);
    }
  });

  for (const [name, set] of Object.entries(GOLDENS)) {
    void test(`golden render: ${name}`, async () => {
      const text = await templateText(set);
      const file = join(GOLDEN, `${name}.yaml`);
      if (process.env['UPDATE_GOLDEN'] === '1') writeFileSync(file, text);
      assert.ok(existsSync(file), `${file} missing: run UPDATE_GOLDEN=1 npm test -- test/deploy/helm.test.ts and review it`);
      assert.equal(text, readFileSync(file, 'utf8'), `helm template with ${set.join(' ')} differs from ${file} (UPDATE_GOLDEN=1 rewrites it; review the diff)`);
    });
  }

  void test('webhook.selectedPods.failurePolicy sets the selected-pods webhook alone; empty, it follows webhook.failurePolicy', async () => {
    const policies = async (set: readonly string[]): Promise<Record<string, string>> => {
      const mutating = (await template(set)).find((o) => o.kind === 'MutatingWebhookConfiguration') as Rendered & { webhooks: { name: string; failurePolicy: string }[] };
      return Object.fromEntries(mutating.webhooks.map((w) => [w.name.split('.')[0] ?? '', w.failurePolicy]));
    };
    assert.deepEqual(await policies([]), { pods: 'Fail', 'selected-pods': 'Fail', services: 'Fail' });
    assert.deepEqual(await policies(['webhook.selectedPods.failurePolicy=Ignore']), { pods: 'Fail', 'selected-pods': 'Ignore', services: 'Fail' });
    assert.deepEqual(await policies(['webhook.failurePolicy=Ignore']), { pods: 'Ignore', 'selected-pods': 'Ignore', services: 'Ignore' });
  });

  void test('the golden values reach the objects they name', async () => {
    const objs = await template(GOLDENS['own-secret-tuned'] ?? []);
    const mutating = objs.find((o) => o.kind === 'MutatingWebhookConfiguration') as Rendered & { webhooks: { failurePolicy: string; timeoutSeconds: number; objectSelector?: unknown; clientConfig: { caBundle?: string }; namespaceSelector: { matchExpressions: { key: string }[] } }[] };
    for (const w of mutating.webhooks) {
      assert.equal(w.failurePolicy, 'Ignore');
      assert.equal(w.timeoutSeconds, 3);
      assert.deepEqual(w.objectSelector, { matchLabels: { 'multus-proxy': 'yes' } });
      assert.equal(Buffer.from(w.clientConfig.caBundle ?? '', 'base64').toString(), '-----BEGIN CERTIFICATE-----');
      // The selected-pods webhook adds the complement of the injection label to the same selectors.
      assert.deepEqual(
        w.namespaceSelector.matchExpressions.map((e) => e.key).filter((k) => k !== 'multus-proxy-injection'),
        ['kubernetes.io/metadata.name', 'tier'],
      );
    }
    const webhook = objs.find((o) => o.kind === 'Deployment' && o.metadata?.name === 'multus-proxy-webhook') as Rendered;
    const spec = (webhook['spec'] as { template: { spec: { imagePullSecrets: unknown; containers: { image: string }[]; volumes: { secret?: { secretName: string } }[] } } }).template.spec;
    assert.deepEqual(spec.imagePullSecrets, [{ name: 'registry-pull' }]);
    assert.equal(spec.containers[0]?.image, 'registry.example/multus-proxy@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef');
    assert.equal(spec.volumes.find((v) => v.secret)?.secret?.secretName, 'my-webhook-tls');
    const config = objs.find((o) => o.kind === 'ConfigMap' && o.metadata?.name === 'multus-proxy-webhook') as Rendered & { data: Record<string, string> };
    assert.equal(config.data['sidecarImage'], spec.containers[0]?.image, 'the sidecar runs the webhook\'s image');
    assert.match(config.data['config.yaml'] ?? '', /mode: native/);
    assert.match(config.data['config.yaml'] ?? '', /memory: 96Mi/);
    assert.ok(objs.some((o) => o.kind === 'PodDisruptionBudget' && o.metadata?.name === 'multus-proxy-controller'));
    assert.ok(!objs.some((o) => o.apiVersion?.startsWith('cert-manager.io/') === true), 'no cert-manager objects with your own Secret');
  });

  const BAD: [readonly string[], RegExp][] = [
    [['certificates.mode=vault'], /certificates\.mode="vault": use cert-manager, bootstrap or secret/],
    [['sidecar.mode=sometimes'], /sidecar\.mode="sometimes": use auto, native or regular/],
    [['webhook.failurePolicy=fail'], /webhook\.failurePolicy="fail": use Fail or Ignore/],
    [['webhook.selectedPods.failurePolicy=ignore'], /webhook\.selectedPods\.failurePolicy="ignore": use Fail or Ignore, or leave it empty for webhook\.failurePolicy/],
    [['certificates.mode=secret', 'certificates.secret.caBundle=x'], /certificates\.secret\.existingSecret is required when certificates\.mode=secret/],
    [['certificates.mode=secret', 'certificates.secret.existingSecret=x'], /certificates\.secret\.caBundle is required when certificates\.mode=secret/],
    [['admissionPolicies.networkStatus.enabled=true', 'admissionPolicies.networkStatus.users=null', 'admissionPolicies.networkStatus.groups=null'], /admissionPolicies\.networkStatus\.users and \.groups are both empty: nobody could write network-status/],
  ];
  for (const [set, message] of BAD) {
    void test(`bad values are refused naming the key, the value and the fix: ${set.join(' ')}`, async () => {
      await assert.rejects(templateText(set), message);
    });
  }
});

/** The webhook's config.yaml compared as data, not as text (key order and comments aside). */
function parsedConfig(o: Rendered): Rendered {
  const data = o['data'] as Record<string, string> | undefined;
  if (o.kind !== 'ConfigMap' || data?.['config.yaml'] === undefined) return o;
  return { ...o, data: { ...data, 'config.yaml': load(data['config.yaml']) } };
}

/**
 * Blank lines inside strings dropped: kustomize re-serializes a folded (`>-`) scalar with
 * more-indented lines (the admission policies' CEL) with an extra blank line, which CEL ignores.
 */
function blankLinesDropped(v: unknown): unknown {
  if (typeof v === 'string') return v.replace(/\n(\s*\n)+/g, '\n');
  if (Array.isArray(v)) return v.map(blankLinesDropped);
  if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, blankLinesDropped(x)]));
  return v;
}

/** kustomize directory (or components over the default install) ↔ the chart's values for the same install. */
const PARITY: { kustomize: string | { components: string[]; patches?: string }; set: readonly string[] }[] = [
  { kustomize: 'deploy/overlays/cert-manager', set: [] },
  { kustomize: 'deploy/overlays/bootstrap', set: ['certificates.mode=bootstrap'] },
  { kustomize: 'deploy/overlays/node-agent', set: ['nodeAgent.enabled=true', 'nodeAgent.cleanupOnUninstall=false'] },
  { kustomize: { components: ['components/netservice'] }, set: ['netservice.enabled=true'] },
  { kustomize: { components: ['components/multi-networkpolicy'] }, set: ['multiNetworkPolicy.crd.enabled=true'] },
  { kustomize: { components: ['components/sidecar-pod-security'] }, set: ['admissionPolicies.sidecarPodSecurity.enabled=true'] },
  { kustomize: { components: ['components/network-status-writers'] }, set: ['admissionPolicies.networkStatus.enabled=true'] },
  { kustomize: { components: ['components/monitoring'] }, set: MONITORING_SET },
  // The identity patch docs/install.md shows, and the chart's values for it.
  {
    kustomize: {
      components: ['components/network-status-writers'],
      patches: `patches:
  - target: {kind: ValidatingAdmissionPolicy, name: multus-proxy-network-status-writers}
    patch: |-
      - op: replace
        path: /spec/variables/0/expression
        value: '["system:serviceaccount:kube-system:multus","system:serviceaccount:cni:writer"]'
      - op: replace
        path: /spec/variables/1/expression
        value: '[]'
`,
    },
    set: ['admissionPolicies.networkStatus.enabled=true', 'admissionPolicies.networkStatus.users={system:serviceaccount:kube-system:multus,system:serviceaccount:cni:writer}', 'admissionPolicies.networkStatus.groups=null'],
  },
];

void describe('kustomize and helm render the same objects for the same settings', () => {
  for (const { kustomize, set } of PARITY) {
    const name = typeof kustomize === 'string' ? kustomize : `deploy + ${kustomize.components.join(', ')}${kustomize.patches !== undefined ? ' + patches' : ''}`;
    void test(`${name} = helm ${set.join(' ') || '(defaults)'}`, async () => {
      let dir = typeof kustomize === 'string' ? kustomize : '';
      let tmp: string | undefined;
      if (typeof kustomize !== 'string') {
        tmp = mkdtempSync(join(tmpdir(), 'mp-parity-'));
        writeFileSync(join(tmp, 'kustomization.yaml'), `resources: [${relative(tmp, join(DEPLOY, 'overlays/cert-manager'))}]\ncomponents: [${kustomize.components.map((c) => relative(tmp ?? '', join(DEPLOY, c))).join(', ')}]\n${kustomize.patches ?? ''}`);
        dir = tmp;
      }
      try {
        // The release namespace is Helm's to create (`--create-namespace` or beforehand), not the chart's.
        const fromKustomize = (await render(dir)).filter((o) => !(o.kind === 'Namespace' && o.metadata?.name === NAMESPACE));
        const fromHelm = (await template(set)).filter((o) => !isHook(o)).map(asKustomize);
        const byId = (objs: Rendered[]): Map<string, Rendered> => new Map(objs.map((o) => [id(o), blankLinesDropped(parsedConfig(o)) as Rendered]));
        const k = byId(fromKustomize);
        const h = byId(fromHelm);
        assert.deepEqual([...h.keys()].sort(), [...k.keys()].sort(), 'the same objects');
        for (const [key, obj] of k) assert.deepEqual(h.get(key), obj, `${key} differs`);
      } finally {
        if (tmp !== undefined) rmSync(tmp, { recursive: true, force: true });
      }
    });
  }
});
