/**
 * A dataplane whose first sync's code is warmed up while the program's informers list
 * (docs/decisions/0026-first-sync-fills-maps-over-netlink.md): create.ts
 * wraps the nftables dataplane in it where DataplaneOptions.warmUp asks.
 */
import type { Logger } from '../../log.js';
import type { Dataplane } from '../core/pipeline.js';

/**
 * Runs `warm` (nftables/tuning/warm-up.ts: CPU only, no command) on the next turn of the event loop, while the
 * program's informers list, unless a sync has started by then: a warm-up never delays a real sync.
 */
export function withWarmUp<S>(dp: Dataplane<S>, warm: () => unknown, logger?: Logger): Dataplane<S> {
  let due = true;
  const timer = setImmediate(() => {
    if (!due) return;
    due = false;
    try {
      warm();
    } catch (e) {
      // Only a bug can land here; the real sync renders on its own either way.
      logger?.warn({ err: e }, 'dataplane warm-up failed');
    }
  });
  return {
    ...dp,
    sync: (state, o) => {
      due = false;
      clearImmediate(timer);
      return dp.sync(state, o);
    },
    close: () => {
      due = false;
      clearImmediate(timer);
      dp.close();
    },
  };
}
