/**
 * The optional node-agent component: what it adds to an install (DaemonSet, least-privilege RBAC)
 * and that it changes nothing else, rendered with the real kustomize.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { render, type Rendered } from './kustomize.js';
import { DEPLOYMENT_MALLOC_ENV, NODE_MEMORY_FLAGS } from '../../src/memory-settings.js';

const id = (o: Rendered): string => `${o.kind ?? ''}/${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

void describe('deploy/components/node-agent', () => {
  void test('adds exactly the DaemonSet and its RBAC to the default install, nothing else changes', async () => {
    const plain = await render('deploy/overlays/cert-manager');
    const withAgent = await render('deploy/overlays/node-agent');
    const added = withAgent.filter((o) => !plain.some((p) => id(p) === id(o))).map(id).sort();
    assert.deepEqual(added, [
      'ClusterRole//multus-proxy-node',
      'ClusterRoleBinding//multus-proxy-node',
      'DaemonSet/multus-proxy-node/multus-proxy-node',
      'Namespace//multus-proxy-node',
      'Role/multus-proxy-node/multus-proxy-webhook-reads-node-agent',
      'RoleBinding/multus-proxy-node/multus-proxy-webhook-reads-node-agent',
      'ServiceAccount/multus-proxy-node/multus-proxy-node',
    ]);
    for (const p of plain) assert.deepEqual(withAgent.find((o) => id(o) === id(p)), p, `${id(p)} unchanged`);
  });
  void test('DaemonSet: host network, NET_ADMIN and NET_RAW only, the tagged image, NODE_NAME from spec.nodeName, readiness on /readyz', async () => {
    const ds = (await render('deploy/overlays/node-agent')).find((o) => o.kind === 'DaemonSet') as Rendered & { spec: { template: { spec: Record<string, unknown> & { containers: Record<string, unknown>[] } } } };
    const pod = ds.spec.template.spec;
    assert.equal(pod['hostNetwork'], true);
    assert.equal(pod['serviceAccountName'], 'multus-proxy-node');
    const c = pod.containers[0] as { image: string; command: string[]; securityContext: { capabilities: { add: string[]; drop: string[] }; allowPrivilegeEscalation: boolean; privileged?: boolean }; env: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[]; readinessProbe: { httpGet: { path: string } } };
    assert.equal(c.image, 'multus-proxy:0.1.0');
    assert.deepEqual(c.command, ['node', ...NODE_MEMORY_FLAGS, '/app/dist/node-agent.js'], 'node with the memory flags (src/memory-settings.ts)');
    for (const [k, v] of Object.entries(DEPLOYMENT_MALLOC_ENV)) assert.equal(c.env.find((e) => e.name === k)?.value, v, `env ${k}`);
    assert.deepEqual(c.securityContext.capabilities, { add: ['NET_ADMIN', 'NET_RAW'], drop: ['ALL'] });
    assert.equal(c.securityContext.allowPrivilegeEscalation, false);
    assert.equal(c.securityContext.privileged, undefined);
    assert.equal(c.env.find((e) => e.name === 'NODE_NAME')?.valueFrom?.fieldRef?.fieldPath, 'spec.nodeName');
    assert.match(c.readinessProbe.httpGet.path, /^\/readyz\?wait=\d+$/);
  });
  void test("its own namespace admits it: Pod Security 'privileged' there (hostNetwork, hostPath, NET_ADMIN), 'restricted' kept for multus-proxy-system", async () => {
    const all = await render('deploy/overlays/node-agent');
    const ns = (name: string): Record<string, string> | undefined => all.find((o) => o.kind === 'Namespace' && o.metadata?.name === name)?.metadata?.labels;
    const ds = all.find((o) => o.kind === 'DaemonSet');
    assert.equal(ds?.metadata?.namespace, 'multus-proxy-node');
    assert.equal(ns('multus-proxy-node')?.['pod-security.kubernetes.io/enforce'], 'privileged');
    assert.equal(ns('multus-proxy-system')?.['pod-security.kubernetes.io/enforce'], 'restricted');
  });
  void test('RBAC: read Services, EndpointSlices, NADs and Nodes; create Events; nothing else', async () => {
    const role = (await render('deploy/overlays/node-agent')).find((o) => o.kind === 'ClusterRole' && o.metadata?.name === 'multus-proxy-node') as Rendered & { rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[] };
    const grants = role.rules.flatMap((r) => r.resources.flatMap((res) => r.verbs.map((v) => `${r.apiGroups[0] ?? ''}/${res}:${v}`))).sort();
    assert.deepEqual(grants, [
      '/events:create',
      '/nodes:get', '/nodes:list', '/nodes:watch',
      '/services:get', '/services:list', '/services:watch',
      'discovery.k8s.io/endpointslices:get', 'discovery.k8s.io/endpointslices:list', 'discovery.k8s.io/endpointslices:watch',
      'k8s.cni.cncf.io/network-attachment-definitions:get', 'k8s.cni.cncf.io/network-attachment-definitions:list', 'k8s.cni.cncf.io/network-attachment-definitions:watch',
    ].sort());
  });
  void test('the webhook may get the agent\'s DaemonSet, that one object, nothing else', async () => {
    const all = await render('deploy/overlays/node-agent');
    const role = all.find((o) => o.kind === 'Role' && o.metadata?.name === 'multus-proxy-webhook-reads-node-agent') as Rendered & { rules: unknown[] };
    assert.deepEqual(role.rules, [{ apiGroups: ['apps'], resources: ['daemonsets'], resourceNames: ['multus-proxy-node'], verbs: ['get'] }]);
    const binding = all.find((o) => o.kind === 'RoleBinding' && o.metadata?.name === 'multus-proxy-webhook-reads-node-agent') as Rendered & { subjects: unknown[] };
    assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: 'multus-proxy-webhook', namespace: 'multus-proxy-system' }]);
  });
});
