/**
 * MultiNetworkPolicy: the packet tracer against the kernel. Every row of the policy truth table
 * (test/harness/tracer/policy-cases.ts) goes through the real sidecar dataplane (nftables) into
 * the policed pod's namespace, in order (a partial change after the first), and through the
 * project's renderer into the fake; each new-connection probe is answered by real TCP and UDP
 * traffic between the pods and by the tracer. The two must agree, and both must say what the row
 * expects. IPv6 probes start from an empty neighbour cache, so neighbour discovery runs under the
 * policy; a probe from `p` with its ingress isolated passes only if the reply does (conntrack).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createDataplane, withPodPolicy, type Dataplane, type DesiredState } from '../../src/dataplane/index.js';
import { createTopology, httpRequests, startBackend, udpRequests, type Pod, type Topology } from '../harness/netns.js';
import { FakeSidecar } from '../harness/tracer/sidecar.js';
import { NET1, NET2, PEERS, POLICED, POLICY_CASES, TCP_PORT, UDP_PORT, policyPacket, probeName, type PeerName, type PolicyProbe } from '../harness/tracer/policy-cases.js';

/** What the kernel does with a probe's new connection: a reply, or none within the timeout. */
async function kernelPasses(topo: Topology, pods: Readonly<Record<'p' | PeerName, Pod>>, probe: PolicyProbe): Promise<boolean> {
  const peer = PEERS[probe.peer];
  const from = probe.dir === 'ingress' ? pods[probe.peer] : pods.p;
  const to = probe.dir === 'ingress' ? POLICED[peer.iface] : peer;
  const dst = probe.family === 4 ? to.ipv4 : to.ipv6;
  const replies =
    probe.protocol === 'tcp'
      ? await httpRequests(topo, from, `http://${probe.family === 6 ? `[${dst}]` : dst}:${TCP_PORT}/`, 1, 1500)
      : await udpRequests(topo, from, dst, UDP_PORT, 1, { timeoutMs: 1500 });
  const r = replies[0];
  assert.ok(r !== undefined && (r.error === undefined || r.error === 'ETIMEDOUT'), `${probeName(probe)}: ${JSON.stringify(r)} (a reply or a timeout, never a refusal)`);
  return r.error === undefined;
}

/** Packets counted by the policy's named drop counters. */
async function dropped(topo: Topology, p: Pod): Promise<number> {
  const out = await topo.run(p, ['nft', 'list', 'counters', 'table', 'inet', 'multus_proxy'], { allowFail: true });
  return [...out.stdout.matchAll(/packets (\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
}

void describe('policy: tracer and kernel agree (nftables)', () => {
  let topo: Topology;
  let pods: Record<'p' | PeerName, Pod>;
  let dp: Dataplane;
  let base: DesiredState;
  const fake = new FakeSidecar('nftables');
  before(async () => {
    topo = await createTopology();
    const p = await topo.addPod('p', { net2: true });
    const a = await topo.addPod('a');
    const b = await topo.addPod('b');
    const c = await topo.addPod('c');
    const d = await topo.addPod('d', { net2: true });
    pods = { p, a, b, c, d };
    // The cases' addresses are the topology's.
    assert.deepEqual({ net1: p.net1, net2: p.net2 }, POLICED);
    for (const n of ['a', 'b', 'c'] as const) assert.deepEqual(pods[n].net1, { ipv4: PEERS[n].ipv4, ipv6: PEERS[n].ipv6 });
    assert.deepEqual(d.net2, { ipv4: PEERS.d.ipv4, ipv6: PEERS.d.ipv6 });
    await startBackend(topo, p, { httpPort: TCP_PORT, udpPort: UDP_PORT, addresses: [p.net1.ipv4, p.net1.ipv6, POLICED.net2.ipv4, POLICED.net2.ipv6] });
    for (const n of ['a', 'b', 'c'] as const) await startBackend(topo, pods[n], { httpPort: TCP_PORT, udpPort: UDP_PORT });
    await startBackend(topo, d, { httpPort: TCP_PORT, udpPort: UDP_PORT, addresses: [PEERS.d.ipv4, PEERS.d.ipv6] });
    const [ns1, name1] = NET1.split('/') as [string, string];
    const [ns2, name2] = NET2.split('/') as [string, string];
    base = {
      targets: [],
      interfaces: [
        { network: { namespace: ns1, name: name1 }, interface: 'net1', ipv4: [p.net1.ipv4], ipv6: [p.net1.ipv6] },
        { network: { namespace: ns2, name: name2 }, interface: 'net2', ipv4: [POLICED.net2.ipv4], ipv6: [POLICED.net2.ipv6] },
      ],
    };
    dp = createDataplane({ netns: p.ns, backendKind: 'nftables' });
  });
  after(async () => {
    dp?.close();
    await topo?.teardown();
  });

  POLICY_CASES.forEach(
    (c, i) =>
      void test(c.name, async () => {
        const state = withPodPolicy(base, c.policy);
        await dp.sync(state, { full: i === 0 });
        fake.sync(state, i === 0);
        assert.equal(await dp.checkDrift({ deep: true }), undefined, 'the namespace holds what was written, policy chains included');
        const before = await dropped(topo, pods.p);
        for (const probe of c.probes.filter((x) => x.kind === undefined)) {
          // Neighbour discovery runs again under this row's policy.
          for (const pod of Object.values(pods)) await topo.run(pod, ['ip', 'neigh', 'flush', 'all'], { allowFail: true });
          const { pkt, path } = policyPacket(probe);
          const traced = fake.trace(pkt, path).every((o) => o.verdict.kind === 'accept');
          const kernel = await kernelPasses(topo, pods, probe);
          assert.equal(kernel, traced, `${probeName(probe)}: the kernel ${kernel ? 'passed' : 'dropped'} it, the tracer ${traced ? 'passes' : 'drops'} it`);
          assert.equal(traced, probe.pass, `${probeName(probe)}: the row expects it ${probe.pass ? 'to pass' : 'dropped'}`);
        }
        if (c.probes.some((x) => x.kind === undefined && !x.pass)) assert.ok((await dropped(topo, pods.p)) > before, 'the drops are counted by the named counters');
      }),
  );

  void test('the policy removed: everything passes again, and its chains are gone', async () => {
    await dp.sync(base, { full: false });
    const listing = (await topo.run(pods.p, ['nft', 'list', 'table', 'inet', 'multus_proxy'])).stdout;
    assert.doesNotMatch(listing, /policy-input|MPX-P/);
    for (const probe of [POLICY_CASES[0]?.probes[3], POLICY_CASES[9]?.probes[0]]) if (probe !== undefined) assert.equal(await kernelPasses(topo, pods, probe), true, probeName(probe));
  });
});
