/**
 * The dataplane's public entry for the programs (the sidecar, the node agent): make a dataplane,
 * schedule its syncs, build the desired state and report. A program imports from here (and, for
 * one that renders rules of its own, from node.ts), never from the packages inside (README.md).
 */
export { createDataplane, createDataplaneFor, kernelHasIPv6, type ProgramStages } from './create.js';
export type { DataplaneOptions } from './core/options.js';
export type { CleanupResult, Dataplane, SyncResult } from './core/pipeline.js';
export type { BackendCleanup, BackendFlavor, BackendKind, Stage, WriteReport } from './core/seam.js';
export { BACKENDS } from './registry.js';
export { chooseBackendAtStart } from './backend-start.js';
export { chooseRuleBackend, NftablesUnsupportedError, type BackendChoice } from './backend-choice.js';
export { createSyncLoop, sliceTriggerMs, type ApplyReport, type SyncLoop, type SyncLoopDeps, type SyncLoopOptions } from './core/scheduler.js';
export { createSyncMetrics, type SyncKind, type SyncMetrics } from './core/sync-metrics.js';
export { buildDesiredState, render, RenderCache, StateMemo } from './core/incremental.js';
export {
  DEFAULT_AFFINITY_TIMEOUT_SECONDS,
  networkLabelValues,
  podInterfaces,
  readNetworkStatus,
  readServedNetworks,
  sameState,
  sliceInfo,
  stateSize,
  type StateInput,
  type StateOutput,
} from './core/state.js';
export type { Change } from './core/engine.js';
export type { BackendEndpoint, ChosenEndpoint, DesiredState, IpFamily, PodInterface, Protocol, Rendered, Resolution, ResolvedTarget, Route, ServicePortTarget, SkippedTarget } from './core/model.js';
export { DEFAULT_NFNL_BATCH } from './nftables/tuning/element-writer.js';
export { GUARD_TABLE, guardDrift, guardInterfaces, sourceGuardText, type GuardInterface } from './nftables/source-guard.js';
export { POLICY_COUNTER_TABLE, policyBackendRefusal, POLICY_BACKENDS, policyCapWarnings, policyDropCounters, policyRenderWarnings, withPodPolicy, type PolicyDropCounter } from './policy-support.js';
