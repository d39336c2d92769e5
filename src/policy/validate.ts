/**
 * A MultiNetworkPolicy checked as Kubernetes checks a NetworkPolicy, plus this project's bounds,
 * into the checked form the resolver compiles. Every denial names the object, the field, the bad
 * value and the fix. The webhook denies with it; every consumer runs it again (objects also
 * arrive without the webhook) and isolates the pods a policy selects when it fails. Pure and
 * linear in the object.
 */
import { isJsonObject, jsonKind, ownField } from '../annotations/json.js';
import { parseSourceRange } from '../annotations/load-balancer.js';
import type { NetworkRef } from '../annotations/service-network.js';
import { POLICY_FOR_ANNOTATION } from '../keys.js';
import { POLICY_BUDGETS, type PolicyBudget } from '../object-budgets.js';
import { err, formatInputError, inputError, ok, type InputError, type Result } from '../result.js';
import type { PolicyProtocol } from './model.js';
import { describePolicy, policyKey, policyNetworks, type MultiNetworkPolicy } from './api.js';
import { readSelector, show, type ParsedSelector } from './selector.js';

/** A port entry: a number (with `endPort`, a range) or a name; every port of the protocol when neither. */
export interface CheckedPort {
  readonly protocol: PolicyProtocol;
  readonly port?: number;
  readonly endPort?: number;
  readonly name?: string;
}

/** An `ipBlock`, its CIDRs canonical (host bits cleared). */
export interface CheckedBlock {
  readonly cidr: string;
  readonly except: readonly string[];
}

/** Pods (namespaceSelector undefined: the policy's own namespace) or an address block. */
export type CheckedPeer = { readonly kind: 'pods'; readonly podSelector: ParsedSelector; readonly namespaceSelector?: ParsedSelector } | { readonly kind: 'block'; readonly block: CheckedBlock };

/** One rule; `peers` or `ports` undefined when the list is absent or empty (every peer, every port). */
export interface CheckedRule {
  readonly index: number;
  readonly peers?: readonly CheckedPeer[];
  readonly ports?: readonly CheckedPort[];
}

export interface PolicyTypes {
  readonly ingress: boolean;
  readonly egress: boolean;
}

export interface CheckedPolicy {
  /** `<namespace>/<name>`. */
  readonly key: string;
  readonly namespace: string;
  readonly podSelector: ParsedSelector;
  /** Undefined: no policy-for annotation, so the policy is for no network. */
  readonly networks?: readonly NetworkRef[];
  readonly types: PolicyTypes;
  /** Only the directions in `types` (a rule of another direction is ignored, as NetworkPolicy ignores it). */
  readonly ingress: readonly CheckedRule[];
  readonly egress: readonly CheckedRule[];
  readonly warnings: readonly string[];
}

/** What could be read of a policy that failed, so a consumer isolates exactly what it would select (unknown: more). */
export interface PolicyProblem {
  readonly key: string;
  readonly message: string;
  readonly error: InputError;
  readonly podSelector?: ParsedSelector;
  /** Empty when the policy has no policy-for annotation; undefined when the annotation is unreadable. */
  readonly networks?: readonly NetworkRef[];
  readonly types?: PolicyTypes;
}

const PROTOCOLS: readonly PolicyProtocol[] = ['TCP', 'UDP', 'SCTP'];
const CIDR_EXAMPLE = 'write a CIDR such as "10.1.0.0/16" or "2001:db8::/64" (a single address as "10.1.2.3/32")';

/** Kubernetes' named-port rule (IANA service name): at most 15 of a-z, 0-9 and '-', a letter among them, no '-' at either end or twice in a row. */
export function checkPortName(name: string): string | undefined {
  if (name.length === 0 || name.length > 15) return `is ${name.length} characters long, and a port name has 1 to 15`;
  if (!/^[a-z0-9-]+$/.test(name)) return 'has a character other than a-z, 0-9 and -';
  if (!/[a-z]/.test(name)) return 'has no letter (a port number is written without quotes)';
  if (name.startsWith('-') || name.endsWith('-') || name.includes('--')) return "starts or ends with '-' or has '--'";
  return undefined;
}

type Check<T> = Result<T, InputError>;

function list(raw: unknown, key: string, budget: PolicyBudget): Check<readonly unknown[]> {
  if (raw === undefined || raw === null) return ok([]);
  if (!Array.isArray(raw)) return err(inputError(key, show(raw), `is ${jsonKind(raw)}, not a list`, `write ${key} as a YAML list`));
  const limit = POLICY_BUDGETS[budget];
  if (raw.length > limit) return err(inputError(key, `${raw.length} entries`, `has more than the ${limit} entries multus-proxy enforces there`, `split the policy into several, each within ${limit}`));
  return ok(raw);
}

export function readPolicyTypes(raw: unknown, egressRules: number): Check<PolicyTypes> {
  const key = 'spec.policyTypes';
  if (raw === undefined || raw === null || (Array.isArray(raw) && raw.length === 0)) return ok({ ingress: true, egress: egressRules > 0 });
  const fix = 'write policyTypes: [Ingress], [Egress] or [Ingress, Egress], or leave it out (then Ingress, plus Egress when egress has rules)';
  if (!Array.isArray(raw)) return err(inputError(key, show(raw), `is ${jsonKind(raw)}, not a list`, fix));
  const seen = new Set<string>();
  for (const [i, t] of (raw as unknown[]).entries()) {
    if (t !== 'Ingress' && t !== 'Egress') return err(inputError(`${key}[${i}]`, show(t), 'is not Ingress or Egress (the spelling is case-sensitive)', fix));
    if (seen.has(t)) return err(inputError(`${key}[${i}]`, t, 'is listed twice', fix));
    seen.add(t);
  }
  return ok({ ingress: seen.has('Ingress'), egress: seen.has('Egress') });
}

export function readPort(raw: unknown, key: string): Check<CheckedPort> {
  if (!isJsonObject(raw)) return err(inputError(key, show(raw), `is ${jsonKind(raw)}, not a port object`, 'write {protocol: TCP, port: 80}'));
  const protocol = ownField(raw, 'protocol') ?? 'TCP';
  if (typeof protocol !== 'string' || !PROTOCOLS.includes(protocol as PolicyProtocol)) {
    const upper = typeof protocol === 'string' && PROTOCOLS.includes(protocol.toUpperCase() as PolicyProtocol) ? ` (write "${protocol.toUpperCase()}")` : '';
    return err(inputError(`${key}.protocol`, show(protocol), `is not TCP, UDP or SCTP${upper}`, 'write protocol: TCP, UDP or SCTP, or leave it out for TCP'));
  }
  const proto = protocol as PolicyProtocol;
  const port = ownField(raw, 'port');
  const endPort = ownField(raw, 'endPort');
  if (port === undefined || port === null) {
    if (endPort !== undefined && endPort !== null)
      return err(inputError(`${key}.endPort`, show(endPort), 'is set without port', `set port to the first port of the range, e.g. {port: 32000, endPort: ${show(endPort)}}, or remove endPort`));
    return ok({ protocol: proto });
  }
  if (typeof port === 'string') {
    const why = checkPortName(port);
    if (why !== undefined) return err(inputError(`${key}.port`, port, `is not a valid port name: it ${why}`, 'write a port number (unquoted) or the name of a containerPort, e.g. "http"'));
    if (endPort !== undefined && endPort !== null)
      return err(inputError(`${key}.endPort`, show(endPort), `is set with the named port "${port}", and a range needs a numeric port`, 'write a numeric port with endPort, or remove endPort'));
    return ok({ protocol: proto, name: port });
  }
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535)
    return err(inputError(`${key}.port`, show(port), 'is not a port number from 1 to 65535 or a port name', 'write a number from 1 to 65535, or the name of a containerPort'));
  if (endPort === undefined || endPort === null) return ok({ protocol: proto, port });
  if (typeof endPort !== 'number' || !Number.isInteger(endPort) || endPort < port || endPort > 65535) {
    return err(inputError(`${key}.endPort`, show(endPort), `is not a port number from port (${port}) to 65535`, `write endPort >= ${port}, or remove it for the single port ${port}`));
  }
  return ok({ protocol: proto, port, endPort });
}

function readCidr(raw: unknown, key: string): Check<{ cidr: string; network: bigint; prefix: number; family: 4 | 6 }> {
  if (typeof raw !== 'string') return err(inputError(key, show(raw), `is ${raw === undefined ? 'missing' : jsonKind(raw)}, not a CIDR`, CIDR_EXAMPLE));
  if (raw !== raw.trim() || !raw.includes('/')) return err(inputError(key, raw, raw.includes('/') ? 'has blanks around it' : 'has no prefix length', CIDR_EXAMPLE));
  const r = parseSourceRange(raw);
  if (typeof r === 'string') return err(inputError(key, raw, r, CIDR_EXAMPLE));
  return ok(r);
}

export function readBlock(raw: unknown, key: string): Check<CheckedBlock> {
  if (!isJsonObject(raw)) return err(inputError(key, show(raw), `is ${jsonKind(raw)}, not an ipBlock object`, 'write {cidr: 10.1.0.0/16, except: [10.1.2.0/24]}'));
  const cidr = readCidr(ownField(raw, 'cidr'), `${key}.cidr`);
  if (!cidr.ok) return cidr;
  const excepts = list(ownField(raw, 'except'), `${key}.except`, 'except');
  if (!excepts.ok) return excepts;
  const except: string[] = [];
  const bits = cidr.value.family === 4 ? 32 : 128;
  for (const [i, e] of excepts.value.entries()) {
    const x = readCidr(e, `${key}.except[${i}]`);
    if (!x.ok) return x;
    const inside =
      x.value.family === cidr.value.family && x.value.prefix > cidr.value.prefix && x.value.network >> BigInt(bits - cidr.value.prefix) === cidr.value.network >> BigInt(bits - cidr.value.prefix);
    if (!inside)
      return err(
        inputError(
          `${key}.except[${i}]`,
          show(e),
          `is not strictly inside the cidr ${cidr.value.cidr}`,
          `list only CIDRs inside ${cidr.value.cidr} and longer than /${cidr.value.prefix}, or widen cidr`,
        ),
      );
    except.push(x.value.cidr);
  }
  return ok({ cidr: cidr.value.cidr, except: [...new Set(except)] });
}

export function readPeer(raw: unknown, key: string): Check<CheckedPeer> {
  const example = 'write one of {podSelector: ...}, {namespaceSelector: ...}, both together, or {ipBlock: {cidr: ...}}';
  if (!isJsonObject(raw)) return err(inputError(key, show(raw), `is ${jsonKind(raw)}, not a peer object`, example));
  const pods = ownField(raw, 'podSelector');
  const namespaces = ownField(raw, 'namespaceSelector');
  const block = ownField(raw, 'ipBlock');
  const hasPods = pods !== undefined && pods !== null;
  const hasNamespaces = namespaces !== undefined && namespaces !== null;
  if (block !== undefined && block !== null) {
    if (hasPods || hasNamespaces) {
      const beside = hasPods ? 'podSelector' : 'namespaceSelector';
      return err(
        inputError(
          `${key}.ipBlock`,
          show(block),
          `is beside ${beside} in one peer, and a peer is either pods or an ipBlock`,
          `make them two peers of the list: - {${beside}: ...} and - {ipBlock: ...}`,
        ),
      );
    }
    const b = readBlock(block, `${key}.ipBlock`);
    return b.ok ? ok({ kind: 'block', block: b.value }) : b;
  }
  if (!hasPods && !hasNamespaces) return err(inputError(key, show(raw), 'names no peer', `${example}; to allow every peer, leave the whole from/to list out`));
  const podSelector = hasPods ? readSelector(pods, `${key}.podSelector`) : ok({ requirements: [] });
  if (!podSelector.ok) return podSelector;
  if (!hasNamespaces) return ok({ kind: 'pods', podSelector: podSelector.value });
  const namespaceSelector = readSelector(namespaces, `${key}.namespaceSelector`);
  if (!namespaceSelector.ok) return namespaceSelector;
  return ok({ kind: 'pods', podSelector: podSelector.value, namespaceSelector: namespaceSelector.value });
}

function readRules(raw: unknown, key: 'spec.ingress' | 'spec.egress'): Check<CheckedRule[]> {
  const rules = list(raw, key, 'rules');
  if (!rules.ok) return rules;
  const peersField = key === 'spec.ingress' ? 'from' : 'to';
  const out: CheckedRule[] = [];
  for (const [index, r] of rules.value.entries()) {
    const rk = `${key}[${index}]`;
    if (!isJsonObject(r)) return err(inputError(rk, show(r), `is ${jsonKind(r)}, not a rule object`, `write {${peersField}: [...], ports: [...]}`));
    const peers = list(ownField(r, peersField), `${rk}.${peersField}`, 'peers');
    if (!peers.ok) return peers;
    const ports = list(ownField(r, 'ports'), `${rk}.ports`, 'ports');
    if (!ports.ok) return ports;
    const checkedPeers: CheckedPeer[] = [];
    for (const [i, p] of peers.value.entries()) {
      const c = readPeer(p, `${rk}.${peersField}[${i}]`);
      if (!c.ok) return c;
      checkedPeers.push(c.value);
    }
    const checkedPorts: CheckedPort[] = [];
    for (const [i, p] of ports.value.entries()) {
      const c = readPort(p, `${rk}.ports[${i}]`);
      if (!c.ok) return c;
      checkedPorts.push(c.value);
    }
    out.push({ index, ...(checkedPeers.length > 0 ? { peers: checkedPeers } : {}), ...(checkedPorts.length > 0 ? { ports: checkedPorts } : {}) });
  }
  return ok(out);
}

/**
 * `namespace` is the policy's (the request's on admission). Ok: the checked policy; otherwise the
 * first problem, with what could be read before it.
 */
export function checkPolicy(policy: MultiNetworkPolicy, namespace: string = policy.metadata?.namespace ?? ''): Result<CheckedPolicy, PolicyProblem> {
  const object = describePolicy(policy, namespace);
  const key = policyKey(policy, namespace);
  const partial: { podSelector?: ParsedSelector; networks?: readonly NetworkRef[]; types?: PolicyTypes } = {};
  const fail = (error: InputError): Result<never, PolicyProblem> => err({ key, message: formatInputError(object, error), error, ...partial });
  const nets = policyNetworks(policy, namespace);
  if (nets !== undefined && !nets.ok) return fail(nets.error);
  // No annotation: for no network, so a failure isolates nothing either.
  partial.networks = nets === undefined ? [] : nets.value;
  const spec: unknown = policy.spec ?? {};
  if (!isJsonObject(spec)) return fail(inputError('spec', show(spec), `is ${jsonKind(spec)}, not an object`, 'write spec: {podSelector: {}, ...}'));
  const podSelector = readSelector(ownField(spec, 'podSelector') ?? {}, 'spec.podSelector');
  if (!podSelector.ok) return fail(podSelector.error);
  partial.podSelector = podSelector.value;
  const egressRaw = ownField(spec, 'egress');
  const types = readPolicyTypes(ownField(spec, 'policyTypes'), Array.isArray(egressRaw) ? egressRaw.length : 0);
  if (!types.ok) return fail(types.error);
  partial.types = types.value;
  const ingress = readRules(ownField(spec, 'ingress'), 'spec.ingress');
  if (!ingress.ok) return fail(ingress.error);
  const egress = readRules(egressRaw, 'spec.egress');
  if (!egress.ok) return fail(egress.error);
  const warnings = policyWarnings(object, nets === undefined, types.value, ingress.value.length, egress.value.length);
  return ok({
    key,
    namespace,
    podSelector: podSelector.value,
    ...(nets !== undefined ? { networks: nets.value } : {}),
    types: types.value,
    ingress: types.value.ingress ? ingress.value : [],
    egress: types.value.egress ? egress.value : [],
    warnings,
  });
}

function policyWarnings(object: string, noNetworks: boolean, types: PolicyTypes, ingressRules: number, egressRules: number): string[] {
  const warnings: string[] = [];
  if (noNetworks)
    warnings.push(`${object}: no ${POLICY_FOR_ANNOTATION} annotation, so the policy is for no network and isolates nothing; name the networks it is for, e.g. "${POLICY_FOR_ANNOTATION}: my-net"`);
  if (!types.ingress && ingressRules > 0)
    warnings.push(`${object}: spec.ingress has rules but spec.policyTypes does not list Ingress, so they are ignored; add Ingress to policyTypes or remove the rules`);
  if (!types.egress && egressRules > 0) warnings.push(`${object}: spec.egress has rules but spec.policyTypes does not list Egress, so they are ignored; add Egress to policyTypes or remove the rules`);
  return warnings;
}
