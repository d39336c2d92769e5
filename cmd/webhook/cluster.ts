/**
 * What the webhook reads from the apiserver, through the lean client: a Namespace's labels
 * (injection enabled? PodSecurity level?), the apiserver version (native sidecars?), whether a
 * NetworkAttachmentDefinition exists, whether the node agent runs (its DaemonSet: the node-agent
 * component grants the webhook `get` on that one object; without the component the apiserver
 * answers 403 or 404, both read as "not installed"). Short caches keep a burst of pods (a Deployment scaling
 * to 100) from becoming 100 GETs, and concurrent lookups of one key share one request.
 */
import type { KubeClient } from '../../src/kube/client.js';
import { getIfExists, isForbidden, isNotFound } from '../../src/kube/client.js';
import { NODE_AGENT_DAEMONSET, NODE_AGENT_NAMESPACE } from '../../src/keys.js';
import type { NodeAgentPresence } from './service.js';
import { apiPath } from '../../src/kube/paths.js';
import type { V1Namespace, V1Service } from '../../src/kube/types.js';
import { objectEvent } from '../../src/kube/events.js';
import { RateLimiter } from '../../src/kube/rate-limiter.js';
import { createEventQueue } from '../../src/kube/event-queue.js';
import { hostname } from 'node:os';
import { networkKey, type NetworkRef } from '../../src/annotations/service-network.js';
import type { Logger } from '../../src/log.js';

export type NadState = 'exists' | 'missing' | 'unknown';

/** A NAD lookup: whether it exists and, when it does, its annotations (who it is shared with). */
export interface NadLookup {
  readonly state: NadState;
  readonly annotations?: Readonly<Record<string, string>>;
}

export interface ClusterLookups {
  /** The Namespace's labels; undefined when it does not exist. `fresh` skips the cache. */
  namespaceLabels(name: string, fresh?: boolean): Promise<Record<string, string> | undefined>;
  /** True when the apiserver runs Kubernetes 1.29 or later (SidecarContainers on by default). */
  nativeSidecarsSupported(): Promise<boolean>;
  nadExists(ref: NetworkRef): Promise<NadLookup>;
  /** Whether the node agent's DaemonSet exists and has a ready pod (cached briefly). */
  nodeAgent(): Promise<NodeAgentPresence>;
}

/** The part of a DaemonSet read here. */
interface DaemonSetStatus {
  status?: { numberReady?: number };
}

export interface ServerVersion {
  major?: string;
  minor?: string;
  gitVersion?: string;
}

/** `{major:"1", minor:"29+"}` (some providers add a '+') or gitVersion `v1.29.3-gke.1`. */
export function parseServerVersion(v: ServerVersion): { major: number; minor: number } | undefined {
  const major = Number.parseInt(v.major ?? '', 10);
  const minor = Number.parseInt(v.minor ?? '', 10);
  if (Number.isInteger(major) && Number.isInteger(minor)) return { major, minor };
  const m = /^v?(\d+)\.(\d+)/.exec(v.gitVersion ?? '');
  return m ? { major: Number(m[1]), minor: Number(m[2]) } : undefined;
}

/** SidecarContainers is beta and on by default from 1.29 (alpha, off, in 1.28). */
export function supportsNativeSidecars(v: { major: number; minor: number }): boolean {
  return v.major > 1 || (v.major === 1 && v.minor >= 29);
}

export interface LookupOptions {
  readonly namespaceCacheMs: number;
  readonly nadTimeoutMs: number;
  readonly logger?: Logger;
  /** How long a version answer is reused (an upgrade is seen after at most this long). */
  readonly versionCacheMs?: number;
  /** How long the node agent's presence is reused (default 10 s: an install is noticed soon). */
  readonly nodeAgentCacheMs?: number;
  /** The node agent DaemonSet's namespace (default multus-proxy-node). */
  readonly nodeAgentNamespace?: string;
  readonly now?: () => number;
}

interface Cached<T> {
  readonly at: number;
  readonly value: Promise<T>;
}

const VERSION_RETRY_MS = 30_000;

export function createClusterLookups(client: Pick<KubeClient, 'get'>, opts: LookupOptions): ClusterLookups {
  const now = opts.now ?? Date.now;
  const namespaces = new Map<string, Cached<Record<string, string> | undefined>>();
  let version: (Cached<boolean> & { ttl: number }) | undefined;
  let agent: Cached<NodeAgentPresence> | undefined;

  const fetchNamespace = (name: string): Promise<Record<string, string> | undefined> =>
    getIfExists<V1Namespace>(client, apiPath('', 'v1', 'namespaces', undefined, name)).then((ns) => (ns === undefined ? undefined : (ns.metadata?.labels ?? {})));

  return {
    namespaceLabels(name, fresh = false) {
      const hit = namespaces.get(name);
      if (!fresh && hit !== undefined && now() - hit.at < opts.namespaceCacheMs) return hit.value;
      const value = fetchNamespace(name);
      namespaces.set(name, { at: now(), value });
      // A failed lookup must not be served from the cache.
      value.catch(() => namespaces.get(name)?.value === value && namespaces.delete(name));
      // Keep the map bounded by dropping what has expired.
      if (namespaces.size > 1000) for (const [k, c] of namespaces) if (now() - c.at >= opts.namespaceCacheMs) namespaces.delete(k);
      return value;
    },

    nativeSidecarsSupported() {
      if (version !== undefined && now() - version.at < version.ttl) return version.value;
      // Unknown version: a regular container works on every version; ask again soon. The cached
      // promise never rejects, so concurrent callers all get an answer.
      const value = client
        .get<ServerVersion>('/version')
        .then((v) => {
          const parsed = parseServerVersion(v);
          if (parsed === undefined) throw new Error(`cannot read the version ${JSON.stringify(v)}`);
          return supportsNativeSidecars(parsed);
        })
        .catch((e: unknown) => {
          opts.logger?.warn({ err: e }, 'apiserver version unknown; injecting a regular sidecar container');
          version = { at: now(), ttl: VERSION_RETRY_MS, value: Promise.resolve(false) };
          return false;
        });
      version = { at: now(), ttl: opts.versionCacheMs ?? 600_000, value };
      return value;
    },

    nodeAgent() {
      if (agent !== undefined && now() - agent.at < (opts.nodeAgentCacheMs ?? 10_000)) return agent.value;
      const value = client.get<DaemonSetStatus>(apiPath('apps', 'v1', 'daemonsets', opts.nodeAgentNamespace ?? NODE_AGENT_NAMESPACE, NODE_AGENT_DAEMONSET)).then(
        (ds): NodeAgentPresence => ((ds?.status?.numberReady ?? 0) > 0 ? 'ready' : 'not-ready'),
        (e: unknown): NodeAgentPresence => {
          if (isNotFound(e) || isForbidden(e)) return 'absent';
          opts.logger?.debug({ err: e }, 'node agent lookup failed');
          return 'unknown';
        },
      );
      agent = { at: now(), value };
      return value;
    },

    async nadExists(ref) {
      const path = apiPath('k8s.cni.cncf.io', 'v1', 'network-attachment-definitions', ref.namespace, ref.name);
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<NadLookup>((resolve) => (timer = setTimeout(() => resolve({ state: 'unknown' }), opts.nadTimeoutMs)));
      const lookup = client.get<{ metadata?: { annotations?: Record<string, string> } }>(path).then(
        (nad): NadLookup => ({ state: 'exists', annotations: nad?.metadata?.annotations ?? {} }),
        (e: unknown): NadLookup => {
          if (isNotFound(e)) return { state: 'missing' };
          opts.logger?.debug({ err: e, path }, 'NetworkAttachmentDefinition lookup failed');
          return { state: 'unknown' };
        },
      );
      try {
        return await Promise.race([lookup, timeout]);
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** NAD GETs one admission runs at once: a few round trips for the most names an annotation may hold. */
export const NAD_LOOKUP_CONCURRENCY = 8;

/**
 * Looks the NADs of one admission up: each distinct NAD once, at most `concurrency` at a time, all
 * within one `timeoutMs` (a slow apiserver cannot stretch the admission past its own timeout). A
 * NAD not answered by then is `unknown`, which the caller treats as "cannot tell" (a
 * cross-namespace reference is then denied). Results are in the order of `refs`.
 */
export async function lookupNads(cluster: Pick<ClusterLookups, 'nadExists'>, refs: readonly NetworkRef[], timeoutMs: number, concurrency: number = NAD_LOOKUP_CONCURRENCY): Promise<NadLookup[]> {
  const keys = [...new Set(refs.map(networkKey))];
  const byKey = new Map<string, NetworkRef>(refs.map((r) => [networkKey(r), r]));
  const found = new Map<string, NadLookup>();
  let next = 0;
  let expired = false;
  const worker = async (): Promise<void> => {
    while (!expired && next < keys.length) {
      const key = keys[next++] as string;
      const answer = await cluster.nadExists(byKey.get(key) as NetworkRef);
      if (!expired) found.set(key, answer);
    }
  };
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
  try {
    await Promise.race([Promise.all(Array.from({ length: Math.min(concurrency, keys.length) }, worker)), deadline]);
  } finally {
    expired = true;
    clearTimeout(timer);
  }
  return refs.map((r) => found.get(networkKey(r)) ?? { state: 'unknown' });
}

export const EVENT_COMPONENT = 'multus-proxy-webhook';

/** One Event per Service and reason at most this often (a Service re-applied in a loop). */
export const EVENT_INTERVAL_MS = 10 * 60_000;

/**
 * Writes a Warning Event about a Service without holding up the admission: the write runs in the
 * background and a failure is only logged. On CREATE the Service has no uid yet; kubectl still
 * finds the Event by kind, namespace and name.
 */
export function serviceEventWriter(
  client: Pick<KubeClient, 'create'>,
  logger?: Logger,
  now: () => number = Date.now,
): (svc: V1Service, namespace: string, reason: string, message: string) => Promise<void> {
  const limiter = new RateLimiter(EVENT_INTERVAL_MS);
  const queue = createEventQueue({
    write: (body) => client.create(apiPath('', 'v1', 'events', body.metadata.namespace), body),
    onError: (e, body) => logger?.warn({ err: e, reason: body.reason }, 'could not write Event'),
    now,
  });
  return (svc, namespace, reason, message) => {
    const name = svc.metadata?.name ?? '';
    if (name === '') return Promise.resolve(); // generateName: no name to attach it to yet
    if (!limiter.allow(`${namespace}/${name}/${reason}`, now())) return Promise.resolve();
    const subject = { apiVersion: 'v1', kind: 'Service', name, namespace, uid: svc.metadata?.uid ?? '' };
    const body = objectEvent(subject, 'Warning', reason, message, new Date(), { component: EVENT_COMPONENT, instance: hostname() });
    queue.submit(body);
    return Promise.resolve();
  };
}
