/**
 * The labels and the trigger-time annotation our EndpointSlices carry, decided from the Service,
 * its pods and our existing slices. Pure. Follows Kubernetes' EndpointSlice controller
 * (docs/contracts.md has the table, ours beside upstream's):
 * - labels: the Service's own labels, reserved keys aside, then the reserved ones set by us; so a
 *   Service's `service.kubernetes.io/service-proxy-name` reaches its slices, and a headless Service
 *   gets `service.kubernetes.io/headless`, the two labels kube-proxy's slice watch excludes;
 * - `endpoints.kubernetes.io/last-change-trigger-time`: when the change behind the write happened.
 */
import { networkLabelValue } from '../../src/annotations/network-label.js';
import type { NetworkRef } from '../../src/annotations/service-network.js';
import { sliceTriggerMs, timestampMs } from '../../src/annotations/trigger-time.js';
import { MANAGED_BY, MANAGED_BY_LABEL, NETWORK_LABEL, SERVICE_NAME_LABEL } from '../../src/keys.js';
import type { V1EndpointSlice, V1Pod, V1Service } from '../../src/kube/types.js';

/** Kubernetes: on the slices of a Service without a cluster IP (v1.IsHeadlessService). */
export const HEADLESS_LABEL = 'service.kubernetes.io/headless';

/** Labels a Service cannot put on its slices: the controller sets them (upstream's set plus our network label). */
export const RESERVED_SLICE_LABELS: ReadonlySet<string> = new Set([SERVICE_NAME_LABEL, MANAGED_BY_LABEL, HEADLESS_LABEL, NETWORK_LABEL]);

/** Upstream's helper.IsServiceIPSet, negated: clusterIP "None" or not set. */
export function isHeadless(svc: V1Service): boolean {
  const ip = svc.spec?.clusterIP;
  return ip === undefined || ip === null || ip === '' || ip === 'None';
}

/** Every label of a slice of `svc` on `network`: exactly these (upstream replaces the set too). */
export function sliceLabels(svc: V1Service, network: NetworkRef): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(svc.metadata?.labels ?? {})) if (!RESERVED_SLICE_LABELS.has(k)) out[k] = v;
  if (isHeadless(svc)) out[HEADLESS_LABEL] = '';
  out[SERVICE_NAME_LABEL] = svc.metadata?.name ?? '';
  out[MANAGED_BY_LABEL] = MANAGED_BY;
  out[NETWORK_LABEL] = networkLabelValue(network);
  return out;
}

export function sameLabels(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => b[k] === a[k]);
}

/**
 * When a pod's last change that moves its endpoint happened: its Ready condition's
 * lastTransitionTime (upstream's only pod trigger), or the moment its deletion was asked for
 * (deletionTimestamp is that moment plus the grace period, so the grace period is subtracted).
 */
export function podTriggerMs(pod: V1Pod): number | undefined {
  const times: number[] = [];
  const ready = (pod.status?.conditions ?? []).find((c) => c.type === 'Ready');
  const readyAt = timestampMs(ready?.lastTransitionTime);
  if (readyAt !== undefined) times.push(readyAt);
  const deleteAt = timestampMs(pod.metadata?.deletionTimestamp);
  if (deleteAt !== undefined) times.push(deleteAt - 1000 * (pod.metadata?.deletionGracePeriodSeconds ?? 0));
  return times.length === 0 ? undefined : Math.max(...times);
}

/**
 * The trigger time for the slices this sync writes, or undefined (annotation left off), as
 * upstream's TriggerTimeTracker computes it with the last state kept in the slices themselves
 * instead of in memory (so a restart or a new leader does not forget it):
 * - the Service's last known trigger is the newest annotation on its existing slices;
 * - with one, the trigger is the earliest pod or Service time newer than it (the oldest change
 *   not yet published, which is what latency is measured from); none newer: no known trigger
 *   (a pod that left, a label change), and the annotation is left off, as upstream does;
 * - without one (a new Service, or slices written before the annotation existed), the newest
 *   time: for a Service created over running pods, its creationTimestamp, as upstream's
 *   "new Service" rule gives.
 */
export function triggerTimeMs(svc: V1Service, pods: readonly V1Pod[], existing: readonly V1EndpointSlice[]): number | undefined {
  const times: number[] = [];
  const created = timestampMs(svc.metadata?.creationTimestamp);
  if (created !== undefined) times.push(created);
  for (const p of pods) {
    const t = podTriggerMs(p);
    if (t !== undefined) times.push(t);
  }
  const known = existing.map(sliceTriggerMs).filter((t): t is number => t !== undefined);
  if (known.length === 0) return times.length === 0 ? undefined : Math.max(...times);
  const last = Math.max(...known);
  const newer = times.filter((t) => t > last);
  return newer.length === 0 ? undefined : Math.min(...newer);
}
