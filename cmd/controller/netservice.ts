/**
 * net-service-controller's NetService (svcctl.metaswitch.com/v1alpha1): spec `netAttachDef` (a
 * NetworkAttachmentDefinition, bare or `namespace/name`) and `selector` (a label map). For each one
 * the controller keeps a headless Service of the same name, owned by the NetService, carrying the
 * service-network and service-selector annotations and the proxy-name label; the slices then
 * follow as for any annotated Service.
 *
 * Pure: read the spec, resolve the NAD against the NADs known, render the Service, and decide
 * what to do given the Service that exists under that name. The IO is in netservice-controller.ts.
 */
import { NETSERVICE_GROUP, NETSERVICE_KIND, NETSERVICE_LABEL, NETSERVICE_VERSION, PROXY_NAME, PROXY_NAME_LABEL, SERVICE_NETWORK_ANNOTATION, SERVICE_SELECTOR_ANNOTATION } from '../../src/keys.js';
import { formatLabelSelector, parseLabelSelector, selectorFromMap } from '../../src/annotations/label-selector.js';
import { networkKey, parseNetworkItem, type NetworkRef } from '../../src/annotations/service-network.js';
import type { KubeObject, V1Service } from '../../src/kube/types.js';
import { err, inputError, ok, showValue, type InputError, type Result } from '../../src/result.js';
import { compareText } from '../../src/order.js';

export const NETSERVICE_API_VERSION = `${NETSERVICE_GROUP}/${NETSERVICE_VERSION}`;

export interface NetServiceCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
}

export interface NetService extends KubeObject {
  spec?: { netAttachDef?: unknown; selector?: unknown };
  status?: { conditions?: NetServiceCondition[]; observedGeneration?: number };
}

export interface NetServiceSpec {
  /** As written: bare (resolved later) or `namespace/name`. */
  readonly netAttachDef: { readonly text: string; readonly explicit: NetworkRef | undefined; readonly name: string };
  /** The canonical selector string for the service-selector annotation; '' selects nothing (no annotation). */
  readonly selector: string;
}

export function describeNetService(ns: NetService): string {
  return `NetService ${ns.metadata?.namespace ?? ''}/${ns.metadata?.name ?? ''}`;
}

/** A JSON value as text for a message (functions and symbols cannot come from the API, but never throw on them). */
function shownJson(v: unknown): string {
  try {
    return JSON.stringify(v) ?? typeof v;
  } catch {
    return typeof v;
  }
}

const NAD_FIX = 'write the NetworkAttachmentDefinition\'s name, e.g. "core", or "<namespace>/<name>", e.g. "networks/core"';

/** Reads and checks the spec; a failure names the field, the value and what to write. */
export function readNetServiceSpec(ns: NetService): Result<NetServiceSpec> {
  const namespace = ns.metadata?.namespace ?? '';
  const raw = ns.spec?.netAttachDef;
  if (typeof raw !== 'string' || raw.trim() === '') {
    const shown = raw === undefined ? '' : typeof raw === 'string' ? raw : shownJson(raw);
    return err(
      inputError(
        'spec.netAttachDef',
        shown,
        raw === undefined ? 'is missing' : typeof raw === 'string' ? 'is empty' : `is ${typeof raw === 'object' ? (raw === null ? 'null' : 'an object') : `a ${typeof raw}`}, not a string`,
        NAD_FIX,
      ),
    );
  }
  const text = raw.trim();
  const item = parseNetworkItem(text, namespace, `the value ${showValue(text)}`);
  if (!item.ok) return err(inputError('spec.netAttachDef', raw, item.error.reason, item.error.fix));
  const explicit = text.includes('/') ? item.value : undefined;

  const sel = ns.spec?.selector;
  let selector = '';
  if (sel !== undefined && sel !== null) {
    if (typeof sel !== 'object' || Array.isArray(sel)) {
      return err(inputError('spec.selector', shownJson(sel), 'is not a map of labels', 'write it as a map, e.g. selector: {app: nginx}'));
    }
    const map = sel as Record<string, unknown>;
    const bad = Object.entries(map).find(([, v]) => typeof v !== 'string');
    if (bad !== undefined) {
      return err(inputError(`spec.selector.${bad[0]}`, shownJson(bad[1]), 'is not a string', `quote the value, e.g. ${bad[0]}: "${shownJson(bad[1])}"`));
    }
    selector = formatLabelSelector(selectorFromMap(map as Record<string, string>));
    // The map's keys and values must be valid labels: parse the string back to check them.
    const checked = parseLabelSelector(selector, 'spec.selector');
    if (!checked.ok) return err({ ...checked.error, value: JSON.stringify(map) });
  }
  return ok({ netAttachDef: { text, explicit, name: item.value.name }, selector });
}

export type NadResolution = { readonly ok: true; readonly network: NetworkRef } | { readonly ok: false; readonly reason: string; readonly candidates: NetworkRef[] };

/**
 * docs/design.md ("Compatibility"): a bare name is the NetService's namespace if such a NAD exists there, else the one
 * NAD of that name in the cluster (net-service-controller matched by bare name), else nothing,
 * with the candidates. An explicit `namespace/name` is taken as written (it may come later).
 */
export function resolveNetAttachDef(spec: NetServiceSpec, namespace: string, nads: readonly NetworkRef[]): NadResolution {
  if (spec.netAttachDef.explicit !== undefined) return { ok: true, network: spec.netAttachDef.explicit };
  const name = spec.netAttachDef.name;
  const same = nads.filter((n) => n.name === name).sort((a, b) => compareText(networkKey(a), networkKey(b)));
  const local = same.find((n) => n.namespace === namespace);
  if (local !== undefined) return { ok: true, network: local };
  if (same.length === 1 && same[0] !== undefined) return { ok: true, network: same[0] };
  if (same.length === 0) {
    return { ok: false, reason: `no NetworkAttachmentDefinition named "${name}" exists in namespace ${namespace} or any other namespace`, candidates: [] };
  }
  return {
    ok: false,
    reason: `none in namespace ${namespace} and ${same.length} in other namespaces (${same.map(networkKey).join(', ')}), so the bare name is ambiguous`,
    candidates: same,
  };
}

/** The message of an unresolved NAD: the NetService, the field, the value, the candidates, the fix. */
export function unresolvedMessage(ns: NetService, spec: NetServiceSpec, r: Extract<NadResolution, { ok: false }>): string {
  const fix =
    r.candidates.length > 0
      ? `write one of ${r.candidates.map((c) => `"${networkKey(c)}"`).join(', ')} in spec.netAttachDef`
      : `create the NetworkAttachmentDefinition, or write "<namespace>/${spec.netAttachDef.name}"`;
  return `${describeNetService(ns)}: spec.netAttachDef ${showValue(spec.netAttachDef.text)}: ${r.reason}; ${fix}`;
}

/** The headless Service kept for a NetService. */
export function desiredService(ns: NetService, spec: NetServiceSpec, network: NetworkRef): V1Service {
  const name = ns.metadata?.name ?? '';
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name,
      namespace: ns.metadata?.namespace ?? '',
      labels: { [PROXY_NAME_LABEL]: PROXY_NAME, [NETSERVICE_LABEL]: name },
      annotations: { [SERVICE_NETWORK_ANNOTATION]: networkKey(network), ...(spec.selector !== '' ? { [SERVICE_SELECTOR_ANNOTATION]: spec.selector } : {}) },
      ownerReferences: [{ apiVersion: NETSERVICE_API_VERSION, kind: NETSERVICE_KIND, name, uid: ns.metadata?.uid ?? '', controller: true, blockOwnerDeletion: false }],
    },
    // Headless and without ports, as net-service-controller's: a DNS name for the secondary addresses.
    spec: { clusterIP: 'None', type: 'ClusterIP' },
  };
}

/** Whether this Service is ours for that NetService (controller owner reference with its uid). */
export function ownedBy(svc: V1Service, ns: Pick<NetService, 'metadata'>): boolean {
  return (svc.metadata?.ownerReferences ?? []).some((o) => o.kind === NETSERVICE_KIND && o.apiVersion.startsWith(`${NETSERVICE_GROUP}/`) && o.uid === ns.metadata?.uid && o.controller === true);
}

/** Owned by some NetService (any uid): an orphan once that NetService is gone. */
export function ownedByAnyNetService(svc: V1Service): boolean {
  return (svc.metadata?.ownerReferences ?? []).some((o) => o.kind === NETSERVICE_KIND && o.apiVersion.startsWith(`${NETSERVICE_GROUP}/`) && o.controller === true);
}

const sameMap = (a: Record<string, string> | undefined, b: Record<string, string>): boolean => Object.keys(b).every((k) => a?.[k] === b[k]);

/** The fields we own differ (labels and annotations we set, owner, headless): others' additions are left alone. */
export function serviceDiffers(existing: V1Service, desired: V1Service): boolean {
  const want = desired.metadata ?? {};
  const have = existing.metadata ?? {};
  if (!sameMap(have.labels, want.labels ?? {})) return true;
  if (!sameMap(have.annotations, want.annotations ?? {})) return true;
  if (want.annotations?.[SERVICE_SELECTOR_ANNOTATION] === undefined && have.annotations?.[SERVICE_SELECTOR_ANNOTATION] !== undefined) return true;
  if (existing.spec?.clusterIP !== 'None' || (existing.spec?.selector !== undefined && existing.spec.selector !== null && Object.keys(existing.spec.selector).length > 0)) return true;
  return JSON.stringify(have.ownerReferences ?? []) !== JSON.stringify(want.ownerReferences ?? []);
}

/** `existing` with our fields set to `desired`'s (a replace keeps everything else, resourceVersion included). */
export function mergeService(existing: V1Service, desired: V1Service): V1Service {
  const annotations = { ...(existing.metadata?.annotations ?? {}), ...(desired.metadata?.annotations ?? {}) };
  if (desired.metadata?.annotations?.[SERVICE_SELECTOR_ANNOTATION] === undefined) delete annotations[SERVICE_SELECTOR_ANNOTATION];
  const { selector: _selector, ...spec } = existing.spec ?? {};
  return {
    ...existing,
    metadata: {
      ...existing.metadata,
      labels: { ...(existing.metadata?.labels ?? {}), ...(desired.metadata?.labels ?? {}) },
      annotations,
      ownerReferences: desired.metadata?.ownerReferences ?? [],
    },
    spec: { ...spec, clusterIP: 'None' },
  };
}

export type NetServiceAction =
  | { readonly kind: 'create'; readonly service: V1Service }
  | { readonly kind: 'update'; readonly service: V1Service }
  | { readonly kind: 'none' }
  /** The NetService is gone and this Service was its: delete it (there may be no garbage collector). */
  | { readonly kind: 'delete'; readonly service: V1Service }
  /** A Service of that name that is not ours: nothing is written. */
  | { readonly kind: 'clash'; readonly message: string }
  | { readonly kind: 'invalid'; readonly error: InputError; readonly message: string }
  | { readonly kind: 'unresolved'; readonly message: string; readonly candidates: NetworkRef[] };

/**
 * What to do for one NetService key: `ns` undefined means it no longer exists. `existing` is the
 * Service of that name, read live. Level-based: the same inputs always give the same action.
 */
export function planNetService(ns: NetService | undefined, existing: V1Service | undefined, nads: readonly NetworkRef[]): NetServiceAction {
  if (ns === undefined || (ns.metadata?.deletionTimestamp !== undefined && ns.metadata.deletionTimestamp !== null)) {
    return existing !== undefined && ownedByAnyNetService(existing) && existing.metadata?.labels?.[NETSERVICE_LABEL] !== undefined ? { kind: 'delete', service: existing } : { kind: 'none' };
  }
  const object = describeNetService(ns);
  if (existing !== undefined && !ownedBy(existing, ns)) {
    const svc = `Service ${existing.metadata?.namespace ?? ''}/${existing.metadata?.name ?? ''}`;
    return {
      kind: 'clash',
      message: `${object}: a ${svc} already exists and is not owned by this NetService, so it is left as it is and the NetService is not served; rename the NetService, or delete that Service if it is a leftover (e.g. of net-service-controller)`,
    };
  }
  const spec = readNetServiceSpec(ns);
  if (!spec.ok) return { kind: 'invalid', error: spec.error, message: `${object}: ${spec.error.key} ${showValue(spec.error.value)}: ${spec.error.reason}; ${spec.error.fix}` };
  const resolved = resolveNetAttachDef(spec.value, ns.metadata?.namespace ?? '', nads);
  if (!resolved.ok) return { kind: 'unresolved', message: unresolvedMessage(ns, spec.value, resolved), candidates: resolved.candidates };
  const desired = desiredService(ns, spec.value, resolved.network);
  if (existing === undefined) return { kind: 'create', service: desired };
  return serviceDiffers(existing, desired) ? { kind: 'update', service: mergeService(existing, desired) } : { kind: 'none' };
}

/** The Ready condition for an action; unchanged status/reason/message keep the old transition time. */
export function readyCondition(action: NetServiceAction, generation: number | undefined): Omit<NetServiceCondition, 'lastTransitionTime'> {
  const base = { type: 'Ready', ...(generation !== undefined ? { observedGeneration: generation } : {}) };
  switch (action.kind) {
    case 'create':
    case 'update':
    case 'none':
      return { ...base, status: 'True', reason: 'ServiceReady', message: 'the headless Service of the same name follows this NetService' };
    case 'clash':
      return { ...base, status: 'False', reason: 'ServiceNameConflict', message: action.message };
    case 'invalid':
      return { ...base, status: 'False', reason: 'InvalidSpec', message: action.message };
    case 'unresolved':
      return { ...base, status: 'False', reason: 'NetAttachDefUnresolved', message: action.message };
    case 'delete':
      return { ...base, status: 'False', reason: 'Deleting', message: 'the NetService is being deleted' };
  }
}

/** The conditions to write, or undefined when the current ones already say this. */
export function nextConditions(current: readonly NetServiceCondition[] | undefined, want: Omit<NetServiceCondition, 'lastTransitionTime'>, now: Date): NetServiceCondition[] | undefined {
  const old = (current ?? []).find((c) => c.type === want.type);
  if (old !== undefined && old.status === want.status && old.reason === want.reason && old.message === want.message && old.observedGeneration === want.observedGeneration) return undefined;
  const lastTransitionTime = old !== undefined && old.status === want.status && old.lastTransitionTime !== undefined ? old.lastTransitionTime : now.toISOString().replace(/\.\d{3}Z$/, 'Z');
  return [...(current ?? []).filter((c) => c.type !== want.type), { ...want, lastTransitionTime }];
}
