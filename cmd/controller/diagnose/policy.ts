/**
 * MultiNetworkPolicy in `diagnose pod`, from objects already read. Pure.
 *
 * The pod's policy is resolved as its sidecar resolves it: the same resolver, with the peers taken
 * from the address groups the controller wrote (addressGroupView), so diagnose sees what the
 * sidecar sees, a group not written yet included (it answers no peer). From that: which policies
 * select the pod and on which networks, what they isolate, which fail to compile (fail-closed),
 * whether the sidecar is there to enforce any of it and, for a probe (a peer address and a port in
 * one direction), which rule allows it or, for each rule of the isolating policies, which part
 * fails.
 */
import { matchesSelector, formatLabelSelector } from '../../../src/annotations/label-selector.js';
import { parseNetworkStatus } from '../../../src/annotations/network-status.js';
import { parseIp } from '../../../src/annotations/ip.js';
import { networkKey } from '../../../src/annotations/service-network.js';
import { hasSidecar } from '../../../src/injection-policy.js';
import { INJECTION_ENABLED, INJECTION_LABEL, NETWORK_STATUS_ANNOTATION, SIDECAR_CONTAINER_NAME } from '../../../src/keys.js';
import type { V1EndpointSlice, V1Pod } from '../../../src/kube/types.js';
import { compareText } from '../../../src/order.js';
import type { MultiNetworkPolicy } from '../../../src/policy/api.js';
import { addressGroupView, policyPeerQueries, type AddressGroupView } from '../../../src/policy/address-group.js';
import { namedContainerPorts } from '../../../src/policy/container-ports.js';
import type { PodPolicy, PolicyProtocol, PolicyRule } from '../../../src/policy/model.js';
import { inBlock, peerQuery, resolvePodPolicy, type PeerQuery, type SelectedPod } from '../../../src/policy/resolve.js';
import { checkPolicy, type CheckedPeer, type CheckedPolicy, type CheckedPort, type CheckedRule } from '../../../src/policy/validate.js';
import type { Finding, PodPolicyReport, PolicyDirection, PolicyNetwork, PolicySelection, ProbeVerdict, RuleCheck } from './report.js';

export type PolicyDirectionName = 'ingress' | 'egress';

/** A connection to explain: `peer` is the other end, `port` the destination port (the pod's on ingress, the peer's on egress). */
export interface PolicyProbe {
  readonly peer: string;
  readonly port: number;
  readonly protocol: PolicyProtocol;
  readonly direction: PolicyDirectionName;
  /** `<namespace>/<nad>`; undefined: each of the pod's networks. */
  readonly network?: string;
}

export interface PolicyFacts {
  readonly pod: V1Pod;
  /** The MultiNetworkPolicies of the pod's namespace (others are skipped). */
  readonly policies: readonly MultiNetworkPolicy[];
  /** The address-group EndpointSlices of the pod's namespace. */
  readonly addressGroups: readonly V1EndpointSlice[];
  /** The namespace's labels (undefined: unread), for the fix when the pod has no sidecar. */
  readonly namespaceLabels: Readonly<Record<string, string>> | undefined;
  readonly probe?: PolicyProbe;
}

const finding = (severity: Finding['severity'], code: string, message: string, fix?: string): Finding => ({ severity, topic: 'policy', code, message, ...(fix !== undefined ? { fix } : {}) });

/** The pod as the sidecar knows itself: labels, its secondary networks from network-status, its named containerPorts. */
export function selectedPod(pod: V1Pod): SelectedPod {
  const status = pod.metadata?.annotations?.[NETWORK_STATUS_ANNOTATION];
  const parsed = status === undefined ? undefined : parseNetworkStatus(status);
  const entries = parsed?.ok === true ? parsed.value : [];
  return {
    namespace: pod.metadata?.namespace ?? '',
    labels: pod.metadata?.labels ?? {},
    networks: entries
      .filter((e) => !e.default && e.namespace !== undefined && e.nad !== undefined && e.interface !== undefined)
      .map((e) => ({ network: `${e.namespace ?? ''}/${e.nad ?? ''}`, interface: e.interface ?? '', addresses: [...e.ipv4, ...e.ipv6] })),
    containerPorts: namedContainerPorts(pod.spec),
  };
}

interface Selecting {
  readonly selection: PolicySelection;
  readonly checked?: CheckedPolicy;
  readonly generation?: number;
}

/** The policies that select the pod, as the resolver selects them (a failed one: what could be read of it, else everything). */
function selecting(pod: SelectedPod, policies: readonly MultiNetworkPolicy[]): Selecting[] {
  const podNets = pod.networks.map((n) => n.network);
  const own = policies.filter((p) => (p.metadata?.namespace ?? '') === pod.namespace).sort((a, b) => compareText(a.metadata?.name ?? '', b.metadata?.name ?? ''));
  const out: Selecting[] = [];
  for (const policy of own) {
    const checked = checkPolicy(policy, pod.namespace);
    const generation = policy.metadata?.generation;
    if (checked.ok) {
      if (!matchesSelector(checked.value.podSelector, pod.labels)) continue;
      const names = new Set((checked.value.networks ?? []).map(networkKey));
      const selection = { policy: checked.value.key, networks: podNets.filter((n) => names.has(n)), ingress: checked.value.types.ingress, egress: checked.value.types.egress };
      out.push({ selection, checked: checked.value, ...(generation !== undefined ? { generation } : {}) });
      continue;
    }
    const problem = checked.error;
    if (problem.podSelector !== undefined && !matchesSelector(problem.podSelector, pod.labels)) continue;
    const names = problem.networks === undefined ? undefined : new Set(problem.networks.map(networkKey));
    const types = problem.types ?? { ingress: true, egress: true };
    out.push({ selection: { policy: problem.key, networks: podNets.filter((n) => names === undefined || names.has(n)), ingress: types.ingress, egress: types.egress, failure: problem.message } });
  }
  return out;
}

function describeSelector(s: CheckedPolicy['podSelector']): string {
  const text = formatLabelSelector(s);
  return text === '' ? '{}' : text;
}

function describeQuery(q: PeerQuery): string {
  const where = q.namespaces.kind === 'namespace' ? `namespace ${q.namespaces.name}` : `namespaces ${describeSelector(q.namespaces.selector)}`;
  return `pods ${describeSelector(q.pods)} in ${where}`;
}

function directionOf(selected: readonly Selecting[], podPolicy: PodPolicy, network: string, d: PolicyDirectionName): PolicyDirection {
  const set = podPolicy.networks.find((n) => n.network === network);
  return { isolated: set?.[d].isolated === true, by: selected.filter((s) => s.selection[d] && s.selection.networks.includes(network)).map((s) => s.selection.policy) };
}

const portText = (port: number, protocol: string): string => `${port}/${protocol}`;

function portMatches(rule: PolicyRule, peer: string, probe: PolicyProbe): boolean {
  if (rule.ports === undefined && rule.peerPorts === undefined) return true;
  const inRange = (rule.ports ?? []).some((r) => r.protocol === probe.protocol && r.from <= probe.port && probe.port <= r.to);
  return inRange || (rule.peerPorts ?? []).some((p) => p.address === peer && p.protocol === probe.protocol && p.port === probe.port);
}

function peerMatches(rule: PolicyRule, peer: string): boolean {
  return rule.peers === undefined || rule.peers.addresses.includes(peer) || rule.peers.blocks.some((b) => inBlock(peer, b));
}

/** Why `peer` is not one of `rule`'s peers, one reason per peer entry. */
function peerReasons(view: AddressGroupView, s: Selecting, network: string, rule: CheckedRule, d: PolicyDirectionName, peer: string): string[] {
  const field = d === 'ingress' ? 'from' : 'to';
  return (rule.peers ?? []).map((p: CheckedPeer, i) => {
    const key = `${field}[${i}]`;
    if (p.kind === 'block') {
      const b = p.block;
      if (!inBlock(peer, { cidr: b.cidr, except: [] })) return `${key} ipBlock ${b.cidr}: ${peer} is not in it`;
      const except = b.except.find((e) => inBlock(peer, { cidr: e, except: [] }));
      return `${key} ipBlock ${b.cidr}: ${peer} is in its except ${except ?? '?'}`;
    }
    const q = peerQuery(network, s.checked as CheckedPolicy, p);
    if (!view.written(q, s.generation)) return `${key} (${describeQuery(q)}): its address group is not written yet, so it selects no peer`;
    const n = view.lookup(q).reduce((sum, pod) => sum + pod.addresses.length, 0);
    return `${key} (${describeQuery(q)}): ${peer} is not among the ${n} address${n === 1 ? '' : 'es'} of the pods it selects on ${network}`;
  });
}

function describePort(p: CheckedPort, rule: PolicyRule, pod: SelectedPod, d: PolicyDirectionName, peer: string): string {
  if (p.name === undefined) return p.port === undefined ? `every ${p.protocol} port` : p.endPort !== undefined ? `${p.port}-${p.endPort}/${p.protocol}` : portText(p.port, p.protocol);
  const numbers =
    d === 'ingress'
      ? pod.containerPorts.filter((c) => c.name === p.name && (c.protocol ?? 'TCP') === p.protocol).map((c) => c.containerPort)
      : (rule.peerPorts ?? []).filter((x) => x.address === peer && x.protocol === p.protocol).map((x) => x.port);
  const whose = d === 'ingress' ? "the pod's containerPorts" : "the peer's containerPorts";
  return `${p.name}/${p.protocol} (${numbers.length === 0 ? `not in ${whose}` : `${[...new Set(numbers)].join(', ')} in ${whose}`})`;
}

/** Every rule of the policies isolating direction `d` on `network`, judged against the probe. */
function ruleChecks(view: AddressGroupView, selected: readonly Selecting[], podPolicy: PodPolicy, pod: SelectedPod, network: string, probe: PolicyProbe, peer: string): RuleCheck[] {
  const d = probe.direction;
  const compiled = podPolicy.networks.find((n) => n.network === network)?.[d].rules ?? [];
  const out: RuleCheck[] = [];
  for (const s of selected) {
    if (!s.selection[d] || !s.selection.networks.includes(network)) continue;
    const policy = s.selection.policy;
    if (s.checked === undefined) {
      out.push({ policy, peer: false, port: false, reasons: [`the policy cannot be compiled, so it allows nothing: ${s.selection.failure ?? ''}`] });
      continue;
    }
    const rules = d === 'ingress' ? s.checked.ingress : s.checked.egress;
    if (rules.length === 0) out.push({ policy, peer: false, port: false, reasons: [`it has no ${d} rule, so it allows nothing ${d === 'ingress' ? 'in' : 'out'}`] });
    for (const rule of rules) {
      const c = compiled.find((r) => r.policy === policy && r.index === rule.index);
      if (c === undefined) continue;
      const peerOk = peerMatches(c, peer);
      const portOk = portMatches(c, peer, probe);
      const reasons = peerOk ? [] : peerReasons(view, s, network, rule, d, peer);
      if (!portOk) reasons.push(`ports: ${portText(probe.port, probe.protocol)} is not listed (${(rule.ports ?? []).map((p) => describePort(p, c, pod, d, peer)).join(', ')})`);
      out.push({ policy, rule: `spec.${d}[${rule.index}]`, peer: peerOk, port: portOk, reasons });
    }
  }
  return out;
}

function judge(view: AddressGroupView, selected: readonly Selecting[], podPolicy: PodPolicy, pod: SelectedPod, network: string, probe: PolicyProbe, peer: string): ProbeVerdict {
  const base = { network, direction: probe.direction, peer, port: portText(probe.port, probe.protocol) };
  const dir = podPolicy.networks.find((n) => n.network === network)?.[probe.direction];
  if (dir?.isolated !== true) return { ...base, result: 'open', rules: [] };
  const allow = dir.rules.find((r) => peerMatches(r, peer) && portMatches(r, peer, probe));
  if (allow !== undefined) return { ...base, result: 'allowed', allowedBy: `${allow.policy} spec.${probe.direction}[${allow.index}]`, rules: [] };
  return { ...base, result: 'denied', rules: ruleChecks(view, selected, podPolicy, pod, network, probe, peer) };
}

function notEnforcedFix(ns: string, labels: Readonly<Record<string, string>> | undefined, recreate: string): string {
  const enabled = labels !== undefined && labels[INJECTION_LABEL] === INJECTION_ENABLED;
  // The webhook injects a pod a policy selects when it is created; only pods created since get it.
  return enabled ? `${recreate}: the webhook injects the sidecar into pods a policy selects` : `kubectl label namespace ${ns} ${INJECTION_LABEL}=${INJECTION_ENABLED} --overwrite, then ${recreate}`;
}

function probeFindings(v: ProbeVerdict, object: string, enforced: boolean): Finding {
  const what = `${v.direction} ${v.direction === 'ingress' ? `from ${v.peer} to ${object} port ${v.port}` : `from ${object} to ${v.peer} port ${v.port}`} on ${v.network}`;
  const caveat = enforced ? '' : ' (once the policy is enforced; it is not now)';
  if (v.result === 'open') return finding('info', 'NotIsolated', `${what}: passes, no policy isolates ${v.direction} there`);
  if (v.result === 'allowed') return finding('ok', 'PolicyAllows', `${what}: allowed by ${v.allowedBy ?? ''}${caveat}`);
  const why = v.rules.map((r) => `${r.policy}${r.rule !== undefined ? ` ${r.rule}` : ''}: ${r.reasons.join('; ')}`).join(' | ');
  const field = v.direction === 'ingress' ? 'from' : 'to';
  return finding(
    'error',
    'PolicyDenies',
    `${what}: dropped${caveat}, no rule of the isolating policies allows it: ${why}`,
    `to allow it, give one isolating policy a rule whose ${field} covers ${v.peer} (a podSelector matching its pod's labels, or an ipBlock such as ${v.peer}${v.peer.includes(':') ? '/128' : '/32'}) and whose ports include ${v.port}`,
  );
}

/** What a selecting policy does to the pod, and the groups of its peers the controller has not written yet. */
function selectionFindings(s: Selecting, object: string, ns: string, view: AddressGroupView): Finding[] {
  const sel = s.selection;
  const dirs = [sel.ingress ? 'ingress' : '', sel.egress ? 'egress' : ''].filter((x) => x !== '').join(' and ');
  if (sel.failure !== undefined) {
    return [
      finding(
        'error',
        'PolicyFailsClosed',
        `MultiNetworkPolicy ${sel.policy} selects ${object} and cannot be compiled, so it isolates ${dirs} on ${sel.networks.join(', ') || 'none of its networks'} and allows nothing (fail-closed): ${sel.failure}`,
        `correct the policy as its message says (kubectl edit multi-networkpolicy -n ${ns} ${sel.policy.slice(ns.length + 1)})`,
      ),
    ];
  }
  if (sel.networks.length === 0) {
    return [finding('info', 'PolicyNotOnNetworks', `MultiNetworkPolicy ${sel.policy} selects ${object}, but is for none of the networks the pod is attached to, so it isolates nothing here`)];
  }
  const out = [finding('info', 'PolicySelects', `MultiNetworkPolicy ${sel.policy} selects ${object} on ${sel.networks.join(', ')}, isolating ${dirs || 'nothing'}`)];
  const policy = s.checked;
  if (policy === undefined) return out;
  for (const q of policyPeerQueries(policy).filter((x) => sel.networks.includes(x.network))) {
    if (view.written(q, s.generation)) continue;
    out.push(
      finding(
        'warning',
        'AddressGroupNotWritten',
        `MultiNetworkPolicy ${policy.key}: the address group of ${describeQuery(q)} on ${q.network} is not written${s.generation !== undefined ? ` for generation ${s.generation}` : ''} yet, so the sidecar allows no peer from it until the controller writes it`,
        'check that the controller runs and may write EndpointSlices in the namespace: kubectl -n multus-proxy-system logs deploy/multus-proxy-controller',
      ),
    );
  }
  return out;
}

interface Resolved {
  readonly pod: SelectedPod;
  readonly view: AddressGroupView;
  readonly podPolicy: PodPolicy;
  readonly selected: readonly Selecting[];
}

/** The probe judged on each network it names (or each of the pod's), with a finding each. */
function probeAll(r: Resolved, probe: PolicyProbe, object: string, enforced: boolean, findings: Finding[]): ProbeVerdict[] {
  const parsed = parseIp(probe.peer);
  const peer = parsed.ok ? parsed.value.address : probe.peer;
  const attached = r.pod.networks.map((n) => n.network);
  const nets = probe.network === undefined ? attached : attached.filter((n) => n === probe.network);
  if (probe.network !== undefined && nets.length === 0) {
    const why = `${object} is not attached to network ${probe.network} (attached: ${attached.join(', ') || 'none'})`;
    findings.push(finding('error', 'ProbeNetworkNotAttached', why, 'give --network one of the attached networks, or leave it out'));
  }
  if (probe.network === undefined && nets.length === 0) findings.push(finding('warning', 'ProbeNoNetwork', `${object} has no secondary network in its network-status, so there is nothing to probe`));
  return nets.map((network) => {
    const v = judge(r.view, r.selected, r.podPolicy, r.pod, network, probe, peer);
    findings.push(probeFindings(v, object, enforced));
    return v;
  });
}

/**
 * The policy part of `diagnose pod`. `object` is `Pod <ns>/<name>`, `recreate` the fix that
 * recreates the pod.
 */
export function explainPodPolicy(f: PolicyFacts, object: string, recreate: string): { report: PodPolicyReport; findings: Finding[] } {
  const pod = selectedPod(f.pod);
  const ns = pod.namespace;
  const enforced = hasSidecar(f.pod);
  const view = addressGroupView(f.addressGroups);
  const podPolicy = resolvePodPolicy(pod, f.policies, view.lookup);
  const selected = selecting(pod, f.policies);
  const findings: Finding[] = [];
  if (selected.length === 0) findings.push(finding('info', 'NoPolicy', `no MultiNetworkPolicy of namespace ${ns} selects ${object}: every peer passes on its networks`));
  for (const s of selected) findings.push(...selectionFindings(s, object, ns, view));

  const networks: PolicyNetwork[] = pod.networks
    .map((n) => ({ network: n.network, interface: n.interface, ingress: directionOf(selected, podPolicy, n.network, 'ingress'), egress: directionOf(selected, podPolicy, n.network, 'egress') }))
    .filter((n) => n.ingress.isolated || n.egress.isolated);
  const isolates = networks.length > 0;
  if (isolates && !enforced) {
    const by = [...new Set(selected.filter((s) => s.selection.networks.length > 0).map((s) => s.selection.policy))];
    findings.push(
      finding(
        'error',
        'PolicyNotEnforced',
        `${object} is selected by ${by.join(', ')}, but has no ${SIDECAR_CONTAINER_NAME} sidecar (no container or init container of that name), so the policy is not enforced there: every peer passes`,
        notEnforcedFix(ns, f.namespaceLabels, recreate),
      ),
    );
  }
  if (isolates && enforced) findings.push(finding('ok', 'PolicyEnforced', `${object} has the ${SIDECAR_CONTAINER_NAME} sidecar, which enforces the policy in the pod's own network namespace`));
  const probes = f.probe === undefined ? [] : probeAll({ pod, view, podPolicy, selected }, f.probe, object, enforced, findings);
  return { report: { enforced, selectedBy: selected.map((s) => s.selection), networks, probes }, findings };
}
