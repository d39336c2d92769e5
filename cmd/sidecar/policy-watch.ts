/**
 * What the sidecar watches for MultiNetworkPolicy, in its own namespace only (a policy selects
 * pods of its own namespace, and the controller writes each policy's address groups there):
 * - the MultiNetworkPolicies, in the newest version served (`v1beta2`, else `v1beta1`). The CRD is
 *   an optional component: while the API is not served (404) there is no policy, the sidecar says
 *   so once and asks again every `absentRetryMs`, and starts watching once it is installed;
 * - the address-group EndpointSlices (managed-by `multus-proxy-address-groups`,
 *   src/policy/address-group.ts).
 * Both are slimmed to what the resolver reads and held to a budget per object (policy-slim.ts).
 */
import { ADDRESS_GROUP_MANAGED_BY } from '../../src/policy/address-group.js';
import { MANAGED_BY_LABEL, MULTI_NETWORK_POLICY_GROUP, MULTI_NETWORK_POLICY_RESOURCE, MULTI_NETWORK_POLICY_VERSIONS } from '../../src/keys.js';
import type { Logger } from '../../src/log.js';
import { isNotFound, type KubeClient } from '../../src/kube/client.js';
import { createInformer, type Informer, type InformerOptions } from '../../src/kube/informer.js';
import { apiPath } from '../../src/kube/paths.js';
import { DEFAULT_POLICY_API_RETRY_MS } from '../../src/sidecar-contract.js';
import type { V1EndpointSlice } from '../../src/kube/types.js';
import { slimAddressGroupSlice, slimPolicy, type CachedPolicy } from './policy-slim.js';

/**
 * The versions the sidecar reads, newest first. Only v1beta2 has `endPort`: the apiserver prunes
 * it from an object read as v1beta1 (the schemas differ and there is no conversion webhook), so a
 * range read that way would be its first port alone. v1beta1 is read where v1beta2 is not served.
 */
export const POLICY_VERSIONS: readonly string[] = [...MULTI_NETWORK_POLICY_VERSIONS].reverse();
/** How soon a list that failed otherwise (no right yet, apiserver away) is tried again. */
const POLICY_LIST_RETRY_MS = 5_000;
/**
 * While the policy informer has not synced, ask this often whether the API is still served: a CRD
 * deleted between the probe and the informer's list leaves the informer retrying a 404, and the
 * first sync would wait out its whole hold for a list that cannot come.
 */
const UNSYNCED_RECHECK_MS = 1_000;

export const addressGroupSelector = `${MANAGED_BY_LABEL}=${ADDRESS_GROUP_MANAGED_BY}`;

export interface PolicyWatchDeps {
  readonly client: KubeClient;
  readonly log: Logger;
  readonly namespace: string;
  informerOptions(name: string): Partial<InformerOptions>;
  /** A policy or a group changed (or the policy API came or went). */
  onChange(): void;
  /** An address-group slice was added or updated (`gone` false), or deleted; before onChange. */
  onGroup?(slice: V1EndpointSlice, gone: boolean): void;
  /** Ask again this often whether the API is served (tests shorten it). */
  readonly absentRetryMs?: number;
}

type ApiState = 'unknown' | 'absent' | 'served';

export class PolicyWatch {
  private policyInformer: Informer<CachedPolicy> | undefined;
  private readonly groupInformer: Informer<V1EndpointSlice>;
  private api: ApiState = 'unknown';
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private lastProblem = '';
  /** The version listed last (the newest served), or the newest while none is. */
  private version = POLICY_VERSIONS[0] ?? 'v1beta2';

  constructor(private readonly d: PolicyWatchDeps) {
    this.groupInformer = createInformer<V1EndpointSlice>(d.client, {
      ...d.informerOptions('address-groups'),
      path: apiPath('discovery.k8s.io', 'v1', 'endpointslices', d.namespace),
      labelSelector: addressGroupSelector,
      transform: slimAddressGroupSlice,
    });
    const group = (slice: V1EndpointSlice, gone: boolean): void => {
      d.onGroup?.(slice, gone);
      d.onChange();
    };
    this.groupInformer.on({ add: (s) => group(s, false), update: (s) => group(s, false), delete: (s) => group(s, true) });
  }

  start(): void {
    this.groupInformer.start();
    void this.probe();
  }

  /** Whether the address groups have been listed. */
  groupsListed(): boolean {
    return this.groupInformer.hasSynced();
  }

  /** Whether the policies are known: listed, or the API is not served. */
  policiesKnown(): boolean {
    return this.api === 'absent' || this.policyInformer?.hasSynced() === true;
  }

  policies(): CachedPolicy[] {
    return this.policyInformer?.list() ?? [];
  }

  groups(): V1EndpointSlice[] {
    return this.groupInformer.list();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.policyInformer?.stop();
    this.groupInformer.stop();
  }

  private get path(): string {
    return apiPath(MULTI_NETWORK_POLICY_GROUP, this.version, MULTI_NETWORK_POLICY_RESOURCE, this.d.namespace);
  }

  /** One small list per version, newest first, until one is served; throws the last version's error. */
  private async listServed(): Promise<void> {
    for (const [i, v] of POLICY_VERSIONS.entries()) {
      this.version = v;
      try {
        await this.d.client.list(this.path, { limit: 1 });
        return;
      } catch (e) {
        if (!isNotFound(e) || i === POLICY_VERSIONS.length - 1) throw e;
      }
    }
  }

  /** Is the API served (and may we read it)? Then the informer, or a later try. */
  private async probe(): Promise<void> {
    if (this.stopped) return;
    try {
      await this.listServed();
    } catch (e) {
      if (this.stopped) return;
      const absent = isNotFound(e);
      if (absent) this.absent();
      else this.problem(e);
      const retry = this.d.absentRetryMs ?? DEFAULT_POLICY_API_RETRY_MS;
      this.timer = setTimeout(() => void this.probe(), absent ? retry : Math.min(retry, POLICY_LIST_RETRY_MS));
      this.timer.unref();
      return;
    }
    if (this.stopped) return;
    if (this.api === 'absent') this.d.log.info({ resource: this.path }, 'the MultiNetworkPolicy API is served now; watching policies');
    this.api = 'served';
    const informer = createInformer<CachedPolicy>(this.d.client, { ...this.d.informerOptions('multi-networkpolicies'), path: this.path, transform: slimPolicy });
    informer.on({ add: () => this.d.onChange(), update: () => this.d.onChange(), delete: () => this.d.onChange() });
    this.policyInformer = informer;
    informer.start();
    void informer.synced.then(() => this.d.onChange());
    this.timer = setTimeout(() => void this.recheck(informer), UNSYNCED_RECHECK_MS);
    this.timer.unref();
  }

  /** The informer has not synced yet: if the API went away meanwhile, back to 'absent' (no policy) and probing. */
  private async recheck(informer: Informer<CachedPolicy>): Promise<void> {
    if (this.stopped || informer !== this.policyInformer || informer.hasSynced()) return;
    let gone = false;
    try {
      await this.d.client.list(this.path, { limit: 1 });
    } catch (e) {
      gone = isNotFound(e);
    }
    if (this.stopped || informer !== this.policyInformer || informer.hasSynced()) return;
    if (!gone) {
      this.timer = setTimeout(() => void this.recheck(informer), UNSYNCED_RECHECK_MS);
      this.timer.unref();
      return;
    }
    informer.stop();
    this.policyInformer = undefined;
    this.absent();
    this.timer = setTimeout(() => void this.probe(), this.d.absentRetryMs ?? DEFAULT_POLICY_API_RETRY_MS);
    this.timer.unref();
  }

  private absent(): void {
    if (this.api !== 'absent')
      this.d.log.info(
        { resource: this.path, retryMs: this.d.absentRetryMs ?? DEFAULT_POLICY_API_RETRY_MS },
        'the MultiNetworkPolicy API is not served (its CRD is not installed): no policy applies; asking again periodically',
      );
    this.api = 'absent';
    this.d.onChange();
  }

  /** Any other failure (RBAC not yet updated, apiserver away): the policies stay unknown; said once per distinct error. */
  private problem(e: unknown): void {
    const msg = e instanceof Error ? e.message : String(e);
    if (msg === this.lastProblem) return;
    this.lastProblem = msg;
    this.d.log.warn({ resource: this.path, err: msg }, 'cannot list MultiNetworkPolicies; retrying (does the sidecar role allow get/list/watch of multi-networkpolicies?)');
  }
}
