/**
 * The dataplane with real iptables and real nftables (both back ends, the same tests) and real traffic in network namespaces: load balancing,
 * source address, endpoint changes, reject, IPv6, UDP with conntrack flush, session affinity.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createDataplane, type Dataplane } from '../../src/dataplane/index.js';
import { httpRequests, udpRequests } from '../harness/netns.js';
import { ep, target } from './render-fixtures.js';
import { serviceChainName } from '../../src/dataplane/core/names.js';
import { buildDesiredState } from '../../src/dataplane/core/incremental.js';
import { serviceObject, sliceObject } from './state-fixtures.js';
import { DNS_V4, HTTP_PORT, UDP_PORT, WEB_V4, WEB_V6, createEnv, endpoints, saveText, state, tally, webTarget, type Env } from './dataplane-env.js';

const udp = (eps: ReturnType<typeof endpoints>) => target('demo/dns', DNS_V4, 53, eps, { protocol: 'UDP', portName: 'dns' });

for (const rules of ['iptables', 'nftables'] as const)
  void describe(`sidecar dataplane (${rules}): traffic`, () => {
    let env: Env;
    let dp: Dataplane;
    before(async () => {
      env = await createEnv(3);
      // As the sidecar runs it: restores through spare processes started ahead.
      dp = createDataplane({ netns: env.client.ns, spareRestore: true, backendKind: rules });
    });
    after(async () => {
      dp.close();
      await env.topo.teardown();
    });

    void test('300 requests to clusterIP:80 reach every backend in equal shares, from the client net1 address', async () => {
      const res = await dp.sync(state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT))]), { full: true });
      assert.equal(res.full, true);
      assert.equal(res.backend, rules === 'iptables' ? 'nft' : 'nftables');
      const replies = await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 300);
      const counts = tally(replies);
      const n = 300;
      const k = 3;
      const sigma = Math.sqrt(n * (1 / k) * (1 - 1 / k));
      for (const b of env.backends) {
        const c = counts.get(b.name) ?? 0;
        assert.ok(Math.abs(c - n / k) <= 6 * sigma, `${b.name} got ${c} of ${n}, expected ${n / k} ± ${(6 * sigma).toFixed(1)}`);
      }
      assert.deepEqual(new Set(replies.map((r) => r.peer)), new Set([env.client.net1.ipv4]));
    });

    void test('an unready endpoint gets no traffic after one sync; all gone: refused at once; back: traffic resumes', async () => {
      const [b1, b2, b3] = env.backends;
      assert.ok(b1 && b2 && b3);
      const r1 = await dp.sync(state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT, (p) => (p === b3 ? 'unready' : 'ready')))]), { full: false });
      assert.equal(r1.full, false);
      const counts = tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 60));
      assert.equal(counts.get('b3'), undefined);
      assert.ok((counts.get('b1') ?? 0) > 0 && (counts.get('b2') ?? 0) > 0);

      // Removed from the slice entirely.
      await dp.sync(state(env, [webTarget(endpoints([b1], 4, HTTP_PORT))]), { full: false });
      assert.deepEqual([...tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 30)).keys()], ['b1']);

      await dp.sync(state(env, [webTarget([])]), { full: false });
      const refused = await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 5, 3000);
      // Refused (a reset), not dropped: a drop would end in the 3 s request timeout instead.
      for (const r of refused) assert.equal(r.error, 'ECONNREFUSED', `after ${r.ms} ms`);

      // Only terminating-but-serving endpoints: they are used (kube-proxy's fallback).
      await dp.sync(state(env, [webTarget(endpoints([b2], 4, HTTP_PORT, () => 'terminating'))]), { full: false });
      assert.deepEqual([...tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 10)).keys()], ['b2']);

      await dp.sync(state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT))]), { full: false });
      assert.equal(tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 60)).size, 3);
    });

    void test('IPv6 cluster IP with IPv6 endpoints, from the client net1 IPv6 address', async () => {
      await dp.sync(state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT)), target('demo/web', WEB_V6, 80, endpoints(env.backends, 6, HTTP_PORT), { portName: 'http' })]), {
        full: false,
      });
      const replies = await httpRequests(env.topo, env.client, `http://[${WEB_V6}]:80/`, 90);
      assert.equal(tally(replies).size, 3);
      assert.deepEqual(new Set(replies.map((r) => r.peer)), new Set([env.client.net1.ipv6]));
      // And the route that makes it so.
      const route = (await env.topo.run(env.client, ['ip', '-6', 'route', 'get', WEB_V6])).stdout;
      assert.match(route, new RegExp(`dev net1 proto 241 src ${env.client.net1.ipv6}`));
    });

    void test('UDP: balanced, and a removed endpoint stops getting datagrams of an existing flow (conntrack flush)', async () => {
      await dp.sync(state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT)), udp(endpoints(env.backends, 4, UDP_PORT))]), { full: false });
      const spread = await udpRequests(env.topo, env.client, DNS_V4, 53, 1);
      assert.equal(spread[0]?.peer, env.client.net1.ipv4);
      // One flow (fixed source port): conntrack pins it to one backend.
      const first = await udpRequests(env.topo, env.client, DNS_V4, 53, 3, { localPort: 40000 });
      const pinned = first[0]?.name;
      assert.ok(pinned !== undefined);
      assert.deepEqual(
        first.map((r) => r.name),
        [pinned, pinned, pinned],
      );
      const rest = env.backends.filter((b) => b.name !== pinned);
      const res = await dp.sync(state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT)), udp(endpoints(rest, 4, UDP_PORT))]), { full: false });
      assert.equal(res.conntrackFlushes, 1);
      const after1 = await udpRequests(env.topo, env.client, DNS_V4, 53, 3, { localPort: 40000 });
      for (const r of after1) {
        assert.equal(r.error, undefined);
        assert.notEqual(r.name, pinned, 'the flow still reaches the removed endpoint');
      }
      // No endpoints: ICMP port unreachable, i.e. an error at once instead of a timeout.
      await dp.sync(state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT)), udp([])]), { full: false });
      const refused = await udpRequests(env.topo, env.client, DNS_V4, 53, 1, { timeoutMs: 3000 });
      assert.equal(refused[0]?.error, 'ECONNREFUSED');
    });

    void test('sessionAffinity ClientIP: every connection goes to the same backend', async () => {
      // The UDP Service of the previous test stays, so only the web chain changes.
      const res = await dp.sync(state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT), { affinityTimeoutSeconds: 60 }), udp([])]), { full: false });
      const webChain = serviceChainName({ service: 'demo/web', portName: 'http', protocol: 'TCP', family: 4, clusterIP: WEB_V4 });
      assert.deepEqual(res.families[0]?.changedChains, [rules === 'iptables' ? `nat/${webChain}` : webChain]);
      const counts = tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 40));
      assert.equal(counts.size, 1, `affinity broken: ${JSON.stringify([...counts])}`);
      // Without affinity the same client spreads again.
      await dp.sync(state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT))]), { full: false });
      assert.equal(tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 60)).size, 3);
    });

    void test('a Service on a network the client lacks gets no rules and no route', async () => {
      const other = target('demo/elsewhere', '10.96.0.77', 80, [ep('192.168.101.3', HTTP_PORT)], { network: { namespace: 'demo', name: 'red' } });
      const res = await dp.sync(state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT)), other]), { full: false });
      assert.equal(res.skipped.length, 1);
      assert.doesNotMatch(rules === 'iptables' ? await saveText(env) : (await env.topo.run(env.client, ['nft', 'list', 'ruleset'])).stdout, /10\.96\.0\.77/);
      assert.doesNotMatch((await env.topo.run(env.client, ['ip', 'route', 'show', 'proto', '241'])).stdout, /10\.96\.0\.77/);
      const r = await httpRequests(env.topo, env.client, 'http://10.96.0.77:80/', 1, 1500);
      assert.notEqual(r[0]?.error, undefined);
    });

    void test('LoadBalancer: from a Service object and its status, the client reaches the ingress IPs (v4 and v6) directly, from its own address; ipMode Proxy and a source outside the ranges are not short-circuited', async () => {
      const VIP4 = '192.168.101.240';
      const VIP6 = 'fd00:101::f0';
      const lb = (name: string, ingress: { ip: string; ipMode?: string }[], ranges?: string[]) => {
        const svc = serviceObject('demo', name, {
          networks: 'demo/blue',
          clusterIPs: ['10.96.0.90', 'fd00:10:96::5a'],
          ports: [{ name: 'http', port: 80, targetPort: HTTP_PORT }],
          type: 'LoadBalancer',
        });
        svc.status = { loadBalancer: { ingress } };
        if (ranges !== undefined) svc.spec = { ...svc.spec, loadBalancerSourceRanges: ranges };
        return svc;
      };
      const slices = (name: string) =>
        ([4, 6] as const).map((family) =>
          sliceObject('demo', `${name}-${family}`, {
            service: name,
            network: 'demo/blue',
            family,
            ports: [{ name: 'http', port: 80, targetPort: HTTP_PORT }],
            endpoints: env.backends.map((b) => ({ ip: family === 4 ? b.net1.ipv4 : b.net1.ipv6 })),
          }),
        );
      const built = buildDesiredState({
        interfaces: [env.iface],
        services: [lb('lb', [{ ip: VIP4 }, { ip: VIP6, ipMode: 'VIP' }]), lb('proxied', [{ ip: '192.168.101.241', ipMode: 'Proxy' }]), lb('ranged', [{ ip: '192.168.101.242' }], ['203.0.113.0/24'])],
        slices: [...slices('lb'), ...slices('proxied'), ...slices('ranged')],
      });
      assert.deepEqual(built.problems, []);
      await dp.sync(built.state, { full: true });
      for (const [url, peer] of [
        [`http://${VIP4}:80/`, env.client.net1.ipv4],
        [`http://[${VIP6}]:80/`, env.client.net1.ipv6],
      ] as const) {
        const replies = await httpRequests(env.topo, env.client, url, 60);
        assert.equal(replies.filter((r) => r.error !== undefined).length, 0, JSON.stringify(replies.slice(0, 3)));
        assert.equal(tally(replies).size, 3, `${url}: every backend`);
        assert.deepEqual(new Set(replies.map((r) => r.peer)), new Set([peer]), 'no node in between: the backend sees the client');
      }
      // Not short-circuited: nothing in the client answers them (no load balancer in this test).
      for (const vip of ['192.168.101.241', '192.168.101.242']) {
        const r = await httpRequests(env.topo, env.client, `http://${vip}:80/`, 1, 800);
        assert.notEqual(r[0]?.error, undefined, vip);
      }
    });
  });
