/**
 * Kubernetes' `endpoints.kubernetes.io/last-change-trigger-time` on an EndpointSlice: when the pod
 * or Service change behind the slice's last write happened. The controller writes it, the sidecar
 * and node agent read it for the network-programming latency metric. Shared, so writer and reader
 * agree on the format (RFC 3339 with milliseconds, as upstream's RFC3339Nano parses back).
 */
import { LAST_CHANGE_TRIGGER_TIME_ANNOTATION } from '../keys.js';
import type { V1EndpointSlice } from '../kube/types.js';

/** Milliseconds since the epoch of the slice's trigger-time annotation, if it has a valid one. */
export function sliceTriggerMs(slice: V1EndpointSlice): number | undefined {
  const text = slice.metadata?.annotations?.[LAST_CHANGE_TRIGGER_TIME_ANNOTATION];
  const ms = text === undefined ? NaN : Date.parse(text);
  return Number.isFinite(ms) ? ms : undefined;
}

export function formatTriggerTime(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * A Kubernetes timestamp as milliseconds. The client-node types say `Date`, but objects read as
 * JSON carry strings; both are accepted, anything else is no time.
 */
export function timestampMs(v: unknown): number | undefined {
  const ms = v instanceof Date ? v.getTime() : typeof v === 'string' ? Date.parse(v) : NaN;
  return Number.isFinite(ms) ? ms : undefined;
}
