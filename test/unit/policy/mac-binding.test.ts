/**
 * Pod peers bound to their MACs, end to end on the fakes: network-status MACs checked as tenant
 * input (src/policy/mac.ts) -> the controller's group slices (cmd/controller/group-plan.ts, the
 * endpoint-macs annotation) -> the sidecar's view -> the resolver -> the nftables render -> the
 * packet tracer, which now reads `ether saddr`. A spoofed source (the peer's address from another
 * MAC) is dropped, the real pair and replies pass; an address without a MAC, and ipBlocks, match
 * by address alone. Also the annotation's parser (bounded, linear, never throws) and the source
 * guard's text.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import type { V1EndpointSlice, V1Pod } from '../../../src/kube/types.js';
import {
  addressGroupView,
  endpointMacsProblem,
  ENDPOINT_MACS_ANNOTATION,
  formatEndpointMacs,
  MAX_ENDPOINT_MACS_BYTES,
  parseEndpointMacs,
  readEndpointMacs,
} from '../../../src/policy/address-group.js';
import { canonicalMac, checkedMac, macProblem } from '../../../src/policy/mac.js';
import { resolvePodPolicy, type PeerQuery, type SelectedPod } from '../../../src/policy/resolve.js';
import { POLICY_FOR_ANNOTATION } from '../../../src/keys.js';
import type { MultiNetworkPolicy } from '../../../src/policy/api.js';
import type { PodPolicy } from '../../../src/policy/model.js';
import { renderPolicy } from '../../../src/dataplane/nftables/policy.js';
import { withPodPolicy, type DesiredState } from '../../../src/dataplane/index.js';
import { guardInterfaces, sourceGuardText } from '../../../src/dataplane/index.js';
import { planAddressGroups, type GroupPolicy } from '../../../cmd/controller/group-plan.js';
import { slimAddressGroupSlice } from '../../../cmd/sidecar/policy-slim.js';
import { pod } from '../controller/fixtures.js';
import { FakeSidecar } from '../../harness/tracer/sidecar.js';

const MAC_A = '02:00:5e:00:00:0a';
const MAC_B = '02:00:5e:00:00:0b';
const MAC_P = '02:00:5e:00:00:01';
const NET = 'x/net1';
const BASE: DesiredState = { targets: [], interfaces: [] };

function status(ips: string[], mac?: string): string {
  return JSON.stringify([
    { name: 'cbr0', interface: 'eth0', ips: ['10.244.0.5'], default: true },
    { name: NET, interface: 'net1', ips, ...(mac !== undefined ? { mac } : {}), default: false },
  ]);
}
const peer = (name: string, ips: string[], mac?: string): V1Pod => pod(name, { namespace: 'x', labels: { app: 'web' }, status: status(ips, mac), nodeName: 'n1' });

const GROUP_POLICY: GroupPolicy = { name: 'allow-web', namespace: 'x', uid: 'uid-1', generation: 1, apiVersion: 'k8s.cni.cncf.io/v1beta1' };
const Q: PeerQuery = { policy: 'x/allow-web', network: NET, namespaces: { kind: 'namespace', name: 'x' }, pods: { requirements: [{ key: 'app', operator: 'In', values: ['web'] }] } };
const MNP: MultiNetworkPolicy = {
  apiVersion: 'k8s.cni.cncf.io/v1beta1',
  kind: 'MultiNetworkPolicy',
  metadata: { name: 'allow-web', namespace: 'x', annotations: { [POLICY_FOR_ANNOTATION]: NET } },
  spec: {
    podSelector: { matchLabels: { app: 'db' } },
    policyTypes: ['Ingress', 'Egress'],
    ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }, { ipBlock: { cidr: '10.0.9.0/24' } }] }],
    egress: [{ to: [{ podSelector: { matchLabels: { app: 'web' } } }] }],
  },
};
const DB: SelectedPod = { namespace: 'x', labels: { app: 'db' }, networks: [{ network: NET, interface: 'net1', addresses: ['10.0.0.100', 'fd00::100'] }], containerPorts: [] };

function slicesOf(pods: V1Pod[], existing: V1EndpointSlice[] = []): V1EndpointSlice[] {
  const plan = planAddressGroups({ policy: GROUP_POLICY, queries: [{ query: Q, pods }], existing });
  const byName = new Map(existing.map((s) => [s.metadata?.name ?? '', s]));
  for (const s of plan.diff.delete) byName.delete(s.metadata?.name ?? '');
  for (const s of plan.diff.update) byName.set(s.metadata?.name ?? '', s);
  plan.diff.create.forEach((s, i) => byName.set(`g${i}`, { ...s, metadata: { ...s.metadata, name: `g${i}` } }));
  return [...byName.values()];
}

/** As the sidecar reads them: through its informer's transform. */
function policyOf(slices: V1EndpointSlice[]): PodPolicy {
  const view = addressGroupView(slices.map(slimAddressGroupSlice));
  return resolvePodPolicy(DB, [MNP], view.lookup);
}

function passes(fake: FakeSidecar, src: string, srcMac: string, ct?: 'established'): boolean {
  const v6 = src.includes(':');
  return fake
    .trace(
      { family: v6 ? 6 : 4, protocol: 'tcp', src, dst: v6 ? 'fd00::100' : '10.0.0.100', dport: 80, iif: 'net1', srcMac, ...(ct !== undefined ? { ct } : {}) },
      { hook: 'prerouting', local: ['10.0.0.100', 'fd00::100'] },
    )
    .every((o) => o.verdict.kind === 'accept');
}

void describe('MAC checks (tenant input)', () => {
  void test('a unicast, non-zero MAC in six octets passes, lower-cased; anything else is refused with the reason', () => {
    assert.equal(checkedMac('02:00:5E:00:00:0A'), MAC_A);
    assert.equal(canonicalMac('02:00:5E:00:00:0A'), undefined, 'the sidecar takes only what the controller writes: lower-case');
    assert.equal(canonicalMac(MAC_A), MAC_A);
    for (const [bad, why] of [
      ['01:00:5e:00:00:01', /multicast/],
      ['ff:ff:ff:ff:ff:ff', /broadcast/],
      ['00:00:00:00:00:00', /zeros/],
      ['02:00:5e:00:00', /six/],
      ['02-00-5e-00-00-0a', /six/],
      ['02:00:5e:00:00:0a ', /six/],
      ['', /six/],
    ] as const)
      assert.match(macProblem(bad) ?? '', why, bad);
  });

  void test("endpoint-macs: written sorted, read back only for the slice's own addresses and canonical MACs; bad text is no pair, never a throw", () => {
    const text = formatEndpointMacs(
      new Map([
        ['fd00::1', MAC_A],
        ['10.0.0.1', MAC_A],
      ]),
    );
    assert.equal(text, `{"10.0.0.1":"${MAC_A}","fd00::1":"${MAC_A}"}`);
    assert.equal(formatEndpointMacs(new Map()), undefined);
    assert.deepEqual([...parseEndpointMacs(text, new Set(['10.0.0.1']))], [['10.0.0.1', MAC_A]]);
    assert.deepEqual([...parseEndpointMacs('{"10.0.0.1":"01:00:5e:00:00:01","10.0.0.2":"02:00:5E:00:00:0A","10.0.0.3":7}', new Set(['10.0.0.1', '10.0.0.2', '10.0.0.3']))], []);
    assert.equal(parseEndpointMacs(`{"10.0.0.1":"${MAC_A}"${' '.repeat(MAX_ENDPOINT_MACS_BYTES)}}`, new Set(['10.0.0.1'])).size, 0, 'over the bound: not read');
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json()), (t) => {
        const out = parseEndpointMacs(t, new Set(['10.0.0.1']));
        for (const [a, m] of out) assert.ok(a === '10.0.0.1' && canonicalMac(m) === m);
      }),
    );
  });

  void test("what is wrong with a slice's endpoint-macs is named (slice, key, value, fix); a good or absent one is not", () => {
    const slice = (macs: string | undefined): V1EndpointSlice => ({
      metadata: { name: 'g-1', namespace: 'x', ...(macs !== undefined ? { annotations: { [ENDPOINT_MACS_ANNOTATION]: macs } } : {}) },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.0.0.1'] }, { addresses: ['10.0.0.2'] }],
    });
    assert.equal(endpointMacsProblem(slice(undefined)), undefined);
    assert.equal(endpointMacsProblem(slice(`{"10.0.0.1":"${MAC_A}","10.0.0.2":"${MAC_B}"}`)), undefined);
    const cases: [string, RegExp][] = [
      ['nope', /is not JSON, so no MAC of it is used/],
      ['[1]', /is not a JSON object/],
      [`{"10.0.0.9":"${MAC_A}"}`, /names "10\.0\.0\.9", which is not an endpoint address of the slice/],
      ['{"10.0.0.1":"02:00:5E:00:00:0A"}', /gives "10\.0\.0\.1" the MAC "02:00:5E:00:00:0A", which is not six lower-case/],
      ['{"10.0.0.1":7}', /gives "10\.0\.0\.1" the MAC 7/],
      [`{"10.0.0.1":"${MAC_A}"${' '.repeat(MAX_ENDPOINT_MACS_BYTES)}}`, /more than the 65536 read/],
    ];
    for (const [text, reason] of cases) {
      const m = endpointMacsProblem(slice(text)) ?? '';
      assert.match(m, /^EndpointSlice x\/g-1: annotation multus-proxy\/endpoint-macs "/, text);
      assert.match(m, reason, text);
      assert.match(m, /; the controller writes it as JSON .* delete the annotation \(or the slice\)/, text);
    }
    const partly = readEndpointMacs(`{"10.0.0.1":"${MAC_A}","10.0.0.9":"${MAC_B}"}`, new Set(['10.0.0.1', '10.0.0.2']));
    assert.deepEqual([...partly.macs], [['10.0.0.1', MAC_A]], 'the good pairs are still used');
    assert.ok(partly.problem !== undefined);
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json()), (t) => {
        const r = readEndpointMacs(t, new Set(['10.0.0.1']));
        assert.deepEqual(r.macs, parseEndpointMacs(t, new Set(['10.0.0.1'])));
        if (r.problem === undefined) for (const [a] of Object.entries(JSON.parse(t) as Record<string, unknown>)) assert.ok(r.macs.has(a));
      }),
    );
  });
});

void describe('pod peers bound to their MACs (controller -> sidecar -> nftables -> tracer)', () => {
  void test("the group carries each endpoint's MAC; a spoofed source is dropped; the real pair, replies, unbound addresses and ipBlocks pass", () => {
    const slices = slicesOf([peer('a', ['10.0.0.1', 'fd00::1'], MAC_A), peer('b', ['10.0.0.2'], MAC_B), peer('c', ['10.0.0.3'])]);
    const v4 = slices.find((s) => s.addressType === 'IPv4');
    assert.equal(v4?.metadata?.annotations?.[ENDPOINT_MACS_ANNOTATION], `{"10.0.0.1":"${MAC_A}","10.0.0.2":"${MAC_B}"}`);
    const pp = policyOf(slices);
    const net = pp.networks[0];
    assert.deepEqual(net?.ingress.rules[0]?.peers?.macs, { '10.0.0.1': [MAC_A], '10.0.0.2': [MAC_B], 'fd00::1': [MAC_A] });
    assert.equal(net?.egress.rules[0]?.peers?.macs, undefined, 'egress peers are destinations: never bound');
    const text = [...(renderPolicy(pp)?.chains.values() ?? [])].flat().join('\n');
    assert.match(text, /ip saddr \. ether saddr @MPX-PM-\S+ accept/);
    assert.match(text, /ip6 saddr \. ether saddr @MPX-PM-\S+ accept/);
    const fake = new FakeSidecar('nftables');
    fake.sync(withPodPolicy(BASE, pp), true);
    assert.equal(passes(fake, '10.0.0.1', MAC_A), true, 'a from its own MAC');
    assert.equal(passes(fake, 'fd00::1', MAC_A), true);
    assert.equal(passes(fake, '10.0.0.1', MAC_B), false, "b claiming a's address");
    assert.equal(passes(fake, 'fd00::1', MAC_B), false);
    assert.equal(passes(fake, '10.0.0.1', MAC_B.toUpperCase()), false);
    assert.equal(passes(fake, '10.0.0.2', MAC_B), true);
    assert.equal(passes(fake, '10.0.0.3', MAC_A), true, 'c has no MAC in its network-status: matched by address alone');
    assert.equal(passes(fake, '10.0.9.7', MAC_B), true, 'an ipBlock stays address-only');
    assert.equal(passes(fake, '10.0.0.1', MAC_B, 'established'), true, 'replies pass whatever their MAC');
    assert.equal(passes(fake, '10.0.0.4', MAC_A), false);
  });

  void test('a pod recreated with the same address and a new MAC: the slice is updated, and the pair set changed by element without a rule change', () => {
    const first = slicesOf([peer('a', ['10.0.0.1'], MAC_A)]);
    const fake = new FakeSidecar('nftables');
    fake.sync(withPodPolicy(BASE, policyOf(first)), true);
    const plan = planAddressGroups({ policy: GROUP_POLICY, queries: [{ query: Q, pods: [peer('a', ['10.0.0.1'], MAC_B)] }], existing: first });
    assert.equal(plan.diff.update.length, 1);
    const second = slicesOf([peer('a', ['10.0.0.1'], MAC_B)], first);
    fake.sync(withPodPolicy(BASE, policyOf(second)), false);
    const change = fake.texts.join('');
    // A pair set is a plain set: the old pair deleted and the new one added, in the same set.
    assert.match(change, /^delete element inet multus_proxy (MPX-PM-\S+) \{ 10\.0\.0\.1 \. 02:00:5e:00:00:0a \}\nadd element inet multus_proxy \1 \{ 10\.0\.0\.1 \. 02:00:5e:00:00:0b \}$/m);
    assert.doesNotMatch(change, /add chain|flush chain/);
    assert.equal(passes(fake, '10.0.0.1', MAC_B), true);
    assert.equal(passes(fake, '10.0.0.1', MAC_A), false);
    // The MAC gone from network-status: the annotation goes with it, and the address matches alone.
    const third = slicesOf([peer('a', ['10.0.0.1'])], second);
    assert.equal(third[0]?.metadata?.annotations?.[ENDPOINT_MACS_ANNOTATION], undefined);
    fake.sync(withPodPolicy(BASE, policyOf(third)), false);
    assert.equal(passes(fake, '10.0.0.1', MAC_A), true);
  });

  void test('a bad MAC in network-status: the pod is listed by address alone, and the plan says which pod, key and value', () => {
    const plan = planAddressGroups({ policy: GROUP_POLICY, queries: [{ query: Q, pods: [peer('a', ['10.0.0.1'], '01:00:5e:00:00:01')] }], existing: [] });
    assert.equal(plan.diff.create[0]?.metadata?.annotations?.[ENDPOINT_MACS_ANNOTATION], undefined);
    assert.match(plan.badMacs?.[0] ?? '', /pod x\/a: network-status "mac" "01:00:5e:00:00:01" on network x\/net1 is a multicast/);
  });

  void test('a bad MAC in the model (checked again by the render): the pair is left out, with a warning', () => {
    const pp: PodPolicy = {
      networks: [
        {
          network: NET,
          interface: 'net1',
          ingress: { isolated: true, rules: [{ policy: 'x/p', index: 0, peers: { addresses: ['10.0.0.1'], blocks: [], macs: { '10.0.0.1': ['01:00:5e:00:00:01'] } } }] },
          egress: { isolated: false, rules: [] },
          failures: [],
        },
      ],
    };
    const r = renderPolicy(pp);
    assert.match(r?.warnings.join('\n') ?? '', /MAC "01:00:5e:00:00:01" is not a canonical unicast MAC; that pair is left out/);
    const fake = new FakeSidecar('nftables');
    fake.sync(withPodPolicy(BASE, pp), true);
    assert.equal(passes(fake, '10.0.0.1', '01:00:5e:00:00:01'), false);
  });
});

void describe('source guard text', () => {
  void test('one egress chain per secondary interface: its MAC, its addresses (with 0.0.0.0, ::, link-local) and ARP sender; the default network left alone', () => {
    const list = guardInterfaces([
      { name: 'cbr0', interface: 'eth0', ipv4: ['10.244.0.5'], ipv6: [], default: true },
      { name: NET, interface: 'net1', ipv4: ['10.0.0.100'], ipv6: ['fd00::100'], mac: MAC_P.toUpperCase(), default: false },
      { name: 'x/net2', interface: 'net2', ipv4: [], ipv6: [], default: false },
      { name: 'x/net3', interface: 'bad name', ipv4: ['10.0.3.1'], ipv6: [], default: false },
    ]);
    assert.deepEqual(
      list.map((g) => g.interface),
      ['net1', 'net2'],
    );
    const text = sourceGuardText(list);
    assert.match(text, /^table netdev multus_proxy_guard\ndelete table netdev multus_proxy_guard\ntable netdev multus_proxy_guard \{/);
    assert.match(text, /type filter hook egress device "net1" priority 0; policy accept;/);
    assert.match(text, new RegExp(`ether saddr != ${MAC_P} counter drop`));
    assert.match(text, /meta protocol ip ip saddr != \{ 0\.0\.0\.0, 10\.0\.0\.100 \} counter drop/);
    assert.match(text, /meta protocol ip6 ip6 saddr != \{ ::, fe80::\/10, fd00::100 \} counter drop/);
    assert.match(text, /meta protocol arp arp saddr ip != \{ 0\.0\.0\.0, 10\.0\.0\.100 \} counter drop/);
    // net2 has no address and no MAC in its status: a chain that drops nothing.
    assert.equal((text.match(/hook egress device "net2"/g) ?? []).length, 1);
    assert.equal(sourceGuardText([]), 'table netdev multus_proxy_guard\ndelete table netdev multus_proxy_guard\n');
    // The interface's own MAC, where the sidecar can read it, wins over a network-status that disagrees.
    const own = guardInterfaces([{ name: NET, interface: 'net1', ipv4: ['10.0.0.100'], ipv6: [], mac: MAC_P, default: false }], () => MAC_A.toUpperCase());
    assert.equal(own[0]?.mac, MAC_A);
  });
});
