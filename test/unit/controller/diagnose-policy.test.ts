/**
 * `diagnose pod` and MultiNetworkPolicy, the pure side: a table of pods, policies and probes, each
 * row naming the findings, the probe's result and, when it is denied, the reason each rule gives.
 * The peers come from address groups written for a world of pods, as the controller writes them,
 * so "selected" means what a sidecar would see.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { explainPodPolicy, type PolicyProbe } from '../../../cmd/controller/diagnose/policy.js';
import { diagnosePod, type PodFacts } from '../../../cmd/controller/diagnose/pod.js';
import { renderReport } from '../../../cmd/controller/diagnose/render.js';
import { parseDiagnoseArgs } from '../../../cmd/controller/diagnose/command.js';
import type { PodPolicyReport } from '../../../cmd/controller/diagnose/report.js';
import { INJECTION_ENABLED, INJECTION_LABEL, NETWORKS_ANNOTATION, POLICY_FOR_ANNOTATION, SIDECAR_CONTAINER_NAME } from '../../../src/keys.js';
import type { V1EndpointSlice, V1Pod } from '../../../src/kube/types.js';
import type { MultiNetworkPolicy } from '../../../src/policy/api.js';
import { DEFAULT_HEALTH_PORT } from '../../../src/sidecar-contract.js';
import { addressGroupSlices, type GroupPod } from '../../harness/address-groups.js';
import { networkStatus, pod } from './fixtures.js';

const NS = 'shop';
const NET = `${NS}/net1`;
const NET2 = `${NS}/net2`;
const ENABLED = { [INJECTION_LABEL]: INJECTION_ENABLED };

/** The pod diagnosed: db, 10.1.0.10 and fd00::10 on net1, 10.2.0.10 on net2, a named port sql. */
function db(o: { sidecar?: boolean; labels?: Record<string, string> } = {}): V1Pod {
  const p = pod('db', {
    namespace: NS,
    labels: o.labels ?? { app: 'db' },
    status: networkStatus([
      { name: NET, ips: ['10.1.0.10', 'fd00::10'] },
      { name: NET2, ips: ['10.2.0.10'] },
    ]),
  });
  p.metadata = { ...p.metadata, annotations: { ...p.metadata?.annotations, [NETWORKS_ANNOTATION]: 'net1,net2' } };
  p.spec = { containers: [{ name: 'db', image: 'db', ports: [{ name: 'sql', containerPort: 5432 }, { containerPort: 9000 }] }] };
  if (o.sidecar !== false) p.spec.initContainers = [{ name: SIDECAR_CONTAINER_NAME, image: 'multus-proxy', restartPolicy: 'Always' }];
  return p;
}

/** The world the address groups are written from. */
const WORLD: GroupPod[] = [
  { namespace: NS, labels: { app: 'web' }, networks: { [NET]: ['10.1.0.20', 'fd00::20'], [NET2]: ['10.2.0.20'] }, containerPorts: [{ name: 'http', containerPort: 8080 }] },
  { namespace: NS, labels: { app: 'batch' }, networks: { [NET]: ['10.1.0.30'] }, containerPorts: [{ name: 'http', containerPort: 8081 }] },
  { namespace: 'ops', labels: { app: 'web' }, networks: { [NET]: ['10.1.0.40'] } },
];
const NS_LABELS = { [NS]: { team: 'shop' }, ops: { team: 'ops' } };

let generation = 1;
function mnp(name: string, spec: unknown, networks: string | null = 'net1'): MultiNetworkPolicy {
  return {
    apiVersion: 'k8s.cni.cncf.io/v1beta2',
    kind: 'MultiNetworkPolicy',
    metadata: { name, namespace: NS, generation: generation++, annotations: networks === null ? {} : { [POLICY_FOR_ANNOTATION]: networks } },
    spec: spec as MultiNetworkPolicy['spec'],
  };
}

const webIngress = mnp('web-in', { podSelector: { matchLabels: { app: 'db' } }, ingress: [{ from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 5432 }] }] });
const blockIngress = mnp('block-in', { podSelector: {}, ingress: [{ from: [{ ipBlock: { cidr: '10.9.0.0/16', except: ['10.9.5.0/24'] } }], ports: [{ protocol: 'UDP', port: 53 }] }] });
const namedIngress = mnp('named-in', { podSelector: {}, ingress: [{ ports: [{ port: 'sql' }, { port: 30000, endPort: 30100 }] }] });
const denyAll = mnp('deny-all', { podSelector: {}, policyTypes: ['Ingress'] });
const otherNet = mnp('other-net', { podSelector: {}, policyTypes: ['Ingress'] }, 'net9');
const broken = mnp('broken', { podSelector: {}, ingress: [{ from: [{ ipBlock: { cidr: '10.9.0.0' } }] }] });
const namedEgress = mnp('named-out', { podSelector: {}, egress: [{ to: [{ podSelector: {}, namespaceSelector: {} }], ports: [{ port: 'http' }] }] });
const otherNamespace = { ...mnp('elsewhere', { podSelector: {}, policyTypes: ['Ingress'] }), metadata: { name: 'elsewhere', namespace: 'ops', annotations: { [POLICY_FOR_ANNOTATION]: 'shop/net1' } } };

interface Row {
  readonly name: string;
  readonly policies: readonly MultiNetworkPolicy[];
  /** Policies whose address groups the controller has not written. */
  readonly unwritten?: readonly MultiNetworkPolicy[];
  readonly pod?: V1Pod;
  readonly namespaceLabels?: Record<string, string>;
  readonly probe?: Partial<PolicyProbe>;
  /** The finding codes, in order. */
  readonly codes: readonly string[];
  /** Per probed network: `<network> <result>[ <allowedBy>]`. */
  readonly results?: readonly string[];
  /** The reasons of the denied probe's rules, `<policy> <rule>: <reasons>`. */
  readonly reasons?: readonly RegExp[];
  readonly check?: (report: PodPolicyReport, messages: string) => void;
}

const ROWS: Row[] = [
  { name: 'no policy: nothing isolated, the probe passes', policies: [], probe: {}, codes: ['NoPolicy', 'NotIsolated', 'NotIsolated'], results: [`${NET} open`, `${NET2} open`] },
  {
    name: 'a policy of another namespace does not select',
    policies: [otherNamespace],
    probe: { network: NET },
    codes: ['NoPolicy', 'NotIsolated'],
  },
  {
    name: 'a podSelector peer on its port: allowed by that rule, on the network the policy is for only',
    policies: [webIngress],
    probe: { peer: '10.1.0.20' },
    codes: ['PolicySelects', 'PolicyEnforced', 'PolicyAllows', 'NotIsolated'],
    results: [`${NET} allowed ${NS}/web-in spec.ingress[0]`, `${NET2} open`],
    check: (r) => assert.deepEqual(r.networks, [{ network: NET, interface: 'net1', ingress: { isolated: true, by: [`${NS}/web-in`] }, egress: { isolated: false, by: [] } }]),
  },
  {
    name: 'IPv6: the peer dual-stack pod by its IPv6 address, written in any form',
    policies: [webIngress],
    probe: { peer: 'fd00:0::20', network: NET },
    codes: ['PolicySelects', 'PolicyEnforced', 'PolicyAllows'],
    results: [`${NET} allowed ${NS}/web-in spec.ingress[0]`],
  },
  {
    name: 'a peer the selector does not select: the peer part fails, naming the selector and the group',
    policies: [webIngress],
    probe: { peer: '10.1.0.30', network: NET },
    codes: ['PolicySelects', 'PolicyEnforced', 'PolicyDenies'],
    results: [`${NET} denied`],
    reasons: [/^shop\/web-in spec\.ingress\[0\]: from\[0\] \(pods app=web in namespace shop\): 10\.1\.0\.30 is not among the 2 addresses of the pods it selects on shop\/net1$/],
  },
  {
    name: 'a pod of the same labels in another namespace: not selected (podSelector alone is the policy namespace)',
    policies: [webIngress],
    probe: { peer: '10.1.0.40', network: NET },
    codes: ['PolicySelects', 'PolicyEnforced', 'PolicyDenies'],
    reasons: [/from\[0\] \(pods app=web in namespace shop\): 10\.1\.0\.40 is not among the 2 addresses/],
  },
  {
    name: 'the right peer on a port not listed: the port part fails, with the ports listed',
    policies: [webIngress],
    probe: { peer: '10.1.0.20', port: 9000, network: NET },
    codes: ['PolicySelects', 'PolicyEnforced', 'PolicyDenies'],
    reasons: [/^shop\/web-in spec\.ingress\[0\]: ports: 9000\/TCP is not listed \(5432\/TCP\)$/],
  },
  {
    name: 'ipBlock: inside, in the except, outside; the protocol counts',
    policies: [blockIngress],
    probe: { peer: '10.9.5.7', port: 53, protocol: 'UDP', network: NET },
    codes: ['PolicySelects', 'PolicyEnforced', 'PolicyDenies'],
    reasons: [/^shop\/block-in spec\.ingress\[0\]: from\[0\] ipBlock 10\.9\.0\.0\/16: 10\.9\.5\.7 is in its except 10\.9\.5\.0\/24$/],
  },
  {
    name: 'ipBlock: an address inside it and outside its except passes',
    policies: [blockIngress],
    probe: { peer: '10.9.4.7', port: 53, protocol: 'UDP', network: NET },
    codes: ['PolicySelects', 'PolicyEnforced', 'PolicyAllows'],
  },
  {
    name: 'ipBlock: outside the cidr, and TCP where only UDP is listed',
    policies: [blockIngress],
    probe: { peer: '10.8.0.1', port: 53, protocol: 'TCP', network: NET },
    codes: ['PolicySelects', 'PolicyEnforced', 'PolicyDenies'],
    reasons: [/^shop\/block-in spec\.ingress\[0\]: from\[0\] ipBlock 10\.9\.0\.0\/16: 10\.8\.0\.1 is not in it; ports: 53\/TCP is not listed \(53\/UDP\)$/],
  },
  {
    name: "a named ingress port is the pod's own containerPort; a range covers its ports",
    policies: [namedIngress],
    probe: { peer: '192.0.2.1', port: 5432, network: NET },
    codes: ['PolicySelects', 'PolicyEnforced', 'PolicyAllows'],
  },
  {
    name: "a port outside the named port and the range: both listed, the name with the pod's number",
    policies: [namedIngress],
    probe: { peer: '192.0.2.1', port: 5433, network: NET },
    codes: ['PolicySelects', 'PolicyEnforced', 'PolicyDenies'],
    reasons: [/ports: 5433\/TCP is not listed \(sql\/TCP \(5432 in the pod's containerPorts\), 30000-30100\/TCP\)$/],
  },
  {
    name: 'union: a second policy allows what the first does not, and is named',
    policies: [webIngress, namedIngress],
    probe: { peer: '10.1.0.30', port: 30050, network: NET },
    codes: ['PolicySelects', 'PolicySelects', 'PolicyEnforced', 'PolicyAllows'],
    results: [`${NET} allowed ${NS}/named-in spec.ingress[0]`],
  },
  {
    name: 'a policy with no ingress rule isolates and allows nothing',
    policies: [denyAll],
    probe: { peer: '10.1.0.20', port: 5432, network: NET },
    codes: ['PolicySelects', 'PolicyEnforced', 'PolicyDenies'],
    reasons: [/^shop\/deny-all: it has no ingress rule, so it allows nothing in$/],
  },
  {
    name: 'a policy for a network the pod is not on isolates nothing',
    policies: [otherNet],
    probe: { peer: '10.1.0.20', port: 5432, network: NET },
    codes: ['PolicyNotOnNetworks', 'NotIsolated'],
  },
  {
    name: 'a policy that cannot be compiled: fail-closed, its message, and the probe names it',
    policies: [broken],
    probe: { peer: '10.9.0.1', port: 5432, network: NET },
    codes: ['PolicyFailsClosed', 'PolicyEnforced', 'PolicyDenies'],
    reasons: [/^shop\/broken: the policy cannot be compiled, so it allows nothing: MultiNetworkPolicy shop\/broken: spec\.ingress\[0\]\.from\[0\]\.ipBlock\.cidr "10\.9\.0\.0": has no prefix length/],
    check: (_r, messages) => assert.match(messages, /isolates ingress on shop\/net1 and allows nothing \(fail-closed\)/),
  },
  {
    name: 'an address group not written yet: said, and the sidecar allows no peer from it',
    policies: [webIngress],
    unwritten: [webIngress],
    probe: { peer: '10.1.0.20', network: NET },
    codes: ['PolicySelects', 'AddressGroupNotWritten', 'PolicyEnforced', 'PolicyDenies'],
    reasons: [/from\[0\] \(pods app=web in namespace shop\): its address group is not written yet, so it selects no peer$/],
  },
  {
    name: "egress with a named port: the peer's own containerPort",
    policies: [namedEgress],
    probe: { peer: '10.1.0.30', port: 8081, direction: 'egress', network: NET },
    codes: ['PolicySelects', 'PolicyEnforced', 'PolicyAllows'],
    results: [`${NET} allowed ${NS}/named-out spec.egress[0]`],
  },
  {
    name: "egress with a named port: another peer's number does not count",
    policies: [namedEgress],
    probe: { peer: '10.1.0.30', port: 8080, direction: 'egress', network: NET },
    codes: ['PolicySelects', 'PolicyEnforced', 'PolicyDenies'],
    reasons: [/ports: 8080\/TCP is not listed \(http\/TCP \(8081 in the peer's containerPorts\)\)$/],
  },
  {
    name: 'no sidecar, namespace enabled: not enforced, recreate the pod',
    policies: [webIngress],
    pod: db({ sidecar: false }),
    probe: { peer: '10.1.0.20', network: NET },
    codes: ['PolicySelects', 'PolicyNotEnforced', 'PolicyAllows'],
    check: (_r, messages) => assert.match(messages, /has no multus-proxy sidecar .*so the policy is not enforced there: every peer passes.*fix: recreate the pod .*the webhook injects/),
  },
  {
    name: 'no sidecar, namespace not enabled: label it, then recreate',
    policies: [webIngress],
    pod: db({ sidecar: false }),
    namespaceLabels: {},
    codes: ['PolicySelects', 'PolicyNotEnforced'],
    check: (r, messages) => {
      assert.equal(r.enforced, false);
      assert.match(messages, /fix: kubectl label namespace shop multus-proxy-injection=enabled --overwrite, then recreate the pod/);
    },
  },
  {
    name: 'a probe on a network the pod is not attached to',
    policies: [webIngress],
    probe: { network: `${NS}/net7` },
    codes: ['PolicySelects', 'PolicyEnforced', 'ProbeNetworkNotAttached'],
  },
];

function groups(policies: readonly MultiNetworkPolicy[], unwritten: readonly MultiNetworkPolicy[] = []): V1EndpointSlice[] {
  return policies.filter((p) => !unwritten.includes(p)).flatMap((p) => addressGroupSlices(p, WORLD, NS_LABELS));
}

const PROBE: PolicyProbe = { peer: '10.1.0.20', port: 5432, protocol: 'TCP', direction: 'ingress' };

void describe('diagnose pod: MultiNetworkPolicy', () => {
  for (const row of ROWS) {
    void test(row.name, () => {
      const { report, findings } = explainPodPolicy(
        {
          pod: row.pod ?? db(),
          policies: row.policies,
          addressGroups: groups(row.policies, row.unwritten),
          namespaceLabels: row.namespaceLabels ?? ENABLED,
          ...(row.probe !== undefined ? { probe: { ...PROBE, ...row.probe } } : {}),
        },
        `Pod ${NS}/db`,
        `recreate the pod (kubectl delete pod -n ${NS} db, then create it again)`,
      );
      const messages = findings.map((f) => `${f.code}: ${f.message}${f.fix !== undefined ? ` fix: ${f.fix}` : ''}`).join('\n');
      assert.deepEqual(
        findings.map((f) => f.code),
        row.codes,
        messages,
      );
      if (row.results !== undefined)
        assert.deepEqual(
          report.probes.map((p) => `${p.network} ${p.result}${p.allowedBy !== undefined ? ` ${p.allowedBy}` : ''}`),
          row.results,
        );
      if (row.reasons !== undefined) {
        const denied = report.probes.find((p) => p.result === 'denied');
        assert.ok(denied, messages);
        const lines = denied.rules.map((r) => `${r.policy}${r.rule !== undefined ? ` ${r.rule}` : ''}: ${r.reasons.join('; ')}`);
        assert.equal(lines.length, row.reasons.length, lines.join('\n'));
        row.reasons.forEach((re, i) => assert.match(lines[i] ?? '', re));
        // The finding says the same, with the fix naming the peer and the port.
        const f = findings.find((x) => x.code === 'PolicyDenies');
        assert.match(f?.fix ?? '', new RegExp(`covers ${denied.peer.replace(/\./g, '\\.')} .* ports include ${denied.port}`));
      }
      row.check?.(report, messages);
      // Every finding of this part is about policy, and names the pod or the policy.
      for (const f of findings) assert.equal(f.topic, 'policy');
    });
  }

  const facts = (p: V1Pod, o: Partial<PodFacts> = {}): PodFacts => ({
    pod: p,
    namespaceLabels: ENABLED,
    events: [],
    webhookRegistered: true,
    services: [],
    slices: [],
    healthPort: DEFAULT_HEALTH_PORT,
    unreadable: [],
    ...o,
  });

  void test('diagnosePod: the policy part joins the report and its verdict; absent when the policies could not be read', () => {
    const withPolicy = diagnosePod(facts(db(), { policies: [webIngress], addressGroups: groups([webIngress]), probe: { ...PROBE, peer: '10.1.0.30', network: NET } }));
    assert.equal(withPolicy.verdict, 'problem');
    assert.deepEqual(withPolicy.policy?.selectedBy, [{ policy: `${NS}/web-in`, networks: [NET], ingress: true, egress: false }]);
    const text = renderReport(withPolicy, 'text');
    assert.match(text, /MultiNetworkPolicy: enforced by the sidecar/);
    assert.match(text, /shop\/net1 on net1: ingress isolated by shop\/web-in; egress open/);
    assert.match(text, /ingress 10\.1\.0\.30 port 5432\/TCP on shop\/net1: denied\n {4}shop\/web-in spec\.ingress\[0\]: peer fails, port matches\n {6}from\[0\]/);
    assert.match(text, /verdict: problem: .*PolicyDenies/);
    assert.equal(diagnosePod(facts(db())).policy, undefined);
  });

  void test('cluster text in a policy (a stored bad value) is escaped on the terminal', () => {
    const evil = mnp('evil', { podSelector: {}, ingress: [{ from: [{ ipBlock: { cidr: '10.0.0.0/8\u001b[2J\nverdict: ok' } }] }] });
    const text = renderReport(diagnosePod(facts(db(), { policies: [evil], addressGroups: [], probe: { ...PROBE, network: NET } })), 'text');
    assert.ok(!text.includes('\u001b'), 'no raw ESC reaches the terminal');
    assert.match(text, /10\.0\.0\.0\/8\\u001b\[2J\\nverdict: ok/);
    assert.equal(text.match(/^verdict:/gm)?.length, 1);
  });

  void test('--peer, --port, --direction, --network: parsed, defaults, and each mistake named', () => {
    const ok = parseDiagnoseArgs(['pod', 'shop/db', '--peer', 'FD00::0020', '--port', '53/udp', '--direction', 'egress', '--network', 'shop/net1']);
    assert.ok(ok.ok && ok.value !== 'help');
    assert.deepEqual(ok.value.probe, { peer: 'fd00::20', port: 53, protocol: 'UDP', direction: 'egress', network: 'shop/net1' });
    const dflt = parseDiagnoseArgs(['pod', 'db', '--peer', '10.1.2.3', '--port', '8080']);
    assert.ok(dflt.ok && dflt.value !== 'help');
    assert.deepEqual(dflt.value.probe, { peer: '10.1.2.3', port: 8080, protocol: 'TCP', direction: 'ingress' });
    const bad: [string[], RegExp][] = [
      [['pod', 'db', '--peer', '10.1.2.3'], /needs both --peer IP and --port/],
      [['pod', 'db', '--port', '80'], /needs both --peer IP and --port/],
      [['pod', 'db', '--peer', '10.1.2.0/24', '--port', '80'], /--peer "10\.1\.2\.0\/24": write one IPv4 or IPv6 address/],
      [['pod', 'db', '--peer', 'web', '--port', '80'], /--peer "web"/],
      [['pod', 'db', '--peer', '10.1.2.3', '--port', '70000'], /--port "70000": write a port number from 1 to 65535/],
      [['pod', 'db', '--peer', '10.1.2.3', '--port', '80/ICMP'], /--port "80\/ICMP"/],
      [['pod', 'db', '--peer', '10.1.2.3', '--port', '80', '--direction', 'in'], /--direction "in": write ingress or egress/],
      [['pod', 'db', '--peer', '10.1.2.3', '--port', '80', '--network', 'net1'], /--network "net1": write NAMESPACE\/NAD/],
      [['service', 'web', '--peer', '10.1.2.3', '--port', '80'], /use them with diagnose pod/],
      [['pod', 'db', '--peer', '', '--port', ''], /--peer "": write one IPv4 or IPv6 address/],
      [['pod', 'db', '--peer', '10.1.2.3', '--port', '80', '--direction', ''], /--direction "": write ingress or egress/],
    ];
    for (const [argv, re] of bad) {
      const r = parseDiagnoseArgs(argv);
      assert.ok(!r.ok, argv.join(' '));
      assert.match(r.error, re);
    }
  });
  void test('property: the connection flags never throw, and what they accept is a well-formed probe', () => {
    const word = fc.oneof(fc.string(), fc.constantFrom('10.1.2.3', 'fd00::1', '8080', '8080/udp', '0', '65536', 'ingress', 'egress', 'shop/net1', '10.0.0.0/8'));
    fc.assert(
      fc.property(word, word, fc.option(word, { nil: undefined }), fc.option(word, { nil: undefined }), (peer, port, direction, network) => {
        const argv = ['pod', 'db', '--peer', peer, '--port', port, ...(direction !== undefined ? ['--direction', direction] : []), ...(network !== undefined ? ['--network', network] : [])];
        const r = parseDiagnoseArgs(argv);
        if (!r.ok) return assert.match(r.error, /^(multus-proxy controller )?diagnose: /);
        assert.ok(r.value !== 'help' && r.value.probe !== undefined);
        const p = r.value.probe;
        assert.ok(Number.isInteger(p.port) && p.port >= 1 && p.port <= 65535);
        assert.ok(['TCP', 'UDP', 'SCTP'].includes(p.protocol) && ['ingress', 'egress'].includes(p.direction));
      }),
      { numRuns: 500 },
    );
  });

  void test('property: every probe is answered, and a denial has a failing part and a reason for every rule it lists', () => {
    const policies = [webIngress, blockIngress, namedIngress, denyAll, broken, namedEgress];
    const peers = ['10.1.0.20', 'fd00::20', '10.1.0.30', '10.1.0.40', '10.9.5.7', '10.9.4.7', '10.8.0.1', '192.0.2.1'];
    fc.assert(
      fc.property(
        fc.subarray(policies),
        fc.subarray(policies),
        fc.constantFrom(...peers),
        fc.constantFrom(53, 5432, 8080, 8081, 30000, 30100, 30101),
        fc.constantFrom('TCP' as const, 'UDP' as const),
        fc.constantFrom('ingress' as const, 'egress' as const),
        (chosen, unwritten, peer, port, protocol, direction) => {
          const { report } = explainPodPolicy(
            { pod: db(), policies: chosen, addressGroups: groups(chosen, unwritten), namespaceLabels: ENABLED, probe: { peer, port, protocol, direction } },
            `Pod ${NS}/db`,
            'recreate',
          );
          assert.equal(report.probes.length, 2, 'one answer per network of the pod');
          for (const v of report.probes) {
            const net = report.networks.find((n) => n.network === v.network);
            assert.equal(v.result === 'open', net?.[direction].isolated !== true);
            if (v.result === 'allowed') assert.match(v.allowedBy ?? '', new RegExp(`^${NS}/[a-z-]+ spec\\.${direction}\\[\\d+\\]$`));
            if (v.result !== 'denied') continue;
            for (const r of v.rules) {
              assert.ok(!(r.peer && r.port), `${r.policy} ${r.rule ?? ''} matches both, yet the probe is denied`);
              assert.ok(r.reasons.length > 0, `${r.policy} ${r.rule ?? ''}: no reason`);
            }
            // Every isolating policy is accounted for.
            assert.deepEqual([...new Set(v.rules.map((r) => r.policy))].sort(), [...(net?.[direction].by ?? [])].sort());
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});
