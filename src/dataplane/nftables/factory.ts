/**
 * The nftables back end's entry in the registry (../registry.ts), with the latency tunings only it
 * has, started when the dataplane is made: the spare `nft -f -`, the first sync's reads and route
 * batch, the element writer, and the render warm-up (tuning/).
 */
import type { BackendFactory, Leftovers, Stage } from '../core/seam.js';
import { ROUTE_BATCH_ARGS } from '../core/routes.js';
import { firstSyncReads } from '../tuning/read-ahead.js';
import { createNftBackend } from './backend.js';
import type { NftRuleset } from './render.js';
import { createElementWriter, type ElementWriterHandle } from './tuning/element-writer.js';
import { warmUpDue, warmUpRender } from './tuning/warm-up.js';

export const nftablesFactory: BackendFactory = {
  make(ctx, stage) {
    const { exec, options: opts } = ctx;
    // The first sync's reads, started while the program's informers list (read-ahead.ts).
    exec.ahead(firstSyncReads({ asked: opts.readAhead === true, rules: 'nftables', routeProto: ctx.layout.routeProto }));
    // Its first sync writes the whole table with `nft -f -`: with spares, that process starts now
    // too, so the sync writes into a waiting one (nft reads its whole input before anything else).
    exec.startSpare('nft', ['-f', '-']);
    // And, where the first sync's reads start ahead (the sidecar), its route batch: at a first
    // start one line per cluster IP beside the write, whose spawn (10-40 ms from a process holding
    // 10,000 Services' render) blocked this process while nft still waited for its input.
    if (opts.readAhead === true && opts.spareRestore === true) exec.startSpare('ip', ROUTE_BATCH_ARGS, true);
    // The element writer starts now, while the informers list: a first sync into an empty
    // namespace sends its elements through it (tuning/first-fill.ts), so its probe and spare process
    // (two spawns) must be done before that sync, not in the middle of it.
    const binary = opts.elementWriter;
    const elementWriter: Promise<ElementWriterHandle | undefined> | undefined =
      binary === false ? undefined : createElementWriter({ binary, netns: opts.netns, logger: ctx.logger }).catch(() => undefined);
    return createNftBackend(exec, ctx.layout.nftTable, {
      elementWriter,
      logger: ctx.logger,
      maxEndpointMaps: opts.maxEndpointMaps,
      portsPerShard: opts.nftPortsPerShard,
      stage: stage as Stage<NftRuleset> | undefined,
    });
  },
  leftovers: (ctx): readonly Leftovers[] => [createNftBackend(ctx.exec, ctx.layout.nftTable)],
  warmUp(ctx) {
    const opts = ctx.options;
    if (!warmUpDue({ asked: opts.warmUp === true, rules: 'nftables' })) return undefined;
    return () => {
      warmUpRender({ maxEndpointMaps: opts.maxEndpointMaps, portsPerShard: opts.nftPortsPerShard });
      opts.onWarmedUp?.();
    };
  },
};
