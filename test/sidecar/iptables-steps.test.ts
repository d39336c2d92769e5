/**
 * A full iptables restore over the chains of ours a namespace holds (a restarted sidecar, a full
 * resync) in bounded steps (src/dataplane/iptables/steps.ts). Against the real kernel in
 * namespaces this test creates and removes:
 *  - a restarted dataplane over another state's rules (ports gone, endpoints changed, affinity
 *    switched, a chain of ours no state explains, a second jump to ours) leaves exactly the rules
 *    of ours the new state makes in an empty namespace, both families; a foreign chain stays;
 *  - it went in more than one step.
 * And, pure: every step within the bound; new chains declared before anything names them; the
 * set chains (dispatch, reject) rewritten only after every Service chain; stale chains flushed
 * before any is deleted.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createDataplane, type Dataplane } from '../../src/dataplane/index.js';
import { sidecarDataplaneOptions } from '../../cmd/sidecar/dataplane-options.js';
import { createTopology, type Pod, type Topology } from '../harness/netns.js';
import { restartState } from './render-fixtures.js';
import type { DesiredState } from '../../src/dataplane/core/model.js';
import { render } from '../../src/dataplane/core/incremental.js';
import { IptablesStage } from '../../src/dataplane/iptables/stage.js';
import { SIDECAR_LAYOUT, DISPATCH_CHAIN } from '../../src/dataplane/core/names.js';
import { planRestoreSteps } from '../../src/dataplane/iptables/steps.js';
import { NOTHING_EXISTING } from '../../src/dataplane/iptables/restore.js';
import { ownedLines } from './runtime-harness.js';

const state = (pod: Pod, later: boolean): DesiredState => restartState(pod.net1, 60, later);

void describe('iptables full restore over our chains: in bounded steps', () => {
  let topo: Topology;
  let pods: { steps: Pod; fresh: Pod };
  const dps: Dataplane[] = [];
  before(async () => {
    topo = await createTopology();
    pods = { steps: await topo.addPod('steps'), fresh: await topo.addPod('fresh') };
  });
  after(async () => {
    for (const d of dps) d.close();
    await topo.teardown();
  });
  const make = (pod: Pod): Dataplane => {
    const dp = createDataplane({ ...sidecarDataplaneOptions({ cleanup: false, iptablesBackend: 'nft', elementWriter: false }, 'iptables'), netns: pod.ns });
    dps.push(dp);
    return dp;
  };
  const save = async (pod: Pod): Promise<string> => (await topo.run(pod, ['iptables-save'])).stdout + (await topo.run(pod, ['ip6tables-save'])).stdout;

  void test('a restart over another state and leftovers of ours: exactly the rules the new state makes from nothing', async () => {
    const pod = pods.steps;
    await make(pod).sync(state(pod, false), { full: true });
    await topo.run(pod, ['iptables', '-t', 'nat', '-N', 'MPX-SVC-STALETEST']);
    await topo.run(pod, ['iptables', '-t', 'nat', '-A', 'MPX-SVC-STALETEST', '-j', 'RETURN']);
    await topo.run(pod, ['iptables', '-t', 'nat', '-N', 'FOREIGN-CHAIN']);
    const r = await make(pod).sync(state(pod, true), { full: true });
    assert.deepEqual(r.warnings, []);
    await make(pods.fresh).sync(state(pods.fresh, true), { full: true });
    const got = await save(pod);
    assert.doesNotMatch(got, /STALETEST/);
    assert.match(got, /^:FOREIGN-CHAIN /m, 'a foreign chain stays');
    assert.deepEqual(ownedLines(got).sort(), ownedLines(await save(pods.fresh)).sort());
  });
});

void describe('iptables full restore over our chains: the steps (pure)', () => {
  const rules = (s: DesiredState) => new IptablesStage(SIDECAR_LAYOUT).step(render(s)).v4;
  const pod = { net1: { ipv4: '192.168.101.2', ipv6: 'fd00:101::2' } } as Pod;
  const next = rules(state(pod, true));
  const prev = rules(state(pod, false));
  const have = { filter: { chains: [...prev.filter.keys()], jumps: [] }, nat: { chains: [...prev.nat.keys(), 'MPX-SVC-STALETEST'], jumps: [] } };

  void test('bounded steps in a safe order', () => {
    const plan = planRestoreSteps(next, have, SIDECAR_LAYOUT, 100);
    const steps = plan.steps ?? [];
    assert.ok(steps.length >= 4, `${steps.length} steps`);
    for (const s of steps.slice(1)) assert.ok(s.split('\n').filter((l) => l.startsWith('-A ') || l.startsWith(':') || l.startsWith('-X')).length <= 100 + 20, 'a step past the bound');
    const at = (re: RegExp): number => steps.findIndex((s) => re.test(s));
    const dispatch = at(new RegExp(`^-A ${DISPATCH_CHAIN} `, 'm'));
    const lastService = steps.reduce((k, s, i) => (/^-A MPX-SVC-/m.test(s) ? i : k), -1);
    assert.ok(dispatch > lastService, 'the dispatch is rewritten before a Service chain it names');
    assert.ok(at(/^-X MPX-SVC-STALETEST$/m) > at(/^:MPX-SVC-STALETEST /m), 'deleted before flushed');
    assert.ok(at(/^:MPX-SVC-STALETEST /m) > dispatch, 'flushed while the dispatch may name it');
    // The chains the old rules did not have are declared empty in the first step.
    const added = [...next.nat.keys()].find((c) => !prev.nat.has(c));
    assert.ok(added !== undefined && new RegExp(`^:${added} `, 'm').test(steps[0] ?? ''));
    assert.equal(planRestoreSteps(next, NOTHING_EXISTING, SIDECAR_LAYOUT).steps?.[0]?.includes(':MPX-'), true);
  });
});
