/** Pure pieces of the two-node suite (test/node/twonode.ts): the blog's files as it changes them. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { load, loadAll } from 'js-yaml';
import { pinnedClient, spreadDeployment } from '../../node/twonode.js';
import { blogFile } from '../../node/cluster.js';

void test("spreadDeployment: the blog's Deployment plus one hostname spread constraint, everything else as in the file", () => {
  const before = loadAll(blogFile('deployment.yml')).filter(Boolean) as { kind: string; spec?: { template: { spec: Record<string, unknown> } } }[];
  const after = loadAll(spreadDeployment()).filter(Boolean) as typeof before;
  assert.equal(after.length, before.length);
  const d = after.find((o) => o.kind === 'Deployment');
  const c = d?.spec?.template.spec['topologySpreadConstraints'] as { topologyKey: string; whenUnsatisfiable: string; maxSkew: number }[];
  assert.deepEqual(c.map((x) => [x.topologyKey, x.whenUnsatisfiable, x.maxSkew]), [['kubernetes.io/hostname', 'DoNotSchedule', 1]]);
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
