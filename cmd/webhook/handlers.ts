/**
 * The admission endpoints, each: request -> (lookups) -> pure decision -> pure mutation ->
 * patch -> response, plus an outcome and reason for metrics and logs. No HTTP here (server.ts).
 */
import { NETWORKS_ANNOTATION, SERVICE_NETWORK_ANNOTATION } from '../../src/keys.js';
import { networkKey } from '../../src/annotations/service-network.js';
import { nadSharedWith } from '../../src/annotations/nad-sharing.js';
import type { V1Pod, V1Service } from '../../src/kube/types.js';
import type { Logger } from '../../src/log.js';
import { lookupNads, type ClusterLookups } from './cluster.js';
import type { Outcome } from './metrics.js';
import { injectSidecar } from './mutate.js';
import { reservedSidecarProblem } from './reserved-sidecar.js';
import type { PodSecurityLevel, SidecarConfig } from './options.js';
import { createPatch } from './patch.js';
import { decideInjection, describePod, type PodDecision, type SelectedBy } from '../../src/injection-policy.js';
import { parseNetworks } from '../../src/annotations/networks.js';
import type { PolicyLookup } from './policy-cache.js';
import { allowed, denied, patched, type AdmissionRequest, type AdmissionResponse } from './responses.js';
import { defaultService, describeService, nodeAgentProblem, validateService } from './service.js';
import { describePolicy, type MultiNetworkPolicy } from '../../src/policy/api.js';
import { policyNetworkProblem, validatePolicyObject } from './multi-network-policy.js';

export interface Handled {
  readonly response: AdmissionResponse;
  readonly outcome: Outcome;
  readonly reason: string;
}

export type Handler = (req: AdmissionRequest) => Promise<Handled>;

/** Writes a Warning Event about a Service (the webhook's only write; unset: warnings only). */
export type ServiceEventWriter = (svc: V1Service, namespace: string, reason: string, message: string) => Promise<void>;

/** Event reason on a LoadBalancer or NodePort Service the node agent cannot serve (no agent, or none ready). */
export const REASON_NODE_AGENT_MISSING = 'NodeAgentMissing';

export interface HandlerDeps {
  readonly cluster: ClusterLookups;
  readonly events?: ServiceEventWriter;
  readonly sidecar: SidecarConfig;
  /** The cluster's Pod Security level for namespaces without the enforce label (unset: privileged). */
  readonly podSecurityDefault?: PodSecurityLevel;
  readonly logger?: Logger;
  /** How long one Service admission waits for all its NAD lookups (ms; default 2 s). */
  readonly nadLookupTimeoutMs?: number;
  /** The MultiNetworkPolicies (policy-cache.ts); unset: no pod is selected by one. */
  readonly policies?: PolicyLookup;
}

const DEFAULT_NAD_LOOKUP_TIMEOUT_MS = 2_000;

function requestNamespace(req: AdmissionRequest, obj: { metadata?: { namespace?: string } }): string {
  return req.namespace ?? obj.metadata?.namespace ?? '';
}

/** The policy that selects the pod on a network it attaches, when the webhook knows the policies. */
function selectedBy(policies: PolicyLookup | undefined, pod: V1Pod, namespace: string, logger: Logger | undefined): SelectedBy | undefined {
  const text = pod.metadata?.annotations?.[NETWORKS_ANNOTATION];
  if (policies === undefined || text === undefined) return undefined;
  // A replica is unready until it has read the policies; one asked meanwhile cannot tell.
  if (policies.state() === 'starting') logger?.warn({ object: describePod(pod, namespace) }, 'MultiNetworkPolicies not read yet: the pod is taken as selected by none');
  const attached = parseNetworks(text, namespace);
  if (!attached.ok) return undefined;
  const s = policies.selecting({ namespace, labels: pod.metadata?.labels ?? {}, networks: attached.value.map(networkKey) });
  return s === undefined ? undefined : { policy: describePolicy({ metadata: { name: s.name } }, s.namespace), network: s.network, ...(s.problem !== undefined ? { problem: s.problem } : {}) };
}

/**
 * Pods of namespaces labelled for injection (`namespaceEnabled`, the default: the configuration's
 * namespaceSelector sent only those), or of the other namespaces, which get the sidecar only when
 * a MultiNetworkPolicy selects them.
 */
export function podHandler(deps: HandlerDeps, opts: { readonly namespaceEnabled?: boolean } = {}): Handler {
  const namespaceEnabled = opts.namespaceEnabled ?? true;
  return async (req) => {
    const pod = req.object as V1Pod;
    const namespace = requestNamespace(req, pod);
    const annotations = pod.metadata?.annotations ?? {};
    const create = req.operation === 'CREATE';
    const selected = create ? selectedBy(deps.policies, pod, namespace, deps.logger) : undefined;
    // The namespace is only read for its PodSecurity level, so only for a pod that may get the sidecar.
    const candidate = create && (namespaceEnabled || selected !== undefined) && (annotations[SERVICE_NETWORK_ANNOTATION] !== undefined || annotations[NETWORKS_ANNOTATION] !== undefined);
    const labels = candidate ? await deps.cluster.namespaceLabels(namespace) : undefined;
    const decision: PodDecision = decideInjection({
      operation: req.operation,
      pod,
      namespace,
      namespaceLabels: labels,
      healthPort: deps.sidecar.healthPort,
      namespaceEnabled,
      ...(selected !== undefined ? { selectedBy: selected } : {}),
      ...(deps.podSecurityDefault !== undefined ? { podSecurityDefault: deps.podSecurityDefault } : {}),
    });
    const object = describePod(pod, namespace);
    switch (decision.action) {
      case 'skip': {
        // A container named like the sidecar, in a pod that would get the sidecar: kept only when it
        // is the one this webhook injects (reinvocation), so a pod cannot carry settings of its own.
        const reserved = decision.reason === 'already-injected' && (namespaceEnabled || selected !== undefined) ? reservedSidecarProblem(pod, deps.sidecar, namespace, object) : undefined;
        if (reserved !== undefined) {
          deps.logger?.info({ object, reason: 'reserved-container', message: reserved, uid: req.uid }, 'pod denied');
          return { response: denied(req.uid, 403, reserved), outcome: 'denied', reason: 'reserved-container' };
        }
        // An inherited pod left without its sidecar is worth an info line; routine skips are not.
        if (decision.warnings.length > 0) deps.logger?.info({ object, reason: decision.reason, detail: decision.detail, uid: req.uid }, 'pod admitted without the sidecar');
        else deps.logger?.debug({ object, reason: decision.reason, detail: decision.detail, uid: req.uid }, 'pod not injected');
        return { response: allowed(req.uid, decision.warnings), outcome: 'skipped', reason: decision.reason };
      }
      case 'deny':
        deps.logger?.info({ object, reason: decision.reason, message: decision.message, uid: req.uid }, 'pod denied');
        return { response: denied(req.uid, decision.code, decision.message), outcome: 'denied', reason: decision.reason };
      case 'inject': {
        const mode = deps.sidecar.mode;
        const native = mode === 'native' || (mode === 'auto' && (await deps.cluster.nativeSidecarsSupported()));
        const ops = createPatch(pod, injectSidecar(pod, deps.sidecar, native, namespace));
        deps.logger?.info({ object, native, networks: decision.networks.map(networkKey), selectedBy: selected?.policy, uid: req.uid, dryRun: req.dryRun === true }, 'sidecar injected');
        return { response: patched(req.uid, ops), outcome: 'injected', reason: native ? 'native' : 'regular' };
      }
    }
  };
}

export function serviceDefaultingHandler(deps: Partial<HandlerDeps> = {}): Handler {
  return async (req) => {
    const svc = req.object as V1Service;
    const { service, labelAdded } = defaultService(svc);
    if (!labelAdded) return { response: allowed(req.uid), outcome: 'allowed', reason: 'unchanged' };
    deps.logger?.debug({ object: describeService(svc, requestNamespace(req, svc)), uid: req.uid }, 'proxy-name label added');
    return { response: patched(req.uid, createPatch(svc, service)), outcome: 'patched', reason: 'label-added' };
  };
}

export function serviceValidationHandler(deps: Pick<HandlerDeps, 'cluster' | 'logger' | 'events' | 'nadLookupTimeoutMs'>): Handler {
  return async (req) => {
    const svc = req.object as V1Service;
    const namespace = requestNamespace(req, svc);
    const old = req.operation === 'UPDATE' && typeof req.oldObject === 'object' && req.oldObject !== null ? (req.oldObject as V1Service) : undefined;
    const verdict = validateService(svc, namespace, old);
    if (!verdict.allowed) {
      deps.logger?.info({ object: describeService(svc, namespace), reason: verdict.reason, message: verdict.message, uid: req.uid }, 'service denied');
      return { response: denied(req.uid, verdict.code, verdict.message), outcome: 'denied', reason: verdict.reason };
    }
    const answers = await lookupNads(deps.cluster, verdict.networks, deps.nadLookupTimeoutMs ?? DEFAULT_NAD_LOOKUP_TIMEOUT_MS);
    const lookups = verdict.networks.map((ref, i) => ({ ref, nad: answers[i] ?? { state: 'unknown' as const } }));
    // Another namespace's NAD is used only where its owner shared it (docs/security.md): deny when
    // it exists and is not shared, and when it cannot be read now (fail closed: a slow or failing
    // lookup must not skip the check). One that does not exist yet is left to the controller,
    // which writes no slice on it until it exists and is shared.
    for (const { ref, nad } of lookups) {
      if (nad.state === 'unknown' && ref.namespace !== namespace) {
        const message = `${describeService(svc, namespace)}: annotation ${SERVICE_NETWORK_ANNOTATION}: NetworkAttachmentDefinition ${networkKey(ref)} of another namespace could not be read just now, so whether it is shared with namespace ${namespace} cannot be checked; try again, and if this persists check the webhook's logs and its access to NetworkAttachmentDefinitions`;
        deps.logger?.info({ object: describeService(svc, namespace), reason: 'network-unverified', network: networkKey(ref), uid: req.uid }, 'service denied');
        return { response: denied(req.uid, 403, message), outcome: 'denied', reason: 'network-unverified' };
      }
      if (nad.state !== 'exists') continue;
      const sharing = nadSharedWith(ref, namespace, nad.annotations, true);
      if (!sharing.allowed) {
        const message = `${describeService(svc, namespace)}: annotation ${SERVICE_NETWORK_ANNOTATION}: ${sharing.message}`;
        deps.logger?.info({ object: describeService(svc, namespace), reason: 'network-not-shared', uid: req.uid }, 'service denied');
        return { response: denied(req.uid, 403, message), outcome: 'denied', reason: 'network-not-shared' };
      }
    }
    // A NetworkAttachmentDefinition may legitimately come later (GitOps apply order): warn, never deny.
    const warnings = [...verdict.warnings];
    for (const { ref, nad } of lookups) {
      if (nad.state === 'missing')
        warnings.push(
          `NetworkAttachmentDefinition ${networkKey(ref)} does not exist (yet): the Service has no endpoints on it until it is created${ref.namespace !== namespace ? ' and its owner shares it with this namespace' : ''}`,
        );
      if (nad.state === 'unknown') warnings.push(`NetworkAttachmentDefinition ${networkKey(ref)} could not be checked; make sure it exists`);
    }
    // NodePort and LoadBalancer are the node agent's: say so at once when it is not there, and
    // leave an Event on the Service for whoever looks later (not for a dry run).
    const type = svc.spec?.type;
    if (verdict.reason === 'valid' && (type === 'LoadBalancer' || type === 'NodePort')) {
      const problem = nodeAgentProblem(describeService(svc, namespace), type, await deps.cluster.nodeAgent());
      if (problem !== undefined) {
        warnings.push(problem);
        if (req.dryRun !== true && deps.events !== undefined) await deps.events(svc, namespace, REASON_NODE_AGENT_MISSING, problem);
      }
    }
    return { response: allowed(req.uid, warnings), outcome: 'allowed', reason: warnings.length > 0 ? 'with-warnings' : verdict.reason };
  };
}

/** MultiNetworkPolicy CREATE/UPDATE: the object's checks, then its networks looked up (bounded, fail-closed). */
export function policyValidationHandler(deps: Pick<HandlerDeps, 'cluster' | 'logger' | 'nadLookupTimeoutMs'>): Handler {
  return async (req) => {
    const policy = req.object as MultiNetworkPolicy;
    const namespace = requestNamespace(req, policy);
    const old = req.operation === 'UPDATE' && typeof req.oldObject === 'object' && req.oldObject !== null ? (req.oldObject as MultiNetworkPolicy) : undefined;
    const verdict = validatePolicyObject(policy, namespace, old);
    const deny = (v: { reason: string; code: 400 | 403; message: string }): Handled => {
      deps.logger?.info({ object: describePolicy(policy, namespace), reason: v.reason, message: v.message, uid: req.uid }, 'policy denied');
      return { response: denied(req.uid, v.code, v.message), outcome: 'denied', reason: v.reason };
    };
    if (!verdict.allowed) return deny(verdict);
    const answers = await lookupNads(deps.cluster, verdict.networks, deps.nadLookupTimeoutMs ?? DEFAULT_NAD_LOOKUP_TIMEOUT_MS);
    const problem = policyNetworkProblem(
      policy,
      namespace,
      verdict.networks.map((ref, i) => ({ ref, nad: answers[i] ?? { state: 'unknown' as const } })),
    );
    if (problem !== undefined) return deny(problem);
    return { response: allowed(req.uid, verdict.warnings), outcome: 'allowed', reason: verdict.warnings.length > 0 ? 'with-warnings' : verdict.reason };
  };
}
