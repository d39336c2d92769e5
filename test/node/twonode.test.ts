/**
 * The two-node suite: startNode({ nodes: 2 }) once for the file, the cross-node proofs in
 * order (test/node/twonode.ts; placement by node and zone in test/node/twonode-topology.ts; the
 * LoadBalancer pair in test/node/twonode-lb.ts), and teardown
 * asserting the host is as before. The node-loss test disturbs the second node, so it runs last
 * before teardown. Nothing is uninstalled before the
 * teardown (the real-node suite proves the documented uninstall; here it would cost ~50 s): the
 * teardown removes the pods through both containerds and must still leave the host as it was.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startNode, type RealNode } from '../harness/node.js';
import { NODE, NODE2 } from '../harness/node-config.js';
import { blogFile, createNamespace, net1Addresses, pod } from './cluster.js';
import { installBootstrap } from './install.js';
import { runHeadless } from './headless.js';
import { EXTERNAL_CLIENT, NODE_ADDRESSES, pinnedClient, runNodeLoss, runTwoNodeBlog, runTwoNodePort } from './twonode.js';
import { runFailover, runLocalAnnounce, setupTwoNodeLb, teardownTwoNodeLb, type TwoNodeLb } from './twonode-lb.js';
import { clientPlaces, DROP_REQUESTS, REQUESTS, runLocalPolicy, runPreferClose, ZONE_LABEL, ZONES, type ClientBurst } from './twonode-topology.js';
import { MANAGED_BY } from '../../src/keys.js';
import { runTwoNodePolicy } from './twonode-policy.js';

void describe('two real nodes', { concurrency: 1 }, () => {
  let node: RealNode;
  const t0 = Date.now();
  const log = (m: string): void => console.log(`# two-node: ${m}`);

  before(
    async () => {
      node = await startNode({ log, nodes: 2 });
      log(`bring-up: first node (with the control plane) ${node.startMs} ms, second node ${node.second?.startMs} ms`);
    },
    { timeout: 900_000 },
  );
  after(async () => {
    await node?.stop();
    log(`suite ${Date.now() - t0} ms`);
  });

  void test(
    'harness: both Nodes Ready on v1.34.4; a pod on the second node runs under its containerd, in its cgroup root, with net1 made by its CNI in its network namespace',
    { timeout: 300_000 },
    async () => {
      const nodes = JSON.parse(await node.kubectl(['get', 'nodes', '-o', 'json'])) as {
        items: { metadata: { name: string }; status: { nodeInfo: { kubeletVersion: string }; addresses: { type: string; address: string }[]; conditions: { type: string; status: string }[] } }[];
      };
      assert.deepEqual(nodes.items.map((n) => n.metadata.name).sort(), [NODE.name, NODE2.name]);
      for (const n of nodes.items) {
        assert.equal(n.status.nodeInfo.kubeletVersion, 'v1.34.4');
        assert.equal(n.status.conditions.find((c) => c.type === 'Ready')?.status, 'True', n.metadata.name);
      }
      assert.equal(nodes.items.find((n) => n.metadata.name === NODE2.name)?.status.addresses.find((a) => a.type === 'InternalIP')?.address, NODE2.ip);
      const second = node.second;
      assert.ok(second);

      const ns = 'twonode-harness';
      await createNamespace(node, ns, false);
      await node.apply(blogFile('net-attach.yml'), ns);
      await node.apply(pinnedClient('probe2', NODE2.name), ns);
      await node.wait('pod/probe2', 'condition=Ready', { namespace: ns, timeoutMs: 120_000 });
      const p = await pod(node, ns, 'probe2');
      const net1 = net1Addresses(p)[0] ?? '';
      assert.match(net1, /^10\.1\.1\.\d+$/, 'whereabouts on the second node allocates from the shared pool');
      assert.match(p.status?.podIP ?? '', /^10\.244\.1\.\d+$/, "eth0 from the second node's pod range");
      // Its sandbox is node 2's containerd's, not node 1's.
      const sandboxes = await second.crictl(['pods', '--name', 'probe2', '-q']);
      assert.equal(sandboxes.trim().split('\n').filter(Boolean).length, 1, 'one sandbox in node 2 containerd');
      assert.equal((await node.crictl(['pods', '--name', 'probe2', '-q'])).trim(), '', "none in node 1's");
      // Its container's cgroup is under node 2's root; its host-side veth is in node 2's namespace.
      const cid = (await second.crictl(['ps', '--pod', sandboxes.trim(), '-q'])).trim().split('\n')[0] ?? '';
      const info = JSON.parse(await second.crictl(['inspect', cid])) as { info: { pid: number } };
      const cgroup = await second.inNetns(['cat', `/proc/${info.info.pid}/cgroup`]);
      assert.match(cgroup, new RegExp(`:memory:${NODE2.cgroupRoot}/kubepods/`), cgroup);
      const veths = await second.inNetns(['ip', '-o', 'link', 'show', 'master', NODE2.bridge]);
      assert.match(veths, /veth/, "the pod's veth is on node 2's bridge, in node 2's namespace");
      assert.match((await node.exec(ns, 'probe2', ['ip', '-4', '-o', 'addr', 'show', 'net1'])).stdout, new RegExp(`inet ${net1.replace(/\./g, '\\.')}/24`));
      // Cluster DNS and the kubernetes Service from the second node (its kube-proxy, CoreDNS on node 1).
      const healthz = await node.exec(ns, 'probe2', ['curl', '-sk', '-m', '5', 'https://kubernetes.default.svc.cluster.local/healthz']);
      assert.equal(healthz.stdout.trim(), 'ok', healthz.stderr);
      // Not waited for: the probe's 30 s grace period would be the test's longest step.
      await node.kubectl(['delete', 'namespace', ns, '--wait=false']);
    },
  );

  void test('install as users do (bootstrap overlay): Deployments Ready', { timeout: 600_000 }, async () => {
    const t = Date.now();
    await installBootstrap(node);
    log(`installed in ${Date.now() - t} ms`);
  });

  void test('the blog across two nodes: one replica per node, a client on each node; 20/20 by name from each, both replicas answer, the client net1 address kept', { timeout: 600_000 }, async () => {
    const t = Date.now();
    const o = await runTwoNodeBlog(node, { step: (s) => log(s), info: (s) => log(`  ${s}`) });
    log(`blog across nodes in ${Date.now() - t} ms`);
    assert.deepEqual(
      Object.values(o.backends)
        .map((b) => b.node)
        .sort(),
      [NODE.name, NODE2.name],
      'one replica per node',
    );
    assert.deepEqual(
      o.slice,
      Object.values(o.backends)
        .map((b) => b.net1)
        .sort(),
    );
    assert.deepEqual(o.clients.map((c) => c.node).sort(), [NODE.name, NODE2.name], 'a client on each node');
    for (const c of o.clients) {
      assert.ok(o.sidecars[c.pod], `native sidecar in ${c.pod}`);
      assert.deepEqual(c.curls, Array(20).fill('ok'), `${c.pod} on ${c.node}`);
      for (const [b, n] of Object.entries(c.answeredBy)) assert.ok(n > 0, `${b} on ${o.backends[b]?.node} answered none of ${c.pod}'s 20 (${JSON.stringify(c.answeredBy)})`);
      assert.equal(
        Object.values(c.answeredBy).reduce((a, b) => a + b, 0),
        20,
        `every request of ${c.pod} arrived from its net1 address ${c.net1}`,
      );
      assert.deepEqual(c.otherSources, []);
    }
  });

  // Placement: over the blog's replica and client on each node (test/node/twonode-topology.ts).
  const ok = (b: ClientBurst | undefined): number => b?.curls.filter((c) => c === 'ok').length ?? -1;
  const answers = (b: ClientBurst | undefined): number => Object.values(b?.answeredBy ?? {}).reduce((a, x) => a + x, 0);

  void test(
    "placement: the Nodes registered in zone-a and zone-b; each client pod carries its Node's zone label and its sidecar runs with NODE_NAME and NODE_ZONE of its node",
    { timeout: 120_000 },
    async () => {
      const nodes = JSON.parse(await node.kubectl(['get', 'nodes', '-o', 'json'])) as { items: { metadata: { name: string; labels?: Record<string, string> } }[] };
      assert.deepEqual(Object.fromEntries(nodes.items.map((n) => [n.metadata.name, n.metadata.labels?.[ZONE_LABEL]])), ZONES);
      const places = await clientPlaces(node);
      log(`client places: ${JSON.stringify(places)}`);
      assert.deepEqual(places.map((p) => p.node).sort(), [NODE.name, NODE2.name]);
      for (const p of places) {
        assert.equal(p.podZoneLabel, ZONES[p.node], `${p.pod}: the zone label copied from its Node`);
        assert.deepEqual(p.sidecarEnv, { NODE_NAME: p.node, NODE_ZONE: ZONES[p.node] }, `${p.pod}: the sidecar's process environment`);
      }
    },
  );

  void test(
    `placement: internalTrafficPolicy Local with a replica on each node: each node's client reaches only its own (${REQUESTS}/${REQUESTS}); the second node's replica out of the Service, its client is dropped (timed out, not refused, none answered) and the first node's is unaffected`,
    { timeout: 300_000 },
    async () => {
      const o = await runLocalPolicy(node, log);
      const rep = o.topology.replicas;
      assert.deepEqual(
        o.slice.map((e) => [e.nodeName, e.zone]).sort(),
        [
          [NODE.name, ZONES[NODE.name]],
          [NODE2.name, ZONES[NODE2.name]],
        ],
        "the controller writes each endpoint's node and zone",
      );
      for (const n of [NODE.name, NODE2.name]) {
        const b = o.own[n];
        assert.equal(ok(b), REQUESTS, `client on ${n}: ${b?.curls.join(',')}`);
        assert.equal(b?.answeredBy[rep[n]?.pod ?? ''], REQUESTS, `client on ${n}: only its own node's replica answers (${JSON.stringify(b?.answeredBy)})`);
      }
      assert.deepEqual(o.dropped.curls, Array(DROP_REQUESTS).fill('fail:28'), 'dropped: every connection timed out (curl 28), none refused (curl 7) or answered');
      assert.equal(answers(o.dropped), 0, `no replica saw them (${JSON.stringify(o.dropped.answeredBy)})`);
      assert.equal(ok(o.unaffected), REQUESTS, o.unaffected.curls.join(','));
      assert.equal(o.unaffected.answeredBy[rep[NODE.name]?.pod ?? ''], REQUESTS, `the first node's client still reaches its own replica only (${JSON.stringify(o.unaffected.answeredBy)})`);
    },
  );

  void test(
    `placement: trafficDistribution PreferClose with a replica in each zone: each client stays in its zone (${REQUESTS}/${REQUESTS}); the second zone's replica out of the Service, its client falls back to the other zone's and the first zone's client is unaffected`,
    { timeout: 300_000 },
    async () => {
      const o = await runPreferClose(node, log);
      const rep = o.topology.replicas;
      assert.deepEqual(
        o.slice.map((e) => [e.nodeName, e.zone, e.forZones]).sort(),
        [
          [NODE.name, ZONES[NODE.name], [ZONES[NODE.name]]],
          [NODE2.name, ZONES[NODE2.name], [ZONES[NODE2.name]]],
        ],
        'each endpoint hinted for its own zone',
      );
      for (const n of [NODE.name, NODE2.name]) {
        const b = o.own[n];
        assert.equal(ok(b), REQUESTS, `client in ${ZONES[n]}: ${b?.curls.join(',')}`);
        assert.equal(b?.answeredBy[rep[n]?.pod ?? ''], REQUESTS, `client in ${ZONES[n]}: only its zone's replica answers (${JSON.stringify(b?.answeredBy)})`);
      }
      for (const n of [NODE2.name, NODE.name]) {
        const b = o.fallback[n];
        assert.equal(ok(b), REQUESTS, `client in ${ZONES[n]} after the fall back: ${b?.curls.join(',')}`);
        assert.equal(b?.answeredBy[rep[NODE.name]?.pod ?? ''], REQUESTS, `client in ${ZONES[n]}: answered by the replica left, in ${ZONES[NODE.name]} (${JSON.stringify(b?.answeredBy)})`);
      }
    },
  );

  void test('headless and per-pod DNS with members on both nodes, asked from the second node', { timeout: 600_000 }, async () => {
    const o = await runHeadless(node, { spread: true, digOn: NODE2.name });
    log(`headless: ${JSON.stringify(o.nodeOf)} net1 ${JSON.stringify(o.net1)}; A ${o.serviceA.join(',')}; per pod ${JSON.stringify(o.perPodA)}`);
    assert.deepEqual(Object.values(o.nodeOf).sort(), [NODE.name, NODE2.name], 'one member per node');
    assert.deepEqual(o.serviceA, Object.values(o.net1).sort(), 'the name answers both net1 addresses');
    for (const [p, a] of Object.entries(o.net1)) assert.deepEqual(o.perPodA[p], [a], `${p}.<svc> answers its own net1 address`);
    assert.equal(o.srv.length, 2, o.srv.join('\n'));
  });

  void test(
    'NodePort through the node agent on both nodes from an external client on the segment: each node address answers, equal shares (χ²), Local refuses where no local endpoint and keeps the source where there is one; the DaemonSet rolled under 10 req/s: 0 failed',
    { timeout: 900_000 },
    async () => {
      const o = await runTwoNodePort(node, log, 60);
      assert.deepEqual(Object.keys(o.agentPods).sort(), [NODE.name, NODE2.name], 'an agent pod per node');
      for (const [name, b] of Object.entries(o.cluster)) {
        assert.deepEqual(b.curls, Array(60).fill('ok'), `Cluster via ${name}`);
        assert.ok(o.chi2[name]?.uniform, `equal shares via ${name}: χ² ${o.chi2[name]?.statistic} > ${o.chi2[name]?.critical} (${JSON.stringify(b.answeredBy)})`);
        assert.deepEqual(b.sources, [NODE_ADDRESSES[name]], `Cluster masquerades to ${name}'s address`);
      }
      const withEndpoint = o.local[NODE.name];
      const without = o.local[NODE2.name];
      assert.deepEqual(withEndpoint?.curls, Array(10).fill('ok'), 'Local on the node with the endpoint answers');
      assert.deepEqual(withEndpoint?.sources, [EXTERNAL_CLIENT], 'and keeps the client address');
      assert.equal(withEndpoint?.answeredBy[o.localBackend], 10);
      assert.equal(without?.curls.filter((c) => c === 'ok').length, 0, `Local on the node without a local endpoint refuses: ${without?.curls.join(',')}`);
      assert.equal(
        Object.values(without?.answeredBy ?? {}).reduce((a, b) => a + b, 0),
        0,
        'no backend saw those requests',
      );
      assert.equal(o.rollout.failed, 0, `rollout under load: ${JSON.stringify(o.rollout.byResult)}`);
      assert.ok(o.rollout.sent >= 50, `load ran across the rollout (${o.rollout.sent} requests)`);
      assert.equal(o.rollout.after.filter((p) => o.rollout.before.includes(p)).length, 0, `every agent pod replaced: ${o.rollout.before.join(',')} -> ${o.rollout.after.join(',')}`);
      assert.deepEqual(o.leftAfterCleanup, [], 'the documented uninstall leaves nothing on either node');
    },
  );

  // The LoadBalancer pair shares one set-up (agent on both nodes, MetalLB, the client namespace);
  // the second test, or the first when it fails, takes it down before the node-loss test.
  let lb: TwoNodeLb | undefined;
  void test(
    "LoadBalancer Local with MetalLB on two nodes: announced (ServiceL2Status and the ARP answer on the segment) only from the node with the local endpoint, following it to the other node; the speaker counts our slices, and Kubernetes' primary-network ones too",
    { timeout: 600_000 },
    async () => {
      try {
        const set = await setupTwoNodeLb(node, log);
        lb = set;
        const o = await runLocalAnnounce(node, set, log);
        assert.ok(
          o.withdrawn.every((ms) => ms >= 0),
          `with no local endpoint left, the announcement is withdrawn (${o.withdrawn.join(', ')} ms)`,
        );
        for (const s of o.steps) {
          const backend = set.backends[s.node]?.pod ?? '';
          assert.deepEqual(s.announcement, { announcers: [s.node], arpNode: s.node }, `with its backend on ${s.node} only, ${s.node} alone announces (${s.ms} ms)`);
          assert.ok(s.ms >= 0, `announced from ${s.node}`);
          assert.deepEqual(
            s.slices.map((x) => [x.managedBy, x.endpoints.map((e) => e.node)]),
            [[MANAGED_BY, [s.node]]],
            'our slice is the only one, its endpoint on that node',
          );
          assert.deepEqual(s.burst.curls, Array(10).fill('ok'), `through the address with the backend on ${s.node}`);
          assert.equal(s.burst.answeredBy[backend], 10, JSON.stringify(s.burst.answeredBy));
          assert.deepEqual(s.burst.sources, [EXTERNAL_CLIENT], 'Local keeps the client address');
        }
        // Measured (docs/loadbalancer.md): the speaker counts every slice labelled with the Service's
        // name, so a Ready pod without net1 in Kubernetes' slice makes it announce from that pod's node,
        // where the agent has no endpoint to serve.
        const p = o.primaryOnly;
        assert.deepEqual(
          p.slices.filter((x) => x.managedBy === MANAGED_BY).flatMap((x) => x.endpoints),
          [],
          'our slice has no endpoint (the pod has no net1)',
        );
        assert.deepEqual(
          p.slices.filter((x) => x.managedBy === 'endpointslice-controller.k8s.io').flatMap((x) => x.endpoints.map((e) => e.node)),
          [NODE2.name],
          "Kubernetes' slice has the pod on the second node",
        );
        assert.deepEqual(p.announcement, { announcers: [NODE2.name], arpNode: NODE2.name }, "MetalLB announces from the node of Kubernetes' endpoint");
        assert.equal(p.curls.filter((c) => c === 'ok').length, 0, `nothing serves it: ${p.curls.join(',')}`);
      } catch (e) {
        await teardownTwoNodeLb(node, log);
        lb = undefined;
        throw e;
      }
    },
  );

  void test(
    "LoadBalancer failover under 10 req/s from the segment: the announcing node's speaker stopped (and, separately, its pod deleted), the address moves to the other node and requests recover; its node agent stopped, the address stays and the rules it left keep serving",
    { timeout: 600_000 },
    async () => {
      try {
        lb ??= await setupTwoNodeLb(node, log);
        const o = await runFailover(node, lb, log);
        const [speaker, deleted, agent] = o.disruptions;
        assert.ok(speaker && deleted && agent);
        assert.equal(speaker.failedBefore, 0);
        assert.ok(speaker.clientMovedMs >= 0, `the address moved to ${speaker.other}: ${JSON.stringify(speaker)}`);
        assert.ok(speaker.during.recoveredMs >= 0, `recovered after the speaker stop, while it was still stopped: ${JSON.stringify(speaker.during)}`);
        assert.ok(speaker.after.recoveredMs >= 0, `recovered after the speaker resumed: ${JSON.stringify(speaker.after)}`);
        // The speaker's pod deleted: it leaves the memberlist, the DaemonSet starts another.
        assert.equal(deleted.failedBefore, 0);
        assert.ok(deleted.clientMovedMs >= 0, `the address moved to ${deleted.other}: ${JSON.stringify(deleted)}`);
        assert.ok(deleted.during.recoveredMs >= 0, `recovered after the deletion, before the new speaker started: ${JSON.stringify(deleted.during)}`);
        assert.ok(deleted.after.recoveredMs >= 0, `recovered after the new speaker started: ${JSON.stringify(deleted.after)}`);
        assert.equal(agent.failedBefore, 0);
        assert.equal(agent.clientMovedMs, -1, `MetalLB does not know the agent: the address stays on ${agent.node}: ${JSON.stringify(agent)}`);
        assert.equal(agent.during.failed, 0, `the agent's rules keep serving while it is stopped: ${JSON.stringify(agent.during)}`);
        assert.equal(agent.after.failed, 0, JSON.stringify(agent.after));
      } finally {
        await teardownTwoNodeLb(node, log);
        lb = undefined;
      }
    },
  );

  // MultiNetworkPolicy across the nodes (test/node/twonode-policy.ts): a server and a client on each node.
  void test(
    "MultiNetworkPolicy across two nodes: servers accept only the labelled client, clients send only to servers (TCP and UDP, 80 and 81); the table whole with no policy, with the policies, after the label moved to the other node's client, and after the deletion",
    { timeout: 400_000 },
    async () => {
      const o = await runTwoNodePolicy(node, log);
      log(`policy across nodes in ${o.ms} ms (CRD ${o.crdAdded ? 'added' : 'present'}, policies admitted after ${o.admittedMs} ms)`);
      assert.deepEqual(Object.values(o.nodes).sort(), [NODE.name, NODE.name, NODE2.name, NODE2.name], JSON.stringify(o.nodes));
      assert.deepEqual(
        o.phases.map((p) => p.name),
        ['no policy', 'policies (granted mnp2n-c1)', 'relabelled (granted mnp2n-c2)', 'policies deleted'],
      );
      for (const p of o.phases) {
        assert.deepEqual(p.sync?.behind ?? [], [], `${p.name}: every sidecar synced`);
        assert.deepEqual(p.cells, [], `${p.name}: the table`);
        assert.deepEqual(p.odd, [], `${p.name}: answered by another pod than the one probed`);
        // The controller wrote the group before (or in the same poll as) the sidecars held it.
        if (p.sync?.groupMs !== undefined) assert.ok(p.sync.groupMs >= 0 && p.sync.groupMs <= p.sync.sidecarsMs, `${p.name}: group, then sidecars (${JSON.stringify(p.sync)})`);
      }
      // Allowed across nodes with the policies: node 1's granted client to node 2's server, then, relabelled, the reverse.
      assert.deepEqual(o.phases[1]?.crossAllowed, ['mnp2n-c1>mnp2n-s2', 'mnp2n-s1>mnp2n-c2', 'mnp2n-s2>mnp2n-c1']);
      assert.deepEqual(o.phases[2]?.crossAllowed, ['mnp2n-c2>mnp2n-s1', 'mnp2n-s1>mnp2n-c2', 'mnp2n-s2>mnp2n-c1']);
    },
  );

  void test(
    "a node going away: the second node cut off (kubelet killed, links down); its endpoint leaves both the multus-proxy slice and kube-proxy's, no failure after that; it comes back",
    { timeout: 600_000 },
    async () => {
      const o = await runNodeLoss(node, log);
      assert.deepEqual(o.failedBeforeCut, [], 'no request failed before the cut');
      assert.ok(o.nodeNotReadyMs > 0 && o.multusLeftMs > 0 && o.kubeProxyLeftMs > 0, JSON.stringify(o));
      assert.equal(o.multus.failedAfterLeft, 0, `multus-proxy failures after the endpoint left: ${JSON.stringify(o.multus)}`);
      assert.equal(o.kubeProxy.failedAfterLeft, 0, `kube-proxy failures after the endpoint left: ${JSON.stringify(o.kubeProxy)}`);
      // Both follow the pod's Ready condition set by the node controller: each left after the node
      // went NotReady (the Node read right after each slice showed it gone). How far apart they are
      // is measured by B11 (bench/b11-loadbalancer.ts), not here.
      assert.deepEqual(o.notReadyWhenLeft, { multus: true, kubeProxy: true }, `multus-proxy ${o.multusLeftMs} ms, kube-proxy ${o.kubeProxyLeftMs} ms, NotReady ${o.nodeNotReadyMs} ms`);
      assert.ok(o.backMs > 0);
    },
  );

  void test('teardown of both nodes leaves no process, interface, namespace, mount, iptables rule, cgroup, path or sysctl behind', { timeout: 300_000 }, async () => {
    const t = Date.now();
    const left = await node.stop();
    log(`teardown took ${Date.now() - t} ms`);
    assert.deepEqual(left, []);
  });
});
