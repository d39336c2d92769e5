/**
 * The resolver against a truth table: pods a, b, c in namespaces x, y, z (as the upstream
 * NetworkPolicy conformance matrix), dual-stack on one shared secondary network and on a second
 * one. Each case compiles the policies for the client and the server and asks whether a
 * connection passes both (the client's egress and the server's ingress), reading the PodPolicy
 * with the meaning model.ts gives it. The cases include each point where multi-networkpolicy-iptables
 * (and -nftables) differ from NetworkPolicy: here NetworkPolicy's answer is expected.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { matchesSelector } from '../../../src/annotations/label-selector.js';
import { POLICY_FOR_ANNOTATION } from '../../../src/keys.js';
import type { MultiNetworkPolicy, MultiNetworkPolicySpec } from '../../../src/policy/api.js';
import type { PodPolicy, PolicyProtocol } from '../../../src/policy/model.js';
import { inBlock, resolvePodPolicy, type PeerLookup, type PeerPod, type SelectedPod } from '../../../src/policy/resolve.js';

const NET1 = 'default/net1';
const NET2 = 'default/net2';
const NAMESPACES = ['x', 'y', 'z'] as const;
const PODS = ['a', 'b', 'c'] as const;
type Name = `${(typeof NAMESPACES)[number]}/${(typeof PODS)[number]}`;

interface WorldPod extends SelectedPod {
  readonly name: string;
}

function pod(ns: number, p: number): WorldPod {
  const namespace = NAMESPACES[ns] ?? 'x';
  const name = PODS[p] ?? 'a';
  return {
    namespace,
    name,
    labels: { pod: name },
    networks: [
      { network: NET1, interface: 'net1', addresses: [`10.0.${ns}.${p + 1}`, `fd00::${ns + 1}:${p + 1}`] },
      { network: NET2, interface: 'net2', addresses: [`10.1.${ns}.${p + 1}`] },
    ],
    containerPorts: [
      { name: 'http', containerPort: 8080 + p },
      { name: 'dns', containerPort: 53, protocol: 'UDP' },
    ],
  };
}

const WORLD: WorldPod[] = NAMESPACES.flatMap((_, ns) => PODS.map((__, p) => pod(ns, p)));
const NS_LABELS: Record<string, Record<string, string>> = {
  x: { ns: 'x', 'kubernetes.io/metadata.name': 'x' },
  y: { ns: 'y', 'kubernetes.io/metadata.name': 'y' },
  z: { ns: 'z', 'kubernetes.io/metadata.name': 'z' },
};
const find = (n: Name): WorldPod => WORLD.find((w) => `${w.namespace}/${w.name}` === n) ?? assert.fail(n);

/** The address groups' answer, computed from the world table. */
const lookup: PeerLookup = (q) =>
  WORLD.filter((w) => (q.namespaces.kind === 'namespace' ? w.namespace === q.namespaces.name : matchesSelector(q.namespaces.selector, NS_LABELS[w.namespace])))
    .filter((w) => matchesSelector(q.pods, w.labels))
    .map((w): PeerPod => ({ addresses: w.networks.find((n) => n.network === q.network)?.addresses ?? [], containerPorts: w.containerPorts }));

let seq = 0;
function policy(namespace: string, spec: unknown, networks: string | null = 'net1', ns = 'default'): MultiNetworkPolicy {
  const annotations: Record<string, string> = networks === null ? {} : { [POLICY_FOR_ANNOTATION]: networks.includes('/') ? networks : `${ns}/${networks}` };
  return { apiVersion: 'k8s.cni.cncf.io/v1beta1', kind: 'MultiNetworkPolicy', metadata: { name: `p${++seq}`, namespace, annotations }, spec: spec as MultiNetworkPolicySpec };
}

/** Whether one direction of a PodPolicy lets a packet with this peer, protocol and port through (model.ts's meaning). */
function passes(pp: PodPolicy, network: string, dir: 'ingress' | 'egress', peer: string, protocol: PolicyProtocol, port: number): boolean {
  const n = pp.networks.find((x) => x.network === network);
  if (n === undefined || !n[dir].isolated) return true;
  return n[dir].rules.some((r) => {
    const peerOk = r.peers === undefined || r.peers.addresses.includes(peer) || r.peers.blocks.some((b) => inBlock(peer, b));
    const portOk =
      (r.ports === undefined && r.peerPorts === undefined) ||
      (r.ports ?? []).some((p) => p.protocol === protocol && port >= p.from && port <= p.to) ||
      (r.peerPorts ?? []).some((p) => p.address === peer && p.protocol === protocol && p.port === port);
    return peerOk && portOk;
  });
}

interface Probe {
  readonly from: Name;
  readonly to: Name;
  readonly port?: number;
  readonly protocol?: PolicyProtocol;
  readonly network?: string;
  readonly family?: 4 | 6;
}

function reach(policies: readonly MultiNetworkPolicy[], p: Probe): boolean {
  const network = p.network ?? NET1;
  const client = find(p.from);
  const server = find(p.to);
  const addr = (w: WorldPod): string => {
    const all = w.networks.find((n) => n.network === network)?.addresses ?? [];
    return all.find((a) => (p.family === 6 ? a.includes(':') : !a.includes(':'))) ?? assert.fail(`no IPv${p.family ?? 4} address`);
  };
  const protocol = p.protocol ?? 'TCP';
  const port = p.port ?? 80;
  return (
    passes(resolvePodPolicy(client, policies, lookup), network, 'egress', addr(server), protocol, port) &&
    passes(resolvePodPolicy(server, policies, lookup), network, 'ingress', addr(client), protocol, port)
  );
}

/** Asserts each probe's expected answer; names the case and the probe when one differs. */
function table(name: string, policies: readonly MultiNetworkPolicy[], rows: readonly (readonly [Probe, boolean])[]): void {
  for (const [probe, want] of rows) assert.equal(reach(policies, probe), want, `${name}: ${JSON.stringify(probe)} should be ${want ? 'allowed' : 'denied'}`);
}

void describe('resolver: NetworkPolicy semantics on a secondary network', () => {
  void test('no policy: everything passes, and the PodPolicy is empty', () => {
    assert.deepEqual(resolvePodPolicy(find('x/a'), [], lookup), { networks: [] });
    table('none', [], [[{ from: 'y/b', to: 'x/a' }, true]]);
  });

  void test('deny all ingress to x: nothing reaches x, x still reaches out', () => {
    const ps = [policy('x', { podSelector: {}, policyTypes: ['Ingress'] })];
    table('deny-ingress', ps, [
      [{ from: 'x/b', to: 'x/a' }, false],
      [{ from: 'y/a', to: 'x/a', family: 6 }, false],
      [{ from: 'x/a', to: 'y/a' }, true],
    ]);
  });

  void test('a peer podSelector alone means the policy namespace (reference: every namespace)', () => {
    const ps = [policy('x', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ podSelector: { matchLabels: { pod: 'b' } } }] }] })];
    table('same-namespace', ps, [
      [{ from: 'x/b', to: 'x/a' }, true],
      [{ from: 'y/b', to: 'x/a' }, false],
      [{ from: 'x/c', to: 'x/a' }, false],
      [{ from: 'y/b', to: 'x/b' }, true],
    ]);
  });

  void test('namespaceSelector alone, together with podSelector (AND), and {} for every namespace', () => {
    const ns = [policy('x', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }] }] })];
    table('namespaceSelector', ns, [
      [{ from: 'y/c', to: 'x/a' }, true],
      [{ from: 'x/b', to: 'x/a' }, false],
      [{ from: 'z/b', to: 'x/a' }, false],
    ]);
    const both = [policy('x', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: { matchLabels: { ns: 'y' } }, podSelector: { matchLabels: { pod: 'b' } } }] }] })];
    table('both', both, [
      [{ from: 'y/b', to: 'x/a' }, true],
      [{ from: 'y/c', to: 'x/a' }, false],
      [{ from: 'x/b', to: 'x/a' }, false],
    ]);
    const every = [policy('x', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ namespaceSelector: {}, podSelector: { matchLabels: { pod: 'c' } } }] }] })];
    table('every-namespace', every, [
      [{ from: 'z/c', to: 'x/a' }, true],
      [{ from: 'z/b', to: 'x/a' }, false],
    ]);
  });

  void test('matchExpressions are honoured (reference: dropped)', () => {
    const ps = [
      policy('x', {
        podSelector: { matchExpressions: [{ key: 'pod', operator: 'NotIn', values: ['c'] }] },
        ingress: [{ from: [{ podSelector: { matchExpressions: [{ key: 'pod', operator: 'In', values: ['b', 'c'] }] } }] }],
      }),
    ];
    table('expressions', ps, [
      [{ from: 'x/b', to: 'x/a' }, true],
      [{ from: 'x/a', to: 'x/b' }, false],
      [{ from: 'x/a', to: 'x/c' }, true],
    ]);
  });

  void test('policyTypes default: Ingress always, Egress when egress has rules (reference: inferred from the sections present)', () => {
    const egressOnlySection = [policy('x', { podSelector: { matchLabels: { pod: 'a' } }, egress: [{ to: [{ podSelector: { matchLabels: { pod: 'b' } } }] }] })];
    table('default-types', egressOnlySection, [
      [{ from: 'x/a', to: 'x/b' }, true],
      [{ from: 'x/a', to: 'x/c' }, false],
      // Ingress is isolated too, with no rule: nothing reaches x/a.
      [{ from: 'x/b', to: 'x/a' }, false],
    ]);
    const ingressListedOnly = [policy('x', { podSelector: { matchLabels: { pod: 'a' } }, policyTypes: ['Ingress'], egress: [{ to: [{ podSelector: { matchLabels: { pod: 'b' } } }] }] })];
    table('egress-rules-ignored', ingressListedOnly, [[{ from: 'x/a', to: 'y/c' }, true]]);
  });

  void test('ipBlock except is per peer: another peer still allows the excepted address (reference: a DROP; -nftables: except merged)', () => {
    const ps = [
      policy('x', {
        podSelector: { matchLabels: { pod: 'a' } },
        ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/16', except: ['10.0.0.3/32', '10.0.1.0/24'] } }, { podSelector: { matchLabels: { pod: 'c' } } }, { ipBlock: { cidr: '10.0.1.2/32' } }] }],
      }),
    ];
    table('except', ps, [
      [{ from: 'x/b', to: 'x/a' }, true],
      [{ from: 'x/c', to: 'x/a' }, true],
      [{ from: 'y/a', to: 'x/a' }, false],
      [{ from: 'y/b', to: 'x/a' }, true],
      [{ from: 'z/a', to: 'x/a' }, true],
      [{ from: 'x/b', to: 'x/a', family: 6 }, false],
    ]);
    const pp = resolvePodPolicy(find('x/a'), ps, lookup);
    assert.deepEqual(pp.networks[0]?.ingress.rules[0]?.peers?.blocks, [
      { cidr: '10.0.0.0/16', except: ['10.0.0.3/32', '10.0.1.0/24'] },
      { cidr: '10.0.1.2/32', except: [] },
    ]);
  });

  void test('named ports: ingress from the pod’s own containerPorts, egress from each peer’s (reference: /etc/services)', () => {
    const ingress = [policy('x', { podSelector: {}, ingress: [{ ports: [{ port: 'http' }, { port: 'dns', protocol: 'UDP' }] }] })];
    table('named-ingress', ingress, [
      [{ from: 'y/a', to: 'x/b', port: 8081 }, true],
      [{ from: 'y/a', to: 'x/b', port: 8080 }, false],
      [{ from: 'y/a', to: 'x/b', port: 80 }, false],
      [{ from: 'y/a', to: 'x/c', port: 53, protocol: 'UDP' }, true],
      [{ from: 'y/a', to: 'x/c', port: 53, protocol: 'TCP' }, false],
    ]);
    const egress = [policy('x', { podSelector: { matchLabels: { pod: 'a' } }, egress: [{ to: [{ namespaceSelector: { matchLabels: { ns: 'y' } } }], ports: [{ port: 'http' }] }] })];
    table('named-egress', egress, [
      [{ from: 'x/a', to: 'y/b', port: 8081 }, true],
      [{ from: 'x/a', to: 'y/c', port: 8082 }, true],
      [{ from: 'x/a', to: 'y/c', port: 8081 }, false],
      [{ from: 'x/a', to: 'z/b', port: 8081 }, false],
    ]);
    const everyPeer = [policy('x', { podSelector: { matchLabels: { pod: 'a' } }, egress: [{ ports: [{ port: 'http' }, { port: 9000 }] }] })];
    table('named-egress-every-peer', everyPeer, [
      [{ from: 'x/a', to: 'z/c', port: 8082 }, true],
      [{ from: 'x/a', to: 'z/c', port: 8080 }, false],
      [{ from: 'x/a', to: 'z/c', port: 9000 }, true],
    ]);
    const blockPeer = [policy('x', { podSelector: { matchLabels: { pod: 'a' } }, egress: [{ to: [{ ipBlock: { cidr: '10.0.2.0/24', except: ['10.0.2.1/32'] } }], ports: [{ port: 'http' }] }] })];
    table('named-egress-block', blockPeer, [
      [{ from: 'x/a', to: 'z/b', port: 8081 }, true],
      [{ from: 'x/a', to: 'z/a', port: 8080 }, false],
      [{ from: 'x/a', to: 'y/b', port: 8081 }, false],
    ]);
  });

  void test('ports: TCP by default, UDP and SCTP, endPort ranges, a protocol without a port', () => {
    const ps = [policy('x', { podSelector: {}, ingress: [{ ports: [{ port: 53 }, { protocol: 'UDP', port: 5000, endPort: 5010 }, { protocol: 'SCTP' }] }] })];
    table('ports', ps, [
      [{ from: 'y/a', to: 'x/a', port: 53 }, true],
      [{ from: 'y/a', to: 'x/a', port: 53, protocol: 'UDP' }, false],
      [{ from: 'y/a', to: 'x/a', port: 5000, protocol: 'UDP' }, true],
      [{ from: 'y/a', to: 'x/a', port: 5010, protocol: 'UDP' }, true],
      [{ from: 'y/a', to: 'x/a', port: 5011, protocol: 'UDP' }, false],
      [{ from: 'y/a', to: 'x/a', port: 5005, protocol: 'TCP' }, false],
      [{ from: 'y/a', to: 'x/a', port: 38412, protocol: 'SCTP' }, true],
    ]);
  });

  void test('IPv4 and IPv6 peers of one pod, and IPv6 blocks', () => {
    const ps = [policy('x', { podSelector: {}, ingress: [{ from: [{ podSelector: { matchLabels: { pod: 'b' } } }, { ipBlock: { cidr: 'fd00::3:0/112' } }] }] })];
    table('dual-stack', ps, [
      [{ from: 'x/b', to: 'x/a' }, true],
      [{ from: 'x/b', to: 'x/a', family: 6 }, true],
      [{ from: 'z/c', to: 'x/a', family: 6 }, true],
      [{ from: 'z/c', to: 'x/a', family: 4 }, false],
    ]);
  });

  void test('union: every policy that selects the pod adds what it allows', () => {
    const ps = [
      policy('x', { podSelector: { matchLabels: { pod: 'a' } }, ingress: [{ from: [{ podSelector: { matchLabels: { pod: 'b' } } }] }] }),
      policy('x', { podSelector: {}, ingress: [{ from: [{ podSelector: { matchLabels: { pod: 'c' } } }], ports: [{ port: 443 }] }] }),
    ];
    table('union', ps, [
      [{ from: 'x/b', to: 'x/a' }, true],
      [{ from: 'x/c', to: 'x/a', port: 443 }, true],
      [{ from: 'x/c', to: 'x/a', port: 80 }, false],
      [{ from: 'x/c', to: 'x/b', port: 80 }, false],
    ]);
  });

  void test('isolation only on the networks the policy is for (reference: every network of the pod)', () => {
    const ps = [policy('x', { podSelector: {}, policyTypes: ['Ingress', 'Egress'] })];
    table('per-network', ps, [
      [{ from: 'y/a', to: 'x/a' }, false],
      [{ from: 'y/a', to: 'x/a', network: NET2 }, true],
      [{ from: 'x/a', to: 'y/a', network: NET2 }, true],
    ]);
    const pp = resolvePodPolicy(find('x/a'), ps, lookup);
    assert.deepEqual(
      pp.networks.map((n) => [n.network, n.interface]),
      [[NET1, 'net1']],
    );
    // The same policy for both networks, by a comma list.
    table('both-networks', [policy('x', { podSelector: {} }, 'net1, default/net2')], [[{ from: 'y/a', to: 'x/a', network: NET2 }, false]]);
  });

  void test('a policy of another namespace, or without policy-for, selects nothing', () => {
    table('other-namespace', [policy('y', { podSelector: {} })], [[{ from: 'z/a', to: 'x/a' }, true]]);
    table('no-policy-for', [policy('x', { podSelector: {} }, null)], [[{ from: 'z/a', to: 'x/a' }, true]]);
  });

  void test('a policy that cannot be compiled isolates the pods it selects and says why (reference: skipped, fail-open)', () => {
    const bad = policy('x', {
      podSelector: { matchLabels: { pod: 'a' } },
      policyTypes: ['Ingress'],
      ingress: [{ from: [{ podSelector: { matchExpressions: [{ key: 'pod', operator: 'Matches', values: ['b'] }] } }] }],
    });
    const good = policy('x', { podSelector: {}, ingress: [{ from: [{ namespaceSelector: {} }] }] });
    table(
      'fail-closed',
      [bad, good],
      [
        // x/a: the bad policy adds no allow, the good one still does (a union).
        [{ from: 'y/b', to: 'x/a' }, true],
        [{ from: 'x/a', to: 'y/b' }, true],
      ],
    );
    table(
      'fail-closed-alone',
      [bad],
      [
        [{ from: 'x/b', to: 'x/a' }, false],
        [{ from: 'x/a', to: 'x/b' }, true],
        [{ from: 'x/a', to: 'x/c' }, true],
      ],
    );
    const pp = resolvePodPolicy(find('x/a'), [bad], lookup);
    assert.equal(pp.networks[0]?.failures.length, 1);
    assert.match(pp.networks[0]?.failures[0]?.message ?? '', /^MultiNetworkPolicy x\/p\d+: spec.ingress\[0\].from\[0\].podSelector.matchExpressions\[0\].operator "Matches"/);
    assert.equal(resolvePodPolicy(find('x/b'), [bad], lookup).networks.length, 0, 'x/b is not selected by its podSelector');
    // An unreadable podSelector selects every pod of the namespace; unreadable policyTypes isolate both ways; an unreadable policy-for every network.
    const worst = policy('x', { podSelector: { matchLabels: { 'bad key': 'v' } } }, 'a/b/c');
    const w = resolvePodPolicy(find('x/c'), [worst], lookup);
    assert.deepEqual(
      w.networks.map((n) => [n.network, n.ingress.isolated, n.egress.isolated, n.ingress.rules.length + n.egress.rules.length]),
      [
        [NET1, true, true, 0],
        [NET2, true, true, 0],
      ],
    );
  });

  void test('peer addresses are checked: a bad address from the lookup never reaches the PodPolicy', () => {
    const dirty: PeerLookup = () => [{ addresses: ['10.0.0.9', 'not-an-ip', '10.0.0.0/24', 'FD00::0:9'], containerPorts: [{ name: 'http', containerPort: 70000 }] }];
    const pp = resolvePodPolicy(find('x/a'), [policy('x', { podSelector: {}, ingress: [{ from: [{ podSelector: {} }] }], egress: [{ to: [{ podSelector: {} }], ports: [{ port: 'http' }] }] })], dirty);
    assert.deepEqual(pp.networks[0]?.ingress.rules[0]?.peers?.addresses, ['10.0.0.9', 'fd00::9']);
    assert.deepEqual(pp.networks[0]?.egress.rules[0]?.peerPorts, []);
    assert.deepEqual(pp.networks[0]?.egress.rules[0]?.ports, []);
  });
});

void describe('resolver: properties over random policies, valid and broken', () => {
  const selector = fc.oneof(
    fc.constant({}),
    fc.record({ matchLabels: fc.dictionary(fc.constantFrom('pod', 'ns', 'bad key'), fc.constantFrom('a', 'b', 'c', 'x')) }, { requiredKeys: [] }),
    fc.record({
      matchExpressions: fc.array(
        fc.record({ key: fc.constantFrom('pod', 'ns'), operator: fc.constantFrom('In', 'NotIn', 'Exists', 'Bogus'), values: fc.array(fc.constantFrom('a', 'b', 'y'), { maxLength: 2 }) }),
        { maxLength: 2 },
      ),
    }),
  );
  const peerArb = fc.oneof(
    fc.record({ podSelector: selector }),
    fc.record({ namespaceSelector: selector, podSelector: selector }, { requiredKeys: ['namespaceSelector'] }),
    fc.record({
      ipBlock: fc.record({ cidr: fc.constantFrom('10.0.0.0/16', '10.0.1.0/24', 'fd00::/16', '10.0.0.0/40'), except: fc.array(fc.constantFrom('10.0.1.0/24', '10.0.0.1/32'), { maxLength: 2 }) }),
    }),
  );
  const portArb = fc.record(
    {
      protocol: fc.constantFrom('TCP', 'UDP', 'SCTP', 'tcp'),
      port: fc.oneof(fc.constantFrom(80, 8080, 'http', 'dns'), fc.integer({ min: 0, max: 70000 })),
      endPort: fc.integer({ min: 1, max: 65535 }),
    },
    { requiredKeys: [] },
  );
  const ruleArb = fc.record({ from: fc.array(peerArb, { maxLength: 3 }), to: fc.array(peerArb, { maxLength: 3 }), ports: fc.array(portArb, { maxLength: 3 }) }, { requiredKeys: [] });
  const policyArb = fc.record({
    namespace: fc.constantFrom('x', 'y'),
    forNets: fc.constantFrom<string | null>('net1', 'net2', 'net1,net2', null, 'a/b/c'),
    spec: fc.record(
      { podSelector: selector, policyTypes: fc.subarray(['Ingress', 'Egress']), ingress: fc.array(ruleArb, { maxLength: 2 }), egress: fc.array(ruleArb, { maxLength: 2 }) },
      { requiredKeys: [] },
    ),
  });

  void test('never throws; a network with a failure is isolated; adding a policy never lifts isolation', () => {
    fc.assert(
      fc.property(fc.array(policyArb, { maxLength: 4 }), policyArb, fc.constantFrom(...WORLD), (ps, extra, target) => {
        const policies = ps.map((p) => policy(p.namespace, p.spec, p.forNets));
        const before = resolvePodPolicy(target, policies, lookup);
        for (const n of before.networks) {
          if (n.failures.length > 0) assert.ok(n.ingress.isolated || n.egress.isolated, `${n.network}: a failure without isolation`);
          assert.ok(target.networks.some((t) => t.network === n.network && t.interface === n.interface));
        }
        const after = resolvePodPolicy(target, [...policies, policy(extra.namespace, extra.spec, extra.forNets)], lookup);
        for (const n of before.networks) {
          const m = after.networks.find((x) => x.network === n.network);
          assert.ok(m !== undefined, `${n.network} lost its policy`);
          assert.ok(!n.ingress.isolated || m.ingress.isolated);
          assert.ok(!n.egress.isolated || m.egress.isolated);
          // Union: every rule that was there still is.
          assert.ok(m.ingress.rules.length >= n.ingress.rules.length && m.egress.rules.length >= n.egress.rules.length);
        }
      }),
      { numRuns: 300 },
    );
  });
});

/**
 * An oracle written from NetworkPolicy's text, reading the API objects directly (no code of the
 * resolver): whether a connection from `c` to `s` passes the policies. Only for valid policies.
 */
interface Sel {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}
interface OraclePeer {
  podSelector?: Sel;
  namespaceSelector?: Sel;
  ipBlock?: { cidr: string; except?: string[] };
}
interface OraclePort {
  protocol?: string;
  port?: number | string;
  endPort?: number;
}
interface OracleRule {
  from?: OraclePeer[];
  to?: OraclePeer[];
  ports?: OraclePort[];
}
interface OracleSpec {
  podSelector: Sel;
  policyTypes?: readonly string[];
  ingress?: OracleRule[];
  egress?: OracleRule[];
}

function oracleMatches(sel: Sel, labels: Record<string, string>): boolean {
  const ok = Object.entries(sel.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
  return (
    ok &&
    (sel.matchExpressions ?? []).every((e) => {
      const has = Object.hasOwn(labels, e.key);
      const v = labels[e.key] ?? '';
      if (e.operator === 'In') return has && (e.values ?? []).includes(v);
      if (e.operator === 'NotIn') return !has || !(e.values ?? []).includes(v);
      if (e.operator === 'Exists') return has;
      return !has;
    })
  );
}

function oracle(policies: readonly { namespace: string; nets: readonly string[]; spec: OracleSpec }[], p: Required<Pick<Probe, 'from' | 'to'>> & Probe): boolean {
  const network = p.network ?? NET1;
  const protocol = p.protocol ?? 'TCP';
  const port = p.port ?? 80;
  const c = find(p.from);
  const s = find(p.to);
  const addr = (w: WorldPod): string => (w.networks.find((n) => n.network === network)?.addresses ?? []).find((a) => (p.family === 6 ? a.includes(':') : !a.includes(':'))) ?? '';
  const peerOk = (peers: OraclePeer[] | undefined, x: WorldPod, policyNs: string): boolean =>
    (peers ?? []).length === 0 ||
    (peers ?? []).some((peer) => {
      if (peer.ipBlock !== undefined) return inBlock(addr(x), { cidr: peer.ipBlock.cidr, except: peer.ipBlock.except ?? [] });
      const nsOk = peer.namespaceSelector === undefined ? x.namespace === policyNs : oracleMatches(peer.namespaceSelector, NS_LABELS[x.namespace] ?? {});
      return nsOk && (peer.podSelector === undefined || oracleMatches(peer.podSelector, x.labels));
    });
  // Named ports are the server's in both directions: it is the selected pod on ingress, the peer on egress.
  const portOk = (ports: OraclePort[] | undefined): boolean =>
    (ports ?? []).length === 0 ||
    (ports ?? []).some((q) => {
      if ((q.protocol ?? 'TCP') !== protocol) return false;
      if (q.port === undefined) return true;
      if (typeof q.port === 'number') return port >= q.port && port <= (q.endPort ?? q.port);
      return s.containerPorts.some((cp) => cp.name === q.port && (cp.protocol ?? 'TCP') === protocol && cp.containerPort === port);
    });
  const side = (w: WorldPod, dir: 'ingress' | 'egress', other: WorldPod): boolean => {
    const selecting = policies.filter((x) => x.namespace === w.namespace && x.nets.includes(network) && oracleMatches(x.spec.podSelector, w.labels));
    const typed = selecting.filter((x) =>
      x.spec.policyTypes !== undefined && x.spec.policyTypes.length > 0 ? x.spec.policyTypes.includes(dir === 'ingress' ? 'Ingress' : 'Egress') : dir === 'ingress' || (x.spec.egress ?? []).length > 0,
    );
    if (typed.length === 0) return true;
    return typed.some((x) => (x.spec[dir] ?? []).some((r) => peerOk(dir === 'ingress' ? r.from : r.to, other, x.namespace) && portOk(r.ports)));
  };
  return side(c, 'egress', s) && side(s, 'ingress', c);
}

void describe('resolver against an oracle written from NetworkPolicy’s text', () => {
  const key = fc.constantFrom('pod', 'ns');
  const value = fc.constantFrom('a', 'b', 'c', 'x', 'y');
  const sel: fc.Arbitrary<Sel> = fc.oneof(
    fc.constant({}),
    fc.record({ matchLabels: fc.dictionary(key, value, { maxKeys: 1 }) }),
    fc.record({
      matchExpressions: fc.array(
        fc.oneof(
          fc.record({ key, operator: fc.constantFrom('In', 'NotIn'), values: fc.array(value, { minLength: 1, maxLength: 2 }) }),
          fc.record({ key, operator: fc.constantFrom('Exists', 'DoesNotExist') }),
        ),
        { maxLength: 2 },
      ),
    }),
  );
  const cidr = fc.constantFrom<{ cidr: string; except?: string[] }>(
    { cidr: '10.0.0.0/16', except: ['10.0.1.0/24'] },
    { cidr: '10.0.1.0/24' },
    { cidr: '10.0.0.0/8', except: ['10.0.0.2/32', '10.0.2.0/24'] },
    { cidr: 'fd00::/16', except: ['fd00::2:0/112'] },
  );
  const peer: fc.Arbitrary<OraclePeer> = fc.oneof(
    fc.record({ podSelector: sel }),
    fc.record({ namespaceSelector: sel, podSelector: sel }, { requiredKeys: ['namespaceSelector'] }),
    fc.record({ ipBlock: cidr }),
  );
  const portEntry: fc.Arbitrary<OraclePort> = fc.oneof(
    fc.record({ protocol: fc.constantFrom('TCP', 'UDP'), port: fc.constantFrom(53, 80, 8081) }, { requiredKeys: ['port'] }),
    fc.record({ port: fc.constant(8080), endPort: fc.constantFrom(8080, 8081, 8082) }),
    fc.record({ protocol: fc.constantFrom('TCP', 'UDP'), port: fc.constantFrom('http', 'dns') }, { requiredKeys: ['port'] }),
    fc.record({ protocol: fc.constantFrom('UDP', 'SCTP') }),
  );
  const rule = fc.record({ peers: fc.array(peer, { maxLength: 2 }), ports: fc.array(portEntry, { maxLength: 2 }) });
  const pol = fc.record({
    namespace: fc.constantFrom('x', 'y'),
    nets: fc.constantFrom(['default/net1'], ['default/net2'], ['default/net1', 'default/net2']),
    podSelector: sel,
    policyTypes: fc.constantFrom(undefined, ['Ingress'], ['Egress'], ['Ingress', 'Egress']),
    ingress: fc.array(rule, { maxLength: 2 }),
    egress: fc.array(rule, { maxLength: 2 }),
  });
  const probe = fc.record({
    from: fc.constantFrom(...WORLD.map((w) => `${w.namespace}/${w.name}` as Name)),
    to: fc.constantFrom(...WORLD.map((w) => `${w.namespace}/${w.name}` as Name)),
    port: fc.constantFrom(53, 80, 8080, 8081, 8082),
    protocol: fc.constantFrom<PolicyProtocol>('TCP', 'UDP', 'SCTP'),
    network: fc.constantFrom(NET1, NET2),
    family: fc.constantFrom<4 | 6>(4, 6),
  });

  void test('property: for random valid policies and connections, the compiled PodPolicies allow exactly what the oracle allows', () => {
    fc.assert(
      fc.property(fc.array(pol, { maxLength: 3 }), fc.array(probe, { minLength: 1, maxLength: 8 }), (ps, probes) => {
        const specs = ps.map((p) => ({
          namespace: p.namespace,
          nets: p.nets,
          spec: {
            podSelector: p.podSelector,
            ...(p.policyTypes !== undefined ? { policyTypes: p.policyTypes } : {}),
            ingress: p.ingress.map((r) => ({ ...(r.peers.length > 0 ? { from: r.peers } : {}), ...(r.ports.length > 0 ? { ports: r.ports } : {}) })),
            egress: p.egress.map((r) => ({ ...(r.peers.length > 0 ? { to: r.peers } : {}), ...(r.ports.length > 0 ? { ports: r.ports } : {}) })),
          },
        }));
        const policies = specs.map((s) => policy(s.namespace, s.spec, s.nets.join(',')));
        for (const pr of probes) {
          if (pr.network === NET2 && pr.family === 6) continue; // net2 is IPv4 only
          assert.equal(reach(policies, pr), oracle(specs, pr), JSON.stringify(pr));
        }
      }),
      { numRuns: 400 },
    );
  });
});
