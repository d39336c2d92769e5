/**
 * The packet tracer against the kernel: every row of the shared Service case table
 * (test/harness/tracer/cases.ts) is synced, in order, by the real dataplane into a client
 * namespace and by the project's renderers into the fake back end, and each probe is answered by
 * real connections from the client (which backends answered over many tries, or refused, or
 * nothing) and by the tracer. The two must agree, and both must say what the row expects. Both
 * back ends, iptables in both flavours, nftables in one table and spread over shard tables.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createDataplane, type Dataplane, type DataplaneOptions } from '../../src/dataplane/index.js';
import { httpRequests, udpRequests, type Reply } from '../harness/netns.js';
import { FakeSidecar, type FakeSidecarOptions } from '../harness/tracer/sidecar.js';
import { BACKENDS as PODS, CLIENT, SERVICE_CASES, expected, reachText, stickyText, traceProbe, type Observation, type PodName, type Probe } from '../harness/tracer/cases.js';
import { createEnv, type Env } from './dataplane-env.js';

interface Variant {
  readonly name: string;
  readonly dataplane: DataplaneOptions;
  readonly fake: { readonly kind: 'iptables' | 'nftables'; readonly opts?: FakeSidecarOptions };
}

const VARIANTS: readonly Variant[] = [
  { name: 'iptables, nft flavour', dataplane: { backendKind: 'iptables', iptablesFlavor: 'nft' }, fake: { kind: 'iptables' } },
  { name: 'iptables, legacy flavour', dataplane: { backendKind: 'iptables', iptablesFlavor: 'legacy' }, fake: { kind: 'iptables' } },
  { name: 'nftables', dataplane: { backendKind: 'nftables' }, fake: { kind: 'nftables' } },
  { name: 'nftables over shard tables (one Service port each)', dataplane: { backendKind: 'nftables', nftPortsPerShard: 1 }, fake: { kind: 'nftables', opts: { portsPerShard: 1 } } },
];

/** Tries per probe that gets answers: a backend of three is missed with p = 3 × (2/3)^36 ≈ 1e-6. */
const TRIES = 36;

async function requests(env: Env, probe: Probe, count: number, timeoutMs: number): Promise<Reply[]> {
  if (probe.protocol === 'tcp') return httpRequests(env.topo, env.client, `http://${probe.dst.includes(':') ? `[${probe.dst}]` : probe.dst}:${probe.port}/`, count, timeoutMs);
  if (probe.protocol === 'udp') return udpRequests(env.topo, env.client, probe.dst, probe.port, count, { timeoutMs, socketEach: true });
  throw new Error(`no ${probe.protocol} client in the netns harness`);
}

/** What the client sees on the kernel: the same words as the tracer's (cases.ts Observation). */
async function kernelProbe(env: Env, probe: Probe): Promise<Observation> {
  const first = await requests(env, probe, 2, 1000);
  const errors = first.map((r) => r.error);
  if (errors.every((e) => e === 'ECONNREFUSED')) {
    for (const r of first) assert.ok(r.ms < 1000, `refusal took ${r.ms} ms`);
    return 'refused';
  }
  if (errors.every((e) => e !== undefined && e !== 'ECONNREFUSED')) return 'unanswered';
  const replies = [...first, ...(await requests(env, probe, TRIES - 2, 2000))];
  const failed = replies.filter((r) => r.error !== undefined);
  if (failed.length > 0) return `mixed: ${failed.length} of ${replies.length} failed (${[...new Set(failed.map((r) => r.error))].join(', ')})`;
  const peers = new Set(replies.map((r) => r.peer));
  assert.deepEqual(peers, new Set([probe.dst.includes(':') ? CLIENT.ipv6 : CLIENT.ipv4]), 'the backend sees the client address');
  const names = new Set(replies.map((r) => r.name ?? '?'));
  // One backend for every connection, among the candidates: what affinity does.
  if ('sticky' in probe.expect && names.size === 1 && probe.expect.sticky.includes([...names][0] as PodName)) return stickyText(probe.expect.sticky);
  return reachText(names);
}

/**
 * A dropped connection and one nobody answers look the same from the client (a SYN retransmitted
 * until it times out): the kernel says both are unanswered, where the tracer tells our drop from an
 * untouched packet. Either way the kernel shows it was neither refused nor sent to an endpoint.
 */
const asKernelSees = (o: Observation): Observation => (o === 'dropped' ? 'unanswered' : o);

for (const v of VARIANTS)
  void describe(`tracer and kernel agree (${v.name})`, () => {
    let env: Env;
    let dp: Dataplane;
    const fake = new FakeSidecar(v.fake.kind, v.fake.opts);
    before(async () => {
      env = await createEnv(3);
      // The table's addresses are the topology's.
      assert.equal(env.client.net1.ipv4, CLIENT.ipv4);
      assert.equal(env.client.net1.ipv6, CLIENT.ipv6);
      env.backends.forEach((b) => assert.deepEqual({ ipv4: b.net1.ipv4, ipv6: b.net1.ipv6 }, PODS[b.name as PodName]));
      dp = createDataplane({ netns: env.client.ns, ...v.dataplane });
    });
    after(async () => {
      dp.close();
      await env.topo.teardown();
    });

    SERVICE_CASES.forEach(
      (row, i) =>
        void test(row.name, async () => {
          await dp.sync(row.state(), { full: i === 0 });
          fake.sync(row.state(), i === 0);
          for (const probe of row.probes) {
            const what = `${probe.protocol} ${probe.dst}:${probe.port}`;
            const traced = traceProbe(fake, probe);
            const kernel = await kernelProbe(env, probe);
            assert.equal(kernel, asKernelSees(traced), `${what}: the kernel did "${kernel}", the tracer says "${traced}"`);
            assert.equal(traced, expected(probe.expect), `${what}: the row expects "${expected(probe.expect)}"`);
          }
        }),
    );
  });
