/**
 * Switching rule back ends on a running pod (real iptables, real nftables, real traffic in
 * namespaces this test creates): the back end that starts writes its rules, then removes what the
 * other one left, so exactly one back end's rules serve the cluster IP, each way round.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createDataplane } from '../../src/dataplane/index.js';
import { createExec } from '../../src/dataplane/tuning/spare-exec.js';
import { familiesWithTables } from '../../src/dataplane/iptables/tables-present.js';
import { fileReader } from '../../src/dataplane/core/exec.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';
import { httpRequests, type Pod } from '../harness/netns.js';
import { HTTP_PORT, WEB_V4, createEnv, endpoints, saveText, state, tally, webTarget, type Env } from './dataplane-env.js';

void describe('sidecar dataplane: switching back ends', () => {
  let env: Env;
  before(async () => {
    env = await createEnv(2);
  });
  after(async () => env.topo.teardown());
  const nftTables = async (): Promise<string> => (await env.topo.run(env.client, ['nft', 'list', 'tables'])).stdout;
  const served = async (): Promise<void> => {
    const counts = tally(await httpRequests(env.topo, env.client, `http://${WEB_V4}:80/`, 20));
    assert.equal(counts.size, 2, JSON.stringify([...counts]));
  };

  void test("iptables -> nftables -> iptables: each start removes the other back end's rules, traffic served throughout", async () => {
    const want = state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT))]);
    const ipt = createDataplane({ netns: env.client.ns, backendKind: 'iptables' });
    await ipt.sync(want, { full: true });
    assert.match(await saveText(env), /^:MPX-SERVICES/m);
    await served();

    const nft = createDataplane({ netns: env.client.ns, backendKind: 'nftables' });
    const r1 = await nft.sync(want, { full: true });
    assert.equal(r1.backend, 'nftables');
    assert.deepEqual(r1.warnings, []);
    assert.doesNotMatch(await saveText(env), /MPX-/, 'iptables rules of ours left after nftables took over');
    assert.match(await nftTables(), /table inet multus_proxy/);
    await served();

    const back = createDataplane({ netns: env.client.ns }); // auto: iptables
    const r2 = await back.sync(want, { full: true });
    assert.equal(r2.backend, 'nft');
    assert.doesNotMatch(await nftTables(), /multus_proxy/, 'our nftables table left after iptables took over');
    assert.match(await saveText(env), /^:MPX-SERVICES/m);
    await served();
  });

  /** The client's state, in another pod of the topology (its own net1 address for the routes). */
  const stateIn = (pod: Pod): DesiredState => {
    const want = state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT))]);
    return { ...want, interfaces: [{ ...env.iface, ipv4: [pod.net1.ipv4], ipv6: [pod.net1.ipv6] }] };
  };
  const ours = async (pod: Pod, bin: string): Promise<string[]> => (await env.topo.run(pod, [bin])).stdout.split('\n').filter((l) => l.includes('MPX-'));

  void test('the check before removing the other back end (tables-present.ts) sees each flavour and family on its own', async () => {
    const pod = await env.topo.addPod('present');
    const exec = createExec(pod.ns);
    const has = (flavour: 'nft' | 'legacy'): Promise<number[]> => familiesWithTables(exec, fileReader(exec), flavour, [4, 6]);
    assert.deepEqual([await has('nft'), await has('legacy')], [[], []], 'a fresh namespace has no iptables table');
    await env.topo.run(pod, ['ip6tables-nft', '-t', 'nat', '-N', 'MPX-LEFT']);
    assert.deepEqual([await has('nft'), await has('legacy')], [[6], []]);
    await env.topo.run(pod, ['iptables-legacy', '-t', 'filter', '-N', 'MPX-LEFT']);
    assert.deepEqual([await has('nft'), await has('legacy')], [[6], [4]]);
    await env.topo.run(pod, ['iptables-nft', '-t', 'filter', '-N', 'MPX-LEFT']);
    await env.topo.run(pod, ['ip6tables-legacy', '-t', 'nat', '-N', 'MPX-LEFT']);
    assert.deepEqual(
      [await has('nft'), await has('legacy')],
      [
        [4, 6],
        [4, 6],
      ],
    );
  });

  void test('nftables after iptables left rules in one flavour and family only (legacy IPv4, nft IPv6): none is left', async () => {
    const pod = await env.topo.addPod('leftover');
    const want = stateIn(pod);
    // Legacy rules of ours as the iptables back end writes them (both families' chains, IPv4 DNAT).
    await createDataplane({ netns: pod.ns, backendKind: 'iptables', iptablesFlavor: 'legacy' }).sync(want, { full: true });
    assert.ok(
      (await ours(pod, 'iptables-legacy-save')).some((l) => l.includes('DNAT')),
      'the legacy back end wrote its rules',
    );
    assert.deepEqual(await ours(pod, 'iptables-nft-save'), [], 'no nft-flavour rules of ours yet');
    // And a chain of ours in ip6tables-nft alone, with its jump: the only ip6 nftables-flavour table.
    await env.topo.run(pod, ['ip6tables-nft', '-t', 'nat', '-N', 'MPX-SERVICES']);
    await env.topo.run(pod, ['ip6tables-nft', '-t', 'nat', '-A', 'OUTPUT', '-j', 'MPX-SERVICES']);

    const r = await createDataplane({ netns: pod.ns, backendKind: 'nftables' }).sync(want, { full: true });
    assert.deepEqual(r.warnings, []);
    for (const bin of ['iptables-legacy-save', 'ip6tables-legacy-save', 'iptables-nft-save', 'ip6tables-nft-save'])
      assert.deepEqual(await ours(pod, bin), [], `${bin}: rules of ours left after nftables took over`);
    assert.match((await env.topo.run(pod, ['nft', 'list', 'tables'])).stdout, /table inet multus_proxy/);
  });

  void test('nftables drift: a removed map element or hook rule is found by the quick check, a flushed Service chain by the deep one; the next sync repairs', async () => {
    const want = state(env, [webTarget(endpoints(env.backends, 4, HTTP_PORT))]);
    const dp = createDataplane({ netns: env.client.ns, backendKind: 'nftables' });
    await dp.sync(want, { full: true });
    assert.equal(await dp.checkDrift({ deep: false }), undefined);
    assert.equal(await dp.checkDrift({ deep: true }), undefined);
    const nft = (cmd: string): Promise<unknown> => env.topo.run(env.client, ['nft', ...cmd.split(' ')]);

    await nft(`delete element inet multus_proxy services-v4 { ${WEB_V4} . tcp . 80 }`);
    assert.match((await dp.checkDrift({ deep: false })) ?? '', /^nftables services-v4: 0 elements, 1 written$/);
    const repaired = await dp.sync(want, { full: false });
    assert.equal(repaired.full, true, 'drift forgets what was applied: the next sync is a full one');
    assert.equal(await dp.checkDrift({ deep: true }), undefined);
    await served();

    await nft('flush chain inet multus_proxy nat-output');
    assert.match((await dp.checkDrift({ deep: false })) ?? '', /^nftables nat-output: 0 rules, 2 written$/);
    await dp.sync(want, { full: false });
    await served();

    const listing = (await env.topo.run(env.client, ['nft', 'list', 'table', 'inet', 'multus_proxy'])).stdout;
    const svc = /chain (MPX-SVC-\S+) \{/.exec(listing)?.[1];
    assert.ok(svc !== undefined, listing);
    await nft(`flush chain inet multus_proxy ${svc}`);
    assert.equal(await dp.checkDrift({ deep: false }), undefined, 'the quick check does not list Service chains');
    // One rule: the DNAT through the Service's endpoint map.
    assert.match((await dp.checkDrift({ deep: true })) ?? '', new RegExp(`^nftables ${svc}: 0 rules, 1 written$`));
    await dp.sync(want, { full: false });
    await served();
    assert.equal(await dp.checkDrift({ deep: true }), undefined);

    // An endpoint map that lost an element (the deep check counts them) is repaired by the next sync too.
    const map = /map (MPX-EPS-\S+) \{/.exec(listing)?.[1];
    assert.ok(map !== undefined, listing);
    await nft(`delete element inet multus_proxy ${map} { 0-2147483646 }`);
    assert.match((await dp.checkDrift({ deep: true })) ?? '', new RegExp(`^nftables ${map}: 1 elements, 2 written$`));
    await dp.sync(want, { full: false });
    await served();
    assert.equal(await dp.checkDrift({ deep: true }), undefined);
  });
});
