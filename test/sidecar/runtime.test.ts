/**
 * The real sidecar program (cmd/sidecar/main.ts) in a client "pod" network namespace, with only
 * NET_ADMIN and NET_RAW, against a real kube-apiserver, with the real dataplane and real traffic:
 * - /readyz answers 503 until the first complete sync, then 200, with the rules already in place;
 * - a dual-stack Service's slices become DNAT rules for both cluster IPs, and connections to the
 *   cluster IPs reach the backends from the client's net1 address;
 * - slice updates and deletes change the rules (unready endpoint out, all gone -> refused);
 * - the pod's service-network annotation changes which Services are served (the slice informer
 *   follows the new networks), a malformed value is logged and changes nothing;
 * - SIGTERM exits 0 at once and leaves every rule and route in place; a client looping on a
 *   cluster IP through three graceful restarts sees no failure, and a restarted sidecar adopts
 *   what it finds (a Service deleted meanwhile and a stale chain of ours removed, foreign rules kept);
 * - `--cleanup` removes every chain, jump and route of ours and nothing else.
 * The EndpointSlices are written by the test (the controller is tested on its own).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { useControlPlane, type ControlPlane } from '../harness/controlplane.js';
import { httpRequests, type Pod, type Topology } from '../harness/netns.js';
import { waitFor } from '../harness/wait.js';
import { apiPath } from '../../src/kube/paths.js';
import type { CoreV1Event, V1EndpointSlice, V1Pod, V1Service } from '../../src/kube/types.js';
import { REASON_INVALID_ANNOTATION } from '../../cmd/sidecar/problems.js';
import { SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { podObject, serviceObject, sliceObject, type StatusEntry } from './state-fixtures.js';
import { endpointsOf, metricsText, ownedLines, probe, rulesOf, spawnSidecar, startHttpLoop, startSidecarEnv, waitForLog, type SidecarEnv } from './runtime-harness.js';

const HEALTH_PORT = 19180;
/** The restarted sidecars check for drift every second (every 10th check deep). */
const DRIFT_CHECK_MS = 1000;
/** Capability bits (linux/capability.h). */
const CAP_NET_ADMIN = 1 << 12;
const CAP_NET_RAW = 1 << 13;
const FOREIGN_NAT = ['-t', 'nat', '-A', 'OUTPUT', '-d', '198.51.100.7/32', '-p', 'tcp', '-m', 'comment', '--comment', 'foreign-owner', '-j', 'RETURN'];
const FOREIGN_FILTER = ['-A', 'OUTPUT', '-d', '198.51.100.7/32', '-m', 'comment', '--comment', 'foreign-owner', '-j', 'ACCEPT'];

void describe('sidecar runtime: real apiserver, real netns, real iptables', () => {
  let env: SidecarEnv;
  let cp: ControlPlane;
  let topo: Topology;
  let client: Pod;
  const pod = (name: string): Pod => topo.pod(name);
  let ns = '';
  let web: V1Service;
  let other: V1Service;
  let webV4 = '';
  let webV6 = '';
  let otherIP = '';

  const slicesPath = (): string => apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns);
  const setServiceNetwork = (value: string): Promise<V1Pod> =>
    cp.client.patch<V1Pod>(apiPath('', 'v1', 'pods', ns, 'client'), { metadata: { annotations: { [SERVICE_NETWORK_ANNOTATION]: value } } }, 'merge');

  const webSlice = (family: 4 | 6, b2Ready = true): V1EndpointSlice =>
    sliceObject(ns, `web-v${family}`, {
      service: 'web',
      network: `${ns}/net-a`,
      family,
      ports: [{ name: 'http', port: 80 }],
      endpoints: [
        { ip: family === 4 ? pod('b1').net1.ipv4 : pod('b1').net1.ipv6, ready: true, serving: true, terminating: false },
        { ip: family === 4 ? pod('b2').net1.ipv4 : pod('b2').net1.ipv6, ready: b2Ready, serving: b2Ready, terminating: false },
      ],
    });

  /** Waits until the cluster IP's DNAT destinations in the client namespace are `want` (undefined: not served). */
  async function expectEndpoints(what: string, ip: string, want: string[] | undefined): Promise<void> {
    let last: string[] | undefined;
    await waitFor(
      what,
      async () => {
        last = endpointsOf(await rulesOf(topo, client, ip.includes(':') ? 6 : 4), ip);
        return JSON.stringify(last) === JSON.stringify(want);
      },
      15_000,
      () => `cluster IP ${ip}: have ${JSON.stringify(last)}, want ${JSON.stringify(want)}`,
    );
  }

  before(async () => {
    env = await startSidecarEnv({
      controlPlane: useControlPlane,
      nsPrefix: 'sc',
      clientNet2: true,
      backends: [{ name: 'b1' }, { name: 'b2' }, { name: 'b3', net2: true, listen: (p) => [p.net2!.ipv4] }],
    });
    ({ cp, topo, client, ns } = env);
    const status: StatusEntry[] = [
      { name: 'kindnet', interface: 'eth0', ips: [client.eth0.ipv4], default: true },
      { name: `${ns}/net-a`, interface: 'net1', ips: [`${client.net1.ipv4}/24`, `${client.net1.ipv6}/64`] },
      { name: `${ns}/net-b`, interface: 'net2', ips: [`${client.net2!.ipv4}/24`] },
    ];
    await cp.client.create(apiPath('', 'v1', 'pods', ns), podObject(ns, 'client', { serviceNetwork: 'net-a', status }));
    web = await cp.client.create<V1Service>(apiPath('', 'v1', 'services', ns), serviceObject(ns, 'web', { networks: 'net-a', ports: [{ name: 'http', port: 80 }], ipFamilies: ['IPv4', 'IPv6'] }));
    other = await cp.client.create<V1Service>(apiPath('', 'v1', 'services', ns), serviceObject(ns, 'other', { networks: 'net-b', ports: [{ port: 80 }] }));
    [webV4 = '', webV6 = ''] = web.spec?.clusterIPs ?? [];
    otherIP = other.spec?.clusterIP ?? '';
    assert.ok(webV4.includes('.') && webV6.includes(':') && otherIP.includes('.'), `cluster IPs allocated: ${JSON.stringify([webV4, webV6, otherIP])}`);
    await cp.client.create(slicesPath(), webSlice(4));
    await cp.client.create(slicesPath(), webSlice(6));
    await cp.client.create(slicesPath(), sliceObject(ns, 'other-v4', { service: 'other', network: `${ns}/net-b`, family: 4, ports: [{ port: 80 }], endpoints: [{ ip: pod('b3').net2!.ipv4 }] }));
    // Rules of another owner, which the sidecar must leave alone.
    await topo.run(client, ['iptables', ...FOREIGN_NAT]);
    await topo.run(client, ['iptables', ...FOREIGN_FILTER]);
  });

  after(() => env?.close());

  void test('/readyz is 503 until the first complete sync, then 200 with the rules in place', async () => {
    // Start it before it can reach the apiserver, so the not-ready phase is long enough to see.
    env.sidecar = spawnSidecar(topo, client, { podName: 'client', podNamespace: ns, kubeconfig: cp.kubeconfigPath, healthPort: HEALTH_PORT });
    const s = env.sidecar;
    await waitFor(
      'the health server to answer',
      async () => (await probe(topo, client, HEALTH_PORT, '/readyz')) !== 0,
      20_000,
      () => s.stderr(),
    );
    assert.equal(await probe(topo, client, HEALTH_PORT, '/readyz'), 503);
    assert.equal(await probe(topo, client, HEALTH_PORT, '/healthz'), 200);
    // ip netns exec, setpriv and env each exec the next, so the child's pid is the sidecar's node.
    const caps = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync(`/proc/${s.process.pid}/status`, 'utf8'))?.[1];
    assert.equal(caps, (CAP_NET_ADMIN | CAP_NET_RAW).toString(16).padStart(16, '0'), 'the sidecar runs with NET_ADMIN and NET_RAW only');
    assert.deepEqual(ownedLines(await rulesOf(topo, client)), [], 'no rules before the first sync');
    await env.relay.attach(client);
    await waitFor(
      '/readyz 200',
      async () => (await probe(topo, client, HEALTH_PORT, '/readyz')) === 200,
      30_000,
      () => s.stderr(),
    );
    // Ready implies synced: the rules are there at the moment readiness flips.
    assert.deepEqual(endpointsOf(await rulesOf(topo, client, 4), webV4), [`${pod('b1').net1.ipv4}:80`, `${pod('b2').net1.ipv4}:80`]);
    assert.deepEqual(endpointsOf(await rulesOf(topo, client, 6), webV6), [`[${pod('b1').net1.ipv6}]:80`, `[${pod('b2').net1.ipv6}]:80`]);
    assert.equal(endpointsOf(await rulesOf(topo, client, 4), otherIP), undefined, 'a Service on a network the pod does not serve gets no rules');
  });

  void test('connections to both cluster IPs reach every backend, from the client net1 address', async () => {
    for (const [ip, url, source] of [
      [webV4, `http://${webV4}:80/`, client.net1.ipv4],
      [webV6, `http://[${webV6}]:80/`, client.net1.ipv6],
    ] as const) {
      const replies = await httpRequests(topo, client, url, 40);
      const names = new Set(replies.map((r) => r.name ?? r.error));
      assert.deepEqual([...names].sort(), ['b1', 'b2'], `${ip}: ${JSON.stringify(replies.slice(0, 5))}`);
      assert.ok(
        replies.every((r) => r.peer === source || r.peer === `::ffff:${source}`),
        `backends saw the client's secondary address ${source}: ${JSON.stringify(replies.slice(0, 3))}`,
      );
    }
  });

  void test('slice updates and deletes in the apiserver change the rules and the traffic', async () => {
    await cp.client.replace(`${slicesPath()}/web-v4`, { ...webSlice(4, false), metadata: { ...(await cp.client.get<V1EndpointSlice>(`${slicesPath()}/web-v4`)).metadata } });
    await expectEndpoints('the unready endpoint to leave the rules', webV4, [`${pod('b1').net1.ipv4}:80`]);
    const replies = await httpRequests(topo, client, `http://${webV4}:80/`, 20);
    assert.deepEqual([...new Set(replies.map((r) => r.name ?? r.error))], ['b1']);

    await cp.client.delete(`${slicesPath()}/web-v4`);
    await expectEndpoints('no endpoints once the slice is deleted', webV4, []);
    const refused = await httpRequests(topo, client, `http://${webV4}:80/`, 3, 3000);
    assert.ok(
      refused.every((r) => r.error === 'ECONNREFUSED' && r.ms < 1000),
      `fails fast with connection refused: ${JSON.stringify(refused)}`,
    );

    await cp.client.create(slicesPath(), webSlice(4));
    await expectEndpoints('endpoints back after the slice is recreated', webV4, [`${pod('b1').net1.ipv4}:80`, `${pod('b2').net1.ipv4}:80`]);
    const back = await httpRequests(topo, client, `http://${webV4}:80/`, 30);
    assert.deepEqual([...new Set(back.map((r) => r.name ?? r.error))].sort(), ['b1', 'b2']);
  });

  void test("the pod's service-network annotation decides which Services get rules; a malformed value changes nothing", async () => {
    const selectors = (): unknown[] =>
      env
        .sidecar!.logs()
        .filter((l) => l['msg'] === 'watching EndpointSlices')
        .map((l) => l['labelSelector']);
    const base = 'endpointslice.kubernetes.io/managed-by=multus-proxy-controller,multus-proxy/network in';
    assert.deepEqual(selectors(), [`${base} (${ns}.net-a)`], 'slices are selected server-side by the pod network');
    await setServiceNetwork('net-a, net-b');
    await expectEndpoints('the net-b Service served once the pod adds net-b', otherIP, [`${pod('b3').net2!.ipv4}:80`]);
    assert.deepEqual(selectors(), [`${base} (${ns}.net-a)`, `${base} (${ns}.net-a,${ns}.net-b)`], 'the slice watch follows the networks');
    const replies = await httpRequests(topo, client, `http://${otherIP}:80/`, 5);
    assert.ok(
      replies.every((r) => r.name === 'b3' && r.peer === client.net2!.ipv4),
      `via net2 from the client's net2 address: ${JSON.stringify(replies)}`,
    );

    await setServiceNetwork('net-b');
    await expectEndpoints('the net-a Service gone once the pod drops net-a', webV4, undefined);
    await expectEndpoints('its IPv6 cluster IP gone too', webV6, undefined);

    const before = await rulesOf(topo, client);
    await setServiceNetwork('net-a,,net-b');
    const line = await waitForLog(env.sidecar!, 'the malformed annotation to be logged', /service-network "net-a,,net-b"/);
    assert.match(typeof line['problem'] === 'string' ? line['problem'] : '', new RegExp(`^Pod ${ns}/client: k8s\\.v1\\.cni\\.cncf\\.io/service-network "net-a,,net-b": .*comma`));
    // Wait past a few sync intervals: the last good networks stay in force.
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(ownedLines(await rulesOf(topo, client)), ownedLines(before), 'no rule lost or added');
    // And it says so: a Warning Event on its pod, and a metric, while the value is bad.
    const said = await cp.client.list<CoreV1Event>(apiPath('', 'v1', 'events', ns), { fieldSelector: `involvedObject.name=client,reason=${REASON_INVALID_ANNOTATION}` });
    assert.ok(
      said.items.some((e) => e.type === 'Warning' && e.involvedObject.kind === 'Pod' && e.message?.includes('"net-a,,net-b"')),
      JSON.stringify(said.items.map((e) => e.message)),
    );
    assert.match(await metricsText(topo, client, HEALTH_PORT), /^multus_proxy_sidecar_invalid_pod_annotation\{annotation="service-network"\} 1$/m);

    await setServiceNetwork('net-a');
    await expectEndpoints('net-a served again', webV4, [`${pod('b1').net1.ipv4}:80`, `${pod('b2').net1.ipv4}:80`]);
    await expectEndpoints('net-b no longer served', otherIP, undefined);
    assert.match(await metricsText(topo, client, HEALTH_PORT), /^multus_proxy_sidecar_invalid_pod_annotation\{annotation="service-network"\} 0$/m);
  });

  void test('metrics report syncs, sizes and slice-change latency', async () => {
    const text = await metricsText(topo, client, HEALTH_PORT);
    const value = (re: RegExp): number => Number(re.exec(text)?.[1] ?? NaN);
    assert.ok(value(/^multus_proxy_sidecar_syncs_total\{kind="full",result="success"\} (\d+)/m) >= 1, text.slice(0, 400));
    assert.ok(value(/^multus_proxy_sidecar_syncs_total\{kind="partial",result="success"\} (\d+)/m) >= 4);
    assert.equal(value(/^multus_proxy_sidecar_targets (\d+)/m), 2, 'web on two cluster IPs');
    assert.equal(value(/^multus_proxy_sidecar_endpoints (\d+)/m), 4);
    assert.ok(value(/^multus_proxy_sidecar_rules (\d+)/m) > 0);
    assert.ok(value(/^multus_proxy_sidecar_slice_change_to_rules_seconds_count (\d+)/m) >= 3, 'the slice changes above were measured');
    assert.equal(value(/^multus_proxy_sidecar_restore_failures_total (\d+)/m), 0);
  });

  const routesOf = async (): Promise<string> =>
    (await topo.run(client, ['ip', 'route', 'show', 'proto', '241'])).stdout + (await topo.run(client, ['ip', '-6', 'route', 'show', 'proto', '241'])).stdout;
  const startSidecar = async (args: string[] = []): Promise<void> => {
    const s = spawnSidecar(topo, client, {
      podName: 'client',
      podNamespace: ns,
      kubeconfig: cp.kubeconfigPath,
      healthPort: HEALTH_PORT,
      args,
      env: { DRIFT_CHECK_INTERVAL_MS: String(DRIFT_CHECK_MS) },
    });
    env.sidecar = s;
    await waitFor(
      '/readyz 200',
      async () => (await probe(topo, client, HEALTH_PORT, '/readyz')) === 200,
      30_000,
      () => s.stderr(),
    );
  };

  void test('SIGTERM: exits 0 at once and leaves every chain, jump and route in place', async () => {
    const rules = { v4: ownedLines(await rulesOf(topo, client, 4)), v6: ownedLines(await rulesOf(topo, client, 6)) };
    const routes = await routesOf();
    assert.match(routes, new RegExp(`${webV4.replaceAll('.', '\\.')} dev net1 .*src ${client.net1.ipv4.replaceAll('.', '\\.')}`));
    assert.ok(rules.v4.length > 0 && rules.v6.length > 0);
    const t0 = Date.now();
    const code = await env.sidecar!.terminate();
    const stopMs = Date.now() - t0;
    assert.equal(code, 0, env.sidecar!.stderr());
    assert.ok(stopMs < 30_000, `stopped in ${stopMs} ms, inside the 30 s grace period (the kubelet's SIGKILL would come after it)`);
    assert.deepEqual({ v4: ownedLines(await rulesOf(topo, client, 4)), v6: ownedLines(await rulesOf(topo, client, 6)) }, rules, 'no rule removed');
    assert.equal(await routesOf(), routes, 'no route removed');
    // Both backends answer: 40 requests over a random split of two miss one with odds of 2^-39 (10 missed one in 2^9 runs).
    const replies = await httpRequests(topo, client, `http://${webV4}:80/`, 40);
    assert.deepEqual([...new Set(replies.map((r) => r.name ?? r.error))].sort(), ['b1', 'b2'], 'the Service still works with the sidecar gone');
  });

  void test('a client looping on the cluster IP through three graceful restarts sees no failure; a restart adopts and reconciles', async (t) => {
    // A Service the restarted sidecar must forget: served now, deleted while the sidecar is down.
    const gone = await cp.client.create<V1Service>(apiPath('', 'v1', 'services', ns), serviceObject(ns, 'gone', { networks: 'net-a', ports: [{ port: 80 }] }));
    const goneIP = gone.spec?.clusterIP ?? '';
    await cp.client.create(slicesPath(), sliceObject(ns, 'gone-v4', { service: 'gone', network: `${ns}/net-a`, family: 4, ports: [{ port: 80 }], endpoints: [{ ip: pod('b1').net1.ipv4 }] }));
    await startSidecar();
    await expectEndpoints('the Service to be deleted later is served', goneIP, [`${pod('b1').net1.ipv4}:80`]);
    assert.match(await routesOf(), new RegExp(`^${goneIP.replaceAll('.', '\\.')} dev net1`, 'm'));

    const loop = startHttpLoop(topo, client, `http://${webV4}:80/`);
    const stops: number[] = [];
    for (let round = 1; round <= 3; round += 1) {
      const t0 = Date.now();
      assert.equal(await env.sidecar!.terminate(), 0, env.sidecar!.stderr());
      stops.push(Date.now() - t0);
      if (round === 1) {
        await cp.client.delete(apiPath('', 'v1', 'services', ns, 'gone'));
        await cp.client.delete(`${slicesPath()}/gone-v4`);
        // A chain of ours that no Service explains (e.g. left by an older version) and a foreign one.
        await topo.run(client, ['iptables', '-t', 'nat', '-N', 'MPX-SVC-STALETEST']);
        await topo.run(client, ['iptables', '-t', 'nat', '-A', 'MPX-SVC-STALETEST', '-j', 'RETURN']);
        await topo.run(client, ['iptables', '-t', 'nat', '-N', 'FOREIGN-CHAIN']);
      }
      await startSidecar();
      const first = await waitForLog(env.sidecar!, 'the first sync', /^rules applied$/);
      assert.equal(first['full'], true, 'the first sync of a process is a full one');
      for (const k of ['cpuWaitMs', 'cpuWaitBeforeMs'])
        assert.ok(typeof first[k] === 'number' && first[k] >= 0, `the line carries the run-queue wait ${k} (src/cpu-wait.ts): ${JSON.stringify(first)}`);
      // Let the loop run against the freshly synced rules before the next stop.
      await new Promise((r) => setTimeout(r, 500));
      if (round === 1) {
        const save = await rulesOf(topo, client, 4);
        assert.equal(endpointsOf(save, goneIP), undefined, 'the deleted Service is no longer served');
        assert.doesNotMatch(save, /MPX-SVC-STALETEST/, 'the unexplained chain of ours was removed');
        assert.match(save, /^:FOREIGN-CHAIN /m, 'a foreign chain stays');
        assert.match(save, /-A OUTPUT -d 198\.51\.100\.7\/32 -p tcp -m comment --comment foreign-owner -j RETURN/);
        assert.equal(save.split('\n').filter((l) => l.startsWith('-A OUTPUT') && l.includes('MPX-')).length, 2, `one jump per table:\n${save}`);
        assert.doesNotMatch(await routesOf(), new RegExp(`^${goneIP.replaceAll('.', '\\.')} `, 'm'), 'its route was removed');
        assert.match(await routesOf(), new RegExp(`^${webV4.replaceAll('.', '\\.')} dev net1`, 'm'));
      }
    }
    const replies = await loop.stop();
    const failed = replies.filter((r) => r.error !== undefined);
    assert.ok(replies.length >= 50, `the client kept sending (${replies.length} requests)`);
    assert.deepEqual(failed, [], `${failed.length} of ${replies.length} requests failed`);
    assert.deepEqual([...new Set(replies.map((r) => r.name))].sort(), ['b1', 'b2']);
    assert.ok(
      stops.every((ms) => ms < 30_000),
      `each stop ended inside the 30 s grace period: ${stops.join(', ')} ms`,
    );
    t.diagnostic(`${replies.length} requests over ${Math.round((replies.at(-1)!.at - replies[0]!.at) / 1000)} s, ${failed.length} failed; stops took ${stops.join(', ')} ms`);
  });

  void test('rules deleted or altered from outside are found by the drift check and rewritten; no rewrite without drift', async (t) => {
    const owned = async (): Promise<string[]> => [...ownedLines(await rulesOf(topo, client, 4)), ...ownedLines(await rulesOf(topo, client, 6))];
    const want = await owned();
    const routes = await routesOf();
    const fullSyncs = async (): Promise<number> => Number(/^multus_proxy_sidecar_syncs_total\{kind="full",result="success"\} (\d+)/m.exec(await metricsText(topo, client, HEALTH_PORT))?.[1]);
    const checks = async (): Promise<number> => Number(/^multus_proxy_sidecar_drift_checks_total\{kind="quick",result="ok"\} (\d+)/m.exec(await metricsText(topo, client, HEALTH_PORT))?.[1]);
    // Without drift the checks find none and nothing is rewritten.
    const full0 = await fullSyncs();
    const checks0 = await checks();
    await new Promise((r) => setTimeout(r, 3.5 * DRIFT_CHECK_MS));
    assert.ok((await checks()) - checks0 >= 2, 'checks ran');
    assert.equal(await fullSyncs(), full0, 'no full rewrite while nothing drifted');

    // The Service's dispatch rule (the filter table's refusal of other ports names the address too).
    const webChain = want.map((l) => /^-A MPX-SERVICES -d (\S+) .* -j (MPX-SVC-\S+)/.exec(l)).find((m) => m?.[1] === `${webV4}/32`)?.[2] ?? '';
    assert.notEqual(webChain, '');
    const cases: { what: string; cmd: string[]; withinMs: number }[] = [
      { what: 'the nat OUTPUT jump deleted', cmd: ['iptables', '-t', 'nat', '-D', 'OUTPUT', '-m', 'comment', '--comment', 'multus-proxy', '-j', 'MPX-SERVICES'], withinMs: 2 * DRIFT_CHECK_MS },
      { what: 'a dispatch rule altered', cmd: ['iptables', '-t', 'nat', '-R', 'MPX-SERVICES', '1', '-d', '198.51.100.9/32', '-p', 'tcp', '-j', 'RETURN'], withinMs: 2 * DRIFT_CHECK_MS },
      {
        what: 'the IPv6 filter jump deleted',
        cmd: ['ip6tables', '-D', 'OUTPUT', '-m', 'conntrack', '--ctstate', 'NEW', '-m', 'comment', '--comment', 'multus-proxy', '-j', 'MPX-REJECT'],
        withinMs: 2 * DRIFT_CHECK_MS,
      },
      { what: 'a rule added to the dispatch chain', cmd: ['iptables', '-t', 'nat', '-I', 'MPX-SERVICES', '1', '-j', 'RETURN'], withinMs: 2 * DRIFT_CHECK_MS },
      // A Service chain's rules are counted by the deep check (every 10th).
      { what: "a Service chain's rules flushed", cmd: ['iptables', '-t', 'nat', '-F', webChain], withinMs: 11 * DRIFT_CHECK_MS },
    ];
    for (const c of cases) {
      await topo.run(client, c.cmd);
      assert.notDeepEqual(await owned(), want, `${c.what}: the change took`);
      const t0 = Date.now();
      let last: string[] = [];
      await waitFor(
        `${c.what}: repaired`,
        async () => JSON.stringify((last = await owned())) === JSON.stringify(want),
        c.withinMs + 3000,
        () => last.join('\n'),
      );
      const ms = Date.now() - t0;
      t.diagnostic(`${c.what}: repaired after ${ms} ms`);
      assert.ok(ms <= c.withinMs + 1500, `${c.what}: repaired after ${ms} ms, within the check interval (+ the sync)`);
    }
    await topo.run(client, ['ip', 'route', 'del', `${webV4}/32`, 'proto', '241']);
    await waitFor('the deleted route is back', async () => (await routesOf()) === routes, 2 * DRIFT_CHECK_MS + 3000);
    const warned = env.sidecar!.logs().filter((l) => l['msg'] === 'our rules were changed from outside; rewriting them all');
    assert.ok(warned.length >= cases.length + 1, `each drift was logged: ${JSON.stringify(warned.map((l) => l['drift']))}`);
    const replies = await httpRequests(topo, client, `http://${webV4}:80/`, 40);
    assert.deepEqual([...new Set(replies.map((r) => r.name ?? r.error))].sort(), ['b1', 'b2']);
  });

  void test('--cleanup removes every chain, jump and route of ours, keeps foreign rules, exits 0', async () => {
    assert.equal(await env.sidecar!.terminate(), 0);
    assert.notDeepEqual(ownedLines(await rulesOf(topo, client)), []);
    const cleaner = spawnSidecar(topo, client, { podName: 'client', podNamespace: ns, kubeconfig: cp.kubeconfigPath, healthPort: HEALTH_PORT, args: ['--cleanup'] });
    assert.equal(await cleaner.exit, 0, cleaner.stderr() + JSON.stringify(cleaner.logs()));
    const v4 = await rulesOf(topo, client, 4);
    const v6 = await rulesOf(topo, client, 6);
    assert.deepEqual(ownedLines(v4), [], v4);
    assert.deepEqual(ownedLines(v6), [], v6);
    assert.doesNotMatch(v4 + v6, /multus-proxy/);
    assert.match(v4, /-A OUTPUT -d 198\.51\.100\.7\/32 -p tcp -m comment --comment foreign-owner -j RETURN/);
    assert.match(v4, /-A OUTPUT -d 198\.51\.100\.7\/32 -m comment --comment foreign-owner -j ACCEPT/);
    assert.match(v4, /^:FOREIGN-CHAIN /m);
    assert.equal(await routesOf(), '', 'every route of ours removed');
    const routes = (await topo.run(client, ['ip', 'route', 'show', 'table', 'all'])).stdout;
    assert.ok(routes.includes('default via 10.244.0.1'), 'the pod default route is untouched');
  });
});
