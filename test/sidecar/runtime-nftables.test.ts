/**
 * The real sidecar program with DATAPLANE_BACKEND=nftables (cmd/sidecar/main.ts: the start-up probe,
 * then the nftables back end), in a client namespace with only NET_ADMIN and NET_RAW, against a
 * real kube-apiserver: ready after its first sync with its table written and no iptables rules of
 * ours, connections to the cluster IP reach both backends, and an endpoint that stops being ready
 * leaves the table and the traffic.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { useControlPlane } from '../harness/controlplane.js';
import { httpRequests, type Topology } from '../harness/netns.js';
import { waitFor } from '../harness/wait.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1EndpointSlice, V1Service } from '../../src/kube/types.js';
import { podObject, serviceObject, sliceObject } from './state-fixtures.js';
import { ownedLines, probe, rulesOf, spawnSidecar, startSidecarEnv, type SidecarEnv } from './runtime-harness.js';

const HEALTH_PORT = 19181;

void describe('sidecar program with the nftables back end: real apiserver, real netns, real nft', () => {
  let env: SidecarEnv;
  let topo: Topology;
  let clusterIP = '';
  const ip = (name: string): string => topo.pod(name).net1.ipv4;
  const slice = (b2Ready: boolean): V1EndpointSlice =>
    sliceObject(env.ns, 'web-v4', {
      service: 'web',
      network: `${env.ns}/net-a`,
      family: 4,
      ports: [{ name: 'http', port: 80 }],
      endpoints: [
        { ip: ip('b1'), ready: true, serving: true, terminating: false },
        { ip: ip('b2'), ready: b2Ready, serving: b2Ready, terminating: false },
      ],
    });
  const table = async (): Promise<string> => (await topo.run(env.client, ['nft', 'list', 'table', 'inet', 'multus_proxy'], { allowFail: true })).stdout;
  const names = async (n: number): Promise<string[]> => [...new Set((await httpRequests(topo, env.client, `http://${clusterIP}:80/`, n)).map((r) => r.name ?? `error:${r.error ?? '?'}`))].sort();

  before(async () => {
    env = await startSidecarEnv({ controlPlane: useControlPlane, nsPrefix: 'scn', backends: [{ name: 'b1' }, { name: 'b2' }] });
    topo = env.topo;
    const { cp, ns, client } = env;
    const status = [
      { name: 'kindnet', interface: 'eth0', ips: [client.eth0.ipv4], default: true },
      { name: `${ns}/net-a`, interface: 'net1', ips: [`${client.net1.ipv4}/24`] },
    ];
    await cp.client.create(apiPath('', 'v1', 'pods', ns), podObject(ns, 'client', { serviceNetwork: 'net-a', status }));
    const web = await cp.client.create<V1Service>(apiPath('', 'v1', 'services', ns), serviceObject(ns, 'web', { networks: 'net-a', ports: [{ name: 'http', port: 80 }] }));
    clusterIP = web.spec?.clusterIP ?? '';
    await cp.client.create(apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns), slice(true));
    await env.relay.attach(client);
  });
  after(() => env?.close());

  void test('ready after the first sync, with its table and no iptables rules of ours; the cluster IP reaches both backends; an unready endpoint leaves', async () => {
    env.sidecar = spawnSidecar(topo, env.client, { podName: 'client', podNamespace: env.ns, kubeconfig: env.cp.kubeconfigPath, healthPort: HEALTH_PORT, env: { DATAPLANE_BACKEND: 'nftables' } });
    const s = env.sidecar;
    await waitFor(
      '/readyz 200',
      async () => (await probe(topo, env.client, HEALTH_PORT, '/readyz')) === 200,
      30_000,
      () => s.stderr(),
    );
    const start = s.logs().find((l) => l['msg'] === 'multus-proxy sidecar starting');
    assert.equal(start?.['backend'], 'nftables', JSON.stringify(start));
    const t = await table();
    for (const b of ['b1', 'b2']) assert.ok(t.includes(` : ${ip(b)} . 80`), t);
    assert.match(t, /dnat ip to numgen random mod 4294967295 map @MPX-EPS-/);
    assert.ok(t.includes(`${clusterIP} . tcp . 80 : goto MPX-SVC-`), t);
    assert.deepEqual(ownedLines(await rulesOf(topo, env.client)), [], 'no iptables rules of ours');
    assert.deepEqual(await names(20), ['b1', 'b2']);

    const path = apiPath('discovery.k8s.io', 'v1', 'endpointslices', env.ns, 'web-v4');
    await env.cp.client.replace(path, { ...slice(false), metadata: (await env.cp.client.get<V1EndpointSlice>(path)).metadata });
    await waitFor(
      'b2 out of the table',
      async () => !(await table()).includes(` : ${ip('b2')} . 80`),
      15_000,
      () => s.stderr(),
    );
    assert.deepEqual(await names(10), ['b1']);
  });
});
