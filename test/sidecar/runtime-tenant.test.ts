/**
 * A tenant namespace against another namespace's clients, with the real sidecar program in a real
 * network namespace (nftables), against a real kube-apiserver, and no webhook (as while it is down,
 * or for objects that bypass it). The tenant's namespace sorts first (`aaa-…`), the cap is 3
 * targets, and the tenant writes on the client's network:
 * - three Services on a network not shared with it, kept alive by a finalizer after their deletion
 *   (no slice of the controller's, as it writes none there);
 * - one Service of 300 ports (over the per-object budget of 256), with a slice;
 * - three one-port Services with slices (as if the network were shared with it).
 * The client's own Service stays served and answers every request; the tenant keeps its fair share
 * (2 of its 3 shared Services) and nothing else; Events name the tenant's namespace and Service.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { uniqueName, useControlPlane } from '../harness/controlplane.js';
import { httpRequests, type Topology } from '../harness/netns.js';
import { waitFor } from '../harness/wait.js';
import { apiPath } from '../../src/kube/paths.js';
import type { CoreV1Event, V1Service } from '../../src/kube/types.js';
import { REASON_SERVICE_CAP_REACHED, REASON_SERVICE_OVER_BUDGET } from '../../src/sidecar-contract.js';
import { serviceObject, sliceObject } from './state-fixtures.js';
import { createClientPod, metricsText, probe, spawnSidecar, startSidecarEnv, type SidecarEnv } from './runtime-harness.js';

const HEALTH_PORT = 19183;
const FINALIZER = 'example.com/keep';

void describe("sidecar: a tenant namespace cannot push another namespace's Service out", () => {
  let env: SidecarEnv;
  let topo: Topology;
  let tenant = '';
  const ips = new Map<string, string>();
  const held: string[] = [];

  async function service(ns: string, name: string, ports: number, opts: { finalizer?: boolean; slice?: boolean } = {}): Promise<void> {
    const obj = serviceObject(ns, name, { networks: `${env.ns}/net-a`, ports: Array.from({ length: ports }, (_, i) => ({ name: `p${i}`, port: 80 + i })) });
    if (opts.finalizer === true) obj.metadata = { ...obj.metadata, finalizers: [FINALIZER] };
    const made = await env.cp.client.create<V1Service>(apiPath('', 'v1', 'services', ns), obj);
    ips.set(`${ns}/${name}`, made.spec?.clusterIP ?? '');
    if (opts.slice === true)
      await env.cp.client.create(
        apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns),
        sliceObject(ns, `${name}-v4`, { service: name, network: `${env.ns}/net-a`, family: 4, ports: [{ name: 'p0', port: 80 }], endpoints: [{ ip: topo.pod('b1').net1.ipv4, ready: true }] }),
      );
    if (opts.finalizer === true) {
      held.push(`${ns}/${name}`);
      await env.cp.client.delete(apiPath('', 'v1', 'services', ns, name));
    }
  }

  before(async () => {
    env = await startSidecarEnv({ controlPlane: useControlPlane, nsPrefix: 'tnt', backends: [{ name: 'b1' }] });
    topo = env.topo;
    const { cp, ns, client } = env;
    tenant = uniqueName('aaa');
    await cp.createNamespace(tenant);
    await createClientPod(env);
    await service(ns, 'blog', 1, { slice: true });
    for (const n of ['u1', 'u2', 'u3']) await service(tenant, n, 1, { finalizer: true });
    await service(tenant, 'big', 300, { slice: true });
    for (const n of ['s1', 's2', 's3']) await service(tenant, n, 1, { slice: true });
    await env.relay.attach(client);
  });

  after(async () => {
    for (const key of held) {
      const [ns = '', name = ''] = key.split('/');
      const path = apiPath('', 'v1', 'services', ns, name);
      const svc = await env.cp.client.get<V1Service>(path).catch(() => undefined);
      if (svc !== undefined) await env.cp.client.replace(path, { ...svc, metadata: { ...svc.metadata, finalizers: [] } });
    }
    if (env?.cp.shared === true) await env.cp.client.delete(apiPath('', 'v1', 'namespaces', undefined, tenant)).catch(() => undefined);
    await env?.close();
  });

  void test("unshared being-deleted, over-budget and over-share Services of the tenant are left out; the client's own Service answers every request", async () => {
    env.sidecar = spawnSidecar(topo, env.client, {
      podName: 'client',
      podNamespace: env.ns,
      kubeconfig: env.cp.kubeconfigPath,
      healthPort: HEALTH_PORT,
      env: { DATAPLANE_BACKEND: 'nftables', MAX_SERVICES_PER_NETWORK: '3' },
    });
    const s = env.sidecar;
    await waitFor(
      '/readyz 200',
      async () => (await probe(topo, env.client, HEALTH_PORT, '/readyz')) === 200,
      30_000,
      () => s.stderr(),
    );
    const table = (await topo.run(env.client, ['nft', 'list', 'table', 'inet', 'multus_proxy'])).stdout;
    const served = (key: string): boolean => table.includes(`${ips.get(key) ?? '?'} . tcp . 80 `);
    assert.ok(served(`${env.ns}/blog`), table);
    assert.deepEqual(
      ['u1', 'u2', 'u3', 'big', 's1', 's2', 's3'].filter((n) => served(`${tenant}/${n}`)),
      ['s1', 's2'],
      "the tenant keeps its share (3 - 1 for the client's own namespace) and nothing unshared or over budget",
    );
    const replies = await httpRequests(topo, env.client, `http://${ips.get(`${env.ns}/blog`) ?? ''}:80/`, 20);
    assert.equal(replies.filter((r) => r.name === 'b1').length, 20, JSON.stringify(replies));

    const metrics = await metricsText(topo, env.client, HEALTH_PORT);
    assert.match(metrics, new RegExp(`multus_proxy_sidecar_services_dropped\\{network="${env.ns}/net-a"\\} 1`));
    assert.match(metrics, /multus_proxy_sidecar_services_refused\{budget="ports"\} 1/);
    const events = async (): Promise<CoreV1Event[]> => (await env.cp.client.get<{ items: CoreV1Event[] }>(apiPath('', 'v1', 'events', env.ns))).items;
    let all: CoreV1Event[] = [];
    await waitFor(
      'the Events',
      async () => (all = await events()).filter((e) => [REASON_SERVICE_CAP_REACHED, REASON_SERVICE_OVER_BUDGET].includes(e.reason ?? '')).length === 2,
      10_000,
      () => JSON.stringify(all.map((e) => [e.reason, e.message])),
    );
    const cap = all.find((e) => e.reason === REASON_SERVICE_CAP_REACHED);
    assert.match(cap?.message ?? '', new RegExp(`namespace ${tenant} asks for 3, over its fair share of 2, so 1 of its Services are not served: ${tenant}/s3; other namespaces keep theirs`));
    const budget = all.find((e) => e.reason === REASON_SERVICE_OVER_BUDGET);
    assert.match(budget?.message ?? '', new RegExp(`Service ${tenant}/big has 300 ports \\(spec\\.ports\\); the sidecar serves at most 256`));
  });
});
