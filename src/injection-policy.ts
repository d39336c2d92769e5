/**
 * Whether a pod gets the sidecar, and if not, why: skipped (nothing to do, with a reason that
 * becomes a metric label and a debug log, and for an inherited pod a warning for the user) or
 * denied (a message naming the object, key, bad value and the fix). Pure: the namespace's labels
 * are passed in.
 *
 * A pod gets the sidecar when its namespace is labelled multus-proxy-injection=enabled or when a
 * MultiNetworkPolicy selects it (only the sidecar enforces policy; the caller says which policy,
 * src/policy/selection.ts). A selected pod may not opt out: that is a denial naming the policy. A
 * pod either asked explicitly (service-network annotation) and is denied when it cannot have the
 * sidecar, or inherited it (namespace label, or a policy) and is then admitted unchanged with a
 * warning instead: a namespace-wide rule must never break a workload that did not ask
 * (docs/design.md, "Pod").
 *
 * In src/ because two programs decide with it: the webhook at admission, and the controller's
 * `diagnose` command afterwards, to say why a pod has no sidecar.
 */
import { INJECT_ANNOTATION, NETWORKS_ANNOTATION, POLICY_FOR_ANNOTATION, SERVICE_NETWORK_ANNOTATION, SIDECAR_CONTAINER_NAME } from './keys.js';
import { networkKey, type NetworkRef } from './annotations/service-network.js';
import { parseNetworks } from './annotations/networks.js';
import { servedNetworks } from './annotations/served-networks.js';
import type { V1Pod } from './kube/types.js';
import { err, formatInputError, inputError, ok, type InputError, type Result } from './result.js';

/** The admission operation (AdmissionReview `request.operation`). */
export type Operation = 'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT';

/** Why a pod cannot have the sidecar although it would get it: a denial when it asked, a warning when it inherited. */
export type PolicyReason = 'host-network' | 'pod-security' | 'port-conflict';
/** invalid-networks: an inherited pod whose `networks` we cannot read (Multus decides on it, not us). */
export type SkipReason = 'not-create' | 'no-networks' | 'opted-out' | 'already-injected' | 'invalid-networks' | 'not-enabled' | PolicyReason;
export type DenyReason = 'invalid-annotation' | 'network-not-attached' | 'selected-opt-out' | PolicyReason;

/** The MultiNetworkPolicy that selects a pod, and a network of the pod it is for. */
export interface SelectedBy {
  /** `MultiNetworkPolicy <namespace>/<name>`. */
  readonly policy: string;
  /** `<namespace>/<nad>`. */
  readonly network: string;
  /** Why the policy fails its checks, when it selects the pod only because it is taken to (fail-closed). */
  readonly problem?: string;
}

export type PodDecision =
  | { readonly action: 'skip'; readonly reason: SkipReason; readonly detail: string; readonly warnings: string[] }
  | { readonly action: 'deny'; readonly reason: DenyReason; readonly code: 400 | 403; readonly message: string }
  | { readonly action: 'inject'; readonly networks: NetworkRef[] };

/** The Pod Security Admission label; `baseline` and `restricted` both forbid adding NET_ADMIN. */
export const POD_SECURITY_ENFORCE_LABEL = 'pod-security.kubernetes.io/enforce';
const PSA_FORBIDS_NET_ADMIN = new Set(['baseline', 'restricted']);

export interface PodPolicyInput {
  readonly operation: Operation;
  readonly pod: V1Pod;
  /** The request's namespace: a pod being created may not carry metadata.namespace yet. */
  readonly namespace: string;
  /** Labels of that Namespace; undefined when it could not be found. */
  readonly namespaceLabels: Readonly<Record<string, string>> | undefined;
  readonly healthPort: number;
  /** The level the cluster enforces where the namespace has no enforce label (webhook option podSecurityDefault); unset: privileged. */
  readonly podSecurityDefault?: string;
  /** Whether the namespace asks for the sidecar (its injection label); unset: it does. */
  readonly namespaceEnabled?: boolean;
  /** The policy that selects the pod, when one does. */
  readonly selectedBy?: SelectedBy;
}

/** `Pod ns/name`, or `Pod ns/web-7d4b9-* (generateName)` before the apiserver has named it. */
export function describePod(pod: V1Pod, namespace: string): string {
  const name = pod.metadata?.name;
  if (name) return `Pod ${namespace}/${name}`;
  const gen = pod.metadata?.generateName;
  return gen ? `Pod ${namespace}/${gen}* (generateName)` : `Pod ${namespace}/(no name)`;
}

function allContainers(pod: V1Pod): { name?: string; ports?: { containerPort?: number; protocol?: string }[] }[] {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
}

export function hasSidecar(pod: V1Pod): boolean {
  return allContainers(pod).some((c) => c.name === SIDECAR_CONTAINER_NAME);
}

function deny(reason: DenyReason, code: 400 | 403, object: string, e: InputError): PodDecision {
  return { action: 'deny', reason, code, message: formatInputError(object, e) };
}

function skip(reason: SkipReason, detail: string, warnings: string[] = []): PodDecision {
  return { action: 'skip', reason, detail, warnings };
}

/** The inherited pod's warning: what kubectl prints, with the same object/key/value/fix as a denial. */
function admittedWithout(reason: SkipReason, object: string, e: InputError, selectedBy?: SelectedBy): PodDecision {
  const text = formatInputError(object, e);
  const why = selectedBy === undefined ? 'namespace-wide injection' : `${selectedBy.policy} selects the pod on network ${selectedBy.network} and is not enforced in it`;
  return skip(reason, text, [`no multus-proxy sidecar added (${why}): ${text}`]);
}

/** A selected pod that opts out: the policy would go unenforced, so the opt-out is refused. */
function selectedOptOut(object: string, s: SelectedBy): PodDecision {
  return deny(
    'selected-opt-out',
    403,
    object,
    inputError(
      INJECT_ANNOTATION,
      'false',
      s.problem === undefined
        ? `${s.policy} selects the pod (its podSelector matches the pod's labels, its ${POLICY_FOR_ANNOTATION} names network ${s.network}, which the pod attaches), and only the multus-proxy sidecar enforces it`
        : `${s.policy} fails its checks (${s.problem}), so it is taken as selecting the pod on network ${s.network} and isolating it there, which only the multus-proxy sidecar enforces`,
      `remove the annotation ${INJECT_ANNOTATION} so the pod gets the sidecar, or ${s.problem === undefined ? 'change' : 'fix'} the policy's spec.podSelector or ${POLICY_FOR_ANNOTATION} so it no longer selects the pod`,
    ),
  );
}

/** `multus-proxy.k8s.cni.cncf.io/inject`: absent or "true" injects, "false" opts out; anything else is a typo we refuse to guess at. */
export function parseInjectAnnotation(value: string | undefined): Result<boolean> {
  if (value === undefined || value === 'true') return ok(true);
  if (value === 'false') return ok(false);
  const near = value.trim().toLowerCase();
  const hint = near === 'false' || near === 'true' ? `write "${near}" exactly (lower case, no spaces)` : 'write "false" to opt the pod out, or remove the annotation';
  return err(inputError(INJECT_ANNOTATION, value, 'is neither "true" nor "false"', hint));
}

/** What to write into the networks annotation so the missing networks are attached, in the form the pod already uses. */
function attachFix(attachedText: string | undefined, missing: readonly NetworkRef[]): string {
  const current = attachedText?.trim() ?? '';
  const short = missing.map(networkKey).join(',');
  if (current === '') return `attach it: add the annotation ${NETWORKS_ANNOTATION}: "${short}"`;
  if (current.startsWith('[')) {
    return `attach it: add ${missing.map((r) => JSON.stringify({ namespace: r.namespace, name: r.name })).join(', ')} to the JSON list in ${NETWORKS_ANNOTATION}`;
  }
  return `attach it: write ${NETWORKS_ANNOTATION}: "${current},${short}"`;
}

/** What stops the sidecar from working in this pod, whoever asked for it: hostNetwork, PodSecurity, a port clash. */
function policyProblem(input: PodPolicyInput, explicit: boolean): { reason: PolicyReason; code: 400 | 403; error: InputError } | undefined {
  const { pod, namespace } = input;
  if (pod.spec?.hostNetwork === true) {
    const selected = input.selectedBy?.policy;
    const fix = explicit
      ? `remove hostNetwork: true or remove the ${SERVICE_NETWORK_ANNOTATION} annotation`
      : selected !== undefined
        ? `a policy cannot be enforced in the node's network namespace: run the pod without hostNetwork, or change the spec.podSelector of ${selected} so it does not select the pod`
        : 'the multus-proxy node agent serves host-network pods; nothing to do';
    return { reason: 'host-network', code: 403, error: inputError('spec.hostNetwork', 'true', "the multus-proxy sidecar would program iptables in the node's network namespace", fix) };
  }
  const labelled = input.namespaceLabels?.[POD_SECURITY_ENFORCE_LABEL];
  // No label: the apiserver enforces its AdmissionConfiguration default, which the webhook is told.
  const level = labelled ?? input.podSecurityDefault;
  if (level !== undefined && PSA_FORBIDS_NET_ADMIN.has(level)) {
    return {
      reason: 'pod-security',
      code: 403,
      error: inputError(
        labelled !== undefined
          ? `namespace ${namespace} label ${POD_SECURITY_ENFORCE_LABEL}`
          : `namespace ${namespace} (no ${POD_SECURITY_ENFORCE_LABEL} label; the cluster default, webhook option podSecurityDefault)`,
        level,
        `the multus-proxy sidecar needs the NET_ADMIN and NET_RAW capabilities, which the "${level}" Pod Security level forbids, so the pod would be rejected`,
        `label the namespace ${POD_SECURITY_ENFORCE_LABEL}=privileged (kubectl label ns ${namespace} ${POD_SECURITY_ENFORCE_LABEL}=privileged --overwrite), or run this client in a namespace that allows NET_ADMIN`,
      ),
    };
  }
  for (const c of allContainers(pod)) {
    const clash = (c.ports ?? []).find((p) => p.containerPort === input.healthPort && (p.protocol ?? 'TCP') === 'TCP');
    if (clash !== undefined) {
      return {
        reason: 'port-conflict',
        code: 400,
        error: inputError(
          `container ${c.name ?? '?'} ports`,
          String(input.healthPort),
          `the multus-proxy sidecar serves its health checks on TCP port ${input.healthPort} in the same network namespace`,
          'move the container to another port, or change sidecar.healthPort in the multus-proxy-webhook ConfigMap',
        ),
      };
    }
  }
  return undefined;
}

/** An explicit pod's service networks must all be attached; the message says how to attach the missing ones. */
function checkAttached(object: string, annotations: Readonly<Record<string, string>>, wanted: string, refs: readonly NetworkRef[], namespace: string): PodDecision | undefined {
  const attachedText = annotations[NETWORKS_ANNOTATION];
  const attached = parseNetworks(attachedText ?? '', namespace);
  if (!attached.ok) return deny('invalid-annotation', 400, object, attached.error);
  const attachedKeys = new Set(attached.value.map(networkKey));
  const missing = refs.filter((r) => !attachedKeys.has(networkKey(r)));
  if (missing.length === 0) return undefined;
  const names = missing.map(networkKey);
  return deny(
    'network-not-attached',
    400,
    object,
    inputError(
      SERVICE_NETWORK_ANNOTATION,
      wanted,
      `${names.length > 1 ? 'networks' : 'network'} ${names.join(', ')} ${names.length > 1 ? 'are' : 'is'} not attached to the pod by ${NETWORKS_ANNOTATION}`,
      attachFix(attachedText, missing),
    ),
  );
}

export function decideInjection(input: PodPolicyInput): PodDecision {
  const { pod, namespace } = input;
  const object = describePod(pod, namespace);
  if (input.operation !== 'CREATE') return skip('not-create', `operation ${input.operation}: the sidecar is only added at creation`);
  const annotations = pod.metadata?.annotations ?? {};
  const inject = parseInjectAnnotation(annotations[INJECT_ANNOTATION]);
  if (!inject.ok) return deny('invalid-annotation', 400, object, inject.error);
  const selectedBy = input.selectedBy;
  if (!inject.value) return selectedBy !== undefined ? selectedOptOut(object, selectedBy) : skip('opted-out', `${INJECT_ANNOTATION}: "false"`);
  if (hasSidecar(pod)) return skip('already-injected', `the pod already has a container named ${SIDECAR_CONTAINER_NAME}`);
  if (input.namespaceEnabled === false && selectedBy === undefined) return skip('not-enabled', `namespace ${namespace} is not labelled for injection and no MultiNetworkPolicy selects the pod`);

  const wanted = annotations[SERVICE_NETWORK_ANNOTATION];
  const served = servedNetworks(annotations, namespace);
  if (wanted !== undefined) {
    // Explicit: every problem is the user's to fix, so it is a denial.
    if (!served.ok) return deny('invalid-annotation', 400, object, served.error);
    const notAttached = checkAttached(object, annotations, wanted, served.value.networks, namespace);
    if (notAttached !== undefined) return notAttached;
    const problem = policyProblem(input, true);
    if (problem !== undefined) return deny(problem.reason, problem.code, object, problem.error);
    return { action: 'inject', networks: served.value.networks };
  }

  // Inherited from the namespace or a policy: never denied for policy, only admitted without the sidecar.
  if (!served.ok) return admittedWithout('invalid-networks', object, served.error, selectedBy);
  if (served.value.networks.length === 0) return skip('no-networks', `no secondary network attached by ${NETWORKS_ANNOTATION}`);
  const problem = policyProblem(input, false);
  if (problem !== undefined) return admittedWithout(problem.reason, object, problem.error, selectedBy);
  return { action: 'inject', networks: served.value.networks };
}
