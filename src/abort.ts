/**
 * A signal that aborts when any of several does, for one operation, unhooked from them when the
 * operation ends. `AbortSignal.any` would do the first half, but it registers every result in each
 * source: on Node 20 each call leaves a WeakRef in every source's set for as long as the source
 * lives (nodejs/node#55351). The controller combines its lifetime signal with a deadline at every
 * lease renew (every 2 s) and with the fence at every write, so its heap grew for as long as it
 * ran (B12 in docs/benchmarks.md). Listeners removed in `release()` leave nothing behind.
 */
export interface LinkedSignal {
  readonly signal: AbortSignal;
  /** Removes the listeners from the sources; call it when the operation is over. */
  release(): void;
}

export function linkSignals(sources: readonly AbortSignal[]): LinkedSignal {
  const ctl = new AbortController();
  const hooked: { source: AbortSignal; fn: () => void }[] = [];
  const release = (): void => {
    for (const { source, fn } of hooked.splice(0)) source.removeEventListener('abort', fn);
  };
  for (const source of sources) {
    if (source.aborted) {
      release();
      ctl.abort(source.reason);
      break;
    }
    const fn = (): void => {
      release();
      ctl.abort(source.reason);
    };
    source.addEventListener('abort', fn, { once: true });
    hooked.push({ source, fn });
  }
  return { signal: ctl.signal, release };
}

/** Runs `op` with a signal linked to `sources` and unhooks it when `op` settles. */
export async function withLinkedSignal<T>(sources: readonly AbortSignal[], op: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const linked = linkSignals(sources);
  try {
    return await op(linked.signal);
  } finally {
    linked.release();
  }
}
