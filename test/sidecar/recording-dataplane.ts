/** A dataplane for in-process runtime tests: it records the states it is given and reports success. */
import type { DesiredState } from '../../src/dataplane/core/model.js';
import type { DataplaneSync } from '../../cmd/sidecar/runtime.js';

export function recordingDataplane(states: DesiredState[]): DataplaneSync {
  return {
    sync: (state, opts) => {
      states.push(state);
      return Promise.resolve({
        full: opts.full,
        changed: true,
        backend: 'nft',
        families: [],
        routesReplaced: 0,
        routesRemoved: 0,
        conntrackFlushes: 0,
        skipped: [],
        warnings: [],
        durationMs: 0,
        phases: { renderMs: 0, readMs: 0, routesMs: 0, restoreMs: 0, conntrackMs: 0 },
        rules: 0,
        served: { ready: 0, terminating: 0, none: 0 },
      });
    },
    checkDrift: () => Promise.resolve(undefined),
  };
}
