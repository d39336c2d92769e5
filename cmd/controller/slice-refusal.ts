/**
 * What the controller does when the apiserver refuses one of its EndpointSlice writes as invalid
 * (422). Pure; the writer in reconcile.ts does the IO.
 *
 * The controller checks what a pod claims before planning (address-policy.ts), but the apiserver's
 * validation is the last word and can refuse what those checks let through (today: an endpoint
 * with more than 100 addresses; tomorrow: a rule of a newer apiserver). Before, one such endpoint
 * made the whole reconcile throw: the Service's other slices were not written and the slice kept
 * its old endpoints, on every retry, so a new replica never arrived.
 *
 * Now the refused slice is written again without the endpoints the apiserver's answer names
 * (`endpoints[i]…` in the Status causes' fields, or in the message): the other endpoints of that
 * slice are published. Where no endpoint is named (a slice-level field) or the second write is
 * refused too, that slice is left as it was. Either way the writer carries on with the Service's
 * other slices, and the key is retried with backoff. Why not bisect: every probe is a write of
 * the same object (up to 2·log2(100) writes per reconcile, each visible to every sidecar on the
 * network), and the apiserver names the endpoint in every per-endpoint rule it has.
 */
import type { V1Endpoint, V1EndpointSlice } from '../../src/kube/types.js';

/** More causes than this are not read (a Status is apiserver output, but bounded all the same). */
const MAX_CAUSES = 200;

/** Indices of the endpoints the apiserver's 422 names, in order, each once, below `count`. */
export function namedEndpoints(details: unknown, message: string, count: number): number[] {
  const fields: string[] = [];
  const causes = typeof details === 'object' && details !== null ? (details as { causes?: unknown }).causes : undefined;
  if (Array.isArray(causes)) {
    for (const c of causes.slice(0, MAX_CAUSES) as unknown[]) {
      const field = typeof c === 'object' && c !== null ? (c as { field?: unknown }).field : undefined;
      if (typeof field === 'string') fields.push(field);
    }
  }
  // The message repeats each cause's field; read it too when the details are missing.
  fields.push(...(message.slice(0, 20_000).match(/endpoints\[\d+\]/g) ?? []));
  const out = new Set<number>();
  for (const f of fields) {
    const m = /^endpoints\[(\d+)\]/.exec(f);
    if (m === null) continue;
    const i = Number(m[1]);
    if (i < count) out.add(i);
  }
  return [...out].sort((a, b) => a - b);
}

export interface Isolated {
  /** The slice without the named endpoints, to be written instead. */
  readonly slice: V1EndpointSlice;
  readonly dropped: readonly V1Endpoint[];
}

/**
 * The slice without the endpoints at `indices`; undefined when nothing can be isolated (none
 * named, or every endpoint named: an empty slice would only take the others' places away).
 */
export function isolateEndpoints(slice: V1EndpointSlice, indices: readonly number[]): Isolated | undefined {
  const endpoints = slice.endpoints ?? [];
  const drop = new Set(indices.filter((i) => i < endpoints.length));
  if (drop.size === 0 || drop.size >= endpoints.length) return undefined;
  return {
    slice: { ...slice, endpoints: endpoints.filter((_, i) => !drop.has(i)) },
    dropped: endpoints.filter((_, i) => drop.has(i)),
  };
}

/** How a refused slice is named in a message: its name, or for a create its network and family. */
export function describeSlice(slice: V1EndpointSlice, network: string): string {
  const meta = slice.metadata ?? {};
  const ns = meta.namespace ?? '';
  if (meta.name !== undefined && meta.name !== '') return `EndpointSlice ${ns}/${meta.name}`;
  return `a new EndpointSlice ${ns}/${meta.generateName ?? ''}… (network ${network}, ${slice.addressType})`;
}

function describeEndpoint(e: V1Endpoint): string {
  const ref = e.targetRef;
  const who = ref?.name !== undefined ? `Pod ${ref.namespace ?? ''}/${ref.name}` : 'an endpoint';
  const shown = e.addresses.slice(0, 3).join(', ');
  return `${who} (${e.addresses.length > 3 ? `${shown} … ${e.addresses.length} addresses` : shown})`;
}

export type RefusalOutcome = { readonly written: true; readonly dropped: readonly V1Endpoint[] } | { readonly written: false };

/** The Warning on the Service: which slice, the apiserver's words, what was done about it. */
export function refusalMessage(service: string, slice: string, verb: 'create' | 'update', apiMessage: string, outcome: RefusalOutcome): string {
  const said = apiMessage.length > 600 ? `${apiMessage.slice(0, 600)}…` : apiMessage;
  const head = `Service ${service}: the apiserver refused the ${verb} of ${slice} as invalid: ${said}`;
  if (outcome.written) {
    const names = outcome.dropped.slice(0, 5).map(describeEndpoint).join('; ');
    const more = outcome.dropped.length > 5 ? ` and ${outcome.dropped.length - 5} more` : '';
    return `${head}. Left out: ${names}${more}; the slice's other endpoints were written. Retrying with backoff; fix what the apiserver names (the pod's network-status).`;
  }
  return `${head}. The answer names no single endpoint to leave out, so this slice keeps what it had; the Service's other slices were written. Retrying with backoff.`;
}
