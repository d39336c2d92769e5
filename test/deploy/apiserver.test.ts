/**
 * Every object that every kustomization renders is accepted by the real kube-apiserver: a
 * server-side apply with dryRun=All runs the same decoding, defaulting, validation (CEL match
 * conditions included) and admission as a real install, then stores nothing. So the webhook
 * configurations never become active here and cannot disturb other tests on a shared control
 * plane; only the install Namespace and its ServiceAccounts are created for real, because
 * namespaced objects and pods need them to exist.
 *
 * Pods: PodSecurity admission only warns about a Deployment's template; it enforces on Pods. So
 * each workload's pod template is also dry-run created as a Pod in the install namespace, whose
 * `restricted` level then really decides.
 *
 * cert-manager is not installed in this test cluster: its Issuer and Certificate
 * (cert-manager.io/v1) are registered here as minimal stub CRDs that accept any spec, only in
 * this test. They prove the objects reach the apiserver under the right group, version, kind and
 * scope; cert-manager's own schema validation of their spec is not exercised.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { useControlPlane, type ControlPlane } from '../harness/controlplane.js';
import { KubeApiError, isConflict } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import { INSTALL_NAMESPACE } from '../../src/keys.js';
import { KUSTOMIZATIONS, find, id, podSpec, podTemplateMeta, render, type Rendered } from './kustomize.js';

const FIELD_MANAGER = 'multus-proxy-deploy-test';

function stubCrd(kind: string, plural: string): unknown {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.cert-manager.io`, labels: { 'multus-proxy.test/stub': 'true' } },
    spec: {
      group: 'cert-manager.io',
      scope: 'Namespaced',
      names: { kind, plural, singular: kind.toLowerCase(), listKind: `${kind}List` },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
        },
      ],
    },
  };
}

interface ApiResource {
  name: string;
  kind: string;
  namespaced: boolean;
}

/** kind -> REST resource and scope, from the apiserver's discovery (no hand-written table to go stale). */
class Discovery {
  private readonly cache = new Map<string, ApiResource[]>();
  constructor(private readonly cp: ControlPlane) {}

  async resolve(apiVersion: string, kind: string): Promise<{ group: string; version: string; resource: ApiResource }> {
    const [group, version] = apiVersion.includes('/') ? (apiVersion.split('/') as [string, string]) : ['', apiVersion];
    let list = this.cache.get(apiVersion);
    if (list === undefined) {
      const path = group === '' ? `/api/${version}` : `/apis/${group}/${version}`;
      list = (await this.cp.client.get<{ resources: ApiResource[] }>(path)).resources.filter((r) => !r.name.includes('/'));
      this.cache.set(apiVersion, list);
    }
    const resource = list.find((r) => r.kind === kind);
    if (resource === undefined) throw new Error(`the apiserver serves no ${kind} in ${apiVersion}`);
    return { group, version, resource };
  }
}

async function pathOf(discovery: Discovery, o: Rendered): Promise<string> {
  const { group, version, resource } = await discovery.resolve(o.apiVersion ?? '', o.kind ?? '');
  const ns = o.metadata?.namespace;
  if (resource.namespaced !== (ns !== undefined)) {
    throw new Error(`${id(o)}: ${o.kind} is ${resource.namespaced ? 'namespaced but has no namespace' : 'cluster-scoped but has a namespace'}`);
  }
  return apiPath(group, version, resource.name, ns, o.metadata?.name);
}

function describeError(e: unknown): string {
  if (e instanceof KubeApiError) return `${e.status} ${e.reason ?? ''}: ${e.apiMessage}`;
  return e instanceof Error ? e.message : String(e);
}

let cp: ControlPlane;
let discovery: Discovery;
const rendered = new Map<string, Rendered[]>();

before(async () => {
  cp = await useControlPlane();
  discovery = new Discovery(cp);
  for (const [kind, plural] of [
    ['Issuer', 'issuers'],
    ['Certificate', 'certificates'],
  ] as const) {
    try {
      await cp.client.create(apiPath('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'), stubCrd(kind, plural));
    } catch (e) {
      if (!isConflict(e)) throw e;
    }
  }
  // Established is not enough for the REST handler; wait until both are listable.
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      await cp.client.list(apiPath('cert-manager.io', 'v1', 'issuers'));
      await cp.client.list(apiPath('cert-manager.io', 'v1', 'certificates'));
      break;
    } catch (e) {
      if (Date.now() > deadline) throw new Error(`stub cert-manager CRDs not served: ${describeError(e)}`, { cause: e });
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  for (const dir of KUSTOMIZATIONS) rendered.set(dir, await render(dir));
  // The install namespace, for real (with its PodSecurity label from the manifests), and the
  // ServiceAccounts that pods name (the ServiceAccount admission plugin checks they exist).
  const ns = find(rendered.get('deploy/overlays/bootstrap') ?? [], 'Namespace', INSTALL_NAMESPACE);
  await cp.client.patch(await pathOf(discovery, ns), ns, 'apply', { fieldManager: FIELD_MANAGER, force: true });
  for (const objs of rendered.values()) {
    for (const sa of objs.filter((o) => o.kind === 'ServiceAccount')) {
      await cp.client.patch(await pathOf(discovery, sa), sa, 'apply', { fieldManager: FIELD_MANAGER, force: true });
    }
  }
});

after(async () => {
  await cp?.stop();
});

void describe('the real kube-apiserver accepts every rendered object (server-side dry-run apply)', () => {
  for (const dir of KUSTOMIZATIONS) {
    void test(dir, async () => {
      const objs = rendered.get(dir) ?? [];
      assert.ok(objs.length > 0);
      const failures: string[] = [];
      for (const o of objs) {
        try {
          const out = await cp.client.patch<Rendered>(await pathOf(discovery, o), o, 'apply', { dryRun: true, fieldManager: FIELD_MANAGER, force: true });
          // What comes back is what would be stored: same kind and name, defaulted.
          assert.equal(out.kind, o.kind);
          assert.equal(out.metadata?.name, o.metadata?.name);
        } catch (e) {
          failures.push(`${id(o)}: ${describeError(e)}`);
        }
      }
      assert.deepEqual(failures, [], `rejected by the apiserver:\n${failures.join('\n')}`);
    });
  }

  void test('the apiserver would keep the webhook policy as written (nothing defaulted away)', async () => {
    const objs = rendered.get('deploy') ?? [];
    const mwc = find(objs, 'MutatingWebhookConfiguration', 'multus-proxy-webhook');
    const out = await cp.client.patch<Rendered>(await pathOf(discovery, mwc), mwc, 'apply', { dryRun: true, fieldManager: FIELD_MANAGER, force: true });
    type Hook = { name: string; failurePolicy: string; matchConditions?: unknown[]; reinvocationPolicy?: string };
    const hooks = out['webhooks'] as Hook[];
    for (const prefix of ['pods.', 'selected-pods.']) {
      const pods = hooks.find((h) => h.name.startsWith(prefix));
      assert.equal(pods?.failurePolicy, 'Fail', prefix);
      assert.equal(pods?.reinvocationPolicy, 'IfNeeded', prefix);
      assert.equal(pods?.matchConditions?.length, 1, prefix);
    }
  });

  void test('the apiserver rejects a broken object, so the checks above can fail', async () => {
    const objs = rendered.get('deploy') ?? [];
    const mwc = structuredClone(find(objs, 'MutatingWebhookConfiguration', 'multus-proxy-webhook'));
    const hooks = mwc['webhooks'] as { matchConditions: { expression: string }[] }[];
    const first = hooks[0]?.matchConditions[0];
    assert.ok(first);
    first.expression = "object.metadata.annotations['x'] +";
    await assert.rejects(cp.client.patch(await pathOf(discovery, mwc), mwc, 'apply', { dryRun: true, fieldManager: FIELD_MANAGER, force: true }), (e: unknown) => {
      assert.ok(e instanceof KubeApiError && e.status === 422, describeError(e));
      return true;
    });
  });
});

void describe('PodSecurity "restricted" in the install namespace admits every pod the manifests make', () => {
  for (const dir of ['deploy/overlays/cert-manager', 'deploy/overlays/bootstrap']) {
    void test(dir, async () => {
      const workloads = (rendered.get(dir) ?? []).filter((o) => podSpec(o) !== undefined);
      assert.ok(workloads.length >= 2);
      const failures: string[] = [];
      for (const w of workloads) {
        const pod = {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: `${w.metadata?.name ?? 'pod'}-dry-run`, namespace: INSTALL_NAMESPACE, labels: podTemplateMeta(w)?.labels ?? {} },
          spec: podSpec(w),
        };
        try {
          await cp.client.create(apiPath('', 'v1', 'pods', INSTALL_NAMESPACE), pod, { dryRun: true, fieldManager: FIELD_MANAGER });
        } catch (e) {
          failures.push(`${id(w)}: ${describeError(e)}`);
        }
      }
      assert.deepEqual(failures, [], failures.join('\n'));
    });
  }

  void test('and refuses a pod that is not restricted (the namespace label is really enforced)', async () => {
    const w = find(rendered.get('deploy') ?? [], 'Deployment', 'multus-proxy-controller');
    const spec = structuredClone(podSpec(w));
    assert.ok(spec?.containers?.[0]);
    spec.containers[0].securityContext = { ...spec.containers[0].securityContext, capabilities: { add: ['NET_ADMIN'], drop: ['ALL'] } };
    await assert.rejects(
      cp.client.create(apiPath('', 'v1', 'pods', INSTALL_NAMESPACE), { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'not-restricted', namespace: INSTALL_NAMESPACE }, spec }, { dryRun: true }),
      (e: unknown) => e instanceof KubeApiError && e.status === 403 && /violates PodSecurity "restricted/.test(e.apiMessage),
    );
  });
});
