/**
 * The pod mutation: pure, from the pod as the apiserver sent it to the pod with the sidecar.
 * The caller (src/injection-policy.ts) has already decided that the pod gets it.
 */
import { basename } from 'node:path/posix';
import { SIDECAR_CONTAINER_NAME } from '../../src/keys.js';
import { SERVICE_ACCOUNT_DIR } from '../../src/kube/config.js';
import type { V1Container, V1Pod } from '../../src/kube/types.js';
import { OPTION_SOURCES, POD_ANNOTATIONS_FILE, POD_INFO_DIR, POD_LABELS_FILE, ZONE_LABEL } from '../../src/sidecar-contract.js';
import { formatContainerPorts, namedContainerPorts } from '../../src/policy/container-ports.js';
import { SIDECAR_MALLOC_ENV, sourceGuardFor, type SidecarConfig } from './options.js';
import type { SourceGuardMode } from '../../src/sidecar-contract.js';

type PodSpec = NonNullable<V1Pod['spec']>;
type Volume = NonNullable<PodSpec['volumes']>[number];
type Probe = NonNullable<V1Container['startupProbe']>;

/** Prefix of everything we add to a pod, so our names cannot be mistaken for the user's. */
export const TOKEN_VOLUME_BASE = 'multus-proxy-token';
/**
 * A small writable directory for the sidecar, whose root file system is read-only: the legacy
 * iptables back end takes its lock at /run/xtables.lock unless XTABLES_LOCKFILE points elsewhere.
 */
export const RUN_VOLUME_BASE = 'multus-proxy-run';
export const RUN_DIR = '/run/multus-proxy';
/**
 * The pod's own annotations (network-status, networks, service-network) and labels as downwardAPI
 * files, kept current by the kubelet: the sidecar reads them there instead of watching its pod, so
 * the ServiceAccount (and every app container mounting the same token) needs no right to read pods.
 * The labels are what MultiNetworkPolicies select the pod by.
 */
export const PODINFO_VOLUME_BASE = 'multus-proxy-podinfo';
/** kubectl's annotation naming the container `kubectl logs/exec` use by default. */
export const DEFAULT_CONTAINER_ANNOTATION = 'kubectl.kubernetes.io/default-container';

/** `base`, or `base-1`, `base-2`, ... whichever is not taken. */
export function uniqueName(base: string, taken: ReadonlySet<string>): string {
  if (!taken.has(base)) return base;
  for (let i = 1; ; i++) if (!taken.has(`${base}-${i}`)) return `${base}-${i}`;
}

/**
 * The sidecar's own service-account token, in the same layout kubelet uses for
 * kube-api-access-* volumes (token, ca.crt, namespace), so the in-cluster client finds it at the
 * usual path. Always added, because the pod's own token never reaches the sidecar: the
 * ServiceAccount admission plugin runs before mutating webhooks and mounts the token only into the
 * containers that exist then, and with automountServiceAccountToken: false there is none at all.
 */
export function tokenVolume(name: string, expirationSeconds: number): Volume {
  return {
    name,
    projected: {
      defaultMode: 0o644,
      sources: [
        { serviceAccountToken: { path: 'token', expirationSeconds } },
        { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
        { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
      ],
    },
  };
}

/**
 * The sidecar's one probe, measured on the real node (docs/benchmarks.md, soak and probe cycle;
 * docs/decisions/0037-probes-and-health-port.md):
 * - a startup probe on `/readyz?wait=…`, which the sidecar holds until its first sync is done, so
 *   it succeeds the moment the sidecar is ready (and the app containers start then) instead of
 *   answering 503 (an Unhealthy Event each) every second before;
 * - first tried 1 s after the container's start (`initialDelaySeconds` 1): the injected command
 *   starts with health-listen (native/health-listen.c), which listens on the health port before
 *   Node.js starts; its request waits in the socket's backlog until Node.js serves (up to 2.3 s
 *   measured on a busy node), then the wait begins; 20 s of it, since a start on a loaded node (the
 *   soak's churn at load 8) passed 9 s. Not 0: with both cores busy the kubelet's first try once
 *   came before health-listen ran and was refused (an Unhealthy Event); the first sync takes longer
 *   than 1 s on such a node, so the app's start is not delayed by it;
 * - `timeoutSeconds` above that start plus the wait; `failureThreshold` × (wait + period) ≈ 5
 *   minutes for a start that cannot sync (the apiserver unreachable), as the 300 × 1 s before.
 * No readiness probe: readiness never falls back once ready (docs/sidecar.md), so without one the
 * kubelet counts the sidecar ready when started, the same answer without probing. No liveness
 * probe: the kubelet v1.34 keeps probing a native sidecar's liveness through the pod's termination,
 * after the sidecar exited (refused or reset, an Event each time); the sidecar ends itself instead
 * when a sync is stuck (its watchdog), and the kubelet restarts it as after a failed probe.
 */
export const STARTUP_PROBE = { initialDelaySeconds: 1, periodSeconds: 1, waitSeconds: 20, timeoutSeconds: 23, failureThreshold: 14 } as const;
/**
 * A `sidecar.command` of the operator's own without health-listen: Node.js binds the port itself,
 * so the first try waits 2 s (the old timing: refused at most rarely, on a busy node).
 */
export const STARTUP_PROBE_WITHOUT_LAUNCHER = { ...STARTUP_PROBE, initialDelaySeconds: 2 } as const;

/** Whether the sidecar command runs under health-listen, which listens before Node.js starts. */
export function launchedByHealthListen(command: readonly string[]): boolean {
  return /(^|\/)health-listen$/.test(command[0] ?? '');
}

function startupProbe(port: number, command: readonly string[]): Probe {
  const { waitSeconds, ...timing } = launchedByHealthListen(command) ? STARTUP_PROBE : STARTUP_PROBE_WITHOUT_LAUNCHER;
  return { httpGet: { path: `/readyz?wait=${waitSeconds}`, port }, ...timing };
}

/** Memory-backed and tiny: it only ever holds the xtables lock file. */
export function runVolume(name: string): Volume {
  return { name, emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } };
}

/** The annotations and the labels (file names as in src/sidecar-contract.ts): the rest of the pod is not the sidecar's business. */
export function podInfoVolume(name: string): Volume {
  const item = (path: string, fieldPath: string): { path: string; fieldRef: { apiVersion: string; fieldPath: string } } => ({ path, fieldRef: { apiVersion: 'v1', fieldPath } });
  return { name, downwardAPI: { defaultMode: 0o444, items: [item(basename(POD_ANNOTATIONS_FILE), 'metadata.annotations'), item(basename(POD_LABELS_FILE), 'metadata.labels')] } };
}

/** An environment variable from the downward API. */
function fieldEnv(name: string, fieldPath: string): NonNullable<V1Container['env']>[number] {
  return { name, valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath } } };
}

/**
 * `containerPorts`: the pod's named containerPorts as the sidecar reads them (formatContainerPorts),
 * written once because they cannot change after creation; unset when the pod names none.
 * `sourceGuard`: the pod's source guard (sourceGuardFor its namespace); off is written as
 * SOURCE_GUARD=off, enforce is the sidecar's default and left out.
 */
export function sidecarContainer(
  cfg: SidecarConfig,
  tokenVolumeName: string,
  native: boolean,
  runVolumeName = RUN_VOLUME_BASE,
  podInfoVolumeName = PODINFO_VOLUME_BASE,
  containerPorts?: string,
  sourceGuard: SourceGuardMode = sourceGuardFor(cfg, ''),
): V1Container {
  const container: V1Container = {
    name: SIDECAR_CONTAINER_NAME,
    image: cfg.image,
    imagePullPolicy: cfg.imagePullPolicy,
    ...(cfg.command.length > 0 ? { command: [...cfg.command] } : {}),
    ...(cfg.args.length > 0 ? { args: [...cfg.args] } : {}),
    env: [
      fieldEnv(OPTION_SOURCES.podName.env, 'metadata.name'),
      fieldEnv(OPTION_SOURCES.podNamespace.env, 'metadata.namespace'),
      // Where the pod runs, for internalTrafficPolicy Local and topology hints; the zone is empty
      // unless the cluster copies the node's zone label onto pods (docs/decisions/0161-sidecar-node-and-zone.md).
      fieldEnv(OPTION_SOURCES.nodeName.env, 'spec.nodeName'),
      fieldEnv(OPTION_SOURCES.nodeZone.env, `metadata.labels['${ZONE_LABEL}']`),
      { name: OPTION_SOURCES.healthPort.env, value: String(cfg.healthPort) },
      { name: 'LOG_LEVEL', value: cfg.logLevel },
      { name: 'XTABLES_LOCKFILE', value: `${RUN_DIR}/xtables.lock` },
      { name: OPTION_SOURCES.annotationsFile.env, value: POD_ANNOTATIONS_FILE },
      { name: OPTION_SOURCES.podLabelsFile.env, value: POD_LABELS_FILE },
      ...(containerPorts !== undefined ? [{ name: OPTION_SOURCES.podContainerPorts.env, value: containerPorts }] : []),
      { name: OPTION_SOURCES.maxServicesPerNetwork.env, value: String(cfg.maxServicesPerNetwork) },
      ...(cfg.backend !== 'auto' ? [{ name: OPTION_SOURCES.backend.env, value: cfg.backend }] : []),
      ...(cfg.externalIPsAllowedCIDRs !== undefined ? [{ name: OPTION_SOURCES.externalIPsAllowedCIDRs.env, value: cfg.externalIPsAllowedCIDRs.join(',') }] : []),
      ...(sourceGuard === 'off' ? [{ name: OPTION_SOURCES.sourceGuard.env, value: sourceGuard }] : []),
      ...Object.entries(SIDECAR_MALLOC_ENV).map(([name, value]) => ({ name, value })),
    ],
    resources: structuredClone(cfg.resources),
    securityContext: {
      capabilities: { add: ['NET_ADMIN', 'NET_RAW'], drop: ['ALL'] },
      // The apiserver refuses allowPrivilegeEscalation: false together with privileged: true.
      ...(cfg.privileged ? { privileged: true } : { allowPrivilegeEscalation: false }),
      readOnlyRootFilesystem: true,
      // uid 0 is needed for iptables: Kubernetes puts added capabilities in the bounding and
      // permitted sets but sets no ambient capabilities, so a non-root process loses them at exec
      // and iptables fails with EPERM. runAsNonRoot: false overrides a pod-level runAsNonRoot,
      // which would otherwise stop this container from starting (CreateContainerConfigError).
      runAsUser: 0,
      runAsNonRoot: false,
      seccompProfile: { type: 'RuntimeDefault' },
    },
    // Ready means the first complete rule sync is done. As a native sidecar the startup probe
    // also holds back the app containers until then, so their first connection already works.
    startupProbe: startupProbe(cfg.healthPort, cfg.command),
    volumeMounts: [
      { name: tokenVolumeName, mountPath: SERVICE_ACCOUNT_DIR, readOnly: true },
      { name: runVolumeName, mountPath: RUN_DIR },
      { name: podInfoVolumeName, mountPath: POD_INFO_DIR, readOnly: true },
    ],
    terminationMessagePolicy: 'FallbackToLogsOnError',
  };
  // A restartable init container is a native sidecar: started before, stopped after the app.
  if (native) container.restartPolicy = 'Always';
  return container;
}

/**
 * The pod with the sidecar: as the first init container (native), or the first container
 * (regular; then `kubectl logs` keeps defaulting to the app's container through kubectl's
 * default-container annotation). Plus the token, run and podinfo volumes under names no other volume has.
 *
 * Copy on write: only the objects on the paths that change (the pod, metadata and annotations
 * when the annotation is added, spec, the volume list and the container list) are new; everything
 * else, managedFields and the app's containers included, is shared with the input, which is never
 * modified. A deep copy of the pod was a fifth of the webhook's CPU (docs/benchmarks.md, B1), and
 * sharing is also what lets createPatch skip the unchanged subtrees by identity.
 */
export function injectSidecar(pod: V1Pod, cfg: SidecarConfig, native: boolean, namespace = pod.metadata?.namespace ?? ''): V1Pod {
  const spec: PodSpec = pod.spec ?? { containers: [] };
  const volumes = spec.volumes ?? [];
  const taken = new Set(volumes.map((v) => v.name));
  const volumeName = uniqueName(TOKEN_VOLUME_BASE, taken);
  const runName = uniqueName(RUN_VOLUME_BASE, taken);
  const podInfoName = uniqueName(PODINFO_VOLUME_BASE, taken);
  const named = namedContainerPorts(spec);
  const sidecar = sidecarContainer(cfg, volumeName, native, runName, podInfoName, named.length > 0 ? formatContainerPorts(named) : undefined, sourceGuardFor(cfg, namespace));
  const outSpec: PodSpec = { ...spec, volumes: [...volumes, tokenVolume(volumeName, cfg.tokenExpirationSeconds), runVolume(runName), podInfoVolume(podInfoName)] };
  const out: V1Pod = { ...pod, spec: outSpec };
  if (native) {
    outSpec.initContainers = [sidecar, ...(spec.initContainers ?? [])];
  } else {
    const appContainer = spec.containers[0]?.name;
    const annotations = pod.metadata?.annotations ?? {};
    if (appContainer !== undefined && annotations[DEFAULT_CONTAINER_ANNOTATION] === undefined) {
      out.metadata = { ...(pod.metadata ?? {}), annotations: { ...annotations, [DEFAULT_CONTAINER_ANNOTATION]: appContainer } };
    }
    outSpec.containers = [sidecar, ...spec.containers];
  }
  return out;
}
