/**
 * The node agent re-checks what the webhook checks (cmd/node-agent/admission.ts, slim.ts): a
 * tenant's Service on a network not shared with it, over its budget per object, or past its
 * namespace's share of a network is left out, with a problem that names it; other namespaces'
 * Services are planned as before. Through planNode, from Kubernetes objects.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  MANAGED_BY,
  MANAGED_BY_LABEL,
  NODE_ADDRESSES_ANNOTATION,
  NODE_PARENTS_ANNOTATION,
  PROXY_NAME,
  PROXY_NAME_LABEL,
  SERVICE_NAME_LABEL,
  SERVICE_NAMESPACES_ANNOTATION,
  SERVICE_NETWORK_ANNOTATION,
} from '../../../src/keys.js';
import type { NetworkAttachmentDefinition, V1EndpointSlice, V1Service } from '../../../src/kube/types.js';
import { planNode, type NodeInput } from '../../../cmd/node-agent/state.js';
import { slimNad, slimNodeService } from '../../../cmd/node-agent/slim.js';
import { DEFAULT_MASQUERADE_MARK } from '../../../cmd/node-agent/rules.js';

const nad = (annotations: Record<string, string> = {}, config = JSON.stringify({ type: 'macvlan', master: 'ens4' })): NetworkAttachmentDefinition => ({
  metadata: { name: 'good', namespace: 'demo', annotations },
  spec: { config },
});
let ip = 10;
const svc = (ns: string, name: string, net: string, ports = 1): V1Service => ({
  metadata: { name, namespace: ns, labels: { [PROXY_NAME_LABEL]: PROXY_NAME }, annotations: { [SERVICE_NETWORK_ANNOTATION]: net } },
  spec: {
    type: 'NodePort',
    clusterIP: `10.96.0.${ip}`,
    clusterIPs: [`10.96.0.${ip++}`],
    ports: Array.from({ length: ports }, (_, i) => ({ name: `p${i}`, port: 80 + i, protocol: 'TCP', nodePort: 30000 + ip * 200 + i })),
  },
});
const slice = (ns: string, service: string, net: string): V1EndpointSlice => ({
  metadata: { name: `${service}-x`, namespace: ns, labels: { [SERVICE_NAME_LABEL]: service, [MANAGED_BY_LABEL]: MANAGED_BY }, annotations: { [SERVICE_NETWORK_ANNOTATION]: net } },
  addressType: 'IPv4',
  ports: [{ name: 'p0', port: 8080, protocol: 'TCP' }],
  endpoints: [{ addresses: ['192.168.101.3'], nodeName: 'w1', conditions: { ready: true } }],
});
const input = (services: V1Service[], nads: NetworkAttachmentDefinition[], slices: V1EndpointSlice[] = []): NodeInput => ({
  nodeName: 'w1',
  node: {
    metadata: { name: 'w1', annotations: { [NODE_ADDRESSES_ANNOTATION]: 'demo/good=192.168.101.211/24', [NODE_PARENTS_ANNOTATION]: 'demo/good=ens4' } },
    status: { addresses: [{ type: 'InternalIP', address: '10.0.0.11' }] },
  },
  masqueradeMark: DEFAULT_MASQUERADE_MARK,
  nads: nads.map(slimNad),
  services: services.map(slimNodeService),
  slices,
});
const served = (p: ReturnType<typeof planNode>): string[] => [...new Set(p.state.clusterTargets.map((t) => t.service))].sort();

void describe('node agent: tenant Services are re-checked', () => {
  void test('a network not shared with the namespace: the Service is left out, with NetworkNotShared naming it; its stale slice is not used; shared: served', () => {
    const own = svc('demo', 'blog', 'good');
    const tenant = svc('aaa', 'grab', 'demo/good');
    const unshared = planNode(input([own, tenant], [nad()], [slice('demo', 'blog', 'demo/good'), slice('aaa', 'grab', 'demo/good')]));
    assert.deepEqual(served(unshared), ['demo/blog']);
    const p = unshared.problems.find((x) => x.reason === 'NetworkNotShared');
    assert.equal(p?.namespace, 'aaa');
    assert.equal(p?.name, 'grab');
    assert.match(p?.message ?? '', /NetworkAttachmentDefinition demo\/good belongs to another namespace and is not shared with namespace aaa/);
    assert.deepEqual(
      unshared.refused.map((r) => r.reason),
      ['NetworkNotShared'],
    );
    const shared = planNode(input([own, tenant], [nad({ [SERVICE_NAMESPACES_ANNOTATION]: 'aaa' })], [slice('demo', 'blog', 'demo/good'), slice('aaa', 'grab', 'demo/good')]));
    assert.deepEqual(served(shared), ['aaa/grab', 'demo/blog']);
    assert.deepEqual(shared.refused, []);
  });

  void test('a being-deleted Service passes the same checks', () => {
    const tenant = svc('aaa', 'doomed', 'demo/good');
    tenant.metadata = { ...tenant.metadata, deletionTimestamp: new Date(0), finalizers: ['example.com/keep'] };
    assert.deepEqual(served(planNode(input([tenant], [nad()]))), []);
    assert.deepEqual(served(planNode(input([tenant], [nad({ [SERVICE_NAMESPACES_ANNOTATION]: '*' })]))), ['aaa/doomed']);
  });

  void test('over budget: refused whole with ServiceOverBudget; the others are served', () => {
    const big = svc('aaa', 'big', 'demo/good', 300);
    const p = planNode(input([svc('demo', 'blog', 'good'), big], [nad({ [SERVICE_NAMESPACES_ANNOTATION]: '*' })]));
    assert.deepEqual(served(p), ['demo/blog']);
    assert.match(p.problems.find((x) => x.reason === 'ServiceOverBudget')?.message ?? '', /^Service aaa\/big has 300 ports \(spec\.ports\); the node agent serves at most 256/);
  });

  void test("the per-network cap is shared max-min: 'aaa' over its share loses its own Services only, and one Event names the namespace", () => {
    const list = [svc('aaa', 's1', 'demo/good'), svc('aaa', 's2', 'demo/good'), svc('aaa', 's3', 'demo/good'), svc('demo', 'blog', 'good')];
    const p = planNode(input(list, [nad({ [SERVICE_NAMESPACES_ANNOTATION]: '*' })]), 3);
    // No namespace of its own: aaa 3 and demo 1 on 3 targets: the level is 2.
    assert.deepEqual(served(p), ['aaa/s1', 'aaa/s2', 'demo/blog']);
    const caps = p.refused.filter((r) => r.reason === 'ServiceCapReached');
    assert.equal(caps.length, 1);
    assert.equal(caps[0]?.services, 1);
    assert.match(caps[0]?.message ?? '', /namespace aaa asks for 3, over its fair share of 2, so 1 of its Services are not served on this node: aaa\/s3;/);
    // Only the share changes things: with room for all, all are served.
    assert.deepEqual(served(planNode(input(list, [nad({ [SERVICE_NAMESPACES_ANNOTATION]: '*' })]), 4)), ['aaa/s1', 'aaa/s2', 'aaa/s3', 'demo/blog']);
  });

  void test('a NAD over budget serves nothing, with NadOverBudget; slimming keeps what the plan reads', () => {
    const huge = nad({}, JSON.stringify({ type: 'macvlan', master: 'ens4', pad: 'x'.repeat(70_000) }));
    const p = planNode(input([svc('demo', 'blog', 'good')], [huge]));
    assert.deepEqual(p.interfaces, []);
    assert.match(
      p.problems.find((x) => x.reason === 'NadOverBudget')?.message ?? '',
      /NetworkAttachmentDefinition demo\/good has a spec\.config of 70\d+ characters; the node agent reads at most 65536/,
    );
    const lb: V1Service = { ...svc('demo', 'lb', 'good'), status: { loadBalancer: { ingress: [{ ip: '192.168.101.240', ipMode: 'VIP' }] } } };
    lb.spec = { ...lb.spec, type: 'LoadBalancer', externalTrafficPolicy: 'Local', loadBalancerSourceRanges: ['192.168.101.0/24'], selector: { app: 'x'.repeat(1000) } };
    const raw: NodeInput = { ...input([], [nad()], [slice('demo', 'lb', 'demo/good')]), services: [lb] };
    const slim: NodeInput = { ...raw, services: [slimNodeService(lb)] };
    assert.deepEqual(planNode(slim), planNode(raw));
    assert.ok(JSON.stringify(slimNodeService(lb)).length < JSON.stringify(lb).length / 2);
  });
});
