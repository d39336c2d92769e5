/**
 * NetService objects (net-service-controller's API, deploy/components/netservice) served by the
 * controller, on a private real kube-apiserver with the component's CRD, and the controller
 * running under the shipped RBAC (base ClusterRole + the component's). Private because bare
 * netAttachDef names resolve cluster-wide: NADs of other tests must not make them ambiguous.
 *
 * The net-service-controller sample as written: a Deployment's pods in `default` attach
 * `networks/core` with interface name `core`; NetService `corens` says `netAttachDef: core`.
 */
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAll } from 'js-yaml';
import { createKubeClient, getIfExists } from '../../src/kube/client.js';
import { apiPath } from '../../src/kube/paths.js';
import type { CoreV1Event, V1Pod, V1Service } from '../../src/kube/types.js';
import { createLogger } from '../../src/log.js';
import { parseOptions } from '../../cmd/controller/options.js';
import { startController, type RunningController } from '../../cmd/controller/run.js';
import type { NetService } from '../../cmd/controller/netservice.js';
import { CLASH_RECHECK_MS } from '../../cmd/controller/netservice-controller.js';
import { NETWORKS_ANNOTATION, NETWORK_STATUS_ANNOTATION, SERVICE_NAMESPACES_ANNOTATION, SERVICE_NETWORK_ANNOTATION, SERVICE_SELECTOR_ANNOTATION } from '../../src/keys.js';
import { startControlPlane, type ControlPlane } from '../harness/controlplane.js';
import { waitFor } from '../harness/wait.js';
import { networkStatus } from '../unit/controller/fixtures.js';
import { ourSlices, podPath, setPodStatus, sliceAddresses, svcPath } from './helpers.js';

const ROOT = join(import.meta.dirname, '..', '..');
const NS_API = apiPath('svcctl.metaswitch.com', 'v1alpha1', 'netservices', 'default');
const nadPath = (ns: string): string => apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', ns);
type Doc = { kind?: string; metadata?: { name?: string }; rules?: unknown };
const docs = (file: string): Doc[] => loadAll(readFileSync(join(ROOT, file), 'utf8')) as Doc[];

let cp: ControlPlane;
let ctl: RunningController;

async function nad(ns: string, name: string, annotations?: Record<string, string>): Promise<void> {
  await cp.createNamespace(ns);
  await cp.client.create(nadPath(ns), {
    apiVersion: 'k8s.cni.cncf.io/v1',
    kind: 'NetworkAttachmentDefinition',
    metadata: { name, namespace: ns, ...(annotations ? { annotations } : {}) },
    spec: { config: '{"cniVersion":"0.3.1","type":"macvlan"}' },
  });
}

function netService(name: string, netAttachDef: string, selector?: Record<string, string>): NetService {
  return { apiVersion: 'svcctl.metaswitch.com/v1alpha1', kind: 'NetService', metadata: { name, namespace: 'default' }, spec: { netAttachDef, ...(selector ? { selector } : {}) } };
}

async function events(name: string): Promise<CoreV1Event[]> {
  return (await cp.client.list<CoreV1Event>(apiPath('', 'v1', 'events', 'default'), { fieldSelector: `involvedObject.kind=NetService,involvedObject.name=${name}` })).items;
}

async function ready(name: string): Promise<{ status?: string; reason?: string; message?: string } | undefined> {
  const ns = await getIfExists<NetService>(cp.client, `${NS_API}/${name}`);
  return ns?.status?.conditions?.find((c) => c.type === 'Ready');
}

before(async () => {
  cp = await startControlPlane();
  const crd = docs('deploy/components/netservice/crd.yaml')[0];
  await cp.client.create(apiPath('apiextensions.k8s.io', 'v1', 'customresourcedefinitions'), crd);
  await waitFor('the NetService API is served', async () => (await getIfExists(cp.client, '/apis/svcctl.metaswitch.com/v1alpha1')) !== undefined, 30_000);

  // The controller's identity under the shipped rules.
  const rules = [docs('deploy/base/controller-rbac.yaml'), docs('deploy/components/netservice/rbac.yaml')].map((d) => d.find((x) => x.kind === 'ClusterRole'));
  await cp.createNamespace('multus-proxy-system');
  for (const [i, role] of rules.entries()) {
    assert.ok(role?.rules, 'a ClusterRole with rules');
    const name = `test-controller-${i}`;
    await cp.client.create(apiPath('rbac.authorization.k8s.io', 'v1', 'clusterroles'), { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name }, rules: role.rules });
    await cp.client.create(apiPath('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings'), {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name },
      subjects: [{ kind: 'ServiceAccount', name: 'multus-proxy-controller', namespace: 'multus-proxy-system' }],
    });
  }
  const token = await cp.tokenFor('multus-proxy-system', 'multus-proxy-controller');
  const client = createKubeClient({ server: cp.server, ca: Buffer.from(cp.caPem), token });

  await cp.createNamespace('default'); // its ServiceAccount: no controller-manager here
  // Another namespace's NAD: its owner shares it with the NetService's namespace.
  await nad('networks', 'core', { [SERVICE_NAMESPACES_ANNOTATION]: 'default' });
  // The sample's Deployment, as its pods look once Multus attached them.
  for (const [i, ip] of ['10.10.0.11', '10.10.0.12'].entries()) {
    const name = `utils-${i}`;
    const body: V1Pod = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: {
        name,
        labels: { app: 'utils' },
        annotations: {
          [NETWORKS_ANNOTATION]: '[{"name": "core", "namespace": "networks", "interface": "core"}]',
          [NETWORK_STATUS_ANNOTATION]: networkStatus([{ name: 'networks/core', iface: 'core', ips: [ip] }]),
        },
      },
      spec: { containers: [{ name: 'utils', image: 'utils' }] },
    };
    await cp.client.create(podPath('default'), body);
    await setPodStatus(cp.client, 'default', name, { ready: true });
  }

  const opts = parseOptions(
    ['--health-port', '0', '--health-host', '127.0.0.1', '--leader-elect', 'false', '--resync', '0', '--manage-sidecar-rbac', 'false', '--watch-nodes', 'false', '--netservices', 'true'],
    {},
  );
  if (!opts.ok || opts.value === 'help') throw new Error('bad options');
  ctl = await startController(client, opts.value, createLogger('controller', process.env['LOG_LEVEL'] ?? 'warn'));
  await waitFor('controller ready', () => ctl.isReady());
});

after(async () => {
  await ctl?.stop();
  await cp?.stop();
});

void describe('NetService served by the controller', () => {
  void test('the net-service-controller sample: a headless Service owned by the NetService, slices with the core addresses, Ready', async () => {
    const created = await cp.client.create<NetService>(NS_API, netService('corens', 'core', { app: 'utils' }));
    let svc: V1Service | undefined;
    await waitFor('Service default/corens', async () => (svc = await getIfExists<V1Service>(cp.client, svcPath('default', 'corens'))) !== undefined);
    assert.equal(svc?.spec?.clusterIP, 'None');
    assert.deepEqual(svc?.spec?.selector ?? {}, {}, 'no spec.selector: the built-in slice controller must not publish primary IPs');
    assert.equal(svc?.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION], 'networks/core', 'bare "core" resolved to the one NAD of that name');
    assert.equal(svc?.metadata?.annotations?.[SERVICE_SELECTOR_ANNOTATION], 'app=utils');
    assert.equal(svc?.metadata?.labels?.['service.kubernetes.io/service-proxy-name'], 'multus-proxy');
    assert.deepEqual(
      svc?.metadata?.ownerReferences?.map((o) => [o.kind, o.name, o.uid, o.controller]),
      [['NetService', 'corens', created.metadata?.uid, true]],
    );
    await waitFor('slices with both core addresses', async () => sliceAddresses(await ourSlices(cp.client, 'default', 'corens')).join() === '10.10.0.11,10.10.0.12');
    await waitFor('Ready=True', async () => (await ready('corens'))?.status === 'True');
  });

  void test('our Service edited or deleted by someone: repaired', async () => {
    await cp.client.patch(svcPath('default', 'corens'), { metadata: { annotations: { [SERVICE_NETWORK_ANNOTATION]: 'networks/other' } } }, 'merge');
    await waitFor('annotation restored', async () => (await getIfExists<V1Service>(cp.client, svcPath('default', 'corens')))?.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] === 'networks/core');
    await cp.client.delete(svcPath('default', 'corens'));
    await waitFor('Service recreated', async () => (await getIfExists<V1Service>(cp.client, svcPath('default', 'corens')))?.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] === 'networks/core');
  });

  void test('a Service of that name that is not ours: refused with an Event and a condition, nothing overwritten', async () => {
    await cp.client.create(svcPath('default'), { apiVersion: 'v1', kind: 'Service', metadata: { name: 'taken', labels: { mine: 'yes' } }, spec: { selector: { app: 'x' }, ports: [{ port: 80 }] } });
    await cp.client.create(NS_API, netService('taken', 'core', { app: 'utils' }));
    await waitFor('ServiceNameConflict Event', async () => (await events('taken')).some((e) => e.reason === 'ServiceNameConflict'));
    const ev = (await events('taken')).find((e) => e.reason === 'ServiceNameConflict');
    assert.equal(ev?.type, 'Warning');
    assert.match(ev?.message ?? '', /^NetService default\/taken: a Service default\/taken already exists and is not owned by this NetService.*rename the NetService/);
    await waitFor('Ready=False ServiceNameConflict', async () => (await ready('taken'))?.reason === 'ServiceNameConflict');
    const svc = await cp.client.get<V1Service>(svcPath('default', 'taken'));
    assert.deepEqual(svc.metadata?.labels, { mine: 'yes' });
    assert.equal(svc.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION], undefined);
    assert.equal(svc.metadata?.ownerReferences, undefined);
    // Once the user's Service is gone, the name is taken over within the recheck interval.
    await cp.client.delete(svcPath('default', 'taken'));
    await waitFor(
      'NetService Service after the clash',
      async () => (await getIfExists<V1Service>(cp.client, svcPath('default', 'taken')))?.metadata?.ownerReferences?.[0]?.kind === 'NetService',
      CLASH_RECHECK_MS + 10_000,
    );
    await waitFor('Ready=True after the clash', async () => (await ready('taken'))?.status === 'True');
  });

  void test('an unresolvable bare name: Warning Event listing the candidates and a condition; a NAD in the own namespace then wins', async () => {
    await nad('site-a', 'dup');
    await nad('site-b', 'dup');
    await cp.client.create(NS_API, netService('amb', 'dup', { app: 'utils' }));
    await waitFor('NetAttachDefUnresolved Event', async () => (await events('amb')).some((e) => e.reason === 'NetAttachDefUnresolved'));
    const ev = (await events('amb')).find((e) => e.reason === 'NetAttachDefUnresolved');
    assert.equal(
      ev?.message,
      'NetService default/amb: spec.netAttachDef "dup": none in namespace default and 2 in other namespaces (site-a/dup, site-b/dup), so the bare name is ambiguous; write one of "site-a/dup", "site-b/dup" in spec.netAttachDef',
    );
    await waitFor('Ready=False NetAttachDefUnresolved', async () => (await ready('amb'))?.reason === 'NetAttachDefUnresolved');
    assert.equal(await getIfExists(cp.client, svcPath('default', 'amb')), undefined, 'no Service while unresolved');

    await cp.client.create(NS_API, netService('lost', 'nowhere'));
    await waitFor('Event for a NAD that exists nowhere', async () =>
      (await events('lost')).some((e) =>
        /no NetworkAttachmentDefinition named "nowhere" exists in namespace default or any other namespace; create the NetworkAttachmentDefinition/.test(e.message ?? ''),
      ),
    );

    await nad('default', 'dup');
    await waitFor('resolved to default/dup', async () => (await getIfExists<V1Service>(cp.client, svcPath('default', 'amb')))?.metadata?.annotations?.[SERVICE_NETWORK_ANNOTATION] === 'default/dup');
    await waitFor('Ready=True', async () => (await ready('amb'))?.status === 'True');
  });

  void test('a malformed spec: the CRD schema refuses wrong types; a bad name gets an InvalidSpec Event naming field, value and fix', async () => {
    await assert.rejects(cp.client.create(NS_API, { ...netService('typed', 'x'), spec: { netAttachDef: 5 } }), /spec\.netAttachDef: Invalid value: "integer"/);
    await assert.rejects(cp.client.create(NS_API, { ...netService('nospec', 'x'), spec: {} }), /spec\.netAttachDef: Required value/);
    await cp.client.create(NS_API, netService('bad', 'Core_1'));
    await waitFor('InvalidSpec Event', async () => (await events('bad')).some((e) => e.reason === 'InvalidSpec'));
    const ev = (await events('bad')).find((e) => e.reason === 'InvalidSpec');
    assert.match(ev?.message ?? '', /^NetService default\/bad: spec\.netAttachDef "Core_1": .*"Core_1".*; a NetworkAttachmentDefinition name is /);
  });

  void test('deleting the NetService deletes its Service and slices', async () => {
    await cp.client.delete(`${NS_API}/corens`);
    await waitFor('Service gone', async () => (await getIfExists(cp.client, svcPath('default', 'corens'))) === undefined);
    await waitFor('slices gone', async () => (await ourSlices(cp.client, 'default', 'corens')).length === 0);
    // Another NetService's Service is left alone.
    assert.ok(await getIfExists(cp.client, svcPath('default', 'taken')));
  });
});
