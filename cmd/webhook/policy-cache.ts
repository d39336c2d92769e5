/**
 * The MultiNetworkPolicies the webhook knows, to tell whether a pod being created is selected by
 * one (then it must get the sidecar, and may not opt out). An informer on v1beta1, which both our
 * CRD and the reference's serve, whose transform keeps of each policy only what selection reads
 * (src/policy/selection.ts): name, namespace, the checked podSelector and the networks of
 * policy-for, checked once there and not at each admission. Indexed by namespace, since a policy
 * selects only pods of its own.
 *
 * Bounded: the checker caps a selector (POLICY_BUDGETS) and policy-for (its parser), and what is
 * kept of one policy is at most MAX_KEPT_SELECTION_BYTES; a policy over it is kept as selecting
 * every pod on its networks (fail-closed, as one that fails its checks), with a log line.
 *
 * The CRD is optional: while its API is not served (discovery answers 404, or lists no such
 * resource) nothing is selected, and discovery is asked again every `probeMs`, so a CRD installed
 * later is seen without a restart. Until the first answer the state is `starting`, which keeps the
 * webhook unready: a replica that has not read the policies must not admit pods.
 */
import { isNotFound, type KubeClient } from '../../src/kube/client.js';
import { createInformer, type Informer } from '../../src/kube/informer.js';
import { apiPath } from '../../src/kube/paths.js';
import { slimMeta } from '../../src/kube/slim-meta.js';
import type { KubeObject } from '../../src/kube/types.js';
import { MULTI_NETWORK_POLICY_GROUP, MULTI_NETWORK_POLICY_RESOURCE } from '../../src/keys.js';
import type { Logger } from '../../src/log.js';
import type { MultiNetworkPolicy } from '../../src/policy/api.js';
import { policySelection, selectingPolicy, type PolicySelection, type SelectablePod, type Selected } from '../../src/policy/selection.js';

/** What one policy may cost this cache (JSON of its selection): real ones are well under 1 KiB. */
export const MAX_KEPT_SELECTION_BYTES = 16 * 1024;

/** The version watched: served by every MultiNetworkPolicy CRD (v1beta2 only by some). */
export const WATCHED_VERSION = 'v1beta1';

export type PolicyCacheState = 'starting' | 'not-served' | 'synced';

export interface PolicyLookup {
  /** The policy that selects the pod (first by name), or undefined. */
  selecting(pod: SelectablePod): Selected | undefined;
  state(): PolicyCacheState;
}

export interface PolicyCache extends PolicyLookup {
  readonly name: string;
  start(): void;
  stop(): void;
}

/** A cached policy: its identity and its selection, nothing else. */
export interface CachedPolicy extends KubeObject {
  readonly selection: PolicySelection;
}

/** The informer's transform: what a policy selects, held to the byte budget. Pure. */
export function slimPolicy(raw: MultiNetworkPolicy, logger?: Logger): CachedPolicy {
  const namespace = raw.metadata?.namespace ?? '';
  const selection = policySelection(raw, namespace);
  const kept = JSON.stringify(selection).length;
  const metadata = slimMeta(raw.metadata as CachedPolicy['metadata'], [], []);
  if (kept <= MAX_KEPT_SELECTION_BYTES) return { metadata, selection };
  const problem = `its podSelector and policy-for come to ${kept} bytes, more than the ${MAX_KEPT_SELECTION_BYTES} the webhook keeps for one policy`;
  logger?.warn({ policy: `${namespace}/${selection.name}`, bytes: kept }, 'MultiNetworkPolicy over budget: taken as selecting every pod on its networks');
  return { metadata, selection: { namespace, name: selection.name, ...(selection.networks !== undefined ? { networks: selection.networks } : {}), problem } };
}

/** Whether discovery lists the resource in the group version; false when the version is not served. */
async function served(client: Pick<KubeClient, 'get'>): Promise<boolean> {
  try {
    const list = await client.get<{ resources?: { name?: string }[] }>(`/apis/${MULTI_NETWORK_POLICY_GROUP}/${WATCHED_VERSION}`);
    return (list.resources ?? []).some((r) => r.name === MULTI_NETWORK_POLICY_RESOURCE);
  } catch (e) {
    if (isNotFound(e)) return false;
    throw e;
  }
}

export interface PolicyCacheOptions {
  readonly logger?: Logger;
  /** How often discovery is asked again while the API is not served (default 30 s). */
  readonly probeMs?: number;
  /** The informer's backoff (tests shorten it). */
  readonly minBackoffMs?: number;
  readonly maxBackoffMs?: number;
}

export function createPolicyCache(client: KubeClient, opts: PolicyCacheOptions = {}): PolicyCache {
  const probeMs = opts.probeMs ?? 30_000;
  const byNamespace = new Map<string, Map<string, PolicySelection>>();
  let informer: Informer<CachedPolicy> | undefined;
  let notServed = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const put = (p: CachedPolicy): void => {
    const { namespace, name } = p.selection;
    let names = byNamespace.get(namespace);
    if (names === undefined) byNamespace.set(namespace, (names = new Map<string, PolicySelection>()));
    names.set(name, p.selection);
  };
  const drop = (p: CachedPolicy): void => {
    const names = byNamespace.get(p.selection.namespace);
    names?.delete(p.selection.name);
    if (names?.size === 0) byNamespace.delete(p.selection.namespace);
  };

  const watch = (): void => {
    informer = createInformer<CachedPolicy>(client, {
      name: 'multi-networkpolicies',
      path: apiPath(MULTI_NETWORK_POLICY_GROUP, WATCHED_VERSION, MULTI_NETWORK_POLICY_RESOURCE),
      transform: (raw) => slimPolicy(raw as MultiNetworkPolicy, opts.logger),
      ...(opts.logger !== undefined ? { logger: opts.logger } : {}),
      ...(opts.minBackoffMs !== undefined ? { minBackoffMs: opts.minBackoffMs } : {}),
      ...(opts.maxBackoffMs !== undefined ? { maxBackoffMs: opts.maxBackoffMs } : {}),
    });
    informer.on({ add: put, update: (p, old) => (drop(old), put(p)), delete: (_p, stored) => drop(stored) });
    informer.start();
  };

  const probe = async (failures: number): Promise<void> => {
    if (stopped) return;
    let next = probeMs;
    try {
      if (await served(client)) {
        notServed = false;
        if (!stopped) watch();
        opts.logger?.info({ version: `${MULTI_NETWORK_POLICY_GROUP}/${WATCHED_VERSION}` }, 'watching MultiNetworkPolicies');
        return;
      }
      if (!notServed) opts.logger?.info({ retryInMs: probeMs }, 'MultiNetworkPolicy API not served: no pod is selected by a policy until it is');
      notServed = true;
    } catch (e) {
      next = Math.min(probeMs, 1_000 * 2 ** failures);
      opts.logger?.warn({ err: e, retryInMs: next }, 'could not tell whether the MultiNetworkPolicy API is served; retrying');
      failures += 1;
    }
    if (!stopped) timer = setTimeout(() => void probe(notServed ? 0 : failures), next);
  };

  return {
    name: 'multi-networkpolicy cache',
    start() {
      void probe(0);
    },
    stop() {
      stopped = true;
      clearTimeout(timer);
      informer?.stop();
    },
    state() {
      if (informer?.hasSynced() === true) return 'synced';
      return notServed ? 'not-served' : 'starting';
    },
    selecting(pod) {
      const names = byNamespace.get(pod.namespace);
      return names === undefined ? undefined : selectingPolicy(names.values(), pod);
    },
  };
}
