/**
 * Kubernetes' NetworkPolicy conformance matrix (test/e2e/network/netpol) mapped onto one shared
 * secondary network: pods a, b, c in namespaces x, y, z, every pod attached to the same
 * NetworkAttachmentDefinition, and each case a set of MultiNetworkPolicies (for that network) with
 * the reachability truth table the upstream test states, extended to every probe the suite sends
 * (TCP and UDP, ports 80 and 81). Pure: the real-node runner (netpol.ts) applies the policies and
 * probes; the unit test checks every table against the project's resolver.
 *
 * A table is written as upstream writes it: everything reachable, then `expectPeer`,
 * `expectAllIngress`, `expectAllEgress` and `expect` overrides in order. A pod's probe of itself
 * goes over loopback, not the secondary network, and is left out (upstream ignores loopback too).
 * SCTP is not probed: this kernel has no SCTP module (docs/policy.md); the SCTP cases still run, as
 * upstream's own "even if the plugin doesn't support SCTP" tests do, with TCP and UDP probes.
 */
import type { MultiNetworkPolicy, MultiNetworkPolicyEgressRule, MultiNetworkPolicyIngressRule, MultiNetworkPolicyPeer, LabelSelector } from '../../src/policy/api.js';
import { matchesSelector } from '../../src/annotations/label-selector.js';
import type { PeerLookup, SelectedPod } from '../../src/policy/resolve.js';

export const NS_KEYS = ['x', 'y', 'z'] as const;
export const POD_KEYS = ['a', 'b', 'c'] as const;
export type NsKey = (typeof NS_KEYS)[number];
export type PodKey = (typeof POD_KEYS)[number];
/** `x/a` and so on: a model pod. */
export type PodId = `${NsKey}/${PodKey}`;
export const PODS: readonly PodId[] = NS_KEYS.flatMap((n) => POD_KEYS.map((p): PodId => `${n}/${p}`));

/** The real namespace of each model namespace. */
export const NAMESPACES: Readonly<Record<NsKey, string>> = { x: 'netpol-x', y: 'netpol-y', z: 'netpol-z' };
/** The shared network: one NAD, in namespace x, that every pod attaches as net1. */
/** Dual-stack: IPv4 for the matrix, IPv6 for the neighbour-discovery cases. */
export const NETWORK = { namespace: NAMESPACES.x, name: 'polnet', subnet: '10.1.9.0/24', subnet6: 'fd00:10:9::/64' } as const;
export const NETWORK_KEY = `${NETWORK.namespace}/${NETWORK.name}`;
/** The label every pod carries with its model name, as upstream's `pod: a`. */
export const POD_LABEL = 'pod';
/** The namespace label Kubernetes sets on every namespace (upstream's namespaceLabelKey). */
export const NS_NAME_LABEL = 'kubernetes.io/metadata.name';

export type ProbeProtocol = 'TCP' | 'UDP';
export interface Probe {
  readonly protocol: ProbeProtocol;
  readonly port: 80 | 81;
}
/** Every probe of every case: the servers listen on all four. */
export const PROBES: readonly Probe[] = [
  { protocol: 'TCP', port: 80 },
  { protocol: 'TCP', port: 81 },
  { protocol: 'UDP', port: 80 },
  { protocol: 'UDP', port: 81 },
];
export const probeName = (p: Probe): string => `${p.protocol}/${p.port}`;
/** The servers' named containerPorts, as upstream names them. */
export const portName = (protocol: ProbeProtocol | 'SCTP', port: number): string => `serve-${port}-${protocol.toLowerCase()}`;

/** The pairs probed: every ordered pair of distinct pods. */
export const PAIRS: readonly (readonly [PodId, PodId])[] = PODS.flatMap((from) => PODS.filter((to) => to !== from).map((to) => [from, to] as const));

/** A pod, a namespace or everything (upstream's Peer: empty fields match all). */
export interface Peer {
  readonly ns?: NsKey;
  readonly pod?: PodKey;
}
const matches = (peer: Peer, id: PodId): boolean => {
  const [n, p] = id.split('/') as [NsKey, PodKey];
  return (peer.ns === undefined || peer.ns === n) && (peer.pod === undefined || peer.pod === p);
};

/** One probe's expected table, built as upstream's Reachability. */
export class Reachability {
  private readonly cells = new Map<string, boolean>();
  constructor(all = true) {
    for (const [f, t] of PAIRS) this.cells.set(`${f}>${t}`, all);
  }
  expectPeer(from: Peer, to: Peer, allowed: boolean): this {
    for (const [f, t] of PAIRS) if (matches(from, f) && matches(to, t)) this.cells.set(`${f}>${t}`, allowed);
    return this;
  }
  expect(from: PodId, to: PodId, allowed: boolean): this {
    if (from !== to) this.cells.set(`${from}>${to}`, allowed);
    return this;
  }
  expectAllIngress(to: PodId, allowed: boolean): this {
    return this.expectPeer({}, peerOf(to), allowed);
  }
  expectAllEgress(from: PodId, allowed: boolean): this {
    return this.expectPeer(peerOf(from), {}, allowed);
  }
  get(from: PodId, to: PodId): boolean | undefined {
    return this.cells.get(`${from}>${to}`);
  }
}
const peerOf = (id: PodId): Peer => {
  const [ns, pod] = id.split('/') as [NsKey, PodKey];
  return { ns, pod };
};

/** probe name -> "from>to" -> reachable. */
export type Table = Record<string, Record<string, boolean>>;

/** The pods' net1 addresses, for the cases that name addresses (ipBlock). */
export type Addresses = Readonly<Record<PodId, string>>;

/** A policy of a case: its model namespace, name and spec (the runner adds policy-for). */
export interface CasePolicy {
  readonly ns: NsKey;
  readonly name: string;
  readonly spec: MultiNetworkPolicy['spec'];
}

export interface ConformanceCase {
  /** The upstream test's title (network_policy.go), or what it is mapped from. */
  readonly upstream: string;
  /** How the mapping differs from the upstream test, when it does. */
  readonly note?: string;
  readonly policies: (a: Addresses) => readonly CasePolicy[];
  /** The expected table of one probe. */
  readonly expect: (probe: Probe) => Reachability;
}

// Selectors and peers as upstream's helpers build them.
const podIs = (pod: PodKey): LabelSelector => ({ matchLabels: { [POD_LABEL]: pod } });
const nsIs = (ns: NsKey): LabelSelector => ({ matchLabels: { [NS_NAME_LABEL]: NAMESPACES[ns] } });
const nsExpr = (operator: 'In' | 'NotIn', ns: NsKey[]): LabelSelector => ({ matchExpressions: [{ key: NS_NAME_LABEL, operator, values: ns.map((n) => NAMESPACES[n]) }] });
const ALL: LabelSelector = {};
const ingress = (podSelector: LabelSelector, rules: MultiNetworkPolicyIngressRule[]): MultiNetworkPolicy['spec'] => ({ podSelector, policyTypes: ['Ingress'], ingress: rules });
const egress = (podSelector: LabelSelector, rules: MultiNetworkPolicyEgressRule[]): MultiNetworkPolicy['spec'] => ({ podSelector, policyTypes: ['Egress'], egress: rules });
const from = (...peers: MultiNetworkPolicyPeer[]): MultiNetworkPolicyIngressRule => ({ from: peers });
const to = (...peers: MultiNetworkPolicyPeer[]): MultiNetworkPolicyEgressRule => ({ to: peers });
const host = (a: string): string => `${a}/${a.includes(':') ? 128 : 32}`;
const policy = (ns: NsKey, name: string, spec: MultiNetworkPolicy['spec']): CasePolicy => ({ ns, name, spec });
const same = (r: () => Reachability) => (): Reachability => r();
const isTcp = (p: Probe): boolean => p.protocol === 'TCP';

/** Expected: nothing reaches x/a except what `allowed` lists. */
const onlyInto = (target: PodId, allowed: (Peer | PodId)[]): Reachability => {
  const r = new Reachability().expectAllIngress(target, false);
  for (const a of allowed) {
    if (typeof a === 'string') r.expect(a, target, true);
    else r.expectPeer(a, peerOf(target), true);
  }
  return r;
};

export const CASES: readonly ConformanceCase[] = [
  {
    upstream: "should support a 'default-deny-ingress' policy",
    policies: () => [policy('x', 'deny-ingress', ingress(ALL, []))],
    expect: () => new Reachability().expectPeer({}, { ns: 'x' }, false),
  },
  {
    upstream: "should support a 'default-deny-all' policy",
    policies: () => [policy('x', 'deny-all', { podSelector: ALL, policyTypes: ['Ingress', 'Egress'] })],
    expect: () => new Reachability().expectPeer({}, { ns: 'x' }, false).expectPeer({ ns: 'x' }, {}, false),
  },
  {
    upstream: 'should enforce policy to allow traffic from pods within server namespace based on PodSelector',
    policies: () => [policy('x', 'x-a-allows-x-b', ingress(podIs('a'), [from({ podSelector: podIs('b') })]))],
    expect: () => onlyInto('x/a', ['x/b']),
  },
  {
    upstream: 'should enforce policy to allow ingress traffic for a target',
    policies: () => [policy('x', 'deny-all', ingress(ALL, [])), policy('x', 'allow-all-to-a', ingress(podIs('a'), [from({ podSelector: ALL, namespaceSelector: ALL })]))],
    expect: () => new Reachability().expectAllIngress('x/b', false).expectAllIngress('x/c', false),
  },
  {
    upstream: 'should enforce policy to allow ingress traffic from pods in all namespaces',
    policies: () => [policy('x', 'allow-from-another-ns', ingress(podIs('a'), [from({ namespaceSelector: ALL })]))],
    expect: () => new Reachability(),
  },
  {
    upstream: 'should enforce policy to allow traffic only from a different namespace, based on NamespaceSelector',
    policies: () => [policy('x', 'allow-client-a-via-ns-selector', ingress(podIs('a'), [from({ namespaceSelector: nsIs('y') })]))],
    expect: () => onlyInto('x/a', [{ ns: 'y' }]),
  },
  {
    upstream: 'should enforce policy based on PodSelector with MatchExpressions',
    policies: () => [policy('x', 'x-a-allows-x-b', ingress(podIs('a'), [from({ podSelector: { matchExpressions: [{ key: POD_LABEL, operator: 'In', values: ['b'] }] } })]))],
    expect: () => onlyInto('x/a', ['x/b']),
  },
  {
    upstream: 'should enforce policy based on NamespaceSelector with MatchExpressions',
    policies: () => [policy('x', 'allow-ns-y-match-selector', ingress(podIs('a'), [from({ namespaceSelector: nsExpr('In', ['y']) })]))],
    expect: () => onlyInto('x/a', [{ ns: 'y' }]),
  },
  {
    upstream: 'should enforce policy based on PodSelector or NamespaceSelector',
    policies: () => [policy('x', 'allow-ns-y-match-selector', ingress(podIs('a'), [from({ namespaceSelector: nsExpr('NotIn', ['x']) }, { podSelector: podIs('b') })]))],
    expect: () => new Reachability().expect('x/c', 'x/a', false),
  },
  {
    upstream: 'should enforce policy based on PodSelector and NamespaceSelector',
    policies: () => [policy('x', 'allow-ns-y-podselector-and-nsselector', ingress(podIs('a'), [from({ namespaceSelector: nsExpr('NotIn', ['x']), podSelector: podIs('b') })]))],
    expect: () => onlyInto('x/a', ['y/b', 'z/b']),
  },
  {
    upstream: 'should enforce policy based on Multiple PodSelectors and NamespaceSelectors',
    policies: () => [
      policy(
        'x',
        'allow-ns-y-z-pod-b-c',
        ingress(podIs('a'), [from({ namespaceSelector: nsExpr('NotIn', ['x']), podSelector: { matchExpressions: [{ key: POD_LABEL, operator: 'In', values: ['b', 'c'] }] } })]),
      ),
    ],
    expect: () => onlyInto('x/a', ['y/b', 'y/c', 'z/b', 'z/c']),
  },
  {
    upstream: 'should enforce policy based on any PodSelectors',
    policies: () => [policy('x', 'allow-ns-x-pod-b-c', ingress(podIs('a'), [from({ podSelector: podIs('b') }, { podSelector: podIs('c') })]))],
    expect: () => onlyInto('x/a', ['x/b', 'x/c']),
  },
  {
    upstream: 'should enforce policy to allow traffic only from a pod in a different namespace based on PodSelector and NamespaceSelector',
    policies: () => [policy('x', 'allow-ns-y-pod-a-via-namespace-pod-selector', ingress(podIs('a'), [from({ namespaceSelector: nsIs('y'), podSelector: podIs('a') })]))],
    expect: () => onlyInto('x/a', ['y/a']),
  },
  {
    upstream: 'should enforce policy based on Ports',
    policies: () => [policy('x', 'allow-client-a-via-ns-selector', ingress(podIs('a'), [{ from: [{ namespaceSelector: nsIs('y') }], ports: [{ port: 81, protocol: 'TCP' }] }]))],
    expect: (p) => onlyInto('x/a', isTcp(p) && p.port === 81 ? [{ ns: 'y' }] : []),
  },
  {
    upstream: 'should enforce multiple, stacked policies with overlapping podSelectors',
    policies: () => [
      policy('x', 'allow-client-a-via-ns-selector', ingress(podIs('a'), [{ from: [{ namespaceSelector: nsIs('y') }], ports: [{ port: 81, protocol: 'TCP' }] }])),
      policy('x', 'allow-client-a-via-ns-selector-80', ingress(podIs('a'), [{ from: [{ namespaceSelector: nsIs('y') }], ports: [{ port: 80, protocol: 'TCP' }] }])),
    ],
    expect: (p) => onlyInto('x/a', isTcp(p) ? [{ ns: 'y' }] : []),
  },
  {
    upstream: 'should support allow-all policy',
    policies: () => [policy('x', 'allow-all', ingress(ALL, [{}]))],
    expect: () => new Reachability(),
  },
  {
    upstream: 'should allow ingress access on one named port',
    policies: () => [policy('x', 'allow-all', ingress(ALL, [{ ports: [{ port: portName('TCP', 81) }] }]))],
    expect: (p) => new Reachability().expectPeer({}, { ns: 'x' }, isTcp(p) && p.port === 81),
  },
  {
    upstream: 'should allow ingress access from namespace on one named port',
    policies: () => [policy('x', 'allow-client-a-via-ns-selector-80', ingress(podIs('a'), [{ from: [{ namespaceSelector: nsIs('y') }], ports: [{ port: portName('TCP', 80), protocol: 'TCP' }] }]))],
    expect: (p) => onlyInto('x/a', isTcp(p) && p.port === 80 ? [{ ns: 'y' }] : []),
  },
  {
    upstream: 'should allow egress access on one named port',
    policies: () => [policy('x', 'allow-egress', egress(ALL, [{ ports: [{ port: portName('TCP', 80) }] }]))],
    expect: (p) => new Reachability().expectPeer({ ns: 'x' }, {}, isTcp(p) && p.port === 80),
  },
  {
    upstream: 'should deny ingress from pods on other namespaces',
    policies: () => [policy('x', 'deny-empty-policy', ingress(ALL, [from({ podSelector: {} })]))],
    expect: () => new Reachability().expectPeer({ ns: 'y' }, { ns: 'x' }, false).expectPeer({ ns: 'z' }, { ns: 'x' }, false),
  },
  {
    upstream: 'should deny egress from pods based on PodSelector',
    policies: () => [policy('x', 'deny-egress-pod-a', egress(podIs('a'), []))],
    expect: () => new Reachability().expectAllEgress('x/a', false),
  },
  {
    upstream: 'should deny egress from all pods in a namespace',
    policies: () => [policy('x', 'deny-egress-ns-x', egress(ALL, []))],
    expect: () => new Reachability().expectPeer({ ns: 'x' }, {}, false),
  },
  {
    upstream: 'should work with Ingress, Egress specified together',
    policies: () => [
      policy('x', 'allow-client-a-via-pod-selector', {
        podSelector: podIs('a'),
        policyTypes: ['Egress', 'Ingress'],
        ingress: [from({ podSelector: podIs('b') })],
        egress: [{ ports: [{ port: 80 }] }],
      }),
    ],
    // Egress allows TCP/80 only; x/b's connections into x/a are answered through conntrack.
    expect: (p) => onlyInto('x/a', ['x/b']).expectAllEgress('x/a', isTcp(p) && p.port === 80),
  },
  {
    upstream: 'should support denying of egress traffic on the client side (even if the server explicitly allows this traffic)',
    policies: () => {
      const xa = from({ namespaceSelector: nsIs('x'), podSelector: podIs('a') });
      return [
        policy('x', 'allow-to-ns-y-pod-a', egress(podIs('a'), [to({ namespaceSelector: nsIs('y'), podSelector: podIs('a') })])),
        policy('y', 'allow-from-xa-on-ya-match-selector', ingress(podIs('a'), [xa])),
        policy('y', 'allow-from-xa-on-yb-match-selector', ingress(podIs('b'), [xa])),
      ];
    },
    expect: () => new Reachability().expectAllEgress('x/a', false).expectAllIngress('y/a', false).expect('x/a', 'y/a', true).expectAllIngress('y/b', false),
  },
  {
    upstream: 'should enforce egress policy allowing traffic to a server in a different namespace based on PodSelector and NamespaceSelector',
    policies: () => [policy('x', 'allow-to-ns-y-pod-a', egress(podIs('a'), [to({ namespaceSelector: nsIs('y'), podSelector: podIs('a') })]))],
    expect: () => new Reachability().expectAllEgress('x/a', false).expect('x/a', 'y/a', true),
  },
  {
    upstream: 'should enforce ingress policy allowing any port traffic to a server on a specific protocol',
    policies: () => [policy('x', 'allow-ingress-by-proto', ingress(podIs('a'), [{ ports: [{ protocol: 'TCP' }] }]))],
    expect: (p) => new Reachability().expectAllIngress('x/a', isTcp(p)),
  },
  {
    upstream: 'should enforce multiple ingress policies with ingress allow-all policy taking precedence',
    policies: () => [policy('x', 'allow-ingress-port-80', ingress(ALL, [{ ports: [{ port: 80 }] }])), policy('x', 'allow-ingress', ingress(ALL, [{}]))],
    expect: same(() => new Reachability()),
  },
  {
    upstream: 'should enforce multiple egress policies with egress allow-all policy taking precedence',
    note: 'first step (port 80 alone) as its own case below',
    policies: () => [policy('x', 'allow-egress-port-80', egress(ALL, [{ ports: [{ port: 80 }] }])), policy('x', 'allow-egress', egress(ALL, [{}]))],
    expect: same(() => new Reachability()),
  },
  {
    upstream: 'should enforce multiple egress policies with egress allow-all policy taking precedence (step 1: port 80 only)',
    policies: () => [policy('x', 'allow-egress-port-80', egress(ALL, [{ ports: [{ port: 80 }] }]))],
    expect: (p) => new Reachability().expectPeer({ ns: 'x' }, {}, isTcp(p) && p.port === 80),
  },
  {
    upstream: 'should allow egress access to server in CIDR block',
    policies: (a) => [policy('x', 'allow-client-a-via-cidr-egress-rule', egress(podIs('a'), [to({ ipBlock: { cidr: host(a['y/b']) } })]))],
    expect: () => new Reachability().expectAllEgress('x/a', false).expect('x/a', 'y/b', true),
  },
  {
    upstream: 'should enforce except clause while egress access to server in CIDR block',
    note: "the CIDR is the shared network's subnet (upstream widens the pod address)",
    policies: (a) => [policy('x', 'allow-client-a-via-cidr-egress-rule', egress(podIs('a'), [to({ ipBlock: { cidr: NETWORK.subnet, except: [host(a['x/b'])] } })]))],
    expect: () => new Reachability().expect('x/a', 'x/b', false),
  },
  {
    upstream: 'should ensure an IP overlapping both IPBlock.CIDR and IPBlock.Except is allowed',
    note: 'the second policy is added beside the first (a union), where upstream replaces the first',
    policies: (a) => [
      policy('x', 'allow-client-a-via-cidr-egress-rule', egress(podIs('a'), [to({ ipBlock: { cidr: NETWORK.subnet, except: [host(a['x/b'])] } })])),
      policy('x', 'allow-client-a-to-x-b', egress(podIs('a'), [to({ ipBlock: { cidr: host(a['x/b']) } })])),
    ],
    expect: () => new Reachability(),
  },
  {
    upstream: 'should enforce policies to check ingress and egress policies can be controlled independently based on PodSelector',
    policies: () => [policy('x', 'allow-egress-for-target', egress(podIs('a'), [{}])), policy('x', 'deny-ingress-via-label-selector', ingress(podIs('a'), []))],
    expect: () => new Reachability().expectAllIngress('x/a', false),
  },
  {
    upstream: "should not mistakenly treat 'protocol: SCTP' as 'protocol: TCP', even if the plugin doesn't support SCTP",
    policies: () => [policy('x', 'deny-ingress', ingress(ALL, [])), policy('x', 'allow-only-sctp-ingress-on-port-81', ingress(podIs('a'), [{ ports: [{ port: 81, protocol: 'SCTP' }] }]))],
    expect: () => new Reachability().expectPeer({}, { ns: 'x' }, false),
  },
  {
    upstream: 'should not allow access by TCP when a policy specifies only UDP',
    policies: () => [policy('x', 'allow-only-udp-ingress-on-port-81', ingress(podIs('a'), [{ ports: [{ port: 81, protocol: 'UDP' }] }]))],
    expect: (p) => new Reachability().expectAllIngress('x/a', p.protocol === 'UDP' && p.port === 81),
  },
  {
    upstream: 'should enforce policy based on NamespaceSelector with MatchExpressions using default ns label',
    policies: () => [policy('x', 'allow-ns-y-match-selector-for-immutable-ns-label', egress(podIs('a'), [to({ namespaceSelector: nsExpr('NotIn', ['y']) })]))],
    expect: () => new Reachability().expectPeer({ ns: 'x', pod: 'a' }, { ns: 'y' }, false),
  },
  {
    upstream: 'should support ingress with endPort (the endPort tests of the NetworkPolicy API, mapped to ports 80-81)',
    policies: () => [policy('x', 'allow-ns-y-port-range', ingress(podIs('a'), [{ from: [{ namespaceSelector: nsIs('y') }], ports: [{ protocol: 'UDP', port: 80, endPort: 81 }] }]))],
    expect: (p) => onlyInto('x/a', p.protocol === 'UDP' ? [{ ns: 'y' }] : []),
  },
  {
    upstream: 'deny all in a namespace but a DNS-like egress (UDP to one port), as the egress tests that allow DNS do',
    policies: () => [policy('x', 'deny-all-but-udp-80', { podSelector: ALL, policyTypes: ['Ingress', 'Egress'], egress: [{ ports: [{ protocol: 'UDP', port: 80 }] }] })],
    expect: (p) =>
      new Reachability()
        .expectPeer({}, { ns: 'x' }, false)
        .expectPeer({ ns: 'x' }, { ns: 'y' }, p.protocol === 'UDP' && p.port === 80)
        .expectPeer({ ns: 'x' }, { ns: 'z' }, p.protocol === 'UDP' && p.port === 80),
  },
];

/** Labels a change adds to pods and namespaces of the matrix (removed again after the case). */
export interface Labels {
  readonly pods?: Partial<Record<PodId, Readonly<Record<string, string>>>>;
  readonly namespaces?: Partial<Record<NsKey, Readonly<Record<string, string>>>>;
}

/**
 * An upstream test that changes something between two tables: the first table (`before`), then
 * the change (policies applied again by name, so a policy of the same name is updated, and labels
 * added), then the second table (`after`). Each table is whole, over every probe.
 */
export interface UpdateCase {
  readonly upstream: string;
  readonly note?: string;
  readonly before: ConformanceCase;
  /** What changes: the policies after it (replacing those of the same name), labels added. */
  readonly change: { readonly what: string; readonly policies?: (a: Addresses) => readonly CasePolicy[]; readonly labels?: Labels };
  readonly after: (probe: Probe) => Reachability;
}

/** The policies in force after a change: the first table's, with those the change names replaced. */
export function policiesAfter(u: UpdateCase, a: Addresses): CasePolicy[] {
  const next = u.change.policies?.(a) ?? [];
  const key = (p: CasePolicy): string => `${p.ns}/${p.name}`;
  const replaced = new Set(next.map(key));
  return [...u.before.policies(a).filter((p) => !replaced.has(key(p))), ...next];
}

/** The second table's case: its policies and expectation as one case. */
export const afterCase = (u: UpdateCase): ConformanceCase => ({ upstream: `${u.upstream} (after: ${u.change.what})`, policies: (a) => policiesAfter(u, a), expect: u.after });

const UPDATED = { ns2: 'updated' } as const;
const POD_UPDATED = { pod2: 'updated' } as const;
const ISOLATED = { target: 'isolated' } as const;

export const UPDATE_CASES: readonly UpdateCase[] = [
  {
    upstream: 'should enforce updated policy',
    before: { upstream: 'allow all ingress in x', policies: () => [policy('x', 'allow-all-mutate-to-deny-all', ingress(ALL, [{}]))], expect: () => new Reachability() },
    change: { what: 'the policy updated to no ingress rule', policies: () => [policy('x', 'allow-all-mutate-to-deny-all', ingress(ALL, []))] },
    after: () => new Reachability().expectPeer({}, { ns: 'x' }, false),
  },
  {
    upstream: 'should allow ingress access from updated namespace',
    note: 'upstream expects `y` to reach every pod after the label; with nine pods that is the x/a cells from y, everything else already passes',
    before: {
      upstream: 'x/a allows namespaces labelled ns2=updated; none is',
      policies: () => [policy('x', 'allow-client-a-via-ns-selector', ingress(podIs('a'), [from({ namespaceSelector: { matchLabels: UPDATED } })]))],
      expect: () => new Reachability().expectAllIngress('x/a', false),
    },
    change: { what: 'namespace y labelled ns2=updated', labels: { namespaces: { y: UPDATED } } },
    after: () => new Reachability().expectAllIngress('x/a', false).expectPeer({ ns: 'y' }, {}, true),
  },
  {
    upstream: 'should allow ingress access from updated pod',
    before: {
      upstream: 'x/a allows pods labelled pod=b,pod2=updated in x; none is',
      policies: () => [policy('x', 'allow-client-a-via-pod-selector', ingress(podIs('a'), [from({ podSelector: { matchLabels: { [POD_LABEL]: 'b', ...POD_UPDATED } } })]))],
      expect: () => new Reachability().expectAllIngress('x/a', false),
    },
    change: { what: 'x/b labelled pod2=updated', labels: { pods: { 'x/b': POD_UPDATED } } },
    after: () => new Reachability().expectAllIngress('x/a', false).expect('x/b', 'x/a', true),
  },
  {
    upstream: 'should deny ingress access to updated pod',
    before: {
      upstream: 'a policy in x isolates pods labelled target=isolated; none is',
      policies: () => [policy('x', 'deny-ingress-via-label-selector', ingress({ matchLabels: ISOLATED }, []))],
      expect: () => new Reachability(),
    },
    change: { what: 'x/a labelled target=isolated', labels: { pods: { 'x/a': ISOLATED } } },
    after: () => new Reachability().expectAllIngress('x/a', false),
  },
  {
    upstream: 'should deny egress from pods based on PodSelector (the selected pod changed by a policy update)',
    note: 'upstream has no update variant of this test; here the policy first selects x/b, then is updated to select x/a',
    before: { upstream: 'x/b denied egress', policies: () => [policy('x', 'deny-egress-pod-a', egress(podIs('b'), []))], expect: () => new Reachability().expectAllEgress('x/b', false) },
    change: { what: 'the policy updated to select x/a', policies: () => [policy('x', 'deny-egress-pod-a', egress(podIs('a'), []))] },
    after: () => new Reachability().expectAllEgress('x/a', false),
  },
];

/** The expected table of a case, every probe. */
export function expectedTable(c: ConformanceCase): Table {
  const out: Table = {};
  for (const p of PROBES) {
    const r = c.expect(p);
    const row: Record<string, boolean> = {};
    for (const [f, t] of PAIRS) row[`${f}>${t}`] = r.get(f, t) ?? true;
    out[probeName(p)] = row;
  }
  return out;
}

/** The table where everything reaches everything: no policy. */
export const allowAll = (): Table => expectedTable({ upstream: 'no policy', policies: () => [], expect: () => new Reachability() });

/** The cells where `observed` differs from `expected`, as "TCP/80 x/a -> y/b: expected allow, observed deny". */
export function differingCells(expected: Table, observed: Table): string[] {
  const out: string[] = [];
  const word = (b: boolean | undefined): string => (b === undefined ? 'no probe' : b ? 'allow' : 'deny');
  for (const p of PROBES) {
    const name = probeName(p);
    for (const [f, t] of PAIRS) {
      const e = expected[name]?.[`${f}>${t}`];
      const o = observed[name]?.[`${f}>${t}`];
      if (e !== o) out.push(`${name} ${f} -> ${t}: expected ${word(e)}, observed ${word(o)}`);
    }
  }
  return out;
}

/** A case's policies as MultiNetworkPolicy objects for the shared network. */
export function casePolicies(c: ConformanceCase, a: Addresses): MultiNetworkPolicy[] {
  return c.policies(a).map((p) => ({
    apiVersion: 'k8s.cni.cncf.io/v1beta2',
    kind: 'MultiNetworkPolicy',
    metadata: { name: p.name, namespace: NAMESPACES[p.ns], annotations: { 'k8s.v1.cni.cncf.io/policy-for': NETWORK_KEY } },
    spec: p.spec,
  }));
}

/** A table as text, one line per probe and source: `TCP/80 x/a: ✓✗...` over PODS (`·` for itself). */
export function formatTable(t: Table): string[] {
  const lines = [`        ${PODS.join(' ')}`];
  for (const p of PROBES) {
    for (const f of PODS) lines.push(`${probeName(p).padEnd(6)} ${f} ${PODS.map((to) => (to === f ? ' . ' : t[probeName(p)]?.[`${f}>${to}`] ? ' ✓ ' : ' ✗ ')).join(' ')}`);
  }
  return lines;
}

const nsOf = (id: PodId): NsKey => id.split('/')[0] as NsKey;
/** The servers' containerPorts: TCP and UDP on 80 and 81, named as upstream names them. */
export const CONTAINER_PORTS = (['TCP', 'UDP'] as const).flatMap((protocol) => ([80, 81] as const).map((port) => ({ name: portName(protocol, port), containerPort: port, protocol })));

/** A model pod as the resolver sees it, with its net1 address (and the labels a change added). */
export function modelPod(id: PodId, a: Addresses, labels: Labels = {}): SelectedPod {
  return {
    namespace: NAMESPACES[nsOf(id)],
    labels: { [POD_LABEL]: id.split('/')[1] ?? '', ...labels.pods?.[id] },
    networks: [{ network: NETWORK_KEY, interface: 'net1', addresses: [a[id]] }],
    containerPorts: CONTAINER_PORTS,
  };
}

/** What the controller's address groups answer for the nine pods (namespaces carry their name label, and what a change added). */
export function modelLookup(a: Addresses, labels: Labels = {}): PeerLookup {
  const nsLabels = (ns: string): Record<string, string> => ({ [NS_NAME_LABEL]: ns, ...labels.namespaces?.[NS_KEYS.find((k) => NAMESPACES[k] === ns) ?? 'x'] });
  return (q) =>
    PODS.map((id) => modelPod(id, a, labels))
      .filter((w) => (q.namespaces.kind === 'namespace' ? w.namespace === q.namespaces.name : matchesSelector(q.namespaces.selector, nsLabels(w.namespace))))
      .filter((w) => matchesSelector(q.pods, { ...w.labels }))
      .map((w) => ({ addresses: w.networks[0]?.addresses ?? [], containerPorts: w.containerPorts }));
}
