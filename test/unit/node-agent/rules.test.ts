/**
 * The node agent's rules: golden restore text for a fresh node (NodePort Cluster and Local, a node
 * without local endpoints, UDP with affinity, IPv6, the node's cluster-IP access), and the
 * decisions behind it. UPDATE_GOLDEN=1 rewrites the golden files (review the diff).
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { NOTHING_EXISTING, planRestore, parseExisting, planCleanup } from '../../../src/dataplane/iptables/restore.js';
import { routeBatch } from '../../../src/dataplane/core/routes.js';
import { planConntrack, conntrackArgs } from '../../../src/dataplane/core/conntrack.js';
import { chooseEndpoints } from '../../../src/dataplane/core/endpoints.js';
import { MAX_CHAIN_NAME } from '../../../src/dataplane/core/names.js';
import { NODE_LAYOUT, NODEPORTS_CHAIN, NODE_REJECT_CHAIN, type NodeState } from '../../../cmd/node-agent/rules.js';
import { renderNode as renderNodeRules } from '../../../cmd/node-agent/stages.js';
import type { IptablesRules } from '../../../src/dataplane/iptables/rulesets.js';
import { withIptables } from '../../harness/property.js';
import { golden as goldenIn } from '../../harness/golden.js';
import { ep, LB_SAMPLE, lbt, NET, SAMPLE } from './node-fixtures.js';

const golden = (name: string, text: string): void => goldenIn('node-agent', name, text);
/** The iptables back end's render, its rulesets spread beside the rest (this file tests their text). */
const renderNode = (state: NodeState): ReturnType<typeof renderNodeRules> & IptablesRules => withIptables(renderNodeRules(state));
void describe('node rules', () => {
  const r = renderNode(SAMPLE);
  void test('golden: a fresh node (restore text per family, routes)', () => {
    golden('sample.v4.rules', planRestore(r.v4, undefined, NOTHING_EXISTING, true, NODE_LAYOUT).text);
    golden('sample.v6.rules', planRestore(r.v6, undefined, NOTHING_EXISTING, true, NODE_LAYOUT).text);
    golden('sample.routes', routeBatch(r.routes, 'replace', NODE_LAYOUT.routeProto));
  });
  void test("only the running back end's rules are rendered: nftables gives its table and no iptables chain, iptables no table", () => {
    const n = renderNodeRules(SAMPLE, undefined, { nft: true });
    assert.ok(n.nft !== undefined && n.nft.targets.size > 0, 'the nftables table');
    assert.equal(n.iptables, undefined, 'no iptables ruleset in an nftables render');
    // The same Service ports resolved and routed either way.
    assert.deepEqual(n.resolution, r.resolution);
    assert.deepEqual(n.routes, r.routes);
    assert.equal(r.nft, undefined);
    assert.ok(r.v4.nat.size > 0 && r.v6.nat.size > 0);
  });
  void test('chain names: own prefix, never MPX-/KUBE-/MULTUS-, at most 28 characters', () => {
    for (const rs of [r.v4, r.v6]) {
      for (const table of ['nat', 'filter'] as const) {
        for (const chain of rs[table].keys()) {
          assert.match(chain, /^MPXN-/);
          assert.ok(chain.length <= MAX_CHAIN_NAME, chain);
        }
      }
    }
  });
  void test('Cluster: masquerade mark first, then the same DNAT rules the sidecar chooses (all endpoints, equal shares)', () => {
    const web = r.resolution.targets.find((t) => t.target.service === 'demo/web' && t.target.port === 30080 && t.target.family === 4);
    assert.ok(web !== undefined);
    const rules = r.v4.nat.get(web.chain) ?? [];
    assert.match(rules[0] ?? '', /-j MARK --or-mark 0x2000$/);
    const want = chooseEndpoints(SAMPLE.nodePorts[0]?.base.endpoints ?? [], 4, () => undefined, '').endpoints;
    assert.deepEqual(web.endpoints, want);
    assert.equal(rules.length, 1 + want.length);
    assert.match(rules[1] ?? '', /--probability 0\.3333333333 -j DNAT --to-destination 192\.168\.101\.3:8080$/);
    assert.ok(r.v4.nat.get(NODEPORTS_CHAIN)?.some((l) => l.startsWith('-A MPXN-NODEPORTS -d 192.168.101.250/32 -p tcp -m tcp --dport 30080 ') && l.endsWith(`-j ${web.chain}`)));
    assert.ok(r.v4.nat.get('MPXN-POSTROUTING')?.[0]?.includes('-m mark --mark 0x2000/0x2000'));
  });
  void test('Local: only local endpoints, no mark (source kept); none on this node: rejected', () => {
    const local = r.resolution.targets.find((t) => t.target.service === 'demo/local');
    assert.deepEqual(
      local?.endpoints.map(({ ip, port }) => ({ ip, port })),
      [{ ip: '192.168.101.3', port: 8080 }],
    );
    assert.ok(local !== undefined);
    assert.deepEqual(
      r.v4.nat.get(local.chain)?.map((l) => l.includes('MARK')),
      [false],
      'one DNAT rule, no mark',
    );
    const none = r.resolution.targets.find((t) => t.target.service === 'demo/nolocal');
    assert.deepEqual(none?.endpoints, []);
    assert.ok(r.v4.filter.get(NODE_REJECT_CHAIN)?.some((l) => l.includes('--dport 30082') && l.includes('has no endpoints on this node') && l.endsWith('--reject-with tcp-reset')));
    assert.ok(
      r.v4.filter.get(NODE_REJECT_CHAIN)?.some((l) => l.includes('--dport 30090')),
      'a Cluster port without endpoints is rejected too',
    );
    assert.ok(!r.v4.filter.get(NODE_REJECT_CHAIN)?.some((l) => l.includes('--dport 30080')));
  });
  void test('no address of a family on the network: that family is skipped with a reason', () => {
    const v4only = renderNode({ ...SAMPLE, networks: [{ network: NET, interface: 'mpxhx', ipv4: '192.168.101.250' }] });
    assert.equal(v4only.v6.nat.get(NODEPORTS_CHAIN)?.length, 0);
    assert.ok(v4only.resolution.skipped.some((s) => s.reason === 'the node has no IPv6 address on network demo/net-a'));
    const none = renderNode({ ...SAMPLE, networks: [] });
    assert.equal(none.resolution.targets.length, 0);
    assert.ok(none.resolution.skipped.some((s) => /no interface of its own on network demo\/net-a/.test(s.reason)));
  });
  void test('UDP: an endpoint leaving a node port flushes conntrack for node address:nodePort', () => {
    const after = renderNode({ ...SAMPLE, nodePorts: SAMPLE.nodePorts.map((t) => (t.base.service === 'demo/dns' ? { ...t, base: { ...t.base, endpoints: [ep('192.168.101.3', 5353)] } } : t)) });
    const flushes = planConntrack(r.resolution.targets, after.resolution.targets);
    assert.deepEqual(flushes.map(conntrackArgs), [['-D', '-f', 'ipv4', '-p', 'udp', '--orig-dst', '192.168.101.250', '--orig-port-dst', '30053', '--dst-nat', '192.168.101.6']]);
  });
  void test('restore planning with the node layout: hooks in five built-in chains, foreign rules untouched, cleanup removes only ours', () => {
    const save = [
      '*nat',
      ':PREROUTING ACCEPT [0:0]',
      ':KUBE-SERVICES - [0:0]',
      ':MPX-SERVICES - [0:0]',
      ':MPXN-NODEPORTS - [0:0]',
      ':MPXN-SVC-OLD - [0:0]',
      '-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES',
      `-A PREROUTING ${NODE_LAYOUT.hooks.nat[0]?.spec ?? ''}`,
      `-A PREROUTING ${NODE_LAYOUT.hooks.nat[0]?.spec ?? ''}`,
      '-A OUTPUT -m comment --comment multus-proxy -j MPX-SERVICES',
      'COMMIT',
    ].join('\n');
    const existing = parseExisting(save, NODE_LAYOUT);
    assert.deepEqual(existing.nat.chains, ['MPXN-NODEPORTS', 'MPXN-SVC-OLD']);
    assert.equal(existing.nat.jumps.length, 2, 'the sidecar-style MPX- jump is not ours');
    const plan = planRestore(r.v4, undefined, existing, true, NODE_LAYOUT);
    assert.ok(plan.text.includes(`-D PREROUTING ${NODE_LAYOUT.hooks.nat[0]?.spec ?? ''}\n`), 'the duplicate jump goes');
    assert.ok(plan.text.includes(`-I OUTPUT 1 ${NODE_LAYOUT.hooks.nat[1]?.spec ?? ''}\n`));
    assert.ok(plan.text.includes('-X MPXN-SVC-OLD\n'));
    assert.ok(!plan.text.includes('KUBE-') && !plan.text.includes('MPX-SERVICES'));
    const cleanup = planCleanup(existing);
    assert.ok(!cleanup.includes('KUBE-') && !cleanup.includes('MPX-SERVICES') && cleanup.includes('-X MPXN-NODEPORTS'));
  });
});

void describe('node rules: LoadBalancer ingress IPs', () => {
  const r = renderNode(LB_SAMPLE);
  const lines = (rs: typeof r.v4, table: 'nat' | 'filter'): string[] => [...rs[table].values()].flat();
  void test('golden: every ingress-IP rule shape (restore text per family, routes)', () => {
    golden('load-balancer.v4.rules', planRestore(r.v4, undefined, NOTHING_EXISTING, true, NODE_LAYOUT).text);
    golden('load-balancer.v6.rules', planRestore(r.v6, undefined, NOTHING_EXISTING, true, NODE_LAYOUT).text);
    golden('load-balancer.routes', routeBatch(r.routes, 'replace', NODE_LAYOUT.routeProto));
  });
  void test('Cluster: dispatched on the ingress IP and the Service port, masquerade mark, all endpoints', () => {
    const web = r.resolution.targets.find((t) => t.clusterIP === '192.168.101.240');
    assert.ok(web !== undefined);
    assert.match(web.chain, /^MPXN-LB-/);
    assert.match(r.v4.nat.get(web.chain)?.[0] ?? '', /-j MARK --or-mark 0x2000$/);
    assert.equal(web.endpoints.length, 3);
    assert.ok(r.v4.nat.get(NODEPORTS_CHAIN)?.some((l) => l.startsWith('-A MPXN-NODEPORTS -d 192.168.101.240/32 -p tcp -m tcp --dport 80 ') && l.endsWith(`-j ${web.chain}`)));
  });
  void test('Local: local endpoints only, no mark; none here but some elsewhere: dropped; none at all: refused', () => {
    const local = r.resolution.targets.find((t) => t.clusterIP === '192.168.101.241');
    assert.deepEqual(
      local?.endpoints.map(({ ip, port }) => ({ ip, port })),
      [{ ip: '192.168.101.3', port: 8080 }],
    );
    assert.ok(local !== undefined);
    assert.deepEqual(
      r.v4.nat.get(local.chain)?.map((l) => l.includes('MARK')),
      [false],
      'one DNAT rule, no mark',
    );
    // Endpoints elsewhere only: dropped, as kube-proxy drops external traffic with no local endpoint.
    assert.ok(r.v4.filter.get(NODE_REJECT_CHAIN)?.some((l) => l.includes('-d 192.168.101.242/32') && l.includes('has no endpoints on this node') && l.endsWith('-j DROP')));
    // No endpoints anywhere: refused.
    const none = renderNode({ ...LB_SAMPLE, loadBalancers: [lbt('demo/none', '192.168.101.247', 'Local', { endpoints: [] }, { localEndpoints: [] })] });
    assert.ok(none.v4.filter.get(NODE_REJECT_CHAIN)?.some((l) => l.includes('-d 192.168.101.247/32') && l.endsWith('--reject-with tcp-reset')));
  });
  void test('loadBalancerSourceRanges: one dispatch per range; the firewall chain RETURNs admitted sources and DROPs the rest', () => {
    const ranged = r.resolution.targets.find((t) => t.clusterIP === '192.168.101.243');
    assert.ok(ranged !== undefined);
    const dispatch = r.v4.nat.get(NODEPORTS_CHAIN)?.filter((l) => l.includes('192.168.101.243')) ?? [];
    assert.deepEqual(
      dispatch.map((l) => /-s (\S+)/.exec(l)?.[1]),
      ['198.51.100.0/24', '192.168.101.0/25'],
    );
    const jump = r.v4.filter.get(NODE_REJECT_CHAIN)?.find((l) => l.includes('192.168.101.243'));
    const fw = /-j (MPXN-FW-\S+)$/.exec(jump ?? '')?.[1] ?? '';
    assert.ok(fw !== '', 'a jump to the firewall chain');
    assert.deepEqual(
      r.v4.filter.get(fw)?.map((l) => l.replace(/ -m comment --comment "[^"]*"/, '')),
      [`-A ${fw} -s 198.51.100.0/24 -j RETURN`, `-A ${fw} -s 192.168.101.0/25 -j RETURN`, `-A ${fw} -j DROP`],
    );
    // Without endpoints, admitted sources are refused (REJECT) and the others still dropped.
    const emptyJump = r.v4.filter.get(NODE_REJECT_CHAIN)?.find((l) => l.includes('192.168.101.244')) ?? '';
    const emptyFw = /-j (MPXN-FW-\S+)$/.exec(emptyJump)?.[1] ?? '';
    assert.match(r.v4.filter.get(emptyFw)?.[0] ?? '', /-s 198\.51\.100\.0\/24 .*-j REJECT --reject-with tcp-reset$/);
    assert.match(r.v4.filter.get(emptyFw)?.[1] ?? '', /-j DROP$/);
    // Ranges listed but none of this family: nothing dispatched, everything dropped.
    assert.equal(r.v4.nat.get(NODEPORTS_CHAIN)?.filter((l) => l.includes('192.168.101.245')).length, 0);
    const closedFw = /-j (MPXN-FW-\S+)$/.exec(r.v4.filter.get(NODE_REJECT_CHAIN)?.find((l) => l.includes('192.168.101.245')) ?? '')?.[1] ?? '';
    assert.deepEqual(
      r.v4.filter.get(closedFw)?.map((l) => l.replace(/ -m comment --comment "[^"]*"/, '')),
      [`-A ${closedFw} -j DROP`],
    );
  });
  void test("the filter chain is also hooked from FORWARD: an ingress IP is not the node's, so what nat left alone is forwarded", () => {
    assert.ok(NODE_LAYOUT.hooks.filter.some((h) => h.chain === 'FORWARD' && h.spec.endsWith(`-j ${NODE_REJECT_CHAIN}`) && h.spec.includes('--ctstate NEW')));
  });
  void test('IPv6 with a range; UDP flushes conntrack on the ingress IP when an endpoint leaves', () => {
    assert.ok(lines(r.v6, 'nat').some((l) => l.startsWith('-A MPXN-NODEPORTS -s 2001:db8::/32 -d fd00:101::f0/128 -p tcp -m tcp --dport 80 ')));
    const after = renderNode({
      ...LB_SAMPLE,
      loadBalancers: (LB_SAMPLE.loadBalancers ?? []).map((t) => (t.base.service === 'demo/dns' ? { ...t, base: { ...t.base, endpoints: [ep('192.168.101.3', 5353)] } } : t)),
    });
    const flushes = planConntrack(r.resolution.targets, after.resolution.targets);
    assert.deepEqual(flushes.map(conntrackArgs), [['-D', '-f', 'ipv4', '-p', 'udp', '--orig-dst', '192.168.101.246', '--orig-port-dst', '53', '--dst-nat', '192.168.101.6']]);
  });
  void test('the same address, protocol and port twice: the first is used, the second skipped with a warning', () => {
    const twice = renderNode({ ...LB_SAMPLE, loadBalancers: [lbt('demo/a', '192.168.101.240', 'Cluster'), lbt('demo/b', '192.168.101.240', 'Cluster')] });
    assert.equal(twice.resolution.targets.filter((t) => t.clusterIP === '192.168.101.240').length, 1);
    assert.ok(twice.resolution.skipped.some((s) => s.level === 'warn' && /listed twice/.test(s.reason)));
  });
});
