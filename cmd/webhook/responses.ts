/**
 * AdmissionReview (admission.k8s.io/v1) types and the four answers the webhook gives. Every
 * answer echoes the request's uid (the apiserver rejects a response without it) and is sent with
 * HTTP 200: a denial is `allowed: false` with a status code and message, which the apiserver
 * shows the user as `admission webhook "<name>" denied the request: <message>`.
 */
import type { Operation } from '../../src/injection-policy.js';

export const ADMISSION_API_VERSION = 'admission.k8s.io/v1';
export const ADMISSION_KIND = 'AdmissionReview';

export type { Operation };

export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

export interface AdmissionRequest {
  uid: string;
  kind?: GroupVersionKind;
  resource?: { group: string; version: string; resource: string };
  subResource?: string;
  name?: string;
  namespace?: string;
  operation: Operation;
  userInfo?: { username?: string; groups?: string[] };
  object?: unknown;
  oldObject?: unknown;
  dryRun?: boolean;
}

export interface AdmissionStatus {
  code: number;
  message: string;
  reason?: string;
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: AdmissionStatus;
  patchType?: 'JSONPatch';
  /** base64 of the JSON Patch document. */
  patch?: string;
  /** Shown by kubectl as `Warning: ...`; keep each short (the apiserver may truncate long ones). */
  warnings?: string[];
}

export interface AdmissionReview {
  apiVersion: typeof ADMISSION_API_VERSION;
  kind: typeof ADMISSION_KIND;
  request?: AdmissionRequest;
  response?: AdmissionResponse;
}

/** One RFC 6902 operation, as our patch builder emits them. */
export type PatchOperation = { op: 'add' | 'replace' | 'test'; path: string; value: unknown } | { op: 'remove'; path: string };

/** Status reasons as metav1.StatusReason spells them, so clients can tell a bad request from a refusal. */
const REASONS: Record<number, string> = { 400: 'BadRequest', 403: 'Forbidden', 422: 'Invalid', 500: 'InternalError' };

function withWarnings(r: AdmissionResponse, warnings: readonly string[] | undefined): AdmissionResponse {
  return warnings !== undefined && warnings.length > 0 ? { ...r, warnings: [...warnings] } : r;
}

export function allowed(uid: string, warnings?: readonly string[]): AdmissionResponse {
  return withWarnings({ uid, allowed: true }, warnings);
}

/** A refusal of the object: 400 when it is malformed, 403 when policy forbids it. */
export function denied(uid: string, code: 400 | 403 | 422, message: string, warnings?: readonly string[]): AdmissionResponse {
  return withWarnings({ uid, allowed: false, status: { code, message, reason: REASONS[code] ?? 'Forbidden' } }, warnings);
}

/** Allowed with a JSON Patch; no operations is a plain allow (no patch field at all). */
export function patched(uid: string, ops: readonly PatchOperation[], warnings?: readonly string[]): AdmissionResponse {
  if (ops.length === 0) return allowed(uid, warnings);
  return withWarnings({ uid, allowed: true, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(ops), 'utf8').toString('base64') }, warnings);
}

/** We could not decide (an apiserver lookup failed, a bug): not allowed, code 500, the failure in the message. */
export function errored(uid: string, message: string): AdmissionResponse {
  return { uid, allowed: false, status: { code: 500, message, reason: REASONS[500] } };
}

export function review(response: AdmissionResponse): AdmissionReview {
  return { apiVersion: ADMISSION_API_VERSION, kind: ADMISSION_KIND, response };
}
