/**
 * How a program asks for its dataplane (../create.ts): which back end, where it runs, and the
 * latency tunings it wants. Each back end reads the fields it knows (BackendFactory, seam.ts).
 */
import type { Logger } from '../../log.js';
import type { Layout } from './names.js';
import type { RuleBackendChoice } from '../../sidecar-contract.js';

/** Which rule back end a dataplane writes with: a key of the registry (both programs' `--backend`). */
export type BackendKind = Exclude<RuleBackendChoice, 'auto'>;

/** The tool a dataplane reports writing with (metrics, logs): iptables' flavour ('nft' | 'legacy'), or 'nftables'. */
export type BackendFlavor = 'nft' | 'legacy' | 'nftables';

export interface DataplaneOptions {
  /**
   * Which rule back end writes the rules: iptables (also for auto or unset) or nftables. The
   * programs resolve auto before this, with a probe (backend-choice.ts: nftables where its table
   * loads); this synchronous constructor does not probe. Whichever runs, its first sync removes
   * what the other one left (switching back ends on a running pod).
   */
  readonly backendKind?: BackendKind | 'auto';
  /** iptables' flavour. 'auto' (default): legacy only if the namespace already has legacy rules, else nft. */
  readonly iptablesFlavor?: Exclude<BackendFlavor, 'nftables'> | 'auto';
  /** Test hook: run every command under `ip netns exec <netns>`. Production leaves it unset. */
  readonly netns?: string;
  /** Test hook: called when this dataplane's render warm-up (nftables/tuning/warm-up.ts) has run. Production leaves it unset. */
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
   * Keep a spare restore process started ahead (per family for iptables' nft flavour; `nft -f -`
   * for nftables; tuning/spare-exec.ts), so a change skips a process start. For long-running
   * programs; close() lets the spares go.
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
   * Start the first sync's reads when the dataplane is made (tuning/read-ahead.ts firstSyncReads:
   * with nftables only). For a program whose first sync follows while it lists its informers: the
   * sidecar's run mode. Default false: the node agent and `--cleanup` read when they need to.
   */
  readonly readAhead?: boolean;
  /**
   * Warm the first sync's render up while the program's informers list (nftables/tuning/warm-up.ts
   * warmUpDue: with nftables only), since that list leaves the process idle. The sidecar's run mode
   * asks, as for readAhead; its own option so a bench or test can have one without the other. Default false.
   */
  readonly warmUp?: boolean;
  /** nftables: the Service ports per table before the sidecar's table spreads over shard tables (default PORTS_PER_SHARD, nftables/tuning/shards.ts; Infinity: one table). */
  readonly nftPortsPerShard?: number;
}
