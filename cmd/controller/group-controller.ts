/**
 * MultiNetworkPolicy address groups as their own small controller (beside the Service reconciler,
 * like the sidecar RBAC and NetService parts): its own fair queue keyed by policy
 * (`<namespace>/<name>`), its own workers, the same fenced writer. Level-based: a reconcile reads
 * the caches (policies, pods, namespaces, group slices), never the event, and writes only the
 * planner's diff (group-plan.ts). Only the leader's workers run; before that, events only fill the
 * caches.
 *
 * - The MultiNetworkPolicy API may not be served (the CRD is optional): that is logged once, and
 *   probed again every `probeMs` until it is, then the policies are watched. Until the policy cache
 *   has listed, nothing is reconciled (a group whose policy is merely not listed yet must not go).
 * - A policy that fails checkPolicy: its groups go and a Warning Event on it names the problem (the
 *   sidecars isolate the pods it selects themselves).
 * - Events → keys: a pod change enqueues the policies with a query whose scope and pod selector
 *   match its old or new labels, and those of its namespace that select it (sidecar report); a
 *   namespace's label change the policies with a namespaceSelector matching its old or new labels;
 *   a group slice change its policy (our own write's echo aside).
 * - Pods a policy selects on one of its networks that have no sidecar: a Warning Event on each pod
 *   (through the one bounded Event queue) and a gauge per policy.
 */
import { matchesSelector } from '../../src/annotations/label-selector.js';
import { networkKey, type NetworkRef } from '../../src/annotations/service-network.js';
import { checkLabelValue } from '../../src/annotations/names.js';
import type { ReadableIpam, NadIpam } from '../../src/annotations/nad-ipam.js';
import { getIfExists, isConflict, isInvalid, isNotFound, type KubeClient } from '../../src/kube/client.js';
import { createInformer, type Informer } from '../../src/kube/informer.js';
import { apiPath } from '../../src/kube/paths.js';
import type { KubeObject, V1EndpointSlice, V1Namespace, V1Pod } from '../../src/kube/types.js';
import type { Logger } from '../../src/log.js';
import { MULTI_NETWORK_POLICY_GROUP, MULTI_NETWORK_POLICY_KIND, MULTI_NETWORK_POLICY_RESOURCE, NETWORK_STATUS_ANNOTATION, SIDECAR_CONTAINER_NAME } from '../../src/keys.js';
import type { InputError, Result } from '../../src/result.js';
import { ADDRESS_GROUP_POLICY_LABEL, policyPeerQueries } from '../../src/policy/address-group.js';
import { describePolicy } from '../../src/policy/api.js';
import type { PeerQuery } from '../../src/policy/resolve.js';
import type { ParsedSelector } from '../../src/policy/selector.js';
import { checkPolicy } from '../../src/policy/validate.js';
import type { AddressPolicy } from './address-policy.js';
import type { EventRecorder, EventSubject } from './events.js';
import { FairQueue } from './fair-queue.js';
import { ADDRESS_GROUP_BUDGET, planAddressGroups, type GroupPolicy, type OverBudgetGroup } from './group-plan.js';
import type { ControllerMetrics } from './metrics.js';
import { isPodEligible, podNetworkStatusOf } from './pod-endpoints.js';
import { isEmptyDiff, type SliceDiff } from './plan.js';
import { RetryableWriteError } from './reconcile.js';
import { slimPolicy, type SlimPolicy } from './slim.js';
import { SliceTracker } from './tracker.js';

export const POLICY_API_VERSION = `${MULTI_NETWORK_POLICY_GROUP}/v1beta1`;
/** A policy that fails its checks: its groups are removed; the message names the field and the fix. */
export const POLICY_INVALID_EVENT_REASON = 'PolicyInvalid';
/** A peer (one address group) over its budget: not written, so the sidecars allow none of its pods. */
export const ADDRESS_GROUP_OVER_BUDGET_EVENT_REASON = 'AddressGroupOverBudget';
/** The apiserver refused a group slice (422), or the policy's name cannot be a label value. */
export const ADDRESS_GROUP_REFUSED_EVENT_REASON = 'AddressGroupRefused';
/** On a pod that a policy selects on one of its networks but that runs no sidecar: nothing enforces the policy there. */
export const POLICY_WITHOUT_SIDECAR_EVENT_REASON = 'PolicyWithoutSidecar';

/** Pod Events of one reconcile at most (the rest wait for the next one; the gauge counts them all). */
const MAX_POD_EVENTS_PER_RECONCILE = 20;

export type PolicyReconcileResult = 'unchanged' | 'written' | 'invalid' | 'stale' | 'waiting';

export interface GroupControllerDeps {
  /** The fenced writer: a write outside leadership is refused there. */
  readonly client: KubeClient;
  /** The unfenced reader (API discovery and the policy watch). */
  readonly reader: KubeClient;
  readonly logger: Logger;
  readonly metrics: ControllerMetrics;
  readonly events: EventRecorder;
  readonly mayWrite: () => boolean;
  readonly maxEndpointsPerSlice: number;
  /** Only this namespace's policies (the controller's --namespace); all when undefined. */
  readonly namespace?: string;
  /**
   * The cached pods of a namespace that a selector matches: the Service reconciler's pod index,
   * kept current before this controller's pod handler runs (one index per process).
   */
  readonly selectPods: (namespace: string, selector: ParsedSelector) => V1Pod[];
  /** What may be published (the nodes' addresses), as for Service slices. */
  readonly addressPolicy: () => AddressPolicy;
  readonly nadIpam?: (ref: NetworkRef) => Result<NadIpam, InputError> | undefined;
  readonly workers?: number;
  /** Addresses per group (ADDRESS_GROUP_BUDGET.addresses when absent). */
  readonly maxAddressesPerGroup?: number;
  /** The longest wait between two probes of an unserved MultiNetworkPolicy API (the first is 1 s, doubling). */
  readonly probeMs?: number;
}

export interface GroupController {
  onPod(pod: V1Pod | undefined, old: V1Pod | undefined): void;
  onNamespace(n: V1Namespace | undefined, old: V1Namespace | undefined): void;
  onSlice(slice: V1EndpointSlice, deleted: boolean): void;
  /** Starts probing for the policy API (every replica: standbys keep a warm cache). */
  watch(): void;
  /** Leadership: start the workers and reconcile every policy once. */
  startWorking(): void;
  resync(): void;
  stop(): void;
  idle(): boolean;
  /** For tests: one reconcile. */
  reconcile(key: string): Promise<PolicyReconcileResult>;
}

type Labels = Readonly<Record<string, string>>;

/** What a pod change must move for address groups and the sidecar report. */
export function groupPodChangeMatters(old: V1Pod, pod: V1Pod): boolean {
  const view = (p: V1Pod): string =>
    JSON.stringify([
      p.metadata?.uid,
      p.metadata?.labels ?? {},
      p.metadata?.annotations?.[NETWORK_STATUS_ANNOTATION],
      p.status?.phase,
      p.spec?.nodeName,
      [...(p.spec?.initContainers ?? []), ...(p.spec?.containers ?? [])].map((c) => [c.name, c.ports ?? []]),
    ]);
  return view(old) !== view(pod);
}

/** Whether the pod runs the sidecar (a container or native sidecar named multus-proxy). */
export function hasSidecar(pod: V1Pod): boolean {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].some((c) => c.name === SIDECAR_CONTAINER_NAME);
}

/** The networks (keys) of `networks` the pod's network-status says it is attached to. */
function attachedTo(pod: V1Pod, networks: readonly NetworkRef[]): string[] {
  const status = podNetworkStatusOf(pod);
  if (status === undefined || !status.ok) return [];
  return networks.filter((n) => status.value.some((e) => e.namespace === n.namespace && e.nad === n.name)).map(networkKey);
}

function policySubject(p: SlimPolicy): EventSubject {
  return { apiVersion: p.apiVersion ?? POLICY_API_VERSION, kind: MULTI_NETWORK_POLICY_KIND, name: p.metadata?.name ?? '', namespace: p.metadata?.namespace ?? '', uid: p.metadata?.uid ?? '' };
}

function podSubject(p: V1Pod): EventSubject {
  return { apiVersion: 'v1', kind: 'Pod', name: p.metadata?.name ?? '', namespace: p.metadata?.namespace ?? '', uid: p.metadata?.uid ?? '' };
}

/** A policy as the reconcile reads it: checked once per cached object. */
interface Compiled {
  readonly queries: readonly PeerQuery[];
  /** Which of the namespace's pods it selects, on which networks (for the sidecar report); undefined when unknown. */
  readonly podSelector?: ParsedSelector;
  readonly networks?: readonly NetworkRef[];
  readonly problem?: string;
}

function compile(p: SlimPolicy): Compiled {
  if (p.overBudget !== undefined) return { queries: [], problem: p.overBudget.message };
  const name = p.metadata?.name ?? '';
  const labelWhy = checkLabelValue(name);
  const checked = checkPolicy(p);
  if (!checked.ok) {
    const e = checked.error;
    return { queries: [], problem: e.message, ...(e.podSelector !== undefined ? { podSelector: e.podSelector } : {}), ...(e.networks !== undefined ? { networks: e.networks } : {}) };
  }
  const c = checked.value;
  const base = { podSelector: c.podSelector, networks: c.networks ?? [] };
  if (labelWhy !== undefined) {
    return {
      ...base,
      queries: [],
      problem: `${describePolicy(p)}: its name, as the value of the label ${ADDRESS_GROUP_POLICY_LABEL} on its address groups, ${labelWhy}; the sidecars allow none of its pod peers until it is renamed to at most 63 characters`,
    };
  }
  return { ...base, queries: policyPeerQueries(c) };
}

/** The policies, namespaces and group slices as the reconcile reads them, and which policies an event concerns. */
export class GroupCaches {
  readonly namespaces = new Map<string, Labels>();
  readonly policies = new Map<string, SlimPolicy>();
  readonly slices = new Map<string, Map<string, V1EndpointSlice>>();
  private readonly compiled = new WeakMap<SlimPolicy, Compiled>();

  constructor(readonly selectPods: (namespace: string, selector: ParsedSelector) => V1Pod[]) {}

  compiledOf(p: SlimPolicy): Compiled {
    let c = this.compiled.get(p);
    if (c === undefined) this.compiled.set(p, (c = compile(p)));
    return c;
  }

  allKeys(): string[] {
    return [...new Set([...this.policies.keys(), ...this.slices.keys()])];
  }

  private scopeMatches(q: PeerQuery, ns: string, nsLabels: Labels | undefined): boolean {
    return q.namespaces.kind === 'namespace' ? q.namespaces.name === ns : nsLabels !== undefined && matchesSelector(q.namespaces.selector, nsLabels);
  }

  /** The policies a pod with these labels in `ns` concerns: as a peer of a query, or as selected in its own namespace. */
  policiesOfPod(ns: string, labels: Labels | undefined, out: Set<string>): void {
    const nsLabels = this.namespaces.get(ns);
    for (const [key, p] of this.policies) {
      const c = this.compiledOf(p);
      if (p.metadata?.namespace === ns && (c.podSelector === undefined || matchesSelector(c.podSelector, labels))) out.add(key);
      else if (c.queries.some((q) => this.scopeMatches(q, ns, nsLabels) && matchesSelector(q.pods, labels))) out.add(key);
    }
  }

  /** The policies with a namespaceSelector peer that matches either label set. */
  policiesOfNamespace(before: Labels, after: Labels): string[] {
    const out: string[] = [];
    for (const [key, p] of this.policies) {
      const touched = this.compiledOf(p).queries.some((q) => q.namespaces.kind === 'selector' && (matchesSelector(q.namespaces.selector, before) || matchesSelector(q.namespaces.selector, after)));
      if (touched) out.push(key);
    }
    return out;
  }

  select(q: PeerQuery): V1Pod[] {
    if (q.namespaces.kind === 'namespace') return this.selectPods(q.namespaces.name, q.pods);
    const sel = q.namespaces.selector;
    return [...this.namespaces].filter(([, labels]) => matchesSelector(sel, labels)).flatMap(([ns]) => this.selectPods(ns, q.pods));
  }

  /** Files a group slice under its policy; false when nothing is known of it (no policy label). */
  setSlice(slice: V1EndpointSlice, deleted: boolean): string | undefined {
    const policy = slice.metadata?.labels?.[ADDRESS_GROUP_POLICY_LABEL];
    if (policy === undefined) return undefined;
    const key = `${slice.metadata?.namespace ?? ''}/${policy}`;
    const name = slice.metadata?.name ?? '';
    let m = this.slices.get(key);
    if (deleted) {
      m?.delete(name);
      if (m?.size === 0) this.slices.delete(key);
    } else {
      if (m === undefined) this.slices.set(key, (m = new Map<string, V1EndpointSlice>()));
      m.set(name, slice);
    }
    return key;
  }
}

class AddressGroups implements GroupController {
  private readonly queue = new FairQueue({ baseDelayMs: 100, maxDelayMs: 60_000 });
  private readonly c: GroupCaches;
  private readonly tracker = new SliceTracker();
  /** Keys whose reconcile waits for the echo of our own write (then enqueued at once). */
  private readonly waitingForCache = new Set<string>();
  private readonly perGroup: number;
  private informer: Informer<KubeObject> | undefined;
  private policiesSynced = false;
  private working = false;
  private probe: NodeJS.Timeout | undefined;
  private stopped = false;
  private logged = false;
  private probes = 0;

  constructor(private readonly d: GroupControllerDeps) {
    this.perGroup = d.maxAddressesPerGroup ?? ADDRESS_GROUP_BUDGET.addresses;
    this.c = new GroupCaches(d.selectPods);
  }

  private enqueue(key: string): void {
    if (this.working && this.policiesSynced) this.queue.add(key);
  }

  private ipamRanges(queries: readonly PeerQuery[]): Map<string, ReadableIpam> {
    const out = new Map<string, ReadableIpam>();
    for (const q of queries) {
      const slash = q.network.indexOf('/');
      const ipam = this.d.nadIpam?.({ namespace: q.network.slice(0, slash), name: q.network.slice(slash + 1) });
      // Unreadable or malformed: published without the range check, as for Service slices.
      if (ipam?.ok === true && ipam.value.readable) out.set(q.network, ipam.value);
    }
    return out;
  }

  /** Selected pods without a sidecar: the gauge, and a Warning on each (a bounded number per reconcile). */
  private reportWithoutSidecar(key: string, p: SlimPolicy, c: Compiled): void {
    const gauge = this.d.metrics.policyPodsWithoutSidecar;
    const ns = p.metadata?.namespace ?? '';
    const bare =
      c.podSelector === undefined || c.networks === undefined
        ? []
        : this.c
            .selectPods(ns, c.podSelector)
            .filter((pod) => isPodEligible(pod) && !hasSidecar(pod))
            .map((pod) => ({ pod, on: attachedTo(pod, c.networks ?? []) }))
            .filter((x) => x.on.length > 0);
    if (bare.length === 0) gauge.remove({ policy: key });
    else gauge.set({ policy: key }, bare.length);
    for (const { pod, on } of bare.slice(0, MAX_POD_EVENTS_PER_RECONCILE)) {
      const message = `Pod ${ns}/${pod.metadata?.name ?? ''}: ${describePolicy(p)} selects it on ${on.join(', ')}, but it runs no multus-proxy sidecar, so nothing enforces the policy there; recreate the pod in a namespace labelled for injection so the webhook injects the sidecar`;
      this.d.events.record(podSubject(pod), 'Warning', `policy|${key}`, POLICY_WITHOUT_SIDECAR_EVENT_REASON, message);
    }
  }

  private reportOver(key: string, p: SlimPolicy, over: readonly OverBudgetGroup[]): void {
    if (over.length === 0) this.d.metrics.policyGroupsOverBudget.remove({ policy: key });
    else this.d.metrics.policyGroupsOverBudget.set({ policy: key }, over.length);
    for (const o of over) this.d.events.record(policySubject(p), 'Warning', `over|${o.key}`, ADDRESS_GROUP_OVER_BUDGET_EVENT_REASON, o.message);
  }

  private guard(): void {
    if (!this.d.mayWrite()) throw new Error('not the leader any more: write refused');
  }

  private async send(key: string, p: SlimPolicy | undefined, verb: 'create' | 'update', s: V1EndpointSlice): Promise<void> {
    const ns = key.slice(0, key.indexOf('/'));
    const collection = apiPath('discovery.k8s.io', 'v1', 'endpointslices', ns);
    this.guard();
    try {
      const out = verb === 'create' ? await this.d.client.create<V1EndpointSlice>(collection, s) : await this.d.client.replace<V1EndpointSlice>(`${collection}/${s.metadata?.name ?? ''}`, s);
      this.tracker.written(key, out.metadata?.name ?? '', out.metadata?.resourceVersion, Date.now(), out);
      this.d.metrics.addressGroupWrites.inc({ verb });
    } catch (e) {
      if (isConflict(e) || isNotFound(e)) throw new RetryableWriteError(`${verb} of an address-group EndpointSlice of ${key}: ${(e as Error).message}`);
      if (isInvalid(e) && p !== undefined) {
        const message = `${describePolicy(p)}: the apiserver refused an address-group EndpointSlice (${e.apiMessage}); its peers are not allowed until this is fixed`;
        this.d.events.record(policySubject(p), 'Warning', 'refused', ADDRESS_GROUP_REFUSED_EVENT_REASON, message);
      }
      throw e;
    }
  }

  private async write(key: string, p: SlimPolicy | undefined, diff: SliceDiff): Promise<void> {
    const collection = apiPath('discovery.k8s.io', 'v1', 'endpointslices', key.slice(0, key.indexOf('/')));
    // Updates and creates before deletes: a pod moving between slices never vanishes in between.
    for (const s of diff.update) await this.send(key, p, 'update', s);
    for (const s of diff.create) await this.send(key, p, 'create', s);
    for (const s of diff.delete) {
      this.guard();
      try {
        await this.d.client.delete(`${collection}/${s.metadata?.name ?? ''}`);
      } catch (e) {
        if (!isNotFound(e)) throw e;
      }
      this.tracker.deleted(key, s.metadata?.name ?? '');
      this.d.metrics.addressGroupWrites.inc({ verb: 'delete' });
    }
  }

  /** The policy's diff, with its reports; `invalid` when it fails its checks (its groups go). */
  private plan(key: string, p: SlimPolicy, existing: V1EndpointSlice[]): { diff: SliceDiff; invalid: boolean } {
    const c = this.c.compiledOf(p);
    this.reportWithoutSidecar(key, p, c);
    if (c.problem !== undefined) {
      this.d.events.record(
        policySubject(p),
        'Warning',
        c.problem,
        POLICY_INVALID_EVENT_REASON,
        `${c.problem}. Its address groups are removed; the sidecars isolate the pods it selects until it is fixed`,
      );
      this.d.metrics.policyGroupsOverBudget.remove({ policy: key });
      return { diff: { create: [], update: [], delete: existing }, invalid: true };
    }
    const m = p.metadata ?? {};
    const policy: GroupPolicy = {
      name: m.name ?? '',
      namespace: m.namespace ?? '',
      uid: m.uid ?? '',
      generation: m.generation ?? 0,
      apiVersion: p.apiVersion ?? POLICY_API_VERSION,
      deleting: m.deletionTimestamp !== undefined && m.deletionTimestamp !== null,
    };
    const plan = planAddressGroups({
      policy,
      queries: c.queries.map((query) => ({ query, pods: this.c.select(query) })),
      existing,
      addressPolicy: { ...this.d.addressPolicy(), ipam: this.ipamRanges(c.queries) },
      maxPerSlice: this.d.maxEndpointsPerSlice,
      budget: { addresses: this.perGroup, policyAddresses: Math.max(this.perGroup, ADDRESS_GROUP_BUDGET.policyAddresses) },
    });
    this.reportOver(key, p, plan.over);
    if (plan.badMacs !== undefined)
      this.d.logger.warn({ policy: key, problems: plan.badMacs.slice(0, 10), count: plan.badMacs.length }, 'address groups: MACs refused, those peers matched by address alone');
    return { diff: plan.diff, invalid: false };
  }

  async reconcile(key: string): Promise<PolicyReconcileResult> {
    if (!this.policiesSynced) return 'waiting';
    const cached = [...(this.c.slices.get(key)?.values() ?? [])];
    // Our last writes may not be in the cache yet: planned from the server's answers to them (what
    // their echoes will carry; a write by anyone else since makes the next update conflict and
    // retry), so a peer change right after a write does not wait for the echo. Only a write known
    // by its resourceVersion alone waits, and its echo enqueues the key again (onSlice).
    const existing = this.tracker.overlay(key, cached);
    if (existing === undefined) {
      this.waitingForCache.add(key);
      this.queue.addAfter(key, 1000);
      return 'stale';
    }
    this.waitingForCache.delete(key);
    const p = this.c.policies.get(key);
    if (p === undefined) {
      this.d.metrics.policyPodsWithoutSidecar.remove({ policy: key });
      this.d.metrics.policyGroupsOverBudget.remove({ policy: key });
    }
    const { diff, invalid } = p === undefined ? { diff: { create: [], update: [], delete: existing }, invalid: false } : this.plan(key, p, existing);
    if (isEmptyDiff(diff)) return invalid ? 'invalid' : 'unchanged';
    await this.write(key, p, diff);
    this.d.logger.info({ policy: key, created: diff.create.length, updated: diff.update.length, deleted: diff.delete.length }, 'address groups written');
    return invalid ? 'invalid' : 'written';
  }

  private async worker(): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      try {
        if (this.d.mayWrite()) this.d.metrics.policyReconciles.inc({ result: await this.reconcile(key) });
        this.queue.forget(key);
      } catch (e) {
        this.d.metrics.policyReconciles.inc({ result: 'error' });
        this.d.metrics.errors.inc({ stage: 'address-groups' });
        const delay = this.working ? this.queue.addRateLimited(key) : 0;
        const level = e instanceof RetryableWriteError ? 'info' : 'warn';
        this.d.logger[level]({ policy: key, err: e instanceof Error ? e.message : String(e), retryInMs: delay }, 'address-group reconcile failed; retrying');
      } finally {
        this.queue.done(key);
      }
    }
  }

  private onPolicy(obj: KubeObject, deleted: boolean): void {
    const p = obj as SlimPolicy;
    const key = `${p.metadata?.namespace ?? ''}/${p.metadata?.name ?? ''}`;
    if (deleted) this.c.policies.delete(key);
    else this.c.policies.set(key, p);
    this.enqueue(key);
  }

  private startInformer(): void {
    const path = apiPath(MULTI_NETWORK_POLICY_GROUP, 'v1beta1', MULTI_NETWORK_POLICY_RESOURCE, this.d.namespace);
    const informer = createInformer<KubeObject>(this.d.reader, { logger: this.d.logger, name: 'multi-networkpolicies', path, transform: (o) => slimPolicy(o as never) as unknown as KubeObject });
    this.informer = informer;
    informer.on({ add: (o) => this.onPolicy(o, false), update: (o) => this.onPolicy(o, false), delete: (o) => this.onPolicy(o, true) });
    informer.start();
    void informer.synced.then(() => {
      this.policiesSynced = true;
      this.d.logger.info({ policies: this.c.policies.size }, 'MultiNetworkPolicies listed; address groups are reconciled');
      if (this.working) for (const k of this.c.allKeys()) this.queue.add(k);
    });
  }

  /** Whether the apiserver serves the policy resource (k8s.cni.cncf.io/v1beta1 multi-networkpolicies). */
  private async served(): Promise<boolean> {
    try {
      const list = await getIfExists<{ resources?: { name?: string }[] }>(this.d.reader, `/apis/${MULTI_NETWORK_POLICY_GROUP}/v1beta1`);
      return (list?.resources ?? []).some((r) => r.name === MULTI_NETWORK_POLICY_RESOURCE);
    } catch {
      return false;
    }
  }

  private async probeOnce(): Promise<void> {
    if (this.stopped) return;
    if (await this.served()) {
      if (!this.stopped) this.startInformer();
      return;
    }
    const max = this.d.probeMs ?? 30_000;
    if (!this.logged) {
      this.d.logger.info(
        `the MultiNetworkPolicy API (${POLICY_API_VERSION} ${MULTI_NETWORK_POLICY_RESOURCE}) is not served: no address groups are written; checking again, at least every ${Math.round(max / 1000)} s`,
      );
      this.logged = true;
    }
    this.probes += 1;
    if (!this.stopped) this.probe = setTimeout(() => void this.probeOnce(), Math.min(max, 1000 * 2 ** Math.min(this.probes - 1, 10)));
  }

  onPod(pod: V1Pod | undefined, old: V1Pod | undefined): void {
    const ref = pod ?? old;
    if (ref === undefined) return;
    const ns = ref.metadata?.namespace ?? '';
    if (!this.working || !this.policiesSynced || (pod !== undefined && old !== undefined && !groupPodChangeMatters(old, pod))) return;
    const keys = new Set<string>();
    if (pod !== undefined) this.c.policiesOfPod(ns, pod.metadata?.labels, keys);
    if (old !== undefined) this.c.policiesOfPod(ns, old.metadata?.labels, keys);
    for (const k of keys) this.queue.add(k);
  }

  onNamespace(n: V1Namespace | undefined, old: V1Namespace | undefined): void {
    const name = (n ?? old)?.metadata?.name ?? '';
    if (n === undefined) this.c.namespaces.delete(name);
    else this.c.namespaces.set(name, { ...(n.metadata?.labels ?? {}) });
    if (!this.working || !this.policiesSynced) return;
    const before = old?.metadata?.labels ?? {};
    const after = n?.metadata?.labels ?? {};
    if (n !== undefined && old !== undefined && JSON.stringify(before) === JSON.stringify(after)) return;
    for (const key of this.c.policiesOfNamespace(before, after)) this.queue.add(key);
  }

  onSlice(slice: V1EndpointSlice, deleted: boolean): void {
    const key = this.c.setSlice(slice, deleted);
    if (key === undefined) return;
    const name = slice.metadata?.name ?? '';
    if (deleted) this.tracker.observedDelete(key, name);
    else if (this.tracker.observed(key, name, slice.metadata?.resourceVersion) === 'own' && !this.waitingForCache.has(key)) return;
    this.enqueue(key);
  }

  watch(): void {
    void this.probeOnce();
  }

  startWorking(): void {
    if (this.working) return;
    this.working = true;
    if (this.policiesSynced) for (const k of this.c.allKeys()) this.queue.add(k);
    for (let i = 0; i < (this.d.workers ?? 2); i++) void this.worker();
  }

  resync(): void {
    for (const k of this.c.allKeys()) this.enqueue(k);
  }

  stop(): void {
    this.stopped = true;
    this.working = false;
    if (this.probe !== undefined) clearTimeout(this.probe);
    this.queue.shutdown();
    this.informer?.stop();
  }

  idle(): boolean {
    return this.queue.pending() === 0;
  }
}

export function createGroupController(d: GroupControllerDeps): GroupController {
  return new AddressGroups(d);
}
