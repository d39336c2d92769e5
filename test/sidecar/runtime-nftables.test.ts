/**
 * The real sidecar program with DATAPLANE_BACKEND=nftables (cmd/sidecar/main.ts: the start-up probe,
 * then the nftables back end), in a client namespace with only NET_ADMIN and NET_RAW, against a
 * real kube-apiserver: ready after its first sync with its table written and no iptables rules of
 * ours, connections to the cluster IP reach both backends, and an endpoint that stops being ready
 * leaves the table and the traffic. Its source guard, deleted from inside the pod, is back at the
 * next drift check and drops a spoofed frame again; an address group with a bad endpoint-macs
 * annotation is an Event on the pod and a metric until it is fixed.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { useControlPlane } from '../harness/controlplane.js';
import { httpRequests, type Topology } from '../harness/netns.js';
import { waitFor } from '../harness/wait.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1EndpointSlice, V1Service } from '../../src/kube/types.js';
import { podObject, serviceObject, sliceObject } from './state-fixtures.js';
import { metricsText, ownedLines, probe, rulesOf, spawnSidecar, startSidecarEnv, type SidecarEnv } from './runtime-harness.js';
import { RAW_UDP_PY } from '../harness/raw-frames.js';
import { ADDRESS_GROUP_LABEL, ADDRESS_GROUP_MANAGED_BY, ENDPOINT_MACS_ANNOTATION, PEER_QUERY_ANNOTATION } from '../../src/policy/address-group.js';
import { MANAGED_BY_LABEL } from '../../src/keys.js';
import { REASON_INVALID_GROUP_ANNOTATION } from '../../src/sidecar-contract.js';
import type { CoreV1Event } from '@kubernetes/client-node';

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
    env.sidecar = spawnSidecar(topo, env.client, {
      podName: 'client',
      podNamespace: env.ns,
      kubeconfig: env.cp.kubeconfigPath,
      healthPort: HEALTH_PORT,
      env: { DATAPLANE_BACKEND: 'nftables', DRIFT_CHECK_INTERVAL_MS: '1000' },
    });
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

  void test('the source guard, deleted from inside the pod, is written again at the next drift check, counted and logged; a spoofed frame is dropped again', async () => {
    const s = env.sidecar;
    assert.ok(s !== undefined && !s.exited(), 'the sidecar of the first test runs');
    const guard = async (): Promise<string> => (await topo.run(env.client, ['nft', 'list', 'table', 'netdev', 'multus_proxy_guard'], { allowFail: true })).stdout;
    const b1 = topo.pod('b1');
    const macOf = async (p: typeof b1): Promise<string> => (await topo.run(p, ['cat', '/sys/class/net/net1/address'])).stdout.trim();
    const spoof = [RAW_UDP_PY, await macOf(b1), ip('b1'), await macOf(topo.pod('b2')), ip('b2'), '9', '10'];
    assert.match(await guard(), /chain MPX-GUARD-/, 'written at the first sync');
    assert.equal((await topo.run(env.client, ['python3', '-c', ...spoof])).stdout.trim(), '10', "frames as b1 refused at the client's egress");
    // What a container with NET_ADMIN in the pod can do.
    await topo.run(env.client, ['nft', 'delete', 'table', 'netdev', 'multus_proxy_guard']);
    assert.doesNotMatch(await guard(), /chain/);
    await waitFor(
      'the guard table back',
      async () => /chain MPX-GUARD-/.test(await guard()),
      15_000,
      () => s.stderr(),
    );
    const line = s.logs().find((l) => l['msg'] === 'source guard was changed from inside the pod; written again');
    assert.match(String(line?.['drift']), /table netdev multus_proxy_guard missing/, JSON.stringify(line));
    assert.match(await metricsText(topo, env.client, HEALTH_PORT), /^multus_proxy_sidecar_source_guard_restores_total\{result="ok"\} 1$/m);
    assert.equal((await topo.run(env.client, ['python3', '-c', ...spoof])).stdout.trim(), '10', 'frames as b1 refused again');
  });

  void test('an address group whose endpoint-macs is bad: an Event on the pod naming the slice, key, value and fix, and a metric, until it is fixed', async () => {
    const s = env.sidecar;
    assert.ok(s !== undefined && !s.exited());
    const path = apiPath('discovery.k8s.io', 'v1', 'endpointslices', env.ns);
    const query = '{"policy":"x"}';
    const bad = '{"192.0.2.7":"02:00:00:00:00:07","192.0.2.8":"02:00:00:00:00:08"}';
    const group = (macs: string): V1EndpointSlice => ({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: {
        name: 'group-a',
        namespace: env.ns,
        labels: { [MANAGED_BY_LABEL]: ADDRESS_GROUP_MANAGED_BY, [ADDRESS_GROUP_LABEL]: 'k' },
        annotations: { [PEER_QUERY_ANNOTATION]: query, [ENDPOINT_MACS_ANNOTATION]: macs },
      },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['192.0.2.7'] }],
      ports: [],
    });
    await env.cp.client.create(path, group(bad));
    const gauge = async (): Promise<string | undefined> => /^multus_proxy_sidecar_invalid_address_group_annotations (\d+)$/m.exec(await metricsText(topo, env.client, HEALTH_PORT))?.[1];
    await waitFor(
      'the metric says 1',
      async () => (await gauge()) === '1',
      15_000,
      () => s.stderr(),
    );
    const events = async (): Promise<CoreV1Event[]> => (await env.cp.client.list<CoreV1Event>(apiPath('', 'v1', 'events', env.ns))).items.filter((e) => e.reason === REASON_INVALID_GROUP_ANNOTATION);
    await waitFor(
      'the Event',
      async () => (await events()).length === 1,
      15_000,
      () => s.stderr(),
    );
    const ev = (await events())[0];
    assert.equal(ev?.involvedObject.name, 'client');
    assert.equal(ev?.type, 'Warning');
    assert.match(
      ev?.message ?? '',
      new RegExp(
        `^EndpointSlice ${env.ns}/group-a: annotation multus-proxy/endpoint-macs .*192\\.0\\.2\\.8.*: names "192\\.0\\.2\\.8", which is not an endpoint address of the slice \\(left out\\); the controller writes it as JSON`,
      ),
    );
    // The same bad value in an update the sidecar does see (one more endpoint): no second Event.
    const current = await env.cp.client.get<V1EndpointSlice>(`${path}/group-a`);
    await env.cp.client.replace(`${path}/group-a`, {
      ...group(bad),
      endpoints: [{ addresses: ['192.0.2.7'] }, { addresses: ['192.0.2.9'] }],
      metadata: { ...group(bad).metadata, resourceVersion: current.metadata?.resourceVersion },
    });
    const fixed = await env.cp.client.get<V1EndpointSlice>(`${path}/group-a`);
    await env.cp.client.replace(`${path}/group-a`, {
      ...group('{"192.0.2.7":"02:00:00:00:00:07"}'),
      metadata: { ...group('{"192.0.2.7":"02:00:00:00:00:07"}').metadata, resourceVersion: fixed.metadata?.resourceVersion },
    });
    await waitFor(
      'the metric back at 0',
      async () => (await gauge()) === '0',
      15_000,
      () => s.stderr(),
    );
    assert.equal((await events()).length, 1, 'one Event for one bad value');
  });
});
