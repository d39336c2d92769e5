/**
 * A pod's named containerPorts as the webhook hands them to the sidecar (one environment variable,
 * JSON), since the sidecar reads no pod and containerPorts cannot change after creation. Only named
 * ports matter: a policy names a port by the name its pod gave it.
 */
import { isJsonObject } from '../annotations/json.js';
import { err, formatInputError, inputError, ok, showValue, type Result } from '../result.js';
import type { ContainerPort } from './resolve.js';

/** A pod has at most this many named ports here; past it the variable is refused (fail-closed: no named port matches). */
export const MAX_NAMED_CONTAINER_PORTS = 1024;

const PROTOCOLS = new Set(['TCP', 'UDP', 'SCTP']);
/** Kubernetes' IANA_SVC_NAME: at most 15 characters, lower-case letters, digits and '-', a letter among them, no '--', no '-' at either end. */
const PORT_NAME = /^(?=.*[a-z])(?!.*--)[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$/;

interface PodSpecLike {
  readonly initContainers?: readonly { readonly ports?: readonly { name?: string; containerPort?: number; protocol?: string }[] }[];
  readonly containers?: readonly { readonly ports?: readonly { name?: string; containerPort?: number; protocol?: string }[] }[];
}

/** The named ports of every container of a pod spec (init containers too: a native sidecar may serve). */
export function namedContainerPorts(spec: PodSpecLike | undefined): ContainerPort[] {
  const out: ContainerPort[] = [];
  for (const c of [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])]) {
    for (const p of c.ports ?? []) {
      if (typeof p.name !== 'string' || p.name === '' || typeof p.containerPort !== 'number') continue;
      out.push({ name: p.name, containerPort: p.containerPort, protocol: p.protocol ?? 'TCP' });
    }
  }
  return out.slice(0, MAX_NAMED_CONTAINER_PORTS);
}

/** A JSON value for a message; `undefined` (a missing field) reads as such. */
const shown = (v: unknown): string => showValue(JSON.stringify(v) ?? String(v));

/** The variable's text for these ports. */
export function formatContainerPorts(ports: readonly ContainerPort[]): string {
  return JSON.stringify(ports.map((p) => ({ name: p.name, containerPort: p.containerPort, protocol: p.protocol ?? 'TCP' })));
}

/** The ports in the variable's text; `key` names the variable in messages. Linear in the text. */
export function parseContainerPorts(text: string, key: string): Result<ContainerPort[], string> {
  const fail = (value: string, problem: string, fix: string): Result<ContainerPort[], string> => err(formatInputError('the sidecar', inputError(key, value, problem, fix)));
  const FIX = 'leave it to the webhook, which writes the pod\'s named containerPorts as [{"name":"http","containerPort":8080,"protocol":"TCP"}]';
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return fail(showValue(text), 'is not JSON', FIX);
  }
  if (!Array.isArray(parsed)) return fail(showValue(text), 'is not a JSON list', FIX);
  if (parsed.length > MAX_NAMED_CONTAINER_PORTS) return fail(`${parsed.length} entries`, `has more than ${MAX_NAMED_CONTAINER_PORTS} entries`, FIX);
  const out: ContainerPort[] = [];
  for (const [i, e] of parsed.entries()) {
    if (!isJsonObject(e)) return fail(shown(e), `entry ${i} is not an object`, FIX);
    const { name, containerPort, protocol } = e as { name?: unknown; containerPort?: unknown; protocol?: unknown };
    if (typeof name !== 'string' || !PORT_NAME.test(name)) return fail(shown(name), `entry ${i}'s name is not a port name`, FIX);
    if (typeof containerPort !== 'number' || !Number.isInteger(containerPort) || containerPort < 1 || containerPort > 65535) {
      return fail(shown(containerPort), `entry ${i}'s containerPort is not a port number (1-65535)`, FIX);
    }
    if (protocol !== undefined && (typeof protocol !== 'string' || !PROTOCOLS.has(protocol))) return fail(shown(protocol), `entry ${i}'s protocol is not TCP, UDP or SCTP`, FIX);
    out.push({ name, containerPort, protocol: protocol ?? 'TCP' });
  }
  return ok(out);
}
