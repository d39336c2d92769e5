/**
 * The dataplane a program makes: `createDataplane` (the sidecar's state) or `createDataplaneFor`
 * (any program's, with its own renderer: the node agent) chooses the rule back end from the
 * options, starts what the first sync will want early (its reads, spare processes; the element
 * writer after it; the render warm-up where asked) and hands the parts to the apply loop
 * (apply-loop.ts), which runs every sync, drift check and cleanup.
 */
import { existsSync } from 'node:fs';
import type { Logger } from '../log.js';
import type { DesiredState, IpFamily, Rendered } from './core/model.js';
import { SIDECAR_LAYOUT, type Layout } from './core/names.js';
import { render, RenderCache } from './core/incremental.js';
import { createExec, spareWorthy, type Backend } from './iptables/io.js';
import type { RuleBackendKind } from './core/seam.js';
import { createNftBackend } from './nftables/backend.js';
import { createElementWriter, type ElementWriterHandle } from './nftables/tuning/element-writer.js';
import { warmUpDue, warmUpRender } from './nftables/tuning/warm-up.js';
import { createIptablesBackend } from './iptables/backend.js';
import { fileReader } from './iptables/tables-present.js';
import { firstSyncReads, readAheadExec } from './tuning/read-ahead.js';
import { ROUTE_BATCH_ARGS } from './core/routes.js';
import { applyLoop, type Dataplane } from './core/pipeline.js';
import { withWarmUp } from './tuning/with-warm-up.js';

export interface DataplaneOptions {
  /**
   * Which rule back end writes the rules: iptables (also for auto or unset) or nftables. The
   * programs resolve auto before this, with a probe (backend-choice.ts: nftables where its table
   * loads); this synchronous constructor does not probe. Whichever runs, its first sync removes
   * what the other one left (switching back ends on a running pod).
   */
  readonly rules?: RuleBackendKind | 'auto';
  /** 'auto' (default): legacy only if the namespace already has legacy rules, else nft. */
  readonly backend?: Backend | 'auto';
  /** Test hook: run every command under `ip netns exec <netns>`. Production leaves it unset. */
  readonly netns?: string;
  /** Test hook: called when this dataplane's render warm-up (nft/warm-up.ts) has run. Production leaves it unset. */
  readonly onWarmedUp?: () => void;
  readonly logger?: Logger;
  /**
   * Whether to program IPv6. Default: whether the kernel has IPv6 at all (/proc/net/if_inet6). On
   * a kernel booted with ipv6.disable=1 every ip6tables-restore fails, and such a pod can have no
   * IPv6 Service anyway, so the family is left out instead of failing every sync.
   */
  readonly ipv6?: boolean;
  /** Where the rules live (default: the sidecar's, nat and filter OUTPUT with prefix MPX-). */
  readonly layout?: Layout;
  /**
   * Keep a spare restore process started ahead (per family for iptables' nft back end; `nft -f -`
   * for nftables; iptables.ts), so a change skips a process start. For long-running programs;
   * close() lets the spares go.
   */
  readonly spareRestore?: boolean;
  /**
   * nftables: endpoint-only changes (endpoint-map refills) go through nfnl-batch at this path
   * (default DEFAULT_NFNL_BATCH, where the image puts it) when its start-up probe passes, else,
   * logged once, through `nft -f` as every other change. false: always `nft -f`.
   */
  readonly elementWriter?: string | false;
  /** nftables: the Service ports up to which the sidecar's table picks through endpoint maps (default MAX_ENDPOINT_MAPS). */
  readonly maxEndpointMaps?: number;
  /**
   * Start the first sync's reads when the dataplane is made (read-ahead.ts firstSyncReads: with
   * nftables only). For a program whose first sync follows while it lists its informers: the
   * sidecar's run mode. Default false: the node agent and `--cleanup` read when they need to.
   */
  readonly readAhead?: boolean;
  /**
   * Warm the first sync's render up while the program's informers list (nft/warm-up.ts warmUpDue:
   * with nftables only), since that list leaves the process idle. The sidecar's run mode asks, as
   * for readAhead; its own option so a bench or test can have one without the other. Default false.
   */
  readonly warmUp?: boolean;
  /** nftables: the Service ports per table before the sidecar's table spreads over shard tables (default PORTS_PER_SHARD, src/dataplane/nft/shards.ts; Infinity: one table). */
  readonly nftPortsPerShard?: number;
}

export function kernelHasIPv6(): boolean {
  return existsSync('/proc/net/if_inet6');
}

export type { FamilySync } from './core/seam.js';
// The loop's contract, for the programs that make a dataplane here.
export type { CleanupResult, Dataplane, SyncResult } from './core/pipeline.js';

export function createDataplane(opts: DataplaneOptions = {}): Dataplane {
  const cache = new RenderCache();
  return createDataplaneFor<DesiredState>(opts, (state) => render(state, cache));
}

/**
 * The same apply loop for any program's state: `renderState` turns it into rulesets, routes and
 * resolved targets (the node agent renders NodePorts and the node's cluster-IP access this way).
 */
export function createDataplaneFor<S>(opts: DataplaneOptions, renderState: (state: S) => Rendered): Dataplane<S> {
  const layout = opts.layout ?? SIDECAR_LAYOUT;
  const exec = readAheadExec(createExec(opts.netns, opts.spareRestore === true ? spareWorthy : undefined));
  const kind: RuleBackendKind = opts.rules === 'nftables' ? 'nftables' : 'iptables';
  // The first sync's reads, started while the program's informers list (read-ahead.ts).
  exec.ahead(firstSyncReads({ asked: opts.readAhead === true, rules: kind, routeProto: layout.routeProto }));
  const families: readonly IpFamily[] = (opts.ipv6 ?? kernelHasIPv6()) ? [4, 6] : [4];
  // The sidecar reads its namespace's /proc/net files itself; the test hook's namespace through `cat`.
  const readFile = fileReader(opts.netns === undefined ? undefined : exec);
  const iptables = (flavor: Backend | 'auto'): ReturnType<typeof createIptablesBackend> => createIptablesBackend(exec, { flavor, families, layout, readFile });
  const parts = { exec, families, routeProto: layout.routeProto, logger: opts.logger };
  if (kind === 'nftables') {
    // Its first sync writes the whole table with `nft -f -`: with spares, that process starts now
    // too, so the sync writes into a waiting one (nft reads its whole input before anything else).
    exec.startSpare('nft', ['-f', '-']);
    // And, where the first sync's reads start ahead (the sidecar), its route batch: at a first
    // start one line per cluster IP beside the write, whose spawn (10-40 ms from a process holding
    // 10,000 Services' render) blocked this process while nft still waited for its input.
    if (opts.readAhead === true && opts.spareRestore === true) exec.startSpare('ip', ROUTE_BATCH_ARGS, true);
    // The element writer starts now, while the informers list: a first sync into an empty
    // namespace sends its elements through it (nft/first-fill.ts), so its probe and spare process
    // (two spawns) must be done before that sync, not in the middle of it.
    const binary = opts.elementWriter;
    const elementWriter: Promise<ElementWriterHandle | undefined> | undefined =
      binary === false ? undefined : createElementWriter({ binary, netns: opts.netns, logger: opts.logger }).catch(() => undefined);
    const loop = applyLoop({ ...parts, rules: createNftBackend(exec, layout.nftTable, { elementWriter, logger: opts.logger, maxEndpointMaps: opts.maxEndpointMaps, portsPerShard: opts.nftPortsPerShard }), others: [iptables('nft'), iptables('legacy')] }, renderState);
    if (!warmUpDue({ asked: opts.warmUp === true, rules: kind })) return loop;
    const warm = (): void => {
      warmUpRender({ maxEndpointMaps: opts.maxEndpointMaps, portsPerShard: opts.nftPortsPerShard });
      opts.onWarmedUp?.();
    };
    return withWarmUp(loop, warm, opts.logger);
  }
  return applyLoop({ ...parts, rules: iptables(opts.backend ?? 'auto'), others: [createNftBackend(exec, layout.nftTable)] }, renderState);
}
