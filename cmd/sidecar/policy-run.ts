/**
 * MultiNetworkPolicy in the sidecar's runtime: the pod's labels file, the policy and address-group
 * watches (policy-watch.ts), the compiled policy fed into the same desired state as the Services
 * (one transaction carries both), the first sync's hold, the back-end refusal, and what is said
 * about them (logs once per change, Events, metrics).
 *
 * - Hold (decision 0255): the first sync waits until the policies are listed and every address
 *   group of every policy that selects the pod is written for the policy's generation, at most
 *   `policyHoldMs`; then it goes ahead without the missing groups (their peers allow nothing) with a
 *   warning Event and log line naming the policies. Later syncs never wait.
 * - Refusal (decision 0256): a policy selects the pod and the back end cannot enforce policy
 *   (iptables): the sidecar is not ready while that lasts (a native sidecar holds the app), logs
 *   and writes an Event naming the setting and the fix. The Services are still served.
 */
import type { BackendKind, DesiredState } from '../../src/dataplane/index.js';
import { POLICY_BACKENDS, policyBackendRefusal, policyCapWarnings, policyDropCounters, policyRenderWarnings, withPodPolicy } from '../../src/dataplane/index.js';
import type { NetworkStatusEntry } from '../../src/annotations/network-status.js';
import type { KubeClient } from '../../src/kube/client.js';
import type { InformerOptions } from '../../src/kube/informer.js';
import type { Logger } from '../../src/log.js';
import { addressGroupView, endpointMacsProblem } from '../../src/policy/address-group.js';
import type { PodPolicy } from '../../src/policy/model.js';
import type { ContainerPort } from '../../src/policy/resolve.js';
import { OPTION_SOURCES, REASON_POLICY_BACKEND_REFUSED, REASON_POLICY_CAP_REACHED, REASON_POLICY_GROUPS_MISSING } from '../../src/sidecar-contract.js';
import type { SidecarMetrics } from './metrics.js';
import { watchPodInfoFile, type PodInfoFile } from './pod-file.js';
import { counterSource, policyDropReader } from './policy-drops.js';
import { PolicyInput, unwrittenGroups } from './policy-input.js';
import { policyRefusalOf } from './policy-slim.js';
import { PolicyWatch } from './policy-watch.js';
import type { Say } from './problems.js';
import type { LogOnce } from './sync-report.js';

/** The setting that picks the back end, as the refusal names it. */
const BACKEND_SETTING = `${OPTION_SOURCES.backend.env} (--${OPTION_SOURCES.backend.flag})`;

export interface PolicyOptions {
  readonly podNamespace: string;
  readonly podLabelsFile?: string | undefined;
  readonly podContainerPorts?: readonly ContainerPort[] | undefined;
  /** The first sync's hold at most (default DEFAULT_POLICY_HOLD_MS, set by the options). */
  readonly policyHoldMs: number;
  /** The rule back end in use; the refusal depends on it. */
  readonly backendKind: BackendKind;
  /** Re-read the labels file this often (tests shorten it). */
  readonly labelsPollMs?: number;
  /** Ask this often whether the MultiNetworkPolicy API is served (tests shorten it). */
  readonly policyApiRetryMs?: number;
  /** nfnl-counters, to read the drop counters without listing the table (policy-drops.ts); undefined: nft. */
  readonly countersReader?: string | undefined;
}

export interface PolicyDeps {
  readonly client: KubeClient;
  readonly log: Logger;
  readonly metrics: SidecarMetrics;
  readonly informerOptions: (name: string) => Partial<InformerOptions>;
  readonly say: (list: Say[]) => void;
  /** Something the policy depends on changed: a sync is due. */
  readonly markDirty: () => void;
  /** An address-group slice (namespace/name) was read: what is wrong with its endpoint-macs, or undefined (also when it was deleted). */
  readonly groupProblem?: (slice: string, problem: string | undefined) => void;
}

/** Distinct policies a compiled policy enforces (rules, isolation and failures). */
function enforcedPolicies(p: PodPolicy | undefined): number {
  const names = new Set<string>();
  for (const n of p?.networks ?? []) {
    for (const d of [n.ingress, n.egress]) {
      for (const r of d.rules) names.add(r.policy);
      for (const x of d.isolatedBy ?? []) names.add(x);
    }
    for (const f of n.failures) names.add(f.policy);
  }
  return names.size;
}

/** The Event message for rules left out past the cap (their render warnings), or undefined when none is. Pure. */
export function policyCapMessage(warnings: readonly string[]): string | undefined {
  const [first] = warnings;
  if (first === undefined) return undefined;
  const more = warnings.length > 1 ? ` (and ${warnings.length - 1} more rules; the sidecar's log lists each)` : '';
  return `${warnings.length} rule${warnings.length > 1 ? 's' : ''} of the policies that select this pod allow nothing, past the sidecar's bound on policy set elements: ${first}${more}`;
}

export class PolicyPart {
  private readonly input: PolicyInput;
  private readonly watch: PolicyWatch;
  private readonly labels: PodInfoFile | undefined;
  private refusal: string | undefined;
  private applied: PodPolicy | undefined;
  private capped: string | undefined;
  private wake: () => void = () => {};
  private stopped = false;

  constructor(
    private readonly o: PolicyOptions,
    private readonly d: PolicyDeps,
  ) {
    this.input = new PolicyInput(o.podNamespace, o.podContainerPorts ?? []);
    const changed = (): void => {
      this.input.changed();
      this.wake();
      d.markDirty();
    };
    this.watch = new PolicyWatch({
      client: d.client,
      log: d.log,
      namespace: o.podNamespace,
      informerOptions: d.informerOptions,
      onChange: changed,
      onGroup: (slice, gone) => d.groupProblem?.(`${slice.metadata?.namespace ?? ''}/${slice.metadata?.name ?? ''}`, gone ? undefined : endpointMacsProblem(slice)),
      ...(o.policyApiRetryMs !== undefined ? { absentRetryMs: o.policyApiRetryMs } : {}),
    });
    this.labels =
      o.podLabelsFile === undefined
        ? undefined
        : watchPodInfoFile({
            file: o.podLabelsFile,
            what: 'labels',
            log: d.log,
            ...(o.labelsPollMs !== undefined ? { pollMs: o.labelsPollMs } : {}),
            onChange: (labels) => {
              if (this.input.setLabels(labels)) changed();
            },
          });
    d.metrics.policyDrops(policyDropReader(() => (o.backendKind === 'nftables' ? policyDropCounters(this.applied) : []), d.log, Date.now, counterSource(o.countersReader, d.log)));
  }

  start(): void {
    this.labels?.start();
    this.watch.start();
  }

  /** Resolves once the labels file has been read (or there is none). */
  get labelsRead(): Promise<void> {
    return this.labels?.synced ?? Promise.resolve();
  }

  stop(): void {
    this.stopped = true;
    this.wake();
    this.labels?.stop();
    this.watch.stop();
  }

  /** Not ready while the back end refuses the policy that selects the pod; undefined otherwise. */
  notReady(): string | undefined {
    return this.refusal;
  }

  /** The desired state with the pod's compiled policy (none while the back end refuses it). */
  withPolicy(state: DesiredState, status: readonly NetworkStatusEntry[], logOnce: LogOnce): DesiredState {
    const policy = this.input.compute({ status, policies: () => this.watch.policies(), groups: () => this.watch.groups() });
    this.refuse(policyBackendRefusal(this.o.backendKind, policy, BACKEND_SETTING));
    const enforced = this.refusal === undefined ? policy : undefined;
    if (enforced !== this.applied) this.report(enforced, logOnce);
    this.applied = enforced;
    return withPodPolicy(state, enforced);
  }

  /** What is logged once per change: policies that failed (fail-closed), refused as over budget, and the render's warnings. */
  private report(policy: PodPolicy | undefined, logOnce: LogOnce): void {
    const failures = new Set((policy?.networks ?? []).flatMap((n) => n.failures.map((f) => f.message)));
    const refused = this.watch.policies().flatMap((p) => policyRefusalOf(p)?.message ?? []);
    const warnings = [...failures, ...refused, ...policyRenderWarnings(this.o.backendKind, policy)];
    logOnce(
      'policy',
      warnings.map((msg) => ({ level: 'warn', msg })),
    );
    this.d.metrics.policiesEnforced(enforcedPolicies(policy));
    const capped = policyCapMessage(policyCapWarnings(this.o.backendKind, policy));
    if (capped !== undefined && capped !== this.capped) this.d.say([{ type: 'Warning', reason: REASON_POLICY_CAP_REACHED, message: capped }]);
    this.capped = capped;
  }

  private refuse(message: string | undefined): void {
    if (message === this.refusal) return;
    if (message !== undefined) {
      this.d.log.error({ problem: message }, message);
      this.d.say([{ type: 'Warning', reason: REASON_POLICY_BACKEND_REFUSED, message: `${message}; the sidecar stays not ready until then` }]);
    } else this.d.log.info('no policy the back end refuses selects this pod any more');
    this.refusal = message;
  }

  /**
   * The first sync's hold: until the policies are known and the groups of every selecting policy
   * are written for its generation, or `policyHoldMs` passed (then a warning names the policies).
   */
  async hold(status: () => readonly NetworkStatusEntry[]): Promise<void> {
    const deadline = Date.now() + this.o.policyHoldMs;
    let told = '';
    for (;;) {
      // Armed before the look, so a change between the look and the wait is not lost.
      const woken = new Promise<void>((resolve) => (this.wake = resolve));
      const known = this.watch.policiesKnown() && this.watch.groupsListed();
      // A back end that cannot enforce policy needs the policies (to refuse them), not their groups.
      const enforces = POLICY_BACKENDS.includes(this.o.backendKind);
      const waiting = !known ? undefined : enforces ? unwrittenGroups(this.input.pod(status()), this.watch.policies(), addressGroupView(this.watch.groups())) : [];
      if (this.stopped || waiting?.length === 0) return;
      const what = waiting === undefined ? 'the MultiNetworkPolicies and address groups of this namespace to be listed' : `address groups of ${waiting.map((w) => w.policy).join(', ')}`;
      const left = deadline - Date.now();
      if (left <= 0) return this.goAhead(waiting);
      if (what !== told) this.d.log.info({ waitMs: left }, `first sync waits for ${what}`);
      told = what;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([woken, new Promise<void>((resolve) => (timer = setTimeout(resolve, left)))]);
      clearTimeout(timer);
    }
  }

  private goAhead(waiting: ReturnType<typeof unwrittenGroups> | undefined): void {
    const ms = this.o.policyHoldMs;
    const message =
      waiting === undefined
        ? `the MultiNetworkPolicies of namespace ${this.o.podNamespace} could not be listed within ${ms} ms; the first sync goes ahead without them (no policy enforced until they are)`
        : waiting
            .map(
              (w) =>
                `MultiNetworkPolicy ${w.policy}: the controller has not written ${w.missing} of its ${w.queries} address groups for generation ${w.generation ?? '(none)'} within ${ms} ms; the first sync goes ahead without them, so the peers they would allow are denied until they are written (is the multus-proxy controller running?)`,
            )
            .join('; ');
    this.d.log.warn({ policies: waiting?.map((w) => w.policy) ?? [] }, message);
    this.d.say([{ type: 'Warning', reason: REASON_POLICY_GROUPS_MISSING, message }]);
  }
}
