/**
 * A pod that arrives with a container named `multus-proxy` already: the webhook's own sidecar
 * (the pod webhook is reinvoked after another webhook changed the pod, or a pod copied from one it
 * injected), or one the pod's author wrote to set the sidecar's settings themselves (SOURCE_GUARD
 * off, other external-IP CIDRs, another image, a lifecycle hook with the sidecar's NET_ADMIN).
 * The name is reserved: the container is kept only when it is what this webhook injects for the
 * pod now, field for field (with the fields the apiserver defaults allowed beside them), and the
 * volumes it mounts are the ones the webhook adds. Anything else is denied, naming the field.
 * Pure.
 */
import { SIDECAR_CONTAINER_NAME } from '../../src/keys.js';
import { SERVICE_ACCOUNT_DIR } from '../../src/kube/config.js';
import type { V1Container, V1Pod } from '../../src/kube/types.js';
import { formatContainerPorts, namedContainerPorts } from '../../src/policy/container-ports.js';
import { formatInputError, inputError } from '../../src/result.js';
import { podInfoVolume, RUN_DIR, runVolume, sidecarContainer, tokenVolume } from './mutate.js';
import { sourceGuardFor, type SidecarConfig } from './options.js';
import { POD_INFO_DIR } from '../../src/sidecar-contract.js';

/** Container fields the apiserver fills in on its own (pod defaulting), which the webhook does not write. */
const DEFAULTED = new Set(['terminationMessagePath']);

/** A value the apiserver leaves out when it stores an object (Go's omitempty): 0, false, '', an empty list or mapping. */
const zero = (v: unknown): boolean =>
  v === 0 || v === false || v === '' || (Array.isArray(v) && v.length === 0) || (typeof v === 'object' && v !== null && !Array.isArray(v) && Object.keys(v).length === 0);

/**
 * Whether `have` holds everything `want` says: objects key by key (extra keys allowed), arrays
 * element by element with the same length, the rest equal; a zero value the apiserver left out counts.
 */
function covers(want: unknown, have: unknown): boolean {
  if (have === undefined && zero(want)) return true;
  if (Array.isArray(want)) return Array.isArray(have) && have.length === want.length && want.every((w, i) => covers(w, have[i]));
  if (typeof want === 'object' && want !== null) {
    if (typeof have !== 'object' || have === null || Array.isArray(have)) return false;
    return Object.entries(want).every(([k, w]) => w === undefined || covers(w, (have as Record<string, unknown>)[k]));
  }
  return want === have;
}

/** Where `have` first fails to hold what `want` says (a path below the container, and both values there), or undefined. */
interface Difference {
  readonly path: string;
  readonly have: unknown;
  readonly want: unknown;
}

function difference(want: unknown, have: unknown, path: string): Difference | undefined {
  if (covers(want, have)) return undefined;
  if (Array.isArray(want) && Array.isArray(have)) {
    const h: readonly unknown[] = have;
    for (let i = 0; i < Math.max(want.length, h.length); i++) {
      const d = i < want.length ? difference(want[i], h[i], `${path}[${i}]`) : { path: `${path}[${i}]`, have: h[i], want: undefined };
      if (d !== undefined) return d;
    }
  }
  if (typeof want === 'object' && want !== null && !Array.isArray(want) && typeof have === 'object' && have !== null && !Array.isArray(have)) {
    for (const [k, w] of Object.entries(want)) {
      const d = w === undefined ? undefined : difference(w, (have as Record<string, unknown>)[k], `${path}.${k}`);
      if (d !== undefined) return d;
    }
  }
  return { path, have, want };
}

/** The first field of the container `have` that is not what `want` is, or undefined. */
function containerDifference(want: V1Container, have: V1Container): Difference | undefined {
  const w = want as unknown as Readonly<Record<string, unknown>>;
  const h = have as unknown as Readonly<Record<string, unknown>>;
  for (const k of [...new Set([...Object.keys(w), ...Object.keys(h)])].sort()) {
    if (w[k] === undefined) {
      const v = h[k];
      if (v === undefined || DEFAULTED.has(k) || (Array.isArray(v) && v.length === 0)) continue;
      return { path: k, have: v, want: undefined };
    }
    const d = difference(w[k], h[k], k);
    if (d !== undefined) return d;
  }
  return undefined;
}

/**
 * Why the pod's `multus-proxy` container is not the sidecar this webhook injects for it (a denial
 * message naming the object, the field, its value and the fix), or undefined when it is.
 */
export function reservedSidecarProblem(pod: V1Pod, cfg: SidecarConfig, namespace: string, object: string): string | undefined {
  const spec = pod.spec;
  const init = (spec?.initContainers ?? []).findIndex((c) => c.name === SIDECAR_CONTAINER_NAME);
  const regular = (spec?.containers ?? []).findIndex((c) => c.name === SIDECAR_CONTAINER_NAME);
  const have = init >= 0 ? spec?.initContainers?.[init] : spec?.containers?.[regular];
  if (have === undefined) return undefined;
  const where = init >= 0 ? `spec.initContainers[${init}]` : `spec.containers[${regular}]`;
  const fix = `the container name ${SIDECAR_CONTAINER_NAME} is reserved for the sidecar this webhook injects, whose settings are the cluster admin's: remove the container (and the volumes it mounts) from the pod, and the webhook adds it; or rename a container of your own`;
  const deny = (key: string, value: unknown, reason: string): string => formatInputError(object, inputError(`${where}.${key}`, JSON.stringify(value) ?? 'undefined', reason, fix));
  const mountOf = (path: string): string | undefined => have.volumeMounts?.find((m) => m.mountPath === path)?.name;
  const token = mountOf(SERVICE_ACCOUNT_DIR);
  const run = mountOf(RUN_DIR);
  const info = mountOf(POD_INFO_DIR);
  if (token === undefined || run === undefined || info === undefined) return deny('volumeMounts', have.volumeMounts, 'does not mount the volumes the injected sidecar mounts');
  const native = init >= 0;
  const named = namedContainerPorts(spec);
  const want = sidecarContainer(cfg, token, native, run, info, named.length > 0 ? formatContainerPorts(named) : undefined, sourceGuardFor(cfg, namespace));
  const d = containerDifference(want, have);
  if (d !== undefined) return deny(d.path, d.have, `is not what the injected sidecar has there (${d.want === undefined ? 'nothing' : (JSON.stringify(d.want) ?? '')})`);
  const volumes = new Map((spec?.volumes ?? []).map((v) => [v.name, v]));
  for (const v of [tokenVolume(token, cfg.tokenExpirationSeconds), runVolume(run), podInfoVolume(info)]) {
    const got = volumes.get(v.name);
    if (!covers(v, got)) {
      const i = (spec?.volumes ?? []).findIndex((x) => x.name === v.name);
      return formatInputError(object, inputError(`spec.volumes[${i}]`, JSON.stringify(got) ?? 'undefined', `is not the volume the injected sidecar mounts as ${v.name}`, fix));
    }
  }
  return undefined;
}
