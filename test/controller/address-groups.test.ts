/**
 * MultiNetworkPolicy address groups written by the controller, on a private real kube-apiserver,
 * the controller running under the shipped ClusterRole (deploy/base/controller-rbac.yaml). The
 * controller starts before the MultiNetworkPolicy CRD exists (it must neither crash nor hold its
 * readiness), then the CRD of deploy/components/multi-networkpolicy is installed and the groups
 * follow: matching pods, a pod joining and leaving, namespace labels, named ports, dual stack, the
 * empty-group marker, the generation, a peer over budget, pods without a sidecar, an invalid
 * policy, the policy deleted; and a Service's slices on the same network are never touched.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { createKubeClient, getIfExists } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { CoreV1Event, V1EndpointSlice, V1Pod } from '../../src/kube/types.js';
import { createLogger } from '../../src/log.js';
import { MANAGED_BY_LABEL, NETWORK_STATUS_ANNOTATION, POLICY_FOR_ANNOTATION } from '../../src/keys.js';
import { ADDRESS_GROUP_MANAGED_BY, ADDRESS_GROUP_POLICY_LABEL, POLICY_GENERATION_ANNOTATION } from '../../src/policy/address-group.js';
import { parseOptions } from '../../cmd/controller/options.js';
import { startController, type RunningController } from '../../cmd/controller/run.js';
import { startControlPlane, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { networkStatus } from '../unit/controller/fixtures.js';
import { createService, ourSlices, podPath, setPodStatus, sliceAddresses } from './helpers.js';

const ROOT = join(import.meta.dirname, '..', '..');
const NS = 'x';
const MNP = (name?: string): string => apiPath('k8s.cni.cncf.io', 'v1beta1', 'multi-networkpolicies', NS, name);
const SLICES = apiPath('discovery.k8s.io', 'v1', 'endpointslices', NS);
type Doc = { kind?: string; rules?: unknown };
const docs = (file: string): Doc[] => loadAll(readFileSync(join(ROOT, file), 'utf8')) as Doc[];

let cp: ControlPlane;
let ctl: RunningController;

async function groupSlices(policy: string): Promise<V1EndpointSlice[]> {
  return (await cp.client.list<V1EndpointSlice>(SLICES, { labelSelector: `${MANAGED_BY_LABEL}=${ADDRESS_GROUP_MANAGED_BY},${ADDRESS_GROUP_POLICY_LABEL}=${policy}` })).items;
}

const addresses = async (policy: string): Promise<string> => sliceAddresses(await groupSlices(policy)).join();

async function events(kind: string, name: string, reason: string): Promise<CoreV1Event[]> {
  const list = await cp.client.list<CoreV1Event>(apiPath('', 'v1', 'events', NS), { fieldSelector: `involvedObject.kind=${kind},involvedObject.name=${name},reason=${reason}` });
  return list.items;
}

async function metric(name: string, policy: string): Promise<number | undefined> {
  const text = await ctl.registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{policy="${NS}/${policy}"}`));
  return line === undefined ? undefined : Number(line.split(' ').pop());
}

interface PeerOptions {
  labels: Record<string, string>;
  ips: string[];
  ports?: { name: string; containerPort: number }[];
  sidecar?: boolean;
  phase?: string;
  ready?: boolean;
}

async function createPeer(name: string, o: PeerOptions): Promise<void> {
  const containers = [{ name: 'app', image: 'app', ports: o.ports ?? [] }, ...(o.sidecar === true ? [{ name: 'multus-proxy', image: 'multus-proxy' }] : [])];
  const body: V1Pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: o.labels, annotations: { [NETWORK_STATUS_ANNOTATION]: networkStatus([{ name: `${NS}/net1`, ips: o.ips }]) } },
    spec: { containers },
  };
  await cp.client.create(podPath(NS), body);
  await setPodStatus(cp.client, NS, name, { ready: o.ready ?? true, phase: o.phase ?? 'Running' });
}

interface CreatedPolicy {
  metadata: { uid: string; generation: number };
}

function policy(name: string, spec: unknown): object {
  return { apiVersion: 'k8s.cni.cncf.io/v1beta1', kind: 'MultiNetworkPolicy', metadata: { name, namespace: NS, annotations: { [POLICY_FOR_ANNOTATION]: 'net1' } }, spec };
}

before(async () => {
  cp = await startControlPlane();
  // The controller's identity under the shipped ClusterRole.
  const role = docs('deploy/base/controller-rbac.yaml').find((x) => x.kind === 'ClusterRole');
  assert.ok(role?.rules, 'the controller ClusterRole');
  await cp.createNamespace('multus-proxy-system');
  await cp.client.create(apiPath('rbac.authorization.k8s.io', 'v1', 'clusterroles'), {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'test-controller' },
    rules: role.rules,
  });
  await cp.client.create(apiPath('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings'), {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'test-controller' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'test-controller' },
    subjects: [{ kind: 'ServiceAccount', name: 'multus-proxy-controller', namespace: 'multus-proxy-system' }],
  });
  const token = await cp.tokenFor('multus-proxy-system', 'multus-proxy-controller');
  await cp.createNamespace(NS, { team: 'a' });
  const opts = parseOptions(
    [
      ...['--health-port', '0', '--health-host', '127.0.0.1', '--leader-elect', 'false', '--resync', '0', '--manage-sidecar-rbac', 'false', '--watch-nodes', 'false'],
      ...['--event-interval', '10m', '--max-addresses-per-group', '4', '--max-endpoints-per-slice', '2'],
    ],
    {},
  );
  if (!opts.ok || opts.value === 'help') throw new Error('bad options');
  ctl = await startController(createKubeClient({ server: cp.server, ca: Buffer.from(cp.caPem), token }), opts.value, createLogger('controller', process.env['LOG_LEVEL'] ?? 'warn'));
  await waitFor('controller ready without the MultiNetworkPolicy API', () => ctl.isReady());
  const crd = docs('deploy/components/multi-networkpolicy/crd.yaml').find((d) => d.kind === 'CustomResourceDefinition');
  await cp.client.create(apiPath('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'), crd);
  await waitFor('the MultiNetworkPolicy API is served', async () => (await getIfExists(cp.client, MNP()).catch(() => undefined)) !== undefined, 30_000);
});

after(async () => {
  await ctl?.stop();
  await cp?.stop();
});

void describe('address groups written by the controller', () => {
  let serviceSlices: string;
  const serviceState = async (): Promise<string> =>
    (await ourSlices(cp.client, NS, 'web'))
      .map((s) => `${s.metadata?.name ?? ''}@${s.metadata?.resourceVersion ?? ''}`)
      .sort()
      .join();

  void test('groups for the pods a peer selects: not-ready and pending included, finished left out; dual stack; named ports; owner and generation', async () => {
    await createService(cp.client, NS, 'web', { network: 'net1', selector: { svc: 'web' } });
    await createPeer('web-1', { labels: { app: 'web', svc: 'web' }, ips: ['10.1.0.1', 'fd00:1::1'], ports: [{ name: 'http', containerPort: 8080 }] });
    await createPeer('web-2', { labels: { app: 'web', svc: 'web' }, ips: ['10.1.0.2'], ready: false, phase: 'Pending' });
    await createPeer('web-3', { labels: { app: 'web' }, ips: ['10.1.0.3'], phase: 'Succeeded' });
    await createPeer('db-1', { labels: { app: 'db' }, ips: ['10.1.0.10'] });
    await createPeer('db-2', { labels: { app: 'db' }, ips: ['10.1.0.11'], sidecar: true });
    await waitFor('the Service slices', async () => sliceAddresses(await ourSlices(cp.client, NS, 'web')).join() === '10.1.0.1,10.1.0.2,fd00:1::1');
    await waitFor('controller idle', () => ctl.idle());
    serviceSlices = await serviceState();

    const created = (await cp.client.create<object>(
      MNP(),
      policy('allow-web', { podSelector: { matchLabels: { app: 'db' } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 'http' }] }] }),
    )) as CreatedPolicy;
    await waitFor(
      'the group of allow-web',
      async () => (await addresses('allow-web')) === '10.1.0.1,10.1.0.2,fd00:1::1',
      30_000,
      () => 'groups not as expected',
    );
    const slices = await groupSlices('allow-web');
    assert.deepEqual(slices.map((s) => `${s.addressType}:${(s.ports ?? []).map((p) => `${p.name}=${p.port}`).join()}`).sort(), ['IPv4:', 'IPv4:http=8080', 'IPv6:http=8080']);
    for (const s of slices) {
      assert.deepEqual(
        s.metadata?.ownerReferences?.map((o) => [o.kind, o.name, o.uid]),
        [['MultiNetworkPolicy', 'allow-web', created.metadata.uid]],
      );
      assert.equal(s.metadata?.annotations?.[POLICY_GENERATION_ANNOTATION], String(created.metadata.generation));
      assert.equal(s.metadata?.labels?.['service.kubernetes.io/service-proxy-name'], 'multus-proxy');
      for (const e of s.endpoints ?? []) assert.equal(e.targetRef?.kind, 'Pod');
    }
  });

  void test('a pod joining and leaving the selector', async () => {
    await createPeer('web-4', { labels: { app: 'other' }, ips: ['10.1.0.4'] });
    await cp.client.patch(podPath(NS, 'web-4'), { metadata: { labels: { app: 'web' } } }, 'merge');
    await waitFor('web-4 joined', async () => (await addresses('allow-web')).includes('10.1.0.4'));
    await cp.client.patch(podPath(NS, 'web-4'), { metadata: { labels: { app: 'other' } } }, 'merge');
    await waitFor('web-4 left', async () => (await addresses('allow-web')) === '10.1.0.1,10.1.0.2,fd00:1::1');
  });

  void test('changes back to back: each is planned from the previous write answer, none waits for its echo', async () => {
    const stale = async (): Promise<number> => {
      const line = (await ctl.registry.metrics()).split('\n').find((l) => l.startsWith('multus_proxy_controller_policy_reconciles_total{result="stale"}'));
      return line === undefined ? 0 : Number(line.split(' ').pop());
    };
    const before = await stale();
    await createPeer('web-5', { labels: { app: 'other' }, ips: ['10.1.0.5'] });
    for (const app of ['web', 'other', 'web', 'other', 'web']) await cp.client.patch(podPath(NS, 'web-5'), { metadata: { labels: { app } } }, 'merge');
    await waitFor('web-5 in', async () => (await addresses('allow-web')).includes('10.1.0.5'));
    await waitFor('controller idle', () => ctl.idle());
    assert.equal(await stale(), before, 'no reconcile waited for the echo of our own write');
    await cp.client.delete(podPath(NS, 'web-5'));
    await waitFor('web-5 gone', async () => (await addresses('allow-web')) === '10.1.0.1,10.1.0.2,fd00:1::1');
  });

  void test('namespace labels changing: a namespaceSelector peer follows; an empty group is one slice without endpoints', async () => {
    await cp.client.create(MNP(), policy('allow-team', { podSelector: {}, ingress: [{ from: [{ namespaceSelector: { matchLabels: { team: 'a' } }, podSelector: { matchLabels: { app: 'db' } } }] }] }));
    await waitFor('team a peers', async () => (await addresses('allow-team')) === '10.1.0.10,10.1.0.11');
    await cp.client.patch(apiPath('', 'v1', 'namespaces', undefined, NS), { metadata: { labels: { team: 'b' } } }, 'merge');
    await waitFor('an empty group marker', async () => {
      const s = await groupSlices('allow-team');
      return s.length === 1 && (s[0]?.endpoints ?? []).length === 0;
    });
    await cp.client.patch(apiPath('', 'v1', 'namespaces', undefined, NS), { metadata: { labels: { team: 'a' } } }, 'merge');
    await waitFor('team a peers again', async () => (await addresses('allow-team')) === '10.1.0.10,10.1.0.11');
  });

  void test('the generation annotation follows the policy', async () => {
    const updated = await cp.client.patch<CreatedPolicy>(
      MNP('allow-web'),
      { spec: { ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 'http' }, { port: 9090 }] }] } },
      'merge',
    );
    assert.ok(updated.metadata.generation >= 2);
    await waitFor(`every slice at generation ${updated.metadata.generation}`, async () => {
      const s = await groupSlices('allow-web');
      return s.length > 0 && s.every((x) => x.metadata?.annotations?.[POLICY_GENERATION_ANNOTATION] === String(updated.metadata.generation));
    });
  });

  void test('a peer over budget: not written, a Warning on the policy and a gauge', async () => {
    await cp.client.create(MNP(), policy('allow-all', { podSelector: { matchLabels: { app: 'db' } }, ingress: [{ from: [{ podSelector: {} }] }] }));
    await waitFor('AddressGroupOverBudget', async () => (await events('MultiNetworkPolicy', 'allow-all', 'AddressGroupOverBudget')).length > 0);
    const [ev] = await events('MultiNetworkPolicy', 'allow-all', 'AddressGroupOverBudget');
    assert.match(ev?.message ?? '', /selects \d+ addresses, more than the 4/);
    assert.equal(await metric('multus_proxy_controller_policy_address_groups_over_budget', 'allow-all'), 1);
    assert.equal((await groupSlices('allow-all')).length, 0);
  });

  void test('a selected pod without a sidecar gets a Warning and is counted; one with the sidecar does not', async () => {
    await waitFor('PolicyWithoutSidecar on db-1', async () => (await events('Pod', 'db-1', 'PolicyWithoutSidecar')).length > 0);
    const messages = (await events('Pod', 'db-1', 'PolicyWithoutSidecar')).map((e) => e.message ?? '');
    assert.ok(
      messages.some((m) => /MultiNetworkPolicy x\/allow-web selects it on x\/net1, but it runs no multus-proxy sidecar/.test(m)),
      messages.join('\n'),
    );
    assert.equal((await events('Pod', 'db-2', 'PolicyWithoutSidecar')).length, 0);
    assert.equal(await metric('multus_proxy_controller_policy_selected_pods_without_sidecar', 'allow-web'), 1);
  });

  void test('an invalid policy keeps no groups and gets a Warning naming the problem', async () => {
    await cp.client.create(MNP(), policy('broken', { podSelector: {}, ingress: [{ from: [{ podSelector: {}, ipBlock: { cidr: '10.0.0.0/8' } }] }] }));
    await waitFor('PolicyInvalid', async () => (await events('MultiNetworkPolicy', 'broken', 'PolicyInvalid')).length > 0);
    assert.match((await events('MultiNetworkPolicy', 'broken', 'PolicyInvalid'))[0]?.message ?? '', /ipBlock.*beside podSelector/);
    assert.equal((await groupSlices('broken')).length, 0);
  });

  void test('the policy deleted: its groups go; the Service slices were never touched', async () => {
    assert.ok((await groupSlices('allow-team')).length > 0);
    await cp.client.delete(MNP('allow-team'));
    await waitFor('allow-team groups gone', async () => (await groupSlices('allow-team')).length === 0);
    assert.ok((await groupSlices('allow-web')).length > 0, 'another policy keeps its groups');
    assert.equal(await serviceState(), serviceSlices, 'the Service slices are the same objects at the same resourceVersions');
    await waitFor('controller idle', () => ctl.idle());
  });
});
