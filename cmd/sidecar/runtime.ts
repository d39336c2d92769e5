/**
 * The sidecar's IO shell: three informers (its own pod, the opted-in Services, the slices of its
 * networks) feed caches; every change only marks the state dirty, and the sync loop turns the
 * informers' events into a DesiredState (cmd/sidecar/state-feed.ts: the events since the last sync
 * stepped through src/dataplane/incremental.ts StateMemo, so a sync costs what changed, not the
 * number of Services) and hands it to the dataplane.
 *
 * What it watches, always with server-side selectors, so a sidecar receives only what concerns it:
 * - its pod's annotations (service-network and network-status may change while it runs: dynamic
 *   attachments): from the downwardAPI file the webhook mounts (`annotationsFile`, cmd/sidecar/pod-file.ts),
 *   so its ServiceAccount needs no right to read pods; without that option (a sidecar run by hand),
 *   a watch on `metadata.name=<POD_NAME>` in its namespace;
 * - Services labelled `service.kubernetes.io/service-proxy-name=multus-proxy`, all namespaces (a
 *   NAD may be used across namespaces);
 * - EndpointSlices managed by `multus-proxy-controller` whose `multus-proxy/network` is one of the
 *   pod's networks. It never lists the cluster's slices. When the pod's networks change, a new slice
 *   informer with the new selector is started, and the old one is stopped only once the new one has
 *   synced, so no rules are lost in between;
 * - MultiNetworkPolicies and their address groups in its own namespace, and its labels from the
 *   downwardAPI labels file (cmd/sidecar/policy-run.ts): the compiled policy goes into the same
 *   desired state as the Services, so one transaction carries both; the first sync waits for the
 *   groups of the policies that select the pod (bounded).
 */
import type { ExternalIPPolicy } from '../../src/external-ips.js';
import { networkKey } from '../../src/annotations/service-network.js';
import { PROXY_NAME, PROXY_NAME_LABEL } from '../../src/keys.js';
import type { Logger } from '../../src/log.js';
import type { KubeClient } from '../../src/kube/client.js';
import { createInformer, type InformerOptions } from '../../src/kube/informer.js';
import { apiPath } from '../../src/kube/paths.js';
import { objectKey, type V1Service } from '../../src/kube/types.js';
import type { Dataplane } from '../../src/dataplane/index.js';
import type { SidecarMetrics } from './metrics.js';
import { networkLabelValues, podInterfaces } from '../../src/dataplane/index.js';
import { createSyncLoop, sliceTriggerMs, type SyncLoop, type SyncLoopOptions } from '../../src/dataplane/index.js';
import { sameState, stateSize } from '../../src/dataplane/index.js';
import { LAST_CHANGE_TRIGGER_TIME_ANNOTATION, slimService } from './slim.js';
import { ProblemState, type Say } from './problems.js';
import { StateFeed } from './state-feed.js';
import { DEFAULT_MAX_SERVICES_PER_NETWORK, DEFAULT_POLICY_HOLD_MS, type SourceGuardMode } from '../../src/sidecar-contract.js';
import { PodInput, podSource, type PodSource } from './pod-input.js';
import { SliceWatch } from './slice-watch.js';
import { onceLogger, SyncReporter } from './sync-report.js';
import { CapReporter } from './cap-report.js';
import { PolicyPart, type PolicyOptions } from './policy-run.js';
import { SourceGuard, type GuardTool } from './source-guard.js';
import type { DesiredState } from '../../src/dataplane/index.js';

export { sliceSelector } from './slice-watch.js';

/** A sync that keeps failing is told again at most this often (the first failure at once). */
const PROBLEM_REPEAT_MS = 5 * 60_000;

// Defined next to the slice transform that must keep it; re-exported where it always was.
export { LAST_CHANGE_TRIGGER_TIME_ANNOTATION };

/** The part of the dataplane the runtime drives (cleanup is main's job, after stop()). */
export type DataplaneSync = Pick<Dataplane, 'sync' | 'checkDrift'>;

export interface RuntimeOptions extends SyncLoopOptions {
  readonly podName: string;
  readonly podNamespace: string;
  /** The downwardAPI file of the pod's annotations; unset: the pod is watched through the API. */
  readonly annotationsFile?: string | undefined;
  /** Re-read that file this often besides watching it (tests shorten it). */
  readonly annotationsPollMs?: number;
  /** Services served per network at most (src/service-cap.ts); unset: the default. */
  readonly maxServicesPerNetwork?: number;
  /** Passed to every informer (tests shorten backoffs). */
  readonly informer?: Pick<InformerOptions, 'watchdogMs' | 'minBackoffMs' | 'maxBackoffMs'>;
  /** This pod's node (NODE_NAME) and zone (NODE_ZONE): internalTrafficPolicy Local and topology hints. Unset: no endpoint is local, no zone. */
  readonly nodeName?: string;
  readonly nodeZone?: string;
  /** The admin's external-IP CIDRs (EXTERNAL_IPS_ALLOWED_CIDRS), re-checked before one is served; unset: none is served. */
  readonly externalIPs?: ExternalIPPolicy;
  /** MultiNetworkPolicy: the labels file, named ports, the first sync's hold and the back end (policy-run.ts); unset: the defaults, nftables. */
  readonly policy?: Partial<Omit<PolicyOptions, 'podNamespace'>>;
  /** The source guard's mode (SOURCE_GUARD, the cluster admin's); unset: enforce. */
  readonly sourceGuard?: SourceGuardMode;
}

export interface RuntimeDeps {
  readonly client: KubeClient;
  readonly dataplane: DataplaneSync;
  readonly log: Logger;
  readonly metrics: SidecarMetrics;
  /** Writes an Event on the pod (cmd/sidecar/problems.ts); unset: problems are only logged and counted. */
  readonly event?: (s: Say) => void;
  /** Writes and lists the source guard where the pod's rules live (cmd/sidecar/source-guard.ts); unset (tests in another namespace): no guard. */
  readonly guard?: GuardTool;
}

export interface SidecarRuntime {
  /** Starts the informers; the sync loop starts once all of them have synced. */
  start(): void;
  /** Resolves after the first successful sync that followed the informers' sync. */
  readonly firstSync: Promise<void>;
  ready(): { ready: boolean; reason?: string };
  live(): boolean;
  /** Stops informers and the loop (waits for a running sync); does not touch the rules. */
  stop(): Promise<void>;
}

/** What a sync computes from: the pod's input, the Services, the slices of its networks. */
interface Inputs {
  readonly pod: PodInput;
  readonly services: { list(): V1Service[] };
  readonly slices: SliceWatch;
  readonly feed: StateFeed;
  readonly policy: PolicyPart;
}

function createLoop(options: RuntimeOptions, deps: RuntimeDeps, inputs: Inputs, say: (list: Say[]) => void, problems: ProblemState): SyncLoop {
  const { log } = deps;
  const logOnce = onceLogger(log);
  const reporter = new SyncReporter(deps.dataplane, log, logOnce);
  const { feed, pod } = inputs;
  const cap = new CapReporter(feed.maxServicesPerNetwork, { metrics: deps.metrics, log, say });
  // While the back end refuses the pod's policy, the process's first sync writes nothing: a switch
  // from nftables would otherwise remove the policy rules the last run left (policy-run.ts).
  let written = false;
  const guard = deps.guard === undefined ? undefined : new SourceGuard({ tool: deps.guard, log, mode: options.sourceGuard ?? 'enforce', restored: (ok) => deps.metrics.sourceGuardRestored(ok) });
  return createSyncLoop(options, {
    compute: () => {
      const out = feed.compute({ served: pod.served, interfaces: podInterfaces(pod.served, pod.status), services: () => inputs.services.list(), slices: () => inputs.slices.list() });
      cap.served(pod.served.map(networkKey));
      if (out.over !== undefined) cap.over(out.over);
      if (out.refused !== undefined) cap.refused(out.refused);
      logOnce(
        'state',
        out.problems.map((p) => ({ level: 'warn', msg: p })),
      );
      return inputs.policy.withPolicy(out.state, pod.status, logOnce);
    },
    apply: async (state, opts) => {
      await guard?.apply(pod.status);
      if (!written && inputs.policy.notReady() !== undefined) return { changed: false };
      written = true;
      return reporter.syncAndWait(state, opts);
    },
    // A new compiled policy is a change (withPodPolicy); sameState compares the Services' part.
    same: (a: DesiredState, b: DesiredState) => written && guard?.current(pod.status) !== false && a.policy === b.policy && sameState(a, b),
    size: stateSize,
    // The guard is checked on the same cadence, and written again on its own: its drift needs no
    // full rewrite of the Services and policy rules.
    checkDrift: async (o) => {
      await guard?.repair();
      return deps.dataplane.checkDrift(o);
    },
    metrics: deps.metrics,
    log,
    onOutcome: (error, failures) => say(problems.sync(error, failures, Date.now())),
  });
}

/** The runtime's state between start and stop: what has synced, and the parts that stop together. */
class Runtime implements SidecarRuntime {
  informersSynced = false;
  private stopped = false;
  private holding = false;
  readonly firstSync: Promise<void>;

  constructor(
    private readonly options: RuntimeOptions,
    private readonly log: Logger,
    private readonly pods: PodSource,
    private readonly services: { start(): void; stop(): void; readonly synced: Promise<void> },
    private readonly slices: SliceWatch,
    private readonly loop: SyncLoop,
    private readonly policy: PolicyPart,
    private readonly podStatus: () => PodInput['status'],
  ) {
    this.firstSync = loop.firstSync;
  }

  start(): void {
    this.pods.start();
    this.services.start();
    this.policy.start();
    void this.startLoopWhenSynced();
  }

  private async startLoopWhenSynced(): Promise<void> {
    const { options, log } = this;
    await Promise.all([this.pods.synced, this.services.synced, this.policy.labelsRead]);
    if (!this.pods.found())
      log.warn(
        { pod: `${options.podNamespace}/${options.podName}`, ...(options.annotationsFile !== undefined ? { file: options.annotationsFile } : {}) },
        'own pod not found; serving nothing until it appears',
      );
    await this.slices.settled();
    if (this.stopped) return;
    this.holding = true;
    await this.policy.hold(this.podStatus);
    this.holding = false;
    if (this.stopped) return;
    this.informersSynced = true;
    log.info('caches synced; starting rule sync');
    this.loop.start();
  }

  ready(): { ready: boolean; reason?: string } {
    if (this.holding) return { ready: false, reason: 'waiting for the address groups of the MultiNetworkPolicies that select this pod' };
    if (!this.informersSynced) return { ready: false, reason: 'waiting for the Kubernetes caches to sync' };
    if (!this.loop.synced()) return { ready: false, reason: 'waiting for the first rule sync' };
    const refused = this.policy.notReady();
    if (refused !== undefined) return { ready: false, reason: refused };
    return { ready: true };
  }

  live(): boolean {
    return this.loop.live();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.pods.stop();
    this.services.stop();
    this.slices.stop();
    this.policy.stop();
    await this.loop.stop();
  }
}

export function createSidecarRuntime(options: RuntimeOptions, deps: RuntimeDeps): SidecarRuntime {
  const { client, log } = deps;
  const startedMs = Date.now();
  const informerOpts = (name: string): Partial<InformerOptions> => ({ ...options.informer, logger: log, name });
  // What the pod's owner is told while the input is bad or a sync fails (cmd/sidecar/problems.ts).
  const problems = new ProblemState(PROBLEM_REPEAT_MS);
  const say = (list: Say[]): void => {
    for (const s of list) deps.event?.(s);
  };
  // The informers' events since the last sync: a sync redoes only the Services whose objects changed.
  const feed = new StateFeed(options.maxServicesPerNetwork ?? DEFAULT_MAX_SERVICES_PER_NETWORK, options.podNamespace, options.nodeName ?? '', options.nodeZone ?? '', options.externalIPs);
  const pod = new PodInput(log, (key, error) => {
    say(problems.input(key, error));
    deps.metrics.invalidAnnotation(key, problems.invalid(key));
  });
  const slices = new SliceWatch({
    client,
    log,
    informerOptions: informerOpts,
    onChange: (slice, change, informerSynced) => {
      if (change !== undefined) feed.slice(change.before, change.after);
      // Only changes after start-up measure programming latency; the initial list measures start-up.
      if (runtime.informersSynced || informerSynced) {
        const trigger = sliceTriggerMs(slice);
        loop.noteSliceChange(objectKey(slice), Date.now(), trigger !== undefined && trigger >= startedMs ? trigger : undefined);
      }
      loop.markDirty();
    },
    onReplaced: () => {
      feed.slicesReplaced();
      loop.markDirty();
    },
  });
  const services = createInformer<V1Service>(client, { ...informerOpts('services'), path: apiPath('', 'v1', 'services'), labelSelector: `${PROXY_NAME_LABEL}=${PROXY_NAME}`, transform: slimService });
  const policy = new PolicyPart(
    { policyHoldMs: DEFAULT_POLICY_HOLD_MS, backendKind: 'nftables', ...options.policy, podNamespace: options.podNamespace },
    {
      client,
      log,
      metrics: deps.metrics,
      informerOptions: informerOpts,
      say,
      markDirty: () => loop.markDirty(),
      groupProblem: (slice, problem) => {
        const told = problems.group(slice, problem);
        for (const t of told) log.warn({ slice, problem }, t.message);
        say(told);
        deps.metrics.invalidGroupAnnotations(problems.invalidGroups());
      },
    },
  );
  const loop = createLoop(options, deps, { pod, services, slices, feed, policy }, say, problems);
  const pods = podSource(options, client, log, informerOpts('pod'), (p) => {
    pod.read(p);
    slices.follow(networkLabelValues(pod.served));
    loop.markDirty();
  });
  const serviceChange = (before: V1Service | undefined, after: V1Service | undefined): void => {
    feed.service(before, after);
    loop.markDirty();
  };
  services.on({ add: (s) => serviceChange(undefined, s), update: (s, old) => serviceChange(old, s), delete: (_s, stored) => serviceChange(stored, undefined) });
  const runtime = new Runtime(options, log, pods, services, slices, loop, policy, () => pod.status);
  return runtime;
}
