/** Pure pieces of the two-node suite (test/node/twonode.ts): the blog's files as it changes them. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { load, loadAll } from 'js-yaml';
import { pinnedClient, spreadDeployment, type LoadLine } from '../../node/twonode.js';
import { outage } from '../../node/twonode-lb.js';
import { blogFile } from '../../node/cluster.js';

void test("spreadDeployment: the blog's Deployment plus one hostname spread constraint, everything else as in the file", () => {
  const before = loadAll(blogFile('deployment.yml')).filter(Boolean) as { kind: string; spec?: { template: { spec: Record<string, unknown> } } }[];
  const after = loadAll(spreadDeployment()).filter(Boolean) as typeof before;
  assert.equal(after.length, before.length);
  const d = after.find((o) => o.kind === 'Deployment');
  const c = d?.spec?.template.spec['topologySpreadConstraints'] as { topologyKey: string; whenUnsatisfiable: string; maxSkew: number }[];
  assert.deepEqual(
    c.map((x) => [x.topologyKey, x.whenUnsatisfiable, x.maxSkew]),
    [['kubernetes.io/hostname', 'DoNotSchedule', 1]],
  );
  delete d?.spec?.template.spec['topologySpreadConstraints'];
  assert.deepEqual(after, before);
});

void test("pinnedClient: the blog's client pod renamed and pinned by nodeName only", () => {
  const o = load(pinnedClient('c2', 'realnode2')) as { metadata: { name: string; annotations: Record<string, string> }; spec: { nodeName: string; containers: { name: string }[] } };
  assert.equal(o.metadata.name, 'c2');
  assert.equal(o.spec.nodeName, 'realnode2');
  assert.equal(o.spec.containers[0]?.name, 'fedora-net1');
  assert.equal(o.metadata.annotations['k8s.v1.cni.cncf.io/networks'], 'macvlan1');
});

void test('outage: failed requests in the window, when the failures ended, and the run of successes after them', () => {
  const at = (t: number, code: string): LoadLine => ({ t, code, url: 'http://10.1.1.200/' });
  const lines = [at(900, '000'), at(1000, '200'), at(1100, '000'), at(1200, '200'), at(1300, '000'), at(1400, '200'), at(1500, '200'), at(2100, '000')];
  assert.deepEqual(outage(lines, 1000, 2000), { sent: 6, failed: 2, firstFailMs: 100, lastFailMs: 300, recoveredMs: 400 });
  assert.deepEqual(outage(lines, 1350, 2000), { sent: 2, failed: 0, firstFailMs: -1, lastFailMs: -1, recoveredMs: 0 }, 'nothing failed: recovered at once');
  assert.deepEqual(outage(lines, 1400, 3000), { sent: 3, failed: 1, firstFailMs: 700, lastFailMs: 700, recoveredMs: -1 }, 'the last request failed: not recovered in the window');
  assert.deepEqual(outage([...lines].reverse(), 1000, 2000), outage(lines, 1000, 2000), 'order of the lines does not matter');
});
