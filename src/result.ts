/**
 * Parsers never throw: they return a Result. A failure carries everything a user needs to fix
 * the input: which key, which value, what is wrong and what to write instead.
 */

export interface InputError {
  /** The annotation or field that was wrong, e.g. `k8s.v1.cni.cncf.io/service-network`. */
  readonly key: string;
  /** The offending value (truncated for display by `formatInputError`). */
  readonly value: string;
  /** What is wrong with it. */
  readonly reason: string;
  /** What to write instead. */
  readonly fix: string;
}

export type Result<T, E = InputError> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly error: E };

export function ok<T>(value: T): Result<T, never> {
  return { ok: true, value };
}

export function err<E>(error: E): Result<never, E> {
  return { ok: false, error };
}

export function inputError(key: string, value: string, reason: string, fix: string): InputError {
  return { key, value, reason, fix };
}

const MAX_SHOWN_VALUE = 200;

/** Quotes a value for a message, cutting very long ones so a 1 MB annotation cannot flood a log or an Event. */
export function showValue(value: string): string {
  const cut = value.length > MAX_SHOWN_VALUE ? `${value.slice(0, MAX_SHOWN_VALUE)}…(${value.length} chars)` : value;
  return JSON.stringify(cut);
}

/**
 * The one message format for bad input everywhere (admission denials, Events, logs):
 * `<object>: <key> <value>: <reason>; <fix>`. `object` is e.g. `Service default/web` or `Pod ns/name`.
 */
export function formatInputError(object: string, e: InputError): string {
  return `${object}: ${e.key} ${showValue(e.value)}: ${e.reason}; ${e.fix}`;
}
